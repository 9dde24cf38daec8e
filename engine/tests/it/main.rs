//! The `trellis-engine` integration tests, one binary: the engine's public
//! surface against real processes, real crates, a scripted model endpoint
//! on 127.0.0.1, and its own source (the architecture checks).
//!
//! Two tiers: a module marked `toolchain-tests` drives real toolchains and
//! runs in the full tier (`scripts/test.sh`, CI: `--all-features`); the
//! others run in plain `cargo test`, the fast tier.

#[cfg(feature = "toolchain-tests")]
mod accountant_bound;
mod actor_http;
mod architecture;
mod fuzz_config;
mod ledger_paths;
#[cfg(feature = "toolchain-tests")]
mod promotion;
#[cfg(feature = "toolchain-tests")]
mod sensors;
#[cfg(feature = "toolchain-tests")]
mod slot_targets;
