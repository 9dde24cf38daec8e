//! `python.lint` by ruff: `ruff check --output-format json`, with the
//! project's own ruff configuration.
//!
//! Each finding's `fix` becomes a suggestion carrying ruff's applicability,
//! so fixes flow through the same proposer as rustc's: a `safe` fix is
//! machine-applicable, an `unsafe` one maybe-incorrect, a `display-only`
//! one unspecified. What those mean is ruff's ([`Fixer::stands_alone`]):
//! only a safe fix joins the others, an unsafe or display-only one is
//! verified on its own; like every candidate, none is accepted before the
//! stages verified it.
//!
//! Findings are warnings unless `python.lint` is required: then they are
//! errors, which block hard pass as the configuration asked. ruff runs with
//! `--no-cache` (its cache directory would be written into the measured
//! tree) and `--exit-zero`, so a non-zero exit always means ruff failed.

use std::ffi::OsString;

use serde::Deserialize;

use super::tool::{Invocation, Observation, fingerprint, measure, summary};
use crate::diagnostic::{
    Applicability, Diagnostic, Fixer, Level, Replacement, Suggestion, SuggestionGroup,
};
use crate::sensor::process::ProcessOutput;
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::toolpath::{Found, ToolUse};
use crate::sensor::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport};

const ARGS: &[&str] = &[
    "check",
    "--output-format",
    "json",
    "--no-cache",
    "--exit-zero",
    "--quiet",
];

pub struct RuffCheck {
    program: OsString,
    tools: Vec<ToolUse>,
    args: Vec<String>,
    level: Level,
    fingerprint: SensorFingerprint,
}

impl RuffCheck {
    pub const STAGE: &'static str = "python.lint";

    /// ruff at `found`, whose `--version` said `version`; its findings
    /// are errors when `blocks`.
    pub fn new(found: Found, version: String, blocks: bool) -> Self {
        let args: Vec<String> = ARGS.iter().map(|a| (*a).to_owned()).collect();
        let level = if blocks { Level::Error } else { Level::Warning };
        let mut shown = args.clone();
        shown.push(format!("(findings as {level:?})"));
        Self {
            fingerprint: fingerprint("ruff-check", version, &shown),
            tools: vec![found.used_by(Self::STAGE)],
            program: found.program.into_os_string(),
            args,
            level,
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let invocation = Invocation {
            unavailable: None,
            program: &self.program,
            args: &self.args,
            env: Vec::new(),
        };
        let level = self.level;
        measure(
            Self::STAGE,
            &self.fingerprint,
            invocation,
            &run,
            |output, paths| interpret(output, level, paths),
        )
        .await
    }
}

impl Sensor for RuffCheck {
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
struct Finding {
    code: Option<String>,
    message: String,
    filename: String,
    location: Location,
    end_location: Location,
    fix: Option<Fix>,
}

#[derive(Deserialize, Clone, Copy)]
struct Location {
    row: u32,
    column: u32,
}

#[derive(Deserialize)]
struct Fix {
    applicability: String,
    message: Option<String>,
    edits: Vec<Edit>,
}

#[derive(Deserialize)]
struct Edit {
    content: String,
    location: Location,
    end_location: Location,
}

fn interpret(output: &ProcessOutput, level: Level, paths: &mut WorkspacePaths) -> Observation {
    if !output.status.success() {
        return Observation::unavailable(format!(
            "ruff exited with {}: {}",
            output.status,
            summary(&output.stderr)
        ));
    }
    Observation::of_report(
        "ruff",
        parse_findings(&output.stdout, level, paths),
        &output.stderr,
    )
}

fn applicability(ruff: &str) -> Applicability {
    match ruff {
        "safe" => Applicability::MachineApplicable,
        "unsafe" => Applicability::MaybeIncorrect,
        // `display-only`, and anything newer: shown, never bundled.
        _ => Applicability::Unspecified,
    }
}

pub(super) fn parse_findings(
    stdout: &[u8],
    level: Level,
    paths: &mut WorkspacePaths,
) -> Result<Vec<Diagnostic>, String> {
    let findings: Vec<Finding> = serde_json::from_slice(stdout).map_err(|e| e.to_string())?;
    let mut diagnostics = Vec::with_capacity(findings.len());
    for finding in findings {
        let at = |l: Location| (l.row, l.column);
        let primary = paths.range(
            &finding.filename,
            at(finding.location),
            at(finding.end_location),
        );
        let suggestions = finding
            .fix
            .and_then(|fix| {
                let replacements = fix
                    .edits
                    .iter()
                    .map(|edit| {
                        let span = paths.range(
                            &finding.filename,
                            at(edit.location),
                            at(edit.end_location),
                        )?;
                        Some(Replacement {
                            span,
                            text: edit.content.clone(),
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(SuggestionGroup {
                    alternatives: vec![Suggestion {
                        message: fix.message.unwrap_or_else(|| finding.message.clone()),
                        applicability: applicability(&fix.applicability),
                        fixer: Fixer::Ruff,
                        replacements,
                    }],
                })
            })
            .into_iter()
            .collect();
        diagnostics.push(Diagnostic {
            stage: RuffCheck::STAGE.to_owned(),
            code: finding.code,
            level,
            message: finding.message,
            primary,
            secondary: Vec::new(),
            notes: Vec::new(),
            suggestions,
            rendered: None,
        });
    }
    Ok(diagnostics)
}

/// `ruff check --output-format json` of ruff 0.17.6 (trimmed): an
/// unfixable finding, a safe fix and an unsafe one.
#[cfg(test)]
pub(super) const RECORDED: &str = r#"[
  {"cell": null, "code": "F821", "end_location": {"column": 17, "row": 1}, "filename": "m.py", "fix": null,
   "location": {"column": 13, "row": 1}, "message": "Undefined name `xss2`", "name": "undefined-name",
   "noqa_row": 1, "severity": "error", "url": "https://docs.astral.sh/ruff/rules/undefined-name"},
  {"cell": null, "code": "F401", "end_location": {"column": 10, "row": 2}, "filename": "m.py",
   "fix": {"applicability": "safe", "edits": [{"content": "", "end_location": {"column": 1, "row": 3}, "location": {"column": 1, "row": 2}}],
       "message": "Remove unused import: `os`"},
   "location": {"column": 8, "row": 2}, "message": "`os` imported but unused", "name": "unused-import",
   "noqa_row": 2, "severity": "error", "url": "https://docs.astral.sh/ruff/rules/unused-import"},
  {"cell": null, "code": "F841", "end_location": {"column": 6, "row": 4}, "filename": "m.py",
   "fix": {"applicability": "unsafe", "edits": [{"content": "", "end_location": {"column": 1, "row": 5}, "location": {"column": 1, "row": 4}}],
       "message": "Remove assignment to unused variable `y`"},
   "location": {"column": 5, "row": 4}, "message": "Local variable `y` is assigned to but never used", "name": "unused-variable",
   "noqa_row": 4, "severity": "error", "url": "https://docs.astral.sh/ruff/rules/unused-variable"}
]"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, WorkspacePaths) {
        super::super::tool::test_workspace("s = \"ééé\" + xss2\nimport os\ndef f():\n    y = 1\n")
    }

    #[test]
    fn fixes_keep_ruffs_applicability() {
        let (_dir, mut paths) = workspace();
        let found = parse_findings(RECORDED.as_bytes(), Level::Warning, &mut paths).unwrap();
        assert_eq!(found.len(), 3);
        assert!(found[0].suggestions.is_empty());
        let safe = &found[1].suggestions[0].alternatives[0];
        assert_eq!(safe.applicability, Applicability::MachineApplicable);
        assert_eq!(safe.message, "Remove unused import: `os`");
        let edit = &safe.replacements[0];
        assert_eq!(
            (edit.span.byte_start, edit.span.byte_end, edit.text.as_str()),
            (20, 30, "")
        );
        let unsafe_fix = &found[2].suggestions[0].alternatives[0];
        assert_eq!(unsafe_fix.applicability, Applicability::MaybeIncorrect);
        assert!(unsafe_fix.stands_alone() && !safe.stands_alone());
        assert!(found.iter().all(|d| d.level == Level::Warning));
    }

    #[test]
    fn findings_block_only_when_the_stage_is_required() {
        let (_dir, mut paths) = workspace();
        let found = parse_findings(RECORDED.as_bytes(), Level::Error, &mut paths).unwrap();
        assert!(found.iter().all(|d| d.level == Level::Error));
    }
}
