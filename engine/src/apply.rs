//! The editor's Apply verdicts as pure functions of values: may a finished
//! repair be offered on a view with a given root, and has the editor's view
//! reached what the repair verified.
//!
//! The language server asks these on every document change and answers
//! code actions from them, so they must never do I/O or ledger anything;
//! the ledgered decisions (`Engine::decide_apply`,
//! `Engine::record_editor_promotion`) are built on the same verdicts, so
//! what the editor is offered and what the engine accepts cannot disagree.

use crate::digest::Digest;
use crate::report::{RepairOutcome, RepairStatus};

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
    if outcome.status != RepairStatus::HardPass {
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
    outcome.status == RepairStatus::HardPass && observed_root == outcome.final_root
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CheckReport;

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
}
