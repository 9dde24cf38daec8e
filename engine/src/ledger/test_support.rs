//! Shared test fixtures: real ledgers in temporary directories, sample
//! events, and a second SQLite connection for writing rows the way an
//! older or newer trellis, or an attacker, would.

use rusqlite::{Connection, params};
use tempfile::TempDir;

use super::event::*;
use super::store::{Ledger, event_hash};
use crate::digest::{Digest, blob_digest};
use crate::search::{NoGood, NoGoodComponents, Support};

/// A fresh ledger in `<tmp>/.trellis`; keep the `TempDir` alive.
pub fn temp_ledger() -> (TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join(".trellis")).unwrap();
    (dir, ledger)
}

pub fn root(label: &str) -> Digest {
    blob_digest(label.as_bytes())
}

pub fn measured(node: &str, generation: u32, candidate: &str, energy: f64) -> LedgerEvent {
    LedgerEvent::CandidateMeasured(CandidateMeasured {
        node: node.into(),
        generation,
        candidate_id: candidate.into(),
        root: root(candidate),
        energy,
        hard_pass: energy == 0.0,
        clusters: vec![ClusterSummary {
            id: "c-1a2b3c4d".into(),
            title: "`Point` is not imported (3 sites)".into(),
            class: "unresolved_name".into(),
            sites: 3,
            magnitude: energy,
        }],
        stages: vec![StageOutcome {
            stage: "build".into(),
            status: "failed".into(),
        }],
    })
}

pub fn decided(
    node: &str,
    generation: u32,
    candidate: &str,
    decision_index: u32,
    verdict: GateVerdict,
    observed_energy: f64,
    best_before: f64,
) -> LedgerEvent {
    LedgerEvent::GateDecisionRecorded(GateDecisionRecorded {
        node: node.into(),
        generation,
        candidate_id: candidate.into(),
        decision_index,
        verdict,
        observed_energy,
        best_before,
        root: root(candidate),
    })
}

/// The stored state of `candidate`, at the root [`measured`] gives it.
pub fn stored(node: &str, generation: u32, candidate: &str) -> LedgerEvent {
    LedgerEvent::AcceptedStateStored(AcceptedStateStored {
        node: node.into(),
        generation,
        candidate_id: candidate.into(),
        root: root(candidate),
        files: vec![StoredFile {
            path: crate::workspace_path::WorkspacePath::new("src/lib.rs").unwrap(),
            blob: blob_digest(candidate.as_bytes()),
        }],
    })
}

pub fn promoted(repair_id: &str) -> LedgerEvent {
    LedgerEvent::Promoted(Promoted {
        repair_id: repair_id.into(),
        root_before: root("before"),
        root_after: root("after"),
        files: vec![crate::workspace_path::WorkspacePath::new("src/lib.rs").unwrap()],
        via: PromotionRoute::Cli,
    })
}

pub fn refused(repair_id: &str) -> LedgerEvent {
    LedgerEvent::Refused(Refused {
        repair_id: repair_id.into(),
        reason: RefusalReason::StaleRoot {
            expected: root("before"),
            found: root("edited"),
        },
        detail: "src/lib.rs changed since the search started".into(),
        rolled_back: None,
    })
}

pub fn opened(forest: &str, node: &str, resumed_from: Option<&str>) -> SearchEvent {
    SearchEvent::SearchOpened {
        forest_id: forest.into(),
        branch_id: String::new(),
        node: node.into(),
        generation: 0,
        accepted_root: root("accepted"),
        limits: [("branches".to_owned(), 3), ("actions".to_owned(), 12)].into(),
        resumed_from: resumed_from.map(str::to_owned),
    }
}

pub fn abandoned(forest: &str, branch: &str) -> SearchEvent {
    SearchEvent::BranchAbandoned {
        forest_id: forest.into(),
        branch_id: branch.into(),
        reason: "candidate fails `tests::it_works`".into(),
    }
}

pub fn usage(forest: &str, actions: u64) -> SearchEvent {
    SearchEvent::SearchUsageSnapshot {
        forest_id: forest.into(),
        branch_id: String::new(),
        usage: [("actions".to_owned(), actions)].into(),
    }
}

pub fn closed(forest: &str) -> SearchEvent {
    SearchEvent::SearchClosed {
        forest_id: forest.into(),
        branch_id: String::new(),
        reason: "committed".into(),
    }
}

/// A key-only no-good row, as trellis wrote them before rows carried the
/// key's components.
pub fn no_good(forest: &str, key: &str) -> SearchEvent {
    SearchEvent::NoGoodRecorded {
        forest_id: forest.into(),
        branch_id: "b1".into(),
        key: root(key),
        support_kind: "compiler_code".into(),
        evidence_digest: root("E0425"),
        components: None,
        support: None,
    }
}

/// An exact no-good whose nine components all derive from `label`.
pub fn exact_no_good(label: &str) -> NoGood {
    let part = |i: u8| blob_digest(&[label.as_bytes(), &[i]].concat());
    NoGood::new(
        NoGoodComponents {
            accepted_root: part(0),
            domain_manifest: part(1),
            strategy: part(2),
            prompt_program: None,
            proposal: part(4),
            grant: part(5),
            tool_catalog: part(6),
            sensor_fingerprint: part(7),
            runtime_build: part(8),
        },
        Support::FailedTest {
            tests: vec![format!("lib::tests::{label}")],
        },
    )
}

/// The `no_good_recorded` row trellis writes for `nogood`.
pub fn exact_no_good_row(forest: &str, nogood: &NoGood) -> SearchEvent {
    SearchEvent::no_good_recorded(forest, "b1", nogood)
}

fn db(ledger: &Ledger) -> Connection {
    Connection::open(ledger.path()).unwrap()
}

/// Appends a row with arbitrary `kind` and `payload` bytes, correctly
/// chained, bypassing the ledger's own encoding checks.
pub fn append_raw(ledger: &Ledger, kind: &str, payload: &[u8]) -> u64 {
    let conn = db(ledger);
    let (seq, prev): (u64, Digest) = conn
        .query_row(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |row| {
                let seq: i64 = row.get(0)?;
                let hash: String = row.get(1)?;
                Ok((seq as u64 + 1, hash.parse().unwrap()))
            },
        )
        .unwrap_or((1, Digest::ZERO));
    let hash = event_hash(seq, kind.as_bytes(), payload, &prev);
    conn.execute(
        "INSERT INTO events (seq, kind, payload, prev_hash, hash, recorded_at)
         VALUES (?1, ?2, CAST(?3 AS TEXT), ?4, ?5, '2026-01-01T00:00:00.000Z')",
        params![seq as i64, kind, payload, prev.to_hex(), hash.to_hex()],
    )
    .unwrap();
    seq
}

/// Runs `sql` against the ledger file from a second connection, with the
/// append-only triggers dropped first, as someone editing the file would.
pub fn tamper(ledger: &Ledger, sql: &str) {
    let conn = db(ledger);
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS events_are_never_updated;
         DROP TRIGGER IF EXISTS events_are_never_deleted;",
    )
    .unwrap();
    conn.execute_batch(sql).unwrap();
}

/// Re-seals row `seq` after tampering: recomputes its hash from its stored
/// columns, as a forger who knows the hash scheme would.
pub fn reseal(ledger: &Ledger, seq: u64) {
    let conn = db(ledger);
    let (kind, payload, prev): (Vec<u8>, Vec<u8>, String) = conn
        .query_row(
            "SELECT CAST(kind AS BLOB), CAST(payload AS BLOB), prev_hash FROM events WHERE seq = ?1",
            [seq as i64],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    let hash = event_hash(seq, &kind, &payload, &prev.parse().unwrap());
    tamper(
        ledger,
        &format!("UPDATE events SET hash = '{hash}' WHERE seq = {seq}"),
    );
}

/// Rewrites the head witness to the ledger's current head, as a forger who
/// rewrote the chain and knows about the witness would.
pub fn forge_witness(ledger: &Ledger) {
    let head = ledger.head().unwrap().expect("a non-empty ledger");
    let dir = ledger.path().parent().unwrap();
    std::fs::write(
        dir.join(crate::ledger::witness::WITNESS_FILE),
        format!("{head}\n"),
    )
    .unwrap();
}
