//! The SQLite store: an append-only, hash-chained table of events.
//!
//! One table, `events(seq, kind, payload, prev_hash, hash, recorded_at)`.
//! Row `n` links to row `n - 1` through `prev_hash`, and its `hash` covers
//! its own sequence number, kind, payload bytes and that link, so changing,
//! removing, duplicating or reordering a row breaks the chain at a place
//! [`Ledger::verify`](super::Ledger::verify) can name. `recorded_at` is a
//! wall-clock annotation for people and is deliberately outside the hash:
//! replay never depends on it.
//!
//! Durability: the database runs in WAL mode with `synchronous=NORMAL`, which
//! survives a process crash. Decisions, promotions and refusals are committed
//! with `synchronous=FULL`, so the WAL is fsync'd before the append returns
//! and they survive a power cut too.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::event::{DecodedRow, LedgerEvent, SEARCH_KIND, SearchEnvelopeV1, SearchEvent};
use super::witness::{self, Head};
use crate::digest::{CanonicalHasher, Digest};
use crate::statedir::{DatabaseError, Dir, FileId, Kind, Schema, StateError};

/// File name of the ledger inside `.trellis/`.
pub const LEDGER_FILE: &str = "ledger.db";

/// Domain tag of the row hash; changing the row encoding means changing this.
const EVENT_HASH_DOMAIN: &str = "trellis.ledger.event.v1";

/// The ledger's table and the triggers that keep it append-only; `version`
/// is its `PRAGMA user_version`.
const SCHEMA: Schema = Schema {
    version: 1,
    sql: "
CREATE TABLE IF NOT EXISTS events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS events_are_never_updated BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the trellis ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_are_never_deleted BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the trellis ledger is append-only'); END;
",
};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("ledger {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "ledger {} is no longer the file this run opened (was `.trellis` deleted or replaced?); refusing to continue without a record",
        path.display()
    )]
    Replaced { path: PathBuf },
    /// The database would not open (a link, SQLite, WAL, a newer schema);
    /// names the file.
    #[error("ledger {0}")]
    Database(#[from] DatabaseError),
    /// The event would not read back (e.g. a NaN energy, which JSON cannot hold).
    #[error("refusing to record a {kind} event that would not read back: {reason}")]
    Unencodable { kind: String, reason: String },
    /// A stored row that cannot be read as an event.
    #[error("event {seq} ({kind}): {reason}")]
    Corrupt {
        seq: u64,
        kind: String,
        reason: String,
    },
}

/// Where an appended event landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef {
    pub seq: u64,
    pub hash: Digest,
}

/// One stored event, decoded, with its place in the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub seq: u64,
    pub kind: String,
    pub prev_hash: Digest,
    pub hash: Digest,
    /// UTC, RFC 3339 with milliseconds; not covered by the hash.
    pub recorded_at: String,
    pub event: DecodedRow,
}

impl std::fmt::Display for Row {
    /// One line per event, for `trellis ledger replay` and `verify`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>5}  {}", self.seq, self.event)
    }
}

/// The workspace ledger, `<workspace>/.trellis/ledger.db`.
///
/// Cheap to share: appends from several threads serialize on an internal
/// lock, and appends from several processes on SQLite's write lock.
pub struct Ledger {
    path: PathBuf,
    /// The database file's identity when it was opened.
    id: FileId,
    state: Dir,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish()
    }
}

/// A row as stored, before any interpretation; shared with verification,
/// which must look at exactly the bytes that were hashed.
pub(super) struct RawRow {
    pub seq: i64,
    pub kind: Vec<u8>,
    pub payload: Vec<u8>,
    pub prev_hash: Vec<u8>,
    pub hash: Vec<u8>,
    pub recorded_at: Vec<u8>,
}

impl RawRow {
    /// The kind for messages, readable even when the column is damaged.
    pub fn kind_lossy(&self) -> String {
        String::from_utf8_lossy(&self.kind).into_owned()
    }
}

/// The chained hash of one row.
pub(super) fn event_hash(seq: u64, kind: &[u8], payload: &[u8], prev_hash: &Digest) -> Digest {
    CanonicalHasher::new(EVENT_HASH_DOMAIN)
        .u64(seq)
        .bytes(kind)
        .bytes(payload)
        .digest(prev_hash)
        .finish()
}

impl Ledger {
    /// Opens (creating if needed) the ledger in `trellis_dir`, the
    /// workspace's `.trellis/` directory, which is made to ignore itself.
    pub fn open(trellis_dir: &Path) -> Result<Ledger, LedgerError> {
        let state = Dir::open_last(trellis_dir, true)?;
        state.create_if_missing(".gitignore", b"*\n")?;
        Ledger::open_in(state)
    }

    /// Opens (creating if needed) the ledger in the checked state directory
    /// `state`, refusing a link at the database or its journal files
    /// ([`Dir::open_database`]) and at the head witness, which every append
    /// rewrites and verification reads.
    pub fn open_in(state: Dir) -> Result<Ledger, LedgerError> {
        state.refuse_link(witness::WITNESS_FILE)?;
        let path = state.join(LEDGER_FILE);
        let conn = state.open_database(LEDGER_FILE, &SCHEMA)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|source| LedgerError::Sqlite {
                path: path.clone(),
                source,
            })?;
        let Some(Kind::File { id, .. }) = state.kind(LEDGER_FILE)? else {
            return Err(LedgerError::Replaced { path });
        };
        Ok(Ledger {
            path,
            id,
            state,
            conn: Mutex::new(conn),
        })
    }

    /// Refuses when the database at `.trellis/ledger.db` is no longer the
    /// one this ledger has open (the directory was deleted or replaced):
    /// appends would land in an unlinked file and vanish.
    pub fn check_in_place(&self) -> Result<(), LedgerError> {
        let replaced = || LedgerError::Replaced {
            path: self.path.clone(),
        };
        if !self.state.still_at_path() {
            return Err(replaced());
        }
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta)
                if meta.is_file() && meta.dev() == self.id.dev && meta.ino() == self.id.ino =>
            {
                Ok(())
            }
            _ => Err(replaced()),
        }
    }

    /// The checked `.trellis/` directory this ledger lives in.
    pub fn state_dir(&self) -> &Dir {
        &self.state
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last event's seq and hash; `None` for an empty ledger.
    pub fn head(&self) -> Result<Option<Head>, LedgerError> {
        let conn = self.lock();
        let last: Option<(i64, String, String)> = conn
            .query_row(
                "SELECT seq, kind, hash FROM events ORDER BY seq DESC LIMIT 1",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        last.map(|(seq, kind, hash)| {
            let corrupt = |reason: String| LedgerError::Corrupt {
                seq: seq.max(0) as u64,
                kind: kind.clone(),
                reason,
            };
            Ok(Head {
                seq: u64::try_from(seq).map_err(|_| corrupt(format!("negative seq {seq}")))?,
                hash: hash.parse().map_err(|e| corrupt(format!("{e}")))?,
            })
        })
        .transpose()
    }

    /// Appends a mechanism event; decisions, promotions and refusals are
    /// fsync'd before this returns.
    pub fn append(&self, event: &LedgerEvent) -> Result<EventRef, LedgerError> {
        let payload = serde_json::to_string(event).map_err(|e| LedgerError::Unencodable {
            kind: event.kind().to_owned(),
            reason: e.to_string(),
        })?;
        self.append_payload(event.kind(), &payload, event.is_decision())
    }

    /// Appends a runtime search event, wrapped in its version-1 envelope.
    pub fn append_search(&self, event: &SearchEvent) -> Result<EventRef, LedgerError> {
        let envelope = SearchEnvelopeV1::new(event.clone());
        let payload = serde_json::to_string(&envelope).map_err(|e| LedgerError::Unencodable {
            kind: event.name().to_owned(),
            reason: e.to_string(),
        })?;
        self.append_payload(SEARCH_KIND, &payload, false)
    }

    fn append_payload(
        &self,
        kind: &str,
        payload: &str,
        durable: bool,
    ) -> Result<EventRef, LedgerError> {
        // Never write a row that replay could not read back.
        DecodedRow::decode(kind, payload).map_err(|reason| LedgerError::Unencodable {
            kind: kind.to_owned(),
            reason,
        })?;

        let mut conn = self.lock();
        let sync = if durable { "FULL" } else { "NORMAL" };
        conn.pragma_update(None, "synchronous", sync)
            .map_err(|e| self.sqlite(e))?;
        // IMMEDIATE takes the write lock before we read the head, so two
        // writers can never chain onto the same predecessor.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        let head: Option<(i64, String, String)> = tx
            .query_row(
                "SELECT seq, kind, hash FROM events ORDER BY seq DESC LIMIT 1",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        let (seq, prev_hash) = match head {
            None => (1, Digest::ZERO),
            Some((last, last_kind, hash)) => {
                let corrupt = |reason: String| LedgerError::Corrupt {
                    seq: last.max(0) as u64,
                    kind: last_kind.clone(),
                    reason,
                };
                let last =
                    u64::try_from(last).map_err(|_| corrupt(format!("negative seq {last}")))?;
                let prev = hash
                    .parse()
                    .map_err(|e| corrupt(format!("cannot chain onto it: {e}")))?;
                (last + 1, prev)
            }
        };
        let hash = event_hash(seq, kind.as_bytes(), payload.as_bytes(), &prev_hash);
        tx.execute(
            "INSERT INTO events (seq, kind, payload, prev_hash, hash, recorded_at)
             VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            params![seq as i64, kind, payload, prev_hash.to_hex(), hash.to_hex()],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        // The event is committed; a witness that cannot be written only
        // weakens later verification, so it is said, not failed on.
        if let Err(e) = witness::record(&self.state, Head { seq, hash }) {
            tracing::warn!(
                "ledger {}: cannot leave the head witness: {e}",
                self.path.display()
            );
        }
        Ok(EventRef { seq, hash })
    }

    /// Every event, decoded, in sequence order. A row that cannot be read is
    /// an error naming its seq; an unknown search envelope version is not
    /// (it decodes to [`DecodedRow::UnknownVersion`] for display).
    pub fn rows(&self) -> Result<Vec<Row>, LedgerError> {
        let mut rows = Vec::new();
        self.scan(|raw| {
            rows.push(decode_raw(&raw)?);
            Ok::<(), LedgerError>(())
        })?;
        Ok(rows)
    }

    /// Visits every stored row in sequence order without interpreting it.
    pub(super) fn scan<E: From<LedgerError>>(
        &self,
        mut visit: impl FnMut(RawRow) -> Result<(), E>,
    ) -> Result<(), E> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT seq, kind, payload, prev_hash, hash, recorded_at
                 FROM events ORDER BY seq",
            )
            .map_err(|e| self.sqlite(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sqlite(e))?;
        while let Some(row) = rows.next().map_err(|e| self.sqlite(e))? {
            let column = |index| -> Result<Vec<u8>, LedgerError> {
                let value = row.get_ref(index).map_err(|e| self.sqlite(e))?;
                Ok(column_bytes(value))
            };
            let raw = RawRow {
                seq: row.get(0).map_err(|e| self.sqlite(e))?,
                kind: column(1)?,
                payload: column(2)?,
                prev_hash: column(3)?,
                hash: column(4)?,
                recorded_at: column(5)?,
            };
            visit(raw)?;
        }
        Ok(())
    }

    /// The highest seq this database has ever assigned, including rows that
    /// have since been removed (SQLite's AUTOINCREMENT high-water mark).
    pub(super) fn high_water_mark(&self) -> Result<u64, LedgerError> {
        let conn = self.lock();
        let mark: Option<i64> = conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        Ok(mark.map_or(0, |m| m.max(0) as u64))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock dropped its transaction, which rolled
        // back: the connection is still consistent, so poisoning is harmless.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn sqlite(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

/// A column's bytes as stored, whatever type SQLite holds them as.
fn column_bytes(value: ValueRef<'_>) -> Vec<u8> {
    match value {
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(r) => r.to_string().into_bytes(),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes.to_vec(),
    }
}

/// Interprets a stored row; every failure names the row.
pub(super) fn decode_raw(raw: &RawRow) -> Result<Row, LedgerError> {
    let kind_lossy = raw.kind_lossy();
    let corrupt = |reason: String| LedgerError::Corrupt {
        seq: raw.seq.max(0) as u64,
        kind: kind_lossy.clone(),
        reason,
    };
    let seq = u64::try_from(raw.seq).map_err(|_| corrupt(format!("negative seq {}", raw.seq)))?;
    let text = |column: &str, bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| corrupt(format!("{column} is not UTF-8: {e}")))
    };
    let digest = |column: &str, bytes: &[u8]| -> Result<Digest, LedgerError> {
        text(column, bytes)?
            .parse()
            .map_err(|e| corrupt(format!("{column}: {e}")))
    };
    let kind = text("kind", &raw.kind)?;
    let payload = text("payload", &raw.payload)?;
    let event = DecodedRow::decode(&kind, &payload).map_err(corrupt)?;
    Ok(Row {
        seq,
        prev_hash: digest("prev_hash", &raw.prev_hash)?,
        hash: digest("hash", &raw.hash)?,
        recorded_at: text("recorded_at", &raw.recorded_at)?,
        kind,
        event,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ledger::event::{GateVerdict, SearchEncoding};
    use crate::ledger::test_support::*;
    use std::fs;

    #[test]
    fn open_creates_a_self_ignoring_dir_and_a_wal_database() {
        let dir = tempfile::tempdir().unwrap();
        let trellis = dir.path().join(".trellis");
        let ledger = Ledger::open(&trellis).unwrap();
        assert_eq!(
            fs::read_to_string(trellis.join(".gitignore")).unwrap(),
            "*\n"
        );
        assert_eq!(ledger.path(), trellis.join(LEDGER_FILE));
        let conn = Connection::open(ledger.path()).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn appends_are_chained_from_zero() {
        let (_dir, ledger) = temp_ledger();
        let first = ledger.append(&measured("n", 0, "n/0/c1", 3.0)).unwrap();
        let second = ledger.append_search(&abandoned("f1", "b1")).unwrap();
        let third = ledger
            .append(&decided(
                "n",
                0,
                "n/0/c1",
                0,
                GateVerdict::AcceptedDescent,
                3.0,
                5.0,
            ))
            .unwrap();
        assert_eq!((first.seq, second.seq, third.seq), (1, 2, 3));

        let rows = ledger.rows().unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].prev_hash, Digest::ZERO);
        assert_eq!(rows[1].prev_hash, first.hash);
        assert_eq!(rows[2].prev_hash, second.hash);
        assert_eq!(rows[2].hash, third.hash);
        assert_eq!(rows[1].kind, SEARCH_KIND);
        assert_eq!(
            rows[1].event,
            DecodedRow::Search {
                event: abandoned("f1", "b1"),
                encoding: SearchEncoding::EnvelopeV1
            }
        );
        assert_eq!(
            rows[0].event,
            DecodedRow::Ledger(measured("n", 0, "n/0/c1", 3.0))
        );
        assert!(
            rows[0].recorded_at.ends_with('Z'),
            "{}",
            rows[0].recorded_at
        );
    }

    #[test]
    fn reopening_continues_the_chain() {
        let (dir, ledger) = temp_ledger();
        let first = ledger.append(&promoted("r1")).unwrap();
        drop(ledger);
        let ledger = Ledger::open(&dir.path().join(".trellis")).unwrap();
        let second = ledger.append(&refused("r2")).unwrap();
        assert_eq!(second.seq, 2);
        assert_eq!(ledger.rows().unwrap()[1].prev_hash, first.hash);
        assert_eq!(ledger.verify().unwrap().head, second.hash);
    }

    #[test]
    fn an_event_that_would_not_read_back_is_refused_and_nothing_is_written() {
        let (_dir, ledger) = temp_ledger();
        let error = ledger
            .append(&measured("n", 0, "n/0/c1", f64::NAN))
            .unwrap_err();
        assert!(
            matches!(&error, LedgerError::Unencodable { kind, .. } if kind == "candidate_measured"),
            "{error}"
        );
        assert!(ledger.rows().unwrap().is_empty());
    }

    #[test]
    fn the_table_refuses_updates_and_deletes() {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&promoted("r1")).unwrap();
        let conn = Connection::open(ledger.path()).unwrap();
        let update = conn.execute("UPDATE events SET payload = '{}' WHERE seq = 1", []);
        assert!(update.unwrap_err().to_string().contains("append-only"));
        let delete = conn.execute("DELETE FROM events", []);
        assert!(delete.unwrap_err().to_string().contains("append-only"));
    }

    #[test]
    fn concurrent_appends_from_threads_and_handles_form_one_chain() {
        let (dir, ledger) = temp_ledger();
        let shared = Arc::new(ledger);
        let second_handle = Arc::new(Ledger::open(&dir.path().join(".trellis")).unwrap());
        let writers: Vec<_> = (0..4)
            .map(|thread| {
                let ledger = if thread % 2 == 0 {
                    Arc::clone(&shared)
                } else {
                    Arc::clone(&second_handle)
                };
                std::thread::spawn(move || {
                    for i in 0..15 {
                        ledger
                            .append_search(&usage(&format!("f{thread}"), i))
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let report = shared.verify().unwrap();
        assert_eq!(report.events, 60);
    }

    #[test]
    fn ledger_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Ledger>();
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let trellis = dir.path().join(".trellis");
        fs::create_dir_all(&trellis).unwrap();
        fs::write(trellis.join(LEDGER_FILE), vec![0x5a; 8192]).unwrap();
        let error = Ledger::open(&trellis).unwrap_err();
        assert!(
            matches!(error, LedgerError::Database(DatabaseError::Sqlite { .. })),
            "{error}"
        );
        assert!(error.to_string().contains("ledger.db"), "{error}");
    }

    #[test]
    fn a_newer_schema_is_refused_by_name() {
        let (dir, ledger) = temp_ledger();
        Connection::open(ledger.path())
            .unwrap()
            .pragma_update(None, "user_version", 2)
            .unwrap();
        drop(ledger);
        let error = match Ledger::open(&dir.path().join(".trellis")) {
            Err(error) => error,
            Ok(_) => panic!("opened a ledger with a newer schema"),
        };
        assert!(matches!(
            error,
            LedgerError::Database(DatabaseError::NewerSchema { found: 2, .. })
        ));
        assert!(error.to_string().contains("ledger.db"), "{error}");
    }

    #[test]
    fn appending_onto_a_damaged_head_is_refused_naming_it() {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&promoted("r1")).unwrap();
        tamper(&ledger, "UPDATE events SET hash = 'garbage' WHERE seq = 1");
        let error = ledger.append(&refused("r2")).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("event 1 (promoted): cannot chain onto it"),
            "{error}"
        );
        assert!(matches!(
            ledger.rows().unwrap_err(),
            LedgerError::Corrupt { seq: 1, .. }
        ));
    }

    #[test]
    fn rows_name_a_row_whose_payload_is_not_utf8() {
        let (_dir, ledger) = temp_ledger();
        ledger.append(&promoted("r1")).unwrap();
        append_raw(&ledger, "promoted", b"{\"kind\":\"promoted\xff");
        let error = ledger.rows().unwrap_err();
        assert!(
            matches!(&error, LedgerError::Corrupt { seq: 2, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("not UTF-8"), "{error}");
    }

    #[test]
    fn a_linked_database_or_journal_file_is_refused_and_left_untouched() {
        for name in [LEDGER_FILE, "ledger.db-wal", "ledger.db-shm"] {
            let dir = tempfile::tempdir().unwrap();
            let other = dir.path().join("other-app.sqlite");
            fs::write(&other, b"another application's data").unwrap();
            let trellis = dir.path().join(".trellis");
            fs::create_dir(&trellis).unwrap();
            std::os::unix::fs::symlink(&other, trellis.join(name)).unwrap();
            let error = Ledger::open(&trellis).unwrap_err();
            assert!(
                matches!(&error, LedgerError::Database(DatabaseError::State(StateError::Symlink(p))) if p.ends_with(name)),
                "{name}: {error}"
            );
            assert_eq!(fs::read(&other).unwrap(), b"another application's data");
        }
    }

    #[test]
    fn a_deleted_or_replaced_state_dir_is_detected() {
        let (dir, ledger) = temp_ledger();
        ledger.check_in_place().unwrap();
        let trellis = dir.path().join(".trellis");
        fs::remove_dir_all(&trellis).unwrap();
        assert!(matches!(
            ledger.check_in_place(),
            Err(LedgerError::Replaced { .. })
        ));
        // A fresh `.trellis` with a fresh database is still not this ledger.
        let _fresh = Ledger::open(&trellis).unwrap();
        let error = ledger.check_in_place().unwrap_err();
        assert!(error.to_string().contains("no longer the file"), "{error}");
    }
}
