//! A bounded child-process runner: deadline, cancellation, output caps.
//!
//! Every external tool Trellis runs goes through [`run_bounded`]. It drains
//! stdout and stderr concurrently, keeps at most a fixed number of bytes of
//! each and *keeps draining* past the cap, so a chatty tool can neither
//! deadlock on a full pipe nor exhaust memory (PSP-10 erratum 26). On timeout
//! or cancellation it kills the child's whole process group, because `cargo`
//! spawns `rustc` and test binaries that would otherwise outlive it, and
//! reaps the child before returning.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::mirror::Mirror;
use super::sandbox::{Sandbox, SandboxError, Tmp};

/// Bytes of each stream retained by default (2 MiB).
pub const DEFAULT_OUTPUT_CAP: usize = 2 * 1024 * 1024;

/// How long a process may run and how much of its output is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Wall-clock budget from spawn until exit and end of both streams.
    pub deadline: Duration,
    /// Bytes of stdout retained; the rest is read and discarded.
    pub stdout_cap: usize,
    /// Bytes of stderr retained; the rest is read and discarded.
    pub stderr_cap: usize,
}

impl ProcessLimits {
    /// The given deadline with the default 2 MiB caps.
    pub fn with_deadline(deadline: Duration) -> Self {
        Self {
            deadline,
            stdout_cap: DEFAULT_OUTPUT_CAP,
            stderr_cap: DEFAULT_OUTPUT_CAP,
        }
    }
}

impl Default for ProcessLimits {
    /// Five minutes, 2 MiB per stream.
    fn default() -> Self {
        Self::with_deadline(Duration::from_secs(300))
    }
}

/// What a process that ran to completion produced.
#[derive(Clone, Debug)]
pub struct ProcessOutput {
    pub status: ExitStatus,
    /// The first `stdout_cap` bytes of stdout.
    pub stdout: Vec<u8>,
    /// The first `stderr_cap` bytes of stderr.
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub elapsed: Duration,
}

impl ProcessOutput {
    /// True when either stream exceeded its cap.
    pub fn truncated(&self) -> bool {
        self.stdout_truncated || self.stderr_truncated
    }
}

/// Whose code a process runs, and so whether it is sandboxed.
#[derive(Clone, Copy, Debug)]
pub enum Confinement<'a> {
    /// A tool asked about itself or the user's own workspace (a version
    /// probe, `cargo locate-project`): it runs none of a slot's code.
    Unconfined,
    /// Runs in a slot, in this sandbox, built at the workspace's paths
    /// when a mirror is given.
    Slot(&'a Sandbox, Option<&'a Mirror>),
}

/// Why a process produced no [`ProcessOutput`].
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("could not start `{program}`: {source}")]
    Launch {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` timed out after {}", format_duration(*after))]
    Timeout { program: String, after: Duration },
    #[error("`{program}` was cancelled")]
    Cancelled { program: String },
    #[error("`{program}` was not started: {source}")]
    Sandbox {
        program: String,
        #[source]
        source: SandboxError,
    },
}

/// `300s`, `2.5s`: the form used in timeout messages.
pub fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

/// Runs a tool's version probe `cmd` (shown to the user as `shown`) within
/// `limits`: its output, or a reason that names what is missing and, for a
/// program that is not installed, `remedy` (how to get it).
pub async fn probe(
    cmd: Command,
    shown: &str,
    limits: &ProcessLimits,
    remedy: &str,
) -> Result<ProcessOutput, String> {
    let output = run_bounded(
        cmd,
        Confinement::Unconfined,
        limits,
        &CancellationToken::new(),
    )
    .await
    .map_err(|error| match error {
        ProcessError::Launch { program, source }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            format!("`{program}` was not found{remedy}")
        }
        error => format!("`{shown}` failed: {error}"),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = match stderr.trim() {
            "" => String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            said => said.to_owned(),
        };
        return Err(format!("`{shown}` exited with {}: {said}", output.status));
    }
    Ok(output)
}

/// Run `cmd` to completion within `limits`, or kill it, confined as
/// `confinement` says.
///
/// Stdin is closed, stdout and stderr are piped and drained concurrently.
/// The child runs in its own process group; on timeout or cancellation the
/// whole group is killed and the child is reaped before the error returns.
/// The deadline covers both the exit and the end of both streams, so a
/// grandchild that keeps a pipe open cannot stall the caller either. Nothing
/// of the group outlives the call: whatever is left of it when the call
/// returns, or when its future is dropped, is killed.
pub async fn run_bounded(
    cmd: Command,
    confinement: Confinement<'_>,
    limits: &ProcessLimits,
    cancel: &CancellationToken,
) -> Result<ProcessOutput, ProcessError> {
    run_bounded_reading(cmd, confinement, Stdio::null(), limits, cancel).await
}

/// [`run_bounded`] with `input` (a file of requests, read to its end) as
/// the child's standard input instead of a closed one: for a tool that
/// answers requests until its input ends, such as `tsserver`.
pub async fn run_bounded_with_input(
    cmd: Command,
    confinement: Confinement<'_>,
    input: std::fs::File,
    limits: &ProcessLimits,
    cancel: &CancellationToken,
) -> Result<ProcessOutput, ProcessError> {
    run_bounded_reading(cmd, confinement, Stdio::from(input), limits, cancel).await
}

/// Confines `cmd` as `confinement` says, then puts it under the
/// supervisor: the sandbox is entered first, so the supervisor and
/// everything the tool starts are inside it. The process's temporary
/// directory, if it has one, lives as long as what is returned.
fn prepare(
    cmd: &mut Command,
    confinement: Confinement<'_>,
    program: &str,
) -> Result<Option<Tmp>, ProcessError> {
    let tmp = match confinement {
        Confinement::Unconfined => None,
        Confinement::Slot(sandbox, mirror) => Some(
            sandbox
                .install(cmd.as_std_mut(), mirror)
                .map_err(|source| ProcessError::Sandbox {
                    program: program.to_owned(),
                    source,
                })?,
        ),
    };
    #[cfg(unix)]
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    super::supervisor::install(cmd);
    Ok(tmp)
}

async fn run_bounded_reading(
    mut cmd: Command,
    confinement: Confinement<'_>,
    stdin: Stdio,
    limits: &ProcessLimits,
    cancel: &CancellationToken,
) -> Result<ProcessOutput, ProcessError> {
    let program = program_name(&cmd);
    let first_argument = cmd.as_std().get_args().next().map(OsString::from);
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Removed when this returns, after the group is gone.
    let _tmp = prepare(&mut cmd, confinement, &program)?;

    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| ProcessError::Launch {
        program: program.clone(),
        source,
    })?;
    // Armed from spawn on, so the group dies however this function ends:
    // returned, timed out, or its future dropped by a superseding run.
    let group = GroupKiller::new(&child);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");

    let completion = async {
        let (stdout, stderr, status) = tokio::join!(
            drain_capped(stdout, limits.stdout_cap),
            drain_capped(stderr, limits.stderr_cap),
            child.wait(),
        );
        (stdout, stderr, status)
    };

    let interrupted = tokio::select! {
        biased;
        (stdout, stderr, status) = completion => {
            // A failed `wait` leaves nothing to report; treat it like a
            // launch failure so the caller sees the OS error.
            let status = status.map_err(|source| ProcessError::Launch {
                program: program.clone(),
                source,
            })?;
            tracing::debug!(
                %program,
                first_argument = ?first_argument,
                ?status,
                ms = started.elapsed().as_millis(),
                "tool ran"
            );
            return Ok(ProcessOutput {
                status,
                stdout: stdout.retained,
                stderr: stderr.retained,
                stdout_truncated: stdout.truncated,
                stderr_truncated: stderr.truncated,
                elapsed: started.elapsed(),
            });
        }
        () = cancel.cancelled() => ProcessError::Cancelled { program },
        () = tokio::time::sleep(limits.deadline) => ProcessError::Timeout {
            program,
            after: limits.deadline,
        },
    };
    group.kill();
    // Covers non-unix targets, then reaps the child so no zombie remains.
    let _ = child.start_kill();
    let _ = child.wait().await;
    Err(interrupted)
}

/// A child that is talked to while it runs (a language server asked for
/// code actions): the caller owns its stdin and stdout and bounds every
/// exchange itself; stderr is discarded. It runs in its own process group
/// under the supervisor like every other child, and dropping this kills
/// the group and reaps nothing left behind.
pub struct Interactive {
    pub stdin: tokio::process::ChildStdin,
    pub stdout: tokio::process::ChildStdout,
    // Declared after the pipes: they close before the group is killed.
    child: Child,
    _group: GroupKiller,
    // Last: removed once the group is gone.
    _tmp: Option<Tmp>,
}

impl Interactive {
    /// Starts `cmd` with piped stdin and stdout, confined as
    /// `confinement` says.
    pub fn spawn(mut cmd: Command, confinement: Confinement<'_>) -> Result<Self, ProcessError> {
        let program = program_name(&cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let tmp = prepare(&mut cmd, confinement, &program)?;
        let mut child = cmd
            .spawn()
            .map_err(|source| ProcessError::Launch { program, source })?;
        let group = GroupKiller::new(&child);
        Ok(Self {
            stdin: child.stdin.take().expect("stdin is piped"),
            stdout: child.stdout.take().expect("stdout is piped"),
            child,
            _group: group,
            _tmp: tmp,
        })
    }

    /// Waits at most `grace` for the child to exit on its own (after a
    /// polite shutdown); the group is killed either way when this is dropped.
    pub async fn finish(mut self, grace: Duration) {
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
    }
}

/// Process groups of children still running, for [`kill_all_groups`].
#[cfg(unix)]
static LIVE_GROUPS: std::sync::Mutex<std::collections::BTreeSet<libc::pid_t>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Kills the process group of every child [`run_bounded`] is running: what a
/// front end does when told to terminate, before it exits without waiting
/// for the runs to notice.
pub fn kill_all_groups() {
    #[cfg(unix)]
    for &pgid in LIVE_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Kills the child's process group (`cargo` and the `rustc`s and test
/// binaries it spawned) when dropped.
///
/// The group id is the child's pid, recorded at spawn: `Child::id` forgets it
/// once the child is reaped, yet a grandchild may still hold the group (and
/// our pipes) open. Killing an already empty group fails harmlessly with
/// ESRCH; pids are allocated cyclically, so the id cannot name another
/// process group moments after ours emptied.
struct GroupKiller {
    #[cfg(unix)]
    pgid: Option<libc::pid_t>,
}

impl GroupKiller {
    fn new(child: &Child) -> Self {
        #[cfg(not(unix))]
        let _ = child;
        #[cfg(unix)]
        let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        #[cfg(unix)]
        if let Some(pgid) = pgid {
            LIVE_GROUPS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(pgid);
        }
        Self {
            #[cfg(unix)]
            pgid,
        }
    }

    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg has no memory-safety preconditions.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            LIVE_GROUPS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&pgid);
        }
    }
}

fn program_name(cmd: &Command) -> String {
    let program: OsString = cmd.as_std().get_program().to_owned();
    program.to_string_lossy().into_owned()
}

struct Drained {
    retained: Vec<u8>,
    truncated: bool,
}

/// Read `reader` to its end, keeping the first `cap` bytes. A read error
/// ends the stream as if it had closed: what was read is still reported.
async fn drain_capped(mut reader: impl AsyncRead + Unpin, cap: usize) -> Drained {
    let mut retained = Vec::new();
    let mut truncated = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let room = cap.saturating_sub(retained.len());
        if read > room {
            truncated = true;
        }
        retained.extend_from_slice(&chunk[..read.min(room)]);
    }
    Drained {
        retained,
        truncated,
    }
}
