//! The model route's inputs: the failover chain of a repair and the turn
//! state its programs present, built from the step's correction packet.
//!
//! Pure apart from building HTTP clients: it never runs the actor, copies,
//! measures or moves the budget (that is [`super::effects::ForestRun`]'s),
//! and never decides whether the model's branch is good (the step measures
//! and selects it like any other).
//!
//! # Architecture invariant
//!
//! A model's candidate is judged like any other, by the start's tests under
//! `backward-compatible`
//! (`model_search::backward_compatible_runs_the_in_file_tests_as_they_were_and_refuses_a_weakened_assertion`,
//! `backward_compatible_runs_the_doc_tests_as_they_were`;
//! `lsp/tests/it/model_repair.rs`), and continues partial checkpoints in its own
//! branch, shown what the branch it continues and the last attempt tried
//! (`the_model_continues_a_compiler_branch_partial_checkpoint_the_compiler_left`,
//! `the_model_continues_its_own_partial_checkpoint_in_a_new_branch_and_the_fix_is_promoted`,
//! `a_second_repair_shows_the_model_what_the_last_attempt_tried_and_how_it_measured`).

use trellis_core::text;
use trellis_prompts::composers::{BootstrapState, CorrectTurnState};
use trellis_prompts::plan::{PlanInput, RemainingBudget, WitnessKind, plan};
use trellis_prompts::{BoundedList, BoundedText, ObservationText, PromptStage};

use crate::actor::{
    ChainEndpoint, FailoverChain, HttpTransport, ModelEndpoint, PromptInputs, TurnLimits,
};
use crate::context::Focus;
use crate::correction::CorrectionPacket;
use crate::digest::{CanonicalHasher, Digest};
use crate::ledger::{DecodedRow, Row, SearchEvent};
use crate::prompt_policy::SessionPrompts;
use crate::report::{BranchOutcome, BranchReport};
use crate::search::OperatorKind;

/// The route a model branch is ledgered under: the first endpoint of the
/// chain names it (failover may answer from a later one; each turn's
/// ledger rows name the endpoint that answered).
pub(super) fn route_name(models: &[ModelEndpoint]) -> String {
    format!("model:{}", models.first().map_or("", |m| m.name.as_str()))
}

/// The proposal identity of a model branch: the state it left, under its
/// route (a model is not deterministic, so nothing else identifies it).
pub(super) fn proposal_digest(route: &str, root: &Digest) -> Digest {
    CanonicalHasher::new("trellis.model-proposal.v1")
        .str(route)
        .digest(root)
        .finish()
}

/// One chain per repair: its failure counts are what retire an endpoint.
pub(super) fn chain(models: &[ModelEndpoint]) -> Result<FailoverChain, String> {
    let endpoints = models
        .iter()
        .map(|config| {
            Ok(ChainEndpoint {
                transport: Box::new(HttpTransport::new(config)?),
                config: config.clone(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(FailoverChain::new(endpoints))
}

/// The operator a model attempt carries out on `packet`: satisfy a
/// counterexample when a test fails, an edit otherwise.
pub(super) fn operator(packet: &CorrectionPacket) -> OperatorKind {
    if packet.counterexamples.is_empty() {
        OperatorKind::Edit
    } else {
        OperatorKind::SatisfyCounterexample
    }
}

/// What the last model attempt on a cluster tried and how it measured, and
/// how many model attempts on it the ledger holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Hypothesis {
    pub(super) text: String,
    pub(super) attempts: u32,
}

/// The previous hypothesis for `cluster_id` in the ledger's `rows`: the
/// latest `model_hypothesis_measured` row on it (from this repair or an
/// earlier one) or on the branch `continued` (forest, branch) whose
/// checkpoint the attempt continues.
pub(super) fn previous_hypothesis(
    rows: &[Row],
    cluster_id: &str,
    continued: Option<(&str, &str)>,
) -> Option<Hypothesis> {
    let tried: Vec<(&str, &str)> = rows
        .iter()
        .filter_map(|row| match &row.event {
            DecodedRow::Search {
                event:
                    SearchEvent::ModelHypothesisMeasured {
                        forest_id,
                        branch_id,
                        cluster_id: on,
                        hypothesis,
                        measured,
                    },
                ..
            } if on == cluster_id
                || continued == Some((forest_id.as_str(), branch_id.as_str())) =>
            {
                Some((hypothesis.as_str(), measured.as_str()))
            }
            _ => None,
        })
        .collect();
    let (hypothesis, measured) = tried.last()?;
    Some(Hypothesis {
        text: format!("the last attempt: {hypothesis}\nhow it measured: {measured}"),
        attempts: tried.len() as u32,
    })
}

/// The `model_hypothesis_measured` row for a model branch on `cluster_id`
/// that tried `hypothesis` and ended as `report` says.
pub(super) fn hypothesis_measured(
    forest_id: &str,
    cluster_id: &str,
    hypothesis: &str,
    report: &BranchReport,
) -> SearchEvent {
    let mut measured = match report.energy {
        _ if report.hard_pass => "a hard pass".to_owned(),
        Some(energy) => format!("energy {energy:.2}, not a hard pass"),
        None => "not measured".to_owned(),
    };
    if !report.clusters.is_empty() {
        measured.push_str(&format!("; left: {}", report.clusters.join("; ")));
    }
    if let BranchOutcome::Ineligible { reason, .. } | BranchOutcome::Partial { reason, .. } =
        &report.outcome
    {
        measured.push_str(&format!("; {reason}"));
    }
    SearchEvent::ModelHypothesisMeasured {
        forest_id: forest_id.to_owned(),
        branch_id: report.branch_id.clone(),
        cluster_id: cluster_id.to_owned(),
        hypothesis: clip(hypothesis, 512),
        measured: clip(&measured, 1024),
    }
}

/// The prompt plane's turn state for `packet`: its diagnostics, its failing
/// tests with their output as counterexamples, its affected spans, and the
/// previous hypothesis when one was refuted; compiled under the session's
/// prompt policy with its pinned bundles substituted, within `limits`.
pub(super) fn inputs(
    (session_id, workspace): (&str, &str),
    packet: &CorrectionPacket,
    previous_hypothesis: Option<&Hypothesis>,
    limits: &TurnLimits,
    prompts: &SessionPrompts,
) -> PromptInputs {
    let witness = if !packet.counterexamples.is_empty() {
        Some(WitnessKind::FailingTest)
    } else if !packet.diagnostics.is_empty() {
        Some(WitnessKind::CompilerDiagnostic)
    } else {
        None
    };
    let plan = plan(PlanInput {
        stage: PromptStage::BranchCorrect,
        residual: packet.class,
        witness,
        operator: operator(packet),
        revise_hypothesis: previous_hypothesis.is_some(),
        remaining: RemainingBudget {
            turns: limits.max_turns,
            tokens: 0,
        },
    });
    let diagnostic = packet.diagnostics.first().map(|d| {
        (
            BoundedText::new(clip(d.code.as_deref().unwrap_or("error"), 16))
                .expect("clipped to the bound"),
            ObservationText::new(clip(&d.message, 4096)).expect("clipped to the bound"),
        )
    });
    let failing_test = packet.counterexamples.first().map(|t| {
        (
            BoundedText::new(clip(&t.name, 256)).expect("clipped to the bound"),
            ObservationText::new(clip(&t.output, 4096)).expect("clipped to the bound"),
        )
    });
    PromptInputs {
        session_id: session_id.to_owned(),
        bootstrap: BootstrapState {
            workspace_name: BoundedText::new(clip(workspace, 128)).expect("clipped to the bound"),
            session_id: BoundedText::new(clip(session_id, 64)).expect("clipped to the bound"),
            granted_capabilities: BoundedList::new([
                "read, search and edit files in the branch",
                "run the build and the tests in the branch",
            ])
            .expect("two short capabilities fit"),
            write_ahead_note: None,
        },
        correction: CorrectTurnState {
            plan,
            tool_names: BoundedList::empty(),
            budget_note: None,
            packet: ObservationText::new(clip(&render_packet(packet), 8192))
                .expect("clipped to the bound"),
            diagnostic,
            failing_test,
            previous_hypothesis: previous_hypothesis.map(|h| {
                (
                    ObservationText::new(clip(&h.text, 1024)).expect("clipped to the bound"),
                    h.attempts,
                )
            }),
            hints: BoundedList::empty(),
        },
        policy: prompts.policy.resolution(),
        replacements: prompts.replacements.clone(),
        focus: focus(packet),
    }
}

/// What selection weighs optional pages by: the cluster's affected paths
/// and its failing tests.
fn focus(packet: &CorrectionPacket) -> Focus {
    Focus {
        paths: packet
            .affected
            .paths
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect(),
        tests: packet
            .counterexamples
            .iter()
            .map(|t| t.name.clone())
            .chain(packet.affected.tests.iter().cloned())
            .collect(),
    }
}

/// The packet as the model reads it: the cluster, each diagnostic with its
/// site, each failing test with its output, and the affected spans.
fn render_packet(packet: &CorrectionPacket) -> String {
    let mut out = format!("cluster: {}\n", packet.cluster_title);
    for d in &packet.diagnostics {
        let site = d
            .primary
            .as_ref()
            .map(|s| format!("{}:{}: ", s.path, s.line_start))
            .unwrap_or_default();
        let code = d
            .code
            .as_deref()
            .map(|c| format!("[{c}] "))
            .unwrap_or_default();
        out.push_str(&format!("diagnostic: {site}{code}{}\n", d.message));
    }
    for t in &packet.counterexamples {
        out.push_str(&format!("failing test `{}`:\n{}\n", t.name, t.output));
    }
    for s in &packet.affected.spans {
        out.push_str(&format!("affected: {}:{}\n", s.path, s.line_start));
    }
    out
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn clip(text: &str, max: usize) -> String {
    text::head(text, max).replace(['\0'], "")
}
