//! The residual classes a repair removes, the correction operators it
//! attempts and the governed tools a model actor works through: one vocabulary for the engine (energy weights, no-good evidence,
//! search expansion, ledger rows) and the prompt plane (issue-conditioned
//! plans).
//!
//! The classes are the ones the engine can observe and ledgers under their
//! serde names; the prompt plane plans over the same values instead of a
//! finer taxonomy nothing produces. This module only names things: how a
//! diagnostic is classified, what a class weighs and which sections a class
//! brings into a prompt are decided by their owners.

use serde::{Deserialize, Serialize};

/// The kind of residual a cluster represents; weights energy, decides which
/// evidence may support a no-good, and selects a correction prompt's evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResidualClass {
    /// Syntax errors.
    Syntax,
    /// A name that does not resolve (missing import, typo).
    UnresolvedName,
    /// Type mismatches and trait-bound errors.
    Type,
    /// Any other compiler error.
    CompileError,
    /// Mutability and borrow-checker errors.
    Borrow,
    /// A test that ran and failed.
    TestFailure,
    /// A stage that could not run.
    SensorUnavailable,
    /// Warnings and lints: advisory.
    Warning,
}

impl ResidualClass {
    /// Every class, in declaration order.
    pub const ALL: [ResidualClass; 8] = [
        ResidualClass::Syntax,
        ResidualClass::UnresolvedName,
        ResidualClass::Type,
        ResidualClass::CompileError,
        ResidualClass::Borrow,
        ResidualClass::TestFailure,
        ResidualClass::SensorUnavailable,
        ResidualClass::Warning,
    ];

    /// The serde name, also used in cluster keys and ledger text.
    pub fn as_str(self) -> &'static str {
        match self {
            ResidualClass::Syntax => "syntax",
            ResidualClass::UnresolvedName => "unresolved_name",
            ResidualClass::Type => "type",
            ResidualClass::CompileError => "compile_error",
            ResidualClass::Borrow => "borrow",
            ResidualClass::TestFailure => "test_failure",
            ResidualClass::SensorUnavailable => "sensor_unavailable",
            ResidualClass::Warning => "warning",
        }
    }

    /// Deterministic evidence (a compiler code, a failed test) versus
    /// environmental trouble, which never supports a no-good.
    pub fn is_deterministic(self) -> bool {
        !matches!(self, ResidualClass::SensorUnavailable)
    }
}

/// A correction operator without its counts: what kind of change a branch
/// attempts. Making a stage runnable again is not among them, because an
/// environmental problem is not something a branch can search its way out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorKind {
    /// Apply the tools' suggestions that offer a single fix.
    ApplySuggestions,
    /// Take one of several alternatives the tools offer (e.g. imports).
    ChooseAlternative,
    /// The tools offer no fix: the code is edited by hand or by a model.
    Edit,
    /// Make a failing test pass without weakening it.
    SatisfyCounterexample,
}

/// The governed tools a model actor is offered, in the order they are
/// offered: the actor dispatches exactly these, and a prompt bundle's
/// `[requires] tools` may name only these.
pub const GOVERNED_TOOLS: [&str; 9] = [
    "read_file",
    "list_files",
    "search",
    "replace",
    "write_file",
    "run_build",
    "run_tests",
    "finish",
    "context_recall",
];

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde::de::value::{Error, StrDeserializer};

    use super::*;

    #[test]
    fn as_str_is_the_serde_name() {
        for class in ResidualClass::ALL {
            let parsed =
                ResidualClass::deserialize(StrDeserializer::<Error>::new(class.as_str())).unwrap();
            assert_eq!(parsed, class);
        }
    }
}
