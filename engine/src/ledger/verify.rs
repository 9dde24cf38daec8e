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
//! A chain rewritten wholesale (every later hash recomputed) verifies; detect
//! that by comparing [`VerifyReport::head`] against a head kept elsewhere.

use super::store::{Ledger, LedgerError, RawRow, decode_raw, event_hash};
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
    Ledger(#[from] LedgerError),
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
            ChainError::Ledger(LedgerError::Corrupt { seq, .. }) => Some(*seq),
            ChainError::Ledger(_) => None,
        }
    }
}

impl Ledger {
    /// Verifies the whole chain; the error names the first broken event.
    pub fn verify(&self) -> Result<VerifyReport, ChainError> {
        let mut report = VerifyReport {
            events: 0,
            head: Digest::ZERO,
        };
        self.scan(|raw| {
            check_row(&raw, report.events + 1, &report.head)?;
            report.events += 1;
            report.head = parse_digest(&raw, "hash", &raw.hash)?;
            Ok::<(), ChainError>(())
        })?;
        let high_water_mark = self.high_water_mark()?;
        if high_water_mark > report.events {
            return Err(ChainError::Truncated {
                first_missing: report.events + 1,
                high_water_mark,
            });
        }
        Ok(report)
    }
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
