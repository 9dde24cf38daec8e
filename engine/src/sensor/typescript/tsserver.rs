//! Code fixes from the TypeScript language service, as suggestions.
//!
//! `tsserver` speaks JSON over stdio: one request per line in, framed
//! answers (`Content-Length: N`, a blank line, N bytes of JSON) out. It
//! answers its requests in order and exits when its input ends, so one run
//! is one batch: [`requests`] writes an `open` for every file with an error
//! and a `getCodeFixes` for every error site, the process runs bounded like
//! every other tool with that file as its input, and [`read_frames`] and
//! [`suggestion`] read what it answered, after it exited. No session is
//! kept between runs, so nothing can go stale between measurements.
//!
//! Each fix becomes one alternative of the diagnostic's suggestion group,
//! verified like any other candidate. A fix that would silence the checker
//! (`// @ts-ignore`), run a command (install a types package) or create a
//! file is never offered; one that inserts a stub throwing "not
//! implemented" is kept as [`Applicability::HasPlaceholders`], which the
//! proposer never applies. The parsing here is pure and reads any bytes
//! without panicking (`tests` below).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::process::Command;

use super::position::{self, span_of};
use crate::diagnostic::{
    Applicability, Diagnostic, Fixer, Level, Replacement, Suggestion, SuggestionGroup,
};
use crate::sensor::SensorRun;
use crate::sensor::process::{Confinement, ProcessLimits, run_bounded_with_input};
use crate::sensor::rustc_json::WorkspacePaths;
use crate::workspace_path::WorkspacePath;

/// Error sites asked about per run: a cascade of one missing name is one
/// site per file and name, so this bounds the work on a broken tree
/// without starving the distinct causes.
const MAX_SITES: usize = 48;

/// Flags for a batch run: no automatic `@types` downloads, no background
/// diagnostics events (only the answers are read).
const ARGS: &[&str] = &[
    "--disableAutomaticTypingAcquisition",
    "--suppressDiagnosticEvents",
];

/// One error to ask fixes for: the file, the 1-based line and UTF-16
/// offsets tsserver counts in, and tsc's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FixSite {
    pub path: WorkspacePath,
    pub start: (u32, u32),
    pub end: (u32, u32),
    pub code: u32,
}

/// The error sites of `diagnostics` worth asking about, and for each
/// diagnostic the site that speaks for it (the same file, code and token
/// share one answer). `texts` are the workspace files' contents.
fn sites(
    diagnostics: &[Diagnostic],
    texts: &HashMap<WorkspacePath, String>,
) -> (Vec<FixSite>, Vec<Option<usize>>) {
    let mut sites = Vec::new();
    let mut known: HashMap<(WorkspacePath, u32, String), usize> = HashMap::new();
    let speakers = diagnostics
        .iter()
        .map(|diagnostic| {
            if diagnostic.level != Level::Error {
                return None;
            }
            let code: u32 = diagnostic
                .code
                .as_deref()?
                .strip_prefix("TS")?
                .parse()
                .ok()?;
            let span = diagnostic.primary.as_ref()?;
            let text = texts.get(&span.path)?;
            let token = text.get(span.byte_start as usize..span.byte_end as usize)?;
            let key = (span.path.clone(), code, token.to_owned());
            if let Some(&site) = known.get(&key) {
                return Some(site);
            }
            if sites.len() == MAX_SITES {
                return None;
            }
            sites.push(FixSite {
                path: span.path.clone(),
                start: position::line_and_utf16_column(text, span.byte_start as usize),
                end: position::line_and_utf16_column(text, span.byte_end as usize),
                code,
            });
            known.insert(key, sites.len() - 1);
            Some(sites.len() - 1)
        })
        .collect();
    (sites, speakers)
}

/// The request lines for `sites` in the tree at `dir`: every file opened
/// once, then one `getCodeFixes` per site, whose answer carries
/// `request_seq` = the site's index + [`FIRST_FIX_SEQ`].
pub(super) fn requests(dir: &Path, sites: &[FixSite]) -> String {
    let file = |path: &str| dir.join(path).to_string_lossy().into_owned();
    let mut lines = Vec::new();
    let mut opened: Vec<&str> = Vec::new();
    for site in sites {
        if !opened.contains(&site.path.as_str()) {
            opened.push(&site.path);
        }
    }
    for (seq, path) in opened.iter().enumerate() {
        lines.push(json!({
            "seq": seq + 1,
            "type": "request",
            "command": "open",
            "arguments": {"file": file(path), "projectRootPath": dir.to_string_lossy()},
        }));
    }
    for (index, site) in sites.iter().enumerate() {
        lines.push(json!({
            "seq": FIRST_FIX_SEQ + index as u64,
            "type": "request",
            "command": "getCodeFixes",
            "arguments": {
                "file": file(&site.path),
                "startLine": site.start.0,
                "startOffset": site.start.1,
                "endLine": site.end.0,
                "endOffset": site.end.1,
                "errorCodes": [site.code],
            },
        }));
    }
    let mut text = lines
        .iter()
        .map(serde_json::Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

/// Sequence numbers below this are `open` requests.
const FIRST_FIX_SEQ: u64 = 1_000_000;

/// The framed messages of tsserver's output, in order, as JSON values;
/// a frame whose body is no JSON object is counted and skipped, and
/// reading resumes at the next `Content-Length` header.
pub(super) fn read_frames(output: &[u8]) -> (Vec<serde_json::Value>, usize) {
    const HEADER: &[u8] = b"Content-Length: ";
    let find = |from: usize| {
        output
            .get(from..)?
            .windows(HEADER.len())
            .position(|window| window == HEADER)
            .map(|at| from + at)
    };
    let mut messages = Vec::new();
    let mut malformed = 0;
    let mut at = 0;
    while let Some(header) = find(at) {
        let digits_start = header + HEADER.len();
        let digits_len = output[digits_start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let length: Option<usize> =
            std::str::from_utf8(&output[digits_start..digits_start + digits_len])
                .ok()
                .and_then(|digits| digits.parse().ok());
        let body_start = output[digits_start + digits_len..]
            .starts_with(b"\r\n\r\n")
            .then_some(digits_start + digits_len + 4);
        let (Some(length), Some(body_start)) = (length, body_start) else {
            malformed += 1;
            at = digits_start;
            continue;
        };
        let body_end = body_start.saturating_add(length).min(output.len());
        match serde_json::from_slice::<serde_json::Value>(&output[body_start..body_end]) {
            Ok(value) if value.is_object() => {
                messages.push(value);
                at = body_end;
            }
            _ => {
                malformed += 1;
                at = digits_start;
            }
        }
    }
    (messages, malformed)
}

/// A fix as tsserver describes it (`CodeFixAction`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CodeFix {
    fix_name: String,
    description: String,
    changes: Vec<FileEdits>,
    #[serde(default)]
    commands: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileEdits {
    file_name: String,
    text_changes: Vec<TextChange>,
    #[serde(default)]
    is_new_file: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextChange {
    start: At,
    end: At,
    new_text: String,
}

#[derive(Debug, Deserialize)]
struct At {
    line: u32,
    offset: u32,
}

/// The fixes each `getCodeFixes` answer holds, by site index. Answers that
/// failed, name no site or do not have the documented shape are skipped.
pub(super) fn fixes_by_site(messages: &[serde_json::Value]) -> BTreeMap<usize, Vec<CodeFix>> {
    let mut by_site = BTreeMap::new();
    for message in messages {
        let answers_fixes = message["type"] == "response"
            && message["command"] == "getCodeFixes"
            && message["success"] == true;
        let Some(seq) = message["request_seq"].as_u64().filter(|_| answers_fixes) else {
            continue;
        };
        let Some(site) = seq
            .checked_sub(FIRST_FIX_SEQ)
            .and_then(|site| usize::try_from(site).ok())
        else {
            continue;
        };
        if let Ok(fixes) = Vec::<CodeFix>::deserialize(&message["body"]) {
            by_site.insert(site, fixes);
        }
    }
    by_site
}

/// Inserted text that silences the checker instead of fixing the code.
const SILENCERS: &[&str] = &["@ts-ignore", "@ts-expect-error", "@ts-nocheck"];

/// The text the language service puts in a stub it generates.
const STUB_BODY: &str = "not implemented.\")";

/// `fix` as a suggestion on the tree `paths` resolves, or `None` when it
/// is never offered (see the module doc) or names a place outside the
/// workspace's files.
pub(super) fn suggestion(
    fix: &CodeFix,
    paths: &mut WorkspacePaths,
    texts: &mut HashMap<WorkspacePath, Option<String>>,
) -> Option<Suggestion> {
    if fix
        .commands
        .as_ref()
        .is_some_and(|commands| !commands.is_empty())
        || fix.fix_name == "disableJsDiagnostics"
    {
        return None;
    }
    let mut replacements = Vec::new();
    let mut placeholder = false;
    for file in &fix.changes {
        if file.is_new_file {
            return None;
        }
        let path = paths.relative(&file.file_name)?;
        let text = texts
            .entry(path.clone())
            .or_insert_with(|| paths.source(&path))
            .as_deref()?;
        for change in &file.text_changes {
            if SILENCERS.iter().any(|s| change.new_text.contains(s)) {
                return None;
            }
            placeholder |= change.new_text.contains(STUB_BODY);
            let start = position::byte_offset(text, change.start.line, change.start.offset)?;
            let end = position::byte_offset(text, change.end.line, change.end.offset)?;
            if end < start {
                return None;
            }
            replacements.push(Replacement {
                span: span_of(path.clone(), text, start, end),
                text: change.new_text.clone(),
            });
        }
    }
    if replacements.is_empty() {
        return None;
    }
    Some(Suggestion {
        message: fix.description.clone(),
        applicability: if placeholder {
            Applicability::HasPlaceholders
        } else {
            Applicability::MaybeIncorrect
        },
        fixer: Fixer::Tsserver,
        replacements,
    })
}

/// Asks `tsserver` (`program`) for the fixes of every error in
/// `diagnostics` measured in `run.dir`: for each diagnostic, its group of
/// alternatives, or `None`. An error is a reason a person can read; the
/// diagnostics stand without fixes then.
pub(super) async fn code_fixes(
    program: &OsString,
    run: &SensorRun<'_>,
    deadline: Duration,
    diagnostics: &[Diagnostic],
    paths: &mut WorkspacePaths,
) -> Result<Vec<Option<SuggestionGroup>>, String> {
    let mut texts: HashMap<WorkspacePath, Option<String>> = HashMap::new();
    for diagnostic in diagnostics {
        if let Some(span) = &diagnostic.primary {
            texts
                .entry(span.path.clone())
                .or_insert_with(|| paths.source(&span.path));
        }
    }
    let known: HashMap<WorkspacePath, String> = texts
        .iter()
        .filter_map(|(path, text)| Some((path.clone(), text.clone()?)))
        .collect();
    let (sites, speakers) = sites(diagnostics, &known);
    if sites.is_empty() {
        return Ok(vec![None; diagnostics.len()]);
    }
    let input = requests_file(run, &requests(run.dir, &sites))?;
    let mut cmd = Command::new(program);
    cmd.args(ARGS).current_dir(run.dir);
    let sandbox = run.sandbox();
    let output = run_bounded_with_input(
        cmd,
        Confinement::Slot(&sandbox, None),
        input,
        &ProcessLimits::with_deadline(deadline),
        &run.cancel,
    )
    .await
    .map_err(|error| error.to_string())?;
    let (messages, _malformed) = read_frames(&output.stdout);
    let by_site = fixes_by_site(&messages);
    let groups: Vec<Option<SuggestionGroup>> = (0..sites.len())
        .map(|site| {
            let alternatives: Vec<Suggestion> = by_site
                .get(&site)
                .into_iter()
                .flatten()
                .filter_map(|fix| suggestion(fix, paths, &mut texts))
                .collect();
            (!alternatives.is_empty()).then_some(SuggestionGroup { alternatives })
        })
        .collect();
    Ok(speakers
        .into_iter()
        .map(|site| site.and_then(|site| groups[site].clone()))
        .collect())
}

/// The request file for a run in `run.dir`, in the measured tree's own
/// directory (never in the measured tree), opened for reading.
fn requests_file(run: &SensorRun<'_>, requests: &str) -> Result<std::fs::File, String> {
    let own = run.own_target();
    let path = own.join("tsserver.requests");
    std::fs::create_dir_all(&own)
        .and_then(|()| std::fs::write(&path, requests))
        .and_then(|()| std::fs::File::open(&path))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    pub(super) fn zoo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recorded/typescript/zoo")
    }

    pub(super) const RECORDED: &str =
        include_str!("../../../tests/fixtures/recorded/typescript/zoo.tsserver.jsonl");

    /// The recorded answers, framed as tsserver frames them, with the zoo's
    /// real path where the recording has `@ROOT@`.
    pub(super) fn recorded_frames() -> Vec<u8> {
        let root = zoo().canonicalize().unwrap();
        let mut framed = Vec::new();
        for body in RECORDED.lines() {
            let body = body.replace("@ROOT@", &root.to_string_lossy());
            framed.extend(format!("Content-Length: {}\r\n\r\n{body}\n", body.len() + 1).bytes());
        }
        framed
    }

    fn recorded_suggestions() -> BTreeMap<usize, Vec<Suggestion>> {
        let (messages, malformed) = read_frames(&recorded_frames());
        assert_eq!(malformed, 0);
        let mut paths = WorkspacePaths::new(&zoo(), &zoo().join("target")).unwrap();
        let mut texts = HashMap::new();
        fixes_by_site(&messages)
            .into_iter()
            .map(|(site, fixes)| {
                let found = fixes
                    .iter()
                    .filter_map(|fix| suggestion(fix, &mut paths, &mut texts))
                    .collect();
                (site, found)
            })
            .collect()
    }

    #[test]
    fn a_frame_is_read_by_its_length_and_a_broken_one_is_skipped() {
        let framed = b"Content-Length: 25\r\n\r\n{\"seq\":0,\"type\":\"event\"}\n\
                       Content-Length: 9\r\n\r\nnot json\n\
                       Content-Length: x\r\n\r\n\
                       Content-Length: 12\r\n\r\n{\"a\":\"\xc3\xa9 \"}\n";
        let (messages, malformed) = read_frames(framed);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1]["a"], "é ");
        assert_eq!(malformed, 2);
    }

    #[test]
    fn the_recorded_fixes_become_suggestions_and_stubs_are_placeholders() {
        let found = recorded_suggestions();
        let source = std::fs::read_to_string(zoo().join("src/zoo.ts")).unwrap();
        // Site 0: `area` is not imported (zoo.ts line 5).
        let import = &found[&0][0];
        assert_eq!(import.message, "Update import from \"./types.js\"");
        assert_eq!(import.applicability, Applicability::MaybeIncorrect);
        let stub = found[&0]
            .iter()
            .find(|s| s.message.starts_with("Add missing function"))
            .unwrap();
        assert_eq!(stub.applicability, Applicability::HasPlaceholders);
        // Site 1: `totl` has the spelling fix on the token tsc named.
        let spelling = &found[&1][0];
        assert_eq!(spelling.message, "Change spelling to 'total'");
        let span = &spelling.replacements[0].span;
        assert_eq!(
            &source[span.byte_start as usize..span.byte_end as usize],
            "totl"
        );
    }

    #[test]
    fn requests_open_each_file_once_and_number_the_sites() {
        let site = |line| FixSite {
            path: WorkspacePath::new("src/a.ts").unwrap(),
            start: (line, 1),
            end: (line, 4),
            code: 2304,
        };
        let text = requests(Path::new("/w"), &[site(1), site(2)]);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["command"], "open");
        assert_eq!(lines[0]["arguments"]["file"], "/w/src/a.ts");
        assert_eq!(lines[2]["seq"], FIRST_FIX_SEQ + 1);
        assert_eq!(lines[2]["arguments"]["startLine"], 2);
        assert_eq!(lines[2]["arguments"]["errorCodes"][0], 2304);
    }

    #[test]
    fn silencing_commands_and_new_files_are_never_offered() {
        let mut paths = WorkspacePaths::new(&zoo(), &zoo().join("target")).unwrap();
        let file = zoo().join("src/zoo.ts").canonicalize().unwrap();
        let fix = |name: &str, text: &str, extra: serde_json::Value| {
            let mut value = json!({
                "fixName": name,
                "description": "d",
                "changes": [{"fileName": file, "textChanges": [
                    {"start": {"line": 1, "offset": 1}, "end": {"line": 1, "offset": 1}, "newText": text}
                ]}],
            });
            if let (Some(object), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
                object.extend(extra.clone());
            }
            serde_json::from_value::<CodeFix>(value).unwrap()
        };
        let mut texts = HashMap::new();
        let mut offered = |fix: CodeFix| suggestion(&fix, &mut paths, &mut texts).is_some();
        assert!(offered(fix(
            "import",
            "import { a } from \"./a.js\";\n",
            json!({})
        )));
        assert!(!offered(fix("fixIgnore", "// @ts-ignore\n", json!({}))));
        assert!(!offered(fix("disableJsDiagnostics", "// x\n", json!({}))));
        assert!(!offered(fix(
            "installTypesPackage",
            "",
            json!({"commands": [{"type": "install"}]})
        )));
        let mut new_file = fix("import", "x", json!({}));
        new_file.changes[0].is_new_file = true;
        assert!(!offered(new_file));
        let mut outside = fix("import", "x", json!({}));
        outside.changes[0].file_name = "/etc/hostname".into();
        assert!(!offered(outside));
    }
}

/// The property tests (`scripts/fuzz.sh` runs every `fuzz_tests` module longer).
#[cfg(test)]
mod fuzz_tests {
    use proptest::prelude::*;
    use trellis_core::fuzz;

    use super::tests::{RECORDED, recorded_frames, zoo};
    use super::*;

    proptest! {
        #![proptest_config(fuzz::config(96))]

        /// The recorded answers damaged byte by byte: frames and fixes are
        /// read within bounds, never a panic.
        #[test]
        fn damaged_tsserver_output_is_read_within_bounds(edits in fuzz::byte_edits()) {
            let damaged = fuzz::apply_bytes(&recorded_frames(), &edits);
            let (messages, malformed) = fuzz::bounded("read_frames", fuzz::budget(damaged.len()), || read_frames(&damaged));
            prop_assert!(messages.len() + malformed <= damaged.len() / 16 + 1);
            let mut paths = WorkspacePaths::new(&zoo(), &zoo().join("target")).unwrap();
            let mut texts = HashMap::new();
            fuzz::bounded("suggestion", fuzz::budget(damaged.len()), || {
                for fixes in fixes_by_site(&messages).values() {
                    for fix in fixes {
                        if let Some(found) = suggestion(fix, &mut paths, &mut texts) {
                            assert!(found.replacements.iter().all(|r| r.span.byte_start <= r.span.byte_end));
                        }
                    }
                }
            });
        }

        /// One recorded answer with a field removed, repeated or of the
        /// wrong type: read or skipped, never a panic.
        #[test]
        fn a_structurally_edited_answer_is_read_or_skipped(
            line in any::<prop::sample::Index>(),
            edit in fuzz::json_edit(),
        ) {
            let root = zoo().canonicalize().unwrap();
            let lines: Vec<&str> = RECORDED.lines().collect();
            let at = line.index(lines.len());
            let value: serde_json::Value =
                serde_json::from_str(&lines[at].replace("@ROOT@", &root.to_string_lossy())).unwrap();
            let edited = fuzz::apply_json(&value, &edit);
            let framed = format!("Content-Length: {}\r\n\r\n{edited}\n", edited.len() + 1);
            let (messages, _) = read_frames(framed.as_bytes());
            let mut paths = WorkspacePaths::new(&zoo(), &zoo().join("target")).unwrap();
            let mut texts = HashMap::new();
            fuzz::bounded("suggestion", fuzz::budget(framed.len()), || {
                for fix in fixes_by_site(&messages).values().flatten() {
                    let _ = suggestion(fix, &mut paths, &mut texts);
                }
            });
        }

        /// Arbitrary bytes: never a panic.
        #[test]
        fn any_bytes_are_read_as_frames(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
            let (messages, malformed) = read_frames(&bytes);
            prop_assert!(messages.len() + malformed <= bytes.len() / 16 + 1);
        }
    }
}
