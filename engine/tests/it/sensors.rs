//! The Rust sensors against real cargo, real crates and real processes.
//!
//! Each scenario writes its own small crate into a temp dir and measures it
//! once; tests that look at the same scenario share that measurement.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use trellis_engine::diagnostic::{Applicability, Diagnostic, Level, Span};
use trellis_engine::sensor::cargo::{ABNORMAL_EXIT, CargoStage, CargoToolchain, rust_sensors};
use trellis_engine::sensor::process::{Confinement, ProcessError, ProcessLimits, run_bounded};
use trellis_engine::sensor::sandbox::Policy;
use trellis_engine::sensor::{Sensor, SensorRun, StageReport, StageStatus};

const GENEROUS: Duration = Duration::from_secs(300);

fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn manifest(name: &str) -> String {
    format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n")
}

/// Run `sensor` on `dir` with a target directory inside it (which must not
/// count as workspace source).
async fn measure(sensor: &dyn Sensor, dir: &Path, deadline: Duration) -> StageReport {
    let target_dir = dir.join("target");
    sensor
        .run(SensorRun {
            dir,
            target_dir: &target_dir,
            deadline,
            cancel: CancellationToken::new(),
            policy: Policy::USER_CODE,
        })
        .await
}

async fn toolchain(dir: &Path) -> CargoToolchain {
    let toolchain = CargoToolchain::detect("cargo", dir).await;
    assert!(toolchain.version().is_ok(), "{:?}", toolchain.version());
    toolchain
}

/// Measure a fresh crate with `files`, from a plain (non-async) test.
fn measure_crate(files: &[(&str, &str)], stage: &str) -> StageReport {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let toolchain = toolchain(dir.path()).await;
        let sensor: Box<dyn Sensor> = match stage {
            "build" => Box::new(CargoStage::check(&toolchain)),
            _ => Box::new(CargoStage::test(&toolchain)),
        };
        measure(sensor.as_ref(), dir.path(), GENEROUS).await
    })
}

fn with_code<'a>(report: &'a StageReport, code: &str) -> Vec<&'a Diagnostic> {
    report
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.code.as_deref() == Some(code))
        .collect()
}

// ---------------------------------------------------------------------------
// One broken library, checked with `--all-targets` (lib and lib-test builds).

const BROKEN_LIB: &str = "pub fn compare(a: u32, b: u32) -> Ordering {
    a.cmp(&b)
}

pub fn reassign() -> u32 {
    let x = 1;
    x = 2;
    x
}

pub fn push() -> Vec<u32> {
    let v = Vec::new();
    v.push(1);
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn builds_with_the_lib() {}
}
";

fn broken_lib_report() -> &'static StageReport {
    static REPORT: OnceLock<StageReport> = OnceLock::new();
    REPORT.get_or_init(|| {
        measure_crate(
            &[
                ("Cargo.toml", &manifest("broken")),
                ("src/lib.rs", BROKEN_LIB),
            ],
            "build",
        )
    })
}

#[test]
fn missing_mut_is_an_error_with_a_machine_applicable_fix() {
    let report = broken_lib_report();
    assert_eq!(report.stage, "build");
    assert_eq!(report.status, StageStatus::Failed);
    let borrow = with_code(report, "E0596");
    assert_eq!(borrow.len(), 1, "{:#?}", report.diagnostics);
    let borrow = borrow[0];
    assert_eq!(borrow.level, Level::Error);
    let primary = borrow.primary.as_ref().unwrap();
    assert_eq!(primary.path, "src/lib.rs");
    let push_at = BROKEN_LIB.find("v.push").unwrap() as u32;
    assert_eq!((primary.byte_start, primary.line_start), (push_at, 13));

    let [group] = borrow.suggestions.as_slice() else {
        panic!("one suggestion group expected: {:#?}", borrow.suggestions);
    };
    let [fix] = group.alternatives.as_slice() else {
        panic!("one alternative expected: {group:#?}");
    };
    assert_eq!(fix.applicability, Applicability::MachineApplicable);
    let binding_at = BROKEN_LIB.find("let v").unwrap() as u32 + 4;
    assert_eq!(fix.replacements.len(), 1);
    assert_eq!(fix.replacements[0].text, "mut ");
    assert_eq!(fix.replacements[0].span.byte_start, binding_at);
    assert_eq!(fix.replacements[0].span.byte_end, binding_at);
    assert!(borrow.rendered.as_deref().unwrap().contains("E0596"));

    let reassigned = with_code(report, "E0384");
    assert_eq!(reassigned.len(), 1);
    assert!(
        !reassigned[0].secondary.is_empty(),
        "the first assignment is a labelled secondary span"
    );
}

#[test]
fn import_with_several_candidates_is_one_group_of_alternatives() {
    let report = broken_lib_report();
    let unresolved = with_code(report, "E0425");
    assert_eq!(unresolved.len(), 1, "{:#?}", report.diagnostics);
    let [group] = unresolved[0].suggestions.as_slice() else {
        panic!("one group expected: {:#?}", unresolved[0].suggestions);
    };
    let imports: Vec<&str> = group
        .alternatives
        .iter()
        .map(|alternative| {
            assert_eq!(alternative.replacements.len(), 1);
            assert_eq!(alternative.applicability, Applicability::MaybeIncorrect);
            alternative.replacements[0].text.trim()
        })
        .collect();
    assert!(imports.contains(&"use std::cmp::Ordering;"), "{imports:?}");
    assert!(
        imports.contains(&"use std::sync::atomic::Ordering;"),
        "{imports:?}"
    );
}

#[test]
fn the_same_error_from_lib_and_test_builds_is_reported_once() {
    let report = broken_lib_report();
    let mut keys: Vec<_> = report
        .diagnostics
        .iter()
        .map(Diagnostic::site_key)
        .collect();
    let reported = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), reported, "{:#?}", report.diagnostics);
    // rustc's closing remarks are not diagnostics.
    assert!(
        report
            .diagnostics
            .iter()
            .all(|diagnostic| diagnostic.primary.is_some())
    );
}

// ---------------------------------------------------------------------------
// Tests.

const PROBE_LIB: &str = "pub fn double(x: u32) -> u32 {
    x * 2
}

#[cfg(test)]
mod tests {
    #[test]
    fn doubles_one() {
        assert_eq!(super::double(1), 2);
    }

    #[test]
    fn doubles_two_wrongly() {
        println!(\"checking two\");
        assert_eq!(super::double(2), 5);
    }
}
";

#[test]
fn failing_test_is_a_counterexample_with_identity_and_location() {
    let report = measure_crate(
        &[
            ("Cargo.toml", &manifest("probe")),
            ("src/lib.rs", PROBE_LIB),
            (
                "tests/outside.rs",
                "#[test]\nfn doubles_from_outside() {\n    assert_eq!(probe::double(3), 6);\n}\n",
            ),
        ],
        "test",
    );
    assert_eq!(report.stage, "test");
    assert_eq!(report.status, StageStatus::Failed, "{report:#?}");
    assert_eq!(report.tests_passed, 2);
    assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
    let [failure] = report.failures.as_slice() else {
        panic!("one failure expected: {:#?}", report.failures);
    };
    // Cargo's own re-run selector: `cargo test --lib` runs exactly this binary.
    assert_eq!(failure.binary, "--lib");
    assert_eq!(failure.name, "tests::doubles_two_wrongly");
    assert!(
        failure.output.contains("checking two"),
        "{}",
        failure.output
    );
    assert!(failure.output.contains("left: 4"), "{}", failure.output);
    let assert_at = PROBE_LIB.find("assert_eq!(super::double(2)").unwrap() as u32;
    assert_eq!(
        failure.location,
        Some(Span {
            path: trellis_engine::WorkspacePath::new("src/lib.rs").unwrap(),
            byte_start: assert_at,
            byte_end: assert_at,
            line_start: 15,
            col_start: 9,
            line_end: 15,
            col_end: 9,
            label: None,
        })
    );
}

#[test]
fn compile_error_in_a_test_target_fails_the_test_stage() {
    let report = measure_crate(
        &[
            ("Cargo.toml", &manifest("testonly")),
            ("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n"),
            (
                "tests/typed.rs",
                "#[test]\nfn typed() {\n    let n: u32 = \"one\";\n    assert_eq!(n, testonly::one());\n}\n",
            ),
        ],
        "test",
    );
    assert_eq!(report.status, StageStatus::Failed, "{report:#?}");
    assert!(report.failures.is_empty());
    let mismatched = with_code(&report, "E0308");
    assert_eq!(mismatched.len(), 1, "{:#?}", report.diagnostics);
    assert_eq!(mismatched[0].stage, "test");
    assert_eq!(
        mismatched[0].primary.as_ref().unwrap().path,
        "tests/typed.rs"
    );
}

#[test]
fn warnings_only_crate_passes_both_stages() {
    let files = [
        ("Cargo.toml", manifest("clean")),
        (
            "src/lib.rs",
            "pub fn id(x: u8) -> u8 {\n    let unused = 1;\n    x\n}\n\n#[test]\nfn keeps() {\n    assert_eq!(id(3), 3);\n}\n"
                .to_owned(),
        ),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &files);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let toolchain = toolchain(dir.path()).await;
        let check = measure(&CargoStage::check(&toolchain), dir.path(), GENEROUS).await;
        assert_eq!(check.status, StageStatus::Passed, "{check:#?}");
        let [warning] = check.diagnostics.as_slice() else {
            panic!("one warning expected: {:#?}", check.diagnostics);
        };
        assert_eq!(warning.level, Level::Warning);
        assert_eq!(warning.code.as_deref(), Some("unused_variables"));
        let test = measure(&CargoStage::test(&toolchain), dir.path(), GENEROUS).await;
        assert_eq!(test.status, StageStatus::Passed, "{test:#?}");
        assert_eq!(test.tests_passed, 1);
        assert!(!test.truncated);
    });
}

#[test]
fn aborting_test_binary_is_a_failure_of_that_binary() {
    let report = measure_crate(
        &[
            ("Cargo.toml", &manifest("aborts")),
            (
                "src/lib.rs",
                "#[test]\nfn aborts() {\n    std::process::abort();\n}\n",
            ),
        ],
        "test",
    );
    assert_eq!(report.status, StageStatus::Failed, "{report:#?}");
    let [failure] = report.failures.as_slice() else {
        panic!("one failure expected: {:#?}", report.failures);
    };
    assert_eq!(failure.binary, "--lib");
    assert_eq!(failure.name, ABNORMAL_EXIT);
    assert!(failure.output.contains("SIGABRT"), "{}", failure.output);
}

// ---------------------------------------------------------------------------
// Workspaces and manifests.

#[test]
fn workspace_members_report_paths_relative_to_the_workspace_root() {
    let report = measure_crate(
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"alpha\", \"beta\"]\nresolver = \"3\"\n",
            ),
            ("alpha/Cargo.toml", &manifest("alpha")),
            ("alpha/src/lib.rs", "pub fn fine() {}\n"),
            ("beta/Cargo.toml", &manifest("beta")),
            ("beta/src/lib.rs", "pub fn wrong() -> u32 {\n    \"x\"\n}\n"),
        ],
        "build",
    );
    assert_eq!(report.status, StageStatus::Failed);
    let mismatched = with_code(&report, "E0308");
    assert_eq!(mismatched.len(), 1, "{:#?}", report.diagnostics);
    let primary = mismatched[0].primary.as_ref().unwrap();
    assert_eq!(primary.path, "beta/src/lib.rs");
    assert_eq!(primary.line_start, 2);
}

#[test]
fn broken_manifest_is_unavailable_and_points_at_the_manifest() {
    let report = measure_crate(
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"bad\"\nversion = \"0.1.0\"\nedition = \"2024\"\n[dependencies\n",
            ),
            ("src/lib.rs", ""),
        ],
        "build",
    );
    let StageStatus::Unavailable { reason } = &report.status else {
        panic!("unavailable expected: {report:#?}");
    };
    assert!(reason.contains("unclosed table"), "{reason}");
    let [diagnostic] = report.diagnostics.as_slice() else {
        panic!(
            "one manifest diagnostic expected: {:#?}",
            report.diagnostics
        );
    };
    let primary = diagnostic.primary.as_ref().unwrap();
    assert_eq!(
        (primary.path.as_str(), primary.line_start),
        ("Cargo.toml", 5)
    );
}

// ---------------------------------------------------------------------------
// Infrastructure failures.

#[tokio::test]
async fn missing_cargo_makes_every_stage_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-cargo");
    let toolchain = CargoToolchain::detect(missing.as_os_str(), dir.path()).await;
    assert!(toolchain.version().is_err());
    let sensors: [Box<dyn Sensor>; 2] = [
        Box::new(CargoStage::check(&toolchain)),
        Box::new(CargoStage::test(&toolchain)),
    ];
    for sensor in &sensors {
        let report = measure(sensor.as_ref(), dir.path(), GENEROUS).await;
        let StageStatus::Unavailable { reason } = &report.status else {
            panic!("unavailable expected: {report:#?}");
        };
        assert!(reason.contains("no-such-cargo` was not found"), "{reason}");
        assert_eq!(report.fingerprint.version, "unavailable");
    }
}

#[tokio::test]
async fn rust_sensors_fill_the_build_and_test_stages() {
    let dir = tempfile::tempdir().unwrap();
    let sensors = rust_sensors(dir.path(), None, true).await;
    let stages: Vec<&str> = sensors.iter().map(|sensor| sensor.stage()).collect();
    assert_eq!(stages, ["build", "test"]);
    for sensor in &sensors {
        let fingerprint = sensor.fingerprint();
        assert!(fingerprint.version.starts_with("cargo "), "{fingerprint:?}");
        assert!(fingerprint.version.contains("; rustc "), "{fingerprint:?}");
        assert!(
            fingerprint.config.contains("--message-format=json"),
            "{fingerprint:?}"
        );
    }
    assert_ne!(
        sensors[0].fingerprint().digest(),
        sensors[1].fingerprint().digest()
    );
}

/// True once `pid` is gone or a zombie awaiting its reaper.
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Poll until `pid` is dead; killed processes are reaped asynchronously.
async fn assert_dies(pid: u32) {
    for _ in 0..100 {
        if is_dead(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("process {pid} is still running");
}

#[tokio::test]
async fn timeout_kills_a_hanging_test_binary() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("Cargo.toml", &manifest("hang")),
            (
                "src/lib.rs",
                "#[test]
fn hangs_forever() {
    let pid_file = concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/hang.pid\");
    std::fs::write(pid_file, std::process::id().to_string()).unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
",
            ),
        ],
    );
    // Build first so the deadline is spent running, not compiling.
    let built = Command::new("cargo")
        .args(["test", "--no-run", "--quiet"])
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .status()
        .await
        .unwrap();
    assert!(built.success());

    let toolchain = toolchain(dir.path()).await;
    // Long enough for cargo to start a prebuilt binary on a loaded machine.
    let deadline = Duration::from_secs(15);
    let report = measure(&CargoStage::test(&toolchain), dir.path(), deadline).await;
    assert_eq!(
        report.status,
        StageStatus::Unavailable {
            reason: "`cargo` timed out after 15s".into()
        }
    );
    let pid: u32 = std::fs::read_to_string(dir.path().join("hang.pid"))
        .expect("the test binary started before the deadline")
        .parse()
        .unwrap();
    assert_dies(pid).await;
}

// ---------------------------------------------------------------------------
// The process runner on its own.

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    cmd
}

#[tokio::test]
async fn runner_drains_both_streams_past_their_caps() {
    // stderr is written first and fills its pipe long before stdout sees a
    // byte: only concurrent draining lets this finish.
    let script = "head -c 5242880 /dev/zero >&2; head -c 5242880 /dev/zero; echo done >&2";
    let limits = ProcessLimits::with_deadline(GENEROUS);
    let output = run_bounded(
        sh(script),
        Confinement::Unconfined,
        &limits,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout.len(), limits.stdout_cap);
    assert_eq!(output.stderr.len(), limits.stderr_cap);
    assert_eq!(limits.stdout_cap, 2 * 1024 * 1024);
    assert!(output.stdout_truncated && output.stderr_truncated);
}

#[tokio::test]
async fn runner_keeps_small_output_whole() {
    let limits = ProcessLimits::with_deadline(GENEROUS);
    let output = run_bounded(
        sh("printf out; printf err >&2; exit 3"),
        Confinement::Unconfined,
        &limits,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        (output.stdout.as_slice(), output.stderr.as_slice()),
        (&b"out"[..], &b"err"[..])
    );
    assert!(!output.truncated());
}

#[tokio::test]
async fn runner_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let script = format!("sleep 1000 & echo $! > '{}'; wait", pid_file.display());
    let limits = ProcessLimits::with_deadline(Duration::from_secs(2));
    let error = run_bounded(
        sh(&script),
        Confinement::Unconfined,
        &limits,
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, ProcessError::Timeout { program, after } if program == "sh" && *after == limits.deadline),
        "{error:?}"
    );
    let grandchild: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_dies(grandchild).await;
}

#[tokio::test]
async fn runner_cancellation_kills_and_reports_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    // Written aside and renamed, so the file never exists without its pid.
    let script = format!(
        "echo $$ > '{0}.tmp' && mv '{0}.tmp' '{0}'; exec sleep 1000",
        pid_file.display()
    );
    let cancel = CancellationToken::new();
    let trigger = {
        let cancel = cancel.clone();
        let pid_file = pid_file.clone();
        tokio::spawn(async move {
            let pid = pid_from(&pid_file).await;
            cancel.cancel();
            pid
        })
    };
    let error = run_bounded(
        sh(&script),
        Confinement::Unconfined,
        &ProcessLimits::with_deadline(GENEROUS),
        &cancel,
    )
    .await
    .unwrap_err();
    let pid = trigger.await.unwrap();
    assert!(matches!(error, ProcessError::Cancelled { .. }), "{error:?}");
    assert_dies(pid).await;
}

/// Wait until `path` exists, then read the pid written into it.
async fn pid_from(path: &Path) -> u32 {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text.trim().parse().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dropping_a_run_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let script = format!(
        "sleep 1000 & echo $! > '{0}.tmp' && mv '{0}.tmp' '{0}'; wait",
        pid_file.display()
    );
    let limits = ProcessLimits::with_deadline(GENEROUS);
    let cancel = CancellationToken::new();
    let grandchild = tokio::select! {
        result = run_bounded(sh(&script),Confinement::Unconfined, &limits, &cancel) => panic!("finished: {result:?}"),
        pid = pid_from(&pid_file) => pid,
    };
    // The run's future is gone: a superseding run dropped it.
    assert_dies(grandchild).await;
}

#[tokio::test]
async fn runner_reports_a_program_that_cannot_start() {
    let error = run_bounded(
        Command::new("/nonexistent/trellis-tool"),
        Confinement::Unconfined,
        &ProcessLimits::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let ProcessError::Launch { program, .. } = &error else {
        panic!("launch error expected: {error:?}");
    };
    assert_eq!(program, "/nonexistent/trellis-tool");
    assert!(error.to_string().contains("/nonexistent/trellis-tool"));
}

// ---------------------------------------------------------------------------
// A test run that decides the build stage.

/// A crate with a warning in each target a check compiles: the library
/// (and its unit tests), a binary, an integration test and an example.
const WARNING_IN_EVERY_TARGET: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "fn lib_unused() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { let test_only = 1; }\n}\n",
    ),
    ("src/main.rs", "fn main() { let bin_unused = 1; }\n"),
    ("tests/it.rs", "#[test]\nfn it() { let it_unused = 1; }\n"),
    ("examples/ex.rs", "fn main() { let example_unused = 1; }\n"),
];

/// Each diagnostic as JSON, sorted: the same set in any order.
fn as_set(report: &StageReport) -> Vec<String> {
    let mut shown: Vec<String> = report
        .diagnostics
        .iter()
        .map(|d| serde_json::to_string(d).unwrap())
        .collect();
    shown.sort();
    shown
}

/// `cargo test` (deciding the build stage) and `cargo check` on one crate
/// of `files`, each in a target directory of its own.
async fn decided_and_checked(
    files: &[(&str, &str)],
) -> (StageReport, Option<StageReport>, StageReport) {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    let toolchain = toolchain(dir.path()).await;
    let (check, test) = (CargoStage::check(&toolchain), CargoStage::test(&toolchain));
    assert!(test.may_decide(&check));
    let targets = tempfile::tempdir().unwrap();
    let run = |target_dir| SensorRun {
        dir: dir.path(),
        target_dir,
        deadline: GENEROUS,
        cancel: CancellationToken::new(),
        policy: Policy::USER_CODE,
    };
    let (a, b) = (targets.path().join("a"), targets.path().join("b"));
    let (tested, decided) = test.run_deciding(run(&a)).await;
    let checked = check.run(run(&b)).await;
    (tested, decided, checked)
}

#[tokio::test]
async fn a_test_run_that_compiled_every_checked_target_decides_the_build_as_the_check_would() {
    let manifest = manifest("decided");
    let mut files = vec![("Cargo.toml", manifest.as_str())];
    files.extend_from_slice(WARNING_IN_EVERY_TARGET);
    let (tested, decided, checked) = decided_and_checked(&files).await;
    assert_eq!(tested.status, StageStatus::Passed, "{tested:#?}");
    let decided = decided.expect("the test build compiled every target the check does");
    assert_eq!(checked.status, StageStatus::Passed, "{checked:#?}");
    assert_eq!(decided.status, checked.status);
    assert_eq!(decided.stage, "build");
    assert_eq!(decided.fingerprint, checked.fingerprint);
    assert!(decided.not_run.is_some());
    // Five warnings, one per compilation: each target's and the unit test's.
    assert_eq!(checked.diagnostics.len(), 5, "{checked:#?}");
    assert_eq!(as_set(&decided), as_set(&checked));
}

#[tokio::test]
async fn a_test_run_decides_no_build_it_did_not_cover() {
    let bench = manifest("undecided") + "\n[[bench]]\nname = \"speed\"\nharness = false\n";
    let with_bench = [
        ("Cargo.toml", bench.as_str()),
        ("src/lib.rs", "pub fn one() -> u32 { 1 }\n"),
        ("benches/speed.rs", "fn main() {}\n"),
    ];
    let (tested, decided, _) = decided_and_checked(&with_bench).await;
    assert_eq!(tested.status, StageStatus::Passed, "{tested:#?}");
    assert!(decided.is_none(), "cargo test never compiled the bench");

    let manifest = manifest("broken");
    let broken = [
        ("Cargo.toml", manifest.as_str()),
        ("src/lib.rs", "pub fn one() -> u32 { missing }\n"),
    ];
    let (tested, decided, checked) = decided_and_checked(&broken).await;
    assert_eq!(tested.status, StageStatus::Failed, "{tested:#?}");
    assert_eq!(checked.status, StageStatus::Failed, "{checked:#?}");
    assert!(decided.is_none(), "a failed build decides nothing");
}
