//! Stage `typescript.typecheck`: `tsc --noEmit --pretty false` in the
//! measured directory, where tsc reads the project's own `tsconfig.json`.
//!
//! Each message becomes a [`Diagnostic`] (code `TS2304`, its elaboration as
//! notes, its span the token tsc points at), and every error then gets the
//! code fixes the TypeScript language service offers for it
//! ([`super::tsserver`]) as its suggestions, so a missing import is repaired
//! from the tool's own fix the way rustc's suggestions repair Rust. A
//! project whose configuration tsc refuses (unknown options, no inputs) was
//! not checked: the stage is unavailable, its messages kept.
//!
//! tsc always runs incrementally, its build information in the measured
//! tree's own directory ([`SensorRun::own_target`]): a project's own
//! `tsBuildInfoFile` may lie in `node_modules`, which a slot's sandbox
//! keeps read-only, and each slot's next check reuses its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::node_tools::{NodeTools, TSC_MISSING, Tool, tail};
use super::position;
use super::tsc_output::{self, Category, Location, TscMessage};
use super::tsserver;
use crate::diagnostic::{Diagnostic, Level, Note, Span};
use crate::sensor::Observation;
use crate::sensor::process::{
    Confinement, ProcessError, ProcessLimits, ProcessOutput, run_bounded,
};
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::ToolUse;
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};
use crate::workspace_path::WorkspacePath;

const STAGE: &str = "typescript.typecheck";
const ARGS: &[&str] = &["--noEmit", "--pretty", "false"];

/// Where tsc keeps its build information: the measured tree's own
/// directory, never the project's `tsBuildInfoFile`.
const BUILD_INFO: &[&str] = &["--incremental", "--tsBuildInfoFile"];
const BUILD_INFO_FILE: &str = "tsc.tsbuildinfo";

/// What tsserver needs beyond loading the program: starting Node and
/// answering the requests.
const FIX_STARTUP: Duration = Duration::from_secs(5);

/// How long tsserver may take for the fixes after tsc took `tsc` of the
/// stage's `deadline` (`[stages] build_timeout_secs`): the rest of the
/// deadline, and after a slow tsc at least twice tsc's own time plus
/// [`FIX_STARTUP`] (it loads and checks the same program tsc just did), but
/// never more than the deadline itself, so the stage takes at most twice
/// its configured time.
fn fix_deadline(deadline: Duration, tsc: Duration) -> Duration {
    let left = deadline.saturating_sub(tsc);
    let scaled = tsc.saturating_mul(2).saturating_add(FIX_STARTUP);
    left.max(scaled.min(deadline))
}

/// Stage `typescript.typecheck`: `tsc --noEmit --pretty false`, with
/// tsserver's code fixes.
pub struct TscCheck {
    tsc: Tool,
    tsserver: std::ffi::OsString,
    tools: Vec<ToolUse>,
    fingerprint: SensorFingerprint,
}

impl TscCheck {
    pub fn new(tools: &NodeTools) -> Self {
        TscCheck {
            tsc: tools.tsc.clone(),
            // Where it was found nowhere, its launch says so.
            tsserver: tools.tsserver.as_ref().map_or_else(
                || "tsserver".into(),
                |found| found.program.clone().into_os_string(),
            ),
            tools: [
                tools.tsc.used_by(STAGE),
                tools.tsserver.as_ref().map(|found| found.used_by(STAGE)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            fingerprint: SensorFingerprint {
                tool: "tsc".into(),
                version: tools.compiler_identity(),
                config: format!(
                    "tsc {} {} <own>/{BUILD_INFO_FILE}; tsserver code fixes",
                    ARGS.join(" "),
                    BUILD_INFO.join(" ")
                ),
            },
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let started = Instant::now();
        let observation = match &self.tsc.version {
            Err(reason) => Observation::unavailable(reason.clone()),
            Ok(_) => self.observe(&run).await,
        };
        observation.into_report(STAGE, &self.fingerprint, started)
    }

    async fn observe(&self, run: &SensorRun<'_>) -> Observation {
        let started = Instant::now();
        let mut cmd = Command::new(&self.tsc.program);
        cmd.args(ARGS)
            .args(BUILD_INFO)
            .arg(run.own_target().join(BUILD_INFO_FILE))
            .current_dir(run.dir);
        let limits = ProcessLimits::with_deadline(run.deadline);
        let sandbox = run.sandbox();
        let confinement = Confinement::Slot(&sandbox, None);
        let output = match run_bounded(cmd, confinement, &limits, &run.cancel).await {
            Ok(output) => output,
            Err(ProcessError::Launch { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Observation::unavailable(format!(
                    "`{}` was not found: {TSC_MISSING}",
                    self.tsc.program.to_string_lossy()
                ));
            }
            Err(error) => return Observation::unavailable(error.to_string()),
        };
        let mut paths = match WorkspacePaths::new(run.dir, run.target_dir) {
            Ok(paths) => paths,
            Err(error) => {
                return Observation::unavailable(format!(
                    "workspace {} cannot be read: {error}",
                    run.dir.display()
                ));
            }
        };
        let mut observation = interpret(&output, &mut paths);
        if matches!(observation.status, StageStatus::Failed) {
            let fixes = tsserver::code_fixes(
                &self.tsserver,
                run,
                fix_deadline(run.deadline, started.elapsed()),
                &observation.diagnostics,
                &mut paths,
            );
            match fixes.await {
                Ok(groups) => {
                    for (diagnostic, group) in observation.diagnostics.iter_mut().zip(groups) {
                        diagnostic.suggestions.extend(group);
                    }
                }
                Err(reason) => observation
                    .notes
                    .push(format!("no code fixes from tsserver: {reason}")),
            }
        }
        observation
    }
}

impl Sensor for TscCheck {
    fn stage(&self) -> &str {
        STAGE
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
}

/// Options and project errors: tsc could not check the code as configured
/// (TS5xxx: compiler options, TS18003: no inputs in `tsconfig.json`).
fn is_configuration_error(code: u32) -> bool {
    (5000..6000).contains(&code) || code == 18003
}

/// Workspace files' texts, each read once per interpretation.
struct Sources<'a> {
    paths: &'a mut WorkspacePaths,
    texts: HashMap<WorkspacePath, Option<String>>,
}

impl Sources<'_> {
    /// The span of the token at tsc's `location`, when it names a
    /// workspace file and a position inside it.
    fn span(&mut self, location: &Location) -> Option<Span> {
        let path = self.paths.relative(&location.file)?;
        let paths = &*self.paths;
        let text = self
            .texts
            .entry(path.clone())
            .or_insert_with(|| paths.source(&path))
            .as_deref()?;
        let start = position::byte_offset(text, location.line, location.column)?;
        Some(position::span_of(
            path,
            text,
            start,
            position::token_end(text, start),
        ))
    }
}

fn diagnostic(message: &TscMessage, sources: &mut Sources<'_>) -> Diagnostic {
    let level = match message.category {
        Category::Error => Level::Error,
        Category::Warning => Level::Warning,
        Category::Suggestion | Category::Message => Level::Note,
    };
    let mut rendered = format!(
        "{} TS{}: {}",
        message.category.word(),
        message.code,
        message.message
    );
    for detail in &message.details {
        rendered.push_str("\n  ");
        rendered.push_str(detail);
    }
    Diagnostic {
        stage: STAGE.to_owned(),
        code: Some(format!("TS{}", message.code)),
        level,
        message: message.message.clone(),
        primary: message
            .location
            .as_ref()
            .and_then(|location| sources.span(location)),
        secondary: Vec::new(),
        notes: message
            .details
            .iter()
            .map(|detail| Note {
                level: Level::Note,
                message: detail.clone(),
                span: None,
            })
            .collect(),
        suggestions: Vec::new(),
        rendered: Some(rendered),
    }
}

/// Turns tsc's output into the stage's observation.
fn interpret(output: &ProcessOutput, paths: &mut WorkspacePaths) -> Observation {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut text: &str = &stdout;
    if output.stdout_truncated && !stdout.ends_with('\n') {
        // The cap cut the last line: incomplete, not unreadable.
        text = stdout.rfind('\n').map_or("", |end| &stdout[..=end]);
    }
    let read = tsc_output::parse(text);
    let mut sources = Sources {
        paths,
        texts: HashMap::new(),
    };
    let diagnostics: Vec<Diagnostic> = read
        .messages
        .iter()
        .map(|message| diagnostic(message, &mut sources))
        .collect();
    let mut notes = Vec::new();
    if read.unread_lines > 0 {
        notes.push(format!(
            "skipped {} line(s) of tsc output that were no message",
            read.unread_lines
        ));
    }
    if output.truncated() {
        notes
            .push("tsc's output exceeded the retained-byte cap; later output was discarded".into());
    }
    let errors: Vec<&TscMessage> = read
        .messages
        .iter()
        .filter(|message| message.category == Category::Error)
        .collect();
    let status = if errors.iter().any(|m| !is_configuration_error(m.code)) {
        StageStatus::Failed
    } else if let Some(first) = errors.first() {
        StageStatus::Unavailable {
            reason: format!(
                "tsc could not check the project as configured: error TS{}: {}",
                first.code, first.message
            ),
        }
    } else if output.status.success() {
        StageStatus::Passed
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        StageStatus::Unavailable {
            reason: format!(
                "tsc exited with {} without an error message: {}",
                output.status,
                tail(&format!("{stderr}\n{stdout}"), 4096)
            ),
        }
    };
    Observation {
        diagnostics,
        truncated: output.truncated(),
        notes,
        ..Observation::of_status(status)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::process::ExitStatus;
    use std::time::Duration;

    use super::*;

    pub(super) fn zoo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recorded/typescript/zoo")
    }

    pub(super) fn output(code: i32, stdout: &[u8]) -> ProcessOutput {
        ProcessOutput {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.to_vec(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    fn interpret_zoo(code: i32, stdout: &[u8]) -> Observation {
        let mut paths = WorkspacePaths::new(&zoo(), &zoo().join("target")).unwrap();
        interpret(&output(code, stdout), &mut paths)
    }

    #[test]
    fn the_recorded_errors_are_diagnostics_on_the_tokens_tsc_names() {
        let stdout = include_bytes!("../../../tests/fixtures/recorded/typescript/zoo.tsc.stdout");
        let observation = interpret_zoo(2, stdout);
        assert_eq!(observation.status, StageStatus::Failed);
        assert!(observation.notes.is_empty(), "{:?}", observation.notes);
        let source = std::fs::read_to_string(zoo().join("src/zoo.ts")).unwrap();
        let totl = observation
            .diagnostics
            .iter()
            .find(|d| d.message.starts_with("Cannot find name 'totl'"))
            .unwrap();
        assert_eq!(totl.code.as_deref(), Some("TS2552"));
        let span = totl.primary.as_ref().unwrap();
        assert_eq!(span.path, "src/zoo.ts");
        // tsc's column 58 counts the emoji before it as two UTF-16 units.
        assert_eq!(
            &source[span.byte_start as usize..span.byte_end as usize],
            "totl"
        );
        assert_eq!((span.line_start, span.col_start), (6, 57));
        let elaborated = observation
            .diagnostics
            .iter()
            .find(|d| !d.notes.is_empty())
            .unwrap();
        assert_eq!(elaborated.notes.len(), 2);
        assert!(
            elaborated
                .rendered
                .as_deref()
                .unwrap()
                .contains("\n  Type 'number'")
        );
    }

    #[test]
    fn a_configuration_error_alone_means_the_project_was_not_checked() {
        let observation = interpret_zoo(
            1,
            b"tsconfig.json(1,122): error TS5023: Unknown compiler option 'bogus'.\n",
        );
        let StageStatus::Unavailable { reason } = &observation.status else {
            panic!("unavailable expected, got {:?}", observation.status);
        };
        assert!(
            reason.contains("TS5023") && reason.contains("bogus"),
            "{reason}"
        );
        assert_eq!(
            observation.diagnostics[0].primary.as_ref().unwrap().path,
            "tsconfig.json"
        );
    }

    #[test]
    fn a_silent_failure_is_unavailable_and_a_clean_run_passes() {
        let observation = interpret_zoo(1, b"");
        assert!(matches!(
            observation.status,
            StageStatus::Unavailable { .. }
        ));
        assert_eq!(interpret_zoo(0, b"").status, StageStatus::Passed);
    }

    #[test]
    fn tsserver_gets_the_rest_of_the_deadline_and_after_a_slow_tsc_time_in_proportion() {
        let secs = Duration::from_secs;
        // A quick tsc leaves the rest of the stage's deadline.
        assert_eq!(fix_deadline(secs(300), secs(10)), secs(290));
        // A slow one: twice its time and the startup, though past the deadline.
        assert_eq!(fix_deadline(secs(300), secs(250)), secs(300));
        assert_eq!(fix_deadline(secs(100), secs(60)), secs(100));
        assert_eq!(fix_deadline(secs(100), secs(40)), secs(85));
        // One that used it all still gets a proportionate share, never more
        // than the deadline.
        assert_eq!(fix_deadline(secs(10), secs(10)), secs(10));
        assert_eq!(fix_deadline(secs(60), secs(2)), secs(58));
    }
}

#[cfg(all(test, unix))]
#[path = "tsc_fuzz.rs"]
mod fuzz_tests;
