//! The `trellis-lsp` integration tests, one binary: the shipped `trellis`
//! binary driven over stdio and from the command line, with real toolchains
//! and real files in temporary directories.
//!
//! One binary links the engine once, instead of once per file. Each module
//! below is one area; the helpers they share are the first four modules.
//! The modules a kernel without the sandbox reruns are `cli`, `lsp_repair`
//! and `sandbox` (`scripts/test.sh`).

mod backward;
mod paging;
mod support;
mod wrong_operator;

mod alternatives;
mod architecture;
mod backward_compatible;
mod backward_compatible_manifest;
mod bundles;
mod change_set;
mod cli;
mod context_events;
mod context_overhead;
mod context_paging;
mod faults_process;
mod faults_promotion;
mod faults_state;
mod gc;
mod grouping;
mod ignored_files;
mod implied_stages;
mod kept_tests;
mod ledger_history;
mod lsp_cancel_view;
mod lsp_context;
mod lsp_editors;
mod lsp_faults;
mod lsp_frames;
mod lsp_gc;
mod lsp_model;
mod lsp_protocol;
mod lsp_repair;
mod lsp_stages;
mod model_repair;
mod model_search;
mod models_config;
mod newcomer;
mod oracle;
mod output;
mod prompts_cli;
mod python;
mod sandbox;
mod sccache;
mod search_rules;
mod search_triggers;
mod settings;
mod slots_at_workspace_path;
mod slots_warm;
mod tool_resolution;
mod typescript;
mod typescript_jest;
mod typescript_more;
mod workspace_members;
