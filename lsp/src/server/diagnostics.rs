//! A sensing report as `textDocument/publishDiagnostics`, one list per file.
//!
//! Every diagnostic carries `source: "trellis"`, the tool's code, and
//! `data: { "cluster": id }` so a code-action request can name the cluster
//! to repair. The cluster's other sites become related information: the
//! user standing on one of 150 cascade errors sees where the others are.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ropey::Rope;
use tower_lsp_server::ls_types::{
    Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString,
    Position, Range, Uri,
};
use trellis_engine::CheckReport;
use trellis_engine::cluster::Cluster;
use trellis_engine::diagnostic::{self as engine, Level, Span};

use super::encoding::{PositionEncoding, byte_to_position};
use super::paths::WorkspacePaths;
use super::protocol::DiagnosticData;

/// The `source` of every diagnostic we publish.
pub const SOURCE: &str = "trellis";

/// At most this many related sites per diagnostic: a 900-site cascade must
/// not turn into 900 × 900 locations.
pub const MAX_RELATED: usize = 20;

/// What one sensing run publishes.
#[derive(Debug, Default)]
pub struct Publication {
    pub files: BTreeMap<Uri, Vec<Diagnostic>>,
}

/// Converts a report's diagnostics and located test failures to LSP.
///
/// `text_of` returns a file's text as the sensors saw it (the view's
/// buffer, or the file on disk); byte offsets are converted against it.
/// When it has none, rustc's line and column are used.
pub fn publication(
    report: &CheckReport,
    paths: &WorkspacePaths,
    encoding: PositionEncoding,
    related_information: bool,
    text_of: &mut dyn FnMut(&str) -> Option<String>,
) -> Publication {
    let mut locate = Locator {
        paths,
        encoding,
        texts: HashMap::new(),
        text_of,
    };
    let mut out = Publication::default();
    let mut clustered = BTreeSet::new();

    for cluster in &report.clusters {
        let sites: Vec<(Location, String)> = if related_information {
            cluster
                .sites
                .iter()
                .filter_map(|site| {
                    Some((locate.location(site.span.as_ref()?)?, site.message.clone()))
                })
                .collect()
        } else {
            Vec::new()
        };
        for &index in &cluster.diagnostics {
            let Some(diagnostic) = report.diagnostics.get(index) else {
                continue;
            };
            clustered.insert(index);
            if let Some(span) = &diagnostic.primary {
                let lsp = compiler_diagnostic(diagnostic, Some(cluster));
                push(&mut out, &mut locate, span, lsp, &sites);
            }
        }
        for &index in &cluster.failures {
            let Some(failure) = report.failures.get(index) else {
                continue;
            };
            if let Some(span) = &failure.location {
                let lsp = Diagnostic {
                    severity: Some(DiagnosticSeverity::ERROR),
                    source: Some(SOURCE.to_owned()),
                    message: format!("test `{}` failed ({})", failure.name, failure.binary),
                    data: Some(DiagnosticData::value(&cluster.id)),
                    ..Diagnostic::default()
                };
                push(&mut out, &mut locate, span, lsp, &sites);
            }
        }
    }
    for (index, diagnostic) in report.diagnostics.iter().enumerate() {
        if clustered.contains(&index) {
            continue;
        }
        if let Some(span) = &diagnostic.primary {
            let lsp = compiler_diagnostic(diagnostic, None);
            push(&mut out, &mut locate, span, lsp, &[]);
        }
    }
    out
}

fn compiler_diagnostic(diagnostic: &engine::Diagnostic, cluster: Option<&Cluster>) -> Diagnostic {
    Diagnostic {
        severity: Some(severity(diagnostic.level)),
        code: diagnostic.code.clone().map(NumberOrString::String),
        source: Some(SOURCE.to_owned()),
        message: diagnostic.message.clone(),
        data: cluster.map(|c| DiagnosticData::value(&c.id)),
        ..Diagnostic::default()
    }
}

/// Places `diagnostic` at `span` with the cluster's other sites as related
/// information, and files it under its document.
fn push(
    out: &mut Publication,
    locate: &mut Locator<'_>,
    span: &Span,
    mut diagnostic: Diagnostic,
    sites: &[(Location, String)],
) {
    let Some(here) = locate.location(span) else {
        return;
    };
    if !sites.is_empty() {
        let related: Vec<_> = sites
            .iter()
            .filter(|(location, _)| *location != here)
            .take(MAX_RELATED)
            .map(|(location, message)| DiagnosticRelatedInformation {
                location: location.clone(),
                message: message.clone(),
            })
            .collect();
        if !related.is_empty() {
            diagnostic.related_information = Some(related);
        }
    }
    diagnostic.range = here.range;
    out.files.entry(here.uri).or_default().push(diagnostic);
}

fn severity(level: Level) -> DiagnosticSeverity {
    match level {
        Level::Error => DiagnosticSeverity::ERROR,
        Level::Warning => DiagnosticSeverity::WARNING,
        Level::Note => DiagnosticSeverity::INFORMATION,
        Level::Help => DiagnosticSeverity::HINT,
    }
}

/// Turns engine spans into LSP locations, reading each file's text once.
struct Locator<'a> {
    paths: &'a WorkspacePaths,
    encoding: PositionEncoding,
    texts: HashMap<String, Option<Rope>>,
    text_of: &'a mut dyn FnMut(&str) -> Option<String>,
}

impl Locator<'_> {
    fn location(&mut self, span: &Span) -> Option<Location> {
        let uri = self.paths.uri_of(&span.path)?;
        let text_of = &mut self.text_of;
        let text = self
            .texts
            .entry(span.path.to_string())
            .or_insert_with(|| text_of(&span.path).map(|t| Rope::from_str(&t)));
        let range = match text {
            Some(rope) => Range::new(
                byte_to_position(rope, span.byte_start as usize, self.encoding),
                byte_to_position(rope, span.byte_end as usize, self.encoding),
            ),
            // rustc counts lines and columns from 1, columns in chars.
            None => Range::new(
                Position::new(
                    span.line_start.saturating_sub(1),
                    span.col_start.saturating_sub(1),
                ),
                Position::new(
                    span.line_end.saturating_sub(1),
                    span.col_end.saturating_sub(1),
                ),
            ),
        };
        Some(Location { uri, range })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;
    use trellis_engine::cluster::{ResidualClass, Site};
    use trellis_engine::digest::Digest;

    const LIB: &str = "// é𝕏\nfn main() { let x = 1; x = 2; }\n";

    fn span(text: &str, needle: &str, path: &str) -> Span {
        let start = text.find(needle).unwrap();
        Span {
            path: trellis_engine::WorkspacePath::new(path).unwrap(),
            byte_start: start as u32,
            byte_end: (start + needle.len()) as u32,
            line_start: 2,
            col_start: 1,
            line_end: 2,
            col_end: 1,
            label: None,
        }
    }

    fn diag(code: &str, span: Span) -> engine::Diagnostic {
        engine::Diagnostic {
            stage: "build".into(),
            code: Some(code.into()),
            level: Level::Error,
            message: format!("{code} message"),
            primary: Some(span),
            secondary: vec![],
            notes: vec![],
            suggestions: vec![],
            rendered: None,
        }
    }

    fn report() -> CheckReport {
        let first = span(LIB, "x = 2", "src/main.rs");
        let second = span(LIB, "let x", "src/main.rs");
        let warning = span(LIB, "fn main", "src/main.rs");
        let mut unused = diag("unused", warning);
        unused.level = Level::Warning;
        CheckReport {
            root: Digest::ZERO,
            stages: vec![],
            diagnostics: vec![
                diag("E0384", first.clone()),
                diag("E0384", second.clone()),
                unused,
            ],
            failures: vec![],
            clusters: vec![Cluster {
                id: "c-1".into(),
                key: "immutable:x".into(),
                class: ResidualClass::Borrow,
                stage: "build".into(),
                title: "`x` is not mutable (2 sites)".into(),
                sites: vec![
                    Site {
                        path: Some(trellis_engine::WorkspacePath::new("src/main.rs").unwrap()),
                        span: Some(first),
                        message: "first".into(),
                    },
                    Site {
                        path: Some(trellis_engine::WorkspacePath::new("src/main.rs").unwrap()),
                        span: Some(second),
                        message: "second".into(),
                    },
                ],
                diagnostics: vec![0, 1],
                failures: vec![],
                magnitude: 1.0,
                energy: 1.5,
                digest: Digest::ZERO,
            }],
            energy: 1.0,
            hard_pass: false,
        }
    }

    fn publish(encoding: PositionEncoding, related: bool) -> Vec<Diagnostic> {
        let paths = WorkspacePaths::new(PathBuf::from("/ws"));
        let mut text_of = |path: &str| (path == "src/main.rs").then(|| LIB.to_owned());
        let publication = publication(&report(), &paths, encoding, related, &mut text_of);
        assert_eq!(publication.files.len(), 1);
        publication.files.into_values().next().unwrap()
    }

    #[test]
    fn clustered_diagnostics_carry_source_code_cluster_and_related_sites() {
        let diagnostics = publish(PositionEncoding::Utf16, true);
        assert_eq!(diagnostics.len(), 3);
        let first = &diagnostics[0];
        assert_eq!(first.source.as_deref(), Some("trellis"));
        assert_eq!(first.code, Some(NumberOrString::String("E0384".into())));
        assert_eq!(first.data, Some(json!({ "cluster": "c-1" })));
        assert_eq!(first.severity, Some(DiagnosticSeverity::ERROR));
        let related = first.related_information.as_ref().unwrap();
        assert_eq!(
            related.len(),
            1,
            "the diagnostic's own site is not related to itself"
        );
        assert_eq!(related[0].message, "second");

        let unclustered = &diagnostics[2];
        assert_eq!(unclustered.data, None);
        assert_eq!(unclustered.severity, Some(DiagnosticSeverity::WARNING));
    }

    #[test]
    fn columns_on_an_ascii_line_agree_in_both_encodings_and_related_info_is_optional() {
        // Line 1 (0-based) is ASCII, so both encodings agree there.
        let utf16 = publish(PositionEncoding::Utf16, false);
        let utf8 = publish(PositionEncoding::Utf8, false);
        let col = "fn main() { let x = 1; ".len() as u32;
        assert_eq!(utf16[0].range.start, Position::new(1, col));
        assert_eq!(utf8[0].range.start, Position::new(1, col));
        assert!(utf16[0].related_information.is_none());
    }

    #[test]
    fn non_ascii_columns_differ_between_encodings() {
        let paths = WorkspacePaths::new(PathBuf::from("/ws"));
        let mut report = report();
        report.diagnostics[0].primary = Some(span(LIB, "𝕏", "src/main.rs"));
        let mut text_of = |_: &str| Some(LIB.to_owned());
        let utf16 = publication(
            &report,
            &paths,
            PositionEncoding::Utf16,
            false,
            &mut text_of,
        );
        let utf8 = publication(&report, &paths, PositionEncoding::Utf8, false, &mut text_of);
        let range16 = utf16.files.values().next().unwrap()[0].range;
        let range8 = utf8.files.values().next().unwrap()[0].range;
        assert_eq!(
            range16,
            Range::new(Position::new(0, 4), Position::new(0, 6))
        );
        assert_eq!(range8, Range::new(Position::new(0, 5), Position::new(0, 9)));
    }

    #[test]
    fn without_text_rustc_lines_and_columns_are_used() {
        let paths = WorkspacePaths::new(PathBuf::from("/ws"));
        let mut text_of = |_: &str| None;
        let publication = publication(
            &report(),
            &paths,
            PositionEncoding::Utf16,
            false,
            &mut text_of,
        );
        let first = &publication.files.values().next().unwrap()[0];
        assert_eq!(first.range.start, Position::new(1, 0));
    }
}
