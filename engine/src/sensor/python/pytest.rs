//! `python.test` by pytest, run with the workspace's interpreter
//! (`python -m pytest`) and read from its JUnit XML report: each failing
//! test a counterexample keyed by its node id with pytest's failure text,
//! each module pytest could not collect a diagnostic at the line its
//! traceback names.
//!
//! pytest runs with `--continue-on-collection-errors` (one broken module
//! must not hide every other test's verdict), without its cache plugin
//! (`.pytest_cache` would be written into the measured tree) and with the
//! measured tree's `src/` and root first on `PYTHONPATH`, so a branch tests
//! its own code even where the user's environment has the project
//! installed in editable mode from the user's checkout. Exit code 5 (no
//! tests collected) is a pass with nothing run, not a failure.

use std::ffi::OsString;
use std::path::Path;

use trellis_core::text;

use super::interpreter::Interpreter;
use super::junit::{self, Case, Outcome};
use super::tool::{Invocation, Observation, fingerprint, measure, summary};
use crate::diagnostic::{Call, Diagnostic, Level, Rerun, TestFailure};
use crate::sensor::process::ProcessOutput;
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::ToolUse;
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};

/// The most of one failure's text kept as its output.
const OUTPUT_CAP: usize = 16 * 1024;
/// The report's name in the run's own directory below the target base.
const REPORT: &str = "pytest-junit.xml";

const ARGS: &[&str] = &[
    "-m",
    "pytest",
    "-o",
    "junit_family=xunit1",
    "-p",
    "no:cacheprovider",
    "--continue-on-collection-errors",
    "-q",
];

/// pytest's exit code when it collected no tests.
const NO_TESTS_COLLECTED: i32 = 5;

pub struct Pytest {
    program: OsString,
    tools: Vec<ToolUse>,
    args: Vec<String>,
    fingerprint: SensorFingerprint,
    unavailable: Option<String>,
}

impl Pytest {
    pub const STAGE: &'static str = "python.test";

    pub async fn new(interpreter: &Interpreter, workspace: &Path) -> Self {
        let args: Vec<String> = ARGS.iter().map(|a| (*a).to_owned()).collect();
        let version = match &interpreter.version {
            Ok(_) => super::tool::probe_version(
                &interpreter.program,
                &["-m", "pytest", "--version"],
                workspace,
            )
            .await
            .map_err(|e| format!("pytest is not installed for the interpreter: {e}")),
            Err(e) => Err(e.clone()),
        };
        Self {
            fingerprint: fingerprint(
                "pytest",
                format!(
                    "{}; {}",
                    version.as_deref().unwrap_or("unavailable"),
                    interpreter.identity()
                ),
                &args,
            ),
            tools: vec![interpreter.used_by(Self::STAGE)],
            program: interpreter.program.clone(),
            args,
            unavailable: version.err(),
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        self.measure_selected(run, &[]).await
    }

    /// Runs the failing tests `failures` once more, each by its node id, in
    /// the same tree with the same interpreter and environment, and marks
    /// each failed again (still failing in the new report), passed, or not
    /// re-run (pytest could not run them, or a collection error has no
    /// test to select).
    async fn rerun(&self, run: SensorRun<'_>, failures: &[TestFailure]) -> Vec<TestFailure> {
        let selected: Vec<&str> = failures
            .iter()
            .filter(|f| f.name.contains("::"))
            .map(|f| f.name.as_str())
            .collect();
        if selected.is_empty() || run.cancel.is_cancelled() {
            return crate::sensor::rerun_outcome(failures, |_| Rerun::NotRerun);
        }
        let again = self.measure_selected(run, &selected).await;
        let ran = !matches!(again.status, StageStatus::Unavailable { .. });
        crate::sensor::rerun_outcome(failures, |f| {
            if !ran || !selected.contains(&f.name.as_str()) {
                Rerun::NotRerun
            } else if again.failures.iter().any(|a| a.name == f.name) {
                Rerun::FailedAgain
            } else {
                Rerun::Passed
            }
        })
    }

    /// One pytest run over `node_ids` (every test when empty).
    async fn measure_selected(&self, run: SensorRun<'_>, node_ids: &[&str]) -> StageReport {
        let own = run.own_target();
        let report_path = own.join(REPORT);
        if let Err(error) = std::fs::create_dir_all(&own) {
            return super::tool::report(
                Self::STAGE,
                &self.fingerprint,
                std::time::Instant::now(),
                Observation::unavailable(format!("{}: {error}", own.display())),
                false,
            );
        }
        // A report left by an earlier run must not be read as this one's.
        let _ = std::fs::remove_file(&report_path);
        let mut args = self.args.clone();
        args.push(format!("--junitxml={}", report_path.display()));
        // After `--`, a node id is never read as an option.
        if !node_ids.is_empty() {
            args.push("--".to_owned());
            args.extend(node_ids.iter().map(|id| (*id).to_owned()));
        }
        let invocation = Invocation {
            unavailable: self.unavailable.as_deref(),
            program: &self.program,
            args: &args,
            env: vec![("PYTHONPATH", python_path(run.dir))],
        };
        measure(
            Self::STAGE,
            &self.fingerprint,
            invocation,
            &run,
            |output, paths| {
                let xml = std::fs::read_to_string(&report_path).ok();
                interpret(output, xml.as_deref(), paths)
            },
        )
        .await
    }
}

impl Sensor for Pytest {
    fn stage(&self) -> &str {
        Self::STAGE
    }

    fn fingerprint(&self) -> &SensorFingerprint {
        &self.fingerprint
    }

    fn tools(&self) -> Vec<ToolUse> {
        self.tools.clone()
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

/// The measured tree's `src/` (when it has one) and root, then whatever
/// `PYTHONPATH` the user set.
fn python_path(dir: &Path) -> OsString {
    let mut parts: Vec<std::path::PathBuf> = Vec::new();
    if dir.join("src").is_dir() {
        parts.push(dir.join("src"));
    }
    parts.push(dir.to_path_buf());
    if let Some(user) = std::env::var_os("PYTHONPATH") {
        parts.extend(std::env::split_paths(&user));
    }
    std::env::join_paths(parts).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

fn interpret(output: &ProcessOutput, xml: Option<&str>, paths: &mut WorkspacePaths) -> Observation {
    let code = output.status.code();
    if code == Some(NO_TESTS_COLLECTED) {
        return Observation {
            notes: vec!["pytest collected no tests".to_owned()],
            ..Observation::default()
        };
    }
    let complaint = || {
        let stderr = summary(&output.stderr);
        if stderr.is_empty() {
            summary(&output.stdout)
        } else {
            stderr
        }
    };
    if !matches!(code, Some(0 | 1)) {
        return Observation::unavailable(format!(
            "pytest exited with {}: {}",
            output.status,
            complaint()
        ));
    }
    let cases = match xml.map(junit::parse) {
        Some(Ok(cases)) => cases,
        Some(Err(error)) => {
            return Observation::unavailable(format!(
                "pytest's JUnit report could not be read ({error})"
            ));
        }
        None => return Observation::unavailable("pytest wrote no JUnit report".to_owned()),
    };
    let mut observation = Observation::default();
    for case in cases {
        if matches!(
            case.outcome,
            Outcome::Passed | Outcome::Failed { .. } | Outcome::Errored { .. }
        ) {
            observation.tests_run.push(case.node_id.clone());
        }
        match &case.outcome {
            Outcome::Passed => observation.tests_passed += 1,
            Outcome::Skipped => {}
            Outcome::Failed { message, text } | Outcome::Errored { message, text } => {
                observation
                    .failures
                    .push(failure(&case, message, text, paths));
            }
            Outcome::NotCollected { text } => {
                observation
                    .diagnostics
                    .push(collection_error(&case, text, paths));
            }
        }
    }
    if code == Some(1) && observation.failures.is_empty() && observation.diagnostics.is_empty() {
        return Observation::unavailable(format!(
            "pytest failed without a failing test in its report: {}",
            complaint()
        ));
    }
    observation
}

fn capped(text: &str) -> String {
    if text.len() <= OUTPUT_CAP {
        return text.to_owned();
    }
    format!("{}…", text::head(text, OUTPUT_CAP))
}

/// The last `path.py:line:` of a traceback that names a workspace file: the
/// innermost frame in the project.
fn innermost_site(text: &str, paths: &mut WorkspacePaths) -> Option<crate::diagnostic::Span> {
    text.lines().rev().find_map(|line| {
        let (file, rest) = line.trim_start().split_once(".py:")?;
        let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !rest[number.len()..].starts_with(':') {
            return None;
        }
        paths.point(&format!("{file}.py"), number.parse().ok()?, 1)
    })
}

fn failure(case: &Case, message: &str, text: &str, paths: &mut WorkspacePaths) -> TestFailure {
    let output = if text.is_empty() { message } else { text };
    let location = innermost_site(text, paths);
    let source = case
        .file
        .as_deref()
        .and_then(|file| paths.relative(file))
        .and_then(|rel| paths.source(&rel));
    let calls = match (&source, case.line) {
        (Some(source), Some(line)) => called_functions(source, line)
            .into_iter()
            .map(|name| Call {
                defined_at: imported_definition(source, &name, paths),
                name,
            })
            .collect(),
        _ => Vec::new(),
    };
    TestFailure {
        binary: case.file.clone().unwrap_or_else(|| "pytest".to_owned()),
        name: case.node_id.clone(),
        output: capped(output),
        location,
        calls,
        rerun: None,
    }
}

/// Where the workspace defines `name`, found through the test's own
/// `from module import name` line: the module's file (`module.py` or
/// `module/__init__.py`, at the root or under `src/`) and its `def name(`.
fn imported_definition(
    test_source: &str,
    name: &str,
    paths: &mut WorkspacePaths,
) -> Option<crate::diagnostic::Span> {
    let module = test_source.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix("from ")?;
        let (module, names) = rest.split_once(" import ")?;
        names
            .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
            .split(',')
            // `add` or `sum as add`: the name the test calls it by.
            .any(|n| n.split_whitespace().last() == Some(name))
            .then(|| module.trim().replace('.', "/"))
    })?;
    let candidates = [
        format!("{module}.py"),
        format!("{module}/__init__.py"),
        format!("src/{module}.py"),
        format!("src/{module}/__init__.py"),
    ];
    candidates.iter().find_map(|file| {
        let rel = paths.relative(file)?;
        let text = paths.source(&rel)?;
        let (line, column) = python_definition(&text, name)?;
        paths.point(&rel, line, column)
    })
}

/// The 1-based line and column of the first `def name(` in `source`.
fn python_definition(source: &str, name: &str) -> Option<(u32, u32)> {
    let def = format!("def {name}(");
    source.lines().enumerate().find_map(|(index, line)| {
        let at = line.find(&def)?;
        let before = &line[..at];
        if !(before.trim().is_empty() || before.trim() == "async") {
            return None;
        }
        let column = before.chars().count() + 1;
        Some((u32::try_from(index + 1).ok()?, u32::try_from(column).ok()?))
    })
}

/// A module pytest could not collect: the error line of its traceback
/// (`E   ModuleNotFoundError: ...`) at the innermost workspace frame.
fn collection_error(case: &Case, text: &str, paths: &mut WorkspacePaths) -> Diagnostic {
    let error = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("E "))
        .map(str::trim)
        .filter(|line| !line.is_empty());
    let primary = innermost_site(text, paths)
        .or_else(|| case.file.as_deref().and_then(|f| paths.point(f, 1, 1)));
    Diagnostic {
        stage: Pytest::STAGE.to_owned(),
        code: Some("collection-error".to_owned()),
        level: Level::Error,
        message: format!(
            "pytest could not collect {}: {}",
            case.node_id,
            error.unwrap_or("see its traceback")
        ),
        primary,
        secondary: Vec::new(),
        notes: Vec::new(),
        suggestions: Vec::new(),
        rendered: Some(capped(text)),
    }
}

/// Names the test whose `def` is on 0-based line `def_line` of `source`
/// calls directly (`add(2, 3)`, not `self.check()` or `obj.method()`),
/// leaving out builtins and the test file's own helpers: the functions
/// under test, by which failing tests are grouped.
fn called_functions(source: &str, def_line: u32) -> Vec<String> {
    const BUILTINS: &[&str] = &[
        "abs",
        "all",
        "any",
        "bool",
        "bytes",
        "dict",
        "enumerate",
        "filter",
        "float",
        "frozenset",
        "getattr",
        "hasattr",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "next",
        "object",
        "print",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "super",
        "tuple",
        "type",
        "zip",
    ];
    let lines: Vec<&str> = source.lines().collect();
    let Some(def) = lines.get(def_line as usize) else {
        return Vec::new();
    };
    let indent = def.len() - def.trim_start().len();
    let body = lines[def_line as usize + 1..]
        .iter()
        .take_while(|line| line.trim().is_empty() || line.len() - line.trim_start().len() > indent);
    let defined_here: Vec<String> = lines
        .iter()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("def ")?;
            Some(rest.split('(').next()?.trim().to_owned())
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    for line in body {
        let code = line.split('#').next().unwrap_or_default();
        let chars: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i].is_alphabetic() || chars[i] == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                let after_dot = start > 0 && chars[start - 1] == '.';
                let called = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&'(');
                if called
                    && !after_dot
                    && !BUILTINS.contains(&name.as_str())
                    && !defined_here.contains(&name)
                    && !names.contains(&name)
                {
                    names.push(name);
                }
            } else {
                i += 1;
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_functions_under_test_are_the_direct_calls_that_are_not_helpers() {
        let source = "from calc import add, scale\n\
                      \n\
                      def helper(x):\n    return x\n\
                      \n\
                      def test_add():\n    assert add(2, 3) == len([1]) + helper(4)  # scale(1)\n    self.check(scale (2))\n\
                      \n\
                      def test_other():\n    other()\n";
        assert_eq!(called_functions(source, 5), ["add", "scale"]);
        assert_eq!(called_functions(source, 9), ["other"]);
        assert!(called_functions(source, 99).is_empty());
    }

    #[test]
    fn a_called_function_is_found_where_the_test_imports_it_from() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/calc")).unwrap();
        std::fs::write(
            dir.path().join("src/calc/__init__.py"),
            "\"\"\"doc\"\"\"\n\n\ndef add(a, b):\n    return a - b\n",
        )
        .unwrap();
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        let test = "import os\nfrom calc import (sub,\n    add)\nfrom calc import add as plus\n";
        // Only single-line imports resolve, and an alias is its own name.
        assert!(imported_definition(test, "add", &mut paths).is_none());
        let span = imported_definition("from calc import add, sub\n", "add", &mut paths).unwrap();
        assert_eq!(
            (span.path.as_str(), span.line_start, span.col_start),
            ("src/calc/__init__.py", 4, 1)
        );
        assert!(imported_definition("from calc import add\n", "missing", &mut paths).is_none());
        assert_eq!(
            python_definition("  async def add(x):\n", "add"),
            Some((1, 9))
        );
        assert_eq!(python_definition("x = undef add(x)\n", "add"), None);
    }

    #[test]
    fn the_innermost_workspace_frame_is_the_site() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/test_a.py"), "a\nb\nc\n").unwrap();
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        let text = "/usr/lib/python3/x.py:9: in f\ntests/test_a.py:3: AssertionError\n";
        let site = innermost_site(text, &mut paths).unwrap();
        assert_eq!(
            (site.path.as_str(), site.line_start),
            ("tests/test_a.py", 3)
        );
        assert!(innermost_site("no frames here\n", &mut paths).is_none());
    }
}
