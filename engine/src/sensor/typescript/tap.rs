//! What Node's test runner reports through `--test-reporter=tap`, read as
//! test results.
//!
//! ```text
//! # Subtest: summary
//!     # Subtest: names the series
//!     not ok 1 - names the series
//!       ---
//!       location: '/w/test/report.test.ts:6:3'
//!       error: |-
//!         Expected values to be strictly equal:
//!       stack: |-
//!         summary (/w/src/report.ts:3:29)
//!       ...
//!     1..1
//! not ok 1 - summary
//! ```
//!
//! A test nested in suites is named by the path to it (`summary > names the
//! series`); a suite that failed only because a test inside it failed is
//! no failure of its own. Paths are as Node printed them (absolute, in the
//! measured tree); the sensor makes them workspace-relative. This module is
//! a pure function of the text and reads any input without panicking
//! (property tests below).

/// How a test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// `# SKIP` or `# TODO`: neither a pass nor a failure.
    Skipped,
}

/// One `ok` / `not ok` line and the diagnostics block below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapResult {
    /// The suites around the test and its own name, outermost first.
    pub path: Vec<String>,
    pub outcome: Outcome,
    /// `type: 'suite'`.
    pub suite: bool,
    /// `failureType`, such as `testCodeFailure` or `subtestsFailed`.
    pub failure_type: Option<String>,
    /// `location`: `<file>:<line>:<column>` where the test is declared.
    pub location: Option<String>,
    /// The stack's frames, innermost first, as printed.
    pub stack: Vec<String>,
    /// The diagnostics block as a person reads it: every key but the
    /// timing, which differs from run to run.
    pub detail: String,
}

impl TapResult {
    /// `suite > test`.
    pub fn name(&self) -> String {
        self.path.join(" > ")
    }

    /// A failure of its own: not a suite that failed only through the
    /// tests inside it.
    pub fn is_counterexample(&self) -> bool {
        self.outcome == Outcome::Failed
            && !(self.suite && self.failure_type.as_deref() == Some("subtestsFailed"))
    }
}

/// Everything read from one report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TapRun {
    pub results: Vec<TapResult>,
    /// Lines that are no part of TAP: counted, so the stage can say so.
    pub unread_lines: usize,
}

impl TapRun {
    /// Tests (not suites) that passed.
    pub fn passed(&self) -> u32 {
        let passed = self
            .results
            .iter()
            .filter(|r| r.outcome == Outcome::Passed && !r.suite)
            .count();
        u32::try_from(passed).unwrap_or(u32::MAX)
    }
}

/// The most a failure keeps of what was printed before it.
const PRINTED_CAP: usize = 16 * 1024;

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Reads a TAP report. CR LF line ends read as LF.
pub fn parse(text: &str) -> TapRun {
    let lines: Vec<&str> = text
        .lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let mut run = TapRun::default();
    let mut subtests: Vec<(usize, String)> = Vec::new();
    // What a test file printed (Node writes it as comments before the
    // file's result): the reason a file that could not load failed.
    let mut printed: Vec<&str> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        let indent = indentation(line);
        let content = &line[indent..];
        if let Some(name) = content.strip_prefix("# Subtest: ") {
            subtests.retain(|(at, _)| *at < indent);
            subtests.push((indent, unescape(name)));
            continue;
        }
        let Some((outcome, name)) = test_line(content) else {
            if let Some(comment) = content.strip_prefix("# ") {
                printed.push(comment);
                while printed.iter().map(|l| l.len()).sum::<usize>() > PRINTED_CAP {
                    printed.remove(0);
                }
            } else if !is_known_line(content) {
                run.unread_lines += 1;
            }
            continue;
        };
        subtests.retain(|(at, _)| *at < indent);
        let mut path: Vec<String> = subtests.iter().map(|(_, name)| name.clone()).collect();
        path.push(name);
        let mut result = TapResult {
            path,
            outcome,
            suite: false,
            failure_type: None,
            location: None,
            stack: Vec::new(),
            detail: String::new(),
        };
        let block_indent = indent + 2;
        if lines
            .get(index)
            .is_some_and(|next| indentation(next) == block_indent && next.trim() == "---")
        {
            let start = index + 1;
            let end = lines[start..]
                .iter()
                .position(|l| indentation(l) == block_indent && l.trim() == "...")
                .map_or(lines.len(), |at| start + at);
            read_block(&lines[start..end], block_indent, &mut result);
            index = (end + 1).min(lines.len());
        }
        if outcome == Outcome::Failed && !printed.is_empty() {
            result.detail = format!("printed:\n{}\n{}", printed.join("\n"), result.detail);
        }
        printed.clear();
        run.results.push(result);
    }
    run
}

/// `ok 3 - name # SKIP why` / `not ok 1 - name`: the outcome and the name.
fn test_line(content: &str) -> Option<(Outcome, String)> {
    let (failed, rest) = if let Some(rest) = content.strip_prefix("not ok ") {
        (true, rest)
    } else {
        (false, content.strip_prefix("ok ")?)
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = &rest[digits..];
    let rest = rest
        .strip_prefix(" - ")
        .or_else(|| rest.strip_prefix(' '))
        .unwrap_or(rest);
    let (name, directive) = split_directive(rest);
    let skipped = directive.is_some_and(|d| {
        let d = d.trim_start().to_ascii_uppercase();
        d.starts_with("SKIP") || d.starts_with("TODO")
    });
    let outcome = match (failed, skipped) {
        (_, true) => Outcome::Skipped,
        (true, false) => Outcome::Failed,
        (false, false) => Outcome::Passed,
    };
    Some((outcome, unescape(name)))
}

/// The name and the directive after its first unescaped ` # `.
fn split_directive(rest: &str) -> (&str, Option<&str>) {
    let bytes = rest.as_bytes();
    let mut escaped = false;
    for (at, &b) in bytes.iter().enumerate() {
        match b {
            b'\\' if !escaped => escaped = true,
            b'#' if !escaped && at > 0 && bytes[at - 1] == b' ' => {
                return (rest[..at - 1].trim_end(), Some(&rest[at + 1..]));
            }
            _ => escaped = false,
        }
    }
    (rest, None)
}

/// TAP escapes `#` and `\` in names.
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('#' | '\\'))) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The lines Node prints that carry no result: the version, plans, the
/// summary and other comments (a test file's stderr is printed as `#`
/// comments), blank lines, and a block's end.
fn is_known_line(content: &str) -> bool {
    content.is_empty()
        || content.starts_with('#')
        || content.starts_with("TAP version")
        || content.starts_with("1..")
        || content == "..."
        || content == "---"
}

/// Reads a diagnostics block (YAML, as Node writes it) into `result`.
fn read_block(lines: &[&str], indent: usize, result: &mut TapResult) {
    let mut detail = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        at += 1;
        if indentation(line) != indent {
            continue;
        }
        let Some((key, value)) = line[indent..].split_once(':') else {
            continue;
        };
        let value = value.trim();
        // A block scalar or nested value: the lines indented below the key.
        let nested_end = lines[at..]
            .iter()
            .position(|l| !l.trim().is_empty() && indentation(l) <= indent)
            .map_or(lines.len(), |end| at + end);
        let nested: Vec<String> = lines[at..nested_end]
            .iter()
            .map(|l| {
                l.get(indent + 2..)
                    .unwrap_or_else(|| l.trim_start())
                    .to_owned()
            })
            .collect();
        at = nested_end;
        let text = if value.starts_with('|')
            || value.starts_with('>')
            || (value.is_empty() && !nested.is_empty())
        {
            nested.join("\n")
        } else {
            scalar(value)
        };
        match key {
            "duration_ms" => continue,
            "location" => result.location = Some(text.clone()),
            "failureType" => result.failure_type = Some(text.clone()),
            "type" => result.suite = text == "suite",
            "stack" => result.stack = text.lines().map(str::to_owned).collect(),
            _ => {}
        }
        if text.contains('\n') {
            detail.push(format!("{key}:\n{text}"));
        } else {
            detail.push(format!("{key}: {text}"));
        }
    }
    result.detail = detail.join("\n");
}

/// A one-line YAML value: quoted (`'it''s'`, `"a\"b"`), `~`, or plain.
fn scalar(value: &str) -> String {
    if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
        return value[1..value.len() - 1].replace("''", "'");
    }
    if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
        return serde_json::from_str(value)
            .unwrap_or_else(|_| value[1..value.len() - 1].to_owned());
    }
    if value == "~" {
        return String::new();
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const RECORDED: &str =
        include_str!("../../../tests/fixtures/recorded/typescript/suites.test.tap");

    #[test]
    fn the_recorded_report_reads_as_what_node_reported() {
        let run = parse(RECORDED);
        assert_eq!(run.unread_lines, 0);
        let failed: Vec<String> = run
            .results
            .iter()
            .filter(|r| r.is_counterexample())
            .map(TapResult::name)
            .collect();
        assert_eq!(
            failed,
            [
                "adds",
                "suite > inner fails",
                "suite > nested # hash > deepest fails",
                "/w/test/broken.test.mjs",
            ]
        );
        assert_eq!(
            run.passed(),
            2,
            "`ok` and `inner passes`; skips and suites are no passes"
        );
        let adds = &run.results[0];
        assert_eq!(adds.location.as_deref(), Some("/w/test/a.test.mjs:4:1"));
        assert_eq!(
            adds.stack[0],
            "TestContext.<anonymous> (file:///w/test/a.test.mjs:5:10)"
        );
        assert!(
            adds.detail
                .contains("failureType: testCodeFailure\nerror:\nExpected values"),
            "{}",
            adds.detail
        );
        assert!(!adds.detail.contains("duration_ms"));
        let inner = run
            .results
            .iter()
            .find(|r| r.name() == "suite > inner fails")
            .unwrap();
        assert!(
            inner.detail.contains("error:\nboom\nline two"),
            "{}",
            inner.detail
        );
        assert!(
            run.results
                .iter()
                .any(|r| r.name() == "skipped" && r.outcome == Outcome::Skipped)
        );
        let broken = run.results.last().unwrap();
        assert!(broken.detail.starts_with("printed:\n"), "{}", broken.detail);
        assert!(
            broken
                .detail
                .contains("Cannot find module '/w/test/nope.mjs'"),
            "{}",
            broken.detail
        );
    }

    #[test]
    fn directives_escapes_and_crlf_are_read() {
        let run = parse(
            "TAP version 13\r\nnot ok 1 - a \\# b # TODO later\r\nok 2 - c\\\\d\r\nnot ok 3 - e # skip\r\nstray\r\n",
        );
        let names: Vec<(String, Outcome)> =
            run.results.iter().map(|r| (r.name(), r.outcome)).collect();
        assert_eq!(
            names,
            [
                ("a # b".to_owned(), Outcome::Skipped),
                ("c\\d".to_owned(), Outcome::Passed),
                ("e".to_owned(), Outcome::Skipped),
            ]
        );
        assert_eq!(run.unread_lines, 1);
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

        /// The recorded report with lines truncated, dropped, repeated and
        /// moved, bytes damaged: read within bounds, never a panic.
        #[test]
        fn a_damaged_report_is_read_within_bounds(bytes in fuzz::mutated_lines(RECORDED)) {
            let text = String::from_utf8_lossy(&bytes);
            let run = fuzz::bounded("tap::parse", fuzz::budget(text.len()), || parse(&text));
            prop_assert!(run.results.len() + run.unread_lines <= text.lines().count());
            prop_assert!(run.passed() as usize <= run.results.len());
        }

        /// Arbitrary text: never a panic.
        #[test]
        fn any_text_is_read_as_a_report(text in any::<String>()) {
            parse(&text);
        }
    }
}
