//! The session: what a repair inherits from the ledger before its first
//! forest opens.
//!
//! [`Session::begin`] folds the ledger once: the node and generation this
//! attempt runs under, the interrupted forest's usage it may claim (or must
//! leave unclaimed), the generation's [`Continuation`] when an interrupted
//! attempt committed accepted steps, and every recorded exact no-good
//! ([`NoGoods`]). An unreadable, ambiguous or self-contradictory record is
//! refused here, naming the ledger and the reason, before anything is
//! recorded for the new attempt.
//!
//! It must never run anything or write the ledger: the rows it decides on
//! (a superseded forest's close, the key-only notice) are returned for the
//! forest that writes them.

use std::collections::BTreeSet;

use crate::digest::Digest;
use crate::error::{EngineError, ResumeRefusal};
use crate::gate::{GateDecision, Observation};
use crate::ledger::{self, Ledger, SearchEvent};
use crate::records;
use crate::search::{
    Counters, ForestBinding, InterruptedForest, NoGoodComponents, NoGoodStore, ResumeClaim,
    SearchForest,
};

/// folded back from the ledger, in one store that answers by equality of
/// all nine components.
#[derive(Default)]
pub(super) struct NoGoods {
    pub(super) store: NoGoodStore,
    /// Keys of rows written before no-goods carried their components: they
    /// are counted and shown, never matched, because there is nothing to
    /// compare an attempt's components against.
    key_only: BTreeSet<Digest>,
    /// Whether the session has said so in the ledger yet.
    key_only_noted: bool,
}

impl NoGoods {
    /// Restores the ledger's no-goods. The fold verified every exact record
    /// already; the store checks again rather than trust its caller.
    fn restore(folded: impl IntoIterator<Item = ledger::FoldedNoGood>) -> Result<NoGoods, String> {
        let mut nogoods = NoGoods::default();
        for folded in folded {
            match folded.record {
                ledger::NoGoodRecord::Exact(nogood) => {
                    nogoods.store.restore(*nogood).map_err(|e| {
                        format!("event {}: no_good_recorded is refused: {e}", folded.seq)
                    })?;
                }
                ledger::NoGoodRecord::KeyOnly { key, .. } => {
                    nogoods.key_only.insert(key);
                }
            }
        }
        Ok(nogoods)
    }

    /// The key of the no-good refusing `attempt`, if one matches exactly.
    pub(super) fn suppresses(&self, attempt: &NoGoodComponents) -> Option<Digest> {
        self.store
            .suppresses(attempt)
            .map(|nogood| nogood.key.digest())
    }

    /// The observation the first forest of the session ledgers about
    /// key-only no-goods, once.
    pub(super) fn key_only_notice(&mut self) -> Option<String> {
        if self.key_only.is_empty() || self.key_only_noted {
            return None;
        }
        self.key_only_noted = true;
        Some(format!(
            "{} recorded no-good(s) carry only their key (written by an older trellis): \
             counted, never matched, since an attempt can only be refused by equality of \
             every component",
            self.key_only.len()
        ))
    }
}

/// What a repair inherits from the ledger before its first forest opens:
/// its node and generation, the interrupted usage it may claim, and every
/// recorded no-good (errata 1, 25, 35).
pub(crate) struct Session {
    pub node: String,
    pub generation: u32,
    /// `node/generation/x0` is already in the accepted fold: this attempt
    /// resumes an interrupted one on the same start root.
    pub x0_recorded: bool,
    pub(super) claim: ResumeClaim,
    pub(super) nogoods: NoGoods,
    pub(super) next_forest: usize,
    /// Interrupted forests this session closed as superseded (once each).
    superseded: BTreeSet<String>,
    /// The interrupted generation's record, when this session continues it
    /// from its last accepted state; [`super::search()`] takes it.
    pub(super) continuation: Option<Continuation>,
    /// The resumed forest, opened before the first step to re-measure the
    /// accepted state it continues from; that step runs in it.
    pub(super) resumed_forest: Option<SearchForest>,
}

/// What the ledger recorded about a generation that committed accepted
/// steps and was interrupted in a later one: enough to rebuild its
/// trajectory and its last accepted state, each checked, never trusted.
pub(super) struct Continuation {
    /// x₀ as measured when the generation started.
    pub(super) x0: Observation,
    /// Every decision of the generation, in order.
    pub(super) decisions: Vec<GateDecision>,
    /// The last accepted state's content relative to x₀...
    pub(super) stored: ledger::AcceptedStateStored,
    /// ...and how it measured when it was accepted.
    pub(super) measured: Observation,
}

impl Continuation {
    /// Reads the record of `node`'s `generation` from the accepted fold.
    /// `None` when the generation cannot be continued from `root` (the
    /// interrupted forest's): it accepted nothing, its last accepted state
    /// is elsewhere, or that state's content was never stored (a ledger
    /// from a trellis that did not store it); the attempt then starts a
    /// new generation. An error when the record contradicts itself.
    fn of(
        fold: &ledger::AcceptedFold,
        node: &str,
        generation: u32,
        root: Digest,
        start_root: Digest,
    ) -> Result<Option<Continuation>, String> {
        let decided: Vec<&ledger::FoldedCandidate> = fold
            .decision_order
            .iter()
            .filter(|k| k.node == node && k.generation == generation)
            .filter_map(|k| fold.candidates.get(k))
            .collect();
        let last_accepted = decided
            .iter()
            .rev()
            .find(|c| c.decision.as_ref().is_some_and(|d| d.verdict.is_accepted()));
        let Some((last, stored)) = last_accepted
            .filter(|c| c.measurement.root == root)
            .and_then(|c| Some((c, c.stored.clone()?)))
        else {
            return Ok(None);
        };
        let x0_id = format!("{node}/{generation}/x0");
        let x0 = fold
            .candidates
            .get(&ledger::CandidateKey {
                node: node.to_owned(),
                generation,
                candidate_id: x0_id.clone(),
            })
            .ok_or_else(|| format!("generation {generation} decided without a recorded {x0_id}"))?;
        if x0.measurement.root != start_root {
            return Err(format!(
                "{x0_id} was measured at {}, not at the view's root {}",
                x0.measurement.root.short(12),
                start_root.short(12)
            ));
        }
        let observed = |m: &ledger::CandidateMeasured| Observation {
            root: m.root,
            energy: m.energy,
            hard_pass: m.hard_pass,
        };
        Ok(Some(Continuation {
            x0: observed(&x0.measurement),
            decisions: decided
                .iter()
                .filter_map(|c| c.decision.as_ref())
                .map(records::recorded_decision)
                .collect(),
            stored,
            measured: observed(&last.measurement),
        }))
    }
}

impl Session {
    /// Whether this attempt continues an interrupted generation from its
    /// last accepted state, rather than starting from x₀.
    pub(crate) fn continues_a_generation(&self) -> bool {
        self.continuation.is_some()
    }
}

impl Session {
    /// Folds the ledger for a repair starting at `start_root`. Refuses an
    /// unreadable or ambiguous ledger (two unclosed forests), or a
    /// contradictory record of the generation it would continue, rather
    /// than guessing which search to continue.
    pub(crate) fn begin(ledger: &Ledger, start_root: Digest) -> Result<Session, EngineError> {
        let refuse = |e: &dyn std::fmt::Display| {
            EngineError::from(ResumeRefusal {
                ledger: ledger.path().to_path_buf(),
                what: "cannot resume the search".to_owned(),
                reason: e.to_string(),
            })
        };
        let rows = ledger.rows().map_err(|e| refuse(&e))?;
        let resume = ledger::fold_resume(&rows).map_err(|e| refuse(&e))?;
        let accepted = ledger::fold_accepted(&rows).map_err(|e| refuse(&e))?;
        let node = records::node_id(&start_root);

        let mut used: BTreeSet<u32> = accepted
            .candidates
            .keys()
            .filter(|k| k.node == node)
            .map(|k| k.generation)
            .collect();
        let opened: Vec<(String, u32)> = rows
            .iter()
            .filter_map(|row| match &row.event {
                ledger::DecodedRow::Search {
                    event:
                        SearchEvent::SearchOpened {
                            node, generation, ..
                        },
                    ..
                } => Some((node.clone(), *generation)),
                _ => None,
            })
            .collect();
        used.extend(opened.iter().filter(|(n, _)| *n == node).map(|(_, g)| *g));

        // The interrupted attempt is continued only when it is this node's
        // and its forest sits at the generation's last accepted state: the
        // start root when the generation decided nothing yet (its candidate
        // ids are then still free), else the root of its last accepted
        // decision, rebuilt from the content stored when it was committed.
        // Either way the resumed forest claims the interrupted usage.
        let mut continuation = None;
        let resumable = match resume.interrupted.as_ref().filter(|f| f.node == node) {
            Some(f)
                if !accepted
                    .decisions()
                    .any(|d| d.node == node && d.generation == f.generation) =>
            {
                (f.accepted_root == start_root).then_some(f)
            }
            Some(f) => {
                continuation =
                    Continuation::of(&accepted, &node, f.generation, f.accepted_root, start_root)
                        .map_err(|e| {
                        refuse(&format!(
                            "interrupted forest {} cannot be continued: {e}",
                            f.forest_id
                        ))
                    })?;
                continuation.is_some().then_some(f)
            }
            None => None,
        };
        if let Some(f) = resumable {
            gate_z(&rows, &f.forest_id, ledger.state_dir().path()).map_err(|e| refuse(&e))?;
        }
        let generation = match resumable {
            Some(f) => f.generation,
            None => used.last().map_or(0, |g| g + 1),
        };
        let x0_recorded = accepted.candidates.keys().any(|k| {
            k.node == node && k.generation == generation && k.candidate_id.ends_with("/x0")
        });
        let next_forest = 1 + opened
            .iter()
            .filter(|(n, g)| *n == node && *g == generation)
            .count();

        let interrupted = match resume.interrupted {
            Some(f) => {
                let limits = Counters::from_snapshot(&f.limits).map_err(|e| {
                    refuse(&format!(
                        "forest {} has unreadable limits: {e}",
                        f.forest_id
                    ))
                })?;
                let binding = ForestBinding {
                    node: f.node,
                    generation: f.generation,
                    accepted_root: f.accepted_root,
                };
                // Opened, then killed before its first snapshot: nothing reserved.
                let interrupted = if f.usage.is_empty() {
                    Ok(InterruptedForest {
                        forest_id: f.forest_id.clone(),
                        binding,
                        limits,
                        usage: Counters::ZERO,
                    })
                } else {
                    InterruptedForest::from_snapshot(f.forest_id.clone(), binding, limits, &f.usage)
                };
                vec![interrupted.map_err(|e| {
                    refuse(&format!(
                        "forest {} has an unreadable usage: {e}",
                        f.forest_id
                    ))
                })?]
            }
            None => Vec::new(),
        };
        let claim = ResumeClaim::fold(interrupted).map_err(|e| refuse(&e))?;
        let nogoods = NoGoods::restore(resume.no_goods.into_values()).map_err(|e| refuse(&e))?;
        Ok(Session {
            node,
            generation,
            x0_recorded,
            claim,
            nogoods,
            next_forest,
            superseded: BTreeSet::new(),
            continuation,
            resumed_forest: None,
        })
    }

    /// The `search_closed` event for an interrupted forest its owner can no
    /// longer claim, the first time this session bypasses it.
    pub(super) fn close_superseded(&mut self, interrupted: &str, by: &str) -> Option<SearchEvent> {
        self.superseded.insert(interrupted.to_owned()).then(|| {
            records::search_closed(
                interrupted,
                &format!("superseded by {by}; its usage stays unclaimed"),
            )
        })
    }

    /// `node/generation/x0`: the id of the start state's measurement.
    pub fn x0_id(&self) -> String {
        format!("{}/{}/x0", self.node, self.generation)
    }
}

/// Gate Z at resume: every model call the interrupted forest ledgered must
/// rebuild from its programs (with its session's pinned bundles and the
/// store bundles its repair attached), or the
/// search is not continued past it.
fn gate_z(
    rows: &[ledger::Row],
    forest_id: &str,
    state_dir: &std::path::Path,
) -> Result<(), String> {
    let forest: Vec<ledger::Row> = rows
        .iter()
        .filter(|row| match &row.event {
            ledger::DecodedRow::Search { event, .. } => event.forest_id() == forest_id,
            ledger::DecodedRow::Ledger(
                ledger::LedgerEvent::SessionStarted(_) | ledger::LedgerEvent::BundlesAttached(_),
            ) => true,
            _ => false,
        })
        .cloned()
        .collect();
    // With the store texts the repair attached, as replay rebuilds them.
    let attached = crate::bundles::attached_texts(state_dir);
    crate::actor::model_calls_with(&forest, state_dir, &attached)
        .map(drop)
        .map_err(|e| format!("interrupted forest {forest_id} cannot be resumed: {e}"))
}

#[cfg(test)]
mod tests {
    //! Resume rules at session start, over real ledgers in temp dirs.

    use super::*;
    use crate::digest::blob_digest;
    use crate::gate::Verdict;
    use crate::repair::SearchStatus;
    use crate::repair::test_support::{ledger_with, opened, usage};
    use crate::search::nogood::test_components::{components, with_component};
    use crate::search::{NoGoodKey, Support};

    #[test]
    fn a_fresh_ledger_starts_generation_zero_of_the_roots_node() {
        let root = blob_digest(b"x0");
        let (_dir, ledger) = ledger_with(&[]);
        let session = Session::begin(&ledger, root).unwrap();
        assert_eq!(session.node, records::node_id(&root));
        assert_eq!((session.generation, session.next_forest), (0, 1));
        assert!(!session.x0_recorded);
    }

    #[test]
    fn the_owner_of_an_interrupted_forest_resumes_it_without_refill() {
        let root = blob_digest(b"x0");
        let node = records::node_id(&root);
        let (_dir, ledger) = ledger_with(&[opened("f", &node, 2, root), usage("f", 5)]);
        let mut session = Session::begin(&ledger, root).unwrap();
        assert_eq!(
            session.generation, 2,
            "the interrupted generation continues"
        );
        assert_eq!(session.next_forest, 2, "forest ids stay unique");
        let binding = ForestBinding {
            node,
            generation: 2,
            accepted_root: root,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from.as_deref(), Some("f"));
        assert_eq!(seed.budget.usage().actions, 5);
    }

    #[test]
    fn another_root_gets_a_fresh_generation_and_leaves_the_usage_unclaimed() {
        let root = blob_digest(b"x0");
        let other = blob_digest(b"edited");
        let node = records::node_id(&other);
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            usage("f", 5),
            opened("g", &node, 0, other),
            SearchEvent::SearchClosed {
                forest_id: "g".into(),
                branch_id: String::new(),
                reason: "committed".into(),
            },
        ]);
        let mut session = Session::begin(&ledger, other).unwrap();
        assert_eq!(session.generation, 1);
        let binding = ForestBinding {
            node,
            generation: 1,
            accepted_root: other,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from, None);
        assert!(seed.bypass.is_some(), "the bypass is recorded, not silent");
    }

    #[test]
    fn a_bypassed_forest_is_closed_once_so_a_later_crash_is_not_ambiguous() {
        let root = blob_digest(b"x0");
        let other = blob_digest(b"edited");
        let node = records::node_id(&other);
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            usage("f", 5),
        ]);
        let mut session = Session::begin(&ledger, other).unwrap();
        let binding = ForestBinding {
            node: node.clone(),
            generation: session.generation,
            accepted_root: other,
        };
        let bypass = session
            .claim
            .open(&binding, Counters::DEFAULT_LIMITS)
            .bypass
            .unwrap();
        let close = session
            .close_superseded(&bypass.interrupted_forest, "g")
            .expect("closed the first time");
        assert!(
            session
                .close_superseded(&bypass.interrupted_forest, "h")
                .is_none(),
            "closed once only"
        );
        ledger.append_search(&close).unwrap();
        // The new search is interrupted too: one unclosed forest, not two.
        ledger
            .append_search(&opened("g", &node, session.generation, other))
            .unwrap();
        Session::begin(&ledger, other).expect("a single interrupted search resumes");
    }

    #[test]
    fn two_unclosed_forests_refuse_the_repair_and_name_both() {
        let root = blob_digest(b"x0");
        let node = records::node_id(&root);
        let (_dir, ledger) = ledger_with(&[
            opened("f-one", &node, 0, root),
            opened("f-two", &node, 1, root),
        ]);
        let Err(err) = Session::begin(&ledger, root) else {
            panic!("an ambiguous ledger must be refused");
        };
        let message = err.to_string();
        assert!(
            message.contains("f-one") && message.contains("f-two"),
            "{message}"
        );
    }

    /// A session folded from a real ledger in which forest `f` recorded an
    /// exact no-good for `recorded`.
    fn session_restoring(recorded: &NoGoodComponents) -> Session {
        let root = blob_digest(b"x0");
        let nogood = crate::search::NoGood::new(
            recorded.clone(),
            Support::UnchangedState {
                root: recorded.accepted_root,
            },
        );
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            SearchEvent::no_good_recorded("f", "b1", &nogood),
            records::search_closed("f", "no eligible candidate"),
        ]);
        Session::begin(&ledger, root).unwrap()
    }

    #[test]
    fn gate_ab_a_restored_no_good_matches_only_when_every_component_is_equal() {
        let recorded = components(&[7; 9]);
        let session = session_restoring(&recorded);
        assert!(session.nogoods.suppresses(&recorded).is_some());
        for index in 0..9 {
            let changed = with_component(recorded.clone(), index, blob_digest(b"changed"));
            assert!(
                session.nogoods.suppresses(&changed).is_none(),
                "component {index} changed, yet the restored no-good matched"
            );
        }
        let mut no_program = recorded;
        no_program.prompt_program = None;
        assert!(session.nogoods.suppresses(&no_program).is_none());
    }

    #[test]
    fn a_key_only_no_good_is_counted_and_noted_once_but_never_matches() {
        let root = blob_digest(b"x0");
        let attempt = components(&[3; 9]);
        // An older trellis recorded exactly this attempt's key, without components.
        let (_dir, ledger) = ledger_with(&[
            opened("f", &records::node_id(&root), 0, root),
            SearchEvent::NoGoodRecorded {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                key: NoGoodKey::of(&attempt).digest(),
                support_kind: "unchanged_state".into(),
                evidence_digest: blob_digest(b"evidence"),
                components: None,
                support: None,
            },
            records::search_closed("f", "no eligible candidate"),
        ]);
        let mut session = Session::begin(&ledger, root).unwrap();
        assert!(session.nogoods.suppresses(&attempt).is_none());
        assert_eq!(session.nogoods.key_only.len(), 1);
        let notice = session.nogoods.key_only_notice().expect("noted");
        assert!(notice.contains("never matched"), "{notice}");
        assert!(session.nogoods.key_only_notice().is_none(), "once");
        assert_eq!(SearchStatus::from_rows(&ledger.rows().unwrap()).no_goods, 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Gate AB over the ledger: a no-good written by one process and
        /// restored by the next never matches an attempt that differs from
        /// it in any one component.
        #[test]
        fn gate_ab_unequal_keys_never_match_after_a_restore(
            seed in proptest::prelude::any::<[u8; 9]>(),
            index in 0usize..9,
            replacement in proptest::prelude::any::<[u8; 32]>(),
        ) {
            let recorded = components(&seed);
            let session = session_restoring(&recorded);
            proptest::prop_assert!(session.nogoods.suppresses(&recorded).is_some());
            let probe = with_component(recorded.clone(), index, Digest(replacement));
            if probe != recorded {
                proptest::prop_assert!(session.nogoods.suppresses(&probe).is_none());
            }
        }
    }

    // -- continuing a generation after an accepted step ---------------------

    /// A ledger in which generation 0 of `x0`'s node accepted `c1` at `y1`
    /// (stored when `store` says so), then opened forest `f2` at `forest_root`.
    fn accepted_then_interrupted(
        x0: Digest,
        x0_measured_at: Digest,
        store: bool,
        forest_root: Digest,
    ) -> (tempfile::TempDir, Ledger) {
        let node = records::node_id(&x0);
        let y1 = blob_digest(b"y1");
        let measured = |id: &str, root: Digest, energy: f64| {
            ledger::LedgerEvent::CandidateMeasured(ledger::CandidateMeasured {
                node: node.clone(),
                generation: 0,
                candidate_id: format!("{node}/0/{id}"),
                root,
                energy,
                hard_pass: false,
                clusters: vec![],
                stages: vec![],
            })
        };
        let f1 = format!("{node}/0/f1");
        let (dir, ledger) = ledger_with(&[]);
        ledger.append(&measured("x0", x0_measured_at, 4.0)).unwrap();
        ledger.append_search(&opened(&f1, &node, 0, x0)).unwrap();
        ledger.append(&measured("c1", y1, 2.0)).unwrap();
        let decision = GateDecision {
            candidate_id: format!("{node}/0/c1"),
            index: 0,
            verdict: Verdict::AcceptedDescent,
            root: y1,
            observed_energy: 2.0,
            best_before: 4.0,
        };
        ledger
            .append(&records::gate_decision(&node, 0, &decision))
            .unwrap();
        ledger
            .append_search(&records::search_closed(&f1, "committed"))
            .unwrap();
        if store {
            ledger
                .append(&records::accepted_state_stored(
                    &node,
                    0,
                    &decision.candidate_id,
                    y1,
                    vec![(
                        crate::workspace_path::WorkspacePath::new("src/lib.rs").unwrap(),
                        blob_digest(b"fixed"),
                    )],
                ))
                .unwrap();
        }
        for event in [
            opened(&format!("{node}/0/f2"), &node, 0, forest_root),
            usage(&format!("{node}/0/f2"), 3),
        ] {
            ledger.append_search(&event).unwrap();
        }
        (dir, ledger)
    }

    #[test]
    fn a_forest_at_the_last_stored_accepted_state_continues_its_generation() {
        let x0 = blob_digest(b"x0");
        let y1 = blob_digest(b"y1");
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, true, y1);
        let mut session = Session::begin(&ledger, x0).unwrap();
        assert_eq!((session.generation, session.next_forest), (0, 3));
        assert!(session.x0_recorded);
        let continuation = session.continuation.take().expect("continued");
        assert_eq!((continuation.x0.root, continuation.x0.energy), (x0, 4.0));
        assert_eq!(continuation.decisions.len(), 1);
        assert_eq!(continuation.decisions[0].verdict, Verdict::AcceptedDescent);
        assert_eq!(continuation.stored.root, y1);
        assert_eq!(continuation.measured.energy, 2.0);
        let binding = ForestBinding {
            node: session.node.clone(),
            generation: 0,
            accepted_root: y1,
        };
        let seed = session.claim.open(&binding, Counters::DEFAULT_LIMITS);
        assert_eq!(seed.resumed_from, Some(format!("{}/0/f2", session.node)));
        assert_eq!(seed.budget.usage().actions, 3, "no refill");
    }

    #[test]
    fn an_unstored_or_older_accepted_state_starts_a_new_generation() {
        let x0 = blob_digest(b"x0");
        let y1 = blob_digest(b"y1");
        // Written by a trellis that did not store accepted states.
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, false, y1);
        let session = Session::begin(&ledger, x0).unwrap();
        assert_eq!(session.generation, 1);
        assert!(session.continuation.is_none());
        // A forest at x0 although the generation accepted y1 since.
        let (_dir, ledger) = accepted_then_interrupted(x0, x0, true, x0);
        let session = Session::begin(&ledger, x0).unwrap();
        assert_eq!(session.generation, 1);
        assert!(session.continuation.is_none());
    }

    #[test]
    fn a_generation_whose_start_was_measured_elsewhere_is_refused() {
        let x0 = blob_digest(b"x0");
        let (_dir, ledger) =
            accepted_then_interrupted(x0, blob_digest(b"elsewhere"), true, blob_digest(b"y1"));
        let Err(err) = Session::begin(&ledger, x0) else {
            panic!("a contradictory record must be refused");
        };
        let message = err.to_string();
        assert!(
            message.contains("ledger.db") && message.contains("/0/x0 was measured at"),
            "{message}"
        );
    }
}
