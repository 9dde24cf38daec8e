//! Ledgers for the repair runtime's tests: real ledgers in temp dirs, with
//! the search rows a forest writes.

use crate::digest::Digest;
use crate::ledger::{Ledger, SearchEvent};
use crate::search::Counters;

pub(super) fn opened(forest_id: &str, node: &str, generation: u32, root: Digest) -> SearchEvent {
    SearchEvent::SearchOpened {
        forest_id: forest_id.into(),
        branch_id: String::new(),
        node: node.into(),
        generation,
        accepted_root: root,
        limits: Counters::DEFAULT_LIMITS.to_snapshot(),
        resumed_from: None,
    }
}

pub(super) fn usage(forest_id: &str, actions: u64) -> SearchEvent {
    let mut usage = Counters::ZERO;
    usage.actions = actions;
    usage.verifier_runs = 1;
    SearchEvent::SearchUsageSnapshot {
        forest_id: forest_id.into(),
        branch_id: String::new(),
        usage: usage.to_snapshot(),
    }
}

pub(super) fn ledger_with(events: &[SearchEvent]) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path()).unwrap();
    for event in events {
        ledger.append_search(event).unwrap();
    }
    (dir, ledger)
}
