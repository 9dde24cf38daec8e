//! Cargo's JSON compiler messages, turned into Trellis [`Diagnostic`]s.
//!
//! Conversion keeps everything rustc says that a repair can use (code, level,
//! spans, children, every suggestion with its applicability) and resolves
//! every path against the measured workspace: a span into std, the registry
//! or a macro definition elsewhere is replaced by the in-workspace span that
//! caused it. Lines that are not cargo JSON are skipped; lines that look like
//! JSON but do not parse are counted, never fatal.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use cargo_metadata::diagnostic::{
    Applicability as RustcApplicability, Diagnostic as RustcDiagnostic, DiagnosticLevel,
    DiagnosticSpan,
};
use cargo_metadata::{Artifact, BuildFinished, CompilerMessage};
use serde::Deserialize;

use crate::diagnostic::{
    Applicability, Diagnostic, Fixer, Level, Note, Replacement, Span, Suggestion, SuggestionGroup,
    dedup_by_site,
};
use crate::workspace_path::WorkspacePath;

/// Maps the paths a tool reports to workspace-relative paths.
///
/// Cargo reports member files relative to the workspace root and everything
/// else absolute; both are resolved against the canonical workspace root so
/// a symlinked temp dir or a `..` path cannot smuggle a file in or out.
pub struct WorkspacePaths {
    root: PathBuf,
    /// Where the tool saw the workspace, when not at `root` (a slot built
    /// at the user's paths): absolute names under it are under `root`.
    seen_at: Option<PathBuf>,
    /// Build output (generated `OUT_DIR` sources) is never workspace source,
    /// even when the target directory lives inside the workspace.
    excluded: Option<PathBuf>,
    cache: HashMap<String, Option<WorkspacePath>>,
}

impl WorkspacePaths {
    /// Resolve against `root`, excluding `target_dir`. Fails when `root`
    /// cannot be canonicalized (it does not exist).
    pub fn new(root: &Path, target_dir: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: std::fs::canonicalize(root)?,
            seen_at: None,
            excluded: std::fs::canonicalize(target_dir).ok(),
            cache: HashMap::new(),
        })
    }

    /// Reads absolute names under `seen_at` (where the tool saw the
    /// workspace) as names under the root.
    pub fn seen_at(self, seen_at: &Path) -> Self {
        Self {
            seen_at: Some(seen_at.to_path_buf()),
            cache: HashMap::new(),
            ..self
        }
    }

    /// The workspace-relative `/` path of `file_name`, or `None` when it
    /// names no existing file inside the workspace.
    pub fn relative(&mut self, file_name: &str) -> Option<WorkspacePath> {
        if let Some(known) = self.cache.get(file_name) {
            return known.clone();
        }
        let resolved = self.resolve(file_name);
        self.cache.insert(file_name.to_owned(), resolved.clone());
        resolved
    }

    fn resolve(&self, file_name: &str) -> Option<WorkspacePath> {
        // `<anon>`, `<::core::macros::panic macros>` and friends are not files.
        if file_name.starts_with('<') {
            return None;
        }
        let seen = self
            .seen_at
            .as_deref()
            .and_then(|seen_at| Path::new(file_name).strip_prefix(seen_at).ok());
        let canonical =
            std::fs::canonicalize(self.root.join(seen.unwrap_or(Path::new(file_name)))).ok()?;
        if !canonical.is_file()
            || self
                .excluded
                .as_ref()
                .is_some_and(|excluded| canonical.starts_with(excluded))
        {
            return None;
        }
        WorkspacePath::from_relative(canonical.strip_prefix(&self.root).ok()?)
    }

    /// A zero-width span at 1-based `line`/`column` (columns count chars) in
    /// `file_name`, for tools that report only a position (panics, manifest
    /// errors). `None` when the file is outside the workspace or the
    /// position is not in it.
    /// The text of the workspace file `path` (as [`WorkspacePaths::relative`]
    /// returns it), when it can be read.
    pub fn source(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path)).ok()
    }

    pub fn point(&mut self, file_name: &str, line: u32, column: u32) -> Option<Span> {
        let path = self.relative(file_name)?;
        let text = std::fs::read_to_string(self.root.join(&path)).ok()?;
        let byte = byte_offset(&text, line, column)?;
        Some(Span {
            path,
            byte_start: byte,
            byte_end: byte,
            line_start: line,
            col_start: column,
            line_end: line,
            col_end: column,
            label: None,
        })
    }
}

impl WorkspacePaths {
    /// The span from 1-based `start` to `end` (line, char column; `end`
    /// exclusive) in `file_name`, for tools that report ranges by position
    /// (ty, ruff, pyright). `None` when the file is outside the workspace
    /// or a position is not in it.
    pub fn range(&mut self, file_name: &str, start: (u32, u32), end: (u32, u32)) -> Option<Span> {
        let path = self.relative(file_name)?;
        let text = std::fs::read_to_string(self.root.join(&path)).ok()?;
        let byte_start = byte_offset(&text, start.0, start.1)?;
        let byte_end = byte_offset(&text, end.0, end.1)?;
        (byte_start <= byte_end).then_some(Span {
            path,
            byte_start,
            byte_end,
            line_start: start.0,
            col_start: start.1,
            line_end: end.0,
            col_end: end.1,
            label: None,
        })
    }
}

/// Byte offset of 1-based `line` and char `column` in `text`.
fn byte_offset(text: &str, line: u32, column: u32) -> Option<u32> {
    let line_index = usize::try_from(line.checked_sub(1)?).ok()?;
    let column_index = usize::try_from(column.checked_sub(1)?).ok()?;
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line_index)
        .map(str::len)
        .sum();
    let line_text = text.get(line_start..)?.split('\n').next()?;
    let within = if column_index == line_text.chars().count() {
        line_text.len()
    } else {
        line_text.char_indices().nth(column_index)?.0
    };
    u32::try_from(line_start + within).ok()
}

/// The diagnostics found in a run of cargo's JSON output.
#[derive(Debug, Default)]
pub struct CompilerMessages {
    /// Deduplicated, in first-reported order.
    pub diagnostics: Vec<Diagnostic>,
    /// Lines that looked like JSON but were not a message we could read.
    pub malformed_lines: usize,
    /// Which target every test build of the workspace compiles does not
    /// build (see [`TestBuildBlocker`]), when one does not.
    pub blocks_tests: Option<String>,
    /// The workspace's own compilations the run finished or found fresh.
    pub compiled: BTreeSet<Compilation>,
    /// Whether the build succeeded, when cargo said (`build-finished`).
    pub build_succeeded: Option<bool>,
    /// The workspace's own targets the run compiled, found fresh or
    /// reported a diagnostic for: what it checked (see
    /// `check_units::unchecked`).
    pub reached: BTreeSet<TargetId>,
    /// The workspace's own targets the run reported an error in.
    pub failing: BTreeSet<TargetId>,
}

/// A workspace target by its source file and its name.
pub type TargetId = (WorkspacePath, String);

/// One compilation of a workspace target: its source file, its name, and
/// whether it was compiled as a test (`cfg(test)`, the test harness).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Compilation {
    pub source: WorkspacePath,
    pub target: String,
    pub test: bool,
}

/// [`Diagnostic::site_key`], owned.
type SiteKey = (Option<String>, Level, String, Option<Span>);

/// Finds an error that `cargo test` would stop at, among the messages of a
/// `cargo check --workspace --all-targets`. An integration test or a build
/// script is compiled by every test build; a library or binary error counts
/// once two compilations report it (the target's own and its unit-test
/// build: an error that only one of them sees may live in code the tests
/// never compile). Benches and examples never count: `cargo test` can run
/// without compiling them as tests.
#[derive(Default)]
struct TestBuildBlocker {
    /// Error sites per target (package, target name, site), with how many
    /// compilations reported each.
    seen: HashMap<(String, String, SiteKey), u32>,
    found: Option<String>,
}

impl TestBuildBlocker {
    fn record(&mut self, message: &CompilerMessage, diagnostic: &Diagnostic) {
        use cargo_metadata::TargetKind;
        if self.found.is_some() || diagnostic.level != Level::Error {
            return;
        }
        let target = &message.target;
        let needed = |kind: &TargetKind| match kind {
            TargetKind::Test | TargetKind::CustomBuild => 1,
            TargetKind::Bench | TargetKind::Example => u32::MAX,
            _ => 2,
        };
        let Some(reports_needed) = target.kind.iter().map(needed).min() else {
            return;
        };
        let (code, level, text, primary) = diagnostic.site_key();
        let site = (
            code.map(str::to_owned),
            level,
            text.to_owned(),
            primary.cloned(),
        );
        let key = (message.package_id.repr.clone(), target.name.clone(), site);
        let reported = self.seen.entry(key).or_default();
        *reported += 1;
        if *reported >= reports_needed {
            let kind = target
                .kind
                .first()
                .map_or_else(|| "target".to_owned(), |kind| kind.to_string());
            self.found = Some(format!(
                "the {kind} target `{}` does not build",
                target.name
            ));
        }
    }
}

/// Just enough of a cargo message to know what it is.
#[derive(Deserialize)]
struct Envelope {
    reason: String,
}

/// Read the compiler messages among `lines`, converting them for `stage`.
///
/// Lines that do not start with `{` are the tool's prose and are skipped.
/// Artifacts say which of the workspace's targets were compiled and
/// `build-finished` whether the build succeeded; other messages (build
/// scripts' output) carry no evidence and are skipped too.
pub fn parse_compiler_messages<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    stage: &str,
    paths: &mut WorkspacePaths,
) -> CompilerMessages {
    let mut found = CompilerMessages::default();
    let mut blocker = TestBuildBlocker::default();
    for line in lines {
        let line = line.trim_end_matches('\r');
        if !line.starts_with('{') {
            continue;
        }
        let Ok(envelope) = serde_json::from_str::<Envelope>(line) else {
            found.malformed_lines += 1;
            continue;
        };
        match envelope.reason.as_str() {
            "compiler-message" => match serde_json::from_str::<CompilerMessage>(line) {
                Ok(message) => {
                    let target = paths
                        .relative(message.target.src_path.as_str())
                        .map(|source| (source, message.target.name.clone()));
                    if message.message.level == DiagnosticLevel::Error
                        && let Some(target) = &target
                    {
                        found.failing.insert(target.clone());
                    }
                    found.reached.extend(target);
                    if let Some(diagnostic) = convert(&message.message, stage, paths) {
                        blocker.record(&message, &diagnostic);
                        found.diagnostics.push(diagnostic);
                    }
                }
                Err(_) => found.malformed_lines += 1,
            },
            "compiler-artifact" => {
                match serde_json::from_str::<Artifact>(line) {
                    // A dependency's source is outside the workspace.
                    Ok(artifact) => {
                        if let Some(source) = paths.relative(artifact.target.src_path.as_str()) {
                            found
                                .reached
                                .insert((source.clone(), artifact.target.name.clone()));
                            found.compiled.insert(Compilation {
                                source,
                                target: artifact.target.name,
                                test: artifact.profile.test,
                            });
                        }
                    }
                    Err(_) => found.malformed_lines += 1,
                }
            }
            "build-finished" => match serde_json::from_str::<BuildFinished>(line) {
                Ok(finished) => found.build_succeeded = Some(finished.success),
                Err(_) => found.malformed_lines += 1,
            },
            _ => {}
        }
    }
    // The lib and test builds of a crate report the same error twice.
    found.diagnostics = dedup_by_site(found.diagnostics);
    found.blocks_tests = blocker.found;
    found
}

/// Convert one rustc diagnostic, or `None` for the summary lines rustc adds
/// after the real ones ("aborting due to 3 previous errors", "2 warnings
/// emitted", "For more information about this error...").
fn convert(raw: &RustcDiagnostic, stage: &str, paths: &mut WorkspacePaths) -> Option<Diagnostic> {
    if is_summary(raw) {
        return None;
    }
    let primary = primary_site(raw, paths);
    let mut secondary = Vec::new();
    for span in &raw.spans {
        if let Some(site) = site(span, paths)
            && Some(&site) != primary.as_ref()
            && !secondary.contains(&site)
        {
            secondary.push(site);
        }
    }
    let notes = raw
        .children
        .iter()
        .map(|child| Note {
            level: level(child.level),
            message: child.message.clone(),
            span: child
                .spans
                .iter()
                .find(|span| span.is_primary)
                .or(child.spans.first())
                .and_then(|span| site(span, paths)),
        })
        .collect();
    let suggestions = raw
        .children
        .iter()
        .filter_map(|child| suggestion_group(child, paths))
        .collect();
    Some(Diagnostic {
        stage: stage.to_owned(),
        code: raw.code.as_ref().map(|code| code.code.clone()),
        level: level(raw.level),
        message: raw.message.clone(),
        primary,
        secondary,
        notes,
        suggestions,
        rendered: raw.rendered.clone(),
    })
}

fn is_summary(raw: &RustcDiagnostic) -> bool {
    if raw.level == DiagnosticLevel::FailureNote {
        return true;
    }
    raw.spans.is_empty()
        && raw.code.is_none()
        && (raw.message.starts_with("aborting due to")
            || (raw.message.ends_with(" emitted")
                && (raw.message.contains("warning") || raw.message.contains("error"))))
}

fn level(raw: DiagnosticLevel) -> Level {
    match raw {
        DiagnosticLevel::Ice | DiagnosticLevel::Error => Level::Error,
        DiagnosticLevel::Warning => Level::Warning,
        DiagnosticLevel::Help => Level::Help,
        // FailureNote, Note, and any level a newer rustc adds.
        _ => Level::Note,
    }
}

/// The in-workspace site of the diagnostic: its primary span (or the macro
/// call that produced it), else any other span of it or of its children that
/// lies in the workspace.
fn primary_site(raw: &RustcDiagnostic, paths: &mut WorkspacePaths) -> Option<Span> {
    let primaries = raw.spans.iter().filter(|span| span.is_primary);
    let others = raw.spans.iter().filter(|span| !span.is_primary);
    let children = raw.children.iter().flat_map(|child| &child.spans);
    primaries
        .chain(others)
        .chain(children)
        .find_map(|span| site(span, paths))
}

/// `span` if it lies in the workspace, else the first macro invocation in its
/// expansion chain that does. The label stays the original one: it describes
/// the problem, wherever rustc pointed.
fn site(span: &DiagnosticSpan, paths: &mut WorkspacePaths) -> Option<Span> {
    let label = span.label.clone();
    let mut current = span;
    loop {
        if let Some(mut mapped) = exact_span(current, paths) {
            mapped.label = label.or(mapped.label);
            return Some(mapped);
        }
        current = &current.expansion.as_ref()?.span;
    }
}

/// `span` itself, when its file is in the workspace.
fn exact_span(span: &DiagnosticSpan, paths: &mut WorkspacePaths) -> Option<Span> {
    Some(Span {
        path: paths.relative(&span.file_name)?,
        byte_start: span.byte_start,
        byte_end: span.byte_end,
        line_start: u32::try_from(span.line_start).ok()?,
        col_start: u32::try_from(span.column_start).ok()?,
        line_end: u32::try_from(span.line_end).ok()?,
        col_end: u32::try_from(span.column_end).ok()?,
        label: span.label.clone(),
    })
}

/// The fix a child offers, if any.
///
/// When every replacement of the child covers the same bytes, each distinct
/// text is an alternative ("consider importing one of these items");
/// otherwise the replacements are one edit applied together. A replacement
/// outside the workspace cannot be applied, so the suggestion carrying it is
/// dropped rather than applied in part.
fn suggestion_group(
    child: &RustcDiagnostic,
    paths: &mut WorkspacePaths,
) -> Option<SuggestionGroup> {
    // The same edit listed twice is one edit: applied twice it would
    // insert its text twice.
    let mut edits: Vec<&DiagnosticSpan> = Vec::new();
    for span in &child.spans {
        if span.suggested_replacement.is_some() && !edits.iter().any(|seen| same_edit(seen, span)) {
            edits.push(span);
        }
    }
    let suggestion = |spans: &[&DiagnosticSpan], paths: &mut WorkspacePaths| {
        let replacements = spans
            .iter()
            .map(|span| {
                Some(Replacement {
                    span: exact_span(span, paths)?,
                    text: span.suggested_replacement.clone()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let applicability = spans
            .iter()
            .map(|span| applicability(span.suggestion_applicability.as_ref()))
            // The least confident replacement bounds the whole edit.
            .max()
            .unwrap_or(Applicability::Unspecified);
        Some(Suggestion {
            message: child.message.clone(),
            applicability,
            fixer: Fixer::Rustc,
            replacements,
        })
    };
    let alternatives: Vec<Suggestion> = if edits.iter().all(|span| same_range(span, edits[0])) {
        // Several texts for one range cannot apply together: each is a
        // way to fix it ("consider importing one of these items").
        edits
            .iter()
            .filter_map(|span| suggestion(&[span], paths))
            .collect()
    } else {
        suggestion(&edits, paths).into_iter().collect()
    };
    (!alternatives.is_empty()).then_some(SuggestionGroup { alternatives })
}

fn same_range(a: &DiagnosticSpan, b: &DiagnosticSpan) -> bool {
    a.file_name == b.file_name && a.byte_start == b.byte_start && a.byte_end == b.byte_end
}

fn same_edit(a: &DiagnosticSpan, b: &DiagnosticSpan) -> bool {
    same_range(a, b) && a.suggested_replacement == b.suggested_replacement
}

fn applicability(raw: Option<&RustcApplicability>) -> Applicability {
    match raw {
        Some(RustcApplicability::MachineApplicable) => Applicability::MachineApplicable,
        Some(RustcApplicability::MaybeIncorrect) => Applicability::MaybeIncorrect,
        Some(RustcApplicability::HasPlaceholders) => Applicability::HasPlaceholders,
        _ => Applicability::Unspecified,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn span(file: &str, start: u32, end: u32, primary: bool) -> Value {
        json!({
            "file_name": file, "byte_start": start, "byte_end": end,
            "line_start": 1, "line_end": 1, "column_start": start + 1, "column_end": end + 1,
            "is_primary": primary, "text": [], "label": null,
            "suggested_replacement": null, "suggestion_applicability": null, "expansion": null
        })
    }

    fn message(diagnostic: Value) -> String {
        json!({
            "reason": "compiler-message",
            "package_id": "path+file:///w#demo@0.1.0",
            "manifest_path": "/w/Cargo.toml",
            "target": {
                "kind": ["lib"], "crate_types": ["lib"], "name": "demo",
                "src_path": "/w/src/lib.rs", "edition": "2024", "doc": true,
                "doctest": true, "test": true
            },
            "message": diagnostic
        })
        .to_string()
    }

    fn diagnostic(text: &str, code: Option<&str>, spans: Vec<Value>) -> Value {
        json!({
            "message": text,
            "code": code.map(|code| json!({ "code": code, "explanation": null })),
            "level": "error", "spans": spans, "children": [], "rendered": null
        })
    }

    fn workspace() -> (tempfile::TempDir, WorkspacePaths) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn main() { broken!(); }\n").unwrap();
        let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        (dir, paths)
    }

    #[test]
    fn malformed_lines_are_counted_and_the_rest_is_kept() {
        let (_dir, mut paths) = workspace();
        let good = message(diagnostic(
            "cannot find value `x`",
            Some("E0425"),
            vec![span("src/lib.rs", 12, 19, true)],
        ));
        let lines = [
            "{\"reason\": \"compiler-mess",
            good.as_str(),
            "test tests::x ... ok",
            "{\"reason\": \"compiler-message\", \"message\": 3}",
            "{\"reason\": \"build-finished\", \"success\": false}",
        ];
        let found = parse_compiler_messages(lines, "build", &mut paths);
        assert_eq!(found.malformed_lines, 2);
        assert_eq!(found.diagnostics.len(), 1);
        assert_eq!(found.diagnostics[0].code.as_deref(), Some("E0425"));
    }

    #[test]
    fn spans_outside_the_workspace_map_to_the_macro_call_inside_it() {
        let (_dir, mut paths) = workspace();
        let mut in_std = span("/rustc/abc/library/core/src/macros/mod.rs", 100, 120, true);
        in_std["label"] = json!("expected `u32`");
        in_std["expansion"] = json!({
            "span": span("src/lib.rs", 12, 22, false),
            "macro_decl_name": "broken!",
            "def_site_span": span("/rustc/abc/library/core/src/macros/mod.rs", 0, 10, false)
        });
        let line = message(diagnostic("mismatched types", Some("E0308"), vec![in_std]));
        let found = parse_compiler_messages([line.as_str()], "build", &mut paths);
        let primary = found.diagnostics[0].primary.clone().unwrap();
        assert_eq!(primary.path, "src/lib.rs");
        assert_eq!((primary.byte_start, primary.byte_end), (12, 22));
        assert_eq!(primary.label.as_deref(), Some("expected `u32`"));
    }

    #[test]
    fn summary_lines_are_not_diagnostics() {
        let (_dir, mut paths) = workspace();
        let aborting = message(diagnostic(
            "aborting due to 2 previous errors",
            None,
            vec![],
        ));
        let emitted = message(diagnostic("3 warnings emitted", None, vec![]));
        let found =
            parse_compiler_messages([aborting.as_str(), emitted.as_str()], "build", &mut paths);
        assert!(found.diagnostics.is_empty(), "{:#?}", found.diagnostics);
        assert_eq!(found.malformed_lines, 0);
    }

    #[test]
    fn a_repeated_edit_is_offered_once() {
        let (_dir, mut paths) = workspace();
        let mut edit = span("src/lib.rs", 0, 0, true);
        edit["suggested_replacement"] = json!("use std::fmt;\n");
        edit["suggestion_applicability"] = json!("MaybeIncorrect");
        let mut raw = diagnostic(
            "missing import",
            None,
            vec![span("src/lib.rs", 12, 19, true)],
        );
        raw["children"] = json!([{
            "message": "consider importing", "code": null, "level": "help",
            "spans": [edit.clone(), edit], "children": [], "rendered": null
        }]);
        let found = parse_compiler_messages([message(raw).as_str()], "build", &mut paths);
        let [group] = found.diagnostics[0].suggestions.as_slice() else {
            panic!("one group expected");
        };
        assert_eq!(group.alternatives.len(), 1, "{group:#?}");
        assert_eq!(group.alternatives[0].replacements.len(), 1);
    }

    #[test]
    fn replacements_of_different_ranges_apply_together() {
        let (_dir, mut paths) = workspace();
        let mut first = span("src/lib.rs", 0, 2, true);
        first["suggested_replacement"] = json!("pub fn");
        first["suggestion_applicability"] = json!("MachineApplicable");
        let mut second = span("src/lib.rs", 12, 19, true);
        second["suggested_replacement"] = json!("fixed!");
        second["suggestion_applicability"] = json!("MaybeIncorrect");
        let mut raw = diagnostic("two-part fix", None, vec![span("src/lib.rs", 12, 19, true)]);
        raw["children"] = json!([{
            "message": "change both", "code": null, "level": "help",
            "spans": [first, second], "children": [], "rendered": null
        }]);
        let found = parse_compiler_messages([message(raw).as_str()], "build", &mut paths);
        let [group] = found.diagnostics[0].suggestions.as_slice() else {
            panic!("one group expected");
        };
        let [suggestion] = group.alternatives.as_slice() else {
            panic!("one alternative expected: {group:#?}");
        };
        assert_eq!(suggestion.replacements.len(), 2);
        assert_eq!(suggestion.applicability, Applicability::MaybeIncorrect);
    }

    #[test]
    fn byte_offset_counts_lines_and_chars() {
        let text = "ab\nçd\n";
        assert_eq!(byte_offset(text, 1, 1), Some(0));
        assert_eq!(byte_offset(text, 2, 1), Some(3));
        // `ç` is two bytes: column 2 of line 2 starts after it.
        assert_eq!(byte_offset(text, 2, 2), Some(5));
        // One past the last char is the end of the line.
        assert_eq!(byte_offset(text, 2, 3), Some(6));
        assert_eq!(byte_offset(text, 2, 4), None);
        assert_eq!(byte_offset(text, 0, 1), None);
    }

    /// [`message`] from a target of `kind` named `name`.
    fn message_from(kind: &str, name: &str, diagnostic: Value) -> String {
        let mut line: Value = serde_json::from_str(&message(diagnostic)).unwrap();
        line["target"]["kind"] = json!([kind]);
        line["target"]["name"] = json!(name);
        line.to_string()
    }

    fn blocker(lines: &[String]) -> Option<String> {
        let (_dir, mut paths) = workspace();
        parse_compiler_messages(lines.iter().map(String::as_str), "build", &mut paths).blocks_tests
    }

    #[test]
    fn a_library_error_blocks_tests_once_its_unit_test_build_reports_it_too() {
        let error = || {
            diagnostic(
                "cannot find value `x`",
                Some("E0425"),
                vec![span("src/lib.rs", 12, 19, true)],
            )
        };
        let once = message_from("lib", "demo", error());
        assert_eq!(
            blocker(std::slice::from_ref(&once)),
            None,
            "one build may be cfg(not(test)) code"
        );
        let found = blocker(&[once.clone(), once]).expect("both builds of the lib report it");
        assert!(found.contains("lib target `demo`"), "{found}");
    }

    #[test]
    fn an_integration_test_or_build_script_error_blocks_tests_and_a_bench_or_example_never() {
        let error = || {
            diagnostic(
                "mismatched types",
                Some("E0308"),
                vec![span("src/lib.rs", 0, 2, true)],
            )
        };
        for kind in ["test", "custom-build"] {
            assert!(
                blocker(&[message_from(kind, "it", error())]).is_some(),
                "{kind}"
            );
        }
        for kind in ["bench", "example"] {
            let line = message_from(kind, "b", error());
            assert_eq!(blocker(&[line.clone(), line]), None, "{kind}");
        }
    }

    #[test]
    fn warnings_and_errors_of_different_sites_never_add_up_to_a_blocker() {
        let mut warning = diagnostic(
            "unused variable: `y`",
            Some("unused_variables"),
            vec![span("src/lib.rs", 0, 2, true)],
        );
        warning["level"] = json!("warning");
        let warning = message_from("lib", "demo", warning);
        assert_eq!(blocker(&[warning.clone(), warning]), None);
        let first = message_from(
            "lib",
            "demo",
            diagnostic("a", None, vec![span("src/lib.rs", 0, 2, true)]),
        );
        let second = message_from(
            "lib",
            "demo",
            diagnostic("b", None, vec![span("src/lib.rs", 3, 5, true)]),
        );
        assert_eq!(blocker(&[first, second]), None);
    }
}
