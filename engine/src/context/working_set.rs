//! The working set of one request (PSP-10 Definition 6's O_t): the pages
//! that are candidates for residency, the rest staying in the backing
//! store as tombstones a recall can fault back in.
//!
//! A page is in the working set of turn t's request when it is current and
//! at least one of these holds: it was born or referenced in the last θ
//! turns (θ = `model_turns.working_set_turns`; a later page naming one of
//! its paths, or a `context_recall` of it, references it), the current
//! residual cluster names it (a path or failing test of the [`Focus`]), or
//! a recall asked for it in the turn before. Stale pages are never in it.
//!
//! A plain function of values: it never reads the branch, never decides
//! what fits ([`super::fit`] does, within the set), and leaves mandatory
//! pages to the fit, which pins them whether or not they are in it. The
//! set is recorded (`context_working_set`); replay reads it and the plan
//! back, never computes it again.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::page::{Live, Page, PageKeys};
use crate::digest::CanonicalHasher;

/// What the residual cluster is about: the paths it affects and the tests
/// that fail in it, from the correction packet (typed fields only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    pub paths: BTreeSet<String>,
    pub tests: BTreeSet<String>,
}

impl Focus {
    /// The cluster's paths a page's calls name.
    pub(super) fn paths_of<'k>(&'k self, keys: &'k PageKeys) -> impl Iterator<Item = &'k String> {
        keys.paths.iter().filter(|p| self.paths.contains(*p))
    }

    /// The cluster's failing tests a page's `run_tests` filters select
    /// (the name contains the filter).
    pub(super) fn tests_of<'k>(&'k self, keys: &'k PageKeys) -> impl Iterator<Item = &'k String> {
        self.tests
            .iter()
            .filter(|t| keys.tests.iter().any(|f| t.contains(f.as_str())))
    }

    /// Whether the cluster names the page by a path or a failing test.
    pub(super) fn names(&self, keys: &PageKeys) -> bool {
        self.paths_of(keys).next().is_some() || self.tests_of(keys).next().is_some()
    }
}

/// Everything one working set depends on.
#[derive(Debug, Clone, Copy)]
pub struct WorkingSetInput<'a> {
    /// The conversation's pages, in order.
    pub pages: &'a [Page],
    /// The turn whose request is being assembled.
    pub turn: u32,
    /// θ: how many of the turns before it keep their pages as candidates.
    pub turns: u32,
    pub live: &'a Live,
    pub focus: &'a Focus,
    /// The last turn in which `context_recall` named each page, by id.
    pub recalls: &'a BTreeMap<String, u32>,
    /// Ids of the pages recalled in the turn before: candidates now.
    pub recalled: &'a BTreeSet<String>,
}

/// The candidate pages of one request, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingSet {
    pub turn: u32,
    /// θ it was computed with.
    pub turns: u32,
    /// The page ids in it, in conversation order.
    pub pages: Vec<String>,
}

impl WorkingSet {
    /// The set's digest, over its turn, θ and page ids.
    pub fn digest(&self) -> String {
        let mut h = CanonicalHasher::new("trellis.context-working-set.v1");
        h.u64(u64::from(self.turn))
            .u64(u64::from(self.turns))
            .u64(self.pages.len() as u64);
        for id in &self.pages {
            h.str(id);
        }
        format!("sha256:{}", h.finish().to_hex())
    }

    pub fn contains(&self, id: &str) -> bool {
        self.pages.iter().any(|p| p == id)
    }
}

/// The working set of `input.turn`'s request.
pub fn working_set(input: WorkingSetInput<'_>) -> WorkingSet {
    let oldest = input.turn.saturating_sub(input.turns);
    let last = last_references(input.pages, input.recalls);
    let pages = input
        .pages
        .iter()
        .zip(&last)
        .filter(|(page, _)| page.stale_because(input.live).is_none())
        .filter(|(page, last)| {
            **last >= oldest
                || input.recalled.contains(&page.id)
                || input.focus.names(&page.span.keys)
        })
        .map(|(page, _)| page.id.clone())
        .collect();
    WorkingSet {
        turn: input.turn,
        turns: input.turns,
        pages,
    }
}

/// For each page, the last turn that referenced it: its birth, a later
/// page naming one of its paths, or a recall of it.
fn last_references(pages: &[Page], recalls: &BTreeMap<String, u32>) -> Vec<u32> {
    pages
        .iter()
        .enumerate()
        .map(|(i, page)| {
            let by_path = pages[i + 1..]
                .iter()
                .filter(|later| {
                    later
                        .span
                        .keys
                        .paths
                        .iter()
                        .any(|p| page.span.keys.paths.contains(p))
                })
                .map(|later| later.span.turn);
            let recalled = recalls.get(&page.id).copied();
            by_path.chain(recalled).fold(page.span.turn, u32::max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::context::testing::Msg;
    use crate::context::{Dependency, PageKeys, PageSpan, pages};

    /// One page per `(path, test filter)`, turns 1, 2, …, each page
    /// depending on the file `f{turn}`.
    fn conversation(turns: &[(&str, &str)]) -> Vec<Page> {
        let mut messages = Vec::new();
        let mut spans = Vec::new();
        for (i, (path, test)) in turns.iter().enumerate() {
            let turn = i as u32 + 1;
            spans.push(PageSpan {
                turn,
                start: messages.len(),
                len: 1,
                birth: vec![Dependency::File {
                    path: format!("f{turn}"),
                    blob: "b".into(),
                }],
                keys: PageKeys {
                    tools: vec!["read_file".into()],
                    call_ids: vec![format!("call_{turn}")],
                    paths: [path]
                        .iter()
                        .filter(|p| !p.is_empty())
                        .map(|p| p.to_string())
                        .collect(),
                    tests: [test]
                        .iter()
                        .filter(|t| !t.is_empty())
                        .map(|t| t.to_string())
                        .collect(),
                },
            });
            messages.push(Msg::Note(format!("turn {turn} read {path}")));
        }
        pages(&messages, &spans).unwrap()
    }

    /// Every page's file as it was born.
    fn current(pages: &[Page]) -> Live {
        let mut live = Live::default();
        for p in pages {
            live.blobs
                .insert(format!("f{}", p.span.turn), Some("b".into()));
        }
        live
    }

    struct Case<'a> {
        pages: &'a [Page],
        turn: u32,
        turns: u32,
        live: &'a Live,
        focus: Focus,
        recalls: BTreeMap<String, u32>,
        recalled: BTreeSet<String>,
    }

    impl<'a> Case<'a> {
        fn new(pages: &'a [Page], live: &'a Live, turn: u32, turns: u32) -> Case<'a> {
            Case {
                pages,
                turn,
                turns,
                live,
                focus: Focus::default(),
                recalls: BTreeMap::new(),
                recalled: BTreeSet::new(),
            }
        }

        /// The turns of the pages in the working set.
        fn members(&self) -> Vec<u32> {
            let set = self.set();
            self.pages
                .iter()
                .filter(|p| set.contains(&p.id))
                .map(|p| p.span.turn)
                .collect()
        }

        fn set(&self) -> WorkingSet {
            working_set(WorkingSetInput {
                pages: self.pages,
                turn: self.turn,
                turns: self.turns,
                live: self.live,
                focus: &self.focus,
                recalls: &self.recalls,
                recalled: &self.recalled,
            })
        }
    }

    #[test]
    fn only_the_pages_of_the_last_theta_turns_are_candidates() {
        let pages = conversation(&[("a.rs", ""), ("b.rs", ""), ("c.rs", ""), ("d.rs", "")]);
        let live = current(&pages);
        assert_eq!(Case::new(&pages, &live, 5, 1).members(), [4]);
        assert_eq!(Case::new(&pages, &live, 5, 2).members(), [3, 4]);
        assert_eq!(Case::new(&pages, &live, 5, 6).members(), [1, 2, 3, 4]);
    }

    #[test]
    fn a_later_page_on_the_same_path_keeps_an_old_page_in() {
        let pages = conversation(&[("a.rs", ""), ("b.rs", ""), ("c.rs", ""), ("a.rs", "")]);
        let live = current(&pages);
        assert_eq!(Case::new(&pages, &live, 5, 1).members(), [1, 4]);
    }

    #[test]
    fn the_residual_cluster_and_a_recall_name_pages_outside_the_window() {
        let pages = conversation(&[
            ("src/lib.rs", ""),
            ("b.rs", "adds"),
            ("c.rs", ""),
            ("d.rs", ""),
        ]);
        let live = current(&pages);
        let mut case = Case::new(&pages, &live, 5, 1);
        case.focus.paths.insert("src/lib.rs".into());
        assert_eq!(case.members(), [1, 4]);
        case.focus.tests.insert("tests::adds_two".into());
        assert_eq!(case.members(), [1, 2, 4]);
        let mut case = Case::new(&pages, &live, 5, 1);
        case.recalled.insert(pages[2].id.clone());
        assert_eq!(case.members(), [3, 4], "recalled in the turn before");
        // A recall two turns back referenced the page then: in a θ of 2, not of 1.
        let mut case = Case::new(&pages, &live, 6, 1);
        case.recalls.insert(pages[0].id.clone(), 4);
        assert_eq!(case.members(), Vec::<u32>::new(), "{:?}", case.set());
        case.turns = 2;
        assert_eq!(case.members(), [1, 4]);
    }

    #[test]
    fn a_stale_page_is_never_a_candidate_even_when_named() {
        let pages = conversation(&[("src/lib.rs", ""), ("b.rs", "")]);
        let mut live = current(&pages);
        live.blobs.insert("f1".into(), Some("changed".into()));
        live.blobs.insert("f2".into(), None);
        let mut case = Case::new(&pages, &live, 3, 6);
        case.focus.paths.insert("src/lib.rs".into());
        case.recalled.insert(pages[0].id.clone());
        assert!(case.set().pages.is_empty());
    }

    #[test]
    fn the_digest_covers_turn_theta_and_pages() {
        let pages = conversation(&[("a.rs", ""), ("b.rs", "")]);
        let live = current(&pages);
        let one = Case::new(&pages, &live, 3, 1).set();
        assert_eq!(one.digest(), Case::new(&pages, &live, 3, 1).set().digest());
        assert_ne!(one.digest(), Case::new(&pages, &live, 3, 2).set().digest());
        let later = WorkingSet {
            turn: 4,
            ..one.clone()
        };
        assert_ne!(one.digest(), later.digest());
        assert!(one.digest().starts_with("sha256:"));
    }

    proptest! {
        /// Deterministic, ordered, never stale, and every page of the last
        /// θ turns is in it; a larger θ never drops a page.
        #[test]
        fn the_working_set_is_a_deterministic_current_superset_of_the_window(
            paths in proptest::collection::vec(0usize..4, 1..10),
            stale in proptest::collection::vec(any::<bool>(), 10),
            turns in 1u32..8,
            recalled in proptest::collection::vec(0usize..10, 0..3),
        ) {
            let names = ["a.rs", "b.rs", "c.rs", ""];
            let turns_of: Vec<(&str, &str)> = paths.iter().map(|&p| (names[p], "")).collect();
            let pages = conversation(&turns_of);
            let mut live = current(&pages);
            for (i, s) in stale.iter().enumerate().take(pages.len()) {
                if *s {
                    live.blobs.insert(format!("f{}", i + 1), Some("moved".into()));
                }
            }
            let turn = pages.len() as u32 + 1;
            let mut case = Case::new(&pages, &live, turn, turns);
            case.recalled = recalled.iter().filter_map(|&i| pages.get(i)).map(|p| p.id.clone()).collect();
            let set = case.set();
            prop_assert_eq!(&set, &case.set());
            let order: Vec<usize> = set.pages.iter().map(|id| pages.iter().position(|p| &p.id == id).unwrap()).collect();
            prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "in conversation order");
            for (i, page) in pages.iter().enumerate() {
                let current = !stale[i];
                if !current {
                    prop_assert!(!set.contains(&page.id), "stale page {} admitted", i + 1);
                } else if page.span.turn + turns >= turn {
                    prop_assert!(set.contains(&page.id), "page {} of the window left out", i + 1);
                }
            }
            let wider = Case { turns: turns + 1, ..case };
            let wider = wider.set();
            prop_assert!(set.pages.iter().all(|id| wider.contains(id)));
        }
    }
}
