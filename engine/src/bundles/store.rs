//! The durable store: `.trellis/bundles.db` (SQLite, WAL), beside the
//! ledger whose sessions name its versions.
//!
//! Content is addressed by its checksum (one `contents` row per distinct
//! bundle), versions are rows naming a checksum, and the id's latest and
//! default are one row per id. A write is one immediate transaction: the
//! base is re-checked inside it, so two writers on one base cannot both
//! win, and a failure leaves nothing behind. Every read of content
//! re-hashes it against its address. This module never compiles (a draft
//! arrives compiled by its caller), never consults the ledger (the engine
//! passes what sessions name) and never rewrites a version once stored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::draft::{Draft, MAX_NOTE_BYTES, checksum_of};
use super::error::BundleError;
use super::refs::BundleRef;
use super::retention::{Held, RETAIN_LATEST, removable};
use crate::statedir::{Dir, Schema};

/// The store's file in `.trellis/`.
pub const STORE_FILE: &str = "bundles.db";

/// At most this many bundle ids in one store.
pub const MAX_IDS: usize = 256;

/// The store's tables; `version` is its `PRAGMA user_version`.
const SCHEMA: Schema = Schema {
    version: 1,
    sql: "
CREATE TABLE IF NOT EXISTS contents (
    checksum TEXT PRIMARY KEY,
    body     BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS bundles (
    id              TEXT PRIMARY KEY,
    latest          INTEGER NOT NULL,
    default_version INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    id         TEXT NOT NULL,
    version    INTEGER NOT NULL,
    checksum   TEXT NOT NULL REFERENCES contents(checksum),
    parent     INTEGER,
    reason     TEXT NOT NULL,
    origin     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    kept       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (id, version)
);
CREATE TABLE IF NOT EXISTS defaults (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    id       TEXT NOT NULL,
    version  INTEGER NOT NULL,
    previous INTEGER,
    reason   TEXT NOT NULL,
    at       INTEGER NOT NULL
);
",
};

/// What a write says besides its content.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// The version this content was based on; required once the id exists.
    pub base: Option<u32>,
    /// Write even when `base` is not the latest version.
    pub force: bool,
    /// Why (shown in history); bounded.
    pub reason: String,
    /// Retain this version past the latest-versions window.
    pub keep: bool,
    /// Where the content came from, e.g. `file:/path/to/dir`.
    pub origin: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteResult {
    pub id: String,
    pub version: u32,
    pub checksum: String,
    pub parent: Option<u32>,
    pub default_version: u32,
    pub sections: Vec<String>,
}

/// One retained version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VersionRow {
    pub id: String,
    pub version: u32,
    pub checksum: String,
    pub parent: Option<u32>,
    pub reason: String,
    pub origin: String,
    pub created_at: i64,
    pub kept: bool,
    pub is_default: bool,
}

/// One row per id: what a bare id resolves to, and how much is retained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleSummary {
    pub id: String,
    pub default_version: u32,
    pub latest_version: u32,
    pub versions_count: u32,
    /// The default version's checksum.
    pub checksum: String,
    pub description: String,
    pub sections: Vec<String>,
    pub requires: super::Requires,
    pub origin: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One change of an id's default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DefaultChange {
    pub id: String,
    pub version: u32,
    pub previous: Option<u32>,
    pub reason: String,
    pub at: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    pub dry_run: bool,
    /// `id@N` of every version removed (or, dry, that would be).
    pub removed: Vec<String>,
    /// How many retained versions only a ledger session's naming kept.
    pub kept_for_sessions: usize,
}

pub struct BundleStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

impl BundleStore {
    /// Opens (creating if needed) the store in the checked state directory.
    /// As for the ledger, a link at the database or its journal files is
    /// refused ([`Dir::open_database`]).
    pub(crate) fn open_in(state: &Dir) -> Result<BundleStore, BundleError> {
        let conn = state.open_database(STORE_FILE, &SCHEMA)?;
        Ok(BundleStore {
            path: state.join(STORE_FILE),
            conn: Mutex::new(conn),
        })
    }

    /// Opens the store in the workspace's `.trellis/` directory, for a
    /// reader that opens no engine (`trellis ledger replay`).
    pub fn open(trellis_dir: &Path) -> Result<BundleStore, BundleError> {
        BundleStore::open_in(&Dir::open_last(trellis_dir, false)?)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().expect("bundle store lock")
    }

    fn sqlite(&self, source: rusqlite::Error) -> BundleError {
        BundleError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Compiles `draft` as `id` and stores it as the id's next version.
    /// A compile failure, a bound, a stale base: nothing is stored. The
    /// first version of an id becomes its default; later writes never move
    /// the default ([`BundleStore::set_default`] does). Front ends write
    /// through `Engine::write_bundle`, which also applies retention.
    pub(crate) fn write(
        &self,
        id: &str,
        draft: &Draft,
        options: &WriteOptions,
    ) -> Result<WriteResult, BundleError> {
        let compiled = draft.compile(id)?;
        if options.reason.len() > MAX_NOTE_BYTES {
            return Err(BundleError::Bound {
                id: id.to_owned(),
                what: "the reason (bytes)",
                found: options.reason.len(),
                limit: MAX_NOTE_BYTES,
            });
        }
        let body = draft.encode();
        let checksum = checksum_of(&body);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        let current: Option<(u32, u32)> = tx
            .query_row(
                "SELECT latest, default_version FROM bundles WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        let at = now();
        let (version, default_version) = match current {
            None => {
                if let Some(base) = options.base {
                    return Err(BundleError::UnknownVersion {
                        id: id.to_owned(),
                        version: base,
                        retained: "none: the id is new, write it without --base".to_owned(),
                    });
                }
                let ids: i64 = tx
                    .query_row("SELECT COUNT(*) FROM bundles", [], |row| row.get(0))
                    .map_err(|e| self.sqlite(e))?;
                if ids as usize >= MAX_IDS {
                    return Err(BundleError::Bound {
                        id: id.to_owned(),
                        what: "the number of bundle ids",
                        found: ids as usize + 1,
                        limit: MAX_IDS,
                    });
                }
                tx.execute(
                    "INSERT INTO bundles (id, latest, default_version, created_at) \
                     VALUES (?1, 1, 1, ?2)",
                    params![id, at],
                )
                .map_err(|e| self.sqlite(e))?;
                tx.execute(
                    "INSERT INTO defaults (id, version, previous, reason, at) \
                     VALUES (?1, 1, NULL, 'first version', ?2)",
                    params![id, at],
                )
                .map_err(|e| self.sqlite(e))?;
                (1, 1)
            }
            Some((latest, default_version)) => {
                if options.base != Some(latest) && !options.force {
                    return Err(BundleError::StaleBase {
                        id: id.to_owned(),
                        base: options.base,
                        latest,
                    });
                }
                tx.execute(
                    "UPDATE bundles SET latest = ?2 WHERE id = ?1",
                    params![id, latest + 1],
                )
                .map_err(|e| self.sqlite(e))?;
                (latest + 1, default_version)
            }
        };
        tx.execute(
            "INSERT OR IGNORE INTO contents (checksum, body) VALUES (?1, ?2)",
            params![checksum, body],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.execute(
            "INSERT INTO versions (id, version, checksum, parent, reason, origin, created_at, kept) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                version,
                checksum,
                options.base,
                options.reason,
                options.origin,
                at,
                options.keep
            ],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(WriteResult {
            id: id.to_owned(),
            version,
            checksum,
            parent: options.base,
            default_version,
            sections: compiled
                .sections
                .iter()
                .map(|(schema, _)| schema.id.to_owned())
                .collect(),
        })
    }

    /// Every id, ordered by id, with what its bare id resolves to.
    pub fn list(&self) -> Result<Vec<BundleSummary>, BundleError> {
        let ids: Vec<(String, u32, u32, i64)> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT id, default_version, latest, created_at FROM bundles ORDER BY id")
                .map_err(|e| self.sqlite(e))?;
            stmt.query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .and_then(|rows| rows.collect::<Result<_, _>>())
            .map_err(|e| self.sqlite(e))?
        };
        let mut out = Vec::with_capacity(ids.len());
        for (id, default_version, latest_version, created_at) in ids {
            let versions = self.versions(&id)?;
            let default = versions.iter().find(|v| v.is_default).ok_or_else(|| {
                BundleError::UnknownVersion {
                    id: id.clone(),
                    version: default_version,
                    retained: retained(&versions),
                }
            })?;
            let draft = self.content(&id, default)?;
            out.push(BundleSummary {
                default_version,
                latest_version,
                versions_count: versions.len() as u32,
                checksum: default.checksum.clone(),
                description: draft.manifest.description.clone(),
                sections: section_ids(&draft),
                requires: draft.manifest.requires.clone(),
                origin: default.origin.clone(),
                created_at,
                updated_at: versions
                    .iter()
                    .map(|v| v.created_at)
                    .max()
                    .unwrap_or(created_at),
                id,
            });
        }
        Ok(out)
    }

    /// The retained versions of `id`, oldest first.
    pub fn versions(&self, id: &str) -> Result<Vec<VersionRow>, BundleError> {
        let conn = self.conn();
        let default: u32 = conn
            .query_row(
                "SELECT default_version FROM bundles WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?
            .ok_or_else(|| BundleError::UnknownId(id.to_owned()))?;
        let mut stmt = conn
            .prepare(
                "SELECT version, checksum, parent, reason, origin, created_at, kept \
                 FROM versions WHERE id = ?1 ORDER BY version",
            )
            .map_err(|e| self.sqlite(e))?;
        stmt.query_map([id], |row| {
            let version: u32 = row.get(0)?;
            Ok(VersionRow {
                id: id.to_owned(),
                version,
                checksum: row.get(1)?,
                parent: row.get(2)?,
                reason: row.get(3)?,
                origin: row.get(4)?,
                created_at: row.get(5)?,
                kept: row.get(6)?,
                is_default: version == default,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sqlite(e))
    }

    /// The version a ref names, and its content, checked against its address.
    pub fn resolve(&self, r: &BundleRef) -> Result<(VersionRow, Draft), BundleError> {
        let versions = self.versions(r.id())?;
        let row = match r {
            BundleRef::Default(_) => versions.iter().find(|v| v.is_default),
            BundleRef::Version(_, n) => versions.iter().find(|v| v.version == *n),
            BundleRef::Checksum(_, sum) => versions.iter().rev().find(|v| &v.checksum == sum),
        };
        let Some(row) = row else {
            return Err(match r {
                BundleRef::Checksum(id, checksum) => {
                    let default = versions.iter().find(|v| v.is_default);
                    BundleError::ChecksumMismatch {
                        id: id.clone(),
                        checksum: checksum.clone(),
                        default: default.map_or(0, |d| d.version),
                        default_checksum: default.map_or_else(String::new, |d| d.checksum.clone()),
                    }
                }
                _ => BundleError::UnknownVersion {
                    id: r.id().to_owned(),
                    version: match r {
                        BundleRef::Version(_, n) => *n,
                        _ => 0,
                    },
                    retained: retained(&versions),
                },
            });
        };
        let draft = self.content(r.id(), row)?;
        Ok((row.clone(), draft))
    }

    /// The content of a version, re-hashed: bytes that no longer hash to
    /// the version's checksum are refused, never used.
    fn content(&self, id: &str, row: &VersionRow) -> Result<Draft, BundleError> {
        let body: Vec<u8> = self
            .conn()
            .query_row(
                "SELECT body FROM contents WHERE checksum = ?1",
                [&row.checksum],
                |r| r.get(0),
            )
            .map_err(|e| self.sqlite(e))?;
        let found = checksum_of(&body);
        let corrupt = |found: String| BundleError::Corrupt {
            id: id.to_owned(),
            version: row.version,
            expected: row.checksum.clone(),
            found,
            path: self.path.clone(),
        };
        if found != row.checksum {
            return Err(corrupt(found));
        }
        Draft::decode(&body).map_err(|e| corrupt(format!("undecodable content ({e})")))
    }

    /// Makes `version` the default of `id`, and records the change.
    pub fn set_default(
        &self,
        id: &str,
        version: u32,
        reason: &str,
    ) -> Result<DefaultChange, BundleError> {
        if reason.len() > MAX_NOTE_BYTES {
            return Err(BundleError::Bound {
                id: id.to_owned(),
                what: "the reason (bytes)",
                found: reason.len(),
                limit: MAX_NOTE_BYTES,
            });
        }
        let versions = self.versions(id)?;
        let Some(row) = versions.iter().find(|v| v.version == version) else {
            return Err(BundleError::UnknownVersion {
                id: id.to_owned(),
                version,
                retained: retained(&versions),
            });
        };
        // A default must be usable: its content is checked before it is promoted.
        self.content(id, row)?;
        let previous = versions.iter().find(|v| v.is_default).map(|v| v.version);
        let at = now();
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        tx.execute(
            "UPDATE bundles SET default_version = ?2 WHERE id = ?1",
            params![id, version],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.execute(
            "INSERT INTO defaults (id, version, previous, reason, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, version, previous, reason, at],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(DefaultChange {
            id: id.to_owned(),
            version,
            previous,
            reason: reason.to_owned(),
            at,
        })
    }

    /// Every change of `id`'s default, oldest first.
    pub fn history(&self, id: &str) -> Result<Vec<DefaultChange>, BundleError> {
        self.versions(id)?;
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT version, previous, reason, at FROM defaults WHERE id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.sqlite(e))?;
        stmt.query_map([id], |row| {
            Ok(DefaultChange {
                id: id.to_owned(),
                version: row.get(0)?,
                previous: row.get(1)?,
                reason: row.get(2)?,
                at: row.get(3)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sqlite(e))
    }

    /// Removes the versions retention allows (see [`super::retention`]),
    /// never one in `named` (what ledger sessions name, by id), and then
    /// any content no version names. `only` limits it to one id.
    pub(crate) fn prune(
        &self,
        named: &BTreeMap<String, BTreeSet<u32>>,
        only: Option<&str>,
        dry_run: bool,
    ) -> Result<PruneReport, BundleError> {
        let ids: Vec<String> = match only {
            Some(id) => {
                self.versions(id)?;
                vec![id.to_owned()]
            }
            None => self.list()?.into_iter().map(|s| s.id).collect(),
        };
        let none = BTreeSet::new();
        let mut report = PruneReport {
            dry_run,
            ..PruneReport::default()
        };
        let mut doomed = Vec::new();
        for id in ids {
            let versions = self.versions(&id)?;
            let held: Vec<Held> = versions
                .iter()
                .map(|v| Held {
                    version: v.version,
                    kept: v.kept,
                })
                .collect();
            let default = versions
                .iter()
                .find(|v| v.is_default)
                .map_or(0, |v| v.version);
            let names = named.get(&id).unwrap_or(&none);
            let gone = removable(&held, default, names, RETAIN_LATEST);
            let without_names = removable(&held, default, &none, RETAIN_LATEST);
            report.kept_for_sessions += without_names.len() - gone.len();
            for version in gone {
                report.removed.push(format!("{id}@{version}"));
                doomed.push((id.clone(), version));
            }
        }
        if dry_run || doomed.is_empty() {
            return Ok(report);
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        for (id, version) in &doomed {
            tx.execute(
                "DELETE FROM versions WHERE id = ?1 AND version = ?2",
                params![id, version],
            )
            .map_err(|e| self.sqlite(e))?;
        }
        tx.execute(
            "DELETE FROM contents WHERE checksum NOT IN (SELECT checksum FROM versions)",
            [],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(report)
    }
}

fn retained(versions: &[VersionRow]) -> String {
    if versions.is_empty() {
        return "none".to_owned();
    }
    versions
        .iter()
        .map(|v| format!("v{}", v.version))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The section ids a draft replaces (from the front matter; the draft was
/// compiled when it was written).
fn section_ids(draft: &Draft) -> Vec<String> {
    draft
        .sections()
        .filter_map(|(_, text)| {
            text.lines()
                .find_map(|l| l.strip_prefix("id:").map(|id| id.trim().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::draft::tests::{draft, role_section};
    use super::*;

    fn open(dir: &Path) -> BundleStore {
        BundleStore::open_in(&Dir::open_last(dir, true).unwrap()).unwrap()
    }

    fn write(
        store: &BundleStore,
        text: &str,
        base: Option<u32>,
    ) -> Result<WriteResult, BundleError> {
        let options = WriteOptions {
            base,
            origin: "test".into(),
            ..WriteOptions::default()
        };
        store.write("terse", &draft("terse", &role_section(text)), &options)
    }

    #[test]
    fn a_failed_compile_or_bound_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let broken = draft("terse", &role_section("{{nope}}"));
        assert!(
            store
                .write("terse", &broken, &WriteOptions::default())
                .is_err()
        );
        let huge = WriteOptions {
            reason: "r".repeat(MAX_NOTE_BYTES + 1),
            ..WriteOptions::default()
        };
        let ok = draft("terse", &role_section("fine"));
        assert!(matches!(
            store.write("terse", &ok, &huge),
            Err(BundleError::Bound { .. })
        ));
        assert_eq!(store.list().unwrap(), Vec::new());
        let conn = store.conn();
        let contents: i64 = conn
            .query_row("SELECT COUNT(*) FROM contents", [], |r| r.get(0))
            .unwrap();
        assert_eq!(contents, 0);
    }

    #[test]
    fn versions_are_monotonic_across_reopen_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let mut base = None;
        for n in 1..=12u32 {
            // A fresh handle each time: what one process wrote, the next continues.
            let store = open(dir.path());
            let written = write(&store, &format!("v{n}"), base).unwrap();
            assert_eq!(written.version, n);
            base = Some(n);
            store.prune(&BTreeMap::new(), None, false).unwrap();
        }
        let store = open(dir.path());
        let versions: Vec<u32> = store
            .versions("terse")
            .unwrap()
            .iter()
            .map(|v| v.version)
            .collect();
        // The default (v1) and the window of the latest eight.
        assert_eq!(versions, [1, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(write(&store, "v13", Some(12)).unwrap().version, 13);
    }

    #[test]
    fn concurrent_writers_get_contiguous_versions_and_one_base_wins_once() {
        let dir = tempfile::tempdir().unwrap();
        write(&open(dir.path()), "one", None).unwrap();
        // Four processes' worth of handles, each writing on base v1.
        let outcomes: Vec<Result<WriteResult, BundleError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let path = dir.path();
                    scope.spawn(move || write(&open(path), &format!("from {i}"), Some(1)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<u32> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .map(|w| w.version)
            .collect();
        assert_eq!(won, [2], "exactly one write on base v1 is stored");
        assert!(
            outcomes
                .iter()
                .filter_map(|o| o.as_ref().err())
                .all(|e| matches!(e, BundleError::StaleBase { latest: 2, .. }))
        );
        let forced: Vec<u32> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let path = dir.path();
                    scope.spawn(move || {
                        let options = WriteOptions {
                            force: true,
                            ..WriteOptions::default()
                        };
                        let d = draft("terse", &role_section(&format!("forced {i}")));
                        open(path).write("terse", &d, &options).unwrap().version
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut forced = forced;
        forced.sort_unstable();
        assert_eq!(forced, [3, 4, 5, 6]);
    }

    #[test]
    fn a_stale_base_is_refused_naming_both_versions_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        write(&store, "one", None).unwrap();
        write(&store, "two", Some(1)).unwrap();
        let error = write(&store, "three", Some(1)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("based on v1") && message.contains("latest version is v2"),
            "{message}"
        );
        assert!(matches!(
            write(&store, "three", None),
            Err(BundleError::StaleBase { base: None, .. })
        ));
        assert_eq!(store.versions("terse").unwrap().len(), 2);
        let forced = WriteOptions {
            base: Some(1),
            force: true,
            ..WriteOptions::default()
        };
        let three = draft("terse", &role_section("three"));
        assert_eq!(store.write("terse", &three, &forced).unwrap().version, 3);
    }

    #[test]
    fn a_checksum_pin_resolves_its_content_and_refuses_changed_content() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let one = write(&store, "one", None).unwrap();
        write(&store, "two", Some(1)).unwrap();
        let pin = BundleRef::Checksum("terse".into(), one.checksum.clone());
        assert_eq!(store.resolve(&pin).unwrap().0.version, 1);
        let other = BundleRef::Checksum("terse".into(), format!("sha256:{}", "0".repeat(64)));
        assert!(matches!(
            store.resolve(&other),
            Err(BundleError::ChecksumMismatch { .. })
        ));
        // Content changed under its address (outside trellis): refused on read.
        let tampered = draft("terse", &role_section("tampered")).encode();
        store
            .conn()
            .execute(
                "UPDATE contents SET body = ?1 WHERE checksum = ?2",
                params![tampered, one.checksum],
            )
            .unwrap();
        assert!(matches!(
            store.resolve(&pin),
            Err(BundleError::Corrupt { .. })
        ));
        assert!(matches!(
            store.resolve(&BundleRef::Version("terse".into(), 1)),
            Err(BundleError::Corrupt { .. })
        ));
    }

    #[test]
    fn the_default_is_explicit_and_its_history_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        write(&store, "one", None).unwrap();
        write(&store, "two", Some(1)).unwrap();
        let bare = BundleRef::Default("terse".into());
        assert_eq!(
            store.resolve(&bare).unwrap().0.version,
            1,
            "a write never moves the default"
        );
        store.set_default("terse", 2, "better").unwrap();
        store.set_default("terse", 1, "roll back").unwrap();
        let history: Vec<(u32, Option<u32>)> = store
            .history("terse")
            .unwrap()
            .iter()
            .map(|c| (c.version, c.previous))
            .collect();
        assert_eq!(history, [(1, None), (2, Some(1)), (1, Some(2))]);
        assert!(store.set_default("terse", 9, "").is_err());
    }

    #[test]
    fn prune_keeps_versions_sessions_name_and_kept_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut base = None;
        for n in 1..=13u32 {
            let options = WriteOptions {
                base,
                keep: n == 3,
                ..WriteOptions::default()
            };
            let d = draft("terse", &role_section(&format!("v{n}")));
            store.write("terse", &d, &options).unwrap();
            base = Some(n);
        }
        // v1 is the default, v3 kept, v6..v13 the window; a session names v2.
        let named = BTreeMap::from([("terse".to_owned(), BTreeSet::from([2]))]);
        let dry = store.prune(&named, None, true).unwrap();
        assert_eq!(dry.removed, ["terse@4", "terse@5"]);
        assert_eq!(
            store.versions("terse").unwrap().len(),
            13,
            "a dry run removes nothing"
        );
        let report = store.prune(&named, None, false).unwrap();
        assert_eq!((report.removed.len(), report.kept_for_sessions), (2, 1));
        let named_v2 = BundleRef::Version("terse".into(), 2);
        assert!(
            store.resolve(&named_v2).is_ok(),
            "replay can still read what a session named"
        );
        let gone = BundleRef::Version("terse".into(), 4);
        assert!(matches!(
            store.resolve(&gone),
            Err(BundleError::UnknownVersion { .. })
        ));
    }
}
