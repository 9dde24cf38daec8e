//! Gate Z over the ledger: every model call a session made, its exact
//! request rebuilt from the ledgered programs and conversation deltas and
//! compared byte for byte with the body that was sent, without a model.
//!
//! Each session's context comes from its `session_started` row: the
//! prompt bundles it pinned (read back from the store by content hash) and
//! the `[model_turns]` it ran under.
//!
//! It reads rows and the pinned bundle copies and never writes. It fails
//! closed: programs that do not recompile to their recorded digests (a
//! changed or missing pinned copy among them), a raw attempt with no
//! ledgered programs before it, a program without a digest, a plan whose
//! calibration is not the one its branch's reported usages give, or a
//! rebuilt body that differs from the recorded one (or charges other than
//! its plan under the plan's accountant) is an error naming the row, never
//! a call reported as replayable.
//!
//! # Architecture invariant
//!
//! Every ledgered call rebuilds byte for byte, with the session's pinned
//! bundles and `[model_turns]`, or fails closed
//! (`model_repair::replay_and_explain_session_reproduce_the_exact_requests_the_server_received`,
//! `actor::replay::tests::gate_z_a_call_without_ledgered_programs_fails_closed`,
//! `model_search::gate_z_a_resume_past_a_program_digest_that_no_longer_reconstructs_fails_closed`,
//! `pinned_bundles_and_the_allow_flag_shape_the_model_prompts_and_replay_reproduces_them`,
//! `model_turns_from_the_config_bound_each_model_branch_and_replay_rebuilds_them`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use trellis_prompts::ProgramRecord;
use trellis_prompts::bundles::PinnedReplacement;

use super::runner::{PreparedRequest, rebuild_programs, replay_request};
use super::transport::ChatMessage;
use crate::config::models::TurnLimits;
use crate::context::Calibrations;
use crate::ledger::{BundlesAttached, DecodedRow, LedgerEvent, Row, SearchEvent, SessionStarted};
use crate::prompt_policy::{PinnedBundleSection, layered, restore_pinned};

/// One model call as the ledger shows it, its request reproduced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCall {
    /// The ledger sequence number of its `model_turn_observed` row.
    pub seq: u64,
    pub forest_id: String,
    pub branch_id: String,
    pub turn: u32,
    pub endpoint: String,
    /// The invocation digest pairing its platform and domain programs.
    pub program_digest: String,
    /// The platform and domain programs: route, dialect, sections with
    /// versions and hashes, dropped sections.
    pub programs: [ProgramRecord; 2],
    /// The exact body sent (headers excluded), rebuilt and checked equal.
    pub request_body: String,
}

impl ModelCall {
    /// The request body as JSON (it is JSON by construction).
    pub fn request(&self) -> Value {
        serde_json::from_str(&self.request_body).unwrap_or(Value::Null)
    }
}

/// What a session's model calls were compiled under, from its
/// `session_started` row; its pinned bundles are read back on first use.
#[derive(Default)]
struct SessionContext {
    pinned: Vec<PinnedBundleSection>,
    replacements: Option<Vec<PinnedReplacement>>,
    limits: TurnLimits,
}

impl SessionContext {
    fn of(started: &SessionStarted) -> Result<SessionContext, String> {
        let pinned = match started.config.get("prompt_bundles") {
            None => Vec::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("unreadable pinned prompt bundles: {e}"))?,
        };
        // A session recorded before `[model_turns]` existed ran under the
        // defaults, which were then constants.
        let limits = match started.config["workspace"].get("model_turns") {
            None => TurnLimits::DEFAULT,
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("unreadable `model_turns`: {e}"))?,
        };
        Ok(SessionContext {
            pinned,
            replacements: None,
            limits,
        })
    }

    fn replacements(&mut self, state: &Path) -> Result<&[PinnedReplacement], String> {
        if self.replacements.is_none() {
            self.replacements = Some(restore_pinned(state, &self.pinned)?);
        }
        Ok(self.replacements.as_deref().unwrap_or_default())
    }
}

/// The store texts the repair of `forest_id` attached (matched by its
/// `{node}/{generation}/` prefix; the latest such row wins), or none.
fn attached_to<'a>(
    attached: &'a [(String, Vec<PinnedReplacement>)],
    forest_id: &str,
) -> &'a [PinnedReplacement] {
    attached
        .iter()
        .rev()
        .find(|(prefix, _)| forest_id.starts_with(prefix.as_str()))
        .map_or(&[][..], |(_, texts)| texts.as_slice())
}

/// Every model call in `rows`, each request rebuilt and compared with the
/// one sent; `state_dir` is the `.trellis` directory whose store holds the
/// sessions' pinned bundles. Every ledgered pair of programs must recompile
/// to its digests, even one whose call was never observed (a process killed
/// mid-call), so a resume can refuse past it. `Err` names the first row
/// that cannot be reproduced. A repair that attached store bundles cannot
/// be replayed here (see [`model_calls_with`]).
pub fn model_calls(rows: &[Row], state_dir: &Path) -> Result<Vec<ModelCall>, String> {
    model_calls_with(rows, state_dir, &|_| {
        Err("the repair attached prompt bundles; replay needs the bundle store".to_owned())
    })
}

/// The section texts a ledgered `bundles_attached` row names, read back
/// from the bundle store (checksum-checked), for [`model_calls_with`].
pub type AttachedTexts<'a> =
    dyn Fn(&BundlesAttached) -> Result<Vec<PinnedReplacement>, String> + 'a;

/// [`model_calls`], each call rebuilt with the bundle texts its repair
/// recorded attaching (`bundles` reads them back), never the store's current ones.
pub fn model_calls_with(
    rows: &[Row],
    state_dir: &Path,
    bundles: &AttachedTexts,
) -> Result<Vec<ModelCall>, String> {
    // Per branch: the prepared requests of the running turn, in order, and
    // the conversation so far (the deltas of completed turns).
    #[derive(Default)]
    struct BranchState {
        prepared: Vec<PreparedRequest>,
        used: usize,
        conversation: Vec<ChatMessage>,
        /// Derived again from the plans and reported usages, as the run did.
        calibrations: Calibrations,
    }
    let mut branches: BTreeMap<(String, String), BranchState> = BTreeMap::new();
    let mut calls = Vec::new();
    let mut session = SessionContext::default();
    // By forest-id prefix (`{node}/{generation}/`): the texts that repair attached.
    let mut attached: Vec<(String, Vec<PinnedReplacement>)> = Vec::new();
    for row in rows {
        let event = match &row.event {
            DecodedRow::Search { event, .. } => event,
            DecodedRow::Ledger(LedgerEvent::SessionStarted(started)) => {
                session = SessionContext::of(started)
                    .map_err(|e| format!("ledger row {}: {e}", row.seq))?;
                continue;
            }
            DecodedRow::Ledger(LedgerEvent::BundlesAttached(e)) => {
                let texts = bundles(e).map_err(|m| format!("ledger row {}: {m}", row.seq))?;
                attached.push((format!("{}/{}/", e.node, e.generation), texts));
                continue;
            }
            _ => continue,
        };
        let key = (event.forest_id().to_owned(), event.branch_id().to_owned());
        match event {
            SearchEvent::ModelProgramsCompiled {
                turn,
                invocation_digest,
                request,
                ..
            } => {
                if invocation_digest.is_empty() {
                    return Err(format!(
                        "ledger row {}: model programs without a program digest (Gate Z)",
                        row.seq
                    ));
                }
                let prepared: PreparedRequest =
                    serde_json::from_value(request.clone()).map_err(|e| {
                        format!("ledger row {}: unreadable model programs: {e}", row.seq)
                    })?;
                if prepared.invocation_digest != *invocation_digest
                    || prepared.turn != *turn
                    || prepared
                        .programs
                        .iter()
                        .any(|p| p.program_digest.is_empty())
                {
                    return Err(format!(
                        "ledger row {}: model programs without a consistent digest (Gate Z)",
                        row.seq
                    ));
                }
                let repair_texts = attached_to(&attached, &key.0);
                session
                    .replacements(state_dir)
                    .and_then(|pinned| rebuild_programs(&prepared, &layered(pinned, repair_texts)))
                    .map_err(|e| {
                        format!(
                            "ledger row {}: program digest {} cannot be reconstructed (Gate Z): {e}",
                            row.seq, invocation_digest
                        )
                    })?;
                let state = branches.entry(key).or_default();
                if let Some(plan) = &prepared.context {
                    let derived = state.calibrations.of(&prepared.endpoint);
                    if plan.allowance.calibration != derived {
                        return Err(format!(
                            "ledger row {}: the plan is calibrated at {}‰, but the usage its \
                             branch's endpoint reported gives {derived}‰",
                            row.seq, plan.allowance.calibration
                        ));
                    }
                }
                if state.prepared.first().is_some_and(|p| p.turn != *turn) {
                    state.prepared.clear();
                    state.used = 0;
                }
                state.prepared.push(prepared);
            }
            SearchEvent::ModelTurnObserved {
                turn,
                invocation_digest,
                attempt,
                ..
            } => {
                let state = branches.entry(key.clone()).or_default();
                let prepared = state
                    .prepared
                    .get(state.used)
                    .filter(|p| p.turn == *turn && p.invocation_digest == *invocation_digest)
                    .ok_or_else(|| {
                        format!(
                            "ledger row {}: a model call with no ledgered program digest before \
                             it (Gate Z: it cannot be replayed)",
                            row.seq
                        )
                    })?
                    .clone();
                state.used += 1;
                let sent = attempt["request_body"].as_str().ok_or_else(|| {
                    format!("ledger row {}: the call's request body is missing", row.seq)
                })?;
                let limits = session.limits;
                let repair_texts = attached_to(&attached, &key.0);
                let rebuilt = session
                    .replacements(state_dir)
                    .and_then(|pinned| {
                        let replacements = layered(pinned, repair_texts);
                        replay_request(&prepared, &state.conversation, &replacements, &limits)
                    })
                    .map_err(|e| {
                        format!("ledger row {}: the request cannot be rebuilt: {e}", row.seq)
                    })?;
                if rebuilt != sent {
                    return Err(format!(
                        "ledger row {}: the rebuilt request differs from the one sent (Gate Z)",
                        row.seq
                    ));
                }
                calls.push(ModelCall {
                    seq: row.seq,
                    forest_id: key.0,
                    branch_id: key.1,
                    turn: *turn,
                    endpoint: prepared.endpoint.clone(),
                    program_digest: prepared.invocation_digest.clone(),
                    programs: prepared.programs.clone(),
                    request_body: rebuilt,
                });
            }
            SearchEvent::ModelTurnRecorded { record, .. } => {
                let appended: Vec<ChatMessage> = serde_json::from_value(record["appended"].clone())
                    .map_err(|e| {
                        format!("ledger row {}: unreadable conversation delta: {e}", row.seq)
                    })?;
                let state = branches.entry(key).or_default();
                state.conversation.extend(appended);
                // The answered attempt is the turn's last; its reported
                // usage calibrates the endpoint as it did in the run.
                let answered = record["endpoint"].as_str();
                let reported = record["usage"]["tokens"]["prompt_tokens"].as_u64();
                if let Some(((endpoint, reported), plan)) = answered
                    .zip(reported)
                    .zip(state.prepared.last().and_then(|p| p.context.as_ref()))
                {
                    state.calibrations.observe(endpoint, plan, reported);
                }
                state.prepared.clear();
                state.used = 0;
            }
            _ => {}
        }
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::digest::Digest;
    use crate::ledger::SearchEncoding;

    fn row(seq: u64, event: SearchEvent) -> Row {
        Row {
            seq,
            kind: event.name().to_owned(),
            prev_hash: Digest::ZERO,
            hash: Digest::ZERO,
            recorded_at: String::new(),
            event: DecodedRow::Search {
                event,
                encoding: SearchEncoding::EnvelopeV1,
            },
        }
    }

    fn observed(seq: u64, digest: &str) -> Row {
        row(
            seq,
            SearchEvent::ModelTurnObserved {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                turn: 1,
                invocation_digest: digest.into(),
                attempt: json!({ "request_body": "{}" }),
            },
        )
    }

    #[test]
    fn gate_z_a_call_without_ledgered_programs_fails_closed() {
        let error =
            model_calls(&[observed(7, "sha256:ab")], Path::new("/nonexistent")).unwrap_err();
        assert!(
            error.contains("row 7") && error.contains("Gate Z"),
            "{error}"
        );
    }

    #[test]
    fn gate_z_programs_without_a_digest_fail_closed() {
        let programs = row(
            3,
            SearchEvent::ModelProgramsCompiled {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                turn: 1,
                invocation_digest: String::new(),
                request: json!({}),
            },
        );
        let error =
            model_calls(&[programs, observed(4, "")], Path::new("/nonexistent")).unwrap_err();
        assert!(
            error.contains("row 3") && error.contains("without a program digest"),
            "{error}"
        );
    }

    #[test]
    fn rows_without_model_calls_replay_to_none() {
        let closed = row(
            1,
            SearchEvent::SearchClosed {
                forest_id: "f".into(),
                branch_id: String::new(),
                reason: "committed".into(),
            },
        );
        assert_eq!(
            model_calls(&[closed], Path::new("/nonexistent")).unwrap(),
            Vec::new()
        );
    }
}
