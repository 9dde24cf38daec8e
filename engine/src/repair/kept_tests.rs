//! The evidence is satisfied, not removed (issue 36, under every test
//! policy): a candidate that deletes, renames, skips, ignores or compiles
//! out a test that existed when the repair started is no repair.
//!
//! This room only gathers what [`crate::sensor::test_inventory`] compares,
//! for any language: the start's and the candidate's text of every file a
//! sensor reads tests from that the candidate changed or removed, and the
//! stage reports of the accepted state and of the candidate. It reads
//! files and never runs, writes or decides anything else.

use std::path::Path;

use crate::error::EngineError;
use crate::measure::Measurement;
use crate::sensor::test_inventory::{self, Weakened};
use crate::snapshot::{self, ContentSource, DirSource, Snapshot};

/// The tests of `start` (realized by `source`) that the candidate
/// `candidate` (in `slot`, measured as `measured`) removes or switches
/// off, by the files and by the runners (against `accepted`, the state the
/// candidate was made from, whose tests ran most recently).
pub(super) fn weakened(
    (start, source): (&Snapshot, &DirSource),
    (candidate, slot): (&Snapshot, &Path),
    accepted: &Measurement,
    measured: &Measurement,
) -> Result<Vec<Weakened>, EngineError> {
    let mut weakened = Vec::new();
    for (path, entry) in &start.entries {
        if candidate.entries.get(path) == Some(entry) || !test_inventory::may_define_tests(path) {
            continue;
        }
        let before = source
            .read(path, entry)
            .map_err(|e| EngineError::Invariant(format!("{path}: {e}")))?;
        let Ok(before) = String::from_utf8(before) else {
            continue;
        };
        let after = match candidate.entries.contains_key(path) {
            true => {
                let full = snapshot::fsutil::confine(slot, path)?;
                let bytes = std::fs::read(&full)
                    .map_err(|e| EngineError::Invariant(format!("{}: {e}", full.display())))?;
                match String::from_utf8(bytes) {
                    Ok(text) => Some(text),
                    // Not text any more: none of its tests can run.
                    Err(_) => Some(String::new()),
                }
            }
            false => None,
        };
        weakened.extend(test_inventory::weakened_in_file(
            path,
            &before,
            after.as_deref(),
        ));
    }
    weakened.extend(test_inventory::no_longer_run(
        &accepted.reports,
        &measured.reports,
    ));
    Ok(weakened)
}
