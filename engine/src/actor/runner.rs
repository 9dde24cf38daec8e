//! The turn runner: system 27's seven steps for every model call of one
//! actor in one branch, until `finish`, the turn limit, or no route.
//!
//! For each turn it (1) resolves the route of the endpoint about to be
//! called, (2) compiles the platform and domain programs for it, with the
//! tool schemas in the form the window's share allows
//! (`context::fixed_overhead`: full, or compact with fewer optional
//! sections), and hands their records to the ledger, (3) calls the
//! transport through the failover chain, (4) hands every raw attempt to
//! the ledger *before* parsing, (5) parses fail-closed, (6) turns tool
//! calls into governed proposals within the turn's tool-call and mutation
//! allowances, and (7) records the turn and appends it to the
//! conversation. All effects sit
//! behind [`TurnLedger`], [`BranchVerifier`] and the [`Transport`]s of the
//! chain, so the loop is tested with scripted transports. The runner never
//! decides whether a branch is good: its branch is measured like any other.

use std::path::Path;

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use trellis_prompts::bundles::PinnedReplacement;
use trellis_prompts::composers::{
    BootstrapState, CorrectTurnState, branch_correct, session_bootstrap,
};
use trellis_prompts::{
    BoundedList, BoundedText, CompileError, CompileOptions, CompiledPromptInvocation, MessageRole,
    ModelDialect, ProgramCache, ProgramRecord, PromptRoute, ResolutionPolicy, StageComposition,
    ToolCallConvention, TurnContext, reconstruct,
};

use super::failover::{Attempt, CallOutcome, ChainEndpoint, FailoverChain};
use super::tools::{
    BranchVerifier, TOOL_NAMES, ToolEffect, ToolError, ToolRecord, ToolRequest, execute,
    parse_call, render_result, tool_spec_hash, tool_specs,
};
use super::transport::{
    ChatMessage, ChatReply, ChatRequest, ReplyError, TokenUsage, ToolCall, parse_reply,
    request_body, text_tool_call,
};

use super::paging::{ContextEvent, Paging};
use crate::config::models::TurnLimits;
use crate::context::{
    Allowance, Calibrations, Focus, Overhead, OverheadInput, ResidentPlan, ToolForm, apply_plan,
    fixed_overhead,
};

#[cfg(doc)]
use super::transport::Transport;

/// What the programs are compiled from: the typed session and correction
/// state the runtime assembled from the correction packet.
#[derive(Debug, Clone)]
pub struct PromptInputs {
    pub session_id: String,
    pub bootstrap: BootstrapState,
    /// The correction turn's evidence. Its `tool_names` are replaced by the
    /// governed tools, so the list shown can never drift from the one enforced.
    pub correction: CorrectTurnState,
    pub policy: ResolutionPolicy,
    pub replacements: Vec<PinnedReplacement>,
    /// The residual cluster's paths and failing tests: optional pages that
    /// touch them are kept resident first.
    pub focus: Focus,
}

/// Where the runner's facts go; the runtime ledgers and charges them.
pub trait TurnLedger: Send {
    /// Before turn `turn` (1-based): reserve its action. An `Err` stops the
    /// run with [`StopReason::BudgetRefused`] before anything is sent.
    fn reserve_turn(&mut self, turn: u32) -> Result<(), String>;
    /// What one attempt's request is built from, before it is sent (Gate Z):
    /// its two programs, turn block, model and output bound.
    fn request_prepared(&mut self, request: &PreparedRequest);
    /// One raw transport attempt, before anything parses it (`turn_observed`).
    fn observed(&mut self, turn: u32, invocation_digest: &str, attempt: &Attempt);
    /// The turn as it ended, with its actual usage to settle.
    fn turn_completed(&mut self, record: &TurnRecord);
    /// A `context_*` fact: a turn's working set, a request's resident plan
    /// or its refusal, a recall or a miss (Gate AF).
    fn context(&mut self, event: &ContextEvent);
}

/// How a turn's call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TurnReply {
    Parsed {
        reply: ChatReply,
    },
    /// A 2xx body that is not a chat completion: a failed turn.
    Malformed {
        error: ReplyError,
    },
    /// The endpoint answered unusably (a 4xx, an oversized body).
    Refused,
    /// No endpoint answered; see [`StopReason`].
    None,
}

/// Everything a request is built from besides the conversation, as the
/// ledger records it: with the turns' conversation deltas,
/// [`replay_request`] rebuilds the exact bytes sent without a model.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreparedRequest {
    pub turn: u32,
    pub endpoint: String,
    /// The platform and domain programs, in that order.
    pub programs: [ProgramRecord; 2],
    pub invocation_digest: String,
    pub turn_block: String,
    pub model: String,
    pub max_tokens: u64,
    /// How many conversation messages (the deltas of earlier turns) it carried.
    pub conversation_len: usize,
    /// Which of those pages were resident and which tombstoned (Definition
    /// 6); replay lays the conversation out by it, without selecting again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ResidentPlan>,
}

impl PreparedRequest {
    /// The form of the tool schemas the request offered: its plan's, and
    /// full for a request recorded without one (before paging).
    pub fn tool_form(&self) -> ToolForm {
        self.context
            .as_ref()
            .map_or(ToolForm::Full, |plan| plan.allowance.tool_form)
    }
}

/// Actual usage of one turn, to settle its reservation with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TurnUsage {
    pub tokens: TokenUsage,
    pub tool_calls: u64,
    pub mutations: u64,
    pub verifier_runs: u64,
    pub result_bytes: u64,
}

/// What step 7 records for one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnRecord {
    pub turn: u32,
    /// The endpoint that answered, when one did.
    pub endpoint: Option<String>,
    pub reply: TurnReply,
    pub tools: Vec<ToolRecord>,
    /// The messages this turn added to the conversation (its delta).
    pub appended: Vec<ChatMessage>,
    pub usage: TurnUsage,
}

/// Why the run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum StopReason {
    /// The model called `finish`: the branch as it stands is the candidate.
    Finished {
        summary: String,
    },
    /// The turn limit: the branch is measured as it stands.
    TurnLimit,
    /// Every endpoint is retired for this repair (environmental, never a no-good).
    RouteUnavailable,
    Cancelled,
    /// A request could not be built (programs over budget, context too
    /// large); nothing was sent.
    Unbuildable {
        endpoint: String,
        reason: String,
    },
    BudgetRefused {
        reason: String,
    },
}

/// The result of one actor run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActorOutcome {
    pub stop: StopReason,
    /// Turns that reached the transport.
    pub turns: u32,
    pub usage: TurnUsage,
    /// The conversation after the instruction programs, for checkpoints.
    pub conversation: Vec<ChatMessage>,
}

/// The branch and effects one run works with.
pub struct ActorContext<'a> {
    /// The branch directory every file tool is confined to.
    pub branch: &'a Path,
    /// Paths in it no tool may read, list or change (the verification
    /// oracle's overlay, `verification.oracle_path`).
    pub withheld: &'a [String],
    pub verifier: &'a mut dyn BranchVerifier,
    pub ledger: &'a mut dyn TurnLedger,
    pub cancel: &'a CancellationToken,
}

/// The route a call to `endpoint` compiles its programs for (system 24):
/// the transport's adapter identity, the endpoint's family, its exact model.
pub fn route_of(endpoint: &ChainEndpoint) -> PromptRoute {
    PromptRoute::new(
        endpoint.transport.adapter_kind(),
        endpoint.config.family(),
        Some(&endpoint.config.model),
    )
}

/// Runs the actor in `cx.branch` until it finishes or a limit stops it.
pub async fn run_actor(
    chain: &mut FailoverChain,
    inputs: &PromptInputs,
    limits: &TurnLimits,
    cx: ActorContext<'_>,
) -> ActorOutcome {
    let ActorContext {
        branch,
        withheld,
        verifier,
        ledger,
        cancel,
    } = cx;
    let mut correction = inputs.correction.clone();
    correction.tool_names = BoundedList::new(TOOL_NAMES).expect("the short tool names fit");
    let mut cache = ProgramCache::default();
    let mut conversation: Vec<ChatMessage> = Vec::new();
    let mut paging = Paging::restored(&conversation);
    // Per endpoint, from the usage each answered request reported.
    let mut calibrations = Calibrations::default();
    let mut total = TurnUsage::default();
    let mut turns = 0;
    let stop = 'run: {
        for turn in 1..=limits.max_turns {
            if cancel.is_cancelled() {
                break 'run StopReason::Cancelled;
            }
            if let Err(reason) = ledger.reserve_turn(turn) {
                break 'run StopReason::BudgetRefused { reason };
            }
            let turn_block = turn_context(turn, limits);
            let live = paging.live(branch);
            // Once per turn, before any attempt is built: every attempt's
            // plan selects within the same recorded set.
            let working = paging
                .working_set(
                    &conversation,
                    (turn, limits.working_set_turns),
                    &live,
                    &inputs.focus,
                )
                .map_err(|e| e.to_string());
            if let Ok(set) = &working {
                ledger.context(&ContextEvent::WorkingSet {
                    digest: set.digest(),
                    working_set: set.clone(),
                });
            }
            let mut digests = Vec::new();
            // The plan of each attempt's request, in attempt order.
            let mut plans = Vec::new();
            let call = {
                let mut build = |_: usize, endpoint: &ChainEndpoint| {
                    let route = route_of(endpoint);
                    let dialect = ModelDialect::for_route(&route);
                    let (window, output) = (
                        endpoint.config.context_window_tokens,
                        endpoint.config.max_output_tokens,
                    );
                    let calibration = calibrations.of(&endpoint.config.name);
                    let platform = session_bootstrap(&inputs.bootstrap, dialect);
                    let domain = branch_correct(&correction);
                    let options = |form| CompileOptions {
                        route: &route,
                        dialect,
                        budget_tokens: dialect.default_budget_tokens().min(window - output),
                        tool_spec_hash: tool_spec_hash(form),
                        policy: inputs.policy,
                        replacements: &inputs.replacements,
                    };
                    // The full form first; the compact one when it takes
                    // more of the window than its share (context::overhead).
                    let full = compile_programs(
                        &mut cache,
                        (&platform, &domain),
                        &options(ToolForm::Full),
                        None,
                    )?;
                    let full_head = assemble(&full.1, dialect, &turn_block, &[]);
                    let full_allowance = Allowance::for_route(
                        window,
                        output,
                        (ToolForm::Full, &tool_specs(ToolForm::Full)),
                        calibration,
                    );
                    let accountant = full_allowance.accountant()?;
                    let overhead = fixed_overhead(OverheadInput {
                        window,
                        full_input: full_allowance.input,
                        full_tools: full_allowance.tools,
                        compact_tools: accountant.tools(&tool_specs(ToolForm::Compact)),
                        full_instructions: accountant.messages(&full_head),
                        turn_block: accountant.message(&ChatMessage::User {
                            content: turn_block.clone(),
                        }),
                    });
                    let form = overhead.tool_form();
                    let specs = tool_specs(form);
                    let ((platform_options, domain_options), compiled, head, allowance) =
                        match overhead {
                            Overhead::Full => (full.0, full.1, full_head, full_allowance),
                            Overhead::Compact { instruction_budget } => {
                                let (options, compiled) = compile_programs(
                                    &mut cache,
                                    (&platform, &domain),
                                    &options(form),
                                    Some(instruction_budget),
                                )?;
                                let head = assemble(&compiled, dialect, &turn_block, &[]);
                                let allowance = Allowance::for_route(
                                    window,
                                    output,
                                    (form, &specs),
                                    calibration,
                                );
                                (options, compiled, head, allowance)
                            }
                        };
                    let digest = &compiled.invocation_digest;
                    let plan = paging
                        .plan(
                            &conversation,
                            accountant.messages(&head),
                            &allowance,
                            (&live, &inputs.focus),
                            working.as_ref().map_err(Clone::clone)?,
                        )
                        .map_err(|e| {
                            if let crate::context::FitError::Infeasible(figures) = &e {
                                ledger.context(&ContextEvent::Infeasible {
                                    turn,
                                    endpoint: endpoint.config.name.clone(),
                                    infeasible: figures.clone(),
                                });
                            }
                            e.to_string()
                        })?;
                    let mut messages = head;
                    messages.extend(apply_plan(&plan, &conversation)?);
                    if accountant.messages(&messages) > allowance.input {
                        return Err(format!(
                            "the composed request is over its input allowance of {} tokens",
                            allowance.input
                        ));
                    }
                    ledger.context(&ContextEvent::PagesSelected {
                        turn,
                        endpoint: endpoint.config.name.clone(),
                        plan_digest: plan.digest(),
                        plan: plan.clone(),
                    });
                    ledger.request_prepared(&PreparedRequest {
                        turn,
                        endpoint: endpoint.config.name.clone(),
                        programs: [
                            ProgramRecord::new(
                                &inputs.session_id,
                                &platform,
                                &platform_options,
                                &compiled.platform,
                                Some(digest),
                            ),
                            ProgramRecord::new(
                                &inputs.session_id,
                                &domain,
                                &domain_options,
                                &compiled.domain,
                                Some(digest),
                            ),
                        ],
                        invocation_digest: digest.clone(),
                        turn_block: turn_block.clone(),
                        model: endpoint.config.model.clone(),
                        max_tokens: endpoint.config.max_output_tokens,
                        conversation_len: conversation.len(),
                        context: Some(plan.clone()),
                    });
                    digests.push(digest.clone());
                    plans.push(plan);
                    Ok(request_body(&ChatRequest {
                        model: &endpoint.config.model,
                        messages: &messages,
                        tools: &specs,
                        max_tokens: endpoint.config.max_output_tokens,
                    }))
                };
                chain.call(&mut build, cancel).await
            };
            for (attempt, digest) in call.attempts.iter().zip(&digests) {
                ledger.observed(turn, digest, attempt);
            }
            let answered = call.attempts.last();
            let mut record = TurnRecord {
                turn,
                endpoint: None,
                reply: TurnReply::None,
                tools: Vec::new(),
                appended: Vec::new(),
                usage: TurnUsage::default(),
            };
            let before = conversation.len();
            if !call.attempts.is_empty() {
                turns += 1;
            }
            let mut finished = None;
            match call.outcome {
                CallOutcome::RouteUnavailable => {
                    ledger.turn_completed(&record);
                    break 'run StopReason::RouteUnavailable;
                }
                CallOutcome::Cancelled => {
                    ledger.turn_completed(&record);
                    break 'run StopReason::Cancelled;
                }
                CallOutcome::Unbuildable { endpoint, reason } => {
                    ledger.turn_completed(&record);
                    break 'run StopReason::Unbuildable {
                        endpoint: chain.endpoints()[endpoint].config.name.clone(),
                        reason,
                    };
                }
                CallOutcome::FailedTurn => {
                    record.endpoint = answered.map(|a| a.endpoint_name.clone());
                    record.reply = TurnReply::Refused;
                }
                CallOutcome::Answered => {
                    let attempt = answered.expect("an answered call has an attempt");
                    record.endpoint = Some(attempt.endpoint_name.clone());
                    let body = attempt.response.as_ref().map_or(&[][..], |b| b.as_bytes());
                    match parse_reply(body) {
                        Err(error) => record.reply = TurnReply::Malformed { error },
                        Ok(reply) => {
                            let endpoint = &chain.endpoints()[attempt.endpoint];
                            let dialect = ModelDialect::for_route(&route_of(endpoint));
                            finished = act(
                                &reply,
                                dialect,
                                limits,
                                ToolBranch {
                                    root: branch,
                                    withheld,
                                    verifier: &mut *verifier,
                                },
                                &mut conversation,
                                &mut paging,
                                &mut record,
                            )
                            .await;
                            record.usage.tokens = reply.usage.unwrap_or_default();
                            let reported = record.usage.tokens.prompt_tokens;
                            let sent = plans.last().expect("an answered call was built");
                            if let Some(underestimate) =
                                calibrations.observe(&attempt.endpoint_name, sent, reported)
                            {
                                ledger.context(&ContextEvent::Underestimated {
                                    turn,
                                    endpoint: attempt.endpoint_name.clone(),
                                    underestimate,
                                });
                            }
                            record.reply = TurnReply::Parsed { reply };
                        }
                    }
                }
            }
            record.appended = conversation[before..].to_vec();
            paging.turn_ended(branch, turn, &conversation, before, &record.tools);
            for event in paging.take_events() {
                ledger.context(&event);
            }
            add(&mut total, &record.usage);
            ledger.turn_completed(&record);
            if let Some(summary) = finished {
                break 'run StopReason::Finished { summary };
            }
        }
        StopReason::TurnLimit
    };
    ActorOutcome {
        stop,
        turns,
        usage: total,
        conversation,
    }
}

/// The branch a turn's tools act on: its root, the paths the model may not
/// read there, and the verifier its check and test calls run.
struct ToolBranch<'b> {
    root: &'b Path,
    withheld: &'b [String],
    verifier: &'b mut dyn BranchVerifier,
}

/// Steps 5–7 for a parsed reply: the tool calls it makes (native, or one
/// JSON envelope in text for a JSON-in-text dialect) run as governed
/// proposals within the turn's allowances, and the reply and every result
/// join the conversation. Returns the summary when `finish` was called.
async fn act(
    reply: &ChatReply,
    dialect: &ModelDialect,
    limits: &TurnLimits,
    tools: ToolBranch<'_>,
    conversation: &mut Vec<ChatMessage>,
    paging: &mut Paging,
    record: &mut TurnRecord,
) -> Option<String> {
    let calls: Vec<ToolCall> = if !reply.tool_calls.is_empty() {
        reply.tool_calls.clone()
    } else if dialect.tool_calls == ToolCallConvention::JsonInText {
        reply
            .content
            .as_deref()
            .and_then(text_tool_call)
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    conversation.push(ChatMessage::Assistant {
        content: reply.content.clone(),
        tool_calls: calls.clone(),
    });
    if calls.is_empty() {
        conversation.push(ChatMessage::User {
            content: NO_TOOL_CALL_NOTE.to_owned(),
        });
        return None;
    }
    let mut finished = None;
    for call in calls {
        let parsed = parse_call(&call.name, &call.arguments);
        let request = parsed.as_ref().ok().cloned();
        let result = match parsed {
            Err(e) => Err(e),
            Ok(_) if finished.is_some() => {
                Err(ToolError("not run: `finish` was already called".into()))
            }
            Ok(_) if record.usage.tool_calls >= u64::from(limits.tool_calls_per_turn) => {
                Err(ToolError(format!(
                    "not run: this turn's allowance of {} tool calls is used up",
                    limits.tool_calls_per_turn
                )))
            }
            Ok(r)
                if r.is_mutation()
                    && record.usage.mutations >= u64::from(limits.mutations_per_turn) =>
            {
                Err(ToolError(format!(
                    "not run: this turn's allowance of {} edits is used up",
                    limits.mutations_per_turn
                )))
            }
            Ok(r) => {
                record.usage.tool_calls += 1;
                let result = match &r {
                    ToolRequest::ContextRecall(key) => {
                        paging.recall(record.turn, conversation, key)
                    }
                    _ => {
                        execute(
                            &r,
                            tools.root,
                            tools.withheld,
                            tools.verifier,
                            limits.result_bytes,
                        )
                        .await
                    }
                };
                match result.as_ref().map(|o| &o.effect) {
                    Ok(ToolEffect::Mutated { .. }) => record.usage.mutations += 1,
                    Ok(ToolEffect::Verified { .. }) => record.usage.verifier_runs += 1,
                    Ok(ToolEffect::Finished { summary }) => finished = Some(summary.clone()),
                    Ok(ToolEffect::None) | Err(_) => {}
                }
                result
            }
        };
        if let Ok(output) = &result {
            record.usage.result_bytes += output.data.len() as u64;
        }
        conversation.push(ChatMessage::ToolResult {
            call_id: call.id.clone(),
            content: render_result(&call.name, &result),
        });
        record.tools.push(ToolRecord {
            call,
            request,
            result,
        });
    }
    finished
}

/// The messages of a request: the invocation's programs as the dialect
/// lays them out, the turn block, then the conversation so far.
fn assemble(
    invocation: &CompiledPromptInvocation,
    dialect: &ModelDialect,
    turn_block: &str,
    conversation: &[ChatMessage],
) -> Vec<ChatMessage> {
    invocation
        .transport_messages(dialect, &[turn_block.to_owned()])
        .into_iter()
        .map(|(role, content)| match role {
            MessageRole::System => ChatMessage::System { content },
            MessageRole::User => ChatMessage::User { content },
        })
        .chain(conversation.iter().cloned())
        .collect()
}

/// The options each program was compiled under, and the pair.
type Programs<'a> = (
    (CompileOptions<'a>, CompileOptions<'a>),
    CompiledPromptInvocation,
);

/// The two programs of a call compiled under `options` (whose tool
/// surface names the form offered), with the options each was compiled
/// under. Within `budget` when given: the platform program first, the
/// domain program within what the platform's estimate leaves, so the pair
/// stays within it; the prompt compiler drops each program's optional
/// sections by increasing priority (ties by id) until it fits. A program
/// whose required sections alone exceed its part is compiled with every
/// optional section dropped (its budget is then what the required ones
/// charge), never with a required one missing: the request's fit
/// (Definition 6) then decides whether it can be sent.
fn compile_programs<'a>(
    cache: &mut ProgramCache,
    (platform, domain): (&StageComposition, &StageComposition),
    options: &CompileOptions<'a>,
    budget: Option<u64>,
) -> Result<Programs<'a>, String> {
    let mut within = |composition: &StageComposition, budget_tokens: u64| {
        let options = CompileOptions {
            budget_tokens,
            ..options.clone()
        };
        match cache.get_or_compile(composition, &options) {
            Err(CompileError::RequiredOverBudget {
                required_tokens, ..
            }) => {
                let options = CompileOptions {
                    budget_tokens: required_tokens,
                    ..options
                };
                let program = cache.get_or_compile(composition, &options);
                program.map(|p| (options, p))
            }
            compiled => compiled.map(|p| (options, p)),
        }
        .map_err(|e| e.to_string())
    };
    let (platform_options, p) = within(platform, budget.unwrap_or(options.budget_tokens))?;
    let rest = budget.map_or(options.budget_tokens, |b| {
        b.saturating_sub(p.estimated_tokens)
    });
    let (domain_options, d) = within(domain, rest)?;
    let invocation =
        CompiledPromptInvocation::new((*p).clone(), (*d).clone()).map_err(|e| e.to_string())?;
    Ok(((platform_options, domain_options), invocation))
}

/// Rebuilds the exact body of a recorded request without a model (Gate Z,
/// Proposition 4): both programs are recompiled from this build's sections
/// (and `replacements`, the session's pinned bundles) and must have their
/// recorded digests, the tool surface must be this build's in the form
/// the plan recorded, and
/// `conversation` is the concatenated deltas of the turns before it, and
/// the turn block is rebuilt from `limits`, the session's `[model_turns]`;
/// the rebuilt messages must charge what the plan recorded, under the
/// accountant it names. Any mismatch is an error, never a best effort.
pub fn replay_request(
    request: &PreparedRequest,
    conversation: &[ChatMessage],
    replacements: &[PinnedReplacement],
    limits: &TurnLimits,
) -> Result<String, String> {
    let turn_block = turn_context(request.turn, limits);
    if turn_block != request.turn_block {
        return Err(format!(
            "turn {}'s recorded turn block is not the one the session's `[model_turns]` give",
            request.turn
        ));
    }
    let invocation = rebuild_programs(request, replacements)?;
    let dialect = ModelDialect::ALL
        .iter()
        .find(|d| d.dialect_ref() == invocation.platform.dialect)
        .ok_or("the request's dialect is not in this build")?;
    let conversation = conversation
        .get(..request.conversation_len)
        .ok_or("the recorded conversation is shorter than the request's")?;
    let paged = match &request.context {
        Some(plan) => apply_plan(plan, conversation)?,
        None => conversation.to_vec(),
    };
    let messages = assemble(&invocation, dialect, &turn_block, &paged);
    if let Some(plan) = &request.context {
        // Gate AF under the arithmetic the plan was made with.
        let charged = plan.allowance.accountant()?.messages(&messages);
        if charged != plan.request_tokens || charged > plan.allowance.input {
            return Err(format!(
                "turn {}'s request charges {charged} tokens under {} v{}, not the {} its plan \
                 recorded within an allowance of {}",
                request.turn,
                plan.allowance.accountant,
                plan.allowance.accountant_version,
                plan.request_tokens,
                plan.allowance.input
            ));
        }
    }
    Ok(request_body(&ChatRequest {
        model: &request.model,
        messages: &messages,
        tools: &tool_specs(request.tool_form()),
        max_tokens: request.max_tokens,
    }))
}

/// Recompiles a recorded request's two programs from this build's sections
/// and `replacements`, checked against their recorded digests, their
/// invocation digest and this build's tool surface (Gate Z).
pub(super) fn rebuild_programs(
    request: &PreparedRequest,
    replacements: &[PinnedReplacement],
) -> Result<CompiledPromptInvocation, String> {
    let [platform, domain] = &request.programs;
    let surface = tool_spec_hash(request.tool_form());
    if platform.tool_spec_hash != surface || domain.tool_spec_hash != surface {
        return Err("the request offered a tool surface this build does not have".into());
    }
    let invocation = CompiledPromptInvocation::new(
        reconstruct(platform, replacements)?,
        reconstruct(domain, replacements)?,
    )
    .map_err(|e| e.to_string())?;
    if invocation.invocation_digest != request.invocation_digest {
        return Err(format!(
            "the programs pair to invocation {}, not the recorded {}",
            invocation.invocation_digest, request.invocation_digest
        ));
    }
    Ok(invocation)
}

/// What the model is told after a reply that called no tool.
const NO_TOOL_CALL_NOTE: &str =
    "[trellis:turn-note] Your reply called no tool. Act through the tools, or call `finish`.";

/// The per-turn facts, as a delimited turn-context block.
fn turn_context(turn: u32, limits: &TurnLimits) -> String {
    let fact = |text: String| BoundedText::<512>::new(text).expect("a short numeric fact");
    TurnContext::new()
        .fact("turn", &fact(format!("{turn} of {}", limits.max_turns)))
        .fact(
            "allowances",
            &fact(format!(
                "{} tool calls and {} edits this turn; each result shows at most {} bytes",
                limits.tool_calls_per_turn, limits.mutations_per_turn, limits.result_bytes
            )),
        )
        .render()
}

fn add(total: &mut TurnUsage, turn: &TurnUsage) {
    total.tokens.prompt_tokens += turn.tokens.prompt_tokens;
    total.tokens.completion_tokens += turn.tokens.completion_tokens;
    total.tool_calls += turn.tool_calls;
    total.mutations += turn.mutations;
    total.verifier_runs += turn.verifier_runs;
    total.result_bytes += turn.result_bytes;
}

#[cfg(test)]
mod tests;
