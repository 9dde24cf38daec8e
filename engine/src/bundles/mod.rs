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
//!
//! # Architecture invariant
//!
//! Each of those is tested: a refused write stores nothing
//! (`bundles::store::tests::a_failed_compile_or_bound_stores_nothing`, and
//! through the binary `lsp/tests/it/bundles.rs`); versions never repeat
//! (`versions_are_monotonic_across_restarts_and_prunes`); a pin catches changed
//! content (`a_checksum_pin_catches_changed_content`); a stale base is refused
//! (`a_stale_base_is_refused_naming_both_versions`); prune keeps what sessions
//! name (`prune_keeps_the_versions_a_ledgered_repair_attached`,
//! `retention::tests::never_removes_what_must_stay`); a bundle changes no
//! setting or bound (`a_bundle_cannot_change_a_gate_or_stage_setting`,
//! `a_bundle_section_cannot_change_its_max_bytes`); a running repair keeps what
//! it attached
//! (`a_running_lsp_repair_is_unaffected_by_a_cli_write_made_during_it`), and
//! replay rebuilds its calls with it
//! (`an_attached_bundle_reaches_the_model_and_replay_rebuilds_it_after_the_store_moved_on`).

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
    BundleStore, BundleSummary, DefaultChange, PruneReport, STORE_FILE, VersionRow, WriteOptions,
    WriteResult,
};

pub(crate) use attach::attach;
pub use attach::{attached_texts, reattach};
