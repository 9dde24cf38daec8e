//! The `trellis-prompt-codegen` integration tests, one binary: the section
//! parser fuzzed, malformed sections refused with their file and line, and a
//! real `cargo build` of a crate whose section is broken.

mod cargo_build;
mod fuzz_section;
mod validation;
