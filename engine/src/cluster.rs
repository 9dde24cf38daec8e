//! Root-cause clusters of residuals, and the energy over them.
//!
//! Sensors report sites; the gate needs causes. Nine hundred "cannot find
//! type `Point`" errors are one missing import, so they form one [`Cluster`]
//! and weigh as one. Clustering is a pure function of the stage reports.
//!
//! # Grouping
//!
//! Diagnostics are grouped the way a person reads them: a missing name by
//! the name, however many sites; a call with the wrong number of arguments
//! (E0061) by the function's definition, however many call sites; any other
//! error by its code and site. Failing tests are grouped by their most
//! widely shared likely cause ([`test_cluster_keys`]): the same panic
//! location (a bug that panics inside one function fails every test through
//! it there), or the same function called by tests that fail at their own
//! assertions. Neither the order of the reports nor of the failures in them
//! changes a cluster or its id.
//!
//! # Energy
//!
//! V = Σ_c w(class_c) · r_c², where r_c = 1 + 0.1·log₂(sites_c) is the
//! normalized magnitude of cluster c: one unit per root cause, growing only
//! logarithmically with its number of sites, so a cascade cannot drown a
//! distinct defect. The class weights ([`EnergyModel::V1`]) follow the
//! compiler's phases: errors from an earlier phase (parsing, name
//! resolution) hide every later one, so fixing them must count as a descent
//! even when it reveals a later-phase error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Diagnostic, Level, Span, TestFailure, dedup_by_site};
use crate::digest::{CanonicalHasher, Digest};
use crate::sensor::{StageReport, StageStatus};
use crate::workspace_path::WorkspacePath;

/// The kind of residual a cluster represents: the vocabulary shared with the
/// prompt plane, re-exported here where clusters are classified.
pub use trellis_core::vocabulary::ResidualClass;

/// Versioned class weights. A change of weights is a new version, because
/// energies measured under different models are not comparable.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyModel {
    pub version: u32,
    pub syntax: f64,
    pub unresolved_name: f64,
    pub type_error: f64,
    pub compile_error: f64,
    pub borrow: f64,
    pub test_failure: f64,
    pub sensor_unavailable: f64,
    pub warning: f64,
}

impl EnergyModel {
    pub const V1: EnergyModel = EnergyModel {
        version: 1,
        syntax: 4.0,
        unresolved_name: 3.0,
        type_error: 2.0,
        compile_error: 2.0,
        borrow: 1.5,
        test_failure: 1.0,
        sensor_unavailable: 1.0,
        warning: 0.05,
    };

    pub fn weight(&self, class: ResidualClass) -> f64 {
        match class {
            ResidualClass::Syntax => self.syntax,
            ResidualClass::UnresolvedName => self.unresolved_name,
            ResidualClass::Type => self.type_error,
            ResidualClass::CompileError => self.compile_error,
            ResidualClass::Borrow => self.borrow,
            ResidualClass::TestFailure => self.test_failure,
            ResidualClass::SensorUnavailable => self.sensor_unavailable,
            ResidualClass::Warning => self.warning,
        }
    }

    pub fn digest(&self) -> Digest {
        let mut h = CanonicalHasher::new("trellis.energy-model.v1");
        h.u64(u64::from(self.version));
        for w in [
            self.syntax,
            self.unresolved_name,
            self.type_error,
            self.compile_error,
            self.borrow,
            self.test_failure,
            self.sensor_unavailable,
            self.warning,
        ] {
            h.f64(w);
        }
        h.finish()
    }
}

/// One place a cluster shows up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub path: Option<WorkspacePath>,
    pub span: Option<Span>,
    pub message: String,
}

/// A group of residuals with one root cause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Short stable id derived from `key` (`c1a2b3c4d`).
    pub id: String,
    /// The canonical root-cause key (e.g. `unresolved:Point`).
    pub key: String,
    pub class: ResidualClass,
    pub stage: String,
    /// A title a person understands: "`Point` is not imported (150 sites)".
    pub title: String,
    pub sites: Vec<Site>,
    /// Indexes into the measurement's diagnostics.
    pub diagnostics: Vec<usize>,
    /// Indexes into the measurement's test failures.
    pub failures: Vec<usize>,
    /// Normalized magnitude r of this cluster.
    pub magnitude: f64,
    /// w·r², this cluster's share of the energy.
    pub energy: f64,
    /// Digest of `key`, the identity used by the ledger.
    pub digest: Digest,
}

/// The residuals of one measured state, clustered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// Diagnostics of every stage, deduplicated across stages and targets.
    pub diagnostics: Vec<Diagnostic>,
    pub failures: Vec<TestFailure>,
    /// Dominant first.
    pub clusters: Vec<Cluster>,
    pub energy: f64,
    /// Every required stage ran and passed.
    pub hard_pass: bool,
}

const UNRESOLVED_CODES: &[&str] = &[
    "E0405",
    "E0412",
    "E0422",
    "E0423",
    "E0425",
    "E0432",
    "E0433",
    "E0531",
    "E0532",
    "E0573",
    "E0574",
    "E0576",
    // ty and pyright: a name used where none is defined.
    "unresolved-reference",
    "reportUndefinedVariable",
];
const BORROW_CODES: &[&str] = &[
    "E0382", "E0384", "E0499", "E0502", "E0505", "E0506", "E0507", "E0594", "E0596", "E0597",
    "E0716",
];
const TYPE_CODES: &[&str] = &[
    "E0061",
    "E0063",
    "E0277",
    "E0282",
    "E0308",
    "E0369",
    "E0560",
    "E0599",
    "E0609",
    "E0614",
    // ty's and pyright's type errors.
    "invalid-argument-type",
    "invalid-assignment",
    "invalid-return-type",
    "missing-argument",
    "too-many-positional-arguments",
    "unknown-argument",
    "unresolved-attribute",
    "unsupported-operator",
    "call-non-callable",
    "reportArgumentType",
    "reportAttributeAccessIssue",
    "reportAssignmentType",
    "reportReturnType",
    "reportCallIssue",
    "reportOperatorIssue",
];

/// tsc's codes (`TS2304`): its parser's errors are TS1xxx; the names it
/// cannot find, with or without a "did you mean", and its commonest type
/// errors are listed.
fn typescript_class(code: &str) -> Option<ResidualClass> {
    const UNRESOLVED: &[u32] = &[2304, 2503, 2552, 2580, 2582, 2583, 2584];
    const TYPE: &[u32] = &[2322, 2339, 2345, 2554, 2741, 2769];
    let number: u32 = code.strip_prefix("TS")?.parse().ok()?;
    Some(match number {
        1000..=1999 => ResidualClass::Syntax,
        n if UNRESOLVED.contains(&n) => ResidualClass::UnresolvedName,
        n if TYPE.contains(&n) => ResidualClass::Type,
        _ => ResidualClass::CompileError,
    })
}

fn classify(d: &Diagnostic) -> ResidualClass {
    if d.level != Level::Error {
        return ResidualClass::Warning;
    }
    if let Some(class) = d.code.as_deref().and_then(typescript_class) {
        return class;
    }
    match d.code.as_deref() {
        Some(c) if UNRESOLVED_CODES.contains(&c) => ResidualClass::UnresolvedName,
        Some(c) if BORROW_CODES.contains(&c) => ResidualClass::Borrow,
        Some(c) if TYPE_CODES.contains(&c) => ResidualClass::Type,
        Some(_) => ResidualClass::CompileError,
        None if is_syntax_message(&d.message) => ResidualClass::Syntax,
        None => ResidualClass::CompileError,
    }
}

fn is_syntax_message(message: &str) -> bool {
    [
        "expected ",
        "unexpected ",
        "mismatched closing delimiter",
        "this file contains an unclosed delimiter",
    ]
    .iter()
    .any(|p| message.starts_with(p))
}

/// The first `backticked` token of a message: the name rustc (and ty)
/// complains about; pyright quotes it instead (`"name" is not defined`),
/// and tsc with single quotes (`Cannot find name 'mean'.`).
fn first_backticked(message: &str) -> Option<&str> {
    ['`', '"', '\''].into_iter().find_map(|quote| {
        let start = message.find(quote)? + 1;
        let len = message[start..].find(quote)?;
        Some(&message[start..start + len])
    })
}

fn site_location(span: &Span) -> String {
    format!("{}:{}", span.path, span.line_start)
}

/// Errors about the arguments of a call, reported at every call site of one
/// function whose signature (or every caller) is what needs to change.
const ARITY_CODES: &[&str] = &["E0060", "E0061"];

/// Where the function a wrong-arity call names is defined: rustc's note
/// "function defined here" (or "associated function", "method" …).
fn callee_definition(d: &Diagnostic) -> Option<&Span> {
    d.notes
        .iter()
        .find(|note| note.message.ends_with(" defined here") && note.span.is_some())
        .and_then(|note| note.span.as_ref())
}

fn cluster_key(class: ResidualClass, d: &Diagnostic) -> String {
    let what = d.code.clone().unwrap_or_else(|| d.message.clone());
    if d.code.as_deref().is_some_and(|c| ARITY_CODES.contains(&c))
        && let Some(definition) = callee_definition(d)
    {
        return format!("arity:{what}:{}", site_location(definition));
    }
    match class {
        ResidualClass::UnresolvedName => match first_backticked(&d.message) {
            Some(name) => format!("unresolved:{name}"),
            None => format!("unresolved:{what}"),
        },
        ResidualClass::Warning => format!("warning:{what}"),
        _ => {
            let at = d.primary.as_ref().map(site_location).unwrap_or_default();
            format!("{}:{what}:{at}", class.as_str())
        }
    }
}

fn suggests_import(d: &Diagnostic) -> bool {
    let alternatives = || d.suggestions.iter().flat_map(|g| &g.alternatives);
    alternatives()
        .flat_map(|s| &s.replacements)
        .any(|r| {
            let text = r.text.trim_start();
            // rustc's `use`; ty's `import x` and `from m import x`.
            ["use ", "import ", "from "]
                .iter()
                .any(|keyword| text.starts_with(keyword))
        })
        // tsserver's import fixes, which may only extend an import list.
        || alternatives().any(|s| {
            s.message.starts_with("Add import from ") || s.message.starts_with("Update import from ")
        })
}

fn plural_sites(n: usize) -> String {
    if n == 1 {
        String::new()
    } else {
        format!(" ({n} sites)")
    }
}

/// The key of a failing test's own site: where it panicked, or which test
/// it is when the panic named no workspace file.
fn failure_site_key(f: &TestFailure) -> String {
    match &f.location {
        Some(span) => format!("test:{}", site_location(span)),
        None => format!("test:{}:{}", f.binary, f.name),
    }
}

const CALLS_PREFIX: &str = "test-calls:";

/// The cluster key of each failure, in order: of its candidate causes (its
/// panic site, each function it calls), the one shared by the most
/// failures, the site on a tie, then the first function by name. A function
/// shared by no other failure is no grouping, so such a failure keeps its
/// site. Each choice depends only on the failure and on counts over the
/// whole set, so permuting the failures permutes the keys with them.
pub fn test_cluster_keys(failures: &[TestFailure]) -> Vec<String> {
    let causes: Vec<Vec<String>> = failures
        .iter()
        .map(|f| {
            let mut causes = vec![failure_site_key(f)];
            let calls: std::collections::BTreeSet<&String> =
                f.calls.iter().map(|c| &c.name).collect();
            causes.extend(calls.into_iter().map(|c| format!("{CALLS_PREFIX}{c}")));
            causes
        })
        .collect();
    let mut sharing: BTreeMap<&str, usize> = BTreeMap::new();
    for cause in causes.iter().flatten() {
        *sharing.entry(cause).or_default() += 1;
    }
    causes
        .iter()
        .map(|causes| {
            let site = &causes[0];
            let best = causes
                .iter()
                .enumerate()
                .max_by(|(i, a), (j, b)| {
                    sharing[a.as_str()].cmp(&sharing[b.as_str()]).then(j.cmp(i))
                })
                .map(|(_, cause)| cause)
                .unwrap_or(site);
            if sharing[best.as_str()] > 1 {
                best.clone()
            } else {
                site.clone()
            }
        })
        .collect()
}

/// Normalized magnitude of a cluster with `sites` sites.
pub fn magnitude(sites: usize) -> f64 {
    1.0 + 0.1 * (sites.max(1) as f64).log2()
}

struct Draft {
    class: ResidualClass,
    stage: String,
    sites: Vec<Site>,
    diagnostics: Vec<usize>,
    failures: Vec<usize>,
    title_seed: String,
}

/// Clusters the reports of one measured state. `required` names the stages
/// whose passing is hard pass.
pub fn assess(reports: &[StageReport], required: &[String], model: &EnergyModel) -> Assessment {
    let mut diagnostics = dedup_by_site(reports.iter().flat_map(|r| r.diagnostics.iter().cloned()));
    // Cargo compiles a workspace's packages, and a crate's library and test
    // builds, in parallel: their messages interleave as they finish. In
    // site order, the same evidence reads the same every run, and so do the
    // packets and candidates made from it.
    diagnostics.sort_by(|a, b| a.primary.cmp(&b.primary).then_with(|| a.cmp(b)));
    let mut staged: Vec<(TestFailure, &str)> = reports
        .iter()
        .flat_map(|r| r.failures.iter().map(|f| (f.clone(), r.stage.as_str())))
        .collect();
    // libtest reports tests as they finish, in no fixed order: sorted, a
    // cluster's sites (and the site shown first) are the same every run.
    staged.sort();
    let (failures, failure_stages): (Vec<TestFailure>, Vec<&str>) = staged.into_iter().unzip();

    let mut drafts: BTreeMap<String, Draft> = BTreeMap::new();
    let mut import_suggested: BTreeMap<String, bool> = BTreeMap::new();
    for (i, d) in diagnostics.iter().enumerate() {
        let class = classify(d);
        let key = cluster_key(class, d);
        *import_suggested.entry(key.clone()).or_default() |= suggests_import(d);
        let draft = drafts.entry(key).or_insert_with(|| Draft {
            class,
            stage: d.stage.clone(),
            sites: Vec::new(),
            diagnostics: Vec::new(),
            failures: Vec::new(),
            title_seed: first_backticked(&d.message)
                .map(str::to_owned)
                .unwrap_or_else(|| d.message.clone()),
        });
        draft.diagnostics.push(i);
        draft.sites.push(Site {
            path: d.primary.as_ref().map(|s| s.path.clone()),
            span: d.primary.clone(),
            message: d.message.clone(),
        });
    }
    for (i, (f, key)) in failures
        .iter()
        .zip(test_cluster_keys(&failures))
        .enumerate()
    {
        let draft = drafts.entry(key).or_insert_with(|| Draft {
            class: ResidualClass::TestFailure,
            stage: failure_stages[i].to_owned(),
            sites: Vec::new(),
            diagnostics: Vec::new(),
            failures: Vec::new(),
            title_seed: f.name.clone(),
        });
        draft.failures.push(i);
        draft.sites.push(Site {
            path: f.location.as_ref().map(|s| s.path.clone()),
            span: f.location.clone(),
            message: format!("test `{}` failed", f.name),
        });
    }
    for report in reports {
        if let StageStatus::Unavailable { reason } = &report.status {
            drafts.insert(
                format!("unavailable:{}", report.stage),
                Draft {
                    class: ResidualClass::SensorUnavailable,
                    stage: report.stage.clone(),
                    sites: vec![Site {
                        path: None,
                        span: None,
                        message: reason.clone(),
                    }],
                    diagnostics: Vec::new(),
                    failures: Vec::new(),
                    title_seed: reason.clone(),
                },
            );
        }
    }

    let mut clusters: Vec<Cluster> = drafts
        .into_iter()
        .map(|(key, draft)| {
            let n = draft.sites.len();
            let title = match draft.class {
                ResidualClass::UnresolvedName if import_suggested[&key] => {
                    format!("`{}` is not imported{}", draft.title_seed, plural_sites(n))
                }
                ResidualClass::UnresolvedName => {
                    format!("`{}` cannot be found{}", draft.title_seed, plural_sites(n))
                }
                ResidualClass::TestFailure if key.starts_with(CALLS_PREFIX) => {
                    let name = &key[CALLS_PREFIX.len()..];
                    // Failures are sorted, so the first definition found is
                    // the same every run.
                    let defined = draft
                        .failures
                        .iter()
                        .flat_map(|&i| &failures[i].calls)
                        .find_map(|c| c.defined_at.as_ref().filter(|_| c.name == name))
                        .map(|span| format!(", defined at {}", site_location(span)))
                        .unwrap_or_default();
                    format!(
                        "{} tests fail calling `{name}`{defined}",
                        draft.failures.len()
                    )
                }
                ResidualClass::TestFailure if draft.failures.len() == 1 => {
                    format!("test `{}` fails", draft.title_seed)
                }
                ResidualClass::TestFailure => {
                    let at = draft.sites[0]
                        .span
                        .as_ref()
                        .map(site_location)
                        .unwrap_or_default();
                    format!("{} tests fail at {at}", draft.failures.len())
                }
                ResidualClass::SensorUnavailable => {
                    format!(
                        "stage `{}` could not run: {}",
                        draft.stage, draft.title_seed
                    )
                }
                ResidualClass::Warning => {
                    format!("warning: {}{}", draft.sites[0].message, plural_sites(n))
                }
                _ if key.starts_with("arity:") => {
                    let definition = key.splitn(3, ':').nth(2).unwrap_or_default();
                    format!(
                        "calls pass the wrong number of arguments to the function defined at {definition}{}",
                        plural_sites(n)
                    )
                }
                _ => {
                    let at = draft.sites[0]
                        .span
                        .as_ref()
                        .map(|s| format!(" at {}", site_location(s)))
                        .unwrap_or_default();
                    format!("{}{at}", draft.sites[0].message)
                }
            };
            let r = magnitude(n);
            let digest = CanonicalHasher::new("trellis.cluster.v1")
                .str(&key)
                .finish();
            Cluster {
                id: format!("c{}", digest.short(8)),
                key,
                class: draft.class,
                stage: draft.stage,
                title,
                sites: draft.sites,
                diagnostics: draft.diagnostics,
                failures: draft.failures,
                magnitude: r,
                energy: model.weight(draft.class) * r * r,
                digest,
            }
        })
        .collect();
    clusters.sort_by(|a, b| {
        b.energy
            .total_cmp(&a.energy)
            .then(a.class.cmp(&b.class))
            .then(a.key.cmp(&b.key))
    });

    // Folded from +0.0: an empty f64 sum is -0.0, which would print as "-0.00".
    let energy = clusters.iter().map(|c| c.energy).fold(0.0, |a, b| a + b);
    let hard_pass = required.iter().all(|stage| {
        reports
            .iter()
            .any(|r| &r.stage == stage && r.status == StageStatus::Passed)
    });
    Assessment {
        diagnostics,
        failures,
        clusters,
        energy,
        hard_pass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::{Applicability, Call, Fixer, Replacement, Suggestion, SuggestionGroup};
    use crate::sensor::test_report as report;

    fn span(path: &str, line: u32) -> Span {
        Span {
            path: crate::workspace_path::WorkspacePath::new(path).unwrap(),
            byte_start: line * 10,
            byte_end: line * 10 + 5,
            line_start: line,
            col_start: 1,
            line_end: line,
            col_end: 6,
            label: None,
        }
    }

    fn diag(code: Option<&str>, level: Level, message: &str, line: u32) -> Diagnostic {
        Diagnostic {
            stage: "build".into(),
            code: code.map(str::to_owned),
            level,
            message: message.into(),
            primary: Some(span("src/lib.rs", line)),
            secondary: vec![],
            notes: vec![],
            suggestions: vec![],
            rendered: None,
        }
    }

    fn required() -> Vec<String> {
        vec!["build".into(), "test".into()]
    }

    #[test]
    fn tsc_sites_of_one_missing_name_are_one_cluster_and_its_syntax_errors_weigh_as_syntax() {
        let mut diags: Vec<Diagnostic> = (1..=3)
            .map(|l| diag(Some("TS2304"), Level::Error, "Cannot find name 'mean'.", l))
            .collect();
        diags.push(diag(
            Some("TS2552"),
            Level::Error,
            "Cannot find name 'mean'. Did you mean 'median'?",
            4,
        ));
        diags[0].suggestions.push(SuggestionGroup {
            alternatives: vec![Suggestion {
                message: "Update import from \"./stats.js\"".into(),
                applicability: Applicability::MaybeIncorrect,
                fixer: Fixer::Tsserver,
                replacements: vec![Replacement {
                    span: span("src/lib.rs", 0),
                    text: "mean, ".into(),
                }],
            }],
        });
        diags.push(diag(Some("TS1005"), Level::Error, "';' expected.", 9));
        let a = assess(
            &[report("build", StageStatus::Failed, diags, vec![])],
            &required(),
            &EnergyModel::V1,
        );
        let classes: Vec<(ResidualClass, &str)> = a
            .clusters
            .iter()
            .map(|c| (c.class, c.title.as_str()))
            .collect();
        assert_eq!(
            classes,
            [
                (
                    ResidualClass::UnresolvedName,
                    "`mean` is not imported (4 sites)"
                ),
                (ResidualClass::Syntax, "';' expected. at src/lib.rs:9"),
            ]
        );
    }

    #[test]
    fn a_cascade_of_one_missing_name_is_one_cluster() {
        let mut diags: Vec<Diagnostic> = (1..=150)
            .map(|l| {
                diag(
                    Some("E0412"),
                    Level::Error,
                    "cannot find type `Point` in this scope",
                    l,
                )
            })
            .collect();
        diags[0].suggestions.push(SuggestionGroup {
            alternatives: vec![Suggestion {
                message: "consider importing this struct".into(),
                applicability: Applicability::MaybeIncorrect,
                fixer: Fixer::Rustc,
                replacements: vec![Replacement {
                    span: span("src/lib.rs", 0),
                    text: "use crate::geo::Point;\n".into(),
                }],
            }],
        });
        diags.push(diag(
            Some("E0425"),
            Level::Error,
            "cannot find value `Point` in this scope",
            200,
        ));
        let a = assess(
            &[report("build", StageStatus::Failed, diags, vec![])],
            &required(),
            &EnergyModel::V1,
        );
        let unresolved: Vec<_> = a
            .clusters
            .iter()
            .filter(|c| c.class == ResidualClass::UnresolvedName)
            .collect();
        assert_eq!(unresolved.len(), 1);
        assert_eq!(unresolved[0].title, "`Point` is not imported (151 sites)");
        assert!(
            a.energy < 15.0,
            "a cascade must weigh about one cluster, got {}",
            a.energy
        );
        assert!(!a.hard_pass);
    }

    #[test]
    fn distinct_borrow_errors_are_distinct_clusters() {
        let diags = vec![
            diag(
                Some("E0596"),
                Level::Error,
                "cannot borrow `v` as mutable",
                3,
            ),
            diag(
                Some("E0596"),
                Level::Error,
                "cannot borrow `w` as mutable",
                9,
            ),
        ];
        let a = assess(
            &[report("build", StageStatus::Failed, diags, vec![])],
            &required(),
            &EnergyModel::V1,
        );
        assert_eq!(a.clusters.len(), 2);
        assert_eq!(
            a.clusters[0].title,
            "cannot borrow `v` as mutable at src/lib.rs:3"
        );
    }

    /// Item 8 of issue 36: diagnostics of two packages reported in either
    /// order (as two parallel compilations finish) are the same assessment.
    #[test]
    fn diagnostics_reported_in_any_order_are_the_same_assessment() {
        let at = |path: &str, line: u32| Diagnostic {
            primary: Some(span(path, line)),
            ..diag(Some("E0384"), Level::Error, "cannot assign twice", line)
        };
        let reported = vec![
            at("b/src/lib.rs", 3),
            at("a/src/lib.rs", 7),
            at("a/src/lib.rs", 2),
        ];
        let mut reversed = reported.clone();
        reversed.reverse();
        let assessed = |diagnostics| {
            assess(
                &[report("build", StageStatus::Failed, diagnostics, vec![])],
                &required(),
                &EnergyModel::V1,
            )
        };
        let (one, other) = (assessed(reported), assessed(reversed));
        assert_eq!(one, other);
        let paths: Vec<String> = one
            .diagnostics
            .iter()
            .map(|d| format!("{}", d.primary.as_ref().unwrap().path))
            .collect();
        assert_eq!(paths, ["a/src/lib.rs", "a/src/lib.rs", "b/src/lib.rs"]);
    }

    #[test]
    fn duplicates_across_targets_and_stages_are_one_site() {
        let d = diag(None, Level::Warning, "unused variable: `x`", 4);
        let mut t = d.clone();
        t.stage = "test".into();
        let a = assess(
            &[
                report("build", StageStatus::Passed, vec![d.clone(), d], vec![]),
                report("test", StageStatus::Passed, vec![t], vec![]),
            ],
            &required(),
            &EnergyModel::V1,
        );
        assert_eq!(a.diagnostics.len(), 1);
        assert_eq!(a.clusters[0].sites.len(), 1);
        assert!(a.hard_pass, "warnings are advisory");
    }

    #[test]
    fn fixing_an_earlier_phase_is_a_descent_even_if_it_reveals_a_later_one() {
        let unresolved = assess(
            &[
                report(
                    "build",
                    StageStatus::Failed,
                    vec![diag(
                        Some("E0433"),
                        Level::Error,
                        "failed to resolve: use of undeclared type `HashMap`",
                        2,
                    )],
                    vec![],
                ),
                report(
                    "test",
                    StageStatus::Unavailable {
                        reason: "build failed".into(),
                    },
                    vec![],
                    vec![],
                ),
            ],
            &required(),
            &EnergyModel::V1,
        );
        let borrow = assess(
            &[
                report(
                    "build",
                    StageStatus::Failed,
                    vec![diag(
                        Some("E0596"),
                        Level::Error,
                        "cannot borrow `m` as mutable",
                        5,
                    )],
                    vec![],
                ),
                report(
                    "test",
                    StageStatus::Unavailable {
                        reason: "build failed".into(),
                    },
                    vec![],
                    vec![],
                ),
            ],
            &required(),
            &EnergyModel::V1,
        );
        assert!(
            borrow.energy <= unresolved.energy - 0.5,
            "{} vs {}",
            borrow.energy,
            unresolved.energy
        );
    }

    #[test]
    fn unavailable_required_stage_blocks_hard_pass_but_advisory_does_not() {
        let reports = [
            report("build", StageStatus::Passed, vec![], vec![]),
            report(
                "test",
                StageStatus::Unavailable {
                    reason: "timed out after 600s".into(),
                },
                vec![],
                vec![],
            ),
        ];
        let a = assess(&reports, &required(), &EnergyModel::V1);
        assert!(!a.hard_pass);
        assert_eq!(
            a.clusters[0].title,
            "stage `test` could not run: timed out after 600s"
        );
        let a = assess(&reports, &["build".to_owned()], &EnergyModel::V1);
        assert!(a.hard_pass);
    }

    #[test]
    fn failing_tests_are_counterexample_clusters() {
        let failure = TestFailure {
            binary: "lib".into(),
            name: "tests::adds".into(),
            output: "assertion failed".into(),
            location: Some(span("src/lib.rs", 12)),
            calls: vec![],
            rerun: None,
        };
        let a = assess(
            &[
                report("build", StageStatus::Passed, vec![], vec![]),
                report("test", StageStatus::Failed, vec![], vec![failure]),
            ],
            &required(),
            &EnergyModel::V1,
        );
        assert_eq!(a.clusters.len(), 1);
        assert_eq!(a.clusters[0].class, ResidualClass::TestFailure);
        assert_eq!(a.clusters[0].title, "test `tests::adds` fails");
        assert_eq!(a.clusters[0].failures, vec![0]);
    }

    #[test]
    fn cluster_ids_are_stable() {
        let d = || {
            vec![diag(
                Some("E0425"),
                Level::Error,
                "cannot find value `y` in this scope",
                1,
            )]
        };
        let a = assess(
            &[report("build", StageStatus::Failed, d(), vec![])],
            &required(),
            &EnergyModel::V1,
        );
        let b = assess(
            &[report("build", StageStatus::Failed, d(), vec![])],
            &required(),
            &EnergyModel::V1,
        );
        assert_eq!(a.clusters[0].id, b.clusters[0].id);
        assert_eq!(a.clusters[0].key, "unresolved:y");
        // Pinned: ids live in editors' diagnostics and in the ledger.
        assert_eq!(a.clusters[0].id, "c2224e22d");
    }

    fn failing(name: &str, line: u32, calls: &[&str]) -> TestFailure {
        TestFailure {
            binary: "-p shop --lib".into(),
            name: name.into(),
            output: "assertion `left == right` failed".into(),
            location: Some(span("src/lib.rs", line)),
            calls: calls
                .iter()
                .map(|c| Call {
                    name: (*c).to_owned(),
                    defined_at: (*c == "price").then(|| span("src/lib.rs", 3)),
                })
                .collect(),
            rerun: None,
        }
    }

    fn assess_failures(failures: Vec<TestFailure>) -> Assessment {
        assess(
            &[
                report("build", StageStatus::Passed, vec![], vec![]),
                report("test", StageStatus::Failed, vec![], failures),
            ],
            &required(),
            &EnergyModel::V1,
        )
    }

    /// Each cluster as (id, title, its failing tests by name, sorted).
    fn grouping(a: &Assessment) -> Vec<(String, String, Vec<String>)> {
        let mut groups: Vec<_> = a
            .clusters
            .iter()
            .map(|c| {
                let mut names: Vec<String> = c
                    .failures
                    .iter()
                    .map(|&i| a.failures[i].name.clone())
                    .collect();
                names.sort();
                (c.id.clone(), c.title.clone(), names)
            })
            .collect();
        groups.sort();
        groups
    }

    #[test]
    fn tests_failing_at_their_own_assertions_through_one_function_are_one_cluster() {
        let mut failures: Vec<TestFailure> = (0..12)
            .map(|i| failing(&format!("tests::price_{i}"), 40 + i, &["price"]))
            .collect();
        failures.push(failing("tests::rounds", 90, &["round_cents"]));
        let a = assess_failures(failures);
        assert_eq!(a.clusters.len(), 2, "{:#?}", grouping(&a));
        assert_eq!(
            a.clusters[0].title,
            "12 tests fail calling `price`, defined at src/lib.rs:3"
        );
        assert_eq!(a.clusters[0].failures.len(), 12);
        assert_eq!(a.clusters[1].title, "test `tests::rounds` fails");
    }

    #[test]
    fn tests_panicking_at_one_site_are_one_cluster_named_by_it() {
        let failures = (0..5)
            .map(|i| failing(&format!("tests::t{i}"), 7, &[["a", "b"][i % 2]]))
            .collect();
        let a = assess_failures(failures);
        assert_eq!(a.clusters.len(), 1, "{:#?}", grouping(&a));
        assert_eq!(a.clusters[0].title, "5 tests fail at src/lib.rs:7");
    }

    #[test]
    fn wrong_arity_calls_of_one_function_are_one_cluster() {
        let call = |line: u32, supplied: &str, defined_at: u32| {
            let mut d = diag(
                Some("E0061"),
                Level::Error,
                &format!("this function takes 1 argument but {supplied} were supplied"),
                line,
            );
            d.notes.push(crate::diagnostic::Note {
                level: Level::Note,
                message: "function defined here".into(),
                span: Some(span("src/lib.rs", defined_at)),
            });
            d
        };
        let diags = vec![
            call(10, "2 arguments", 2),
            call(20, "3 arguments", 2),
            call(30, "2 arguments", 2),
            call(40, "0 arguments", 5),
        ];
        let a = assess(
            &[report("build", StageStatus::Failed, diags, vec![])],
            &required(),
            &EnergyModel::V1,
        );
        let titles: Vec<&str> = a.clusters.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "calls pass the wrong number of arguments to the function defined at src/lib.rs:2 (3 sites)",
                "calls pass the wrong number of arguments to the function defined at src/lib.rs:5",
            ]
        );
    }

    proptest::proptest! {
        /// Clusters are a function of the set of failures: their order (the
        /// order cargo ran the tests in) changes no cluster, title or id.
        #[test]
        fn permuting_failures_never_changes_the_clusters(
            specs in proptest::collection::vec((0u32..4, proptest::collection::vec(0usize..3, 0..3)), 1..12),
            seed in proptest::prelude::any::<u64>(),
        ) {
            const FNS: [&str; 3] = ["price", "tax", "round"];
            let failures: Vec<TestFailure> = specs
                .iter()
                .enumerate()
                .map(|(i, (line, calls))| {
                    let calls: Vec<&str> = calls.iter().map(|&c| FNS[c]).collect();
                    failing(&format!("tests::t{i}"), 10 + line, &calls)
                })
                .collect();
            let mut shuffled = failures.clone();
            // A deterministic Fisher–Yates shuffle driven by `seed`.
            let mut state = seed | 1;
            for i in (1..shuffled.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                shuffled.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let keys = test_cluster_keys(&failures);
            let shuffled_keys = test_cluster_keys(&shuffled);
            for (f, key) in shuffled.iter().zip(&shuffled_keys) {
                let original = failures.iter().position(|o| o == f).unwrap();
                proptest::prop_assert_eq!(key, &keys[original]);
            }
            proptest::prop_assert_eq!(
                grouping(&assess_failures(failures)),
                grouping(&assess_failures(shuffled))
            );
        }
    }
}
