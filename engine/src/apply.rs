//! The editor's Apply verdicts as pure functions of values: may a finished
//! repair be offered on a view with a given root, has the editor's view
//! reached what the repair verified, and which finished repairs a front end
//! keeps offering.
//!
//! The language server asks these on every document change and answers
//! code actions from them, so they must never do I/O or ledger anything;
//! the ledgered decisions (`Engine::decide_apply`,
//! `Engine::record_editor_promotion`) are built on the same verdicts, so
//! what the editor is offered and what the engine accepts cannot disagree.

use crate::digest::Digest;
use crate::report::RepairOutcome;

/// Whether a finished repair's Apply may be offered on a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyOffer {
    /// A hard pass, and the view still has the root the repair started from.
    Fresh,
    /// A hard pass, but the view has moved away from its start root.
    Stale,
    /// The repair did not reach a hard pass: it is never applied.
    NotPromotable,
}

/// The verdict for `outcome` on a view whose root is `view_root`.
pub fn offer(outcome: &RepairOutcome, view_root: Digest) -> ApplyOffer {
    if !outcome.is_verified() {
        ApplyOffer::NotPromotable
    } else if view_root == outcome.start_root {
        ApplyOffer::Fresh
    } else {
        ApplyOffer::Stale
    }
}

/// Whether a view with `observed_root` holds what `outcome` verified: a
/// hard pass whose final root it is. Only then is an editor promotion
/// recorded.
pub fn reached(outcome: &RepairOutcome, observed_root: Digest) -> bool {
    outcome.is_verified() && observed_root == outcome.final_root
}

/// How many finished repairs a front end keeps for Preview, Apply and
/// their branch files.
pub const KEPT_REPAIRS: usize = 16;

/// A finished repair, as the keeping rule sees it.
#[derive(Clone, Copy, Debug)]
pub struct Finished<'a> {
    pub cluster: &'a str,
    pub outcome: &'a RepairOutcome,
    /// Its edit reached the user's files.
    pub promoted: bool,
}

/// Adds `new` to the finished repairs `kept`, oldest first. A newer
/// verified repair of a cluster supersedes an older one of the same cluster
/// that was not applied, so the menu offers one Apply per cluster; a
/// failed or cancelled rerun leaves the older result in place. Only the
/// newest [`KEPT_REPAIRS`] stay.
pub fn keep_finished<T>(kept: &mut Vec<T>, new: T, view: impl Fn(&T) -> Finished<'_>) {
    let superseding = {
        let new = view(&new);
        new.outcome.is_verified().then(|| new.cluster.to_owned())
    };
    if let Some(cluster) = superseding {
        kept.retain(|old| {
            let old = view(old);
            old.promoted || old.cluster != cluster
        });
    }
    kept.push(new);
    if kept.len() > KEPT_REPAIRS {
        kept.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CheckReport, RepairStatus};

    fn outcome(status: RepairStatus) -> RepairOutcome {
        RepairOutcome {
            repair_id: "r-1".into(),
            status,
            start_root: Digest([1; 32]),
            final_root: Digest([2; 32]),
            initial: CheckReport {
                root: Digest([1; 32]),
                stages: Vec::new(),
                diagnostics: Vec::new(),
                failures: Vec::new(),
                clusters: Vec::new(),
                energy: 1.0,
                hard_pass: false,
            },
            steps: Vec::new(),
            changes: Vec::new(),
            summary: String::new(),
            model_would_help: false,
            unfixed: Vec::new(),
        }
    }

    #[test]
    fn only_a_hard_pass_on_its_start_root_is_offered() {
        let pass = outcome(RepairStatus::HardPass);
        assert_eq!(offer(&pass, Digest([1; 32])), ApplyOffer::Fresh);
        assert_eq!(offer(&pass, Digest([3; 32])), ApplyOffer::Stale);
        assert_eq!(offer(&pass, Digest([2; 32])), ApplyOffer::Stale);
        let partial = outcome(RepairStatus::ResidualsRemain);
        assert_eq!(offer(&partial, Digest([1; 32])), ApplyOffer::NotPromotable);
    }

    #[test]
    fn a_view_reached_a_repair_only_at_its_final_root_after_a_hard_pass() {
        let pass = outcome(RepairStatus::HardPass);
        assert!(reached(&pass, Digest([2; 32])));
        assert!(!reached(&pass, Digest([1; 32])));
        assert!(!reached(
            &outcome(RepairStatus::BoundReached),
            Digest([2; 32])
        ));
    }

    /// (cluster, status, promoted, label) of a kept repair.
    type Kept = (&'static str, RepairOutcome, bool, &'static str);

    fn keep(
        kept: &mut Vec<Kept>,
        cluster: &'static str,
        status: RepairStatus,
        label: &'static str,
    ) {
        keep_finished(kept, (cluster, outcome(status), false, label), |k| {
            Finished {
                cluster: k.0,
                outcome: &k.1,
                promoted: k.2,
            }
        });
    }

    fn labels(kept: &[Kept]) -> Vec<&str> {
        kept.iter().map(|k| k.3).collect()
    }

    #[test]
    fn a_newer_verified_repair_supersedes_an_unapplied_one_of_its_cluster_only() {
        let mut kept = Vec::new();
        keep(&mut kept, "a", RepairStatus::HardPass, "a1");
        keep(&mut kept, "b", RepairStatus::HardPass, "b1");
        // A failed or cancelled rerun leaves the verified result in place.
        keep(&mut kept, "a", RepairStatus::Cancelled, "a2");
        assert_eq!(labels(&kept), ["a1", "b1", "a2"]);
        // An applied one stays; an unapplied one of the cluster goes.
        kept[1].2 = true;
        keep(&mut kept, "b", RepairStatus::HardPass, "b2");
        keep(&mut kept, "a", RepairStatus::HardPass, "a3");
        assert_eq!(labels(&kept), ["b1", "b2", "a3"]);
    }

    #[test]
    fn only_the_newest_kept_repairs_stay() {
        let mut kept = Vec::new();
        let names: Vec<&'static str> = (0..KEPT_REPAIRS + 3)
            .map(|i| &*Box::leak(format!("c{i}").into_boxed_str()))
            .collect();
        for name in &names {
            keep(&mut kept, name, RepairStatus::ResidualsRemain, name);
        }
        assert_eq!(kept.len(), KEPT_REPAIRS);
        assert_eq!(labels(&kept), names[3..]);
    }
}
