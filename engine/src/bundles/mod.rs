//! The versioned prompt-bundle store (the seed's `PreludeStore`).
//!
//! A prompt bundle is a named set of replacement section texts (a
//! `bundle.toml` naming its id, and `*.md` sections in the library's own
//! format). This module owns how bundles are compiled on write
//! ([`draft`]), named ([`refs`]), kept durably and versioned ([`store`],
//! `.trellis/bundles.db`), retained ([`retention`]) and attached to a
//! repair ([`attach`]): a repair resolves its refs once, when it starts,
//! and keeps the resolved texts for its whole life.
//!
//! What it must never do: store a bundle that does not compile or exceeds a
//! bound (a failed write leaves the store as it was); reuse a version
//! number; remove a version a ledger session names; let a bundle grant a
//! tool or change a gate, budget or stage setting (a bundle replaces text,
//! nothing else); let a write change what a running repair already holds.

mod attach;
mod draft;
mod error;
mod refs;
mod retention;
mod store;

pub use crate::ledger::BundleComponent;
pub use attach::{Attached, RunCapabilities};
pub use draft::{Draft, Manifest, Requires};
pub use error::BundleError;
pub use refs::BundleRef;
pub use store::{
    BundleStore, BundleSummary, DefaultChange, PruneReport, VersionRow, WriteOptions, WriteResult,
};

pub(crate) use attach::attach;
pub use attach::reattach;

/// The store's file in `.trellis/`.
pub const STORE_FILE: &str = "bundles.db";
