//! Checking the hash chain: which event was changed, removed or moved.
//!
//! Verification walks the stored rows in seq order and, for each one,
//! recomputes its hash from the bytes on disk (a changed kind or payload, or a
//! row moved to another seq, no longer matches), checks that it links to the
//! row before it (a removed or reordered predecessor breaks the link), checks
//! that seqs have no gaps, and checks that the payload still decodes. Finally
//! it compares the last seq with SQLite's AUTOINCREMENT high-water mark, which
//! catches rows cut off the end, the one removal a chain alone cannot see.
//!
//! A chain checks only that its rows agree with each other. What it must
//! still reach is checked against heads kept outside it
//! ([`super::witness`]): the workspace's own witness, and a head the user
//! kept (`--expect-head`). A chain that ends before such a head lost events
//! (a removed WAL, a truncated file); one whose event at that seq hashes
//! differently was rewritten at or before it. An empty ledger with no
//! witness, in a workspace whose stat cache or blob store shows earlier
//! sessions, lost everything and is not reported intact either.

use std::path::{Path, PathBuf};

use super::store::{Ledger, LedgerError, RawRow, decode_raw, event_hash};
use super::witness::{self, Head, HeadSource};
use crate::digest::Digest;

/// What an intact ledger holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub events: u64,
    /// Hash of the last event; [`Digest::ZERO`] for an empty ledger.
    pub head: Digest,
}

/// The first place the chain is broken, named by seq and kind.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("event {seq} ({kind}): payload changed: stored hash {stored} recomputed {recomputed}")]
    HashMismatch {
        seq: u64,
        kind: String,
        stored: Digest,
        recomputed: Digest,
    },
    #[error(
        "event {missing} was removed: event {next_seq} ({next_kind}) follows event {}",
        missing - 1
    )]
    Removed {
        missing: u64,
        next_seq: u64,
        next_kind: String,
    },
    #[error(
        "event {seq} ({kind}): chain broken: it links to {stored_prev} but the event before it hashes to {actual_prev} (an earlier event was removed or reordered)"
    )]
    BrokenLink {
        seq: u64,
        kind: String,
        stored_prev: Digest,
        actual_prev: Digest,
    },
    #[error("events {first_missing} to {high_water_mark} were removed from the end of the ledger")]
    Truncated {
        first_missing: u64,
        high_water_mark: u64,
    },
    #[error("event {seq} ({kind}): unreadable: {reason}")]
    Unreadable {
        seq: u64,
        kind: String,
        reason: String,
    },
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Where a lost or rewritten ledger shows, beyond its own rows.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "the ledger ends at event {events} but {kept_by} records event {}: events {} to {} are missing (a truncated database or a removed WAL)",
        recorded.seq, events + 1, recorded.seq
    )]
    Lost {
        events: u64,
        recorded: Head,
        kept_by: HeadSource,
    },
    #[error(
        "event {} ({kind}) hashes to {found} but {kept_by} records {}: the ledger was rewritten at or before event {}",
        recorded.seq, recorded.hash, recorded.seq
    )]
    Diverged {
        kind: String,
        found: Digest,
        recorded: Head,
        kept_by: HeadSource,
    },
    #[error(
        "the ledger is empty but {} shows earlier sessions: its events were lost",
        evidence.display()
    )]
    EmptyWithHistory { evidence: PathBuf },
    #[error("cannot read the head witness: {0}")]
    UnreadableWitness(String),
}

impl ChainError {
    /// The seq the problem is first visible at, when there is one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            ChainError::HashMismatch { seq, .. }
            | ChainError::BrokenLink { seq, .. }
            | ChainError::Unreadable { seq, .. } => Some(*seq),
            ChainError::Removed { missing, .. } => Some(*missing),
            ChainError::Truncated { first_missing, .. } => Some(*first_missing),
            ChainError::History(HistoryError::Lost { events, .. }) => Some(events + 1),
            ChainError::History(HistoryError::Diverged { recorded, .. }) => Some(recorded.seq),
            ChainError::Ledger(LedgerError::Corrupt { seq, .. }) => Some(*seq),
            ChainError::History(_) | ChainError::Ledger(_) => None,
        }
    }
}

impl VerifyReport {
    /// The head as `trellis ledger verify` prints it; `None` when empty.
    pub fn last(&self) -> Option<Head> {
        (self.events > 0).then_some(Head {
            seq: self.events,
            hash: self.head,
        })
    }
}

impl Ledger {
    /// Verifies the whole chain and that it reaches the workspace's head
    /// witness; the error names the first broken or missing event.
    pub fn verify(&self) -> Result<VerifyReport, ChainError> {
        self.verify_expecting(None)
    }

    /// [`Ledger::verify`], and the chain must also reach `expected`, a head
    /// kept outside the workspace.
    pub fn verify_expecting(&self, expected: Option<Head>) -> Result<VerifyReport, ChainError> {
        let state = self.state_dir();
        let witness = witness::read(state).map_err(HistoryError::UnreadableWitness)?;
        // The user's own head first: it outranks one the workspace holds.
        let anchors: Vec<(Head, HeadSource)> = expected
            .map(|head| (head, HeadSource::Expected))
            .into_iter()
            .chain(
                witness.map(|head| (head, HeadSource::Witness(state.join(witness::WITNESS_FILE)))),
            )
            .collect();
        let mut at_anchor: Vec<Option<(String, Digest)>> = vec![None; anchors.len()];
        let mut report = VerifyReport {
            events: 0,
            head: Digest::ZERO,
        };
        self.scan(|raw| {
            check_row(&raw, report.events + 1, &report.head)?;
            report.events += 1;
            report.head = parse_digest(&raw, "hash", &raw.hash)?;
            for ((anchor, _), seen) in anchors.iter().zip(&mut at_anchor) {
                if anchor.seq == report.events {
                    *seen = Some((raw.kind_lossy(), report.head));
                }
            }
            Ok::<(), ChainError>(())
        })?;
        let high_water_mark = self.high_water_mark()?;
        if high_water_mark > report.events {
            return Err(ChainError::Truncated {
                first_missing: report.events + 1,
                high_water_mark,
            });
        }
        for ((recorded, kept_by), seen) in anchors.into_iter().zip(at_anchor) {
            check_anchor(report.events, recorded, kept_by, seen)?;
        }
        if witness.is_none()
            && report.events == 0
            && let Some(evidence) = earlier_sessions(state.path())
        {
            return Err(HistoryError::EmptyWithHistory { evidence }.into());
        }
        Ok(report)
    }
}

/// The chain (of `events` events, `seen` its event at the anchor's seq)
/// must reach `recorded` with the same hash.
fn check_anchor(
    events: u64,
    recorded: Head,
    kept_by: HeadSource,
    seen: Option<(String, Digest)>,
) -> Result<(), HistoryError> {
    if recorded.seq > events {
        return Err(HistoryError::Lost {
            events,
            recorded,
            kept_by,
        });
    }
    let (kind, found) = seen.unwrap_or_else(|| ("before the first event".into(), Digest::ZERO));
    if found != recorded.hash {
        return Err(HistoryError::Diverged {
            kind,
            found,
            recorded,
            kept_by,
        });
    }
    Ok(())
}

/// State only a session that recorded events leaves behind: the stat
/// cache, or any stored blob.
fn earlier_sessions(trellis_dir: &Path) -> Option<PathBuf> {
    let index = trellis_dir.join("index");
    if index.exists() {
        return Some(index);
    }
    let objects = trellis_dir.join("objects");
    let mut entries = std::fs::read_dir(&objects).ok()?;
    entries.next().is_some().then_some(objects)
}

/// Checks one row against the seq and predecessor hash it must have.
fn check_row(raw: &RawRow, expected_seq: u64, prev: &Digest) -> Result<(), ChainError> {
    let kind = raw.kind_lossy();
    let seq = u64::try_from(raw.seq).map_err(|_| ChainError::Unreadable {
        seq: expected_seq,
        kind: kind.clone(),
        reason: format!("stored seq {} is negative", raw.seq),
    })?;
    let stored_prev = parse_digest(raw, "prev_hash", &raw.prev_hash)?;
    let stored = parse_digest(raw, "hash", &raw.hash)?;

    // The row's own content first: a tampered row is named as itself.
    let recomputed = event_hash(seq, &raw.kind, &raw.payload, &stored_prev);
    if recomputed != stored {
        return Err(ChainError::HashMismatch {
            seq,
            kind,
            stored,
            recomputed,
        });
    }
    if seq != expected_seq {
        return Err(ChainError::Removed {
            missing: expected_seq,
            next_seq: seq,
            next_kind: kind,
        });
    }
    if stored_prev != *prev {
        return Err(ChainError::BrokenLink {
            seq,
            kind,
            stored_prev,
            actual_prev: *prev,
        });
    }
    // A row whose hash checks out can still hold bytes no event decodes from
    // (written by something other than this ledger): name it, never panic.
    decode_raw(raw).map_err(|error| match error {
        LedgerError::Corrupt { seq, kind, reason } => ChainError::Unreadable { seq, kind, reason },
        other => ChainError::Ledger(other),
    })?;
    Ok(())
}

fn parse_digest(raw: &RawRow, column: &str, bytes: &[u8]) -> Result<Digest, ChainError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| ChainError::Unreadable {
            seq: raw.seq.max(0) as u64,
            kind: raw.kind_lossy(),
            reason: format!(
                "{column} `{}` is not a digest",
                String::from_utf8_lossy(bytes)
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::event::GateVerdict;
    use crate::ledger::test_support::*;

    /// Six events: measured, search, decision, search, promoted, refused.
    fn six_event_ledger() -> (tempfile::TempDir, Ledger) {
        let (dir, ledger) = temp_ledger();
        ledger.append(&measured("n", 0, "n/0/c1", 0.0)).unwrap();
        ledger.append_search(&opened("f1", "n", None)).unwrap();
        ledger
            .append(&decided(
                "n",
                0,
                "n/0/c1",
                0,
                GateVerdict::AcceptedHardPass,
                0.0,
                4.0,
            ))
            .unwrap();
        ledger.append_search(&closed("f1")).unwrap();
        ledger.append(&promoted("r1")).unwrap();
        ledger.append(&refused("r2")).unwrap();
        (dir, ledger)
    }

    fn broken(ledger: &Ledger) -> ChainError {
        ledger.verify().expect_err("tampering went unnoticed")
    }

    #[test]
    fn an_empty_ledger_verifies_with_the_zero_head() {
        let (_dir, ledger) = temp_ledger();
        assert_eq!(
            ledger.verify().unwrap(),
            VerifyReport {
                events: 0,
                head: Digest::ZERO
            }
        );
    }

    #[test]
    fn an_intact_ledger_verifies_to_its_last_hash() {
        let (_dir, ledger) = six_event_ledger();
        let last = ledger.append(&promoted("r3")).unwrap();
        assert_eq!(
            ledger.verify().unwrap(),
            VerifyReport {
                events: 7,
                head: last.hash
            }
        );
    }

    #[test]
    fn a_changed_payload_is_named_by_seq_and_kind() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "UPDATE events SET payload = replace(payload, 'accepted_hard_pass', 'accepted_descent') WHERE seq = 3",
        );
        let error = broken(&ledger);
        assert!(
            matches!(error, ChainError::HashMismatch { seq: 3, .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with("event 3 (gate_decision_recorded): payload changed: stored hash "),
            "{message}"
        );
        assert!(message.contains(" recomputed "), "{message}");
    }

    #[test]
    fn a_changed_kind_is_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(&ledger, "UPDATE events SET kind = 'refused' WHERE seq = 5");
        assert_eq!(broken(&ledger).seq(), Some(5));
    }

    #[test]
    fn a_removed_row_is_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(&ledger, "DELETE FROM events WHERE seq = 3");
        let error = broken(&ledger);
        assert!(
            matches!(
                error,
                ChainError::Removed {
                    missing: 3,
                    next_seq: 4,
                    ..
                }
            ),
            "{error}"
        );
        assert!(
            error.to_string().starts_with("event 3 was removed"),
            "{error}"
        );
    }

    #[test]
    fn a_removal_hidden_by_renumbering_is_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "DELETE FROM events WHERE seq = 3;
             UPDATE events SET seq = seq - 1 WHERE seq > 3;",
        );
        assert!(matches!(
            broken(&ledger),
            ChainError::HashMismatch { seq: 3, .. }
        ));
    }

    #[test]
    fn rows_cut_off_the_end_are_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(&ledger, "DELETE FROM events WHERE seq >= 5");
        let error = broken(&ledger);
        assert!(
            matches!(
                error,
                ChainError::Truncated {
                    first_missing: 5,
                    high_water_mark: 6
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn swapped_payloads_are_named_at_the_first_of_the_two() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "UPDATE events SET payload = CASE seq
                 WHEN 2 THEN (SELECT payload FROM events WHERE seq = 4)
                 ELSE (SELECT payload FROM events WHERE seq = 2) END
             WHERE seq IN (2, 4);",
        );
        let error = broken(&ledger);
        assert!(
            matches!(error, ChainError::HashMismatch { seq: 2, .. }),
            "{error}"
        );
        assert!(error.to_string().starts_with("event 2 (search)"), "{error}");
    }

    #[test]
    fn reordered_rows_are_named() {
        let (_dir, ledger) = six_event_ledger();
        // Swap rows 5 and 6 wholesale: every column but the seq moves.
        tamper(
            &ledger,
            "UPDATE events SET seq = 100 WHERE seq = 5;
             UPDATE events SET seq = 5 WHERE seq = 6;
             UPDATE events SET seq = 6 WHERE seq = 100;",
        );
        let error = broken(&ledger);
        assert!(
            matches!(error, ChainError::HashMismatch { seq: 5, .. }),
            "{error}"
        );
        assert!(
            error.to_string().starts_with("event 5 (refused)"),
            "{error}"
        );
    }

    #[test]
    fn a_duplicated_row_is_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "INSERT INTO events (seq, kind, payload, prev_hash, hash, recorded_at)
             SELECT 7, kind, payload, prev_hash, hash, recorded_at FROM events WHERE seq = 3;",
        );
        assert!(matches!(
            broken(&ledger),
            ChainError::HashMismatch { seq: 7, .. }
        ));
    }

    #[test]
    fn a_forged_link_is_named_even_when_the_row_is_resealed() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            &format!(
                "UPDATE events SET prev_hash = '{}' WHERE seq = 4",
                root("forged")
            ),
        );
        reseal(&ledger, 4);
        let error = broken(&ledger);
        assert!(
            matches!(error, ChainError::BrokenLink { seq: 4, .. }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .starts_with("event 4 (search): chain broken"),
            "{error}"
        );
    }

    #[test]
    fn torn_and_non_utf8_payloads_are_errors_naming_the_seq() {
        for (payload, expected) in [
            (&b"{\"kind\":\"promo"[..], "invalid promoted payload"),
            (&b"\xff\xfe{}"[..], "not UTF-8"),
            (&b""[..], "invalid promoted payload"),
        ] {
            let (_dir, ledger) = six_event_ledger();
            let seq = append_raw(&ledger, "promoted", payload);
            let error = broken(&ledger);
            assert_eq!(error.seq(), Some(seq), "{error}");
            assert!(
                matches!(&error, ChainError::Unreadable { kind, .. } if kind == "promoted"),
                "{error}"
            );
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn a_damaged_hash_column_is_named() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "UPDATE events SET hash = 'not a digest' WHERE seq = 2",
        );
        let error = broken(&ledger);
        assert!(
            matches!(error, ChainError::Unreadable { seq: 2, .. }),
            "{error}"
        );
    }

    /// Loses the last `n` events the way a removed WAL does: the rows and
    /// the AUTOINCREMENT mark go together, so the chain alone cannot tell.
    fn lose_tail(ledger: &Ledger, n: u64) {
        tamper(
            ledger,
            &format!(
                "DELETE FROM events WHERE seq > (SELECT MAX(seq) - {n} FROM events);
                 UPDATE sqlite_sequence SET seq = seq - {n} WHERE name = 'events';"
            ),
        );
    }

    #[test]
    fn a_lost_tail_is_caught_by_the_head_witness() {
        let (_dir, ledger) = six_event_ledger();
        lose_tail(&ledger, 2);
        let error = broken(&ledger);
        assert!(
            matches!(
                &error,
                ChainError::History(HistoryError::Lost { events: 4, recorded, kept_by: HeadSource::Witness(_) })
                    if recorded.seq == 6
            ),
            "{error}"
        );
        assert_eq!(error.seq(), Some(5));
        assert!(
            error.to_string().contains("events 5 to 6 are missing"),
            "{error}"
        );
    }

    #[test]
    fn a_resealed_head_diverges_from_the_witness() {
        let (_dir, ledger) = six_event_ledger();
        tamper(
            &ledger,
            "UPDATE events SET payload = replace(payload, 'r2', 'r9') WHERE seq = 6",
        );
        reseal(&ledger, 6);
        let error = broken(&ledger);
        assert!(
            matches!(&error, ChainError::History(HistoryError::Diverged { kind, .. }) if kind == "refused"),
            "{error}"
        );
        assert_eq!(error.seq(), Some(6));
    }

    #[test]
    fn an_expected_head_must_be_reached_with_its_hash() {
        let (_dir, ledger) = six_event_ledger();
        let kept = ledger.head().unwrap().unwrap();
        assert_eq!(
            ledger.verify_expecting(Some(kept)).unwrap().last(),
            Some(kept)
        );

        // A forger rewrites the last event and the witness: only the kept head tells.
        tamper(
            &ledger,
            "UPDATE events SET payload = replace(payload, 'r2', 'r9') WHERE seq = 6",
        );
        reseal(&ledger, 6);
        forge_witness(&ledger);
        ledger.verify().expect("the forged witness agrees");
        let error = ledger.verify_expecting(Some(kept)).unwrap_err();
        assert!(
            matches!(
                &error,
                ChainError::History(HistoryError::Diverged {
                    kept_by: HeadSource::Expected,
                    ..
                })
            ),
            "{error}"
        );
        assert!(error.to_string().contains("the expected head"), "{error}");

        let beyond = Head { seq: 9, ..kept };
        let error = ledger.verify_expecting(Some(beyond)).unwrap_err();
        assert!(
            matches!(
                &error,
                ChainError::History(HistoryError::Lost { events: 6, .. })
            ),
            "{error}"
        );
    }

    #[test]
    fn an_empty_ledger_with_earlier_state_is_not_intact() {
        let (dir, ledger) = temp_ledger();
        std::fs::write(dir.path().join(".trellis/index"), b"stat cache").unwrap();
        let error = broken(&ledger);
        assert!(
            matches!(&error, ChainError::History(HistoryError::EmptyWithHistory { evidence }) if evidence.ends_with("index")),
            "{error}"
        );
    }

    #[test]
    fn a_witness_that_is_not_a_head_is_named() {
        let (dir, ledger) = six_event_ledger();
        std::fs::write(dir.path().join(".trellis/head"), b"garbage").unwrap();
        let error = broken(&ledger);
        assert!(
            matches!(&error, ChainError::History(HistoryError::UnreadableWitness(m)) if m.contains("head")),
            "{error}"
        );
    }
}
