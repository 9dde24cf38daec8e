//! Root-cause clusters of residuals, and the energy over them.

use serde::{Deserialize, Serialize};

use crate::diagnostic::{RelPath, Span};
use crate::digest::Digest;

/// The kind of residual a cluster represents; weights energy and decides
/// which evidence may support a no-good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResidualClass {
    /// A name that does not resolve (missing import, typo).
    UnresolvedName,
    /// Mutability and borrow-checker errors.
    Borrow,
    /// Type mismatches and trait-bound errors.
    Type,
    /// Syntax errors.
    Syntax,
    /// Any other compiler error.
    CompileError,
    /// A test that ran and failed.
    TestFailure,
    /// A required stage that could not run.
    SensorUnavailable,
    /// Warnings and lints: advisory.
    Warning,
}

/// One place a cluster shows up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub path: RelPath,
    pub span: Option<Span>,
    pub message: String,
}

/// A group of residuals with one root cause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Short stable id derived from `key` (`c-1a2b3c4d`).
    pub id: String,
    /// The canonical root-cause key (e.g. `unresolved:Point`).
    pub key: String,
    pub class: ResidualClass,
    pub stage: String,
    /// A title a person understands: "`Point` is not imported (150 sites)".
    pub title: String,
    pub sites: Vec<Site>,
    /// Indexes into the measurement's diagnostics.
    pub diagnostics: Vec<usize>,
    /// Indexes into the measurement's test failures.
    pub failures: Vec<usize>,
    /// Normalized magnitude r of this cluster.
    pub magnitude: f64,
    /// Digest of `key`, the identity used by the ledger.
    pub digest: Digest,
}
