//! Folds over the ledger: the accepted projection, and the search state a
//! resumed session inherits.
//!
//! Both folds are pure functions over decoded rows and both fail closed: a
//! row they cannot interpret with authority (an unknown envelope version, a
//! decision for a candidate nobody measured, a second unclosed forest) is an
//! error naming its seq, never skipped.

use std::collections::BTreeMap;

use super::event::{
    AcceptedStateStored, CandidateMeasured, DecodedRow, GateDecisionRecorded, LedgerEvent,
    Promoted, PromotionRecovered, Refused, SearchCounters, SearchEvent,
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
    #[error("event {seq}: stored state of {candidate_id} is refused: {problem}")]
    InvalidStoredState {
        seq: u64,
        candidate_id: String,
        problem: String,
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
        "event {seq}: no_good_recorded is refused (altered, or written in a drifted format): {problem}"
    )]
    InvalidNoGood { seq: u64, problem: String },
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

/// A measured candidate and, if it was submitted, the gate's decision on it
/// and, if accepted, its stored content.
#[derive(Clone, Debug, PartialEq)]
pub struct FoldedCandidate {
    pub measurement: CandidateMeasured,
    pub decision: Option<GateDecisionRecorded>,
    /// What a resumed session rebuilds the accepted state from.
    pub stored: Option<AcceptedStateStored>,
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
    /// Interrupted promotions finished or undone on a later start.
    pub recoveries: Vec<PromotionRecovered>,
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
                        stored: None,
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
            LedgerEvent::AcceptedStateStored(stored) => {
                let key = CandidateKey {
                    node: stored.node.clone(),
                    generation: stored.generation,
                    candidate_id: stored.candidate_id.clone(),
                };
                let invalid = |problem: &str| FoldError::InvalidStoredState {
                    seq: row.seq,
                    candidate_id: stored.candidate_id.clone(),
                    problem: problem.to_owned(),
                };
                let Some(candidate) = fold.candidates.get_mut(&key) else {
                    return Err(invalid("the candidate was never measured"));
                };
                if !candidate
                    .decision
                    .as_ref()
                    .is_some_and(|d| d.verdict.is_accepted())
                {
                    return Err(invalid("the gate never accepted it"));
                }
                if candidate.measurement.root != stored.root {
                    return Err(invalid(&format!(
                        "it names root {} but the candidate was measured at {}",
                        stored.root.short(12),
                        candidate.measurement.root.short(12)
                    )));
                }
                if candidate.stored.is_some() {
                    return Err(invalid("it was stored before"));
                }
                candidate.stored = Some(stored.clone());
            }
            LedgerEvent::Promoted(promoted) => fold.promotions.push(promoted.clone()),
            LedgerEvent::Refused(refused) => fold.refusals.push(refused.clone()),
            LedgerEvent::PromotionRecovered(recovered) => fold.recoveries.push(recovered.clone()),
            LedgerEvent::SessionStarted(_) | LedgerEvent::SnapshotTaken(_) => {}
        }
    }
    Ok(fold)
}

// ---------------------------------------------------------------------------
// The resume fold
// ---------------------------------------------------------------------------

/// A recorded no-good, as the resume fold hands it over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldedNoGood {
    /// The forest that recorded it first, and where.
    pub forest_id: String,
    pub seq: u64,
    pub record: NoGoodRecord,
}

/// What a `no_good_recorded` row let the fold establish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoGoodRecord {
    /// Components and support recorded, and the key and evidence digest
    /// recomputed from them equal the recorded ones: matchable by exact
    /// component equality.
    Exact(Box<crate::search::NoGood>),
    /// A row written before trellis recorded components: only the key.
    /// Display only: with no components there is nothing to compare an
    /// attempt against, so it never suppresses one.
    KeyOnly {
        key: Digest,
        support_kind: String,
        evidence_digest: Digest,
    },
}

impl FoldedNoGood {
    /// K_ng as recorded.
    pub fn key(&self) -> Digest {
        match &self.record {
            NoGoodRecord::Exact(nogood) => nogood.key.digest(),
            NoGoodRecord::KeyOnly { key, .. } => *key,
        }
    }
}

/// Checks a `no_good_recorded` row: with components and support, the key,
/// evidence digest and support kind must all follow from them (otherwise
/// the row was altered or written in a drifted format); a row carrying only
/// one of the two is malformed.
fn fold_no_good(
    seq: u64,
    key: Digest,
    support_kind: &str,
    evidence_digest: Digest,
    components: Option<&crate::search::NoGoodComponents>,
    support: Option<&crate::search::Support>,
) -> Result<NoGoodRecord, FoldError> {
    let invalid = |problem: String| FoldError::InvalidNoGood { seq, problem };
    match (components, support) {
        (None, None) => Ok(NoGoodRecord::KeyOnly {
            key,
            support_kind: support_kind.to_owned(),
            evidence_digest,
        }),
        (Some(components), Some(support)) => {
            if support.kind() != support_kind {
                return Err(invalid(format!(
                    "records support kind `{support_kind}` but its support is `{}`",
                    support.kind()
                )));
            }
            crate::search::NoGood::from_record(
                key,
                evidence_digest,
                components.clone(),
                support.clone(),
            )
            .map(|nogood| NoGoodRecord::Exact(Box::new(nogood)))
            .map_err(|refusal| invalid(refusal.to_string()))
        }
        (Some(_), None) => Err(invalid("carries components without their support".into())),
        (None, Some(_)) => Err(invalid("carries support without its components".into())),
    }
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
    /// in the resumed session. The first record of a key stays, unless it
    /// was key-only and a later row of the same key is exact.
    pub no_goods: BTreeMap<Digest, FoldedNoGood>,
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
/// Refuses an unknown envelope version, a no-good whose recorded key or
/// evidence digest does not follow from its components and support, events
/// for forests never opened or already closed, a resume that does not match the interrupted forest's
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
                components,
                support,
                ..
            } => {
                let record = fold_no_good(
                    row.seq,
                    *key,
                    support_kind,
                    *evidence_digest,
                    components.as_deref(),
                    support.as_ref(),
                )?;
                let upgrades = fold.no_goods.get(key).is_none_or(|first| {
                    matches!(first.record, NoGoodRecord::KeyOnly { .. })
                        && matches!(record, NoGoodRecord::Exact(_))
                });
                if upgrades {
                    fold.no_goods.insert(
                        *key,
                        FoldedNoGood {
                            forest_id: forest_id.to_owned(),
                            seq: row.seq,
                            record,
                        },
                    );
                }
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
        != (
            &successor.node,
            successor.generation,
            successor.accepted_root,
        )
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ledger::event::{GateVerdict, SEARCH_KIND, SearchEncoding};
    use crate::ledger::store::{Ledger, LedgerError};
    use crate::ledger::test_support::*;

    fn fold_of(ledger: &Ledger) -> Result<AcceptedFold, FoldError> {
        fold_accepted(&ledger.rows().unwrap())
    }

    // -- the accepted projection ------------------------------------------

    #[test]
    fn candidates_of_one_generation_are_folded_separately() {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&measured("n", 0, "n/0/c1", 3.0)).unwrap();
        ledger.append(&measured("n", 0, "n/0/c2", 1.0)).unwrap();
        ledger
            .append(&decided(
                "n",
                0,
                "n/0/c2",
                0,
                GateVerdict::AcceptedDescent,
                1.0,
                4.0,
            ))
            .unwrap();
        let fold = fold_of(&ledger).unwrap();
        assert_eq!(fold.candidates.len(), 2);
        let key = |id: &str| CandidateKey {
            node: "n".into(),
            generation: 0,
            candidate_id: id.into(),
        };
        assert_eq!(fold.candidates[&key("n/0/c1")].measurement.energy, 3.0);
        assert!(fold.candidates[&key("n/0/c1")].decision.is_none());
        let decision = fold.candidates[&key("n/0/c2")].decision.as_ref().unwrap();
        assert_eq!((decision.observed_energy, decision.best_before), (1.0, 4.0));
        assert_eq!(fold.decision_order, vec![key("n/0/c2")]);
    }

    #[test]
    fn the_accepted_trajectory_keeps_decision_order_and_skips_rejections() {
        let (_dir, ledger) = temp_ledger();
        let steps = [
            (
                "n",
                0,
                "n/0/c1",
                GateVerdict::RejectedNonDescending,
                5.0,
                4.0,
            ),
            ("n", 0, "n/0/c2", GateVerdict::AcceptedDescent, 2.0, 4.0),
            ("m", 0, "m/0/c1", GateVerdict::AcceptedHardPass, 0.0, 1.0),
            ("n", 1, "n/1/c1", GateVerdict::AcceptedHardPass, 0.0, 2.0),
        ];
        for (index, (node, generation, id, verdict, energy, best)) in steps.into_iter().enumerate()
        {
            ledger
                .append(&measured(node, generation, id, energy))
                .unwrap();
            ledger
                .append(&decided(
                    node,
                    generation,
                    id,
                    index as u32,
                    verdict,
                    energy,
                    best,
                ))
                .unwrap();
        }
        ledger.append(&promoted("r1")).unwrap();
        ledger.append(&refused("r2")).unwrap();
        let fold = fold_of(&ledger).unwrap();

        let all: Vec<&str> = fold.decisions().map(|d| d.candidate_id.as_str()).collect();
        assert_eq!(all, ["n/0/c1", "n/0/c2", "m/0/c1", "n/1/c1"]);
        let accepted: Vec<&str> = fold
            .accepted_trajectory("n")
            .map(|d| d.candidate_id.as_str())
            .collect();
        assert_eq!(accepted, ["n/0/c2", "n/1/c1"]);
        assert_eq!(fold.promotions.len(), 1);
        assert_eq!(fold.refusals[0].repair_id, "r2");
    }

    #[test]
    fn inconsistent_trajectories_are_refused_naming_the_seq() {
        let descent = |id: &str| decided("n", 0, id, 0, GateVerdict::AcceptedDescent, 1.0, 2.0);
        let cases: Vec<(Vec<LedgerEvent>, FoldError)> = vec![
            (
                vec![descent("n/0/c1")],
                FoldError::DecisionWithoutMeasurement {
                    seq: 1,
                    candidate_id: "n/0/c1".into(),
                },
            ),
            (
                vec![
                    measured("n", 0, "n/0/c1", 1.0),
                    descent("n/0/c1"),
                    descent("n/0/c1"),
                ],
                FoldError::DuplicateDecision {
                    seq: 3,
                    candidate_id: "n/0/c1".into(),
                },
            ),
            (
                vec![
                    measured("n", 0, "n/0/c1", 1.0),
                    measured("n", 0, "n/0/c1", 2.0),
                ],
                FoldError::DuplicateMeasurement {
                    seq: 2,
                    candidate_id: "n/0/c1".into(),
                    first_seq: 1,
                },
            ),
        ];
        for (events, expected) in cases {
            let (_dir, ledger) = temp_ledger();
            for event in &events {
                ledger.append(event).unwrap();
            }
            assert_eq!(fold_of(&ledger).unwrap_err(), expected);
        }

        let (_dir, ledger) = temp_ledger();
        ledger.append(&measured("n", 0, "n/0/c1", 1.0)).unwrap();
        let LedgerEvent::GateDecisionRecorded(mut decision) = descent("n/0/c1") else {
            unreachable!()
        };
        decision.root = root("elsewhere");
        ledger
            .append(&LedgerEvent::GateDecisionRecorded(decision))
            .unwrap();
        assert!(matches!(
            fold_of(&ledger).unwrap_err(),
            FoldError::DecisionRootMismatch { seq: 2, .. }
        ));
    }

    #[test]
    fn a_stored_state_folds_onto_its_accepted_candidate_or_is_refused_naming_the_seq() {
        let descent = decided("n", 0, "n/0/c1", 0, GateVerdict::AcceptedDescent, 1.0, 2.0);
        let rejection = decided(
            "n",
            0,
            "n/0/c1",
            0,
            GateVerdict::RejectedNonDescending,
            3.0,
            2.0,
        );
        let measured = || measured("n", 0, "n/0/c1", 1.0);
        let (_dir, ledger) = temp_ledger();
        for event in [measured(), descent.clone(), stored("n", 0, "n/0/c1")] {
            ledger.append(&event).unwrap();
        }
        let fold = fold_of(&ledger).unwrap();
        let candidate = fold.candidates.values().next().unwrap();
        assert_eq!(candidate.stored.as_ref().unwrap().files.len(), 1);

        let LedgerEvent::AcceptedStateStored(mut elsewhere) = stored("n", 0, "n/0/c1") else {
            unreachable!()
        };
        elsewhere.root = root("elsewhere");
        let cases: Vec<(Vec<LedgerEvent>, &str)> = vec![
            (vec![stored("n", 0, "n/0/c1")], "never measured"),
            (vec![measured(), stored("n", 0, "n/0/c1")], "never accepted"),
            (
                vec![measured(), rejection, stored("n", 0, "n/0/c1")],
                "never accepted",
            ),
            (
                vec![
                    measured(),
                    descent.clone(),
                    LedgerEvent::AcceptedStateStored(elsewhere),
                ],
                "names root",
            ),
            (
                vec![
                    measured(),
                    descent,
                    stored("n", 0, "n/0/c1"),
                    stored("n", 0, "n/0/c1"),
                ],
                "stored before",
            ),
        ];
        for (events, says) in cases {
            let (_dir, ledger) = temp_ledger();
            for event in &events {
                ledger.append(event).unwrap();
            }
            let error = fold_of(&ledger).unwrap_err();
            let seq = events.len() as u64;
            assert!(
                matches!(&error, FoldError::InvalidStoredState { seq: s, problem, .. }
                    if *s == seq && problem.contains(says)),
                "{error}"
            );
        }
    }

    // -- gate W: Proposition 2 --------------------------------------------

    /// One step of a generated ordinary trajectory.
    #[derive(Clone, Debug)]
    enum Step {
        /// A candidate of `node`, measured and maybe submitted to the gate.
        Candidate {
            node: usize,
            energy: u8,
            verdict: Option<GateVerdict>,
        },
        Promote,
        Refuse,
    }

    fn step() -> impl Strategy<Value = Step> {
        let verdict = prop_oneof![
            Just(None),
            Just(Some(GateVerdict::AcceptedDescent)),
            Just(Some(GateVerdict::AcceptedHardPass)),
            Just(Some(GateVerdict::RejectedNonDescending)),
        ];
        prop_oneof![
            6 => (0..2usize, any::<u8>(), verdict)
                .prop_map(|(node, energy, verdict)| Step::Candidate { node, energy, verdict }),
            1 => Just(Step::Promote),
            1 => Just(Step::Refuse),
        ]
    }

    /// Turns steps into a consistent ordinary event sequence: candidate ids
    /// unique per generation, generations advancing on acceptance.
    fn ordinary_events(steps: &[Step]) -> Vec<LedgerEvent> {
        let nodes = ["parser", "lexer"];
        let mut generation = [0u32; 2];
        let mut candidates = [0u32; 2];
        let mut decisions = [0u32; 2];
        let mut events = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Candidate {
                    node,
                    energy,
                    verdict,
                } => {
                    let name = nodes[*node];
                    let id = format!("{name}/{}/c{}", generation[*node], candidates[*node]);
                    candidates[*node] += 1;
                    let energy = f64::from(*energy) / 4.0;
                    events.push(measured(name, generation[*node], &id, energy));
                    if let Some(verdict) = verdict {
                        events.push(decided(
                            name,
                            generation[*node],
                            &id,
                            decisions[*node],
                            *verdict,
                            energy,
                            energy + 1.0,
                        ));
                        decisions[*node] += 1;
                        if verdict.is_accepted() {
                            // Every other acceptance stores its state, so
                            // generated ledgers hold decisions with and without.
                            if decisions[*node] % 2 == 0 {
                                events.push(stored(name, generation[*node], &id));
                            }
                            generation[*node] += 1;
                        }
                    }
                }
                Step::Promote => events.push(promoted(&format!("r{i}"))),
                Step::Refuse => events.push(refused(&format!("r{i}"))),
            }
        }
        events
    }

    /// Search events that talk about the same candidates the trajectory does.
    fn search_event() -> impl Strategy<Value = SearchEvent> {
        let forest = prop_oneof![Just("f1".to_owned()), Just("f2".to_owned())];
        let candidate = (0..2u32, 0..3u32).prop_map(|(g, c)| format!("parser/{g}/c{c}"));
        prop_oneof![
            forest.clone().prop_map(|f| opened(&f, "parser", None)),
            (
                forest.clone(),
                candidate.clone(),
                any::<u8>(),
                any::<bool>()
            )
                .prop_map(|(forest_id, candidate_id, energy, hard_pass)| {
                    SearchEvent::BranchCandidateMeasured {
                        forest_id,
                        branch_id: "b1".into(),
                        root: root(&candidate_id),
                        candidate_id,
                        energy: f64::from(energy),
                        hard_pass,
                        keys: None,
                        flaky: vec![],
                    }
                }),
            (forest.clone(), candidate).prop_map(|(forest_id, candidate_id)| {
                SearchEvent::BranchCommitted {
                    forest_id,
                    branch_id: "b1".into(),
                    candidate_id,
                }
            }),
            forest.clone().prop_map(|f| abandoned(&f, "b2")),
            (forest.clone(), any::<u8>()).prop_map(|(f, n)| usage(&f, u64::from(n))),
            forest.clone().prop_map(|f| no_good(&f, "k")),
            forest
                .clone()
                .prop_map(|f| exact_no_good_row(&f, &exact_no_good("k"))),
            forest.prop_map(|f| closed(&f)),
        ]
    }

    /// Merges `search` into `ordinary` wherever `pattern` says so, keeping
    /// the relative order of each.
    fn interleave(
        ordinary: Vec<LedgerEvent>,
        search: Vec<SearchEvent>,
        pattern: &[bool],
    ) -> Vec<Result<LedgerEvent, SearchEvent>> {
        let mut ordinary = ordinary.into_iter().peekable();
        let mut search = search.into_iter().peekable();
        let mut pattern = pattern.iter().cycle();
        let mut merged = Vec::new();
        while ordinary.peek().is_some() || search.peek().is_some() {
            let take_search = ordinary.peek().is_none()
                || (search.peek().is_some() && *pattern.next().unwrap_or(&false));
            merged.push(if take_search {
                Err(search.next().unwrap())
            } else {
                Ok(ordinary.next().unwrap())
            });
        }
        merged
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Gate W / Proposition 2: fold_A(L) = fold_A(L \ S), both for the
        /// row list with its search rows removed and for a ledger that never
        /// held them.
        #[test]
        fn gate_w_removing_search_events_leaves_the_accepted_fold_unchanged(
            steps in prop::collection::vec(step(), 0..14),
            search in prop::collection::vec(search_event(), 0..14),
            pattern in prop::collection::vec(any::<bool>(), 1..8),
        ) {
            let ordinary = ordinary_events(&steps);
            let (_mixed_dir, mixed) = temp_ledger();
            for event in interleave(ordinary.clone(), search.clone(), &pattern) {
                match event {
                    Ok(event) => mixed.append(&event).unwrap(),
                    Err(event) => mixed.append_search(&event).unwrap(),
                };
            }
            let (_plain_dir, plain) = temp_ledger();
            for event in &ordinary {
                plain.append(event).unwrap();
            }

            let rows = mixed.rows().unwrap();
            let without_search: Vec<_> =
                rows.iter().filter(|row| row.kind != SEARCH_KIND).cloned().collect();
            let fold = fold_accepted(&rows).unwrap();
            prop_assert_eq!(&fold, &fold_accepted(&without_search).unwrap());
            prop_assert_eq!(&fold, &fold_of(&plain).unwrap());
            prop_assert_eq!(
                fold.decisions().count(),
                ordinary.iter().filter(|e| e.kind() == "gate_decision_recorded").count()
            );

            // The projection is invariant; the chain itself is not.
            let mixed_head = mixed.verify().unwrap().head;
            let plain_head = plain.verify().unwrap().head;
            prop_assert_eq!(search.is_empty(), mixed_head == plain_head);
        }
    }

    // -- gate AD: one envelope, strict legacy, unknown versions stop replay -

    #[test]
    fn gate_ad_version_one_rows_decode_only_as_the_envelope() {
        let (_dir, ledger) = temp_ledger();
        ledger.append_search(&abandoned("f1", "b1")).unwrap();
        let legacy_body = serde_json::to_value(abandoned("f1", "b2")).unwrap();
        append_raw(&ledger, SEARCH_KIND, legacy_body.to_string().as_bytes());
        let rows = ledger.rows().unwrap();
        assert!(matches!(
            rows[0].event,
            DecodedRow::Search {
                encoding: SearchEncoding::EnvelopeV1,
                ..
            }
        ));
        assert!(matches!(
            rows[1].event,
            DecodedRow::Search {
                encoding: SearchEncoding::Legacy,
                ..
            }
        ));
        assert!(rows[1].to_string().ends_with("[legacy]"), "{}", rows[1]);

        // A legacy-shaped body that claims version 1 is a broken envelope,
        // never a legacy row; so is an envelope whose body is malformed.
        let mut claims_v1 = legacy_body.clone();
        claims_v1["schema_version"] = 1.into();
        let malformed_body = serde_json::json!({
            "schema_version": 1,
            "body": {"kind": "branch_abandoned", "forest_id": "f1"},
        });
        for payload in [claims_v1, malformed_body] {
            let (_dir, ledger) = temp_ledger();
            ledger.append_search(&abandoned("f1", "b1")).unwrap();
            let seq = append_raw(&ledger, SEARCH_KIND, payload.to_string().as_bytes());
            let error = ledger.rows().unwrap_err();
            assert!(
                matches!(error, LedgerError::Corrupt { seq: s, .. } if s == seq),
                "{error}"
            );
            assert!(
                error.to_string().contains("not a valid envelope"),
                "{error}"
            );
            assert_eq!(ledger.verify().unwrap_err().seq(), Some(seq));
        }
    }

    #[test]
    fn gate_ad_an_unknown_version_is_displayable_but_stops_replay_and_resume() {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&measured("n", 0, "n/0/c1", 1.0)).unwrap();
        ledger.append_search(&opened("f1", "n", None)).unwrap();
        let future = serde_json::json!({
            "schema_version": 2,
            "body": {"kind": "branch_teleported", "forest_id": "f1"},
        });
        let seq = append_raw(&ledger, SEARCH_KIND, future.to_string().as_bytes());

        // The chain is intact and the row can be shown as forensic data...
        assert_eq!(ledger.verify().unwrap().events, 3);
        let rows = ledger.rows().unwrap();
        assert!(matches!(
            rows[2].event,
            DecodedRow::UnknownVersion { version: 2, .. }
        ));
        let shown = rows[2].to_string();
        assert!(
            shown.contains("unknown schema_version 2") && shown.contains("branch_teleported"),
            "{shown}"
        );

        // ...but neither authoritative fold skips it.
        let expected = FoldError::UnknownVersion { seq, version: 2 };
        assert_eq!(fold_accepted(&rows).unwrap_err(), expected);
        assert_eq!(fold_resume(&rows).unwrap_err(), expected);
        assert!(expected.to_string().starts_with("event 3: "), "{expected}");
    }

    // -- resume (errata 1, 25, 35) -----------------------------------------

    fn resume_of(search: &[SearchEvent]) -> Result<ResumeFold, FoldError> {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&measured("n", 0, "n/0/c1", 1.0)).unwrap();
        for event in search {
            ledger.append_search(event).unwrap();
        }
        fold_resume(&ledger.rows().unwrap())
    }

    #[test]
    fn resume_folds_no_goods_and_the_interrupted_forests_last_usage() {
        let fold = resume_of(&[
            opened("f0", "n", None),
            no_good("f0", "k0"),
            closed("f0"),
            opened("f1", "n", None),
            usage("f1", 3),
            no_good("f1", "k1"),
            usage("f1", 5),
        ])
        .unwrap();
        assert_eq!(fold.no_goods.len(), 2);
        assert_eq!(fold.no_goods[&root("k0")].forest_id, "f0");
        let interrupted = fold.interrupted.unwrap();
        assert_eq!(interrupted.forest_id, "f1");
        assert_eq!(interrupted.usage, [("actions".to_owned(), 5)].into());
        assert_eq!(interrupted.limits["branches"], 3);
    }

    #[test]
    fn a_resumed_forest_claims_the_interrupted_one_exactly_once() {
        let resumed = resume_of(&[
            opened("f1", "n", None),
            usage("f1", 4),
            opened("f2", "n", Some("f1")),
            usage("f2", 6),
        ])
        .unwrap();
        assert_eq!(resumed.interrupted.unwrap().forest_id, "f2");

        let twice = resume_of(&[
            opened("f1", "n", None),
            opened("f2", "n", Some("f1")),
            opened("f3", "n", Some("f1")),
        ]);
        assert!(
            matches!(&twice, Err(FoldError::InvalidResume { forest_id, .. }) if forest_id == "f3"),
            "{twice:?}"
        );

        let other_node = resume_of(&[opened("f1", "n", None), opened("f2", "m", Some("f1"))]);
        let error = other_node.unwrap_err();
        assert!(
            error.to_string().contains("belongs to n generation 0"),
            "{error}"
        );
    }

    #[test]
    fn two_unclosed_forests_are_ambiguous() {
        let error = resume_of(&[opened("f1", "n", None), opened("f2", "m", None)]).unwrap_err();
        assert_eq!(
            error,
            FoldError::AmbiguousResume {
                forests: vec!["f1".into(), "f2".into()]
            }
        );
    }

    #[test]
    fn resume_refuses_events_outside_an_open_forest() {
        let after_close = resume_of(&[opened("f1", "n", None), closed("f1"), usage("f1", 9)]);
        assert_eq!(
            after_close.unwrap_err(),
            FoldError::EventAfterClose {
                seq: 4,
                event: "search_usage_snapshot",
                forest_id: "f1".into()
            }
        );
        let unknown = resume_of(&[abandoned("f9", "b1")]);
        assert!(matches!(
            unknown,
            Err(FoldError::UnknownForest { seq: 2, .. })
        ));
        let reopened = resume_of(&[opened("f1", "n", None), opened("f1", "n", None)]);
        assert!(matches!(
            reopened,
            Err(FoldError::ForestReopened { seq: 3, .. })
        ));
    }

    // -- exact no-goods restored by their components (gate AB) -------------

    #[test]
    fn an_exact_no_good_folds_back_with_every_component_and_its_support() {
        let recorded = exact_no_good("adds");
        let fold = resume_of(&[
            opened("f1", "n", None),
            exact_no_good_row("f1", &recorded),
            closed("f1"),
        ])
        .unwrap();
        let folded = &fold.no_goods[&recorded.key.digest()];
        assert_eq!((folded.forest_id.as_str(), folded.seq), ("f1", 3));
        assert_eq!(folded.record, NoGoodRecord::Exact(Box::new(recorded)));
    }

    #[test]
    fn a_no_good_whose_key_does_not_follow_from_its_record_is_refused_naming_the_seq() {
        let recorded = exact_no_good("adds");
        let row = || exact_no_good_row("f1", &recorded);
        let mut other_grant = row();
        let mut other_evidence = row();
        let mut other_kind = row();
        let mut half = row();
        if let (
            SearchEvent::NoGoodRecorded { components, .. },
            SearchEvent::NoGoodRecorded { support, .. },
            SearchEvent::NoGoodRecorded { support_kind, .. },
            SearchEvent::NoGoodRecorded {
                support: half_support,
                ..
            },
        ) = (
            &mut other_grant,
            &mut other_evidence,
            &mut other_kind,
            &mut half,
        ) {
            components.as_mut().unwrap().grant = root("a wider grant");
            *support = Some(crate::search::Support::FailedTest {
                tests: vec!["lib::tests::other".into()],
            });
            *support_kind = "compiler_code".into();
            *half_support = None;
        }
        for (event, says) in [
            (other_grant, "does not match its components"),
            (other_evidence, "does not match its support"),
            (other_kind, "support kind `compiler_code`"),
            (half, "components without their support"),
        ] {
            let error = resume_of(&[opened("f1", "n", None), event]).unwrap_err();
            assert!(
                matches!(&error, FoldError::InvalidNoGood { seq: 3, problem } if problem.contains(says)),
                "{error}"
            );
            assert!(error.to_string().starts_with("event 3: "), "{error}");
        }
    }

    #[test]
    fn a_no_good_altered_on_disk_and_resealed_passes_verify_but_not_the_fold() {
        let (_dir, ledger) = temp_ledger();
        let recorded = exact_no_good("adds");
        ledger.append_search(&opened("f1", "n", None)).unwrap();
        ledger
            .append_search(&exact_no_good_row("f1", &recorded))
            .unwrap();
        let proposal = recorded.components.proposal.to_hex();
        tamper(
            &ledger,
            &format!(
                "UPDATE events SET payload = replace(payload, '{proposal}', '{}') WHERE seq = 2",
                root("another proposal").to_hex()
            ),
        );
        reseal(&ledger, 2);
        forge_witness(&ledger);
        assert_eq!(ledger.verify().unwrap().events, 2, "a forger can reseal");
        let error = fold_resume(&ledger.rows().unwrap()).unwrap_err();
        assert!(
            matches!(error, FoldError::InvalidNoGood { seq: 2, .. }),
            "{error}"
        );
    }

    #[test]
    fn key_only_rows_fold_as_display_only_and_an_exact_row_of_the_same_key_wins() {
        let recorded = exact_no_good("adds");
        let key = recorded.key.digest();
        let SearchEvent::NoGoodRecorded {
            forest_id,
            branch_id,
            support_kind,
            evidence_digest,
            ..
        } = exact_no_good_row("f1", &recorded)
        else {
            unreachable!()
        };
        let key_only = SearchEvent::NoGoodRecorded {
            forest_id,
            branch_id,
            key,
            support_kind,
            evidence_digest,
            components: None,
            support: None,
        };
        assert!(key_only.to_string().ends_with("[key only]"), "{key_only}");
        let fold = resume_of(&[opened("f1", "n", None), key_only.clone()]).unwrap();
        assert!(matches!(
            fold.no_goods[&key].record,
            NoGoodRecord::KeyOnly { .. }
        ));
        assert_eq!(fold.no_goods[&key].key(), key);

        let fold = resume_of(&[
            opened("f1", "n", None),
            key_only,
            exact_no_good_row("f1", &recorded),
        ])
        .unwrap();
        assert_eq!(fold.no_goods.len(), 1);
        assert_eq!(
            fold.no_goods[&key].record,
            NoGoodRecord::Exact(Box::new(recorded))
        );
    }
}
