//! The engine's front door: the calls the CLI and the language server make.
//!
//! Both front ends drive exactly these functions, so `trellis repair` in a
//! terminal and the Repair code action in an editor take the same decisions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::change::FileChange;
use crate::cluster::Cluster;
use crate::diagnostic::{Diagnostic, RelPath, TestFailure};
use crate::digest::Digest;
use crate::sensor::StageStatus;

/// The user's current view: files on disk overlaid with unsaved buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Workspace-relative path to the buffer's full text.
    pub overlay: BTreeMap<RelPath, String>,
}

/// Progress of slow work, shown as a bar (CLI) or `$/progress` (LSP).
pub trait Progress: Send + Sync {
    fn report(&self, message: &str, percent: Option<u32>);
}

/// A progress sink that shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn report(&self, _message: &str, _percent: Option<u32>) {}
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    pub stage: String,
    pub required: bool,
    #[serde(flatten)]
    pub status: StageStatus,
    pub duration_ms: u64,
}

/// What sensing the view found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub root: Digest,
    pub stages: Vec<StageSummary>,
    pub diagnostics: Vec<Diagnostic>,
    pub failures: Vec<TestFailure>,
    /// Clusters ordered dominant first.
    pub clusters: Vec<Cluster>,
    pub energy: f64,
    pub hard_pass: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairOptions {
    /// At most this many branches per step (1..=3).
    pub max_branches: usize,
    /// Repair this cluster first instead of the dominant one.
    pub target_cluster: Option<String>,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            max_branches: 3,
            target_cluster: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairStatus {
    /// The view already hard-passes: nothing to do.
    AlreadyClean,
    /// A hard-passing state was reached; `changes` lead there.
    HardPass,
    /// Descents were accepted but residuals remain.
    ResidualsRemain,
    /// No branch produced an eligible candidate.
    NoEligibleCandidate,
    /// The decision bound N_gate was reached.
    BoundReached,
    Cancelled,
}

pub use crate::repair::{BranchReport, StepReport};

/// The result of one repair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepairOutcome {
    pub repair_id: String,
    pub status: RepairStatus,
    /// The view's root when the repair started; promotion requires it still.
    pub start_root: Digest,
    /// The last accepted state (equal to `start_root` when nothing was accepted).
    pub final_root: Digest,
    pub initial: CheckReport,
    pub steps: Vec<StepReport>,
    /// From the start view to the final accepted state. Only promotable when
    /// `status` is `HardPass`.
    pub changes: Vec<FileChange>,
    /// One line for a person: "imported `HashMap`, made `count` mutable".
    pub summary: String,
}

/// What a promotion wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    pub root_before: Digest,
    pub root_after: Digest,
    pub files: Vec<RelPath>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error(
        "the workspace changed since the repair started (expected root {expected}, found {found}); nothing was written"
    )]
    StaleRoot { expected: Digest, found: Digest },
    #[error("only a hard-passing repair can be promoted (status: {0:?})")]
    NotPromotable(RepairStatus),
    #[error("{0}")]
    Io(String),
}

pub fn workspace_root_of(path: &Path) -> PathBuf {
    path.to_path_buf()
}

/// One workspace's engine: configuration, snapshot cache, ledger, branch slots.
/// `Send + Sync`; the language server shares it behind an `Arc`.
pub struct Engine {
    root: PathBuf,
}

impl Engine {
    /// Opens the workspace at `root`: loads `trellis.toml`, opens the ledger.
    /// `init_options` are LSP `initializationOptions` (a TOML-shaped JSON
    /// object) layered over the files.
    pub fn open(
        root: &Path,
        init_options: Option<serde_json::Value>,
    ) -> Result<Engine, EngineError> {
        let _ = init_options;
        Ok(Engine {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Snapshots the view and runs every configured stage on it.
    pub async fn check(
        &self,
        view: &View,
        progress: &dyn Progress,
        cancel: CancellationToken,
    ) -> Result<CheckReport, EngineError> {
        let _ = (view, progress, cancel);
        Err(EngineError::Io("engine not wired yet".into()))
    }

    /// Runs the bounded repair search from the view. Never writes the user's files.
    pub async fn repair(
        &self,
        view: &View,
        options: &RepairOptions,
        progress: &dyn Progress,
        cancel: CancellationToken,
    ) -> Result<RepairOutcome, EngineError> {
        let _ = (view, options, progress, cancel);
        Err(EngineError::Io("engine not wired yet".into()))
    }

    /// The state root of the view, computed without running anything.
    pub fn view_root(&self, view: &View) -> Result<Digest, EngineError> {
        let _ = view;
        Err(EngineError::Io("engine not wired yet".into()))
    }

    /// CLI promotion: checks the disk still has `outcome.start_root`, then
    /// writes every change atomically, and ledgers the promotion.
    pub fn promote_to_disk(&self, outcome: &RepairOutcome) -> Result<Promotion, EngineError> {
        let _ = outcome;
        Err(EngineError::Io("engine not wired yet".into()))
    }

    /// Editor promotion: the editor applied `outcome.changes` and its view
    /// now has `observed_root`; ledgers the promotion (or a mismatch).
    pub fn record_editor_promotion(
        &self,
        outcome: &RepairOutcome,
        observed_root: Digest,
    ) -> Result<(), EngineError> {
        let _ = (outcome, observed_root);
        Err(EngineError::Io("engine not wired yet".into()))
    }

    /// Ledgers a refused apply: the view moved away from `outcome.start_root`.
    pub fn record_stale_refusal(
        &self,
        outcome: &RepairOutcome,
        found: Digest,
    ) -> Result<(), EngineError> {
        let _ = (outcome, found);
        Err(EngineError::Io("engine not wired yet".into()))
    }
}
