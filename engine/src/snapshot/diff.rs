//! Per-file text changes between two snapshots.
//!
//! The result is what a person reviews and what an editor applies: for each
//! modified file, line-granular edits against the old text (byte offsets,
//! ordered, non-overlapping) plus the full new text; whole files for
//! creations; bare deletions. Changes text cannot express (a symlink, a
//! file that became a symlink, an executable bit flipped on unchanged
//! content) are errors, never silently dropped.
//!
//! Read-only context (ignored files, see [`super::EntryKind`]) is never in a
//! diff: no edit can change it, so what differs there was left in a slot by
//! a build or test run, not proposed, and must never reach the user's
//! files. A path that is context on one side and a snapshot file on the
//! other (the ignore rules changed under it) is refused.

use similar::{Algorithm, DiffTag, TextDiff};

use super::{ContentSource, Entry, Snapshot, SnapshotError};
use crate::change::{FileChange, TextEdit};
use crate::workspace_path::WorkspacePath;

/// The changes that turn `old` into `new`, sorted by path. Content is read
/// (and verified) from the matching sources.
pub fn diff(
    old: &Snapshot,
    old_src: &dyn ContentSource,
    new: &Snapshot,
    new_src: &dyn ContentSource,
) -> Result<Vec<FileChange>, SnapshotError> {
    for (path, old_entry) in &old.entries {
        if let Some(new_entry) = new.entries.get(path)
            && old_entry.kind.is_context() != new_entry.kind.is_context()
        {
            return Err(SnapshotError::UnrepresentableChange {
                path: path.clone(),
                reason: "the ignore rules changed whether this file is part of the snapshot",
            });
        }
    }
    let new_editable: std::collections::BTreeMap<_, _> = new.editable().collect();
    let mut changes = Vec::new();
    for (path, old_entry) in old.editable() {
        match new_editable.get(path).copied() {
            None => {
                refuse_symlink(path, old_entry)?;
                changes.push(FileChange::Delete {
                    path: WorkspacePath::new(path.clone())?,
                    old: old_entry.blob,
                });
            }
            Some(new_entry) if new_entry == old_entry => {}
            Some(new_entry) => {
                refuse_symlink(path, old_entry)?;
                refuse_symlink(path, new_entry)?;
                if new_entry.blob == old_entry.blob {
                    return Err(SnapshotError::UnrepresentableChange {
                        path: path.clone(),
                        reason: "only the executable bit changed, which a text diff cannot express",
                    });
                }
                let old_text = read_text(old_src, path, old_entry)?;
                let new_text = read_text(new_src, path, new_entry)?;
                changes.push(FileChange::Modify {
                    path: WorkspacePath::new(path.clone())?,
                    old: old_entry.blob,
                    new: new_entry.blob,
                    edits: line_edits(&old_text, &new_text),
                    new_text,
                });
            }
        }
    }
    for (path, new_entry) in new_editable {
        if !old.entries.contains_key(path) {
            refuse_symlink(path, new_entry)?;
            changes.push(FileChange::Create {
                path: WorkspacePath::new(path.clone())?,
                new: new_entry.blob,
                text: read_text(new_src, path, new_entry)?,
            });
        }
    }
    changes.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(changes)
}

fn refuse_symlink(path: &str, entry: &Entry) -> Result<(), SnapshotError> {
    if entry.kind.is_symlink() {
        Err(SnapshotError::UnrepresentableChange {
            path: path.to_owned(),
            reason: "a symlink changed, which a text diff cannot express",
        })
    } else {
        Ok(())
    }
}

fn read_text(
    source: &dyn ContentSource,
    path: &str,
    entry: &Entry,
) -> Result<String, SnapshotError> {
    String::from_utf8(source.read(path, entry)?).map_err(|_| SnapshotError::NonUtf8Content {
        path: path.to_owned(),
    })
}

/// Line-granular edits turning `old` into `new`, with byte offsets into
/// `old`. Adjacent changed runs are merged, so edits never touch.
pub fn line_edits(old: &str, new: &str) -> Vec<TextEdit> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let old_lines = diff.old_slices();
    let new_lines = diff.new_slices();
    // old_offsets[i] = byte offset of line i; one extra for the end.
    let mut old_offsets = Vec::with_capacity(old_lines.len() + 1);
    let mut offset = 0;
    old_offsets.push(0);
    for line in old_lines {
        offset += line.len();
        old_offsets.push(offset);
    }

    // Positions are tracked from the op lengths alone: similar 2.7's Myers
    // output can carry stale start indices after its compaction pass (seen
    // on `a,∅,a×6,ü,b` → `a,b,a,b,b,b,∅,ü,ü,b`), while lengths stay exact.
    let (mut old_line, mut new_line) = (0, 0);
    let mut edits: Vec<TextEdit> = Vec::new();
    for op in diff.ops() {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        let (old_end, new_end) = (old_line + old_range.len(), new_line + new_range.len());
        if tag != DiffTag::Equal {
            let byte_start = old_offsets[old_line];
            let byte_end = old_offsets[old_end];
            let inserted: String = new_lines[new_line..new_end].concat();
            match edits.last_mut() {
                Some(last) if last.byte_end == byte_start => {
                    last.byte_end = byte_end;
                    last.new_text.push_str(&inserted);
                }
                _ => edits.push(TextEdit {
                    byte_start,
                    byte_end,
                    new_text: inserted,
                }),
            }
        }
        (old_line, new_line) = (old_end, new_end);
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{DirSource, Overlay, Snapshotter};
    use proptest::prelude::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    fn take(root: &Path) -> (Snapshot, DirSource) {
        let snapshot = Snapshotter::new(root, None)
            .snapshot(&Overlay::default())
            .unwrap();
        (snapshot, DirSource::new(root, Overlay::default()))
    }

    #[test]
    fn reports_modify_create_and_delete_sorted_by_path() {
        let old_dir = tempfile::tempdir().unwrap();
        let new_dir = tempfile::tempdir().unwrap();
        write(old_dir.path(), "b.rs", b"one\ntwo\nthree\n");
        write(old_dir.path(), "gone.rs", b"bye\n");
        write(old_dir.path(), "same.rs", b"same\n");
        write(new_dir.path(), "b.rs", b"one\n2\nthree\nfour\n");
        write(new_dir.path(), "a_new.rs", b"hello\n");
        write(new_dir.path(), "same.rs", b"same\n");
        let (old, old_src) = take(old_dir.path());
        let (new, new_src) = take(new_dir.path());

        let changes = diff(&old, &old_src, &new, &new_src).unwrap();
        let paths: Vec<&str> = changes.iter().map(|c| c.path().as_str()).collect();
        assert_eq!(paths, ["a_new.rs", "b.rs", "gone.rs"]);
        assert!(matches!(&changes[0], FileChange::Create { text, .. } if text == "hello\n"));
        assert!(matches!(&changes[2], FileChange::Delete { .. }));
        let FileChange::Modify {
            edits, new_text, ..
        } = &changes[1]
        else {
            panic!("expected a modification: {:?}", changes[1]);
        };
        assert_eq!(new_text, "one\n2\nthree\nfour\n");
        assert_eq!(
            edits,
            &[
                TextEdit {
                    byte_start: 4,
                    byte_end: 8,
                    new_text: "2\n".to_owned()
                },
                TextEdit {
                    byte_start: 14,
                    byte_end: 14,
                    new_text: "four\n".to_owned()
                },
            ]
        );
    }

    #[test]
    fn non_utf8_content_is_an_error_naming_the_path() {
        let old_dir = tempfile::tempdir().unwrap();
        let new_dir = tempfile::tempdir().unwrap();
        write(old_dir.path(), "blob.bin", b"text\n");
        write(new_dir.path(), "blob.bin", b"\xff\xfe\n");
        let (old, old_src) = take(old_dir.path());
        let (new, new_src) = take(new_dir.path());
        let err = diff(&old, &old_src, &new, &new_src).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::NonUtf8Content { path } if path == "blob.bin"),
            "{err:?}"
        );
    }

    #[test]
    fn executable_bit_only_change_is_refused() {
        let old_dir = tempfile::tempdir().unwrap();
        let new_dir = tempfile::tempdir().unwrap();
        write(old_dir.path(), "run.sh", b"#!/bin/sh\n");
        write(new_dir.path(), "run.sh", b"#!/bin/sh\n");
        fs::set_permissions(
            new_dir.path().join("run.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let (old, old_src) = take(old_dir.path());
        let (new, new_src) = take(new_dir.path());
        let err = diff(&old, &old_src, &new, &new_src).unwrap_err();
        assert!(err.to_string().contains("run.sh"), "{err}");
    }

    #[test]
    fn identical_snapshots_have_no_changes() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "x.rs", b"x\n");
        let (snapshot, source) = take(dir.path());
        assert!(
            diff(&snapshot, &source, &snapshot, &source)
                .unwrap()
                .is_empty()
        );
    }

    /// Text built from a small alphabet of lines so diffs share material,
    /// with and without trailing newlines and with multi-byte characters.
    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!["a\n", "b\n", "ü\n", "\n", "c", "dd\r\n", "é"]),
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn applying_the_edits_to_the_old_text_yields_the_new_text(old in text(), new in text()) {
            let edits = line_edits(&old, &new);
            for pair in edits.windows(2) {
                prop_assert!(pair[0].byte_end < pair[1].byte_start, "ordered, non-overlapping: {:?}", edits);
            }
            for edit in &edits {
                prop_assert!(edit.byte_start <= edit.byte_end && edit.byte_end <= old.len());
            }
            prop_assert_eq!(crate::edit::apply("f", &old, &edits).unwrap(), new);
        }
    }
}
