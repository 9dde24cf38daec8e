//! Re-running the failing tests of `typescript.test` alone: how Node's test
//! runner is told which tests to run, and how the re-run's results judge
//! each failure, as plain functions over values.
//!
//! Node selects tests with `--test-name-pattern`, a regular expression a
//! test's own name (or the name of a suite around it) must match. The flag
//! is refused in `NODE_OPTIONS`, so it goes on the command line: after
//! `node --test`, or after the first `--test` word of the project's test
//! script (`node --import tsx --test test/*.test.ts`), so the script's own
//! loaders and files stay as they are. A failure is selected by its own,
//! innermost name, escaped and anchored, so only tests of exactly that name
//! run; another test of the same name runs too and is told apart by its
//! file and suite path when the results are read. A script without a
//! `--test` word (another framework, or `--test` only inside quotes that
//! the pattern cannot join) cannot be narrowed: its failures are not
//! re-run. jest selects tests with one `--testNamePattern`, matched against
//! a test's full name (its suites' names and its own joined by spaces):
//! the failures' full names, escaped and anchored as alternatives, go after
//! the script's first `jest` word, beside the report's flags.
//!
//! A failure counts as passed only when the re-run reports a test of its
//! name and suite path passing (Node 20 gives no file for a passing test, so
//! one of unknown file counts; a same-named test elsewhere cannot stand in
//! for it unseen, since the pattern runs it too, and its failing again wins):
//! a test the pattern did not reach is not a pass.
//!
//! This module never runs anything; [`super::node_test`] does.

use crate::diagnostic::{Rerun, TestFailure};

/// The word of a script that starts Node's runner.
pub(super) const TEST: &str = "--test";

/// The word of a script that starts jest.
pub(super) const JEST: &str = "jest";

/// The flag of Node's runner that selects tests by name.
const NAME_PATTERN: &str = "--test-name-pattern=";

/// A test as results name it: its file (or [`UNLOCATED`]) and its path
/// through the suites, `suite > test`.
pub(super) type TestKey = (String, String);

/// The file of a test whose report names none.
pub(super) const UNLOCATED: &str = "node --test";

/// The `--test-name-pattern` flags selecting `failures` (each once).
pub(super) fn pattern_flags<'a>(
    failures: impl IntoIterator<Item = &'a TestFailure>,
) -> Vec<String> {
    let mut flags: Vec<String> = failures
        .into_iter()
        .map(|failure| format!("{NAME_PATTERN}{}", name_pattern(&failure.name)))
        .collect();
    flags.sort_unstable();
    flags.dedup();
    flags
}

/// jest's `--testNamePattern` flag selecting `failures`: one pattern (jest
/// takes one), each failure's full name (its suites' names and its own,
/// joined by spaces, as jest matches them) escaped, the alternatives
/// anchored together.
pub(super) fn jest_pattern_flag<'a>(
    failures: impl IntoIterator<Item = &'a TestFailure>,
) -> Option<String> {
    let mut names: Vec<String> = failures
        .into_iter()
        .map(|failure| escaped(&failure.name.split(" > ").collect::<Vec<_>>().join(" ")))
        .collect();
    names.sort_unstable();
    names.dedup();
    (!names.is_empty()).then(|| format!("--testNamePattern=^(?:{})$", names.join("|")))
}

/// `^inner fails$` for `suite > inner fails`: the innermost name, every
/// character a regular expression reads as syntax escaped. (Node 20 matches
/// a pattern against each test's own name; later versions also against the
/// suites' names joined, which an anchored own name still matches.)
fn name_pattern(name: &str) -> String {
    let own = name.rsplit(" > ").next().unwrap_or(name);
    format!("^{}$", escaped(own))
}

/// `text` with every character a JavaScript regular expression reads as
/// syntax escaped; any other character (quotes, non-ASCII) is itself.
fn escaped(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.*+?()[]{}|/".contains(c) {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
}

/// `script` with `flags` after its first `word` (`--test`, `jest`), each
/// quoted for `sh`, or `None` when it has no such word.
pub(super) fn narrowed_script(script: &str, word: &str, flags: &[String]) -> Option<String> {
    let end = word_end(script, word)?;
    let mut narrowed = script[..end].to_owned();
    for flag in flags {
        narrowed.push(' ');
        narrowed.push_str(&shell_quoted(flag));
    }
    narrowed.push_str(&script[end..]);
    Some(narrowed)
}

/// Where the first `word` of `script` (delimited by whitespace) ends.
pub(super) fn word_end(script: &str, word: &str) -> Option<usize> {
    let bytes = script.as_bytes();
    script
        .match_indices(word)
        .map(|(at, _)| at)
        .find(|&at| {
            let end = at + word.len();
            (at == 0 || bytes[at - 1].is_ascii_whitespace())
                && (end == bytes.len() || bytes[end].is_ascii_whitespace())
        })
        .map(|at| at + word.len())
}

/// `text` as one `sh` word: single-quoted, its own single quotes closed,
/// escaped and reopened.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The tests a re-run reported failing and passing.
pub(super) struct Again {
    pub(super) failed: Vec<TestKey>,
    pub(super) passed: Vec<TestKey>,
}

/// How `failure` fared in the re-run `again`: failed again when it is
/// reported failing, passed only when it is reported passing (in its file,
/// or in none named), otherwise (not selected, not reached, the re-run
/// could not run) not re-run.
pub(super) fn outcome(failure: &TestFailure, selected: bool, again: Option<&Again>) -> Rerun {
    let key = (failure.binary.clone(), failure.name.clone());
    let passed = |again: &Again| {
        again.passed.iter().any(|(file, name)| {
            *name == failure.name && (*file == failure.binary || file == UNLOCATED)
        })
    };
    match again {
        Some(again) if selected && again.failed.contains(&key) => Rerun::FailedAgain,
        Some(again) if selected && passed(again) => Rerun::Passed,
        _ => Rerun::NotRerun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(binary: &str, name: &str) -> TestFailure {
        TestFailure {
            binary: binary.into(),
            name: name.into(),
            output: String::new(),
            location: None,
            calls: Vec::new(),
            rerun: None,
        }
    }

    #[test]
    fn a_failure_is_selected_by_its_own_name_escaped_and_anchored() {
        assert_eq!(name_pattern("adds"), "^adds$");
        assert_eq!(name_pattern("suite > inner fails"), "^inner fails$");
        assert_eq!(
            name_pattern("ticks (once) per 1.5s? [a|b] {x} ^$*+ \\ /"),
            r"^ticks \(once\) per 1\.5s\? \[a\|b\] \{x\} \^\$\*\+ \\ \/$"
        );
        let flags = pattern_flags(&[failure("a", "s > x"), failure("b", "x"), failure("a", "y")]);
        assert_eq!(
            flags,
            ["--test-name-pattern=^x$", "--test-name-pattern=^y$"]
        );
    }

    #[test]
    fn the_flags_go_after_the_scripts_first_test_word_quoted_for_the_shell() {
        let flags = vec!["--test-name-pattern=^it's$".to_owned()];
        assert_eq!(
            narrowed_script("node --import ts-strip --test test/*.test.ts", TEST, &flags)
                .as_deref(),
            Some(r"node --import ts-strip --test '--test-name-pattern=^it'\''s$' test/*.test.ts")
        );
        assert_eq!(
            narrowed_script("tsc && node --test", TEST, &flags).as_deref(),
            Some(r"tsc && node --test '--test-name-pattern=^it'\''s$'")
        );
        assert_eq!(narrowed_script("node --test-only x", TEST, &flags), None);
        assert_eq!(narrowed_script("vitest run", TEST, &flags), None);
    }

    #[test]
    fn jest_is_given_one_anchored_pattern_of_full_names_quotes_and_unicode_as_they_are() {
        let flag = jest_pattern_flag(&[
            failure("a", "outer > it's « inner » > fails (once) [a|b]"),
            failure("b", "adds"),
            failure("c", "adds"),
        ]);
        assert_eq!(
            flag.as_deref(),
            Some(r"--testNamePattern=^(?:adds|outer it's « inner » fails \(once\) \[a\|b\])$")
        );
        assert_eq!(jest_pattern_flag(&[]), None);
        let flags = vec![flag.unwrap()];
        assert_eq!(
            narrowed_script("tsc -p . && jest dist", JEST, &flags[..0]).as_deref(),
            Some("tsc -p . && jest dist")
        );
        assert_eq!(
            narrowed_script(
                "tsc -p . && jest dist",
                JEST,
                &["-t".to_owned(), "it's".to_owned()]
            )
            .as_deref(),
            Some(r"tsc -p . && jest '-t' 'it'\''s' dist")
        );
        assert_eq!(
            narrowed_script("jest.sh --config jest.config.js", JEST, &flags),
            None
        );
    }

    #[test]
    fn only_a_reported_pass_is_a_pass() {
        let flaky = failure("test/a.test.ts", "s > x");
        let key = ("test/a.test.ts".to_owned(), "s > x".to_owned());
        let passed = Again {
            failed: Vec::new(),
            passed: vec![key.clone()],
        };
        let failed = Again {
            failed: vec![key],
            passed: Vec::new(),
        };
        let unreached = Again {
            failed: Vec::new(),
            passed: vec![
                ("test/b.test.ts".to_owned(), "s > x".to_owned()),
                (UNLOCATED.to_owned(), "x".to_owned()),
            ],
        };
        let unlocated = Again {
            failed: Vec::new(),
            passed: vec![(UNLOCATED.to_owned(), "s > x".to_owned())],
        };
        assert_eq!(outcome(&flaky, true, Some(&passed)), Rerun::Passed);
        assert_eq!(outcome(&flaky, true, Some(&unlocated)), Rerun::Passed);
        assert_eq!(outcome(&flaky, true, Some(&failed)), Rerun::FailedAgain);
        assert_eq!(outcome(&flaky, true, Some(&unreached)), Rerun::NotRerun);
        assert_eq!(outcome(&flaky, false, Some(&passed)), Rerun::NotRerun);
        assert_eq!(outcome(&flaky, true, None), Rerun::NotRerun);
    }
}
