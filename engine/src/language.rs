//! The languages Trellis senses, as values: each one's marker files, its
//! stage ids and what each stage is for.
//!
//! Stage ids are unique across languages, so a mixed workspace (a Rust
//! crate with a Python package beside it) runs both stage sets side by side
//! and `[stages] required` names any of them. Rust's stages keep the
//! unqualified ids they always had (`build`, `test`); every other
//! language's are qualified by its name (`python.typecheck`).
//!
//! This module is a table: it never touches the file system (detection is
//! [`crate::workspace::languages`]) and never builds a sensor (that is
//! `stage_set`).

use serde::{Deserialize, Serialize};

/// A language whose projects Trellis detects and senses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
    TypeScript,
}

/// What a stage measures, which decides how the engine uses it: a `Check`
/// stage is the narrowest run that says whether code is well-formed (a
/// diagnostic probe runs it alone; the model's "build" runs it), a `Test`
/// stage runs the project's tests (the test timeout applies), a `Lint`
/// stage reports style and correctness findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageRole {
    Check,
    Test,
    Lint,
}

impl StageRole {
    pub fn name(self) -> &'static str {
        match self {
            StageRole::Check => "check",
            StageRole::Test => "test",
            StageRole::Lint => "lint",
        }
    }
}

/// One stage a language defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageDef {
    pub id: &'static str,
    pub role: StageRole,
    /// Whether the stage is required when `[stages] required` is not set.
    pub required_by_default: bool,
    /// Whether its sensor re-runs failing tests one by one
    /// (`Sensor::rerun`), so it may be declared nondeterministic.
    pub rerunnable: bool,
}

const fn stage(id: &'static str, role: StageRole, required_by_default: bool) -> StageDef {
    StageDef {
        id,
        role,
        required_by_default,
        rerunnable: false,
    }
}

/// A test stage whose sensor re-runs its failures by name.
const fn rerunnable_test(id: &'static str) -> StageDef {
    StageDef {
        rerunnable: true,
        ..stage(id, StageRole::Test, true)
    }
}

const RUST_STAGES: &[StageDef] = &[
    stage("build", StageRole::Check, true),
    rerunnable_test("test"),
];

const PYTHON_STAGES: &[StageDef] = &[
    stage("python.typecheck", StageRole::Check, true),
    rerunnable_test("python.test"),
    // Advisory unless named: a project's lint findings are not what makes
    // its code wrong.
    stage("python.lint", StageRole::Lint, false),
];

const TYPESCRIPT_STAGES: &[StageDef] = &[
    stage("typescript.typecheck", StageRole::Check, true),
    rerunnable_test("typescript.test"),
];

impl Language {
    pub const ALL: [Language; 3] = [Language::Rust, Language::Python, Language::TypeScript];

    /// The name a person reads and the stage ids are qualified by.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
        }
    }

    /// The files that, together in one directory, mark a project root of
    /// this language.
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            Language::Rust => &["Cargo.toml"],
            Language::Python => &["pyproject.toml"],
            Language::TypeScript => &["package.json", "tsconfig.json"],
        }
    }

    /// The stages this language's sensors fill, in the order they run.
    pub fn stages(self) -> &'static [StageDef] {
        match self {
            Language::Rust => RUST_STAGES,
            Language::Python => PYTHON_STAGES,
            Language::TypeScript => TYPESCRIPT_STAGES,
        }
    }
}

/// The language and definition of the stage `id`, if any language has it.
pub fn stage_def(id: &str) -> Option<(Language, StageDef)> {
    Language::ALL.into_iter().find_map(|language| {
        language
            .stages()
            .iter()
            .find(|s| s.id == id)
            .map(|s| (language, *s))
    })
}

/// The role of the stage `id`; an unknown id (a stage of a test double)
/// is a check, the narrowest assumption.
pub fn stage_role(id: &str) -> StageRole {
    stage_def(id).map_or(StageRole::Check, |(_, s)| s.role)
}

/// Every stage whose failures can be re-run one by one, in every language:
/// the only ones `[stages] nondeterministic` may name, and its default.
pub fn rerunnable_stages() -> Vec<&'static str> {
    Language::ALL
        .into_iter()
        .flat_map(|l| l.stages())
        .filter(|s| s.rerunnable)
        .map(|s| s.id)
        .collect()
}

/// The required stages of `languages` when the configuration names none.
pub fn default_required(languages: &[Language]) -> Vec<String> {
    languages
        .iter()
        .flat_map(|l| l.stages())
        .filter(|s| s.required_by_default)
        .map(|s| s.id.to_owned())
        .collect()
}

/// Why `stages.required` cannot be honoured in a workspace of `languages`:
/// a stage no language defines, or one of a language the workspace does
/// not have (it would never run, so nothing could ever hard-pass).
pub fn check_required(required: &[String], languages: &[Language]) -> Result<(), String> {
    if required.is_empty() {
        return Err(
            "`stages.required` must name at least one stage: with none, nothing would be verified"
                .into(),
        );
    }
    for id in required {
        match stage_def(id) {
            None => {
                let known: Vec<&str> = Language::ALL
                    .iter()
                    .flat_map(|l| l.stages())
                    .map(|s| s.id)
                    .collect();
                return Err(format!(
                    "`stages.required` names unknown stage `{id}` (known: {})",
                    known.join(", ")
                ));
            }
            Some((language, _)) if !languages.contains(&language) => {
                let detected: Vec<&str> = languages.iter().map(|l| l.name()).collect();
                return Err(format!(
                    "`stages.required` names `{id}`, a {} stage, but the workspace is not a {} project \
                     (no {} at its root; detected: {})",
                    language.name(),
                    language.name(),
                    language.markers().join(" + "),
                    if detected.is_empty() {
                        "none".to_owned()
                    } else {
                        detected.join(", ")
                    }
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_ids_are_unique_across_languages() {
        let mut ids: Vec<&str> = Language::ALL
            .iter()
            .flat_map(|l| l.stages())
            .map(|s| s.id)
            .collect();
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all, "{ids:?}");
    }

    #[test]
    fn a_mixed_workspace_requires_both_default_sets() {
        assert_eq!(
            default_required(&[Language::Rust, Language::Python]),
            ["build", "test", "python.typecheck", "python.test"]
        );
    }

    #[test]
    fn an_unknown_stage_is_named_with_the_known_ones() {
        let err = check_required(&["lint".into()], &[Language::Rust]).unwrap_err();
        assert!(err.contains("`stages.required`"), "{err}");
        assert!(err.contains("unknown stage `lint`"), "{err}");
        assert!(err.contains("python.lint"), "{err}");
    }

    #[test]
    fn a_stage_of_an_absent_language_is_refused_naming_its_marker() {
        let err = check_required(&["python.test".into()], &[Language::Rust]).unwrap_err();
        assert!(
            err.contains("`stages.required` names `python.test`"),
            "{err}"
        );
        assert!(err.contains("pyproject.toml"), "{err}");
        assert!(err.contains("detected: rust"), "{err}");
    }

    #[test]
    fn roles_come_from_the_table() {
        assert_eq!(stage_role("build"), StageRole::Check);
        assert_eq!(stage_role("python.test"), StageRole::Test);
        assert_eq!(stage_role("python.lint"), StageRole::Lint);
        assert_eq!(stage_role("typescript.typecheck"), StageRole::Check);
    }
}
