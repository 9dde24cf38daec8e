//! Canonical, domain-tagged SHA-256 digests: the shared encoding of
//! `trellis-core`, re-exported so engine modules keep naming it
//! `crate::digest`. The encoding itself lives in one place for the engine and
//! the prompt plane alike; see [`trellis_core::digest`].

pub use trellis_core::digest::*;
