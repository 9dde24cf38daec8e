//! The status projection: `trellis status` and `trellis/searchStatus`.
//!
//! [`SearchStatus::from_rows`] is a fold over ledger rows, in seq order:
//! each search row moves one forest (or one branch of it, as a
//! [`BranchState`]) and nothing else. It is display only: it never decides
//! anything, so it tolerates what replay would refuse (a forest left open
//! by a crash, rows of a newer envelope version, rows of an unknown
//! forest).
//!
//! It must never be consulted by the runtime: what a repair inherits from
//! the ledger is folded by the session, with every check replay demands.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::ledger::{self, SearchEvent};

/// What the ledger says about one search forest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForestStatus {
    pub forest_id: String,
    pub node: String,
    pub generation: u32,
    pub accepted_root: Digest,
    pub resumed_from: Option<String>,
    /// The `search_closed` reason; `None` while (or if a crash left it) open.
    pub closed: Option<String>,
    pub branches: Vec<BranchStatus>,
    pub limits: BTreeMap<String, u64>,
    /// The last usage snapshot.
    pub usage: BTreeMap<String, u64>,
    /// Limits minus usage, counter by counter.
    pub remaining: BTreeMap<String, u64>,
    /// No-goods this forest recorded.
    pub no_goods: usize,
}

/// Where a branch's last search row left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchState {
    Opened,
    Measured,
    PartialCheckpointed,
    Ineligible,
    NotSelected,
    Abandoned,
    Selected,
    Committed,
}

impl BranchState {
    /// Every state, in the order a branch moves through them.
    pub const ALL: [BranchState; 8] = [
        BranchState::Opened,
        BranchState::Measured,
        BranchState::PartialCheckpointed,
        BranchState::Ineligible,
        BranchState::NotSelected,
        BranchState::Abandoned,
        BranchState::Selected,
        BranchState::Committed,
    ];

    /// The state's name, as serialized.
    pub fn name(self) -> &'static str {
        match self {
            BranchState::Opened => "opened",
            BranchState::Measured => "measured",
            BranchState::PartialCheckpointed => "partial_checkpointed",
            BranchState::Ineligible => "ineligible",
            BranchState::NotSelected => "not_selected",
            BranchState::Abandoned => "abandoned",
            BranchState::Selected => "selected",
            BranchState::Committed => "committed",
        }
    }
}

impl fmt::Display for BranchState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so a width in the format string aligns a column of states.
        f.pad(self.name())
    }
}

/// One branch's last recorded state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchStatus {
    pub branch_id: String,
    pub state: BranchState,
    pub reason: Option<String>,
}

/// The search plane as the ledger records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStatus {
    /// The forests of the most recent repair attempt (one node and
    /// generation), in the order they opened.
    pub forests: Vec<ForestStatus>,
    /// Every exact no-good recorded in the ledger (distinct keys).
    pub no_goods: usize,
    /// Search rows of a newer envelope version: shown, never interpreted.
    pub unreadable_rows: usize,
    /// A promotion was recorded after the last search opened: what the
    /// forests committed reached the user's files. `false` after a dry run
    /// (`trellis repair` without `--commit`, an editor Preview not applied).
    #[serde(default)]
    pub written: bool,
    /// A promotion the journal says a crash cut off, not yet finished or
    /// undone: read from `.trellis/promotion.journal` by the front end
    /// ([`crate::interrupted_promotion`]), never by the fold. While it is
    /// there the user's files are neither the verified tree nor the one
    /// the repair started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_promotion: Option<crate::promote::InterruptedPromotion>,
}

/// The fold's accumulator: every forest so far, and the distinct no-good
/// keys.
#[derive(Default)]
struct Fold {
    forests: Vec<ForestStatus>,
    keys: BTreeSet<Digest>,
    unreadable_rows: usize,
    written: bool,
}

impl Fold {
    fn row(mut self, row: &ledger::Row) -> Fold {
        match &row.event {
            ledger::DecodedRow::Search { event, .. } => self.search(event),
            ledger::DecodedRow::UnknownVersion { .. } => self.unreadable_rows += 1,
            ledger::DecodedRow::Ledger(ledger::LedgerEvent::Promoted(_)) => self.written = true,
            ledger::DecodedRow::Ledger(_) => {}
        }
        self
    }

    fn search(&mut self, event: &SearchEvent) {
        if let SearchEvent::SearchOpened {
            forest_id,
            node,
            generation,
            accepted_root,
            limits,
            resumed_from,
            ..
        } = event
        {
            self.written = false;
            self.forests.push(ForestStatus {
                forest_id: forest_id.clone(),
                node: node.clone(),
                generation: *generation,
                accepted_root: *accepted_root,
                resumed_from: resumed_from.clone(),
                closed: None,
                branches: Vec::new(),
                remaining: limits.clone(),
                limits: limits.clone(),
                usage: BTreeMap::new(),
                no_goods: 0,
            });
            return;
        }
        if let SearchEvent::NoGoodRecorded { key, .. } = event {
            self.keys.insert(*key);
        }
        if let Some(forest) = self
            .forests
            .iter_mut()
            .rev()
            .find(|f| f.forest_id == event.forest_id())
        {
            forest.apply(event);
        }
    }

    /// Keeps the forests of the most recent attempt (one node and generation).
    fn finish(self) -> SearchStatus {
        let forests = match self.forests.last().map(|f| (f.node.clone(), f.generation)) {
            Some((node, generation)) => self
                .forests
                .into_iter()
                .filter(|f| f.node == node && f.generation == generation)
                .collect(),
            None => Vec::new(),
        };
        SearchStatus {
            forests,
            no_goods: self.keys.len(),
            unreadable_rows: self.unreadable_rows,
            written: self.written,
            interrupted_promotion: None,
        }
    }
}

impl SearchStatus {
    /// Folds the status from ledger rows (in seq order).
    pub fn from_rows(rows: &[ledger::Row]) -> SearchStatus {
        rows.iter().fold(Fold::default(), Fold::row).finish()
    }
}

impl ForestStatus {
    fn set_branch(&mut self, branch_id: &str, state: BranchState, reason: Option<&str>) {
        let status = BranchStatus {
            branch_id: branch_id.to_owned(),
            state,
            reason: reason.map(str::to_owned),
        };
        match self.branches.iter_mut().find(|b| b.branch_id == branch_id) {
            Some(b) => *b = status,
            None => self.branches.push(status),
        }
    }

    fn apply(&mut self, event: &SearchEvent) {
        use BranchState as S;
        match event {
            SearchEvent::BranchForked { branch_id, .. } => {
                self.set_branch(branch_id, S::Opened, None)
            }
            SearchEvent::BranchCandidateMeasured { branch_id, .. } => {
                self.set_branch(branch_id, S::Measured, None)
            }
            SearchEvent::PartialCheckpointed {
                branch_id, reason, ..
            } => self.set_branch(branch_id, S::PartialCheckpointed, reason.as_deref()),
            SearchEvent::BranchIneligible {
                branch_id, reason, ..
            } => self.set_branch(branch_id, S::Ineligible, Some(reason)),
            SearchEvent::BranchNotSelected {
                branch_id, reason, ..
            } => self.set_branch(branch_id, S::NotSelected, Some(reason)),
            SearchEvent::BranchAbandoned {
                branch_id, reason, ..
            }
            // Status shows the seed's dashboard states: a contained branch
            // was given up, with its certificate's reason.
            | SearchEvent::BranchContained {
                branch_id, reason, ..
            } => self.set_branch(branch_id, S::Abandoned, Some(reason)),
            SearchEvent::BranchSelected { branch_id, .. } => {
                self.set_branch(branch_id, S::Selected, None)
            }
            SearchEvent::BranchCommitted { branch_id, .. } => {
                self.set_branch(branch_id, S::Committed, None)
            }
            SearchEvent::NoGoodRecorded { .. } => self.no_goods += 1,
            SearchEvent::SearchUsageSnapshot { usage, .. } => {
                self.remaining = self
                    .limits
                    .iter()
                    .map(|(k, limit)| {
                        (
                            k.clone(),
                            limit.saturating_sub(usage.get(k).copied().unwrap_or(0)),
                        )
                    })
                    .collect();
                self.usage = usage.clone();
            }
            SearchEvent::SearchClosed { reason, .. } => self.closed = Some(reason.clone()),
            _ => {}
        }
    }

    /// How many branches are in `state`.
    pub fn count(&self, state: BranchState) -> usize {
        self.branches.iter().filter(|b| b.state == state).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::blob_digest;
    use crate::records;
    use crate::repair::test_support::{ledger_with, opened, usage};
    use crate::search::Counters;

    #[test]
    fn status_counts_branch_states_remaining_limits_and_no_goods() {
        let root = blob_digest(b"x0");
        let (_dir, ledger) = ledger_with(&[
            opened("f", "n", 0, root),
            usage("f", 5),
            records::search_ineligible("f", "b1", "no descent"),
            SearchEvent::NoGoodRecorded {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                key: blob_digest(b"key"),
                support_kind: "compiler_code".into(),
                evidence_digest: blob_digest(b"evidence"),
                components: None,
                support: None,
            },
            records::search_closed("f", "no eligible candidate"),
        ]);
        let status = SearchStatus::from_rows(&ledger.rows().unwrap());
        let forest = &status.forests[0];
        assert_eq!(forest.count(BranchState::Ineligible), 1);
        assert_eq!(forest.closed.as_deref(), Some("no eligible candidate"));
        assert_eq!(
            forest.remaining["actions"],
            Counters::DEFAULT_LIMITS.actions - 5
        );
        assert_eq!((forest.no_goods, status.no_goods), (1, 1));
    }

    /// A contained branch is ledgered with its certificate, decodes from a
    /// real ledger, and shows as given up with the certificate's reason.
    #[test]
    fn a_contained_branch_shows_as_abandoned_with_its_reason() {
        let (_dir, ledger) = ledger_with(&[
            opened("f", "n", 0, blob_digest(b"x0")),
            SearchEvent::BranchContained {
                forest_id: "f".into(),
                branch_id: "b1".into(),
                certificate_id: "c0ffee".into(),
                reason: "contained: the sync copied more than reserved".into(),
            },
        ]);
        let rows = ledger.rows().unwrap();
        assert!(matches!(
            &rows.last().unwrap().event,
            crate::ledger::DecodedRow::Search { event, .. } if event.name() == "branch_contained"
        ));
        let forest = &SearchStatus::from_rows(&rows).forests[0];
        assert_eq!(forest.count(BranchState::Abandoned), 1);
    }

    #[test]
    fn a_promotion_after_the_last_search_marks_it_written_until_the_next_search() {
        let root = blob_digest(b"x0");
        let (_dir, ledger) = ledger_with(&[
            opened("f1", "n", 0, root),
            records::search_closed("f1", "committed"),
        ]);
        let written = |ledger: &crate::ledger::Ledger| {
            SearchStatus::from_rows(&ledger.rows().unwrap()).written
        };
        assert!(!written(&ledger), "a dry run writes nothing");
        ledger
            .append(&crate::ledger::test_support::promoted("r1"))
            .unwrap();
        assert!(written(&ledger));
        ledger.append_search(&opened("f2", "n", 1, root)).unwrap();
        assert!(!written(&ledger), "a later search is not written yet");
    }

    #[test]
    fn branch_states_serialize_as_their_names() {
        for state in BranchState::ALL {
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::String(state.name().to_owned())
            );
            assert_eq!(format!("{state:<22}|").len(), 23, "{state} pads");
        }
    }
}
