//! Workspace paths in ledger events: the events that name files
//! (`promoted`, `accepted_state_stored`) carry checked `WorkspacePath`s, yet
//! their payloads are byte for byte what a ledger written with plain string
//! paths holds, so old ledgers read and their hash chains still verify; a
//! payload naming a path outside the workspace is refused, naming it.

use trellis_engine::digest::blob_digest;
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent};

fn digest(text: &str) -> String {
    serde_json::to_string(&blob_digest(text.as_bytes())).unwrap()
}

/// Payloads as a ledger from before `WorkspacePath` stored them (serde's
/// field order, string paths).
fn old_payloads() -> Vec<(&'static str, String)> {
    vec![
        (
            "promoted",
            format!(
                r#"{{"kind":"promoted","repair_id":"r1","root_before":{},"root_after":{},"files":["src/lib.rs","tests/adds.rs"],"via":"cli"}}"#,
                digest("before"),
                digest("after")
            ),
        ),
        (
            "accepted_state_stored",
            format!(
                r#"{{"kind":"accepted_state_stored","node":"n","generation":0,"candidate_id":"n/0/c1","root":{},"files":[{{"path":"src/lib.rs","blob":{}}}]}}"#,
                digest("root"),
                digest("content")
            ),
        ),
    ]
}

fn decoded(kind: &str, payload: &str) -> LedgerEvent {
    match DecodedRow::decode(kind, payload) {
        Ok(DecodedRow::Ledger(event)) => event,
        other => panic!("{kind}: {other:?}"),
    }
}

#[test]
fn old_payloads_with_string_paths_decode_and_encode_to_the_same_bytes() {
    for (kind, payload) in old_payloads() {
        let event = decoded(kind, &payload);
        assert_eq!(serde_json::to_string(&event).unwrap(), payload, "{kind}");
    }
}

#[test]
fn events_with_paths_round_trip_through_a_ledger_whose_chain_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let events: Vec<LedgerEvent> = old_payloads()
        .iter()
        .map(|(kind, payload)| decoded(kind, payload))
        .collect();
    {
        let ledger = Ledger::open(dir.path()).unwrap();
        for event in &events {
            ledger.append(event).unwrap();
        }
    }
    let ledger = Ledger::open(dir.path()).unwrap();
    let read: Vec<LedgerEvent> = ledger
        .rows()
        .unwrap()
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Ledger(
                event @ (LedgerEvent::Promoted(_) | LedgerEvent::AcceptedStateStored(_)),
            ) => Some(event),
            _ => None,
        })
        .collect();
    assert_eq!(read, events);
    ledger.verify().unwrap();
}

#[test]
fn a_payload_naming_a_path_outside_the_workspace_is_refused_by_name() {
    let (kind, payload) = &old_payloads()[0];
    let escaping = payload.replace("tests/adds.rs", "../outside.rs");
    let error = DecodedRow::decode(kind, &escaping).unwrap_err();
    assert!(error.contains("../outside.rs"), "{error}");
}
