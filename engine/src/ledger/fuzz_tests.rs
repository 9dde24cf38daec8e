//! Property tests of the ledger's readers against rows damaged by a crash or
//! rewritten by hand: payload decoding, raw row decoding, both folds, the
//! head witness; and the round trip every appended event must survive.
//!
//! Its properties: `damaged_payloads_are_refused_not_panicked_on`,
//! `structurally_edited_payloads_are_refused_not_panicked_on`,
//! `reordered_fields_decode_to_the_same_row`,
//! `raw_rows_with_any_columns_decode_or_are_refused`,
//! `folds_of_rearranged_rows_never_panic`,
//! `appended_events_read_back_unchanged`,
//! `a_huge_witness_is_refused_without_reading_it`; the witness text's are in
//! `witness.rs` (`any_witness_text_parses_or_is_refused`,
//! `heads_round_trip_through_the_witness_text`).

use proptest::prelude::*;
use trellis_core::fuzz;

use super::event::{DecodedRow, GateVerdict, LedgerEvent, SEARCH_KIND, SearchEnvelopeV1};
use super::fold::{fold_accepted, fold_resume};
use super::store::{RawRow, Row, decode_raw};
use super::test_support::*;
use super::witness::Head;
use crate::digest::Digest;

/// One stored payload of every shape the engine writes, as `(kind, payload)`.
fn recorded_payloads() -> Vec<(String, String)> {
    let ledger = [
        measured("n1", 0, "cand-1", 4.5),
        decided("n1", 0, "cand-1", 0, GateVerdict::AcceptedDescent, 4.5, 9.0),
        stored("n1", 0, "cand-1"),
        promoted("r1"),
        refused("r1"),
    ]
    .into_iter()
    .map(|event| {
        let payload = serde_json::to_string(&event).unwrap();
        (event.kind().to_owned(), payload)
    });
    let search = [
        opened("f1", "n1", None),
        abandoned("f1", "b2"),
        usage("f1", 7),
        closed("f1"),
        no_good("f1", "k"),
        exact_no_good_row("f1", &exact_no_good("t")),
    ]
    .into_iter()
    .map(|event| {
        let payload = serde_json::to_string(&SearchEnvelopeV1::new(event)).unwrap();
        (SEARCH_KIND.to_owned(), payload)
    });
    ledger.chain(search).collect()
}

fn seed() -> impl Strategy<Value = (String, String)> {
    prop::sample::select(recorded_payloads())
}

/// A chain of decoded rows in the order a repair writes them.
fn recorded_rows() -> Vec<Row> {
    let (_dir, ledger) = temp_ledger();
    ledger.append_search(&opened("f1", "n1", None)).unwrap();
    ledger.append(&measured("n1", 0, "cand-1", 4.5)).unwrap();
    ledger
        .append(&decided(
            "n1",
            0,
            "cand-1",
            0,
            GateVerdict::AcceptedDescent,
            4.5,
            9.0,
        ))
        .unwrap();
    ledger.append(&stored("n1", 0, "cand-1")).unwrap();
    ledger.append_search(&usage("f1", 3)).unwrap();
    ledger
        .append_search(&exact_no_good_row("f1", &exact_no_good("t")))
        .unwrap();
    ledger.append_search(&abandoned("f1", "b2")).unwrap();
    ledger.append_search(&closed("f1")).unwrap();
    ledger.append(&promoted("r1")).unwrap();
    ledger.rows().unwrap()
}

fn decode_bounded(kind: &str, payload: &str) -> Result<DecodedRow, String> {
    fuzz::bounded("DecodedRow::decode", fuzz::budget(payload.len()), || {
        DecodedRow::decode(kind, payload)
    })
}

/// Arbitrary text of the kinds the engine stores: empty, unicode, NUL, long.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9-]{0,12}",
        any::<String>(),
        Just("a\0b".to_owned()),
        Just("x".repeat(10_000)),
    ]
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("JSON holds finite numbers", |x| x.is_finite()),
        Just(0.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
    ]
}

/// Events of several kinds with arbitrary ids, numbers and texts.
fn any_event() -> impl Strategy<Value = LedgerEvent> {
    let verdict = prop::sample::select(vec![
        GateVerdict::AcceptedHardPass,
        GateVerdict::AcceptedDescent,
        GateVerdict::RejectedNonDescending,
    ]);
    prop_oneof![
        (text(), any::<u32>(), text(), finite()).prop_map(
            |(node, generation, candidate, energy)| measured(&node, generation, &candidate, energy)
        ),
        (
            text(),
            any::<u32>(),
            text(),
            any::<u32>(),
            verdict,
            finite(),
            finite()
        )
            .prop_map(
                |(node, generation, candidate, index, verdict, observed, best)| decided(
                    &node, generation, &candidate, index, verdict, observed, best
                )
            ),
        (text(), any::<u32>(), text())
            .prop_map(|(node, generation, candidate)| stored(&node, generation, &candidate)),
        text().prop_map(|id| promoted(&id)),
        text().prop_map(|id| refused(&id)),
    ]
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// A damaged payload decodes or is refused with a reason; never a panic.
    #[test]
    fn damaged_payloads_are_refused_not_panicked_on(
        (kind, payload) in seed(),
        edits in fuzz::byte_edits(),
    ) {
        let damaged = fuzz::apply_bytes(payload.as_bytes(), &edits);
        let damaged = String::from_utf8_lossy(&damaged);
        if let Err(reason) = decode_bounded(&kind, &damaged) {
            prop_assert!(!reason.is_empty());
        }
    }

    /// Wrong types, missing and duplicated fields, huge numbers, deep
    /// nesting: a structural edit is decoded or refused, never a panic.
    #[test]
    fn structurally_edited_payloads_are_refused_not_panicked_on(
        (kind, payload) in seed(),
        edit in fuzz::json_edit(),
    ) {
        let value: serde_json::Value = serde_json::from_str(&payload).unwrap();
        let edited = fuzz::apply_json(&value, &edit);
        let _ = decode_bounded(&kind, &edited);
    }

    /// Reordered fields and other whitespace are the same row.
    #[test]
    fn reordered_fields_decode_to_the_same_row((kind, payload) in seed(), order in any::<u64>()) {
        let value: serde_json::Value = serde_json::from_str(&payload).unwrap();
        let rewritten = fuzz::rewrite_json(&value, order);
        prop_assert_eq!(
            decode_bounded(&kind, &rewritten).unwrap(),
            DecodedRow::decode(&kind, &payload).unwrap()
        );
    }

    /// Any bytes in any column of a raw row: a row or a `Corrupt` error.
    #[test]
    fn raw_rows_with_any_columns_decode_or_are_refused(
        seq in any::<i64>(),
        kind in prop::collection::vec(any::<u8>(), 0..24),
        payload in prop::collection::vec(any::<u8>(), 0..512),
        prev_hash in prop::collection::vec(any::<u8>(), 0..80),
        hash in prop::collection::vec(any::<u8>(), 0..80),
        recorded_at in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let raw = RawRow { seq, kind, payload, prev_hash, hash, recorded_at };
        let budget = fuzz::budget(raw.payload.len() + raw.kind.len());
        let _ = fuzz::bounded("decode_raw", budget, || decode_raw(&raw));
    }

    /// Every event the engine appends reads back as itself from the store.
    #[test]
    fn appended_events_read_back_unchanged(events in prop::collection::vec(any_event(), 1..4)) {
        let (_dir, ledger) = temp_ledger();
        for event in &events {
            ledger.append(event).unwrap();
        }
        let rows = ledger.rows().unwrap();
        let read: Vec<&LedgerEvent> = rows
            .iter()
            .map(|row| match &row.event {
                DecodedRow::Ledger(event) => event,
                other => panic!("a ledger event read back as {other:?}"),
            })
            .collect();
        prop_assert_eq!(read, events.iter().collect::<Vec<_>>());
    }

    /// Rows dropped, repeated, reordered or replaced by another row's
    /// event: both folds return a fold or a typed error, never a panic.
    #[test]
    fn folds_of_rearranged_rows_never_panic(
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..16),
    ) {
        let recorded = recorded_rows();
        let rows: Vec<Row> = picks
            .iter()
            .enumerate()
            .map(|(seq, pick)| Row {
                seq: seq as u64 + 1,
                ..recorded[pick.index(recorded.len())].clone()
            })
            .collect();
        let budget = fuzz::budget(64 << 10);
        let _ = fuzz::bounded("fold_accepted", budget, || fold_accepted(&rows));
        let _ = fuzz::bounded("fold_resume", budget, || fold_resume(&rows));
    }

    /// Any text as the head witness: a head or a reason, never a panic.
    #[test]
    fn any_witness_text_parses_or_is_refused(text in prop_oneof![
        any::<String>(),
        (any::<u64>(), any::<[u8; 32]>(), fuzz::byte_edits()).prop_map(|(seq, hash, edits)| {
            let head = Head { seq, hash: Digest(hash) }.to_string();
            String::from_utf8_lossy(&fuzz::apply_bytes(head.as_bytes(), &edits)).into_owned()
        }),
    ]) {
        let parsed = fuzz::bounded("Head::from_str", fuzz::budget(text.len()), || text.parse::<Head>());
        if let Err(reason) = parsed {
            prop_assert!(!reason.is_empty());
        }
    }

    /// A head reads back from what the witness writes, surrounded by whitespace.
    #[test]
    fn heads_round_trip_through_the_witness_text(seq in any::<u64>(), hash in any::<[u8; 32]>()) {
        let head = Head { seq, hash: Digest(hash) };
        prop_assert_eq!(format!(" {head}\n").parse::<Head>(), Ok(head));
    }
}

/// Found by `appended_events_read_back_unchanged`: serde_json's default
/// float parser read this energy back one ULP off, so a replayed gate
/// could compare other numbers than the ones it decided on. The workspace
/// now builds serde_json with `float_roundtrip`.
#[test]
fn an_energy_reads_back_to_the_same_bits() {
    let energy = -2.854_674_742_469_620_7e225;
    let (_dir, ledger) = temp_ledger();
    ledger.append(&measured("n1", 0, "cand-1", energy)).unwrap();
    let rows = ledger.rows().unwrap();
    let DecodedRow::Ledger(LedgerEvent::CandidateMeasured(read)) = &rows[0].event else {
        panic!("not a measurement: {:?}", rows[0].event);
    };
    assert_eq!(read.energy.to_bits(), energy.to_bits());
}

/// The witness was read whole: a `.trellis/head` replaced by a huge file
/// was read into memory before being refused. Now it is refused unread.
#[test]
fn a_huge_witness_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::statedir::open_state(dir.path()).unwrap();
    let planted = std::fs::File::create(state.join(super::witness::WITNESS_FILE)).unwrap();
    planted.set_len(1 << 30).unwrap();
    let error =
        fuzz::bounded("witness::read", 1 << 20, || super::witness::read(&state)).unwrap_err();
    assert!(error.contains("head"), "{error}");
    assert!(error.contains("larger than 4096 bytes"), "{error}");
}
