//! Faults around the `trellis` process, injected through the built binary
//! with real cargo: SIGTERM and SIGKILL while a test runs (nothing of the
//! fixture may keep running), a test that escapes its process group with
//! `setsid` (bounded by the stage deadline, and reported), and
//! configuration files that would hang or exhaust a naive reader.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::{CARGO_TOML, Client, SENSING_TIMEOUT, vscode_capabilities, write_crate};

/// A workspace, a private branch cache (and user config home), and a
/// directory outside both where the fixture's test writes its pid (the
/// user configuration's `[sandbox] writable`).
struct Fixture {
    ws: tempfile::TempDir,
    cache: tempfile::TempDir,
    marks: tempfile::TempDir,
}

impl Fixture {
    /// A crate whose only test runs `body`, in which `pid_file` is the path
    /// (outside the workspace) the test may write a pid to.
    fn with_test(body: &str) -> Fixture {
        let fixture = Fixture {
            ws: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
            marks: tempfile::tempdir().unwrap(),
        };
        let pid_file = fixture.pid_file();
        let lib = format!(
            "pub fn one() -> u8 {{\n    1\n}}\n\n#[test]\nfn runs() {{\n    let pid_file = {pid_file:?};\n{body}\n}}\n"
        );
        write_crate(
            fixture.ws.path(),
            &[("Cargo.toml", CARGO_TOML), ("src/lib.rs", &lib)],
        );
        // The test's processes are confined to their slot; the user lets
        // them write the pid where this test can read it.
        let config = fixture.cache.path().join("config/trellis/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(
            config,
            format!(
                "[sandbox]\nwritable = [{:?}]\n",
                fixture.marks.path().display().to_string()
            ),
        )
        .unwrap();
        fixture
    }

    fn pid_file(&self) -> PathBuf {
        self.marks.path().join("test.pid")
    }

    fn trellis(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command
            .args(args)
            .arg(self.ws.path())
            .env("TRELLIS_CACHE_DIR", self.cache.path())
            .env("XDG_CONFIG_HOME", self.cache.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Waits until the fixture's test wrote its pid (written aside and
    /// renamed, so a present file is complete).
    fn wait_for_test_pid(&self, trellis: &mut Child) -> u32 {
        let deadline = Instant::now() + SENSING_TIMEOUT;
        loop {
            if let Ok(text) = std::fs::read_to_string(self.pid_file()) {
                return text.trim().parse().unwrap();
            }
            if let Some(status) = trellis.try_wait().unwrap() {
                panic!("trellis exited with {status} before the test ran");
            }
            assert!(Instant::now() < deadline, "the fixture's test never ran");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Processes whose working directory or command line lies in the
    /// workspace or the branch cache: cargo, rustc, test binaries, and the
    /// supervisors trellis forks.
    fn survivors(&self) -> Vec<String> {
        let dirs = [self.ws.path(), self.cache.path()];
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() || is_dead(pid) {
                continue;
            }
            let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
            let cmdline = std::fs::read(entry.path().join("cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                .unwrap_or_default();
            if dirs
                .iter()
                .any(|dir| cwd.starts_with(dir) || cmdline.contains(dir.to_str().unwrap()))
            {
                found.push(format!("{pid}: {cmdline} (in {})", cwd.display()));
            }
        }
        found
    }

    /// Polls until nothing of the fixture runs, failing after `bound`.
    fn assert_nothing_survives(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            let survivors = self.survivors();
            if survivors.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still running {bound:?} after trellis ended: {survivors:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// True once `pid` is gone or a zombie awaiting its reaper.
fn is_dead(pid: u32) -> bool {
    stat_fields(pid).is_none_or(|fields| is_zombie(&fields))
}

/// Whether a process's stat fields say it has exited, unreaped.
fn is_zombie(fields: &[String]) -> bool {
    matches!(fields.first().map(String::as_str), Some("Z" | "X"))
}

/// A process, told apart from a later one that reuses its pid: `pid_max`
/// may be 32,768, and the suite starts thousands of processes.
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: u32,
    /// Clock ticks after boot at which it started (`/proc/PID/stat` field 22).
    started: u64,
}

impl Proc {
    /// The process that has `pid` now; `None` when none has.
    fn of(pid: u32) -> Option<Proc> {
        let started = stat_fields(pid)?.get(19)?.parse().ok()?;
        Some(Proc { pid, started })
    }

    /// True once it is gone, a zombie awaiting its reaper, or its pid
    /// belongs to another process.
    fn is_dead(self) -> bool {
        stat_fields(self.pid).is_none_or(|fields| {
            is_zombie(&fields) || fields.get(19).and_then(|t| t.parse().ok()) != Some(self.started)
        })
    }
}

/// The fields of `/proc/PID/stat` after the command name, from the state on.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The parent of `pid`, from `/proc/PID/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// `pid` and its ancestors below `top`: the test binary, cargo, and the
/// supervisor trellis forked.
fn chain_below(pid: u32, top: u32) -> Vec<u32> {
    let mut chain = vec![pid];
    while let Some(parent) = parent_of(*chain.last().unwrap()) {
        if parent == top || parent <= 1 {
            break;
        }
        chain.push(parent);
    }
    assert!(
        chain.len() >= 2,
        "no cargo above the test binary: {chain:?}"
    );
    chain
}

/// A test that records its own pid, then sleeps far past any bound here.
const SLEEPS: &str = "    let tmp = format!(\"{pid_file}.tmp\");
    std::fs::write(&tmp, std::process::id().to_string()).unwrap();
    std::fs::rename(&tmp, pid_file).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(600));";

fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

fn wait_with_bound(child: &mut Child, bound: Duration) -> ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "trellis still runs after {bound:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `trellis check` on the sleeping test, waits until the test runs,
/// sends `signal_name` to trellis, and returns how trellis ended.
fn signalled_while_testing(fixture: &Fixture, signal_name: &str) -> ExitStatus {
    let mut trellis = fixture.trellis(&["check"]).spawn().unwrap();
    let test_pid = fixture.wait_for_test_pid(&mut trellis);
    let test = Proc::of(test_pid).expect("the fixture's test runs");
    signal(trellis.id(), signal_name);
    let status = wait_with_bound(&mut trellis, Duration::from_secs(10));
    fixture.assert_nothing_survives(Duration::from_secs(10));
    assert!(test.is_dead(), "the test binary {test_pid} survived");
    status
}

#[test]
fn sigterm_kills_the_running_tests_and_exits_with_143() {
    use std::os::unix::process::ExitStatusExt as _;
    let fixture = Fixture::with_test(SLEEPS);
    let status = signalled_while_testing(&fixture, "TERM");
    assert_eq!(
        status.code(),
        Some(143),
        "{status:?} (signal {:?})",
        status.signal()
    );
}

#[test]
fn sigkill_leaves_no_cargo_or_test_process_behind() {
    use std::os::unix::process::ExitStatusExt as _;
    let fixture = Fixture::with_test(SLEEPS);
    let status = signalled_while_testing(&fixture, "KILL");
    assert_eq!(status.signal(), Some(9), "{status:?}");
}

#[test]
fn a_test_that_escapes_with_setsid_is_bounded_by_the_stage_deadline_and_reported() {
    // The detached sleeper inherits the test's stdout, cargo's pipe to
    // trellis: the stage cannot end before the sleeper does, or the deadline.
    let fixture = Fixture::with_test(
        "    let child = std::process::Command::new(\"setsid\").args([\"sleep\", \"300\"]).spawn().unwrap();
    let tmp = format!(\"{pid_file}.tmp\");
    std::fs::write(&tmp, child.id().to_string()).unwrap();
    std::fs::rename(&tmp, pid_file).unwrap();",
    );
    let deadline_secs = 60;
    std::fs::write(
        fixture.ws.path().join("trellis.toml"),
        format!("[stages]\ntest_timeout_secs = {deadline_secs}\n"),
    )
    .unwrap();
    let started = Instant::now();
    let mut trellis = fixture.trellis(&["check"]).spawn().unwrap();
    let escaped = Proc::of(fixture.wait_for_test_pid(&mut trellis)).expect("the sleeper runs");
    let output = {
        let status = wait_with_bound(&mut trellis, SENSING_TIMEOUT);
        let stdout = std::io::read_to_string(trellis.stdout.take().unwrap()).unwrap();
        (status, stdout)
    };
    let elapsed = started.elapsed();
    let detached_still_runs = !escaped.is_dead();
    signal(escaped.pid, "KILL");

    let (status, stdout) = output;
    assert!(
        detached_still_runs,
        "the setsid sleeper was killed: the fault was not injected"
    );
    assert_eq!(status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains(&format!("timed out after {deadline_secs}s")),
        "{stdout}"
    );
    assert!(
        elapsed < Duration::from_secs(deadline_secs + 240),
        "trellis took {elapsed:?}"
    );
}

#[test]
fn sigterm_on_the_language_server_kills_its_sensing_run() {
    let fixture = Fixture::with_test(SLEEPS);
    let config = fixture.cache.path().join("config");
    let env = [
        ("TRELLIS_CACHE_DIR", fixture.cache.path().as_os_str()),
        ("XDG_CONFIG_HOME", config.as_os_str()),
    ];
    let (mut client, _) =
        Client::start_with_env(fixture.ws.path(), None, &env, vscode_capabilities(), None);
    client.open("src/lib.rs");
    let deadline = Instant::now() + SENSING_TIMEOUT;
    let test_pid = loop {
        if let Ok(text) = std::fs::read_to_string(fixture.pid_file()) {
            break text.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the fixture's test never ran");
        client.pump(Duration::from_millis(100));
    };
    let chain: Vec<Proc> = chain_below(test_pid, client.pid())
        .into_iter()
        .filter_map(Proc::of)
        .collect();
    signal(client.pid(), "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = client.exit_status() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server still runs");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(143), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while chain.iter().any(|p| !p.is_dead()) {
        assert!(
            Instant::now() < deadline,
            "still running after the server ended: {:?}",
            chain.iter().filter(|p| !p.is_dead()).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `trellis check` on the fixture's workspace, failing if it does not
/// end within `bound`; returns its exit status and stderr.
fn check_within(fixture: &Fixture, bound: Duration) -> (ExitStatus, String) {
    let mut trellis = fixture.trellis(&["check"]).spawn().unwrap();
    let status = wait_with_bound(&mut trellis, bound);
    let stderr = std::io::read_to_string(trellis.stderr.take().unwrap()).unwrap();
    (status, stderr)
}

fn assert_config_refused(fixture: &Fixture, file: &Path, reason: &str) {
    let (status, stderr) = check_within(fixture, Duration::from_secs(30));
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&file.display().to_string()) && stderr.contains(reason),
        "{stderr}"
    );
}

#[test]
fn a_trellis_toml_that_is_a_fifo_is_refused_without_hanging() {
    let fixture = Fixture::with_test("");
    let file = fixture.ws.path().join("trellis.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap()
            .success()
    );
    assert_config_refused(&fixture, &file, "not a regular file (a FIFO)");
}

#[test]
fn a_trellis_toml_linked_to_dev_zero_is_refused_without_reading_it() {
    let fixture = Fixture::with_test("");
    let file = fixture.ws.path().join("trellis.toml");
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    assert_config_refused(&fixture, &file, "not a regular file (a device)");
}

#[test]
fn prompts_in_the_user_config_are_refused_naming_the_file_and_table() {
    let fixture = Fixture::with_test("");
    let file = fixture.cache.path().join("config/trellis/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "[prompts]\nbundles = [\"bundle.toml\"]\n").unwrap();
    assert_config_refused(&fixture, &file, "`[prompts]` is read only from");
}
