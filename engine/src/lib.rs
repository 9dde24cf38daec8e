//! `trellis-engine`: everything in Trellis that decides.
//!
//! The engine turns a view of a workspace into measurements, clusters,
//! correction packets and gate decisions, and runs the bounded repair search.
//! It never sees an LSP type: the `trellis` binary translates between the
//! editor protocol (or the terminal) and the values defined here.
//!
//! The front door is [`Engine`]: open a workspace, then [`Engine::check`] or
//! [`Engine::repair`] a [`View`] of it, and promote a hard-passing
//! [`RepairOutcome`]. What those calls take and return is re-exported here;
//! the modules that stay public hold the vocabulary the front ends render
//! (diagnostics, clusters, changes, the ledger, the sensors).
//!
//! See `ARCHITECTURE.md` at the repository root for the map and invariants.

pub mod actor;
mod api;
pub mod apply;
pub mod bundles;
pub mod change;
pub mod cluster;
pub mod config;
pub mod context;
mod correction;
pub mod diagnostic;
pub mod digest;
mod edit;
mod error;
mod failpoint;
pub mod gate;
pub mod gc;
mod history;
pub mod language;
pub mod ledger;
mod measure;
mod outside;
mod promote;
mod prompt_policy;
mod propose;
mod records;
mod repair;
mod report;
mod runtime;
pub mod search;
mod select;
pub mod sensor;
mod slots;
pub mod snapshot;
mod stage_set;
mod statedir;
pub mod workspace;
mod workspace_path;

pub use api::Engine;
pub use apply::ApplyOffer;
pub use error::EngineError;
pub use history::{History, HistoryError, Replay, Session};
pub use measure::StageSummary;
pub use promote::InterruptedPromotion;
pub use prompt_policy::{PinnedBundleSection, PromptPolicy};
pub use repair::{BranchState, BranchStatus, ForestStatus, SearchStatus};
pub use report::{
    BranchOutcome, BranchReport, CheckReport, Help, NotUsed, Promotion, RepairOptions,
    RepairOutcome, RepairStatus, StepReport, Unfixed, UnfixedReason,
};
pub use runtime::{NoProgress, Progress};
pub use snapshot::View;
pub use workspace_path::WorkspacePath;

/// Unit tests count what each thread allocates, so the parsers' property
/// tests can bound it (`trellis_core::fuzz::bounded`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: trellis_core::fuzz::CountingAllocator = trellis_core::fuzz::CountingAllocator;
