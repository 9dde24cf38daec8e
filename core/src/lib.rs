//! What the Trellis engine and its prompt plane must agree on, byte for byte
//! and word for word.
//!
//! - [`digest`]: the one canonical, length-prefixed, domain-tagged SHA-256
//!   encoding behind every identity (ledger links, state roots, section
//!   hashes, program digests).
//! - [`vocabulary`]: the residual classes a repair removes and the
//!   correction operators it attempts.
//! - [`text`]: cutting text to a byte bound at a character boundary.
//! - `fuzz` (feature `fuzz`, test builds only): the mutations every
//!   parser of outside bytes is property-tested with.
//!
//! This crate depends on neither the engine nor the prompt plane (the
//! prompt code generator uses it at build time), and it never does I/O.

pub mod digest;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod text;
pub mod vocabulary;
