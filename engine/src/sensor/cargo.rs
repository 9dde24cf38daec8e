//! The Rust stages: `cargo check` (stage `build`) and `cargo test` (stage
//! `test`) as [`Sensor`]s.
//!
//! [`CargoToolchain::detect`] pins the tool identity once (cargo and rustc
//! versions); [`CargoCheck`] and [`CargoTest`] run cargo with JSON messages in
//! a separate target directory, bounded by [`run_bounded`], and turn what it
//! printed into a [`StageReport`]. A stage that could not measure (no cargo,
//! timeout, cancellation, a failure cargo did not explain) is
//! [`StageStatus::Unavailable`] with a reason a person can act on.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;

pub use super::libtest::ABNORMAL_EXIT;
use super::libtest::{self, ParsedFailure};
use super::process::{ProcessError, ProcessLimits, ProcessOutput, run_bounded};
use super::rustc_json::{self, WorkspacePaths};
use super::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};
use crate::diagnostic::{Diagnostic, Level, TestFailure};

/// Environment set on every cargo run. Part of the fingerprint: it changes
/// what the tool prints (colour codes, backtraces in test output).
const ENVIRONMENT: &[(&str, &str)] = &[("CARGO_TERM_COLOR", "never"), ("RUST_BACKTRACE", "0")];

const CHECK_ARGS: &[&str] = &[
    "check",
    "--workspace",
    "--all-targets",
    "--message-format=json",
    "--color",
    "never",
];

const TEST_ARGS: &[&str] = &[
    "test",
    "--workspace",
    "--no-fail-fast",
    "--message-format=json",
    "--color",
    "never",
];

/// Bounds for the version probes: they print a few lines and return at once
/// unless rustup has to install a toolchain first.
fn probe_limits() -> ProcessLimits {
    ProcessLimits {
        deadline: Duration::from_secs(120),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    }
}

/// The cargo a workspace builds with, identified once.
#[derive(Clone, Debug)]
pub struct CargoToolchain {
    program: OsString,
    /// `cargo 1.95.0 (...); rustc 1.95.0 (commit ...)`, or why the toolchain
    /// cannot run.
    version: Result<String, String>,
}

impl CargoToolchain {
    /// Identify `program` (normally `cargo`) and the `rustc` it drives
    /// (`$RUSTC` or `rustc`), as seen from `workspace`, where a
    /// `rust-toolchain.toml` may select another toolchain.
    pub async fn detect(program: impl Into<OsString>, workspace: &Path) -> Self {
        let program = program.into();
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let version = async {
            let cargo = probe(&program, &["--version"], workspace).await?;
            let rustc = probe(&rustc, &["-vV"], workspace).await?;
            Ok(format!("{}; {}", cargo.trim(), rustc_identity(&rustc)))
        }
        .await;
        Self { program, version }
    }

    /// The version string, or why the toolchain is unavailable.
    pub fn version(&self) -> Result<&str, &str> {
        self.version.as_deref().map_err(String::as_str)
    }
}

/// `rustc 1.95.0 (59807616e...)` from `rustc -vV`'s `release:` and
/// `commit-hash:` lines; the full text when those are missing.
fn rustc_identity(verbose: &str) -> String {
    let field = |key: &str| {
        verbose
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .map(str::trim)
    };
    match (field("release:"), field("commit-hash:")) {
        (Some(release), Some(commit)) => format!("rustc {release} ({commit})"),
        _ => verbose.trim().to_owned(),
    }
}

/// Run a version probe; its stdout, or a reason naming what is missing.
async fn probe(program: &OsString, args: &[&str], dir: &Path) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    let shown = format!("{} {}", program.to_string_lossy(), args.join(" "));
    let output = run_bounded(cmd, &probe_limits(), &CancellationToken::new())
        .await
        .map_err(|error| match error {
            ProcessError::Launch { program, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                format!("`{program}` was not found: install a Rust toolchain or put it on PATH")
            }
            error => format!("`{shown}` failed: {error}"),
        })?;
    if !output.status.success() {
        return Err(format!(
            "`{shown}` exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The build and test stages for the workspace at `workspace`, using the
/// `cargo` on `PATH`. Missing tools still yield both sensors; each run then
/// reports [`StageStatus::Unavailable`].
pub async fn rust_sensors(workspace: &Path) -> Vec<Box<dyn Sensor>> {
    let toolchain = CargoToolchain::detect("cargo", workspace).await;
    vec![
        Box::new(CargoCheck::new(&toolchain)),
        Box::new(CargoTest::new(&toolchain)),
    ]
}

/// What a cargo stage needs to run and to interpret its output.
struct CargoStage {
    stage: &'static str,
    args: &'static [&'static str],
    reads_tests: bool,
    program: OsString,
    fingerprint: SensorFingerprint,
    unavailable: Option<String>,
}

impl CargoStage {
    fn new(
        toolchain: &CargoToolchain,
        stage: &'static str,
        tool: &str,
        args: &'static [&'static str],
        reads_tests: bool,
    ) -> Self {
        let environment: Vec<String> = ENVIRONMENT
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let fingerprint = SensorFingerprint {
            tool: tool.to_owned(),
            version: toolchain
                .version()
                .map_or_else(|_| "unavailable".to_owned(), str::to_owned),
            config: format!("{} cargo {}", environment.join(" "), args.join(" ")),
        };
        Self {
            stage,
            args,
            reads_tests,
            program: toolchain.program.clone(),
            fingerprint,
            unavailable: toolchain.version().err().map(str::to_owned),
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let started = Instant::now();
        let observation = match &self.unavailable {
            Some(reason) => Observation::unavailable(reason.clone()),
            None => self.observe(&run).await,
        };
        StageReport {
            stage: self.stage.to_owned(),
            fingerprint: self.fingerprint.clone(),
            status: observation.status,
            diagnostics: observation.diagnostics,
            failures: observation.failures,
            tests_passed: observation.tests_passed,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            truncated: observation.truncated,
            notes: observation.notes,
        }
    }

    async fn observe(&self, run: &SensorRun<'_>) -> Observation {
        let mut cmd = Command::new(&self.program);
        cmd.args(self.args)
            .current_dir(run.dir)
            .env("CARGO_TARGET_DIR", run.target_dir)
            .envs(ENVIRONMENT.iter().copied());
        let limits = ProcessLimits::with_deadline(run.deadline);
        let output = match run_bounded(cmd, &limits, &run.cancel).await {
            Ok(output) => output,
            Err(error) => return Observation::unavailable(error.to_string()),
        };
        // Resolved after the run: cargo may just have created the target
        // directory, which must exist to be excluded from the workspace.
        match WorkspacePaths::new(run.dir, run.target_dir) {
            Ok(mut paths) => interpret(self.stage, self.reads_tests, &output, &mut paths),
            Err(error) => Observation::unavailable(format!(
                "workspace {} cannot be read: {error}",
                run.dir.display()
            )),
        }
    }
}

/// The interpreted result of one cargo run.
struct Observation {
    status: StageStatus,
    diagnostics: Vec<Diagnostic>,
    failures: Vec<TestFailure>,
    tests_passed: u32,
    truncated: bool,
    notes: Vec<String>,
}

impl Observation {
    fn unavailable(reason: String) -> Self {
        Self {
            status: StageStatus::Unavailable { reason },
            diagnostics: Vec::new(),
            failures: Vec::new(),
            tests_passed: 0,
            truncated: false,
            notes: Vec::new(),
        }
    }
}

/// Turn cargo's output into a stage observation.
fn interpret(
    stage: &str,
    reads_tests: bool,
    output: &ProcessOutput,
    paths: &mut WorkspacePaths,
) -> Observation {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut lines: Vec<&str> = stdout.lines().collect();
    if output.stdout_truncated && !stdout.ends_with('\n') {
        // The cap cut the last line; it is not malformed, just incomplete.
        lines.pop();
    }
    // Cargo finishes every build before it runs a test binary, so its JSON
    // precedes libtest's first `running N tests` header; a test's captured
    // output that happens to look like JSON is never read as a message.
    let first_test_line = if reads_tests {
        lines
            .iter()
            .position(|line| libtest::is_block_header(line))
            .unwrap_or(lines.len())
    } else {
        lines.len()
    };
    let (json_lines, test_lines) = lines.split_at(first_test_line);

    let messages = rustc_json::parse_compiler_messages(json_lines.iter().copied(), stage, paths);
    let mut notes = Vec::new();
    if messages.malformed_lines > 0 {
        tracing::warn!(
            stage,
            lines = messages.malformed_lines,
            "skipped malformed JSON lines from cargo"
        );
        notes.push(format!(
            "skipped {} line(s) of cargo output that looked like JSON but could not be read",
            messages.malformed_lines
        ));
    }
    if output.truncated() {
        notes.push(
            "cargo's output exceeded the retained-byte cap; later output was discarded".to_owned(),
        );
    }
    let tests = if reads_tests {
        libtest::parse_test_run(test_lines.iter().copied(), &stderr)
    } else {
        libtest::TestRun::default()
    };
    let failures: Vec<TestFailure> = tests
        .failures
        .into_iter()
        .map(|failure| locate(failure, paths))
        .collect();
    let mut diagnostics = messages.diagnostics;

    let has_errors = diagnostics
        .iter()
        .any(|diagnostic| diagnostic.level == Level::Error);
    let status = if has_errors || !failures.is_empty() {
        StageStatus::Failed
    } else if output.status.success() {
        StageStatus::Passed
    } else {
        // Cargo failed without saying why in a form we read: a broken
        // manifest, an unresolvable dependency, a failing build script. Say
        // what it printed, and point at the manifest line when it names one.
        diagnostics.extend(manifest_diagnostic(stage, &stderr, paths));
        StageStatus::Unavailable {
            reason: format!(
                "cargo exited with {} without a compiler error or failing test: {}",
                output.status,
                stderr_summary(&stderr)
            ),
        }
    };
    Observation {
        status,
        diagnostics,
        failures,
        tests_passed: tests.passed,
        truncated: output.truncated(),
        notes,
    }
}

fn locate(failure: ParsedFailure, paths: &mut WorkspacePaths) -> TestFailure {
    let location = failure
        .panic_site
        .and_then(|site| paths.point(&site.file, site.line, site.column));
    TestFailure {
        binary: failure.binary,
        name: failure.name,
        output: failure.output,
        location,
    }
}

/// Cargo's own complaints, without the progress lines (`Compiling ...`).
fn stderr_summary(stderr: &str) -> String {
    const LIMIT: usize = 4 * 1024;
    let progress = [
        "Compiling ",
        "Checking ",
        "Finished ",
        "Running ",
        "Doc-tests ",
        "Locking ",
        "Updating ",
        "Downloading ",
        "Downloaded ",
        "Blocking ",
    ];
    let kept: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            !progress.iter().any(|prefix| trimmed.starts_with(prefix))
        })
        .collect();
    let summary = kept.join("\n");
    let summary = summary.trim();
    if summary.len() <= LIMIT {
        return summary.to_owned();
    }
    let mut end = LIMIT;
    while !summary.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &summary[..end])
}

/// A diagnostic for a manifest error cargo reported as
/// `error: <message>` followed by ` --> Cargo.toml:5:14`.
fn manifest_diagnostic(
    stage: &str,
    stderr: &str,
    paths: &mut WorkspacePaths,
) -> Option<Diagnostic> {
    let lines: Vec<&str> = stderr.lines().collect();
    let (index, location) = lines.iter().enumerate().find_map(|(index, line)| {
        let location = line.trim_start().strip_prefix("--> ")?;
        location.contains("Cargo.toml").then_some((index, location))
    })?;
    let mut parts = location.rsplitn(3, ':');
    let column = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let primary = paths.point(parts.next()?, line, column)?;
    let message = lines[..index]
        .iter()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or("invalid manifest")
        .to_owned();
    Some(Diagnostic {
        stage: stage.to_owned(),
        code: None,
        level: Level::Error,
        message,
        primary: Some(primary),
        secondary: Vec::new(),
        notes: Vec::new(),
        suggestions: Vec::new(),
        rendered: Some(stderr_summary(stderr)),
    })
}

/// Stage `build`: `cargo check --workspace --all-targets --message-format=json`.
pub struct CargoCheck(CargoStage);

impl CargoCheck {
    pub fn new(toolchain: &CargoToolchain) -> Self {
        Self(CargoStage::new(
            toolchain,
            "build",
            "cargo-check",
            CHECK_ARGS,
            false,
        ))
    }
}

/// Stage `test`: `cargo test --workspace --no-fail-fast --message-format=json`.
pub struct CargoTest(CargoStage);

impl CargoTest {
    pub fn new(toolchain: &CargoToolchain) -> Self {
        Self(CargoStage::new(
            toolchain,
            "test",
            "cargo-test",
            TEST_ARGS,
            true,
        ))
    }
}

/// Both stages delegate to the shared [`CargoStage`].
macro_rules! cargo_sensor {
    ($($sensor:ident),*) => {$(
        impl Sensor for $sensor {
            fn stage(&self) -> &str {
                self.0.stage
            }

            fn fingerprint(&self) -> &SensorFingerprint {
                &self.0.fingerprint
            }

            fn run<'a>(&'a self, run: SensorRun<'a>) -> BoxFuture<'a, StageReport> {
                Box::pin(self.0.measure(run))
            }
        }
    )*};
}

cargo_sensor!(CargoCheck, CargoTest);

#[cfg(all(test, unix))]
#[path = "cargo_fuzz.rs"]
mod fuzz_tests;

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    fn output(code: i32, stdout: &str, stderr: &str, stdout_truncated: bool) -> ProcessOutput {
        ProcessOutput {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            stdout_truncated,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    fn paths() -> (tempfile::TempDir, WorkspacePaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        (dir, paths)
    }

    #[test]
    fn a_line_cut_by_the_cap_is_incomplete_not_malformed() {
        let (_dir, mut paths) = paths();
        let cut = output(
            0,
            "{\"reason\":\"build-finished\",\"success\":true}\n{\"reas",
            "",
            true,
        );
        let observation = interpret("build", false, &cut, &mut paths);
        assert_eq!(observation.status, StageStatus::Passed);
        assert!(observation.truncated);
        assert_eq!(observation.notes.len(), 1, "{:?}", observation.notes);
        assert!(observation.notes[0].contains("cap"));
    }

    #[test]
    fn unexplained_cargo_failure_is_unavailable_with_its_stderr() {
        let (_dir, mut paths) = paths();
        let failed = output(
            101,
            "",
            "    Updating crates.io index\nerror: no matching package named `nope` found\n",
            false,
        );
        let observation = interpret("build", false, &failed, &mut paths);
        let StageStatus::Unavailable { reason } = observation.status else {
            panic!("unavailable expected");
        };
        assert!(
            reason.ends_with("error: no matching package named `nope` found"),
            "{reason}"
        );
        assert!(!reason.contains("Updating"), "{reason}");
    }

    #[test]
    fn rustc_identity_keeps_release_and_commit() {
        let verbose = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
                       commit-hash: 59807616e1fa\nrelease: 1.95.0\n";
        assert_eq!(rustc_identity(verbose), "rustc 1.95.0 (59807616e1fa)");
    }

    #[test]
    fn stderr_summary_drops_progress_lines() {
        let stderr = "   Compiling a v0.1.0\nerror: unclosed table\n --> Cargo.toml:5:14\n";
        assert_eq!(
            stderr_summary(stderr),
            "error: unclosed table\n --> Cargo.toml:5:14"
        );
    }
}
