//! The model actor (PSP-10 system 27): configured endpoints, the
//! OpenAI-compatible transport and its failover chain, the governed tools,
//! and the turn runner that drives a model through them in one branch.
//!
//! This module owns everything between a branch directory and a model
//! endpoint. It never decides whether a branch is good (the branch is
//! measured, gated and selected like any other proposer's), never writes
//! outside the branch directory it is given, never spawns a process (the
//! build and test tools go through [`BranchVerifier`]), and never holds an
//! API key in a value that is printed, serialized or ledgered.
//!
//! # Public API (what the search runtime calls)
//!
//! - `config::models`: [`ModelEndpoint`] (`[[models]]`), [`TurnLimits`]
//!   (`[model_turns]`), [`VerificationConfig`] /
//!   [`TestPolicy`] (`[verification]`), [`family_of_model`]; loaded through
//!   `Config::models` and `Config::verification`.
//! - [`FailoverChain::new`] over [`ChainEndpoint`]s, one per configured
//!   endpoint, each with a [`Transport`]: [`HttpTransport::new`] for
//!   `openai-chat`, [`ScriptedTransport`] in tests. Build one chain per
//!   repair: its failure counts are what retire an endpoint.
//! - [`run_actor`]`(chain, inputs, limits, ActorContext { branch, verifier,
//!   ledger, cancel })` → [`ActorOutcome`]; the runtime implements
//!   [`TurnLedger`] (reserve a turn, ledger programs, raw attempts and turn
//!   records) and [`BranchVerifier`] (the build and test stages in the slot).
//! - [`replay_request`]`(prepared, conversation, pinned_bundles, limits)` rebuilds the
//!   exact body of a ledgered call from its [`PreparedRequest`] and the turns'
//!   [`TurnRecord::appended`] deltas, without a model (Gate Z);
//!   [`model_calls`] does it for every call ledgered in a set of rows.
//!
//! # Architecture invariant
//!
//! A model acts only through the governed tools, inside its branch
//! (`actor::runner::tests::escapes_and_protected_paths_are_refused_and_nothing_outside_is_written`,
//! `malformed_arguments_and_unknown_tools_are_tool_errors_and_change_nothing`,
//! `a_finish_after_an_edit_leaves_the_edit_in_the_branch`). Every call is
//! observed raw, with no API key in any recorded value
//! (`actor_http::the_exact_body_is_posted_with_the_key_only_in_its_header`),
//! and replays without a model or fails closed
//! (`replay_refuses_a_request_whose_recorded_inputs_changed`,
//! `actor::replay::tests::gate_z_a_call_without_ledgered_programs_fails_closed`).
//! A hung or failing endpoint cannot hold a repair
//! (`a_hanging_endpoint_is_ended_by_the_deadline`,
//! `a_chain_of_failing_endpoints_retires_each_after_one_retry`; through the
//! binary,
//! `model_repair::a_hanging_endpoint_is_ended_by_its_deadline_and_the_repair_ends_soon_after`,
//! `lsp_model::cancelling_a_repair_aborts_the_request_the_model_never_answers`).

mod failover;
mod http;
mod paging;
mod replay;
mod runner;
mod scripted;
pub mod tools;
mod transport;

pub use crate::config::models::{
    AdapterKind, ModelEndpoint, TestPolicy, TurnLimits, VerificationConfig, family_of_model,
};
pub use failover::{
    Attempt, Call, CallOutcome, ChainEndpoint, FAILURES_TO_RETIRE, FailoverChain, FailoverState,
    ObservedBody,
};
pub use http::{DEFAULT_MAX_RESPONSE_BYTES, HttpTransport, KeyLookup};
pub use paging::ContextEvent;
pub use replay::{AttachedTexts, ModelCall, model_calls, model_calls_with};
pub use runner::{
    ActorContext, ActorOutcome, PreparedRequest, PromptInputs, StopReason, TurnLedger, TurnRecord,
    TurnReply, TurnUsage, replay_request, route_of, run_actor,
};
pub use scripted::{Scripted, ScriptedTransport};
pub use tools::{BranchVerifier, ToolRecord, VerifierReport};
pub use transport::{
    AttemptClass, BoxFuture, ChatMessage, ChatReply, ChatRequest, RawResponse, ReplyError,
    TokenUsage, ToolCall, Transport, TransportFailure, classify, parse_reply, request_body,
    text_tool_call,
};
