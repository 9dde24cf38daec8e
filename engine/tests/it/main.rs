//! The `trellis-engine` integration tests, one binary: the engine's public
//! surface against real processes, real crates, a scripted model endpoint
//! on 127.0.0.1, and its own source (the architecture checks).

mod accountant_bound;
mod actor_http;
mod architecture;
mod fuzz_config;
mod ledger_paths;
mod promotion;
mod sensors;
mod slot_targets;
