//! Property tests of everything that reads cargo's output: the JSON compiler
//! messages (`rustc_json`), libtest's text (`libtest`) and the stage
//! interpretation around them (`interpret`, manifest errors, the stderr
//! summary), fed mutations of outputs recorded from real `cargo check
//! --message-format=json` and `cargo test` runs on the fixture crates
//! (`engine/tests/fixtures/recorded/`).
//!
//! Its properties: `damaged_cargo_output_is_read_within_bounds`,
//! `a_structurally_edited_compiler_message_is_read_or_counted`,
//! `reordered_fields_are_the_same_diagnostics`,
//! `damaged_libtest_output_is_read_within_bounds`,
//! `any_text_is_read_as_a_test_run`, `crlf_line_ends_are_the_same_observation`;
//! `sensor/cargo.rs` has `any_version_text_is_an_identity` and
//! `the_recorded_outputs_read_as_what_cargo_reported`.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

use proptest::prelude::*;
use trellis_core::fuzz;

use super::*;
use crate::diagnostic::Span;
use crate::sensor::libtest::{OUTPUT_CAP, TestRun, parse_test_run};

/// A recorded run: where it ran (the sources its spans point into) and
/// what cargo printed.
#[derive(Clone, Debug)]
struct Recording {
    root: PathBuf,
    reads_tests: bool,
    stdout: &'static str,
    stderr: &'static str,
}

macro_rules! recorded {
    ($fixture:literal, $root:expr, $run:literal, $reads_tests:literal) => {
        Recording {
            root: PathBuf::from($root),
            reads_tests: $reads_tests,
            stdout: include_str!(concat!(
                "../../tests/fixtures/recorded/",
                $fixture,
                ".",
                $run,
                ".stdout"
            )),
            stderr: include_str!(concat!(
                "../../tests/fixtures/recorded/",
                $fixture,
                ".",
                $run,
                ".stderr"
            )),
        }
    };
}

macro_rules! fixture {
    ($name:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/", $name)
    };
}

fn checks() -> Vec<Recording> {
    vec![
        recorded!("missing-import", fixture!("missing-import"), "check", false),
        recorded!(
            "ambiguous-import",
            fixture!("ambiguous-import"),
            "check",
            false
        ),
        recorded!("two-members", fixture!("two-members"), "check", false),
        recorded!("three-files", fixture!("three-files"), "check", false),
        recorded!("warnings-only", fixture!("warnings-only"), "check", false),
    ]
}

fn test_runs() -> Vec<Recording> {
    let trap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/recorded/trap-src"
    );
    vec![
        recorded!("trap", trap, "test", true),
        recorded!("warnings-only", fixture!("warnings-only"), "test", true),
    ]
}

fn all_recordings() -> Vec<Recording> {
    checks().into_iter().chain(test_runs()).collect()
}

fn output(code: i32, stdout: Vec<u8>, stderr: Vec<u8>, stdout_truncated: bool) -> ProcessOutput {
    ProcessOutput {
        status: ExitStatus::from_raw(code << 8),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated: false,
        elapsed: Duration::ZERO,
    }
}

fn interpret_bounded(recording: &Recording, output: &ProcessOutput) -> Observation {
    let mut paths = WorkspacePaths::new(&recording.root, &recording.root.join("target")).unwrap();
    let input = output.stdout.len() + output.stderr.len();
    fuzz::bounded("interpret", fuzz::budget(input), || {
        interpret("test", recording.reads_tests, output, &mut paths).observation
    })
}

fn confined(span: &Span) -> bool {
    !span.path.is_empty()
        && !span.path.starts_with('/')
        && span
            .path
            .split('/')
            .all(|part| !part.is_empty() && part != ".." && part != ".")
}

/// What a result may hold, whatever the input was: no more findings than
/// lines, capped outputs, spans inside the workspace, and a status that
/// follows from the findings.
fn check_observation(
    observation: &Observation,
    output: &ProcessOutput,
) -> Result<(), TestCaseError> {
    let lines =
        output.stdout.split(|&b| b == b'\n').count() + output.stderr.split(|&b| b == b'\n').count();
    prop_assert!(observation.diagnostics.len() + observation.failures.len() <= lines + 1);
    prop_assert!(observation.tests_passed as usize <= lines);
    for failure in &observation.failures {
        prop_assert!(failure.output.len() <= OUTPUT_CAP + "\n[output truncated]".len());
        prop_assert!(failure.location.as_ref().is_none_or(confined));
    }
    for diagnostic in &observation.diagnostics {
        prop_assert!(
            diagnostic
                .primary
                .iter()
                .chain(&diagnostic.secondary)
                .all(confined)
        );
    }
    let found_errors = observation
        .diagnostics
        .iter()
        .any(|d| d.level == Level::Error)
        || !observation.failures.is_empty();
    match &observation.status {
        StageStatus::Failed => prop_assert!(found_errors),
        StageStatus::Passed => prop_assert!(!found_errors && output.status.success()),
        StageStatus::Unavailable { reason } => prop_assert!(!reason.is_empty()),
    }
    Ok(())
}

fn recording() -> impl Strategy<Value = Recording> {
    prop::sample::select(all_recordings())
}

fn exit_code() -> impl Strategy<Value = i32> {
    prop::sample::select(vec![0, 1, 101, 255])
}

/// A recorded run with its stdout's lines damaged and its stderr perhaps too.
fn damaged() -> impl Strategy<Value = (Recording, ProcessOutput)> {
    (recording(), exit_code(), any::<bool>()).prop_flat_map(|(recording, code, truncated)| {
        let stdout = fuzz::mutated_lines(recording.stdout);
        let stderr = prop_oneof![
            Just(recording.stderr.as_bytes().to_vec()),
            fuzz::mutated_lines(recording.stderr),
        ];
        (Just(recording), stdout, stderr).prop_map(move |(recording, stdout, stderr)| {
            (recording, output(code, stdout, stderr, truncated))
        })
    })
}

fn with_crlf(text: &str) -> Vec<u8> {
    text.replace('\n', "\r\n").into_bytes()
}

fn libtest_bounded(stdout: &str, stderr: &str) -> TestRun {
    let input = stdout.len() + stderr.len();
    fuzz::bounded("parse_test_run", fuzz::budget(input), || {
        parse_test_run(stdout.lines(), stderr)
    })
}

proptest! {
    #![proptest_config(fuzz::config(96))]

    /// Truncated, dropped, repeated, moved lines; NULs, invalid UTF-8,
    /// huge numbers, deep nesting and enormous strings spliced in.
    #[test]
    fn damaged_cargo_output_is_read_within_bounds((recording, output) in damaged()) {
        let observation = interpret_bounded(&recording, &output);
        check_observation(&observation, &output)?;
    }

    /// One compiler message with a field removed, repeated, wrapped or of
    /// the wrong type: read or counted as malformed, the rest still read.
    #[test]
    fn a_structurally_edited_compiler_message_is_read_or_counted(
        recording in prop::sample::select(checks()),
        line in any::<prop::sample::Index>(),
        edit in fuzz::json_edit(),
    ) {
        let mut lines: Vec<String> = recording.stdout.lines().map(str::to_owned).collect();
        let at = line.index(lines.len());
        let value: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
        lines[at] = fuzz::apply_json(&value, &edit);
        let output = output(101, lines.join("\n").into_bytes(), recording.stderr.as_bytes().to_vec(), false);
        let observation = interpret_bounded(&recording, &output);
        check_observation(&observation, &output)?;
    }

    /// Cargo's messages with their fields in another order and other
    /// whitespace inside each line are the same diagnostics.
    #[test]
    fn reordered_fields_are_the_same_diagnostics(
        recording in prop::sample::select(checks()),
        order in any::<u64>(),
    ) {
        let rewritten: Vec<String> = recording
            .stdout
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                fuzz::rewrite_json(&value, order.wrapping_add(i as u64)).replace(['\n', '\r'], " ")
            })
            .collect();
        let read = |text: &str| {
            let mut paths = WorkspacePaths::new(&recording.root, &recording.root.join("target")).unwrap();
            let messages = fuzz::bounded("parse_compiler_messages", fuzz::budget(text.len()), || {
                rustc_json::parse_compiler_messages(text.lines(), "build", &mut paths)
            });
            (messages.diagnostics, messages.malformed_lines)
        };
        prop_assert_eq!(read(&rewritten.join("\n")), read(recording.stdout));
    }

    /// libtest's text alone, damaged: failures and passes within bounds.
    #[test]
    fn damaged_libtest_output_is_read_within_bounds(
        recording in prop::sample::select(test_runs()),
        edits in fuzz::byte_edits(),
        stderr_edits in fuzz::byte_edits(),
    ) {
        let stdout = String::from_utf8_lossy(&fuzz::apply_bytes(recording.stdout.as_bytes(), &edits)).into_owned();
        let stderr = String::from_utf8_lossy(&fuzz::apply_bytes(recording.stderr.as_bytes(), &stderr_edits)).into_owned();
        let run = libtest_bounded(&stdout, &stderr);
        prop_assert!(run.failures.len() <= stdout.lines().count() + stderr.lines().count());
        for failure in &run.failures {
            prop_assert!(failure.output.len() <= OUTPUT_CAP + "\n[output truncated]".len());
        }
    }

    /// `rustc -vV` as any text: an identity no longer than what it printed.
    #[test]
    fn any_version_text_is_an_identity(text in prop_oneof![
        any::<String>(),
        fuzz::mutated_lines("rustc 1.95.0 (59807616e 2026-01-01)\nbinary: rustc\ncommit-hash: 59807616e\nrelease: 1.95.0\n")
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]) {
        let identity = fuzz::bounded("rustc_identity", fuzz::budget(text.len()), || rustc_identity(&text));
        prop_assert!(identity.len() <= text.len() + "rustc  ()".len());
    }

    /// Arbitrary text: never a panic.
    #[test]
    fn any_text_is_read_as_a_test_run(stdout in any::<String>(), stderr in any::<String>()) {
        libtest_bounded(&stdout, &stderr);
    }
}

/// CRLF line ends (a Windows cargo, a pipe through a tool that adds them)
/// read the same as LF.
#[test]
fn crlf_line_ends_are_the_same_observation() {
    for recording in all_recordings() {
        let lf = output(101, recording.stdout.into(), recording.stderr.into(), false);
        let crlf = output(
            101,
            with_crlf(recording.stdout),
            with_crlf(recording.stderr),
            false,
        );
        let (lf, crlf) = (
            interpret_bounded(&recording, &lf),
            interpret_bounded(&recording, &crlf),
        );
        assert_eq!(
            lf.diagnostics,
            crlf.diagnostics,
            "{}",
            recording.root.display()
        );
        assert_eq!(lf.failures, crlf.failures, "{}", recording.root.display());
        assert_eq!(lf.tests_passed, crlf.tests_passed);
    }
}

/// The recordings are what the properties mutate: they must read as what
/// cargo reported, or a mutation would start from nothing.
#[test]
fn the_recorded_outputs_read_as_what_cargo_reported() {
    let missing_import = checks().swap_remove(0);
    let check = output(
        101,
        missing_import.stdout.into(),
        missing_import.stderr.into(),
        false,
    );
    let observation = interpret_bounded(&missing_import, &check);
    assert_eq!(observation.status, StageStatus::Failed);
    assert!(observation.notes.is_empty(), "{:?}", observation.notes);
    let primary = observation.diagnostics[0].primary.as_ref().unwrap();
    assert_eq!(primary.path, "src/lib.rs");

    let trap = test_runs().swap_remove(0);
    let test = output(101, trap.stdout.into(), trap.stderr.into(), false);
    let observation = interpret_bounded(&trap, &test);
    let mut failed: Vec<(&str, &str)> = observation
        .failures
        .iter()
        .map(|f| (f.binary.as_str(), f.name.as_str()))
        .collect();
    failed.sort_unstable();
    assert_eq!(
        failed,
        [
            ("--lib", "more::prints_then_fails"),
            ("--lib", "more::should_panic_but_does_not"),
            ("--lib", "tests::run_doubles"),
            ("--test it", "integration_fails"),
        ]
    );
    assert_eq!(observation.tests_passed, 2);
    let located = observation
        .failures
        .iter()
        .find(|f| f.name == "more::prints_then_fails")
        .unwrap();
    assert_eq!(located.location.as_ref().unwrap().path, "src/lib.rs");
    assert!(located.output.contains("some captured output"));
}
