//! `python.typecheck` by ty, the primary Python checker: `ty check
//! --output-format gitlab` (ty has no JSON format of its own; the GitLab
//! code-quality report is JSON with a stable shape, pinned by the fixtures
//! below), then ty's own quick fixes for unresolved names from `ty server`
//! ([`super::ty_fixes`]).
//!
//! ty exits 0 without errors, 1 with errors, and 2 when it could not check
//! (a broken configuration, an interpreter it cannot use): only the last is
//! `Unavailable`, with what ty printed.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::interpreter::Interpreter;
use super::tool::{Invocation, Observation, fingerprint, measure, summary};
use super::ty_fixes;
use crate::diagnostic::{Diagnostic, Level, dedup_by_site};
use crate::sensor::process::ProcessOutput;
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::{Found, ToolUse};
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};

pub struct TyCheck {
    program: OsString,
    tools: Vec<ToolUse>,
    args: Vec<String>,
    /// The interpreter's environment, for `ty server` (which takes it from
    /// `VIRTUAL_ENV`).
    virtual_env: Option<OsString>,
    fingerprint: SensorFingerprint,
    unavailable: Option<String>,
}

impl TyCheck {
    pub const STAGE: &'static str = "python.typecheck";

    /// ty at `found`, whose `--version` said `version`, checking against
    /// `interpreter`.
    pub fn new(found: Found, version: String, interpreter: &Interpreter) -> Self {
        let mut args: Vec<String> = [
            "check",
            "--output-format",
            "gitlab",
            "--no-progress",
            "--color",
            "never",
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend([
            "--python".to_owned(),
            interpreter.program.to_string_lossy().into_owned(),
        ]);
        Self {
            fingerprint: fingerprint(
                "ty-check",
                format!("{version}; {}", interpreter.identity()),
                &args,
            ),
            tools: vec![found.used_by(Self::STAGE)],
            program: found.program.into_os_string(),
            args,
            virtual_env: interpreter.virtual_env(),
            unavailable: interpreter.version.clone().err(),
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let invocation = Invocation {
            unavailable: self.unavailable.as_deref(),
            program: &self.program,
            args: &self.args,
            env: Vec::new(),
        };
        let mut report = measure(Self::STAGE, &self.fingerprint, invocation, &run, interpret).await;
        if matches!(report.status, StageStatus::Unavailable { .. }) {
            return report;
        }
        let started = Instant::now();
        let remaining = run
            .deadline
            .saturating_sub(Duration::from_millis(report.duration_ms));
        let fixes = ty_fixes::attach(
            &self.program,
            self.virtual_env.as_deref(),
            &run,
            remaining,
            &mut report.diagnostics,
        );
        if let Err(note) = fixes.await {
            report.notes.push(note);
        }
        report.duration_ms += u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        report
    }
}

impl Sensor for TyCheck {
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
}

/// One entry of ty's GitLab code-quality report.
#[derive(Deserialize)]
struct GitlabIssue {
    check_name: String,
    description: String,
    severity: String,
    location: GitlabLocation,
}

#[derive(Deserialize)]
struct GitlabLocation {
    path: String,
    positions: GitlabPositions,
}

#[derive(Deserialize)]
struct GitlabPositions {
    begin: GitlabPosition,
    end: GitlabPosition,
}

#[derive(Deserialize)]
struct GitlabPosition {
    line: u32,
    column: u32,
}

fn level(severity: &str) -> Level {
    match severity {
        "info" => Level::Note,
        "minor" => Level::Warning,
        // "major", "critical", "blocker", and anything ty may add: an
        // unknown severity must not pass as harmless.
        _ => Level::Error,
    }
}

fn interpret(output: &ProcessOutput, paths: &mut WorkspacePaths) -> Observation {
    if output.status.code().is_none_or(|code| code > 1) {
        return Observation::unavailable(format!(
            "ty exited with {} without a report: {}",
            output.status,
            summary(&output.stderr)
        ));
    }
    Observation::of_report("ty", parse_report(&output.stdout, paths), &output.stderr)
}

/// The diagnostics of a GitLab report, deduplicated in report order.
pub(super) fn parse_report(
    stdout: &[u8],
    paths: &mut WorkspacePaths,
) -> Result<Vec<Diagnostic>, String> {
    let issues: Vec<GitlabIssue> =
        serde_json::from_slice(stdout).map_err(|e| format!("not a GitLab report: {e}"))?;
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for issue in issues {
        let begin = &issue.location.positions.begin;
        let end = &issue.location.positions.end;
        let primary = paths.range(
            &issue.location.path,
            (begin.line, begin.column),
            (end.line, end.column),
        );
        let prefix = format!("{}: ", issue.check_name);
        let message = issue
            .description
            .strip_prefix(&prefix)
            .unwrap_or(&issue.description)
            .to_owned();
        let diagnostic = Diagnostic {
            stage: TyCheck::STAGE.to_owned(),
            code: Some(issue.check_name),
            level: level(&issue.severity),
            message,
            primary,
            secondary: Vec::new(),
            notes: Vec::new(),
            suggestions: Vec::new(),
            rendered: None,
        };
        diagnostics.push(diagnostic);
    }
    Ok(dedup_by_site(diagnostics))
}

/// `ty check --output-format gitlab` of ty 0.0.108 on a file with two
/// unresolved names, a wrong argument and a `reveal_type`.
#[cfg(test)]
pub(super) const RECORDED: &str = r#"[
  {"check_name": "unresolved-reference", "description": "unresolved-reference: Name `xss` used when not defined",
   "severity": "major", "fingerprint": "b06824bb1ff7ccb2",
   "location": {"path": "m.py", "positions": {"begin": {"line": 1, "column": 13}, "end": {"line": 1, "column": 16}}}},
  {"check_name": "invalid-argument-type", "description": "invalid-argument-type: Argument to function `f` is incorrect",
   "severity": "major", "fingerprint": "1",
   "location": {"path": "m.py", "positions": {"begin": {"line": 3, "column": 3}, "end": {"line": 3, "column": 6}}}},
  {"check_name": "undefined-reveal", "description": "undefined-reveal: `reveal_type` used without importing it",
   "severity": "minor", "fingerprint": "2",
   "location": {"path": "m.py", "positions": {"begin": {"line": 4, "column": 1}, "end": {"line": 4, "column": 12}}}},
  {"check_name": "revealed-type", "description": "revealed-type: Revealed type: `str`",
   "severity": "info", "fingerprint": "3",
   "location": {"path": "/elsewhere/m.py", "positions": {"begin": {"line": 4, "column": 13}, "end": {"line": 4, "column": 14}}}}
]"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, WorkspacePaths) {
        super::super::tool::test_workspace(
            "s = \"ééé\" + xss\ndef f(x: int) -> int: ...\nf(\"a\")\nreveal_type(s)\n",
        )
    }

    #[test]
    fn a_recorded_report_reads_as_ty_said_it() {
        let (_dir, mut paths) = workspace();
        let found = parse_report(RECORDED.as_bytes(), &mut paths).unwrap();
        let summary: Vec<(Option<&str>, Level, &str)> = found
            .iter()
            .map(|d| (d.code.as_deref(), d.level, d.message.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    Some("unresolved-reference"),
                    Level::Error,
                    "Name `xss` used when not defined"
                ),
                (
                    Some("invalid-argument-type"),
                    Level::Error,
                    "Argument to function `f` is incorrect"
                ),
                (
                    Some("undefined-reveal"),
                    Level::Warning,
                    "`reveal_type` used without importing it"
                ),
                (Some("revealed-type"), Level::Note, "Revealed type: `str`"),
            ]
        );
        // Columns count chars: `xss` starts after three two-byte chars.
        let xss = found[0].primary.as_ref().unwrap();
        assert_eq!((xss.byte_start, xss.byte_end), (15, 18));
        assert_eq!(xss.path, "m.py");
        // A file outside the workspace has no span.
        assert!(found[3].primary.is_none());
    }

    #[test]
    fn output_that_is_no_report_is_an_error_not_a_pass() {
        let (_dir, mut paths) = workspace();
        assert!(parse_report(b"All checks passed!", &mut paths).is_err());
        assert_eq!(parse_report(b"[]", &mut paths).unwrap(), Vec::new());
    }
}
