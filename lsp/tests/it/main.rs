//! The `trellis-lsp` integration tests, one binary: the shipped `trellis`
//! binary driven over stdio and from the command line, with real toolchains
//! and real files in temporary directories.
//!
//! One binary links the engine once, instead of once per file. Each module
//! below is one area; the helpers they share are the first four modules.
//! The modules a kernel without the sandbox reruns are `cli`, `lsp_repair`
//! and `sandbox` (`scripts/test.sh`).
//!
//! Two tiers: a module marked `toolchain-tests` drives real toolchains and
//! runs in the full tier (`scripts/test.sh`, CI: `--all-features`); the
//! others run in plain `cargo test`, the fast tier.

#[cfg(feature = "toolchain-tests")]
mod backward;
#[cfg(feature = "toolchain-tests")]
mod paging;
#[cfg(feature = "toolchain-tests")]
mod support;
#[cfg(feature = "toolchain-tests")]
mod wrong_operator;

#[cfg(feature = "toolchain-tests")]
mod alternatives;
mod architecture;
#[cfg(feature = "toolchain-tests")]
mod backward_compatible;
#[cfg(feature = "toolchain-tests")]
mod backward_compatible_manifest;
#[cfg(feature = "toolchain-tests")]
mod bundles;
#[cfg(feature = "toolchain-tests")]
mod change_set;
#[cfg(feature = "toolchain-tests")]
mod cli;
#[cfg(feature = "toolchain-tests")]
mod context_events;
#[cfg(feature = "toolchain-tests")]
mod context_overhead;
#[cfg(feature = "toolchain-tests")]
mod context_paging;
#[cfg(feature = "toolchain-tests")]
mod faults_process;
#[cfg(feature = "toolchain-tests")]
mod faults_promotion;
#[cfg(feature = "toolchain-tests")]
mod faults_state;
#[cfg(feature = "toolchain-tests")]
mod gc;
#[cfg(feature = "toolchain-tests")]
mod grouping;
#[cfg(feature = "toolchain-tests")]
mod ignored_files;
#[cfg(feature = "toolchain-tests")]
mod implied_stages;
#[cfg(feature = "toolchain-tests")]
mod kept_tests;
#[cfg(feature = "toolchain-tests")]
mod ledger_history;
#[cfg(feature = "toolchain-tests")]
mod lsp_cancel_view;
#[cfg(feature = "toolchain-tests")]
mod lsp_context;
#[cfg(feature = "toolchain-tests")]
mod lsp_editors;
#[cfg(feature = "toolchain-tests")]
mod lsp_faults;
#[cfg(feature = "toolchain-tests")]
mod lsp_frames;
#[cfg(feature = "toolchain-tests")]
mod lsp_gc;
#[cfg(feature = "toolchain-tests")]
mod lsp_model;
#[cfg(feature = "toolchain-tests")]
mod lsp_protocol;
#[cfg(feature = "toolchain-tests")]
mod lsp_repair;
#[cfg(feature = "toolchain-tests")]
mod lsp_stages;
#[cfg(feature = "toolchain-tests")]
mod model_repair;
#[cfg(feature = "toolchain-tests")]
mod model_search;
#[cfg(feature = "toolchain-tests")]
mod models_config;
#[cfg(feature = "toolchain-tests")]
mod newcomer;
#[cfg(feature = "toolchain-tests")]
mod oracle;
#[cfg(feature = "toolchain-tests")]
mod output;
mod prompts_cli;
#[cfg(feature = "toolchain-tests")]
mod python;
#[cfg(feature = "toolchain-tests")]
mod sandbox;
#[cfg(feature = "toolchain-tests")]
mod sccache;
#[cfg(feature = "toolchain-tests")]
mod search_rules;
#[cfg(feature = "toolchain-tests")]
mod search_triggers;
#[cfg(feature = "toolchain-tests")]
mod settings;
#[cfg(feature = "toolchain-tests")]
mod slots_at_workspace_path;
#[cfg(feature = "toolchain-tests")]
mod slots_warm;
#[cfg(feature = "toolchain-tests")]
mod tool_resolution;
#[cfg(feature = "toolchain-tests")]
mod typescript;
#[cfg(feature = "toolchain-tests")]
mod typescript_jest;
#[cfg(feature = "toolchain-tests")]
mod typescript_more;
#[cfg(feature = "toolchain-tests")]
mod workspace_members;
