//! The evidence is satisfied, not removed: which tests of a repair's start
//! a candidate no longer runs as they ran, under every test policy.
//!
//! Two views, each a pure function of values, both language-neutral here:
//!
//! - **The runners' own reports** ([`no_longer_run`]): every test stage
//!   lists the tests that ran to an outcome ([`super::StageReport::tests_run`]:
//!   libtest's result lines, pytest's JUnit cases, Node's TAP results; a
//!   skipped, ignored, `xfail` or `todo` test is not among them). A test the
//!   baseline ran that the candidate's run of the same stage does not run
//!   was deleted, renamed, skipped, or compiled out, whichever way. Only a
//!   candidate stage that ran its tests to the end is compared: one whose
//!   build or collection failed ran none and is no hard pass anyway.
//! - **The source** ([`weakened_in_file`]): each language's sensor room
//!   reads the tests a file defines and the marks that switch one off
//!   (Rust: `super::rust_tests`; pytest: `super::python::test_inventory`;
//!   Node's runner, jest and vitest: `super::typescript::test_inventory`).
//!   A test the file defined that the candidate's file lacks, or that it
//!   marks off where it was not, is weakened, even when no runner ran it
//!   (a start whose build was broken).
//!
//! A test may change what it checks under `evolving` (erratum 37); it may
//! never stop being checked.

use std::collections::BTreeMap;

use super::file_tests::{FOCUS, FileTests};
use super::{StageReport, StageStatus};
use crate::diagnostic::Level;

/// A test of the baseline a candidate no longer runs as it did.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Weakened {
    /// The test, as its runner or file names it.
    pub test: String,
    /// What the candidate did to it, in a few words.
    pub how: String,
}

/// Whether a file at `path` can define tests any sensor reads statically:
/// the files worth comparing when a candidate changed or removed them.
pub fn may_define_tests(path: &str) -> bool {
    source_language(path).is_some()
}

#[derive(Clone, Copy)]
enum SourceLanguage {
    Rust,
    Python,
    Script,
}

fn source_language(path: &str) -> Option<SourceLanguage> {
    if path.ends_with(".rs") {
        Some(SourceLanguage::Rust)
    } else if super::python::test_inventory::is_test_file(path) {
        Some(SourceLanguage::Python)
    } else if super::typescript::test_inventory::is_test_file(path) {
        Some(SourceLanguage::Script)
    } else {
        None
    }
}

/// The tests `text` (the file at `path`) defines; `None` when it does not
/// parse, or is no file a sensor reads tests from.
pub fn file_tests(path: &str, text: &str) -> Option<FileTests> {
    match source_language(path)? {
        SourceLanguage::Rust => super::rust_tests::inventory(text),
        SourceLanguage::Python => super::python::test_inventory::inventory(text),
        SourceLanguage::Script => super::typescript::test_inventory::inventory(path, text),
    }
}

/// The tests the file at `path` defined as `before` that `after` (`None`:
/// the file is gone) removes or switches off. A file whose new text does
/// not parse defines none of them: its tests cannot run as they were.
pub fn weakened_in_file(path: &str, before: &str, after: Option<&str>) -> Vec<Weakened> {
    let Some(was) = file_tests(path, before) else {
        return Vec::new();
    };
    let now = after.and_then(|after| file_tests(path, after));
    let mut weakened = Vec::new();
    for (test, marks) in &was.tests {
        let named = format!("{path}: {test}");
        let how = match now.as_ref().map(|now| (now.tests.get(test), now.focused)) {
            None if after.is_none() => "its file was removed".to_owned(),
            None => "its file no longer parses".to_owned(),
            Some((None, _)) => "removed or renamed".to_owned(),
            Some((Some(now_marks), focused)) => {
                let added: Vec<&str> = now_marks
                    .difference(marks)
                    .filter(|mark| *mark != FOCUS)
                    .map(String::as_str)
                    .collect();
                if !added.is_empty() {
                    format!("switched off by {}", added.join(", "))
                } else if focused && !was.focused && !now_marks.contains(FOCUS) {
                    "skipped: another test of the file is marked `.only`".to_owned()
                } else {
                    continue;
                }
            }
        };
        weakened.push(Weakened { test: named, how });
    }
    weakened
}

/// The tests `before` (a measurement's stage reports) ran that `after`
/// (the candidate's) ran no more, stage by stage.
pub fn no_longer_run(before: &[StageReport], after: &[StageReport]) -> Vec<Weakened> {
    let mut weakened = Vec::new();
    for was in before.iter().filter(|r| ran_to_the_end(r)) {
        let Some(now) = after
            .iter()
            .find(|r| r.stage == was.stage && ran_to_the_end(r))
        else {
            continue;
        };
        let mut left = counts(&now.tests_run);
        for test in &was.tests_run {
            match left.get_mut(test.as_str()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => weakened.push(Weakened {
                    test: test.clone(),
                    how: format!("no longer runs in `{}`", was.stage),
                }),
            }
        }
    }
    weakened
}

/// Whether `report` ran its tests to the end: it ran (no earlier stage
/// decided it, its tool could run), built or collected everything (no
/// error diagnostic), and its output was read whole.
fn ran_to_the_end(report: &StageReport) -> bool {
    report.not_run.is_none()
        && !report.truncated
        && !matches!(report.status, StageStatus::Unavailable { .. })
        && !report.diagnostics.iter().any(|d| d.level == Level::Error)
}

fn counts(tests: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for test in tests {
        *counts.entry(test.as_str()).or_default() += 1;
    }
    counts
}

/// A refusal's words: the weakened tests, at most a handful named.
pub fn describe(weakened: &[Weakened]) -> String {
    const NAMED: usize = 4;
    let mut named: Vec<String> = weakened
        .iter()
        .take(NAMED)
        .map(|w| format!("`{}` {}", w.test, w.how))
        .collect();
    if weakened.len() > NAMED {
        named.push(format!("{} more", weakened.len() - NAMED));
    }
    named.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sensor::test_report;

    fn ran(stage: &str, tests: &[&str]) -> StageReport {
        StageReport {
            tests_run: tests.iter().map(|t| (*t).to_owned()).collect(),
            ..test_report(stage, StageStatus::Failed, Vec::new(), Vec::new())
        }
    }

    #[test]
    fn a_test_the_start_ran_and_the_candidate_does_not_is_named_once_per_run() {
        let before = [ran("test", &["lib::a", "lib::b", "doc::x", "doc::x"])];
        let after = [ran("test", &["lib::a", "doc::x", "lib::new"])];
        assert_eq!(
            no_longer_run(&before, &after),
            [
                Weakened {
                    test: "lib::b".into(),
                    how: "no longer runs in `test`".into()
                },
                Weakened {
                    test: "doc::x".into(),
                    how: "no longer runs in `test`".into()
                },
            ]
        );
    }

    #[test]
    fn only_runs_that_went_to_the_end_are_compared() {
        let before = [ran("test", &["lib::a"])];
        let mut unbuilt = ran("test", &[]);
        unbuilt.not_run = Some("the build fails".into());
        assert!(no_longer_run(&before, &[unbuilt]).is_empty());
        let mut cut = ran("test", &[]);
        cut.truncated = true;
        assert!(no_longer_run(&before, &[cut.clone()]).is_empty());
        assert!(no_longer_run(&[cut], &[ran("test", &[])]).is_empty());
        let other = ran("python.test", &[]);
        assert!(no_longer_run(&before, &[other]).is_empty());
        assert_eq!(no_longer_run(&before, &[ran("test", &[])]).len(), 1);
    }

    #[test]
    fn a_removed_file_a_new_mark_and_a_focus_elsewhere_weaken_and_an_edit_does_not() {
        let before = "def test_a():\n    assert f() == 1\n\ndef test_b():\n    assert True\n";
        let path = "tests/test_f.py";
        assert_eq!(weakened_in_file(path, before, None).len(), 2);
        let edited = before.replace("== 1", "== 2");
        assert!(weakened_in_file(path, before, Some(&edited)).is_empty());
        let skipped = before.replace(
            "def test_b",
            "import pytest\n@pytest.mark.skip(reason='later')\ndef test_b",
        );
        let weakened = weakened_in_file(path, before, Some(&skipped));
        assert_eq!(weakened.len(), 1, "{weakened:?}");
        assert_eq!(weakened[0].test, "tests/test_f.py: test_b");
        assert!(weakened[0].how.contains("pytest.mark.skip"), "{weakened:?}");

        let ts = "test('a', () => {});\ntest('b', () => {});\n";
        let focused = "test.only('a', () => {});\ntest('b', () => {});\n";
        let weakened = weakened_in_file("test/x.test.ts", ts, Some(focused));
        assert_eq!(weakened.len(), 1, "{weakened:?}");
        assert_eq!(weakened[0].test, "test/x.test.ts: b");
        assert!(weakened[0].how.contains("`.only`"), "{weakened:?}");
    }
}
