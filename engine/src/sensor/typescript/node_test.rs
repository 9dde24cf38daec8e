//! Stage `typescript.test`: the project's own test command,
//! its failing tests read from Node's test runner or jest as
//! counterexamples.
//!
//! The command is the `test` script of the workspace's `package.json`, run
//! the way `npm test` runs it (`sh -c` in the project directory, with
//! `node_modules/.bin` first on `PATH`), or `node --test` when there is
//! none. It is read once per session from the user's workspace, never from
//! a branch, so a candidate that edits `package.json` cannot change how it
//! is verified. `NODE_OPTIONS` asks every `node --test` the command starts
//! for a TAP report into a file below the slot's target directory
//! ([`super::tap`]): each failing test is a [`TestFailure`] keyed by its
//! file and its name within its suites, with the report's failure text.
//!
//! A script with a `jest` word (`tsc -p . && jest dist`), or no script and
//! `jest` among the project's dependencies (then the command is `jest`),
//! runs jest: its JSON report (`--json --outputFile=<file below the slot's
//! target directory> --testLocationInResults`, [`super::jest`]) is asked for
//! on the command line, right after the script's first `jest` word, since
//! jest takes no flags from the environment. The script itself runs as
//! written (its build step too), and no configuration file is touched;
//! `npm test -- <flags>` was not chosen because it appends to the script's
//! end, which reaches jest only when jest ends the script. A report that is
//! truncated or not jest's JSON makes the stage unavailable, saying why.
//! A file a compiled test names (`dist/test/a.test.js`) is named by its
//! source ([`super::out_dir`]).
//!
//! A command whose runner writes no report (another test framework, or a
//! build step that failed before jest ran) is judged by its exit code
//! alone, and says so in a note. Declared nondeterministic, the stage
//! re-runs its failing tests alone, by name ([`super::rerun`]).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokio::process::Command;

use super::jest;
use super::node_tools::{NodeTools, Tool, tail};
use super::out_dir::OutDir;
use super::position::{self, span_of};
use super::rerun::{self, Again, JEST, TEST, TestKey, UNLOCATED};
use super::tap::{self, Outcome, TapResult, TapRun};
use crate::diagnostic::{Span, TestFailure};
use crate::sensor::Observation;
use crate::sensor::libtest::cap_output;
use crate::sensor::process::{
    Confinement, ProcessError, ProcessLimits, ProcessOutput, run_bounded,
};
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::ToolUse;
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};
use crate::workspace_path::WorkspacePath;

const STAGE: &str = "typescript.test";

/// What `NODE_OPTIONS` gains for a run, before the report's path.
const REPORTER: &str = "--test-reporter=tap --test-reporter-destination=";

/// The script `npm init` writes: a placeholder, not a test command.
const NPM_PLACEHOLDER: &str = "echo \"Error: no test specified\" && exit 1";

/// The file of the failure that stands for the whole command (it failed
/// without a failing test to show): no test a name can select.
const COMMAND_FAILURE: &str = "package.json";

/// The most of a report that is read (a test printing without end must
/// not exhaust memory); the rest is left unread and noted.
const REPORT_CAP: u64 = 8 * 1024 * 1024;

/// The runner whose report a run is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runner {
    Node,
    Jest,
}

/// How the project runs its tests.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TestCommand {
    /// `scripts.test` of `package.json`.
    Script(String),
    /// No script: Node's runner on the project's test files.
    NodeTest,
}

impl TestCommand {
    /// The command of the project at `workspace`, or why `package.json`
    /// cannot say.
    fn of(workspace: &Path) -> Result<TestCommand, String> {
        let manifest = workspace.join("package.json");
        let text = match std::fs::read_to_string(&manifest) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TestCommand::NodeTest);
            }
            Err(error) => return Err(format!("{}: {error}", manifest.display())),
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|error| format!("{} is not JSON: {error}", manifest.display()))?;
        let depends_on_jest = ["devDependencies", "dependencies"]
            .iter()
            .any(|list| value[list].get(JEST).is_some());
        match &value["scripts"]["test"] {
            serde_json::Value::String(script)
                if !script.trim().is_empty() && script.trim() != NPM_PLACEHOLDER =>
            {
                Ok(TestCommand::Script(script.clone()))
            }
            serde_json::Value::Null | serde_json::Value::String(_) if depends_on_jest => {
                Ok(TestCommand::Script(JEST.into()))
            }
            serde_json::Value::Null | serde_json::Value::String(_) => Ok(TestCommand::NodeTest),
            _ => Err(format!(
                "{}: `scripts.test` is not a string",
                manifest.display()
            )),
        }
    }

    /// jest for a script with a `jest` word, else Node's runner.
    fn runner(&self) -> Runner {
        match self {
            TestCommand::Script(script) if rerun::word_end(script, JEST).is_some() => Runner::Jest,
            _ => Runner::Node,
        }
    }

    /// The command, with `flags` for its runner after its `--test` or
    /// `jest`; `None` when the script has no such word to put them after.
    fn command(&self, node: &OsString, flags: &[String]) -> Option<Command> {
        match self {
            TestCommand::Script(script) => {
                let word = match self.runner() {
                    Runner::Node => TEST,
                    Runner::Jest => JEST,
                };
                let script = if flags.is_empty() {
                    script.clone()
                } else {
                    rerun::narrowed_script(script, word, flags)?
                };
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(script);
                Some(cmd)
            }
            TestCommand::NodeTest => {
                let mut cmd = Command::new(node);
                cmd.arg("--test").args(flags);
                Some(cmd)
            }
        }
    }

    fn shown(&self) -> String {
        match self {
            TestCommand::Script(script) => format!("sh -c {script:?}"),
            TestCommand::NodeTest => "node --test".into(),
        }
    }
}

/// Stage `typescript.test`: the project's test command under Node's TAP
/// reporter or jest's JSON one.
pub struct NodeTest {
    node: Tool,
    command: Result<TestCommand, String>,
    out_dir: OutDir,
    fingerprint: SensorFingerprint,
}

impl NodeTest {
    /// The test stage of the project at `workspace`, its command read now.
    pub fn new(tools: &NodeTools, workspace: &Path) -> Self {
        let command = TestCommand::of(workspace);
        let shown = command
            .as_ref()
            .map_or_else(|error| format!("unreadable: {error}"), TestCommand::shown);
        let (tool, reporter) = match command.as_ref().map(TestCommand::runner) {
            Ok(Runner::Jest) => ("jest", jest::report_flags(Path::new("<file>")).join(" ")),
            _ => ("node-test", format!("NODE_OPTIONS={REPORTER}<file>")),
        };
        NodeTest {
            node: tools.node.clone(),
            fingerprint: SensorFingerprint {
                tool: tool.into(),
                version: tools.node.identity("node"),
                config: format!("{reporter} FORCE_COLOR=0 {shown}"),
            },
            command,
            out_dir: OutDir::of(workspace),
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let started = Instant::now();
        let observation = match (&self.node.version, &self.command) {
            (Err(reason), _) | (_, Err(reason)) => Observation::unavailable(reason.clone()),
            (Ok(_), Ok(command)) => self.observe(command, &[], &run).await.0,
        };
        observation.into_report(STAGE, &self.fingerprint, started)
    }

    /// Runs the failing tests `failures` once more, selected by name, with
    /// the same command in the same tree, and marks each failed again,
    /// passed (reported passing), or not re-run (the failure of the command
    /// itself, a script that cannot be narrowed, a re-run that could not
    /// run).
    async fn rerun(&self, run: SensorRun<'_>, failures: &[TestFailure]) -> Vec<TestFailure> {
        let selected = |f: &TestFailure| f.binary != COMMAND_FAILURE;
        let chosen = failures.iter().filter(|f| selected(f));
        let flags = match self.command.as_ref().map(TestCommand::runner) {
            Ok(Runner::Jest) => rerun::jest_pattern_flag(chosen).into_iter().collect(),
            _ => rerun::pattern_flags(chosen),
        };
        let again = match (&self.node.version, &self.command) {
            (Ok(_), Ok(command)) if !flags.is_empty() && !run.cancel.is_cancelled() => {
                match self.observe(command, &flags, &run).await {
                    (observation, Some(passed)) => {
                        let ran = !matches!(observation.status, StageStatus::Unavailable { .. });
                        ran.then(|| Again {
                            failed: observation
                                .failures
                                .into_iter()
                                .map(|f| (f.binary, f.name))
                                .collect(),
                            passed,
                        })
                    }
                    (_, None) => None,
                }
            }
            _ => None,
        };
        crate::sensor::rerun_outcome(failures, |f| rerun::outcome(f, selected(f), again.as_ref()))
    }

    /// One run of `command` with `flags` for its runner: its observation
    /// and the tests it reported passing, or `None` for those when the
    /// command could not be built or run.
    async fn observe(
        &self,
        command: &TestCommand,
        flags: &[String],
        run: &SensorRun<'_>,
    ) -> (Observation, Option<Vec<TestKey>>) {
        let runner = command.runner();
        let report = report_path(run, runner);
        let flags = match runner {
            Runner::Node => flags.to_vec(),
            Runner::Jest => [jest::report_flags(&report), flags.to_vec()].concat(),
        };
        let Some(mut cmd) = command.command(&self.node.program, &flags) else {
            let reason = format!("`{}` has no `--test` to select tests by", command.shown());
            return (Observation::unavailable(reason), None);
        };
        if let Err(error) = self.out_dir.mark_build_output(run.dir) {
            let reason = format!(
                "cannot mark the build output of {}: {error}",
                run.dir.display()
            );
            return (Observation::unavailable(reason), None);
        }
        if let Err(error) = std::fs::create_dir_all(run.own_target()).and_then(|()| {
            match std::fs::remove_file(&report) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            }
        }) {
            let reason = format!(
                "cannot prepare the test report {}: {error}",
                report.display()
            );
            return (Observation::unavailable(reason), None);
        }
        if runner == Runner::Node {
            let mut options: OsString = std::env::var_os("NODE_OPTIONS").unwrap_or_default();
            if !options.is_empty() {
                options.push(" ");
            }
            options.push(REPORTER);
            options.push(&report);
            cmd.env("NODE_OPTIONS", options);
        }
        cmd.current_dir(run.dir)
            .env("PATH", search_path(run.dir))
            .env("FORCE_COLOR", "0");
        let limits = ProcessLimits::with_deadline(run.deadline);
        let sandbox = run.sandbox();
        let confinement = Confinement::Slot(&sandbox, None);
        let output = match run_bounded(cmd, confinement, &limits, &run.cancel).await {
            Ok(output) => output,
            Err(error @ ProcessError::Launch { .. }) => {
                let reason = format!("the test command cannot start: {error}");
                return (Observation::unavailable(reason), None);
            }
            Err(error) => return (Observation::unavailable(error.to_string()), None),
        };
        let (report, report_truncated) = read_report(&report);
        let mut paths = match WorkspacePaths::new(run.dir, run.target_dir) {
            Ok(paths) => paths,
            Err(error) => {
                let reason = format!("workspace {} cannot be read: {error}", run.dir.display());
                return (Observation::unavailable(reason), None);
            }
        };
        let (mut observation, passed) = interpret(
            command,
            &output,
            report.as_deref(),
            run.dir,
            &mut Sources::new(&mut paths, &self.out_dir),
        );
        if report_truncated {
            observation.notes.push(format!(
                "the test report exceeded {} MiB; later results were not read",
                REPORT_CAP / (1024 * 1024)
            ));
        }
        (observation, Some(passed))
    }
}

impl Sensor for NodeTest {
    fn stage(&self) -> &str {
        STAGE
    }

    fn fingerprint(&self) -> &SensorFingerprint {
        &self.fingerprint
    }

    fn tools(&self) -> Vec<ToolUse> {
        self.node.used_by(STAGE).into_iter().collect()
    }

    fn run<'a>(&'a self, run: SensorRun<'a>) -> BoxFuture<'a, StageReport> {
        Box::pin(self.measure(run))
    }

    fn rerun<'a>(
        &'a self,
        run: SensorRun<'a>,
        failures: &'a [TestFailure],
    ) -> BoxFuture<'a, Vec<TestFailure>> {
        Box::pin(self.rerun(run, failures))
    }
}

/// The report file of a run in `run.dir`: in the measured tree's own
/// directory, where its sandbox lets the runner write it.
fn report_path(run: &SensorRun<'_>, runner: Runner) -> PathBuf {
    run.own_target().join(match runner {
        Runner::Node => "node-test.tap",
        Runner::Jest => "jest.json",
    })
}

/// `PATH` as `npm test` sets it: the project's `node_modules/.bin` first.
fn search_path(dir: &Path) -> OsString {
    let mut path = dir.join("node_modules").join(".bin").into_os_string();
    if let Some(inherited) = std::env::var_os("PATH") {
        path.push(":");
        path.push(inherited);
    }
    path
}

/// The report, if the run wrote one, and whether it was cut at the cap.
fn read_report(path: &Path) -> (Option<String>, bool) {
    let Ok(file) = std::fs::File::open(path) else {
        return (None, false);
    };
    let mut bytes = Vec::new();
    if file.take(REPORT_CAP + 1).read_to_end(&mut bytes).is_err() {
        return (None, false);
    }
    let truncated = bytes.len() as u64 > REPORT_CAP;
    if truncated {
        // Keep whole lines only: a cut line is incomplete, not malformed.
        let end = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        bytes.truncate(end);
    }
    (
        Some(String::from_utf8_lossy(&bytes).into_owned()),
        truncated,
    )
}

/// Workspace-relative text: the measured tree's absolute paths (as files
/// and as `file://` URLs) removed, so a failure reads the same in every
/// slot.
fn relative_text(text: &str, prefixes: &[String]) -> String {
    let mut text = text.to_owned();
    for prefix in prefixes {
        text = text
            .replace(&format!("file://{prefix}"), "")
            .replace(prefix, "");
    }
    text
}

/// `/w/src/a.ts:3:29` in a stack frame or a `location`: the file, line and
/// column, from `summary (file:///w/src/a.ts:3:29)` too.
fn frame_position(frame: &str) -> Option<(String, u32, u32)> {
    let frame = frame.trim();
    let inner = match (frame.rfind('('), frame.strip_suffix(')')) {
        (Some(open), Some(_)) => &frame[open + 1..frame.len() - 1],
        _ => frame,
    };
    let mut parts = inner.rsplitn(3, ':');
    let column = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let file = parts.next()?;
    let file = match file.strip_prefix("file://") {
        Some(path) => path.replace("%20", " "),
        None => file.to_owned(),
    };
    Some((file, line, column))
}

/// Files' texts, each read once per interpretation, and the sources of
/// compiled files.
struct Sources<'a> {
    paths: &'a mut WorkspacePaths,
    out_dir: &'a OutDir,
    texts: HashMap<WorkspacePath, Option<String>>,
}

impl<'a> Sources<'a> {
    fn new(paths: &'a mut WorkspacePaths, out_dir: &'a OutDir) -> Self {
        Sources {
            paths,
            out_dir,
            texts: HashMap::new(),
        }
    }

    /// The workspace file `file` names, by its source when it is compiled.
    fn file(&mut self, file: &str, prefixes: &[String]) -> Option<WorkspacePath> {
        let source = self.out_dir.source(file, prefixes);
        self.paths.relative(source.as_deref().unwrap_or(file))
    }

    /// The span at `line` and `column` of `file`; none in a compiled file,
    /// whose lines are not its source's.
    fn span(&mut self, file: &str, line: u32, column: u32, prefixes: &[String]) -> Option<Span> {
        if self.out_dir.source(file, prefixes).is_some() {
            return None;
        }
        let path = self.paths.relative(file)?;
        let paths = &*self.paths;
        let text = self
            .texts
            .entry(path.clone())
            .or_insert_with(|| paths.source(&path))
            .as_deref()?;
        let start = position::byte_offset(text, line, column)?;
        Some(span_of(path, text, start, position::token_end(text, start)))
    }
}

/// The test's file (where it is declared, by its source when it is
/// compiled) and its workspace-relative name: how a failure and a re-run's
/// result are matched. A failure named by its compiled file is named by
/// the source, like its key.
fn key(result: &TapResult, prefixes: &[String], sources: &mut Sources<'_>) -> TestKey {
    let binary = result
        .location
        .as_deref()
        .and_then(frame_position)
        .and_then(|(file, _, _)| sources.file(&file, prefixes))
        .map_or_else(|| UNLOCATED.to_owned(), |path| path.to_string());
    let name = result.name();
    let name = match sources.out_dir.source(&name, prefixes) {
        Some(source) => source,
        None => name,
    };
    (binary, relative_text(&name, prefixes))
}

fn failure(result: &TapResult, prefixes: &[String], sources: &mut Sources<'_>) -> TestFailure {
    let declared = result.location.as_deref().and_then(frame_position);
    let (binary, name) = key(result, prefixes, sources);
    // Where it failed: the innermost frame in a workspace file (the
    // assertion, or the function that threw), else where the test is.
    let location = result
        .stack
        .iter()
        .filter_map(|frame| frame_position(frame))
        .find_map(|(file, line, column)| sources.span(&file, line, column, prefixes))
        .or_else(|| {
            let (file, line, column) = declared.as_ref()?;
            sources.span(file, *line, *column, prefixes)
        });
    TestFailure {
        binary,
        name,
        output: cap_output(&relative_text(&result.detail, prefixes)),
        location,
        calls: Vec::new(),
        rerun: None,
    }
}

/// Turns a run and its report into the stage's observation and the tests
/// (not suites) it reported passing.
fn interpret(
    command: &TestCommand,
    output: &ProcessOutput,
    report: Option<&str>,
    dir: &Path,
    sources: &mut Sources<'_>,
) -> (Observation, Vec<TestKey>) {
    let mut prefixes = vec![format!("{}/", dir.display())];
    if let Ok(canonical) = dir.canonicalize() {
        prefixes.insert(0, format!("{}/", canonical.display()));
    }
    let runner = command.runner();
    let run = match (runner, report) {
        (_, None) => TapRun::default(),
        (Runner::Node, Some(text)) => tap::parse(text),
        (Runner::Jest, Some(text)) => match jest::parse(text.as_bytes()) {
            Ok(run) => run,
            Err(error) => {
                let reason = format!(
                    "`{}`: jest's report cannot be read: {error}",
                    command.shown()
                );
                return (Observation::unavailable(reason), Vec::new());
            }
        },
    };
    let mut failures: Vec<TestFailure> = run
        .results
        .iter()
        .filter(|result| result.is_counterexample())
        .map(|result| failure(result, &prefixes, sources))
        .collect();
    let passed = run
        .results
        .iter()
        .filter(|result| result.outcome == Outcome::Passed && !result.suite)
        .map(|result| key(result, &prefixes, sources))
        .collect();
    // By name alone: Node reports where a test is declared only when it
    // fails, so a file in the id would rename a test that starts passing.
    let tests_run = run
        .results
        .iter()
        .filter(|result| result.outcome != Outcome::Skipped && !result.suite)
        .map(|result| relative_text(&result.name(), &prefixes))
        .collect();
    let mut notes = Vec::new();
    if report.is_none() {
        let runner = match runner {
            Runner::Node => "Node's test runner",
            Runner::Jest => "jest",
        };
        notes.push(format!(
            "`{}` wrote no report from {runner}; its tests are judged by its exit code",
            command.shown()
        ));
    }
    if run.unread_lines > 0 {
        notes.push(format!(
            "skipped {} line(s) of the test report that were no TAP",
            run.unread_lines
        ));
    }
    if output.truncated() {
        notes.push("the test command's output exceeded the retained-byte cap".into());
    }
    let printed = || {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        relative_text(&tail(&format!("{stdout}\n{stderr}"), 4096), &prefixes)
    };
    let status = match output.status.code() {
        _ if !failures.is_empty() => StageStatus::Failed,
        Some(0) => StageStatus::Passed,
        // The shell's "not found" and "not executable": the command never ran.
        Some(126 | 127) => StageStatus::Unavailable {
            reason: format!(
                "`{}` could not run its command (exit {}): {}",
                command.shown(),
                output.status,
                printed()
            ),
        },
        _ => {
            // It failed without a failing test to show: a build step of the
            // script, a crash of the runner, another framework's failure.
            failures.push(TestFailure {
                binary: COMMAND_FAILURE.into(),
                name: command.shown(),
                // Why nothing finer is shown, where the failure is read.
                output: cap_output(&match report {
                    None => format!("{}:\n{}", notes[0], printed()),
                    Some(_) => printed(),
                }),
                location: None,
                calls: Vec::new(),
                rerun: None,
            });
            StageStatus::Failed
        }
    };
    let observation = Observation {
        status,
        diagnostics: Vec::new(),
        failures,
        tests_passed: run.passed(),
        tests_run,
        truncated: output.truncated(),
        notes,
        blocks_tests: None,
        unchecked: Vec::new(),
        failing: Vec::new(),
    };
    (observation, passed)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use std::time::Duration;

    use super::*;

    fn output(code: i32, stdout: &str) -> ProcessOutput {
        ProcessOutput {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    /// A tree like the recording's `/w`, in a temp dir.
    fn workspace() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("test")).unwrap();
        std::fs::write(
            dir.path().join("test/a.test.mjs"),
            include_str!("../../../tests/fixtures/recorded/typescript/suites/test/a.test.mjs"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("test/broken.test.mjs"),
            include_str!("../../../tests/fixtures/recorded/typescript/suites/test/broken.test.mjs"),
        )
        .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let report = include_str!("../../../tests/fixtures/recorded/typescript/suites.test.tap")
            .replace("/w/", &format!("{}/", root.display()));
        (dir, report)
    }

    fn interpret_in(dir: &Path, code: i32, report: Option<&str>) -> Observation {
        let mut paths = WorkspacePaths::new(dir, &dir.join("target")).unwrap();
        interpret(
            &TestCommand::NodeTest,
            &output(code, "out"),
            report,
            dir,
            &mut Sources::new(&mut paths, &OutDir::default()),
        )
        .0
    }

    #[test]
    fn every_test_that_passed_or_failed_is_listed_by_name_and_skips_and_suites_are_not() {
        let (dir, report) = workspace();
        let mut run = interpret_in(dir.path(), 1, Some(&report)).tests_run;
        run.sort();
        assert_eq!(
            run,
            [
                "adds",
                "ok",
                "suite > inner fails",
                "suite > inner passes",
                "suite > nested # hash > deepest fails",
                "test/broken.test.mjs",
            ]
        );
    }

    #[test]
    fn failing_tests_are_keyed_by_file_and_suite_path_and_located_where_they_failed() {
        let (dir, report) = workspace();
        let observation = interpret_in(dir.path(), 1, Some(&report));
        assert_eq!(observation.status, StageStatus::Failed);
        assert_eq!(observation.tests_passed, 2);
        let keys: Vec<(&str, &str)> = observation
            .failures
            .iter()
            .map(|f| (f.binary.as_str(), f.name.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("test/a.test.mjs", "adds"),
                ("test/a.test.mjs", "suite > inner fails"),
                ("test/a.test.mjs", "suite > nested # hash > deepest fails"),
                ("test/broken.test.mjs", "test/broken.test.mjs"),
            ]
        );
        let adds = &observation.failures[0];
        let at = adds.location.as_ref().unwrap();
        assert_eq!(
            (at.path.as_str(), at.line_start),
            ("test/a.test.mjs", 5),
            "the assertion, not the declaration"
        );
        assert!(adds.output.contains("2 !== 3"), "{}", adds.output);
        let root = dir.path().canonicalize().unwrap();
        for failure in &observation.failures {
            assert!(
                !failure.output.contains(&*root.to_string_lossy()),
                "{}",
                failure.output
            );
        }
        assert!(observation.notes.is_empty(), "{:?}", observation.notes);
    }

    #[test]
    fn passing_tests_are_keyed_like_failures_and_skipped_ones_are_no_pass() {
        // Node 20 names no file for a passing test.
        let (dir, report) = workspace();
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        let (_, passed) = interpret(
            &TestCommand::NodeTest,
            &output(1, ""),
            Some(&report),
            dir.path(),
            &mut Sources::new(&mut paths, &OutDir::default()),
        );
        let passed: Vec<(&str, &str)> = passed
            .iter()
            .map(|(file, name)| (file.as_str(), name.as_str()))
            .collect();
        assert_eq!(
            passed,
            [(UNLOCATED, "ok"), (UNLOCATED, "suite > inner passes")]
        );
    }

    #[test]
    fn a_script_without_test_cannot_be_narrowed_to_named_tests() {
        let flags = ["--test-name-pattern=^a$".to_owned()];
        let script = TestCommand::Script("vitest run".into());
        assert!(script.command(&"node".into(), &flags).is_none());
        assert!(script.command(&"node".into(), &[]).is_some());
        let node = TestCommand::NodeTest
            .command(&"node".into(), &flags)
            .unwrap();
        let args: Vec<_> = node.as_std().get_args().collect();
        assert_eq!(args, ["--test", "--test-name-pattern=^a$"]);
    }

    #[test]
    fn without_a_report_the_exit_code_decides_and_a_note_says_so() {
        let (dir, _) = workspace();
        let passed = interpret_in(dir.path(), 0, None);
        assert_eq!(passed.status, StageStatus::Passed);
        assert!(
            passed.notes[0].contains("judged by its exit code"),
            "{:?}",
            passed.notes
        );
        let failed = interpret_in(dir.path(), 1, None);
        assert_eq!(failed.status, StageStatus::Failed);
        assert_eq!(failed.failures[0].name, "node --test");
        assert_eq!(
            failed.failures[0].output,
            "`node --test` wrote no report from Node's test runner; its tests are judged by its exit code:\nout"
        );
        let missing = interpret_in(dir.path(), 127, None);
        assert!(matches!(missing.status, StageStatus::Unavailable { .. }));
    }

    #[test]
    fn the_command_is_the_test_script_unless_it_is_npms_placeholder() {
        let dir = tempfile::tempdir().unwrap();
        let with = |manifest: &str| {
            std::fs::write(dir.path().join("package.json"), manifest).unwrap();
            TestCommand::of(dir.path())
        };
        assert_eq!(
            with(r#"{"scripts": {"test": "node --test test/"}}"#),
            Ok(TestCommand::Script("node --test test/".into()))
        );
        assert_eq!(with(r#"{"name": "x"}"#), Ok(TestCommand::NodeTest));
        assert_eq!(
            with(&format!(
                r#"{{"scripts": {{"test": {NPM_PLACEHOLDER:?}}}}}"#
            )),
            Ok(TestCommand::NodeTest)
        );
        let error = with(r#"{"scripts": {"test": 3}}"#).unwrap_err();
        assert!(
            error.contains("package.json") && error.contains("scripts.test"),
            "{error}"
        );
        let error = with("{").unwrap_err();
        assert!(error.contains("package.json is not JSON"), "{error}");
    }

    #[test]
    fn jest_is_the_runner_of_a_script_with_a_jest_word_or_of_a_project_depending_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let with = |manifest: &str| {
            std::fs::write(dir.path().join("package.json"), manifest).unwrap();
            TestCommand::of(dir.path()).unwrap()
        };
        let script = with(r#"{"scripts": {"test": "tsc -p . && jest dist"}}"#);
        assert_eq!(script.runner(), Runner::Jest);
        let flags = ["--json".to_owned()];
        let cmd = script.command(&"node".into(), &flags).unwrap();
        let args: Vec<_> = cmd.as_std().get_args().collect();
        assert_eq!(args, ["-c", "tsc -p . && jest '--json' dist"]);
        let bare = with(r#"{"devDependencies": {"jest": "29.7.0"}}"#);
        assert_eq!(bare, TestCommand::Script("jest".into()));
        assert_eq!(bare.runner(), Runner::Jest);
        let node =
            with(r#"{"scripts": {"test": "node --test"}, "devDependencies": {"jest": "29"}}"#);
        assert_eq!(node.runner(), Runner::Node, "the script decides");
        assert_eq!(with("{}").runner(), Runner::Node);
    }

    #[test]
    fn a_jest_report_that_cannot_be_read_is_a_stage_error_and_a_missing_one_leaves_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let jest = TestCommand::Script("tsc -p . && jest dist".into());
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        let out_dir = OutDir::default();
        let mut sources = Sources::new(&mut paths, &out_dir);
        let mut read = |report: Option<&str>| {
            interpret(&jest, &output(1, "out"), report, dir.path(), &mut sources).0
        };
        let cut = read(Some(r#"{"testResults": [{"name": "#));
        match &cut.status {
            StageStatus::Unavailable { reason } => {
                assert!(reason.contains("jest's report cannot be read"), "{reason}");
            }
            status => panic!("{status:?}"),
        }
        let missing = read(None);
        assert_eq!(missing.status, StageStatus::Failed);
        assert_eq!(missing.failures[0].binary, COMMAND_FAILURE);
        assert!(
            missing.notes[0].contains("no report from jest; its tests are judged by its exit code"),
            "{:?}",
            missing.notes
        );
    }

    #[test]
    fn frames_name_their_file_line_and_column() {
        assert_eq!(
            frame_position("summary (file:///w/my%20src/a.ts:3:29)"),
            Some(("/w/my src/a.ts".into(), 3, 29))
        );
        assert_eq!(
            frame_position("/w/a.ts:1:2"),
            Some(("/w/a.ts".into(), 1, 2))
        );
        assert_eq!(frame_position("new Promise (<anonymous>)"), None);
    }
}
