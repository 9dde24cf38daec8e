//! Fair, deterministic scheduling of search quanta (PSP-10 system 19).
//!
//! Live frontier entries are served in epochs. When an epoch opens, every
//! live entry becomes a member; each member receives at most one quantum in
//! that epoch, best key first; entries added while an epoch runs join the
//! next one. So a promising branch cannot monopolize the budget, and the
//! order depends only on the entries' keys, never on arrival order. The key
//! is a scheduling heuristic, not an acceptance rule.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::forest::SearchBranch;

/// The six scheduling keys of one live branch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrontierEntry {
    pub branch_id: String,
    /// An operational barrier (Φ) does not hold at the branch's state.
    pub barrier: bool,
    pub unresolved_obligations: u32,
    /// Magnitude of the dominant residual under the common sensor profile.
    pub dominant_residual: f64,
    /// Cumulative recorded cost of the branch.
    pub cost: u64,
    /// Checkpoint depth (witness chain length minus one).
    pub depth: u32,
}

impl FrontierEntry {
    /// The entry for `branch`, taking its id, recorded cost and checkpoint
    /// depth from the branch itself and the measured keys from the caller.
    pub fn for_branch(
        branch: &SearchBranch,
        barrier: bool,
        unresolved_obligations: u32,
        dominant_residual: f64,
    ) -> FrontierEntry {
        FrontierEntry {
            branch_id: branch.branch_id.clone(),
            barrier,
            unresolved_obligations,
            dominant_residual,
            cost: branch.cost,
            depth: branch.depth() as u32,
        }
    }
}

/// Orders `a` before `b` when `a` should be served first: no barrier, fewer
/// unresolved obligations, lower dominant residual, lower cost, shallower
/// depth, smaller branch id.
pub fn compare(a: &FrontierEntry, b: &FrontierEntry) -> Ordering {
    a.barrier
        .cmp(&b.barrier)
        .then(a.unresolved_obligations.cmp(&b.unresolved_obligations))
        .then(a.dominant_residual.total_cmp(&b.dominant_residual))
        .then(a.cost.cmp(&b.cost))
        .then(a.depth.cmp(&b.depth))
        .then_with(|| a.branch_id.cmp(&b.branch_id))
}

/// One quantum handed out by [`Frontier::serve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// Epochs count from 1.
    pub epoch: u64,
    pub branch_id: String,
    /// This service opened `epoch` (ledger `frontier_epoch_started` first).
    pub opens_epoch: bool,
}

/// The live entries and the epoch being served.
#[derive(Clone, Debug, Default)]
pub struct Frontier {
    live: BTreeMap<String, FrontierEntry>,
    epoch: u64,
    /// Members of the current epoch not yet served.
    pending: BTreeSet<String>,
}

impl Frontier {
    pub fn new() -> Self {
        Frontier::default()
    }

    /// The epoch being served; 0 before the first.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Adds a live entry, or updates the keys of one already live (after its
    /// quantum). A new entry joins the next epoch; an updated member that is
    /// still pending keeps its place in this one.
    pub fn upsert(&mut self, entry: FrontierEntry) {
        self.live.insert(entry.branch_id.clone(), entry);
    }

    /// Removes an entry that is no longer live (its branch is terminal).
    pub fn remove(&mut self, branch_id: &str) {
        self.live.remove(branch_id);
        self.pending.remove(branch_id);
    }

    /// The next quantum: the best pending member of this epoch, or, when the
    /// epoch is spent, the best member of a new epoch of every live entry.
    /// `None` when nothing is live.
    pub fn serve(&mut self) -> Option<Service> {
        let mut opens_epoch = false;
        if self.pending.is_empty() {
            if self.live.is_empty() {
                return None;
            }
            self.epoch += 1;
            self.pending = self.live.keys().cloned().collect();
            opens_epoch = true;
        }
        let best = self
            .pending
            .iter()
            .map(|id| &self.live[id])
            .min_by(|a, b| compare(a, b))
            .expect("pending members are live")
            .branch_id
            .clone();
        self.pending.remove(&best);
        Some(Service {
            epoch: self.epoch,
            branch_id: best,
            opens_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(
        id: &str,
        barrier: bool,
        obligations: u32,
        residual: f64,
        cost: u64,
        depth: u32,
    ) -> FrontierEntry {
        FrontierEntry {
            branch_id: id.into(),
            barrier,
            unresolved_obligations: obligations,
            dominant_residual: residual,
            cost,
            depth,
        }
    }

    #[test]
    fn the_six_keys_apply_in_order() {
        let base = entry("b2", false, 1, 1.0, 1, 1);
        let pairs = [
            (
                entry("b9", false, 9, 9.0, 9, 9),
                entry("b1", true, 0, 0.0, 0, 0),
            ),
            (entry("b9", false, 0, 9.0, 9, 9), base.clone()),
            (entry("b9", false, 1, 0.5, 9, 9), base.clone()),
            (entry("b9", false, 1, 1.0, 0, 9), base.clone()),
            (entry("b9", false, 1, 1.0, 1, 0), base.clone()),
            (entry("b1", false, 1, 1.0, 1, 1), base),
        ];
        for (first, second) in pairs {
            assert_eq!(
                compare(&first, &second),
                Ordering::Less,
                "{first:?} before {second:?}"
            );
        }
    }

    #[test]
    fn a_promising_entry_gets_one_quantum_per_epoch() {
        let mut f = Frontier::new();
        f.upsert(entry("b1", false, 0, 0.1, 0, 0));
        f.upsert(entry("b2", false, 5, 9.0, 0, 0));
        let served: Vec<_> = (0..4).map(|_| f.serve().unwrap()).collect();
        let ids: Vec<_> = served
            .iter()
            .map(|s| (s.epoch, s.branch_id.as_str(), s.opens_epoch))
            .collect();
        assert_eq!(
            ids,
            vec![
                (1, "b1", true),
                (1, "b2", false),
                (2, "b1", true),
                (2, "b2", false)
            ]
        );
    }

    #[test]
    fn entries_added_during_an_epoch_join_the_next() {
        let mut f = Frontier::new();
        f.upsert(entry("b2", false, 3, 3.0, 0, 0));
        f.upsert(entry("b3", false, 3, 3.0, 0, 0));
        assert_eq!(f.serve().unwrap().branch_id, "b2");
        // b1 is better than everything, but arrives mid-epoch.
        f.upsert(entry("b1", false, 0, 0.0, 0, 1));
        assert_eq!(f.serve().unwrap().branch_id, "b3");
        let first_of_next = f.serve().unwrap();
        assert_eq!(
            (first_of_next.epoch, first_of_next.branch_id.as_str()),
            (2, "b1")
        );
    }

    #[test]
    fn removed_entries_are_not_served_and_an_empty_frontier_serves_nothing() {
        let mut f = Frontier::new();
        assert_eq!(f.serve(), None);
        f.upsert(entry("b1", false, 0, 0.0, 0, 0));
        f.upsert(entry("b2", false, 0, 0.0, 0, 0));
        f.remove("b2");
        assert_eq!(f.serve().unwrap().branch_id, "b1");
        f.remove("b1");
        assert_eq!(f.serve(), None);
        assert!(f.is_empty());
    }

    fn entries() -> impl Strategy<Value = Vec<FrontierEntry>> {
        proptest::collection::vec((any::<bool>(), 0u32..3, 0u8..3, 0u64..3, 0u32..3), 1..6)
            .prop_map(|keys| {
                keys.into_iter()
                    .enumerate()
                    .map(|(i, (barrier, o, r, c, d))| {
                        entry(&format!("b{i}"), barrier, o, f64::from(r), c, d)
                    })
                    .collect()
            })
    }

    proptest! {
        /// The service order depends only on the keys, not on the order the
        /// entries were added in.
        #[test]
        fn order_is_independent_of_insertion_order(list in entries(), rotate in 0usize..6, epochs in 1usize..4) {
            let serve = |list: &[FrontierEntry]| {
                let mut f = Frontier::new();
                for e in list {
                    f.upsert(e.clone());
                }
                (0..list.len() * epochs).map(|_| f.serve().unwrap()).collect::<Vec<_>>()
            };
            let mut shuffled = list.clone();
            shuffled.rotate_left(rotate % list.len());
            shuffled.reverse();
            prop_assert_eq!(serve(&list), serve(&shuffled));
        }

        /// No entry is served twice in one epoch, and every live entry is
        /// served once per epoch, even as entries arrive and leave.
        #[test]
        fn no_entry_is_served_twice_in_an_epoch(
            list in entries(),
            late in entries(),
            removals in proptest::collection::vec(0usize..6, 0..3),
        ) {
            let mut f = Frontier::new();
            for e in &list {
                f.upsert(e.clone());
            }
            let mut served: BTreeMap<u64, Vec<String>> = BTreeMap::new();
            let mut step = 0;
            let mut late_joined_during = None;
            while let Some(s) = f.serve() {
                served.entry(s.epoch).or_default().push(s.branch_id.clone());
                step += 1;
                if step == 2 {
                    late_joined_during = Some(f.epoch());
                    for e in &late {
                        let mut e = e.clone();
                        e.branch_id = format!("late-{}", e.branch_id);
                        f.upsert(e);
                    }
                }
                if let Some(&r) = removals.get(step) {
                    f.remove(&format!("b{r}"));
                }
                if f.epoch() > 4 {
                    break;
                }
            }
            for ids in served.values() {
                let distinct: BTreeSet<_> = ids.iter().collect();
                prop_assert_eq!(distinct.len(), ids.len(), "served twice: {:?}", ids);
            }
            if let Some(epoch) = late_joined_during {
                let same_epoch = served.get(&epoch).into_iter().flatten();
                prop_assert!(same_epoch.clone().all(|id| !id.starts_with("late-")), "late entry served in the epoch it joined");
            }
        }
    }
}
