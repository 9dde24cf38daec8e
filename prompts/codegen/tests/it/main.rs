//! The `trellis-prompt-codegen` integration tests, one binary: the section
//! parser fuzzed, malformed sections refused with their file and line, and a
//! real `cargo build` of a crate whose section is broken, and its own source
//! (no file-level import circle).
//!
//! Two tiers: a module marked `toolchain-tests` drives real toolchains and
//! runs in the full tier (`scripts/test.sh`, CI: `--all-features`); the
//! others run in plain `cargo test`, the fast tier.

mod architecture;
#[cfg(feature = "toolchain-tests")]
mod cargo_build;
mod fuzz_section;
mod validation;
