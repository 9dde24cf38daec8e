//! The `trellis-prompts` integration tests, one binary: the section
//! library compiled for every route and dialect, the conformance gates Y, Z
//! and AE, the bundle store, the rendered sections' snapshots, and its own
//! source (no file-level import circle).

mod common;

mod architecture;
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
