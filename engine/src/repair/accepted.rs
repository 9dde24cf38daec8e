//! The accepted-state store and its rebuild.
//!
//! An accepted state x_k lives on as an overlay of file contents over the
//! user's disk ([`Accepted`]), so the branch slot it was measured in can be
//! reused. When a step commits, [`Accepted::advance`] takes the selected
//! slot's content into a new overlay, and [`store_accepted_state`] writes
//! it, relative to the generation's start x₀, into the blob store under
//! `.trellis/objects/` before ledgering `accepted_state_stored`, so a crash
//! in a later step can be continued from it. [`rebuild_accepted`] reads a
//! stored state back over the start view, verified blob by blob, and checks
//! its root against the record.
//!
//! It must never write the user's files, and never ledger a row that names
//! content not yet on disk. A stored state is checked, never trusted.

use std::path::{Path, PathBuf};

use crate::digest::Digest;
use crate::error::EngineError;
use crate::ledger;
use crate::measure::Measurement;
use crate::records;
use crate::runtime::blocking;
use crate::snapshot::{self, BlobStore, DirSource, Entry, EntryKind, Overlay, Snapshot};
use crate::workspace_path::WorkspacePath;

use super::Ctx;
use super::session::Session;

/// The accepted state x_k: its snapshot, the content that realizes it over
/// the user's disk, and its measurement.
pub(crate) struct Accepted {
    pub snapshot: Snapshot,
    pub overlay: Overlay,
    pub measurement: Measurement,
}

impl Accepted {
    /// The state the selected branch reached: its snapshot `y` and
    /// measurement `m`, with the content it changed (read from `slot`)
    /// added to this state's overlay.
    pub(super) fn advance(
        &self,
        ctx: &Ctx<'_>,
        slot: PathBuf,
        y: Snapshot,
        m: Measurement,
    ) -> Result<Accepted, EngineError> {
        Ok(Accepted {
            overlay: self.overlay_toward(ctx, slot, &y)?,
            snapshot: y,
            measurement: m,
        })
    }

    /// The overlay over the user's disk that holds state `y` of `slot`:
    /// this state's overlay and the content `y` changed, read from `slot`.
    pub(super) fn overlay_toward(
        &self,
        ctx: &Ctx<'_>,
        slot: PathBuf,
        y: &Snapshot,
    ) -> Result<Overlay, EngineError> {
        let accepted_source = DirSource::new(ctx.root.to_path_buf(), self.overlay.clone());
        let mut overlay = self.overlay.clone();
        let changes = snapshot::diff(
            &self.snapshot,
            &accepted_source,
            y,
            &DirSource::new(slot, Overlay::default()),
        )?;
        for change in &changes {
            let Some(text) = change.new_text() else {
                // Accepted states are overlays of file contents over the user's disk.
                return Err(EngineError::Invariant(format!(
                    "{}: the selected candidate deletes this file; accepted states only hold file contents",
                    change.path()
                )));
            };
            overlay
                .buffers
                .insert(change.path().to_string(), text.as_bytes().to_vec());
        }
        Ok(overlay)
    }
}

/// Where accepted states' content is stored, under the workspace's `.trellis/`.
pub(super) fn accepted_objects(ctx: &Ctx<'_>) -> PathBuf {
    ctx.root.join(".trellis").join("objects")
}

/// Stores a newly accepted state's content relative to x₀ (every file whose
/// entry differs) in the blob store and ledgers it, so a crash in a later
/// step can be continued from here. The blobs are written first: a row
/// never names content that is not on disk.
pub(super) fn store_accepted_state(
    ctx: &Ctx<'_>,
    session: &Session,
    candidate_id: &str,
    x0: &Snapshot,
    accepted: &Accepted,
) -> Result<(), EngineError> {
    let files = blocking(|| -> Result<Vec<(WorkspacePath, Digest)>, String> {
        if let Some(path) = x0
            .entries
            .keys()
            .find(|path| !accepted.snapshot.entries.contains_key(*path))
        {
            return Err(format!(
                "`{path}`: the accepted state deletes this file; only file contents are stored"
            ));
        }
        let store = BlobStore::open(accepted_objects(ctx)).map_err(|e| e.to_string())?;
        let mut files = Vec::new();
        for (path, entry) in &accepted.snapshot.entries {
            if x0.entries.get(path) == Some(entry) {
                continue;
            }
            let content = accepted.overlay.get(path).ok_or_else(|| {
                format!("`{path}`: changed, but the accepted overlay holds no content for it")
            })?;
            let blob = store.put(content).map_err(|e| e.to_string())?;
            if blob != entry.blob {
                return Err(format!(
                    "`{path}`: the overlay's content is blob {}, the accepted snapshot's is {}",
                    blob.short(12),
                    entry.blob.short(12)
                ));
            }
            files.push((
                WorkspacePath::new(path.clone()).map_err(|e| e.to_string())?,
                blob,
            ));
        }
        Ok(files)
    })
    .map_err(|reason| EngineError::AcceptedState {
        candidate_id: candidate_id.to_owned(),
        objects: accepted_objects(ctx),
        reason,
    })?;
    ctx.ledger.append(&records::accepted_state_stored(
        &session.node,
        session.generation,
        candidate_id,
        accepted.snapshot.root,
        files,
    ))?;
    Ok(())
}

/// Rebuilds a stored accepted state over the start view: x₀'s entries with
/// each stored file's blob, and that content, read back verified from the
/// blob store, in the overlay. The rebuilt root must be the recorded one.
pub(super) fn rebuild_accepted(
    objects: &Path,
    start: (&Snapshot, &Overlay),
    stored: &ledger::AcceptedStateStored,
) -> Result<(Snapshot, Overlay), String> {
    let store = BlobStore::open(objects).map_err(|e| e.to_string())?;
    let mut entries = start.0.entries.clone();
    let mut overlay = start.1.clone();
    for file in &stored.files {
        let content = store
            .get(&file.blob)
            .map_err(|e| format!("`{}`: {e}", file.path))?;
        let kind = entries
            .get(file.path.as_str())
            .map_or(EntryKind::File { executable: false }, |entry| entry.kind);
        entries.insert(
            file.path.to_string(),
            Entry {
                kind,
                blob: file.blob,
                size: content.len() as u64,
            },
        );
        overlay.buffers.insert(file.path.to_string(), content);
    }
    let snapshot = Snapshot::from_entries(entries);
    if snapshot.root != stored.root {
        return Err(format!(
            "the stored files rebuild root {}, not the accepted root {}",
            snapshot.root.short(12),
            stored.root.short(12)
        ));
    }
    Ok((snapshot, overlay))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::digest::blob_digest;

    #[test]
    fn a_stored_state_is_rebuilt_over_the_start_view_and_its_root_checked() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let file = |content: &[u8]| Entry {
            kind: EntryKind::File { executable: false },
            blob: blob_digest(content),
            size: content.len() as u64,
        };
        let start = Snapshot::from_entries(BTreeMap::from([
            ("Cargo.toml".to_owned(), file(b"[package]")),
            ("src/lib.rs".to_owned(), file(b"old")),
        ]));
        let accepted = Snapshot::from_entries(BTreeMap::from([
            ("Cargo.toml".to_owned(), file(b"[package]")),
            ("src/lib.rs".to_owned(), file(b"new")),
        ]));
        let stored = |path: &str, root: Digest| ledger::AcceptedStateStored {
            node: "n".into(),
            generation: 0,
            candidate_id: "n/0/c1".into(),
            root,
            files: vec![ledger::StoredFile {
                path: crate::workspace_path::WorkspacePath::new(path).unwrap(),
                blob: blob_digest(b"new"),
            }],
        };
        let start_view = (&start, &Overlay::default());

        let missing = rebuild_accepted(&objects, start_view, &stored("src/lib.rs", accepted.root))
            .unwrap_err();
        assert!(
            missing.contains("`src/lib.rs`") && missing.contains("not in the store"),
            "{missing}"
        );

        BlobStore::open(&objects).unwrap().put(b"new").unwrap();
        let (rebuilt, overlay) =
            rebuild_accepted(&objects, start_view, &stored("src/lib.rs", accepted.root)).unwrap();
        assert_eq!(rebuilt, accepted);
        assert_eq!(overlay.get("src/lib.rs"), Some(&b"new"[..]));

        let moved = rebuild_accepted(&objects, start_view, &stored("src/main.rs", accepted.root))
            .unwrap_err();
        assert!(moved.contains("rebuild root"), "{moved}");
        // A stored file outside the workspace cannot even be read back.
        let escaping = serde_json::from_value::<ledger::StoredFile>(serde_json::json!({
            "path": "../lib.rs",
            "blob": blob_digest(b"new"),
        }))
        .unwrap_err()
        .to_string();
        assert!(escaping.contains("../lib.rs"), "{escaping}");
    }
}
