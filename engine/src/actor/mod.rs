//! The model actor (PSP-10 system 27): configured endpoints, and the
//! OpenAI-compatible transport with its failover chain, and the governed tools.
//!
//! This module owns everything between a branch directory and a model
//! endpoint. It never holds an API key in a value that is printed,
//! serialized or ledgered.
//!
//! # Public API
//!
//! - [`config`]: [`ModelEndpoint`] (`[[models]]`), [`VerificationConfig`] /
//!   [`TestPolicy`] (`[verification]`), [`family_of_model`]; loaded through
//!   `Config::models` and `Config::verification`.
//! - [`FailoverChain::new`] over [`ChainEndpoint`]s, one per configured
//!   endpoint, each with a [`Transport`]: [`HttpTransport::new`] for
//!   `openai-chat`, [`ScriptedTransport`] in tests. Build one chain per
//!   repair: its failure counts are what retire an endpoint.
//! - [`tools`]: the governed tools' schemas ([`tools::tool_specs`]),
//!   fail-closed parsing ([`tools::parse_call`]) and execution in a branch
//!   directory ([`tools::execute`]); the runtime implements [`BranchVerifier`].

pub mod config;
mod failover;
mod http;
mod scripted;
pub mod tools;
mod transport;

pub use config::{AdapterKind, ModelEndpoint, TestPolicy, VerificationConfig, family_of_model};
pub use failover::{
    Attempt, Call, CallOutcome, ChainEndpoint, FAILURES_TO_RETIRE, FailoverChain, FailoverState,
    ObservedBody,
};
pub use http::{DEFAULT_MAX_RESPONSE_BYTES, HttpTransport, KeyLookup};
pub use scripted::{Scripted, ScriptedTransport};
pub use tools::{BranchVerifier, VerifierReport};
pub use transport::{
    AttemptClass, BoxFuture, ChatMessage, ChatReply, ChatRequest, RawResponse, ReplyError,
    TokenUsage, ToolCall, Transport, TransportFailure, classify, parse_reply, request_body,
    text_tool_call,
};
