//! Folds over the ledger: the accepted projection, and the search state a
//! resumed session inherits.
//!
//! Both folds are pure functions over decoded rows and both fail closed: a
//! row they cannot interpret with authority (an unknown envelope version, a
//! decision for a candidate nobody measured, a second unclosed forest) is an
//! error naming its seq, never skipped.

use std::collections::BTreeMap;

use super::event::{
    CandidateMeasured, DecodedRow, GateDecisionRecorded, LedgerEvent, Promoted, Refused,
    SearchCounters, SearchEvent,
};
use super::store::Row;
use crate::digest::Digest;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error(
        "event {seq}: search event has unknown schema_version {version}; refusing to fold a ledger this trellis cannot fully read"
    )]
    UnknownVersion { seq: u64, version: u64 },
    #[error("event {seq}: candidate {candidate_id} was already measured at event {first_seq}")]
    DuplicateMeasurement {
        seq: u64,
        candidate_id: String,
        first_seq: u64,
    },
    #[error("event {seq}: gate decision on {candidate_id}, which was never measured")]
    DecisionWithoutMeasurement { seq: u64, candidate_id: String },
    #[error("event {seq}: second gate decision on {candidate_id}")]
    DuplicateDecision { seq: u64, candidate_id: String },
    #[error(
        "event {seq}: gate decision on {candidate_id} names root {decided} but the candidate was measured at {measured}"
    )]
    DecisionRootMismatch {
        seq: u64,
        candidate_id: String,
        decided: Digest,
        measured: Digest,
    },
    #[error("event {seq}: forest {forest_id} is opened a second time")]
    ForestReopened { seq: u64, forest_id: String },
    #[error("event {seq}: {event} names forest {forest_id}, which was never opened")]
    UnknownForest {
        seq: u64,
        event: &'static str,
        forest_id: String,
    },
    #[error("event {seq}: {event} for forest {forest_id} after it closed")]
    EventAfterClose {
        seq: u64,
        event: &'static str,
        forest_id: String,
    },
    #[error("event {seq}: forest {forest_id} resumes {resumed} which {problem}")]
    InvalidResume {
        seq: u64,
        forest_id: String,
        resumed: String,
        problem: String,
    },
    #[error(
        "{} unclosed search forests ({}): the interrupted search is ambiguous; refusing to resume",
        forests.len(),
        forests.join(", ")
    )]
    AmbiguousResume { forests: Vec<String> },
}

// ---------------------------------------------------------------------------
// The accepted projection
// ---------------------------------------------------------------------------

/// The identity of a candidate in the accepted fold.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CandidateKey {
    pub node: String,
    pub generation: u32,
    pub candidate_id: String,
}

/// A measured candidate and, if it was submitted, the gate's decision on it.
#[derive(Clone, Debug, PartialEq)]
pub struct FoldedCandidate {
    pub measurement: CandidateMeasured,
    pub decision: Option<GateDecisionRecorded>,
}

/// The accepted projection of a ledger (PSP-10 system 21): what was measured,
/// what the gate decided and in what order, what was promoted and refused.
///
/// Built only from mechanism events, so removing every search event from a
/// ledger leaves it unchanged (Proposition 2, gate W). Sequence numbers are
/// deliberately not part of it: they shift when search rows are removed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AcceptedFold {
    pub candidates: BTreeMap<CandidateKey, FoldedCandidate>,
    /// Decided candidates in decision order: the decision sequence D.
    pub decision_order: Vec<CandidateKey>,
    pub promotions: Vec<Promoted>,
    pub refusals: Vec<Refused>,
}

impl AcceptedFold {
    /// Every gate decision, in the order the gate made them.
    pub fn decisions(&self) -> impl Iterator<Item = &GateDecisionRecorded> {
        self.decision_order.iter().filter_map(|key| {
            self.candidates
                .get(key)
                .and_then(|candidate| candidate.decision.as_ref())
        })
    }

    /// The accepted trajectory of `node`: its accepted decisions in order.
    pub fn accepted_trajectory<'a>(
        &'a self,
        node: &'a str,
    ) -> impl Iterator<Item = &'a GateDecisionRecorded> {
        self.decisions()
            .filter(move |decision| decision.node == node && decision.verdict.is_accepted())
    }
}

/// Folds the accepted projection from `rows` (in seq order).
///
/// Search events are ignored, whatever they say; an unknown search envelope
/// version is refused, because an authoritative replay must not skip a row
/// it cannot read.
pub fn fold_accepted(rows: &[Row]) -> Result<AcceptedFold, FoldError> {
    let mut fold = AcceptedFold::default();
    // Where each candidate was measured, for error messages only.
    let mut measured_at: BTreeMap<CandidateKey, u64> = BTreeMap::new();
    for row in rows {
        let event = match &row.event {
            DecodedRow::Ledger(event) => event,
            DecodedRow::Search { .. } => continue,
            DecodedRow::UnknownVersion { version, .. } => {
                return Err(FoldError::UnknownVersion {
                    seq: row.seq,
                    version: *version,
                });
            }
        };
        match event {
            LedgerEvent::CandidateMeasured(measurement) => {
                let key = CandidateKey {
                    node: measurement.node.clone(),
                    generation: measurement.generation,
                    candidate_id: measurement.candidate_id.clone(),
                };
                if let Some(first_seq) = measured_at.get(&key) {
                    return Err(FoldError::DuplicateMeasurement {
                        seq: row.seq,
                        candidate_id: key.candidate_id,
                        first_seq: *first_seq,
                    });
                }
                measured_at.insert(key.clone(), row.seq);
                fold.candidates.insert(
                    key,
                    FoldedCandidate {
                        measurement: measurement.clone(),
                        decision: None,
                    },
                );
            }
            LedgerEvent::GateDecisionRecorded(decision) => {
                let key = CandidateKey {
                    node: decision.node.clone(),
                    generation: decision.generation,
                    candidate_id: decision.candidate_id.clone(),
                };
                let Some(candidate) = fold.candidates.get_mut(&key) else {
                    return Err(FoldError::DecisionWithoutMeasurement {
                        seq: row.seq,
                        candidate_id: key.candidate_id,
                    });
                };
                if candidate.decision.is_some() {
                    return Err(FoldError::DuplicateDecision {
                        seq: row.seq,
                        candidate_id: key.candidate_id,
                    });
                }
                if candidate.measurement.root != decision.root {
                    return Err(FoldError::DecisionRootMismatch {
                        seq: row.seq,
                        candidate_id: key.candidate_id,
                        decided: decision.root,
                        measured: candidate.measurement.root,
                    });
                }
                candidate.decision = Some(decision.clone());
                fold.decision_order.push(key);
            }
            LedgerEvent::Promoted(promoted) => fold.promotions.push(promoted.clone()),
            LedgerEvent::Refused(refused) => fold.refusals.push(refused.clone()),
            LedgerEvent::SessionStarted(_) | LedgerEvent::SnapshotTaken(_) => {}
        }
    }
    Ok(fold)
}

// ---------------------------------------------------------------------------
// The resume fold
// ---------------------------------------------------------------------------

/// An exact-key no-good, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoGood {
    pub key: Digest,
    pub support_kind: String,
    pub evidence_digest: Digest,
    /// The forest that recorded it first.
    pub forest_id: String,
}

/// A forest a crash left open: the only forest whose consumption a resumed
/// session may claim, and only for the same node, generation and root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptedForest {
    pub forest_id: String,
    pub node: String,
    pub generation: u32,
    pub accepted_root: Digest,
    pub limits: SearchCounters,
    /// The last usage snapshot (reserved or settled): never refilled.
    pub usage: SearchCounters,
}

/// What a resumed session inherits from the ledger (errata 1, 25, 35).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResumeFold {
    /// Every recorded no-good, by exact key; they seed every forest opened
    /// in the resumed session.
    pub no_goods: BTreeMap<Digest, NoGood>,
    /// The forest to resume, to be re-opened as a new forest whose
    /// `resumed_from` names it.
    pub interrupted: Option<InterruptedForest>,
}

struct ForestState {
    forest: InterruptedForest,
    closed: bool,
    /// Set when a later forest resumed this one: its consumption is claimed.
    claimed: bool,
}

/// Folds the search state a resumed session starts from.
///
/// Refuses an unknown envelope version, events for forests never opened or
/// already closed, a resume that does not match the interrupted forest's
/// node, generation and root or claims it twice, and more than one forest
/// left open (it would have to guess which one to resume).
pub fn fold_resume(rows: &[Row]) -> Result<ResumeFold, FoldError> {
    let mut fold = ResumeFold::default();
    let mut forests: BTreeMap<String, ForestState> = BTreeMap::new();
    for row in rows {
        let event = match &row.event {
            DecodedRow::Search { event, .. } => event,
            DecodedRow::Ledger(_) => continue,
            DecodedRow::UnknownVersion { version, .. } => {
                return Err(FoldError::UnknownVersion {
                    seq: row.seq,
                    version: *version,
                });
            }
        };
        let forest_id = event.forest_id();
        if let SearchEvent::SearchOpened {
            node,
            generation,
            accepted_root,
            limits,
            resumed_from,
            ..
        } = event
        {
            if forests.contains_key(forest_id) {
                return Err(FoldError::ForestReopened {
                    seq: row.seq,
                    forest_id: forest_id.to_owned(),
                });
            }
            let forest = InterruptedForest {
                forest_id: forest_id.to_owned(),
                node: node.clone(),
                generation: *generation,
                accepted_root: *accepted_root,
                limits: limits.clone(),
                usage: SearchCounters::new(),
            };
            if let Some(resumed) = resumed_from {
                claim(&mut forests, row.seq, &forest, resumed)?;
            }
            forests.insert(
                forest_id.to_owned(),
                ForestState {
                    forest,
                    closed: false,
                    claimed: false,
                },
            );
            continue;
        }
        let Some(state) = forests.get_mut(forest_id) else {
            return Err(FoldError::UnknownForest {
                seq: row.seq,
                event: event.name(),
                forest_id: forest_id.to_owned(),
            });
        };
        if state.closed {
            return Err(FoldError::EventAfterClose {
                seq: row.seq,
                event: event.name(),
                forest_id: forest_id.to_owned(),
            });
        }
        match event {
            SearchEvent::SearchUsageSnapshot { usage, .. } => state.forest.usage = usage.clone(),
            SearchEvent::SearchClosed { .. } => state.closed = true,
            SearchEvent::NoGoodRecorded {
                key,
                support_kind,
                evidence_digest,
                ..
            } => {
                fold.no_goods.entry(*key).or_insert_with(|| NoGood {
                    key: *key,
                    support_kind: support_kind.clone(),
                    evidence_digest: *evidence_digest,
                    forest_id: forest_id.to_owned(),
                });
            }
            _ => {}
        }
    }

    let mut open: Vec<ForestState> = forests
        .into_values()
        .filter(|state| !state.closed && !state.claimed)
        .collect();
    if open.len() > 1 {
        return Err(FoldError::AmbiguousResume {
            forests: open.into_iter().map(|s| s.forest.forest_id).collect(),
        });
    }
    fold.interrupted = open.pop().map(|state| state.forest);
    Ok(fold)
}

/// Records that `successor` resumes `resumed`, which must be an open,
/// unclaimed forest of the same node, generation and accepted root.
fn claim(
    forests: &mut BTreeMap<String, ForestState>,
    seq: u64,
    successor: &InterruptedForest,
    resumed: &str,
) -> Result<(), FoldError> {
    let invalid = |problem: &str| FoldError::InvalidResume {
        seq,
        forest_id: successor.forest_id.clone(),
        resumed: resumed.to_owned(),
        problem: problem.to_owned(),
    };
    let Some(state) = forests.get_mut(resumed) else {
        return Err(invalid("was never opened"));
    };
    if state.closed {
        return Err(invalid("had closed"));
    }
    if state.claimed {
        return Err(invalid("was already resumed by another forest"));
    }
    let owner = &state.forest;
    if (&owner.node, owner.generation, owner.accepted_root)
        != (&successor.node, successor.generation, successor.accepted_root)
    {
        return Err(invalid(&format!(
            "belongs to {} generation {} at {}",
            owner.node,
            owner.generation,
            owner.accepted_root.short(12)
        )));
    }
    state.claimed = true;
    Ok(())
}
