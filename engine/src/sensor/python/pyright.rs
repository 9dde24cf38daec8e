//! `python.typecheck` by pyright, the fallback where ty is not installed:
//! `pyright --outputjson --pythonpath <interpreter>`.
//!
//! Its fingerprint names pyright (`tool = "pyright"`), never ty's: a state
//! measured by one checker and a state measured by the other have different
//! sensor profiles, so their energies are never compared or pooled.
//!
//! pyright exits 0 without errors and 1 with errors; anything else (a
//! broken configuration, bad arguments) is `Unavailable` with what it said.
//! Its ranges are 0-based with UTF-16 columns, as in LSP.

use std::ffi::OsString;

use serde::Deserialize;
use serde_json::Value;

use super::interpreter::Interpreter;
use super::lsp_position::{Encoding, span_of};
use super::tool::{Invocation, Observation, fingerprint, measure, summary};
use crate::diagnostic::{Diagnostic, Level, dedup_by_site};
use crate::sensor::process::ProcessOutput;
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::{Found, ToolUse};
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport};

pub struct Pyright {
    program: OsString,
    tools: Vec<ToolUse>,
    args: Vec<String>,
    fingerprint: SensorFingerprint,
    unavailable: Option<String>,
}

impl Pyright {
    pub const STAGE: &'static str = "python.typecheck";

    /// pyright at `found`, whose `--version` said `version`, checking
    /// against `interpreter`.
    pub fn new(found: Found, version: String, interpreter: &Interpreter) -> Self {
        let args = vec![
            "--outputjson".to_owned(),
            "--pythonpath".to_owned(),
            interpreter.program.to_string_lossy().into_owned(),
        ];
        Self {
            fingerprint: fingerprint(
                "pyright",
                format!("{version}; {}", interpreter.identity()),
                &args,
            ),
            tools: vec![found.used_by(Self::STAGE)],
            program: found.program.into_os_string(),
            args,
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
        measure(Self::STAGE, &self.fingerprint, invocation, &run, interpret).await
    }
}

impl Sensor for Pyright {
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

#[derive(Deserialize)]
struct Report {
    #[serde(rename = "generalDiagnostics")]
    diagnostics: Vec<RawDiagnostic>,
}

#[derive(Deserialize)]
struct RawDiagnostic {
    file: String,
    severity: String,
    message: String,
    range: Option<Value>,
    rule: Option<String>,
}

fn interpret(output: &ProcessOutput, paths: &mut WorkspacePaths) -> Observation {
    if !matches!(output.status.code(), Some(0 | 1)) {
        return Observation::unavailable(format!(
            "pyright exited with {}: {}",
            output.status,
            summary(&output.stdout)
        ));
    }
    Observation::of_report(
        "pyright",
        parse_report(&output.stdout, paths),
        &output.stderr,
    )
}

fn level(severity: &str) -> Level {
    match severity {
        "warning" => Level::Warning,
        "information" => Level::Note,
        _ => Level::Error,
    }
}

pub(super) fn parse_report(
    stdout: &[u8],
    paths: &mut WorkspacePaths,
) -> Result<Vec<Diagnostic>, String> {
    let report: Report = serde_json::from_slice(stdout).map_err(|e| e.to_string())?;
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for raw in report.diagnostics {
        let primary = raw.range.as_ref().and_then(|range| {
            let path = paths.relative(&raw.file)?;
            let text = paths.source(&path)?;
            let start = Encoding::Utf16.byte(&text, &range["start"])?;
            let end = Encoding::Utf16.byte(&text, &range["end"])?;
            (start <= end).then(|| span_of(&path, &text, start, end))
        });
        let diagnostic = Diagnostic {
            stage: Pyright::STAGE.to_owned(),
            code: raw.rule,
            level: level(&raw.severity),
            message: raw.message,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `pyright --outputjson` of pyright 1.1.414 (trimmed), with the file
    /// path replaced per test.
    fn recorded(file: &str) -> String {
        format!(
            r#"{{"version": "1.1.414", "time": "1796126440914", "generalDiagnostics": [
  {{"file": "{file}", "severity": "error", "message": "\"xss2\" is not defined",
    "range": {{"start": {{"line": 0, "character": 12}}, "end": {{"line": 0, "character": 16}}}},
    "rule": "reportUndefinedVariable"}},
  {{"file": "{file}", "severity": "information", "message": "Type of \"s\" is \"Unknown\"",
    "range": {{"start": {{"line": 1, "character": 12}}, "end": {{"line": 1, "character": 13}}}}}}
 ], "summary": {{"filesAnalyzed": 1, "errorCount": 1, "warningCount": 0, "informationCount": 1}}}}"#
        )
    }

    #[test]
    fn a_recorded_report_reads_as_pyright_said_it() {
        let dir = tempfile::tempdir().unwrap();
        // A two-unit UTF-16 char before the name: columns are UTF-16.
        std::fs::write(
            dir.path().join("m.py"),
            "s = \"é😀\" + xss2\nreveal_type(s)\n",
        )
        .unwrap();
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        let file = dir.path().canonicalize().unwrap().join("m.py");
        let found =
            parse_report(recorded(&file.display().to_string()).as_bytes(), &mut paths).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].code.as_deref(), Some("reportUndefinedVariable"));
        assert_eq!(found[0].level, Level::Error);
        assert_eq!(found[1].level, Level::Note);
        let span = found[0].primary.as_ref().unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            &text[span.byte_start as usize..span.byte_end as usize],
            "xss2"
        );
        assert_eq!((span.line_start, span.col_start), (1, 12));
    }

    #[test]
    fn output_that_is_no_report_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        assert!(parse_report(b"No configuration file found.", &mut paths).is_err());
    }
}
