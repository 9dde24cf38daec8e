//! What the Trellis engine and its prompt plane must agree on, byte for byte
//! and word for word.
//!
//! - [`digest`]: the one canonical, length-prefixed, domain-tagged SHA-256
//!   encoding behind every identity (ledger links, state roots, section
//!   hashes, program digests).
//! - [`vocabulary`]: the residual classes a repair removes and the
//!   correction operators it attempts.
//!
//! This crate depends on neither the engine nor the prompt plane (the
//! prompt code generator uses it at build time), and it never does I/O.

pub mod digest;
pub mod vocabulary;
