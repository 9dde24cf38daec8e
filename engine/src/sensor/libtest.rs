//! The human output of `cargo test`, read back into test identities.
//!
//! Stable libtest has no machine format, so this reads its text. Cargo
//! announces each test binary on stderr (`Running unittests src/lib.rs
//! (target/debug/deps/demo-1a2b)`, `Doc-tests demo`) and, after a binary
//! failed, names its re-run selector (``error: test failed, to rerun pass
//! `-p demo --lib` ``). The binary's own output goes to stdout and always
//! starts with `running N tests`. Cargo runs binaries one at a time, so the
//! k-th announcement on stderr belongs to the k-th `running` block on stdout.
//! A custom-harness binary that never prints `running N tests` would shift
//! that pairing; this is the one assumption the parser makes.

use trellis_core::text;

/// A source position as a panic message prints it (`src/lib.rs:12:5`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PanicSite {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

/// One failing test, before its panic site is resolved to a span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedFailure {
    pub binary: String,
    pub name: String,
    pub output: String,
    pub panic_site: Option<PanicSite>,
}

/// What the test binaries reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestRun {
    pub failures: Vec<ParsedFailure>,
    pub passed: u32,
    /// Every test that passed or failed, as `<binary>::<name>` with the
    /// binary as cargo announced it (`unittests src/lib.rs (demo)`) and a
    /// doc test's name without its line (`src/lib.rs - add (line 3)` →
    /// `src/lib.rs - add`), so an edit above a test does not rename it.
    pub ran: Vec<String>,
}

/// Captured output kept per failing test.
pub const OUTPUT_CAP: usize = 8 * 1024;

/// The test name of a failure that belongs to no single test: the binary
/// failed (crashed, aborted, exited from inside a test) without libtest
/// reporting a failing test.
pub const ABNORMAL_EXIT: &str = "<binary exited abnormally>";

/// A test binary as cargo announced it on stderr.
struct Announced {
    /// `unittests src/lib.rs (demo)`, `Doc-tests demo`.
    description: String,
    /// `-p demo --lib`, known only for binaries that failed.
    rerun: Option<String>,
    /// Cargo's `Caused by:` text for a failed binary (`process didn't exit
    /// successfully: ... (signal: 6, SIGABRT ...)`).
    cause: String,
}

impl Announced {
    /// The selector that re-runs exactly this binary when cargo gave one
    /// (`cargo test -p demo --lib`), else the announcement.
    fn identity(&self) -> String {
        self.rerun
            .clone()
            .unwrap_or_else(|| self.description.clone())
    }
}

fn announced_binaries(stderr: &str) -> Vec<Announced> {
    let mut binaries: Vec<Announced> = Vec::new();
    let mut in_cause = false;
    for raw in stderr.lines() {
        let line = raw.trim();
        let announced = |description: String| Announced {
            description,
            rerun: None,
            cause: String::new(),
        };
        // Status lines are indented too, so they are recognised first.
        if let Some(running) = line.strip_prefix("Running ") {
            binaries.push(announced(describe_running(running)));
        } else if line.starts_with("Doc-tests ") {
            binaries.push(announced(line.to_owned()));
        } else if in_cause && raw.starts_with(char::is_whitespace) && !line.is_empty() {
            if let Some(last) = binaries.last_mut() {
                last.cause.push_str(line);
                last.cause.push('\n');
            }
            continue;
        } else if line == "Caused by:" {
            in_cause = true;
            continue;
        } else if let Some(selector) = rerun_selector(line)
            && let Some(last) = binaries.last_mut()
        {
            last.rerun = Some(selector.to_owned());
        }
        in_cause = false;
    }
    binaries
}

/// ``error: test failed, to rerun pass `-p demo --lib` `` → `-p demo --lib`.
fn rerun_selector(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("error: test failed, to rerun pass `")
        .or_else(|| line.strip_prefix("error: doctest failed, to rerun pass `"))?;
    rest.strip_suffix('`')
}

/// `unittests src/lib.rs (/t/debug/deps/demo-1a2b)` → `unittests src/lib.rs
/// (demo)`: the target directory and the build hash say nothing about which
/// test this is and differ between branch slots.
fn describe_running(running: &str) -> String {
    let Some((what, executable)) = running
        .strip_suffix(')')
        .and_then(|rest| rest.rsplit_once(" ("))
    else {
        return running.to_owned();
    };
    let file = executable.rsplit(['/', '\\']).next().unwrap_or(executable);
    let file = file.strip_suffix(".exe").unwrap_or(file);
    let name = match file.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name,
        _ => file,
    };
    format!("{what} ({name})")
}

/// Where the lines of stdout are, relative to libtest's report structure.
enum Section {
    /// Result lines and headers.
    Results,
    /// Inside `---- name stdout ----`: the failing test's captured output.
    Captured { name: String, output: String },
}

/// Read libtest's stdout `lines` (everything after cargo's JSON) and cargo's
/// `stderr` into failures with identities and a pass count.
pub fn parse_test_run<'a>(lines: impl IntoIterator<Item = &'a str>, stderr: &str) -> TestRun {
    let binaries = announced_binaries(stderr);
    let mut run = TestRun::default();
    let mut blocks_with_failures = std::collections::HashSet::new();
    // Index into `binaries` of the block being read; `None` before the first.
    let mut block: Option<usize> = None;
    let mut block_failures: Vec<ParsedFailure> = Vec::new();
    let mut section = Section::Results;

    for line in lines {
        let line = line.trim_end_matches('\r');
        if let Some(name) = capture_header(line) {
            finish_capture(&mut section, &mut block_failures);
            section = Section::Captured {
                name: name.to_owned(),
                output: String::new(),
            };
            continue;
        }
        if let Section::Captured { output, .. } = &mut section {
            if line != "failures:" && !line.starts_with("test result: ") {
                output.push_str(line);
                output.push('\n');
                continue;
            }
            finish_capture(&mut section, &mut block_failures);
        }
        if is_block_header(line) {
            run.failures.append(&mut block_failures);
            block = Some(block.map_or(0, |index| index + 1));
            continue;
        }
        let Some((name, outcome)) = result_line(line) else {
            continue;
        };
        if matches!(outcome, "ok" | "FAILED") {
            let binary = block
                .and_then(|index| binaries.get(index))
                .map_or("unknown test binary", |b| b.description.as_str());
            run.ran.push(format!("{binary}::{}", without_line(name)));
        }
        match outcome {
            "ok" => run.passed += 1,
            "FAILED" => {
                blocks_with_failures.insert(block);
                block_failures.push(ParsedFailure {
                    binary: block
                        .and_then(|index| binaries.get(index))
                        .map_or_else(|| "unknown test binary".to_owned(), Announced::identity),
                    name: name.to_owned(),
                    output: String::new(),
                    panic_site: None,
                });
            }
            _ => {}
        }
    }
    finish_capture(&mut section, &mut block_failures);
    run.failures.append(&mut block_failures);
    // Cargo says these binaries failed, yet libtest named no failing test.
    for (index, binary) in binaries.iter().enumerate() {
        if binary.rerun.is_some() && !blocks_with_failures.contains(&Some(index)) {
            run.failures.push(ParsedFailure {
                binary: binary.identity(),
                name: ABNORMAL_EXIT.to_owned(),
                output: cap_output(binary.cause.trim_end()),
                panic_site: None,
            });
        }
    }
    run
}

/// A doc test's name without the line libtest appends: `src/lib.rs -
/// add (line 3)` → `src/lib.rs - add`.
fn without_line(name: &str) -> &str {
    match name.rsplit_once(" (line ") {
        Some((item, line))
            if line
                .strip_suffix(')')
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())) =>
        {
            item
        }
        _ => name,
    }
}

/// `running 3 tests` / `running 1 test`.
pub fn is_block_header(line: &str) -> bool {
    line.strip_prefix("running ")
        .and_then(|rest| rest.strip_suffix(" tests").or(rest.strip_suffix(" test")))
        .is_some_and(|count| count.parse::<u32>().is_ok())
}

/// `test tests::adds ... ok` → (`tests::adds`, `ok`).
fn result_line(line: &str) -> Option<(&str, &str)> {
    let (name, outcome) = line.strip_prefix("test ")?.rsplit_once(" ... ")?;
    let name = name.strip_suffix(" - should panic").unwrap_or(name);
    Some((name, outcome.trim()))
}

/// `---- tests::adds stdout ----` → `tests::adds`.
fn capture_header(line: &str) -> Option<&str> {
    let inner = line.strip_prefix("---- ")?.strip_suffix(" ----")?;
    inner
        .strip_suffix(" stdout")
        .or_else(|| inner.strip_suffix(" stderr"))
}

/// Attach a finished capture section to its failure in the current block.
fn finish_capture(section: &mut Section, failures: &mut [ParsedFailure]) {
    let Section::Captured { name, output } = std::mem::replace(section, Section::Results) else {
        return;
    };
    let Some(failure) = failures.iter_mut().find(|failure| failure.name == name) else {
        return;
    };
    failure.panic_site = output.lines().find_map(panic_site);
    failure.output = cap_output(output.trim_matches('\n'));
}

pub(super) fn cap_output(output: &str) -> String {
    if output.len() <= OUTPUT_CAP {
        return output.to_owned();
    }
    format!("{}\n[output truncated]", text::head(output, OUTPUT_CAP))
}

/// The position in `thread 'x' panicked at src/lib.rs:12:5:` (Rust ≥ 1.73)
/// or `thread 'x' panicked at 'msg', src/lib.rs:12:5` (older).
fn panic_site(line: &str) -> Option<PanicSite> {
    let (_, after) = line.split_once(" panicked at ")?;
    let location = after.trim_end().trim_end_matches(':');
    let location = location.rsplit(", ").next().unwrap_or(location);
    let mut parts = location.rsplitn(3, ':');
    let column = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let file = parts.next()?;
    Some(PanicSite {
        file: file.to_owned(),
        line,
        column,
    })
}

/// Adapters and conversions a test applies to a result, which say nothing
/// about the code under test.
const NOT_UNDER_TEST: &[&str] = &[
    "and_then",
    "as_deref",
    "as_mut",
    "as_ref",
    "as_slice",
    "as_str",
    "borrow",
    "clone",
    "collect",
    "expect",
    "into",
    "into_iter",
    "is_empty",
    "is_err",
    "is_none",
    "is_ok",
    "is_some",
    "iter",
    "len",
    "map",
    "ok",
    "to_owned",
    "to_string",
    "to_vec",
    "unwrap",
    "unwrap_err",
    "unwrap_or",
    "unwrap_or_default",
];

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "else", "fn", "for", "if", "impl",
    "in", "let", "loop", "match", "move", "mut", "ref", "return", "static", "unsafe", "where",
    "while",
];

/// The functions a failing test calls before it fails: every `name(` and
/// `.name(` in its body from `fn <test>` down to the panic line (only the
/// panic line when the test was generated by a macro and has no `fn` of
/// its own), without macros, type constructors, keywords and the adapters
/// of [`NOT_UNDER_TEST`]. Sorted and deduplicated. Failures that call the
/// same function are likely to share its bug, which is how
/// `cluster::assess` groups tests that fail at different assertions.
pub fn called_functions(source: &str, test_name: &str, panic_line: u32) -> Vec<String> {
    let own = test_name.rsplit("::").next().unwrap_or(test_name);
    let lines: Vec<&str> = source.lines().collect();
    let Some(end) = usize::try_from(panic_line)
        .ok()
        .filter(|&l| l >= 1 && l <= lines.len())
    else {
        return Vec::new();
    };
    let header = format!("fn {own}(");
    let start = lines[..end]
        .iter()
        .rposition(|line| line.contains(&header))
        .unwrap_or(end - 1);
    let mut calls: Vec<String> = lines[start..end]
        .iter()
        .flat_map(|line| calls_on_line(line))
        .filter(|name| name != own)
        .collect();
    calls.sort();
    calls.dedup();
    calls
}

/// The 1-based line and column of the first definition `fn name(` (or
/// `fn name<`) in `source`.
pub fn definition(source: &str, name: &str) -> Option<(u32, u32)> {
    let (plain, generic) = (format!("fn {name}("), format!("fn {name}<"));
    source.lines().enumerate().find_map(|(index, line)| {
        let at = line.find(&plain).or_else(|| line.find(&generic))?;
        let column = line[..at].chars().count() + 1;
        Some((u32::try_from(index + 1).ok()?, u32::try_from(column).ok()?))
    })
}

/// A function defined at `line` of the test file `path` is test code, not
/// code under test: the file is an integration test (under `tests/`) or the
/// definition follows the file's `#[cfg(test)]`. Such a helper is left out
/// of a failure's calls; when the failure happens inside it, the panic site
/// it shares with the other tests through it groups them.
pub fn is_test_helper(path: &str, source: &str, line: u32) -> bool {
    if path.starts_with("tests/") || path.contains("/tests/") {
        return true;
    }
    source
        .lines()
        .position(|text| text.trim() == "#[cfg(test)]")
        .is_some_and(|index| index + 1 < line as usize)
}

/// The callees named on one line of Rust, outside string literals and
/// comments.
fn calls_on_line(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut calls = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            break;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let defined = chars[..start]
                .iter()
                .collect::<String>()
                .trim_end()
                .ends_with("fn");
            if chars.get(i) == Some(&'(')
                && !defined
                && !name.starts_with(|c: char| c.is_uppercase())
                && !KEYWORDS.contains(&name.as_str())
                && !NOT_UNDER_TEST.contains(&name.as_str())
            {
                calls.push(name);
            }
            continue;
        }
        i += 1;
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    const STDERR: &str = "   Compiling demo v0.1.0 (/w)
     Running unittests src/lib.rs (/t/debug/deps/demo-3110576fc3c3c96d)
error: test failed, to rerun pass `-p demo --lib`
     Running tests/it.rs (/t/debug/deps/it-e78ea17bd32e905b)
   Doc-tests demo
";

    const STDOUT: &str = "
running 2 tests
test tests::ok ... ok
test tests::bad ... FAILED

failures:

---- tests::bad stdout ----
hello

thread 'tests::bad' (10800) panicked at src/lib.rs:5:52:
assertion failed

failures:
    tests::bad

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out

running 1 test
test integ - should panic ... ok

test result: ok. 1 passed; 0 failed

running 0 tests
";

    #[test]
    fn failures_keep_binary_identity_output_and_site() {
        let run = parse_test_run(STDOUT.lines(), STDERR);
        assert_eq!(run.passed, 2);
        assert_eq!(run.failures.len(), 1);
        let failure = &run.failures[0];
        assert_eq!(failure.binary, "-p demo --lib");
        assert_eq!(failure.name, "tests::bad");
        assert!(failure.output.starts_with("hello"), "{}", failure.output);
        assert_eq!(
            failure.panic_site,
            Some(PanicSite {
                file: "src/lib.rs".into(),
                line: 5,
                column: 52
            })
        );
    }

    #[test]
    fn a_binary_that_died_without_a_failing_test_is_one_failure() {
        let stderr = "     Running unittests src/lib.rs (/t/debug/deps/e-d294a99d2b35f633)
error: test failed, to rerun pass `--lib`

Caused by:
  process didn't exit successfully: `/t/debug/deps/e-d294` (signal: 6, SIGABRT)
   Doc-tests e
";
        let stdout = "\nrunning 1 test\n\nrunning 0 tests\n\ntest result: ok. 0 passed\n";
        let run = parse_test_run(stdout.lines(), stderr);
        assert_eq!(
            run.failures,
            vec![ParsedFailure {
                binary: "--lib".into(),
                name: ABNORMAL_EXIT.into(),
                output:
                    "process didn't exit successfully: `/t/debug/deps/e-d294` (signal: 6, SIGABRT)"
                        .into(),
                panic_site: None,
            }]
        );
    }

    #[test]
    fn binaries_without_rerun_hint_are_named_by_announcement() {
        assert_eq!(
            describe_running("tests/it.rs (/t/debug/deps/it-e78ea17bd32e905b)"),
            "tests/it.rs (it)"
        );
    }

    #[test]
    fn every_test_that_passed_or_failed_is_named_by_its_binary_and_doc_tests_without_lines() {
        let stderr = "     Running unittests src/lib.rs (target/debug/deps/demo-1a2b3c)\n   \
                      Doc-tests demo\n";
        let stdout = "running 3 tests\ntest tests::adds ... ok\ntest tests::slow ... ignored\n\
                      test tests::subs ... FAILED\n\nrunning 1 test\n\
                      test src/lib.rs - add (line 3) ... ok\n";
        let run = parse_test_run(stdout.lines(), stderr);
        assert_eq!(
            run.ran,
            [
                "unittests src/lib.rs (demo)::tests::adds",
                "unittests src/lib.rs (demo)::tests::subs",
                "Doc-tests demo::src/lib.rs - add",
            ]
        );
    }

    #[test]
    fn old_panic_format_is_understood() {
        assert_eq!(
            panic_site("thread 'a' panicked at 'boom', src/x.rs:3:9"),
            Some(PanicSite {
                file: "src/x.rs".into(),
                line: 3,
                column: 9
            })
        );
    }

    #[test]
    fn long_output_is_capped_on_a_char_boundary() {
        let long = "é".repeat(OUTPUT_CAP);
        let capped = cap_output(&long);
        assert!(capped.len() <= OUTPUT_CAP + "\n[output truncated]".len());
        assert!(capped.ends_with("[output truncated]"));
    }

    #[test]
    fn the_functions_a_test_calls_before_failing_are_named() {
        let source = "pub fn price(c: u32) -> u32 { c }

#[test]
fn prices_a_cent() {
    let got = price(1); // not `comment(`
    assert_eq!(got.clone(), \"x(\".len() as u32);
    helper(2);
}
";
        assert_eq!(
            called_functions(source, "tests::prices_a_cent", 6),
            ["price"]
        );
        assert_eq!(
            called_functions(source, "prices_a_cent", 7),
            ["helper", "price"],
            "lines after the panic are not read"
        );
        assert!(called_functions(source, "x", 99).is_empty(), "no such line");
    }

    #[test]
    fn a_definition_is_found_by_its_fn_line() {
        let source = "mod a {\n    pub fn total<T>(x: T) {}\n}\nfn total_cents() {}\n";
        assert_eq!(definition(source, "total"), Some((2, 9)));
        assert_eq!(definition(source, "total_cents"), Some((4, 1)));
        assert_eq!(definition(source, "tot"), None);
    }

    #[test]
    fn helpers_in_test_code_are_not_code_under_test() {
        let source = "fn total() {}\n#[cfg(test)]\nmod tests {\n    fn close() {}\n}\n";
        assert!(!is_test_helper("src/lib.rs", source, 1));
        assert!(is_test_helper("src/lib.rs", source, 4));
        assert!(is_test_helper("tests/it.rs", "fn f() {}", 1));
        assert!(is_test_helper("app/tests/it.rs", "fn f() {}", 1));
    }

    #[test]
    fn a_macro_generated_test_is_read_at_its_panic_line_only() {
        let source = "fn a() {}\ncheck!(one: total(&[1]) => 2);\n";
        assert_eq!(called_functions(source, "tests::one", 2), ["total"]);
    }
}
