//! What jest reports through `--json --outputFile=<file>
//! --testLocationInResults`, read as the same test results Node's TAP
//! report gives ([`TapResult`]), so one interpretation keys, locates and
//! re-runs the failures of either runner.
//!
//! ```text
//! {"testResults": [{"name": "/w/dist/test/a.test.js", "status": "failed",
//!   "message": "…", "assertionResults": [{"ancestorTitles": ["suite"],
//!   "title": "adds", "status": "failed", "failureMessages": ["Error: …\n
//!   at Object.toBe (/w/test/a.test.ts:7:33)"], "location": {"line": 6,
//!   "column": 7}}]}]}
//! ```
//!
//! A test is named by its suites and title (`suite > adds`), like a test of
//! Node's runner, and located at its file and `location` (the file jest
//! ran, possibly compiled; the sensor maps it back to its source). A test
//! file that failed to run (an import that does not resolve) is one failure
//! named by its file, as Node names one. `pending`, `skipped`, `todo` and
//! `disabled` tests are neither passes nor failures. The report is one JSON
//! document: a truncated or malformed one is an error, never a partial
//! result. This module is a pure function of the bytes and reads any input
//! without panicking (property tests below).

use serde::Deserialize;

use super::tap::{Outcome, TapResult, TapRun};

/// The flags that make jest write its report to `file`, located tests
/// included: put after the `jest` word of the project's script, where
/// `npm test -- <flags>` would put them when jest ends it.
pub(super) fn report_flags(file: &std::path::Path) -> Vec<String> {
    vec![
        "--json".to_owned(),
        format!("--outputFile={}", file.display()),
        "--testLocationInResults".to_owned(),
    ]
}

#[derive(Deserialize)]
struct Report {
    #[serde(rename = "testResults")]
    test_results: Vec<FileResult>,
}

#[derive(Deserialize)]
struct FileResult {
    /// The test file's absolute path.
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(rename = "assertionResults", default)]
    assertion_results: Vec<Assertion>,
}

#[derive(Deserialize)]
struct Assertion {
    #[serde(rename = "ancestorTitles", default)]
    ancestor_titles: Vec<String>,
    title: String,
    status: String,
    #[serde(rename = "failureMessages", default)]
    failure_messages: Vec<String>,
    #[serde(default)]
    location: Option<Location>,
}

#[derive(Deserialize)]
struct Location {
    line: u32,
    column: u32,
}

/// Reads a jest JSON report; an error saying why when it is not one.
pub fn parse(bytes: &[u8]) -> Result<TapRun, String> {
    let report: Report = serde_json::from_slice(bytes)
        .map_err(|error| format!("not jest's JSON report: {error}"))?;
    let mut results = Vec::new();
    for file in report.test_results {
        if file.assertion_results.is_empty() && file.status == "failed" {
            // The file failed to run: its message says why.
            results.push(TapResult {
                path: vec![file.name.clone()],
                outcome: Outcome::Failed,
                suite: false,
                failure_type: Some("suiteFailedToRun".to_owned()),
                location: Some(format!("{}:1:1", file.name)),
                stack: frames(&file.message),
                detail: readable(&file.message),
            });
            continue;
        }
        for test in file.assertion_results {
            let outcome = match test.status.as_str() {
                "passed" => Outcome::Passed,
                "failed" => Outcome::Failed,
                _ => Outcome::Skipped,
            };
            let (line, column) = test
                .location
                .map_or((1, 1), |at| (at.line.max(1), at.column.max(1)));
            let message = test.failure_messages.join("\n");
            let mut path = test.ancestor_titles;
            path.push(test.title);
            results.push(TapResult {
                path,
                outcome,
                suite: false,
                failure_type: None,
                location: Some(format!("{}:{line}:{column}", file.name)),
                stack: frames(&message),
                detail: readable(&message),
            });
        }
    }
    Ok(TapRun {
        results,
        unread_lines: 0,
    })
}

/// The stack frames of a failure message, innermost first: `Object.toBe
/// (/w/test/a.test.ts:7:33)` of each `at …` line.
fn frames(message: &str) -> Vec<String> {
    message
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("at "))
        .map(str::to_owned)
        .collect()
}

/// The message as a person reads it: the frames inside installed packages
/// (jest's own) left out.
fn readable(message: &str) -> String {
    message
        .lines()
        .filter(|line| !(line.trim_start().starts_with("at ") && line.contains("/node_modules/")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const RECORDED: &str =
        include_str!("../../../tests/fixtures/recorded/typescript/jest.json");

    #[test]
    fn the_recorded_report_reads_as_what_jest_reported() {
        let run = parse(RECORDED.as_bytes()).unwrap();
        let failed: Vec<(String, Option<&str>)> = run
            .results
            .iter()
            .filter(|r| r.is_counterexample())
            .map(|r| (r.name(), r.location.as_deref()))
            .collect();
        assert_eq!(
            failed,
            [
                (
                    "discounted > a quarter off 200 is 150".to_owned(),
                    Some("/w/dist/test/discount.test.js:6:7")
                ),
                (
                    "outer > it's « inner » > fails (once) [a|b]".to_owned(),
                    Some("/w/dist/test/more.test.js:5:9")
                ),
                (
                    "outer > throws".to_owned(),
                    Some("/w/dist/test/more.test.js:11:7")
                ),
                (
                    "/w/dist/test/broken.test.js".to_owned(),
                    Some("/w/dist/test/broken.test.js:1:1")
                ),
            ]
        );
        assert_eq!(run.passed(), 1, "a skip and a todo are no passes");
        let quarter = &run.results[0];
        assert_eq!(
            quarter.stack[0],
            "Object.toBe (/w/test/discount.test.ts:7:33)"
        );
        assert!(
            quarter.detail.contains("Expected: 150\nReceived: 250"),
            "{}",
            quarter.detail
        );
        assert!(
            !quarter.detail.contains("node_modules"),
            "{}",
            quarter.detail
        );
        let broken = run.results.last().unwrap();
        assert!(
            broken.detail.contains("Cannot find module './nope'"),
            "{}",
            broken.detail
        );
    }

    #[test]
    fn what_is_no_whole_report_is_refused() {
        assert!(parse(b"").is_err());
        assert!(parse(b"{}").is_err());
        let cut = &RECORDED.as_bytes()[..RECORDED.len() / 2];
        let error = parse(cut).unwrap_err();
        assert!(error.starts_with("not jest's JSON report"), "{error}");
        assert_eq!(parse(br#"{"testResults": []}"#).unwrap(), TapRun::default());
    }
}

/// The property tests (`scripts/fuzz.sh` runs every `fuzz_tests` module longer).
#[cfg(test)]
mod fuzz_tests {
    use proptest::prelude::*;
    use trellis_core::fuzz;

    use super::tests::RECORDED;
    use super::*;

    proptest! {
        #![proptest_config(fuzz::config(96))]

        /// The recorded report with bytes damaged, cut or repeated: read or
        /// refused within bounds, never a panic.
        #[test]
        fn a_damaged_report_is_read_or_refused_within_bounds(
            bytes in fuzz::mutated(RECORDED.as_bytes().to_vec())
        ) {
            let read = fuzz::bounded("jest::parse", fuzz::budget(bytes.len()), || parse(&bytes));
            if let Ok(run) = read {
                prop_assert!(run.passed() as usize <= run.results.len());
            }
        }

        /// The recorded report with one JSON node removed, replaced by an
        /// oddity, duplicated or wrapped: read or refused, never a panic.
        #[test]
        fn a_structurally_edited_report_is_read_or_refused(edit in fuzz::json_edit()) {
            let value: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
            let text = fuzz::apply_json(&value, &edit);
            let _ = fuzz::bounded("jest::parse", fuzz::budget(text.len()), || parse(text.as_bytes()));
        }

        /// The same report with its members reordered and respaced reads the
        /// same.
        #[test]
        fn a_rewritten_report_reads_the_same(order in any::<u64>()) {
            let value: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
            let rewritten = fuzz::rewrite_json(&value, order);
            prop_assert_eq!(parse(rewritten.as_bytes()), parse(RECORDED.as_bytes()));
        }

        /// Arbitrary bytes: never a panic.
        #[test]
        fn any_bytes_are_read_or_refused(bytes in any::<Vec<u8>>()) {
            let _ = parse(&bytes);
        }
    }
}
