//! `trellis-engine`: everything in Trellis that decides.
//!
//! The engine turns a view of a workspace into measurements, clusters,
//! correction packets and gate decisions, and runs the bounded repair search.
//! It never sees an LSP type: the `trellis` binary translates between the
//! editor protocol (or the terminal) and the values defined here.
//!
//! See `ARCHITECTURE.md` at the repository root for the map and invariants.

pub mod api;
pub mod change;
pub mod cluster;
pub mod config;
pub mod correction;
pub mod diagnostic;
pub mod digest;
pub mod edit;
pub mod failpoint;
pub mod gate;
pub mod ledger;
pub mod measure;
pub mod promote;
pub mod propose;
pub mod records;
pub mod repair;
pub mod search;
pub mod select;
pub mod sensor;
pub mod slots;
pub mod snapshot;
pub mod statedir;
pub mod workspace;

/// Unit tests count what each thread allocates, so the parsers' property
/// tests can bound it (`trellis_core::fuzz::bounded`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: trellis_core::fuzz::CountingAllocator = trellis_core::fuzz::CountingAllocator;
