//! The sandbox of every process a slot runs: builds, tests, linters, type
//! checkers, language servers, re-runs and oracles (Linux).
//!
//! A slot holds code the user has not seen: a compiler's suggestion, a
//! tool's fix, or what a model wrote. Whatever that code does when it is
//! built or tested must stay in the slot. So each such process is confined
//! before it starts, by two mechanisms the kernel gives an unprivileged
//! process (so there is no setuid helper, and no mount per file: the
//! branch copy stays an eager copy):
//!
//! - **Landlock** ([`rules`]): the process reads and executes anywhere,
//!   but writes only beneath the slot, the slot's own target directory and
//!   a private temporary directory (`TMPDIR`), plus `/dev/null` and its
//!   kin. The user's workspace, their `target/`, `node_modules`,
//!   virtualenv and home stay read-only whatever path reaches them: a
//!   `node_modules/..` link, an absolute path, `$CARGO_MANIFEST_DIR/..`.
//!   Signals and abstract sockets cannot leave the sandbox, and nothing in
//!   it can mount, so it cannot undo any of this.
//! - **Namespaces** ([`namespace`]): a user namespace mapping the user to
//!   themselves, in which the private temporary directory is also seen at
//!   `/dev/shm`, the mirror's mounts are made (`sensor/mirror.rs`), and,
//!   for code a model wrote, a network namespace whose only interface is
//!   its own loopback (`[sandbox] network`).
//!
//! Shared files: Landlock confines paths, not inodes, so a file a slot
//! shares with the user by a hard link would be writable through the slot.
//! No slot has one: the seeding (`sensor/seed.rs`) links the user's
//! artifacts into a store beside the slots, which no sandbox may write,
//! and gives the slot a symbolic link to the store's name; a rebuild
//! replaces the link, and a write through it is refused.
//!
//! Where the kernel offers no Landlock ([`support`]), nothing is confined:
//! the seeding copies instead of linking, `trellis check --verbose` says
//! so, and a run of model-written code is refused unless `[sandbox]
//! require = false`.
//!
//! # Architecture invariant
//!
//! What a slot runs writes only the slot, tested by injecting each escape as
//! the code under measurement (`lsp/tests/it/sandbox.rs`,
//! `sensor::sandbox::tests`). Landlock confines paths, not inodes, so no slot
//! holds a hard link to a user's file
//! (`seed::tests::no_file_of_the_slot_is_a_hard_link_to_the_users`). Without
//! Landlock nothing is shared and model-written code is refused
//! (`sandbox::without_a_sandbox_model_code_is_refused_and_nothing_is_shared`,
//! `without_a_sandbox_slots_copy_the_users_artifacts_instead_of_linking_them`).

#[cfg(target_os = "linux")]
mod namespace;
#[cfg(target_os = "linux")]
mod rules;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::mirror::Mirror;

/// How much network a slot's process has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Its own loopback and nothing else: servers a test starts on
    /// 127.0.0.1 work, nothing outside the machine (or on it) is reached.
    #[default]
    Loopback,
    /// The machine's network, as the user's own runs have.
    Allow,
}

/// What a run asks of its sandbox: set per workspace (`[sandbox]`) and
/// per slot (whether it holds code a model wrote).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The network the run's processes get.
    pub network: Network,
    /// Refuse to run at all where the sandbox cannot confine the run.
    pub require: bool,
    /// The slot may hold code a model wrote: what its builds leave is
    /// never seeded into another slot.
    pub model_code: bool,
    /// Directories outside the slot the run may also write
    /// (`[sandbox] writable`), each existing and canonical.
    pub writable: Vec<PathBuf>,
    /// Files or directories of the user's workspace the run must not read
    /// (the verification oracle): in its mount namespace each is covered,
    /// a file by `/dev/null`, a directory by an empty one.
    pub hidden: Vec<PathBuf>,
}

impl Policy {
    /// Code from the user and their tools (the view, a compiler's fix):
    /// the machine's network, as the user's own run has, and a run without
    /// a sandbox where the system offers none (its slot then copies what
    /// it would have linked).
    pub const USER_CODE: Policy = Policy {
        network: Network::Allow,
        require: false,
        model_code: false,
        writable: Vec::new(),
        hidden: Vec::new(),
    };
}

/// What this system's kernel lets Trellis confine, probed once.
#[derive(Clone, Debug)]
pub struct Support {
    /// Landlock's file rules, or why they are not available.
    pub files: Result<(), String>,
    /// Unprivileged user namespaces (a private `/dev/shm`, a network of
    /// its own), or why not.
    pub namespaces: Result<(), String>,
}

impl Support {
    /// Whether a run's writes can be confined to its slot.
    pub fn confines_files(&self) -> bool {
        self.files.is_ok()
    }

    /// Whether a run can be kept off the network.
    pub fn confines_network(&self) -> bool {
        self.namespaces.is_ok()
    }

    /// One line for `trellis check --verbose` and `:checkhealth`.
    pub fn describe(&self) -> String {
        match (&self.files, &self.namespaces) {
            (Ok(()), Ok(())) => "on: a branch's builds and tests write only the branch, \
                                 and model-written code reaches only its own loopback"
                .to_owned(),
            (Ok(()), Err(why)) => format!(
                "files only: a branch's builds and tests write only the branch, \
                 but cannot be kept off the network ({why})"
            ),
            (Err(why), _) => format!(
                "off ({why}): a branch's builds and tests run with your rights; \
                 branches copy your build artifacts instead of linking them, and \
                 model-written code is not run unless `[sandbox] require = false`"
            ),
        }
    }
}

/// This system's [`Support`], probed on first use by confining a child
/// (blocks for it: call it off the async threads the first time).
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let found = probe();
        match (&found.files, &found.namespaces) {
            (Ok(()), Ok(())) => {}
            (Err(why), _) | (Ok(()), Err(why)) => tracing::info!(
                reason = %why,
                "{}",
                found.describe()
            ),
        }
        found
    })
}

/// Whether a run with `policy` may start here: refused when the policy
/// requires a sandbox that this system cannot give it.
pub fn admit(policy: &Policy) -> Result<(), SandboxError> {
    let support = support();
    let lacking = match (&support.files, policy.network, &support.namespaces) {
        (Err(why), _, _) | (Ok(()), Network::Loopback, Err(why)) => Some(why),
        _ => None,
    };
    match lacking.filter(|_| policy.require) {
        Some(why) => Err(SandboxError::Required(why.clone())),
        None => Ok(()),
    }
}

/// Why a run was not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The policy requires a sandbox this system cannot give.
    #[error(
        "refused to run model-written code without a sandbox: {0}; \
         set `[sandbox] require = false` in trellis.toml to run it with your rights"
    )]
    Required(String),
    /// The sandbox of this run could not be prepared.
    #[error("the sandbox could not be prepared: {0}")]
    Prepare(String),
}

/// One run's sandbox: where it may write, where its processes' private
/// temporary directories go, and its policy.
#[derive(Clone, Debug)]
pub struct Sandbox {
    slot: PathBuf,
    target: PathBuf,
    tmp: PathBuf,
    policy: Policy,
}

impl Sandbox {
    /// The sandbox of a run in the slot `slot` whose own target directory
    /// is `target`; each of its processes gets a private temporary
    /// directory of its own below `tmp`, removed when the process ends.
    pub fn new(slot: &Path, target: &Path, tmp: &Path, policy: Policy) -> Self {
        Self {
            slot: slot.to_path_buf(),
            target: target.to_path_buf(),
            tmp: tmp.to_path_buf(),
            policy,
        }
    }

    /// Confines `cmd` (with `mirror`'s mounts, when it builds at the
    /// workspace's paths): its writes, its temporary directory, its
    /// network. Where the system cannot confine what the policy asks, a run
    /// the policy requires confined is refused, and any other runs with
    /// what there is: its private temporary directory all the same. The
    /// directory lives as long as the returned [`Tmp`]: the caller keeps it
    /// until the process and everything it started have ended.
    pub fn install(
        &self,
        cmd: &mut std::process::Command,
        mirror: Option<&Mirror>,
    ) -> Result<Tmp, SandboxError> {
        admit(&self.policy)?;
        let prepare = |dir: &Path, made: io::Result<()>| {
            made.map_err(|e| SandboxError::Prepare(format!("{}: {e}", dir.display())))
        };
        // The tool may expect to make it; writable, it must exist first.
        prepare(&self.target, std::fs::create_dir_all(&self.target))?;
        let tmp = Tmp::new(&self.tmp)
            .map_err(|e| SandboxError::Prepare(format!("{}: {e}", self.tmp.display())))?;
        let shm = tmp.0.join("shm");
        prepare(&shm, std::fs::create_dir(&shm))?;
        let mut covers = Vec::new();
        for (i, hidden) in self.policy.hidden.iter().enumerate() {
            let cover = if hidden.is_dir() {
                let empty = tmp.0.join(format!("hidden-{i}"));
                prepare(&empty, std::fs::create_dir(&empty))?;
                empty
            } else {
                PathBuf::from("/dev/null")
            };
            covers.push((cover, hidden.clone()));
        }
        cmd.env("TMPDIR", &tmp.0);
        self.confine(cmd, mirror, &tmp.0, &shm, &covers)?;
        Ok(tmp)
    }

    /// [`Sandbox::install`]'s part that only Linux has: the namespaces and
    /// the file rules, entered in the child before it execs.
    #[cfg(target_os = "linux")]
    fn confine(
        &self,
        cmd: &mut std::process::Command,
        mirror: Option<&Mirror>,
        tmp: &Path,
        shm: &Path,
        covers: &[(PathBuf, PathBuf)],
    ) -> Result<(), SandboxError> {
        let support = support();
        if !covers.is_empty() && !support.confines_network() {
            // Without a mount namespace the oracle would be readable.
            return Err(SandboxError::Prepare(
                "hiding the verification oracle needs a mount namespace".to_owned(),
            ));
        }
        let confined = support.confines_files();
        if mirror.is_some() && !support.confines_network() {
            // Told the user's target directory, cargo would write there.
            return Err(SandboxError::Prepare(
                "a build at the workspace's paths needs a mount namespace".to_owned(),
            ));
        }
        let namespaces = support.confines_network().then(|| {
            namespace::Prepared::new(
                mirror,
                self.policy.network == Network::Loopback,
                // Without file rules `/dev/shm` is writable anyway.
                confined.then_some(shm),
                covers,
            )
        });
        let namespaces = namespaces
            .flatten()
            .map(|n| n.failing_when(mirror.is_some() && crate::failpoint::fails("mirror-enter")));
        let mut rules = if confined {
            // `shm` too: seen at `/dev/shm`, its path there is not below `tmp`.
            let own = [self.slot.as_path(), &self.target, tmp, shm];
            let writable: Vec<&Path> = own
                .into_iter()
                .chain(self.policy.writable.iter().map(PathBuf::as_path))
                .collect();
            Some(rules::ruleset(&writable).map_err(SandboxError::Prepare)?)
        } else {
            None
        };
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure makes only system calls on buffers made
        // before the fork (`namespace::Prepared::enter`, `Enforce::apply`).
        unsafe {
            cmd.pre_exec(move || {
                if let Some(namespaces) = &namespaces {
                    namespaces.enter()?;
                }
                match &mut rules {
                    Some(rules) => rules.apply(),
                    None => Ok(()),
                }
            });
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
impl Sandbox {
    fn confine(
        &self,
        _: &mut std::process::Command,
        _: Option<&Mirror>,
        _: &Path,
        _: &Path,
    ) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// Whether this process may build in a mirror: tried once, by mounting a
/// scratch directory over another in a throwaway child. Blocks for the
/// probe: call it off the async threads.
pub fn mirror_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // Its mounts are made in the sandbox's user namespace.
        let found = support()
            .namespaces
            .clone()
            .and_then(|()| mirror_probe());
        if let Err(reason) = &found {
            tracing::info!(
                %reason,
                "slots build at their own paths: this system does not allow an unprivileged mount namespace"
            );
        }
        found.is_ok()
    })
}

#[cfg(not(target_os = "linux"))]
fn mirror_probe() -> Result<(), String> {
    Err("mount namespaces are Linux's".into())
}

#[cfg(target_os = "linux")]
fn mirror_probe() -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let [root, slot, target] = ["root", "slot", "target"].map(|name| scratch.path().join(name));
    for dir in [&root, &slot, &target] {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(slot.join("seen"), b"").map_err(|e| e.to_string())?;
    std::fs::create_dir(root.join("target")).map_err(|e| e.to_string())?;
    let mirror = Mirror::plan(&root, &slot, &root.join("target"), &target)
        .ok_or("the scratch mounts could not be planned")?;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "test -e seen && test -e target"])
        .current_dir(mirror.slot());
    enter_mirror(&mut cmd, &mirror);
    let status = cmd.status().map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the probe's mounts were not seen ({status})"))
    }
}
/// Makes `cmd` enter namespaces holding `mirror`'s mounts, and nothing
/// else of a sandbox: the mirror's own probe.
#[cfg(target_os = "linux")]
fn enter_mirror(cmd: &mut std::process::Command, mirror: &Mirror) {
    let Some(namespaces) = namespace::Prepared::new(Some(mirror), false, None, &[]) else {
        return;
    };
    use std::os::unix::process::CommandExt;
    // SAFETY: `Prepared::enter` makes only system calls.
    unsafe {
        cmd.pre_exec(move || namespaces.enter());
    }
}

/// A process's private temporary directory, removed with what is in it
/// when dropped.
#[derive(Debug)]
pub struct Tmp(PathBuf);

impl Tmp {
    /// A new, empty directory below `base`, named so no other process of
    /// this or another `trellis` has it.
    fn new(base: &Path) -> io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        std::fs::create_dir_all(base)?;
        loop {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!("{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Self(dir)),
                // Left by an earlier process with this pid.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    crate::snapshot::fsutil::remove_if_present(&dir)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = crate::snapshot::fsutil::remove_if_present(&self.0);
    }
}

/// Confines a throwaway child as a slot's would be and checks what it may
/// do: write beneath its directory (and rename across directories there),
/// never outside it; then, separately, whether it can have namespaces of
/// its own.
#[cfg(target_os = "linux")]
fn probe() -> Support {
    if crate::failpoint::fails("sandbox-probe") {
        // A kernel with neither, as far as everything here can tell.
        let why = || Err("the sandbox probe was made to fail".to_owned());
        return Support {
            files: why(),
            namespaces: why(),
        };
    }
    Support {
        files: probe_files(),
        namespaces: probe_namespaces(),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    let why = || Err("Landlock and namespaces are Linux's".to_owned());
    Support {
        files: why(),
        namespaces: why(),
    }
}

#[cfg(target_os = "linux")]
fn probe_files() -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let [inside, outside] = ["inside", "outside"].map(|name| scratch.path().join(name));
    for dir in [&inside, &outside] {
        std::fs::create_dir(dir).map_err(|e| e.to_string())?;
    }
    let mut rules = rules::ruleset(&[&inside])?;
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        "echo > inside/a && mkdir inside/d && mv inside/a inside/d/a \
         && ! (echo > outside/b) 2>/dev/null && test ! -e outside/b",
    ])
    .current_dir(scratch.path());
    use std::os::unix::process::CommandExt;
    // SAFETY: `Enforce::apply` makes only system calls.
    unsafe {
        cmd.pre_exec(move || rules.apply());
    }
    let status = cmd
        .status()
        .map_err(|e| format!("Landlock is not available: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("Landlock did not confine the probe ({status})"))
    }
}

#[cfg(target_os = "linux")]
fn probe_namespaces() -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let shm = scratch.path().join("shm");
    std::fs::create_dir(&shm).map_err(|e| e.to_string())?;
    let namespaces = namespace::Prepared::new(None, true, Some(&shm), &[])
        .ok_or("no namespaces were planned")?;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "echo > /dev/shm/seen"]);
    use std::os::unix::process::CommandExt;
    // SAFETY: `Prepared::enter` makes only system calls.
    unsafe {
        cmd.pre_exec(move || namespaces.enter());
    }
    let status = cmd
        .status()
        .map_err(|e| format!("unprivileged user namespaces are not available: {e}"))?;
    if status.success() && shm.join("seen").exists() {
        Ok(())
    } else {
        Err(format!("the namespaces' probe failed ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use tokio::process::Command;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::sensor::process::{Confinement, ProcessLimits, run_bounded};

    /// A slot, its target and temporary directories, and a directory
    /// beside them that stands for the user's files.
    struct Dirs {
        _scratch: tempfile::TempDir,
        slot: PathBuf,
        target: PathBuf,
        tmp: PathBuf,
        user: PathBuf,
    }

    fn dirs() -> Dirs {
        let scratch = tempfile::tempdir().unwrap();
        let [slot, target, tmp, user] =
            ["slot", "target", "tmp", "user"].map(|name| scratch.path().join(name));
        for dir in [&slot, &target, &user] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(user.join("lib.rs"), b"the user's").unwrap();
        Dirs {
            _scratch: scratch,
            slot,
            target,
            tmp,
            user,
        }
    }

    async fn sh(dirs: &Dirs, policy: Policy, script: &str) -> std::process::ExitStatus {
        let sandbox = Sandbox::new(&dirs.slot, &dirs.target, &dirs.tmp, policy);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .current_dir(&dirs.slot)
            .env("USER_DIR", &dirs.user)
            .env("TARGET", &dirs.target);
        let limits = ProcessLimits::with_deadline(Duration::from_secs(60));
        let output = run_bounded(
            cmd,
            Confinement::Slot(&sandbox, None),
            &limits,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        eprintln!("`{script}`: {}", String::from_utf8_lossy(&output.stderr));
        output.status
    }

    fn supported() -> bool {
        let support = support();
        if std::env::var_os("CI").is_some() {
            assert!(
                support.confines_files() && support.confines_network(),
                "CI's kernel must sandbox: {}",
                support.describe()
            );
        }
        if !support.confines_files() {
            eprintln!("skipped: {}", support.describe());
        }
        support.confines_files()
    }

    #[tokio::test]
    async fn a_sandboxed_run_writes_its_own_directories_and_nothing_else() {
        if !supported() {
            return;
        }
        let dirs = dirs();
        let own = "echo > built && mkdir -p sub && mv built sub/built \
                   && echo > \"$TARGET/out\" && echo > \"$TMPDIR/scratch\" \
                   && echo > /dev/null && echo > /dev/shm/semaphore";
        assert!(sh(&dirs, Policy::USER_CODE, own).await.success());
        assert!(dirs.slot.join("sub/built").is_file());
        assert!(dirs.target.join("out").is_file());
        assert!(
            !dirs.tmp.exists() || std::fs::read_dir(&dirs.tmp).unwrap().count() == 0,
            "the process's temporary directory and /dev/shm went with it"
        );

        for escape in [
            "echo forged >> \"$USER_DIR/lib.rs\"",
            "rm \"$USER_DIR/lib.rs\"",
            "echo > \"$USER_DIR/planted\"",
            "ln -s /etc \"$USER_DIR/link\"",
            "mv \"$USER_DIR/lib.rs\" ./stolen.rs",
            "echo > ../beside",
        ] {
            let status = sh(&dirs, Policy::USER_CODE, escape).await;
            assert!(!status.success(), "`{escape}` was allowed");
        }
        assert_eq!(
            std::fs::read(dirs.user.join("lib.rs")).unwrap(),
            b"the user's"
        );
        let mut left: Vec<_> = std::fs::read_dir(&dirs.user)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["lib.rs"]);
        assert!(!dirs.slot.parent().unwrap().join("beside").exists());
    }

    #[tokio::test]
    async fn a_hidden_file_or_directory_reads_empty_and_the_rest_stays_readable() {
        if !supported() {
            return;
        }
        let dirs = dirs();
        let oracle_dir = dirs.user.join("oracle");
        std::fs::create_dir(&oracle_dir).unwrap();
        std::fs::write(oracle_dir.join("hidden.rs"), b"secret").unwrap();
        std::fs::write(dirs.user.join("oracle.rs"), b"secret").unwrap();
        let policy = Policy {
            hidden: vec![dirs.user.join("oracle.rs"), oracle_dir.clone()],
            ..Policy::USER_CODE
        };
        let reads = "test -z \"$(cat \"$USER_DIR/oracle.rs\")\" \
                     && test -z \"$(ls -A \"$USER_DIR/oracle\")\" \
                     && grep -q \"the user's\" \"$USER_DIR/lib.rs\"";
        assert!(sh(&dirs, policy, reads).await.success());
        let unhidden = "grep -q secret \"$USER_DIR/oracle.rs\"";
        assert!(
            sh(&dirs, Policy::USER_CODE, unhidden).await.success(),
            "the control: readable when not hidden"
        );
        assert_eq!(
            std::fs::read(oracle_dir.join("hidden.rs")).unwrap(),
            b"secret"
        );
    }

    #[tokio::test]
    async fn each_process_has_a_temporary_directory_of_its_own_that_goes_with_it() {
        if !supported() {
            return;
        }
        let dirs = dirs();
        assert!(
            sh(&dirs, Policy::USER_CODE, "echo > \"$TMPDIR/left\"")
                .await
                .success()
        );
        assert!(
            sh(&dirs, Policy::USER_CODE, "test ! -e \"$TMPDIR/left\"")
                .await
                .success()
        );
        assert_eq!(
            std::fs::read_dir(&dirs.tmp).unwrap().count(),
            0,
            "each process's directory goes with it"
        );
    }

    /// Bash's `/dev/tcp` connects as any client would.
    fn connects(port: u16) -> String {
        format!("exec 3<>/dev/tcp/127.0.0.1/{port}")
    }

    #[tokio::test]
    async fn model_code_reaches_only_its_own_loopback_unless_allowed() {
        if !supported() || !support().confines_network() {
            return;
        }
        let dirs = dirs();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let reach = |policy| {
            let script = format!("bash -c '{}'", connects(port));
            let dirs = &dirs;
            async move { sh(dirs, policy, &script).await.success() }
        };
        let model = Policy {
            network: Network::Loopback,
            require: true,
            model_code: true,
            writable: Vec::new(),
            hidden: Vec::new(),
        };
        assert!(
            !reach(model.clone()).await,
            "model code reached the machine's loopback"
        );
        let allowed = Policy {
            network: Network::Allow,
            ..model.clone()
        };
        assert!(reach(allowed).await, "`network = \"allow\"` must reach it");
        // Its own loopback is up: a test's server on 127.0.0.1 still works.
        let own = "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); \
                   c = socket.create_connection(s.getsockname()); print(\"ok\")'";
        assert!(sh(&dirs, model, own).await.success());
    }
}
