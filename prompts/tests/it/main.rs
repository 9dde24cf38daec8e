//! The `trellis-prompts` integration tests, one binary: the section
//! library compiled for every route and dialect, the conformance gates Y, Z
//! and AE, the bundle store, and the rendered sections' snapshots.

mod common;

mod bundles;
mod bundles_pinning;
mod digests;
mod explain_session;
mod fitting_props;
mod fuzz_files;
mod gate_ae;
mod gate_y;
mod gate_z;
mod layout;
mod plan_rules;
mod snapshots;
