//! Property tests of the promotion journal reader against a journal torn by
//! a crash or edited by hand, and the regression tests of what they found.
//!
//! Its properties: `a_damaged_journal_is_refused_or_read`,
//! `a_structurally_edited_journal_is_refused_or_read`,
//! `a_reordered_journal_is_the_same_journal`, `a_journal_round_trips`,
//! `a_huge_journal_is_refused_without_reading_it`.

use proptest::prelude::*;
use trellis_core::fuzz;

use super::*;
use crate::ledger::Ledger;

/// A journal as `promote` writes it, for a sample of targets.
fn recorded() -> Journal {
    Journal::new(
        "repair-7",
        vec![
            JournalTarget {
                path: "src/lib.rs".into(),
                old: Some(blob_digest(b"old")),
                old_mode: Some(0o644),
                new: Some(blob_digest(b"new")),
                staged: Some(format!("{TEMP_PREFIX}1a2b-0.new")),
                aside: format!("{TEMP_PREFIX}1a2b-0.old"),
            },
            JournalTarget {
                path: "src/gone.rs".into(),
                old: Some(blob_digest(b"gone")),
                old_mode: None,
                new: None,
                staged: None,
                aside: format!("{TEMP_PREFIX}1a2b-1.old"),
            },
        ],
    )
}

fn parse_bounded(bytes: &[u8]) -> Result<Journal, String> {
    fuzz::bounded("journal::parse", fuzz::budget(bytes.len()), || parse(bytes))
}

fn target() -> impl Strategy<Value = JournalTarget> {
    let digest = prop::option::of(any::<[u8; 32]>().prop_map(Digest));
    (
        "[a-z][a-z0-9._-]{0,7}(/[a-z][a-z0-9._-]{0,7}){0,2}",
        digest.clone(),
        prop::option::of(any::<u32>()),
        digest,
        prop::option::of("[a-z0-9.-]{0,12}"),
        "[a-z0-9.-]{0,12}",
    )
        .prop_map(|(path, old, old_mode, new, staged, aside)| JournalTarget {
            path,
            old,
            old_mode,
            new,
            staged: staged.map(|s| format!("{TEMP_PREFIX}{s}")),
            aside: format!("{TEMP_PREFIX}{aside}"),
        })
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// What `Journal::write` writes reads back as the same journal.
    #[test]
    fn a_journal_round_trips(id in any::<String>(), targets in prop::collection::vec(target(), 0..6)) {
        let journal = Journal::new(&id, targets);
        let bytes = serde_json::to_vec_pretty(&journal).unwrap();
        prop_assert_eq!(parse_bounded(&bytes), Ok(journal));
    }

    /// A torn or damaged journal is refused with a reason or read; never a panic.
    #[test]
    fn a_damaged_journal_is_refused_or_read(bytes in fuzz::mutated(
        serde_json::to_vec_pretty(&recorded()).unwrap(),
    )) {
        if let Err(reason) = parse_bounded(&bytes) {
            prop_assert!(!reason.is_empty());
        }
    }

    /// Wrong types, dropped or repeated fields, huge numbers, deep nesting.
    #[test]
    fn a_structurally_edited_journal_is_refused_or_read(edit in fuzz::json_edit()) {
        let value = serde_json::to_value(recorded()).unwrap();
        let _ = parse_bounded(fuzz::apply_json(&value, &edit).as_bytes());
    }

    /// Reordered fields and other whitespace are the same journal.
    #[test]
    fn a_reordered_journal_is_the_same_journal(order in any::<u64>()) {
        let value = serde_json::to_value(recorded()).unwrap();
        prop_assert_eq!(parse_bounded(fuzz::rewrite_json(&value, order).as_bytes()), Ok(recorded()));
    }
}

/// Found by fuzzing the temp names: recovery removed a journal's `staged`
/// name unconditionally, so `../victim` deleted a file outside the target's
/// directory. Now such a journal refuses start-up and nothing is touched.
#[test]
fn a_journal_naming_a_file_outside_its_directory_is_refused_and_it_survives() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let victim = outer.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let ledger = Ledger::open(&root.join(".trellis")).unwrap();
    let mut journal = recorded();
    journal.targets[0].staged = Some("../victim.txt".into());
    journal.write(ledger.state_dir()).unwrap();

    let error = recover(&root, &ledger).unwrap_err().to_string();
    assert!(
        error.contains("`staged` of src/lib.rs is `../victim.txt`"),
        "{error}"
    );
    assert!(error.contains(JOURNAL_FILE), "{error}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

/// A journal replaced by a huge file is refused unread, naming it.
#[test]
fn a_huge_journal_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join(".trellis")).unwrap();
    let planted = std::fs::File::create(ledger.state_dir().join(JOURNAL_FILE)).unwrap();
    planted.set_len(MAX_JOURNAL_BYTES + 1).unwrap();
    let error = fuzz::bounded("recover", 1 << 20, || recover(dir.path(), &ledger))
        .unwrap_err()
        .to_string();
    assert!(error.contains(JOURNAL_FILE), "{error}");
    assert!(error.contains("larger than"), "{error}");
}
