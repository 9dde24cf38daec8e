//! Property tests of everything that reads the Python tools' output: ty's
//! GitLab report, pyright's JSON, ruff's JSON, pytest's JUnit XML and the
//! code actions `ty server` answers, fed mutations of recorded outputs
//! (the fixtures of each parser's own tests): never a panic, within
//! `trellis_core::fuzz::bounded`'s time and allocation bound, and the same
//! diagnostics when only the order of JSON members and whitespace changed.
//!
//! Its properties: `damaged_reports_are_read_or_refused_within_bounds`,
//! `structurally_edited_reports_are_read_or_refused`,
//! `reordered_members_are_the_same_diagnostics`,
//! `damaged_junit_reports_are_read_or_refused_within_bounds`,
//! `code_actions_of_any_shape_give_edits_inside_the_source`,
//! `any_position_is_a_boundary_inside_the_text_or_none`.

use proptest::prelude::*;
use serde_json::{Value, json};
use trellis_core::fuzz;

use super::lsp_position::Encoding;
use super::{junit, pyright, ruff, ty, ty_fixes};
use crate::diagnostic::Level;
use crate::sensor::rustc_json::WorkspacePaths;
use crate::workspace_path::WorkspacePath;

/// The source the recorded ty and ruff reports point into.
const SOURCE: &str = "s = \"ééé\" + xss\nimport os\ndef f():\n    y = 1\nreveal_type(s)\n";

fn workspace() -> (tempfile::TempDir, WorkspacePaths) {
    super::tool::test_workspace(SOURCE)
}

fn pyright_report() -> String {
    json!({
        "version": "1.1.414",
        "generalDiagnostics": [
            {"file": "m.py", "severity": "error", "message": "\"xss\" is not defined",
             "range": {"start": {"line": 0, "character": 12}, "end": {"line": 0, "character": 15}},
             "rule": "reportUndefinedVariable"},
            {"file": "m.py", "severity": "information", "message": "Type of \"s\" is \"str\"",
             "range": {"start": {"line": 4, "character": 12}, "end": {"line": 4, "character": 13}}}
        ],
        "summary": {"errorCount": 1}
    })
    .to_string()
}

fn code_actions() -> Value {
    let uri = "file:///ws/m.py";
    json!([
        {"kind": "quickfix", "title": "import os",
         "edit": {"changes": {uri: [{"newText": "import os\n",
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}]}}},
        {"kind": "quickfix", "title": "Ignore 'unresolved-reference' for this line",
         "edit": {"changes": {uri: [{"newText": "  # ty: ignore[unresolved-reference]",
            "range": {"start": {"line": 0, "character": 19}, "end": {"line": 0, "character": 19}}}]}}}
    ])
}

/// Which JSON report a case reads.
#[derive(Clone, Copy, Debug)]
enum Report {
    Ty,
    Pyright,
    Ruff,
}

fn seed(report: Report) -> String {
    match report {
        Report::Ty => ty::RECORDED.to_owned(),
        Report::Pyright => pyright_report(),
        Report::Ruff => ruff::RECORDED.to_owned(),
    }
}

/// Reads `bytes` as `report` within bounds: the diagnostics, or why not.
fn read(report: Report, bytes: &[u8]) -> Result<Vec<crate::diagnostic::Diagnostic>, String> {
    let (_dir, mut paths) = workspace();
    fuzz::bounded(
        "a Python tool report",
        fuzz::budget(bytes.len()),
        || match report {
            Report::Ty => ty::parse_report(bytes, &mut paths),
            Report::Pyright => pyright::parse_report(bytes, &mut paths),
            Report::Ruff => ruff::parse_findings(bytes, Level::Warning, &mut paths),
        },
    )
}

fn any_report() -> impl Strategy<Value = Report> {
    prop::sample::select(vec![Report::Ty, Report::Pyright, Report::Ruff])
}

proptest! {
    #![proptest_config(fuzz::config(64))]

    /// Arbitrary bytes, or a few byte edits of a recorded report: read or
    /// refused, and every span read lies inside the source.
    #[test]
    fn damaged_reports_are_read_or_refused_within_bounds(
        (report, bytes) in any_report().prop_flat_map(|r| (Just(r), fuzz::mutated(seed(r).into_bytes())))
    ) {
        if let Ok(diagnostics) = read(report, &bytes) {
            for span in diagnostics.iter().filter_map(|d| d.primary.as_ref()) {
                prop_assert!(span.byte_start <= span.byte_end);
                prop_assert!(span.byte_end as usize <= SOURCE.len());
            }
        }
    }

    /// A member removed, repeated, wrapped or of the wrong type: read or
    /// refused, never a panic.
    #[test]
    fn structurally_edited_reports_are_read_or_refused(report in any_report(), edit in fuzz::json_edit()) {
        let value: Value = serde_json::from_str(&seed(report)).unwrap();
        let _ = read(report, fuzz::apply_json(&value, &edit).as_bytes());
    }

    /// Other member order and whitespace: the same diagnostics.
    #[test]
    fn reordered_members_are_the_same_diagnostics(report in any_report(), order in any::<u64>()) {
        let value: Value = serde_json::from_str(&seed(report)).unwrap();
        let rewritten = fuzz::rewrite_json(&value, order);
        prop_assert_eq!(read(report, rewritten.as_bytes()), read(report, seed(report).as_bytes()));
    }

    /// Damaged JUnit XML: cases or a refusal, within bounds.
    #[test]
    fn damaged_junit_reports_are_read_or_refused_within_bounds(
        bytes in fuzz::mutated(junit::RECORDED.as_bytes().to_vec())
    ) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = fuzz::bounded("pytest's JUnit XML", fuzz::budget(bytes.len()), || junit::parse(&text));
    }

    /// Code actions of any shape, read against the source in either
    /// encoding: suggestions whose edits lie inside the source, or none.
    #[test]
    fn code_actions_of_any_shape_give_edits_inside_the_source(
        edit in fuzz::json_edit(),
        utf16 in any::<bool>(),
    ) {
        let actions: Value = serde_json::from_str(&fuzz::apply_json(&code_actions(), &edit))
            .unwrap_or(Value::Null);
        let encoding = if utf16 { Encoding::Utf16 } else { Encoding::Utf8 };
        let fixes = fuzz::bounded("ty's code actions", fuzz::budget(4096), || {
            ty_fixes::import_fixes(&actions, "file:///ws/m.py", &WorkspacePath::new("m.py").unwrap(), SOURCE, encoding)
        });
        for replacement in fixes.iter().flat_map(|s| &s.replacements) {
            prop_assert!(replacement.span.byte_start <= replacement.span.byte_end);
            prop_assert!(replacement.span.byte_end as usize <= SOURCE.len());
            prop_assert!(!replacement.text.contains("ty: ignore"));
        }
    }

    /// Any LSP position maps to a char boundary inside the text, or to none.
    #[test]
    fn any_position_is_a_boundary_inside_the_text_or_none(
        line in any::<u32>(),
        character in any::<u32>(),
        utf16 in any::<bool>(),
    ) {
        let encoding = if utf16 { Encoding::Utf16 } else { Encoding::Utf8 };
        let position = json!({"line": line % 8, "character": character % 40});
        if let Some(byte) = encoding.byte(SOURCE, &position) {
            prop_assert!(SOURCE.is_char_boundary(byte));
        }
    }
}
