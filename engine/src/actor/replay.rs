//! Gate Z over the ledger: every model call a session made, its exact
//! request rebuilt from the ledgered programs and conversation deltas and
//! compared byte for byte with the body that was sent, without a model.
//!
//! It reads rows and never writes. It fails closed: a raw attempt with no
//! ledgered programs before it, a program without a digest, or a rebuilt
//! body that differs from the recorded one is an error naming the row,
//! never a call reported as replayable.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use trellis_prompts::ProgramRecord;
use trellis_prompts::bundles::PinnedReplacement;

use super::runner::{PreparedRequest, replay_request};
use super::transport::ChatMessage;

use crate::ledger::{BundlesAttached, DecodedRow, LedgerEvent, Row, SearchEvent};

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

/// Every model call in `rows`, each request rebuilt and compared with the
/// one sent. `Err` names the first row that cannot be reproduced. A repair
/// that attached store bundles cannot be replayed here (see
/// [`model_calls_with`]).
pub fn model_calls(rows: &[Row]) -> Result<Vec<ModelCall>, String> {
    model_calls_with(rows, &|_| {
        Err("the repair attached prompt bundles; replay needs the bundle store".to_owned())
    })
}

/// The section texts a ledgered `bundles_attached` row names, read back
/// from the bundle store (checksum-checked), for [`model_calls_with`].
pub type AttachedTexts<'a> =
    dyn Fn(&BundlesAttached) -> Result<Vec<PinnedReplacement>, String> + 'a;

/// [`model_calls`], each call rebuilt with the bundle texts its repair
/// recorded attaching (`bundles` reads them back), never the store's current ones.
pub fn model_calls_with(rows: &[Row], bundles: &AttachedTexts) -> Result<Vec<ModelCall>, String> {
    // Per branch: the prepared requests of the running turn, in order, and
    // the conversation so far (the deltas of completed turns).
    #[derive(Default)]
    struct BranchState {
        prepared: Vec<PreparedRequest>,
        used: usize,
        conversation: Vec<ChatMessage>,
    }
    let mut branches: BTreeMap<(String, String), BranchState> = BTreeMap::new();
    let mut calls = Vec::new();
    // By forest-id prefix (`{node}/{generation}/`): the texts that repair attached.
    let mut attached: Vec<(String, Vec<PinnedReplacement>)> = Vec::new();
    for row in rows {
        if let DecodedRow::Ledger(LedgerEvent::BundlesAttached(e)) = &row.event {
            let texts = bundles(e).map_err(|m| format!("ledger row {}: {m}", row.seq))?;
            attached.push((format!("{}/{}/", e.node, e.generation), texts));
            continue;
        }
        let DecodedRow::Search { event, .. } = &row.event else {
            continue;
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
                let state = branches.entry(key).or_default();
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
                let replacements = attached
                    .iter()
                    .rev()
                    .find(|(prefix, _)| key.0.starts_with(prefix.as_str()))
                    .map_or(&[][..], |(_, texts)| texts.as_slice());
                let rebuilt = replay_request(&prepared, &state.conversation, replacements)
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
        let error = model_calls(&[observed(7, "sha256:ab")]).unwrap_err();
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
        let error = model_calls(&[programs, observed(4, "")]).unwrap_err();
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
        assert_eq!(model_calls(&[closed]).unwrap(), Vec::new());
    }
}
