//! The structured evidence a sensor reports.
//!
//! Two kinds of evidence exist and the types keep them apart: a compiler or
//! type-checker [`Diagnostic`] is *correction evidence* (it says where the
//! code is wrong and often how to fix it), while a [`TestFailure`] is a
//! *concrete counterexample* (an execution that violated an expectation).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::workspace_path::WorkspacePath;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
    Note,
    Help,
}

/// A source range inside the workspace. Lines and columns are 1-based as rustc
/// reports them (columns count chars); byte offsets are 0-based into the file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Span {
    /// Checked when a sensor builds the span ([`WorkspacePath::under`] takes
    /// what a tool reports) and again when a ledgered one is read.
    pub path: WorkspacePath,
    pub byte_start: u32,
    pub byte_end: u32,
    pub line_start: u32,
    pub col_start: u32,
    pub line_end: u32,
    pub col_end: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// How confident the tool is that a suggestion is right, in rustc's terms
/// (each sensor maps its tool's own onto them). What a value means for
/// verification depends on the tool: see [`Fixer::stands_alone`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    MachineApplicable,
    MaybeIncorrect,
    HasPlaceholders,
    Unspecified,
}

/// The tool whose fix a suggestion is. It names the route that proposes
/// the fix ([`Fixer::route`]), what the ledger and `trellis status` show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fixer {
    Rustc,
    Ty,
    Ruff,
    Tsserver,
}

impl Fixer {
    pub const ALL: [Fixer; 4] = [Fixer::Rustc, Fixer::Ty, Fixer::Ruff, Fixer::Tsserver];

    /// The route that applies this tool's fixes. Rust's keeps the name it
    /// always had, so Rust ledgers read as before.
    pub const fn route(self) -> &'static str {
        match self {
            Fixer::Rustc => "rustc-suggestions",
            Fixer::Ty => "ty-fixes",
            Fixer::Ruff => "ruff-fixes",
            Fixer::Tsserver => "tsserver-fixes",
        }
    }

    /// How a person names a fix of this tool, in a verified repair's summary.
    pub const fn described(self) -> &'static str {
        match self {
            Fixer::Rustc => "a compiler suggestion",
            Fixer::Ty => "a fix from ty",
            Fixer::Ruff => "a fix from ruff",
            Fixer::Tsserver => "a fix from the TypeScript language service",
        }
    }

    /// Whether this tool's fix of `applicability` must be verified on its
    /// own, never folded into a candidate with the other fixes: what the
    /// tool's word means, one tool at a time. ruff calls a fix safe only
    /// when it keeps the code's behaviour, so its `unsafe` fixes
    /// (`MaybeIncorrect`) and display-only ones (`Unspecified`) may change
    /// it. rustc's, ty's and tsserver's `MaybeIncorrect` says the fix may
    /// not be the one meant, which verification decides: it still joins.
    pub fn stands_alone(self, applicability: Applicability) -> bool {
        match self {
            Fixer::Ruff => applicability != Applicability::MachineApplicable,
            Fixer::Rustc | Fixer::Ty | Fixer::Tsserver => false,
        }
    }
}

/// Whether `route` applies the tools' own fixes (one tool's route, or
/// several joined by `+` when one packet holds fixes of several tools), as
/// opposed to a model route. Ledgers written before routes named their
/// tool say `rustc-suggestions` for every language: that is a tool route
/// too, so they replay and compare as they did.
pub fn is_tool_route(route: &str) -> bool {
    route
        .split('+')
        .all(|part| Fixer::ALL.iter().any(|fixer| fixer.route() == part))
}

/// Replace the bytes of `span` with `text`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Replacement {
    pub span: Span,
    pub text: String,
}

/// One way to fix a diagnostic: every replacement applies together.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Suggestion {
    pub message: String,
    pub applicability: Applicability,
    pub fixer: Fixer,
    pub replacements: Vec<Replacement>,
}

impl Suggestion {
    /// See [`Fixer::stands_alone`].
    pub fn stands_alone(&self) -> bool {
        self.fixer.stands_alone(self.applicability)
    }
}

/// A fix the tool offers, possibly as several mutually exclusive alternatives
/// ("consider importing one of these items" with three paths is one
/// `SuggestionGroup` with three alternatives).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SuggestionGroup {
    pub alternatives: Vec<Suggestion>,
}

/// A note or help message attached to a diagnostic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Note {
    pub level: Level,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
}

/// Correction evidence from a compiler or checker.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The stage that reported it (`build`, `test`, ...).
    pub stage: String,
    /// The tool's own code (`E0425`, `unused_variables`), when it has one.
    pub code: Option<String>,
    pub level: Level,
    pub message: String,
    /// The primary in-workspace span. Spans into std or the registry are
    /// mapped to the in-workspace site that caused them; `None` only when no
    /// span of the diagnostic lies in the workspace.
    pub primary: Option<Span>,
    /// Every other in-workspace span, labelled.
    #[serde(default)]
    pub secondary: Vec<Span>,
    #[serde(default)]
    pub notes: Vec<Note>,
    #[serde(default)]
    pub suggestions: Vec<SuggestionGroup>,
    /// The tool's human rendering, for display only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered: Option<String>,
}

impl Diagnostic {
    /// The identity used to merge the same diagnostic reported by several
    /// targets (lib and test builds of one crate report it twice).
    pub fn site_key(&self) -> (Option<&str>, Level, &str, Option<&Span>) {
        (
            self.code.as_deref(),
            self.level,
            &self.message,
            self.primary.as_ref(),
        )
    }
}

/// One diagnostic per [`Diagnostic::site_key`], in first-reported order:
/// the same error reported twice (by the lib and test builds of a crate, by
/// a checker that repeats itself, by two stages) is one piece of evidence.
/// Every sensor and the clustering deduplicate through this one function,
/// so "the same diagnostic" means the same thing everywhere.
pub fn dedup_by_site(diagnostics: impl IntoIterator<Item = Diagnostic>) -> Vec<Diagnostic> {
    let mut seen = HashSet::new();
    diagnostics
        .into_iter()
        .filter(|diagnostic| {
            let (code, level, message, primary) = diagnostic.site_key();
            seen.insert((
                code.map(str::to_owned),
                level,
                message.to_owned(),
                primary.cloned(),
            ))
        })
        .collect()
}

/// A concrete counterexample: a test that ran and failed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TestFailure {
    /// The test binary's target (`lib`, `integration`, the crate name, ...).
    pub binary: String,
    /// The fully qualified test name (`tests::adds_two`).
    pub name: String,
    /// The captured output of the failing test, capped.
    pub output: String,
    /// Where the failure was raised, when the panic message names a
    /// workspace file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Span>,
    /// The functions the test calls before it fails, read from its source
    /// (`libtest::called_functions`): tests that fail at different
    /// assertions but call the same function are grouped by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// How its re-run went, when its stage is declared nondeterministic;
    /// `None` for a deterministic stage (never re-run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<Rerun>,
}

impl TestFailure {
    /// It failed, then passed when re-run: flaky.
    pub fn is_flaky(&self) -> bool {
        self.rerun == Some(Rerun::Passed)
    }
}

/// The one re-run of a failing test in a nondeterministic stage. Only a
/// failure that failed again is deterministic evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rerun {
    /// It failed again.
    FailedAgain,
    /// It passed: the failure is flaky.
    Passed,
    /// It could not be re-run (no selector for its binary, the re-run
    /// itself could not run): unconfirmed.
    NotRerun,
}

/// A function a failing test calls before it fails.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Call {
    pub name: String,
    /// Where it is defined, when the test's own file defines it (unit tests
    /// beside the code they test): the line a fix most likely changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defined_at: Option<Span>,
}

/// Evidence, typed by what it proves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    Correction(Diagnostic),
    Counterexample(TestFailure),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(message: &str, code: Option<&str>, line: Option<u32>) -> Diagnostic {
        Diagnostic {
            stage: "build".into(),
            code: code.map(str::to_owned),
            level: Level::Error,
            message: message.into(),
            primary: line.map(|line| Span {
                path: WorkspacePath::new("src/lib.rs").unwrap(),
                byte_start: line * 10,
                byte_end: line * 10 + 3,
                line_start: line,
                col_start: 1,
                line_end: line,
                col_end: 4,
                label: None,
            }),
            secondary: vec![],
            notes: vec![],
            suggestions: vec![],
            rendered: None,
        }
    }

    #[test]
    fn dedup_by_site_keeps_the_first_report_of_each_site_in_order() {
        let mut again = at("cannot find `x`", Some("E0425"), Some(1));
        // What differs outside the site key (the stage, the rendering) does
        // not make it another diagnostic.
        again.stage = "test".into();
        again.rendered = Some("error[E0425]".into());
        let kept = dedup_by_site([
            at("cannot find `x`", Some("E0425"), Some(1)),
            at("cannot find `x`", Some("E0425"), Some(2)),
            again,
            at("cannot find `x`", None, Some(1)),
            at("cannot find `x`", Some("E0425"), None),
            at("cannot find `y`", Some("E0425"), Some(1)),
            at("cannot find `x`", Some("E0425"), None),
        ]);
        let sites: Vec<_> = kept
            .iter()
            .map(|d| {
                (
                    d.message.as_str(),
                    d.code.as_deref(),
                    d.primary.as_ref().map(|s| s.line_start),
                )
            })
            .collect();
        assert_eq!(
            sites,
            [
                ("cannot find `x`", Some("E0425"), Some(1)),
                ("cannot find `x`", Some("E0425"), Some(2)),
                ("cannot find `x`", None, Some(1)),
                ("cannot find `x`", Some("E0425"), None),
                ("cannot find `y`", Some("E0425"), Some(1)),
            ]
        );
        assert_eq!(kept[0].stage, "build", "the first report is the one kept");
    }
}
