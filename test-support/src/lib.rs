//! What the integration tests of several Trellis crates share, as a crate of
//! its own so that no test binary pulls a file in by `#[path]`.
//!
//! * [`openai_server`] — an OpenAI-compatible chat endpoint on 127.0.0.1 that
//!   serves scripted answers and records every request; the model is the one
//!   part of a test that is scripted.
//! * [`lsp_framing`] — the LSP base protocol's framing as a client speaks it,
//!   for the test client and the code-action bench.
//! * [`source_graph`] — a crate's `src/` read as text: its module and file
//!   import graphs and the cycles in them, for the architecture tests.

pub mod lsp_framing;
pub mod openai_server;
pub mod source_graph;
