//! Proposers turn a correction packet into candidate edits.
//!
//! [`SuggestionProposer`] is the deterministic one: it reads the compiler's
//! own suggestions. One candidate applies every unambiguous suggestion of
//! the cluster at once; where a diagnostic offers alternatives (three
//! possible imports, or an import and a rename in two helps), each
//! alternative is its own candidate, taken the same way at every site that
//! offers the same set, and the sensors, not the proposer, decide between
//! them. A fix whose tool does
//! not vouch for its behaviour ([`Suggestion::stands_alone`]: ruff's unsafe
//! and display-only fixes) is never in the combined candidate: it is an
//! alternative of its own. Which fixes those are is each tool's meaning of
//! its applicability ([`Fixer::stands_alone`]); the proposer never asks
//! which stage reported a fix.
//!
//! Its candidates' route names the tools that supplied the fixes
//! ([`Fixer::route`]: `rustc-suggestions`, `ty-fixes`, ...); every candidate
//! of one packet has the same route, so a plan is one route as it always
//! was, and the search treats every tool route as that one deterministic
//! route ([`crate::diagnostic::is_tool_route`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::correction::CorrectionPacket;
use crate::diagnostic::{Applicability, Diagnostic, Fixer, Suggestion, SuggestionGroup};
use crate::digest::{CanonicalHasher, Digest};
use crate::edit::TextEdit;
use crate::workspace_path::WorkspacePath;

/// A proposed change to the accepted state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// What the candidate does, for a person.
    pub label: String,
    /// Which route made it: the tools whose fixes it comes from
    /// (`rustc-suggestions`, `ruff-fixes`, ...) or a model route.
    pub proposer: String,
    /// Byte-range edits, each with the file it edits.
    pub edits: Vec<(WorkspacePath, TextEdit)>,
    /// Which of the tools' alternatives this candidate takes (0-based), or
    /// `None` when it only applies single-fix suggestions.
    pub alternative: Option<u32>,
}

impl Candidate {
    /// The canonical proposal digest (a component of the no-good key).
    pub fn digest(&self) -> Digest {
        let mut edits = self.edits.clone();
        edits.sort();
        let mut h = CanonicalHasher::new("trellis.proposal.v1");
        h.str(&self.proposer).u64(edits.len() as u64);
        for (path, e) in &edits {
            h.str(path)
                .u64(e.byte_start as u64)
                .u64(e.byte_end as u64)
                .str(&e.new_text);
        }
        h.finish()
    }
}

/// A source of candidates. Object-safe so the forest can hold several.
pub trait Proposer: Send + Sync {
    /// At most `limit` candidates for `packet`, best first.
    fn propose(&self, packet: &CorrectionPacket, limit: usize) -> Vec<Candidate>;
}

/// Turns the tools' suggestions into candidates.
pub struct SuggestionProposer;

/// The route of a packet's fixes: the tool that supplied them, or the
/// tools joined by `+` (in [`Fixer`] order) when several did.
fn route<'s>(fixes: impl IntoIterator<Item = &'s Suggestion>) -> String {
    let fixers: BTreeSet<Fixer> = fixes.into_iter().map(|s| s.fixer).collect();
    fixers
        .into_iter()
        .map(Fixer::route)
        .collect::<Vec<_>>()
        .join("+")
}

fn usable(s: &Suggestion) -> bool {
    s.applicability != Applicability::HasPlaceholders && !s.replacements.is_empty()
}

fn edits_of(s: &Suggestion) -> impl Iterator<Item = (WorkspacePath, TextEdit)> + '_ {
    s.replacements.iter().map(|r| {
        let edit = TextEdit {
            byte_start: r.span.byte_start as usize,
            byte_end: r.span.byte_end as usize,
            new_text: r.text.clone(),
        };
        (r.span.path.clone(), edit)
    })
}

fn describe(s: &Suggestion) -> String {
    match s.replacements.as_slice() {
        [only] if !only.text.trim().is_empty() => format!("{}: `{}`", s.message, only.text.trim()),
        _ => s.message.clone(),
    }
}

/// One diagnostic's fixes as one choice: every alternative any of its
/// suggestions offers, each once. rustc offers each way out of an error as
/// a help of its own ("consider importing this module", "a builtin type
/// with a similar name exists"): they are alternatives, never applied
/// together. A fix its tool does not vouch for goes to `standalone`.
fn choice_of(diagnostic: &Diagnostic, standalone: &mut Vec<Suggestion>) -> Vec<Suggestion> {
    let mut alternatives: Vec<Suggestion> = Vec::new();
    for group in &diagnostic.suggestions {
        if let Some(fix) = own_alternative(group) {
            standalone.push(fix.clone());
            continue;
        }
        for fix in group.alternatives.iter().filter(|s| usable(s)) {
            if !alternatives
                .iter()
                .any(|seen| seen.replacements == fix.replacements)
            {
                alternatives.push(fix.clone());
            }
        }
    }
    alternatives
}

/// What an alternative writes, wherever it writes it: the same import
/// offered at two sites, or the same rename, has one key.
fn alternative_key(s: &Suggestion) -> String {
    s.replacements
        .iter()
        .map(|r| r.text.trim())
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// The alternatives a site offers, as a set: sites offering the same set
/// (150 uses of one unimported type, in one file or several) are one
/// decision, whatever order each lists them in.
fn choice_key(alternatives: &[Suggestion]) -> BTreeSet<String> {
    alternatives.iter().map(alternative_key).collect()
}

impl Proposer for SuggestionProposer {
    fn propose(&self, packet: &CorrectionPacket, limit: usize) -> Vec<Candidate> {
        let mut standalone: Vec<Suggestion> = Vec::new();
        let choices: Vec<Vec<Suggestion>> = packet
            .diagnostics
            .iter()
            .map(|d| choice_of(d, &mut standalone))
            .filter(|choice| !choice.is_empty())
            .collect();

        let proposer = route(choices.iter().flatten().chain(&standalone));
        let mut unambiguous: Vec<(WorkspacePath, TextEdit)> = Vec::new();
        let mut labels: BTreeSet<String> = BTreeSet::new();
        for only in choices.iter().filter(|c| c.len() == 1).map(|c| &c[0]) {
            unambiguous.extend(edits_of(only));
            labels.insert(describe(only));
        }
        unambiguous.sort();
        unambiguous.dedup();

        let mut candidates = Vec::new();
        if !unambiguous.is_empty() {
            candidates.push(Candidate {
                label: labels.into_iter().collect::<Vec<_>>().join("; "),
                proposer: proposer.clone(),
                edits: unambiguous.clone(),
                alternative: None,
            });
        }
        // The first ambiguous choice decides the alternatives; every site
        // that offers the same set takes the same one, so no candidate
        // takes one alternative at a site and another at the next.
        if let Some(choice) = choices.iter().find(|c| c.len() > 1) {
            let key = choice_key(choice);
            let same_choice: Vec<&Vec<Suggestion>> =
                choices.iter().filter(|c| choice_key(c) == key).collect();
            for (i, alternative) in choice.iter().enumerate() {
                let wanted = alternative_key(alternative);
                let mut edits = unambiguous.clone();
                for site in &same_choice {
                    if let Some(fix) = site.iter().find(|s| alternative_key(s) == wanted) {
                        edits.extend(edits_of(fix));
                    }
                }
                edits.sort();
                edits.dedup();
                candidates.push(Candidate {
                    label: describe(alternative),
                    proposer: proposer.clone(),
                    edits,
                    alternative: u32::try_from(i).ok(),
                });
            }
        }
        // A fix its tool does not vouch for may change what the code does:
        // never folded into the combined candidate, each one is an
        // alternative of its own, verified like any other.
        let first_own = candidates
            .iter()
            .filter(|c| c.alternative.is_some())
            .count();
        let mut seen: BTreeSet<Vec<(WorkspacePath, TextEdit)>> = BTreeSet::new();
        for fix in standalone {
            let mut edits = unambiguous.clone();
            edits.extend(edits_of(&fix));
            edits.sort();
            edits.dedup();
            if !seen.insert(edits.clone()) {
                continue;
            }
            candidates.push(Candidate {
                label: describe(&fix),
                proposer: proposer.clone(),
                edits,
                alternative: u32::try_from(first_own + seen.len() - 1).ok(),
            });
        }
        candidates.truncate(limit);
        candidates
    }
}

/// The single fix of `group` when it must be its own alternative: one
/// whose tool does not vouch for its behaviour ([`Suggestion::stands_alone`]:
/// ruff's `unsafe` and display-only fixes). A `MaybeIncorrect` fix of
/// rustc, ty or tsserver still joins the combined candidate: it may not be
/// the intended one, which verification decides, but it does what it says.
fn own_alternative(group: &SuggestionGroup) -> Option<&Suggestion> {
    let [fix] = group.alternatives.as_slice() else {
        return None;
    };
    (usable(fix) && fix.stands_alone()).then_some(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ResidualClass;
    use crate::correction::AffectedSet;
    use crate::diagnostic::{Diagnostic, Level, Replacement, Span};

    fn span(at: u32) -> Span {
        Span {
            path: crate::workspace_path::WorkspacePath::new("src/lib.rs").unwrap(),
            byte_start: at,
            byte_end: at,
            line_start: 1,
            col_start: 1,
            line_end: 1,
            col_end: 1,
            label: None,
        }
    }

    fn alt(text: &str, at: u32) -> Suggestion {
        Suggestion {
            message: "consider importing".into(),
            applicability: Applicability::MaybeIncorrect,
            fixer: Fixer::Rustc,
            replacements: vec![Replacement {
                span: span(at),
                text: text.into(),
            }],
        }
    }

    fn packet(groups: Vec<Vec<SuggestionGroup>>) -> CorrectionPacket {
        packet_of("build", groups)
    }

    fn packet_of(stage: &str, groups: Vec<Vec<SuggestionGroup>>) -> CorrectionPacket {
        CorrectionPacket {
            cluster_id: "c1".into(),
            cluster_title: "t".into(),
            class: ResidualClass::UnresolvedName,
            diagnostics: groups
                .into_iter()
                .map(|suggestions| Diagnostic {
                    stage: stage.into(),
                    code: Some("E0412".into()),
                    level: Level::Error,
                    message: "cannot find type `Item`".into(),
                    primary: None,
                    secondary: vec![],
                    notes: vec![],
                    suggestions,
                    rendered: None,
                })
                .collect(),
            counterexamples: vec![],
            affected: AffectedSet::default(),
            operators: vec![],
            follow_up_stages: vec![],
            uncertainty: vec![],
        }
    }

    #[test]
    fn one_candidate_applies_every_unambiguous_suggestion() {
        let p = packet(vec![
            vec![SuggestionGroup {
                alternatives: vec![alt("use a::A;\n", 0)],
            }],
            vec![SuggestionGroup {
                alternatives: vec![alt("mut ", 40)],
            }],
            vec![SuggestionGroup {
                alternatives: vec![alt("use a::A;\n", 0)],
            }],
        ]);
        let c = SuggestionProposer.propose(&p, 3);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].edits.len(), 2, "duplicate import collapses");
    }

    #[test]
    fn each_alternative_is_its_own_candidate_across_all_sites() {
        let choice = || SuggestionGroup {
            alternatives: vec![
                alt("use crate::fast::Item;\n", 0),
                alt("use crate::slow::Item;\n", 0),
            ],
        };
        let p = packet(vec![vec![choice()], vec![choice()]]);
        let c = SuggestionProposer.propose(&p, 3);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].edits[0].1.new_text, "use crate::fast::Item;\n");
        assert_eq!(c[1].edits[0].1.new_text, "use crate::slow::Item;\n");
        assert_ne!(c[0].digest(), c[1].digest());
    }

    /// Issue 36: rustc offers "a builtin type with a similar name exists:
    /// `str`" and "consider importing this module" as two helps of one
    /// error at every site. They are one choice, not two fixes to apply
    /// together: one candidate renames at every site, the other imports,
    /// and none mixes them, whatever order a site lists them in.
    #[test]
    fn a_diagnostics_helps_are_one_choice_taken_the_same_at_every_site() {
        let import = || SuggestionGroup {
            alternatives: vec![alt("use std::ptr;\n", 0)],
        };
        let rename = |at| SuggestionGroup {
            alternatives: vec![alt("str", at)],
        };
        let p = packet(vec![
            vec![rename(40), import()],
            vec![import(), rename(80)],
            vec![rename(120), import()],
        ]);
        let c = SuggestionProposer.propose(&p, 5);
        let texts = |c: &Candidate| -> Vec<(u32, String)> {
            c.edits
                .iter()
                .map(|(_, e)| (e.byte_start as u32, e.new_text.clone()))
                .collect()
        };
        assert_eq!(c.len(), 2, "{c:#?}");
        assert_eq!(
            texts(&c[0]),
            [(40, "str".into()), (80, "str".into()), (120, "str".into())]
        );
        assert_eq!(texts(&c[1]), [(0, "use std::ptr;\n".into())]);
        assert_eq!((c[0].alternative, c[1].alternative), (Some(0), Some(1)));
    }

    #[test]
    fn placeholders_are_never_proposed_and_limit_holds() {
        let mut placeholder = alt("/* value */", 3);
        placeholder.applicability = Applicability::HasPlaceholders;
        let p = packet(vec![vec![SuggestionGroup {
            alternatives: vec![placeholder],
        }]]);
        assert!(SuggestionProposer.propose(&p, 3).is_empty());
        let four = SuggestionGroup {
            alternatives: (0..4).map(|i| alt(&format!("use m{i}::X;\n"), 0)).collect(),
        };
        assert_eq!(
            SuggestionProposer
                .propose(&packet(vec![vec![four]]), 3)
                .len(),
            3
        );
    }

    /// Issue 12: ruff's unsafe and display-only fixes are each their own
    /// alternative (with the safe fixes), never in the combined candidate;
    /// rustc's, ty's and tsserver's `MaybeIncorrect` single fix still is.
    /// The stage that reported a fix never decides: its tool's word does.
    #[test]
    fn ruffs_unsafe_and_display_only_fixes_are_their_own_alternatives() {
        let with =
            |fixer: Fixer, text: &str, at: u32, applicability: Applicability| SuggestionGroup {
                alternatives: vec![Suggestion {
                    applicability,
                    fixer,
                    ..alt(text, at)
                }],
            };
        let texts = |c: &Candidate| -> Vec<String> {
            c.edits.iter().map(|(_, e)| e.new_text.clone()).collect()
        };
        for stage in ["python.lint", "build"] {
            let ruff = |text, at, applicability| with(Fixer::Ruff, text, at, applicability);
            let lint = packet_of(
                stage,
                vec![
                    vec![ruff("", 0, Applicability::MachineApplicable)],
                    vec![ruff("x", 10, Applicability::MaybeIncorrect)],
                    vec![ruff("y", 20, Applicability::Unspecified)],
                    vec![ruff("x", 10, Applicability::MaybeIncorrect)],
                ],
            );
            let c = SuggestionProposer.propose(&lint, 5);
            assert_eq!(c.len(), 3, "{stage}: {c:#?}");
            assert_eq!((texts(&c[0]), c[0].alternative), (vec!["".into()], None));
            assert_eq!(
                (texts(&c[1]), c[1].alternative),
                (vec!["".into(), "x".into()], Some(0)),
                "{stage}: the same unsafe fix twice is one alternative"
            );
            assert_eq!(
                (texts(&c[2]), c[2].alternative),
                (vec!["".into(), "y".into()], Some(1))
            );
            // The same words from the other tools stay one combined candidate.
            for fixer in [Fixer::Rustc, Fixer::Ty, Fixer::Tsserver] {
                let ordinary = packet_of(
                    stage,
                    vec![
                        vec![with(fixer, "", 0, Applicability::MachineApplicable)],
                        vec![with(fixer, "x", 10, Applicability::MaybeIncorrect)],
                        vec![with(fixer, "y", 20, Applicability::Unspecified)],
                    ],
                );
                let c = SuggestionProposer.propose(&ordinary, 5);
                assert_eq!(c.len(), 1, "{stage} {fixer:?}: {c:#?}");
                assert_eq!(texts(&c[0]), ["", "x", "y"], "{stage} {fixer:?}");
            }
        }
    }

    /// Issue 4 of the review: the route names the tool that supplied the
    /// fixes, Rust's as it always did, and every candidate of one packet
    /// shares it.
    #[test]
    fn candidates_are_routed_by_the_tool_that_supplied_their_fixes() {
        let by = |fixer: Fixer, text: &str, applicability: Applicability| SuggestionGroup {
            alternatives: vec![Suggestion {
                fixer,
                applicability,
                ..alt(text, 0)
            }],
        };
        let routes = |groups: Vec<Vec<SuggestionGroup>>| -> Vec<String> {
            SuggestionProposer
                .propose(&packet(groups), 5)
                .into_iter()
                .map(|c| c.proposer)
                .collect()
        };
        let ordinary = Applicability::MaybeIncorrect;
        assert_eq!(
            routes(vec![vec![by(Fixer::Rustc, "a", ordinary)]]),
            ["rustc-suggestions"]
        );
        assert_eq!(
            routes(vec![vec![by(Fixer::Ty, "a", ordinary)]]),
            ["ty-fixes"]
        );
        assert_eq!(
            routes(vec![vec![by(Fixer::Tsserver, "a", ordinary)]]),
            ["tsserver-fixes"]
        );
        assert_eq!(
            routes(vec![
                vec![by(Fixer::Ruff, "a", Applicability::MachineApplicable)],
                vec![by(Fixer::Ruff, "b", Applicability::MaybeIncorrect)],
            ]),
            ["ruff-fixes", "ruff-fixes"]
        );
        // One packet with fixes of two tools is one route naming both.
        let mixed = routes(vec![
            vec![by(Fixer::Ruff, "b", ordinary)],
            vec![by(Fixer::Ty, "a", ordinary)],
        ]);
        assert_eq!(mixed, ["ty-fixes+ruff-fixes", "ty-fixes+ruff-fixes"]);
        assert!(mixed.iter().all(|r| crate::diagnostic::is_tool_route(r)));
        assert!(!crate::diagnostic::is_tool_route("model:local"));
    }
}
