//! Definition 6's fit, the pure core of paging: which pages of the
//! conversation are resident in one request.
//!
//! M_t is the latest turn's page, the evidence the model is acting on (the
//! instructions, task contract and correction evidence are the compiled
//! programs, I_t, and are costed as such); erratum 13 demotes it too when
//! it is stale. Every other page is optional. Stale pages are tombstoned
//! first and never admitted. The rest start as tombstones (charged inside
//! β_in, erratum 5) and are restored greedily by weighted coverage of their
//! typed labels (the residual cluster's paths and failing tests weigh most),
//! largest marginal gain first and the page id breaking ties,
//! as long as the page's cost over its tombstone fits what is left. The
//! labels come from typed fields only (tool names, path arguments, the
//! turn, a recall): never from model prose. Deterministic: the same inputs
//! give the same plan.

use std::collections::{BTreeMap, BTreeSet};

use super::accountant::{Allowance, Message};
use super::page::{Live, Page, pages};
use super::plan::{Infeasible, PagePlan, Residency, ResidentPlan, tombstone};
use super::working_set::{Focus, WorkingSet};

/// Weight of the label a `context_recall` gives the recalled page: more
/// than everything else together, so a recalled page is restored first.
const RECALLED: u64 = 1 << 32;
/// Weight of a path or failing test of the residual cluster a page touches:
/// more than any recency, path or tool gain, so of two pages that fit, the
/// one about the cluster wins; less than a recall, which the model asked for.
const CLUSTER: u64 = 1 << 16;
/// Weight of a path a page's calls name: file content is what gets edited.
const PATH: u64 = 16;
/// Weight of a tool a page called.
const TOOL: u64 = 2;

/// Everything one fit depends on.
#[derive(Debug, Clone, Copy)]
pub struct FitInput<'a, M> {
    pub conversation: &'a [M],
    pub spans: &'a [super::PageSpan],
    /// c(I_t): the compiled programs and the turn block.
    pub instruction_tokens: u64,
    pub allowance: &'a Allowance,
    pub live: &'a Live,
    /// Ids of the pages `context_recall` asked for.
    pub recalled: &'a BTreeSet<String>,
    pub focus: &'a Focus,
    /// The optional candidates; every other page is tombstoned.
    pub working_set: &'a WorkingSet,
}

/// The plan of one request, or why it cannot be sent.
pub fn fit<M: Message>(input: FitInput<'_, M>) -> Result<ResidentPlan, FitError> {
    let accountant = input.allowance.accountant().map_err(FitError::Accountant)?;
    let pages = pages(input.conversation, input.spans).map_err(FitError::Pages)?;
    let latest = pages.iter().map(|p| p.span.turn).max();
    let mut plans: Vec<PagePlan> = pages
        .iter()
        .map(|page| {
            let (residency, reason) = match page.stale_because(input.live) {
                Some(reason) => (Residency::Stale, reason),
                None if Some(page.span.turn) == latest => (
                    Residency::Pinned,
                    "the latest turn: the evidence the model acts on".to_owned(),
                ),
                None if !input.working_set.contains(&page.id) => (
                    Residency::Evicted,
                    format!(
                        "outside the working set: not used in the last {} turns, not named by \
                         the residual cluster nor recalled",
                        input.working_set.turns
                    ),
                ),
                None => (Residency::Evicted, String::new()),
            };
            let mut plan = PagePlan {
                id: page.id.clone(),
                turn: page.span.turn,
                start: page.span.start,
                len: page.span.len,
                birth: page.span.birth.clone(),
                keys: page.span.keys.clone(),
                residency,
                cost: accountant.messages(
                    &input.conversation[page.span.start..page.span.start + page.span.len],
                ),
                tombstone_cost: 0,
                reason,
            };
            plan.tombstone_cost = accountant.message(&tombstone::<M>(&plan));
            plan
        })
        .collect();
    let mandatory: u64 = plans
        .iter()
        .filter(|p| p.residency == Residency::Pinned)
        .map(|p| p.cost)
        .sum();
    let tombstones: u64 = plans
        .iter()
        .filter(|p| p.residency != Residency::Pinned)
        .map(|p| p.tombstone_cost)
        .sum();
    let base = input.instruction_tokens + mandatory + tombstones;
    let infeasible = || {
        FitError::Infeasible(Infeasible {
            allowance: input.allowance.clone(),
            instruction_tokens: input.instruction_tokens,
            mandatory_tokens: mandatory,
            tombstone_tokens: tombstones,
        })
    };
    if base > input.allowance.input {
        return Err(infeasible());
    }
    let mut left = input.allowance.input - base;
    select(
        &pages,
        &mut plans,
        (input.recalled, input.focus, input.working_set),
        &mut left,
    );
    let (mut optional, mut tombstone_tokens) = (0, 0);
    for p in &plans {
        match p.residency {
            Residency::Resident => optional += p.cost,
            Residency::Pinned => {}
            Residency::Evicted | Residency::Stale => tombstone_tokens += p.tombstone_cost,
        }
    }
    let request = input.instruction_tokens + mandatory + optional + tombstone_tokens;
    // By construction; checked anyway, so a defect fails closed (Gate AF).
    if request > input.allowance.input {
        return Err(infeasible());
    }
    Ok(ResidentPlan {
        allowance: input.allowance.clone(),
        instruction_tokens: input.instruction_tokens,
        mandatory_tokens: mandatory,
        optional_tokens: optional,
        tombstone_tokens,
        request_tokens: request,
        pages: plans,
    })
}

/// Why [`fit`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitError {
    Infeasible(Infeasible),
    /// The page spans do not cover the conversation: a defect, fail closed.
    Pages(String),
    /// The allowance names an accountant this build does not have.
    Accountant(String),
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::Infeasible(i) => i.fmt(f),
            FitError::Pages(e) => write!(f, "the conversation's pages are inconsistent: {e}"),
            FitError::Accountant(e) => e.fmt(f),
        }
    }
}

/// The typed labels a page covers, with their weights.
fn labels(page: &Page, (recalled, focus): (&BTreeSet<String>, &Focus)) -> Vec<(String, u64)> {
    let keys = &page.span.keys;
    let mut out = vec![(
        format!("turn:{}", page.span.turn),
        u64::from(page.span.turn) + 1,
    )];
    if recalled.contains(&page.id) {
        out.push((format!("recall:{}", page.id), RECALLED));
    }
    out.extend(keys.paths.iter().map(|p| (format!("path:{p}"), PATH)));
    out.extend(keys.tools.iter().map(|t| (format!("tool:{t}"), TOOL)));
    out.extend(
        focus
            .paths_of(keys)
            .map(|p| (format!("cluster-path:{p}"), CLUSTER)),
    );
    out.extend(
        focus
            .tests_of(keys)
            .map(|t| (format!("cluster-test:{t}"), CLUSTER)),
    );
    out
}

/// Greedy weighted coverage over the working set's evicted (optional,
/// current) pages, within `left` tokens.
fn select(
    pages: &[Page],
    plans: &mut [PagePlan],
    (recalled, focus, working_set): (&BTreeSet<String>, &Focus, &WorkingSet),
    left: &mut u64,
) {
    let labelled: BTreeMap<usize, Vec<(String, u64)>> = plans
        .iter()
        .enumerate()
        .filter(|(_, p)| p.residency == Residency::Evicted && working_set.contains(&p.id))
        .map(|(i, _)| (i, labels(&pages[i], (recalled, focus))))
        .collect();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let mut open: BTreeSet<usize> = labelled.keys().copied().collect();
    loop {
        let gain = |i: usize| -> u64 {
            labelled[&i]
                .iter()
                .filter(|(l, _)| !covered.contains(l))
                .map(|(_, w)| w)
                .sum()
        };
        let best = open
            .iter()
            .copied()
            .filter(|&i| plans[i].cost.saturating_sub(plans[i].tombstone_cost) <= *left)
            .max_by(|&a, &b| {
                gain(a)
                    .cmp(&gain(b))
                    .then_with(|| plans[b].id.cmp(&plans[a].id))
            });
        let Some(i) = best else { break };
        let newly: Vec<&str> = labelled[&i]
            .iter()
            .filter(|(l, _)| !covered.contains(l))
            .map(|(l, _)| l.as_str())
            .collect();
        plans[i].reason = format!("selected: covers {}", newly.join(", "));
        *left -= plans[i].cost.saturating_sub(plans[i].tombstone_cost);
        covered.extend(labelled[&i].iter().map(|(l, _)| l.clone()));
        plans[i].residency = Residency::Resident;
        open.remove(&i);
    }
    for i in open {
        plans[i].reason = format!(
            "did not fit: {} tokens over its tombstone, {} left",
            plans[i].cost.saturating_sub(plans[i].tombstone_cost),
            *left
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::context::testing::Msg;
    use crate::context::{
        Accountant, Dependency, PageKeys, PageSpan, ToolForm, UNCALIBRATED, apply_plan, pages,
    };

    /// A turn: one call of `tool` on `path` and a result of `size` bytes
    /// (dense: a token each).
    fn turn(n: u32, tool: &str, path: &str, size: usize) -> (Vec<Msg>, PageKeys) {
        let id = format!("call_{n}");
        let messages = vec![
            Msg::Call {
                id: id.clone(),
                tool: tool.into(),
                arguments: format!("{{\"path\":\"{path}\"}}"),
            },
            Msg::Result {
                id: id.clone(),
                content: "x".repeat(size),
            },
        ];
        let keys = PageKeys {
            tools: vec![tool.into()],
            call_ids: vec![id],
            paths: vec![path.into()],
            tests: vec![],
        };
        (messages, keys)
    }

    fn conversation(turns: &[(&str, &str, usize)]) -> (Vec<Msg>, Vec<PageSpan>) {
        let mut messages = Vec::new();
        let mut spans = Vec::new();
        for (i, (tool, path, size)) in turns.iter().enumerate() {
            let (m, keys) = turn(i as u32 + 1, tool, path, *size);
            spans.push(PageSpan {
                turn: i as u32 + 1,
                start: messages.len(),
                len: m.len(),
                birth: vec![],
                keys,
            });
            messages.extend(m);
        }
        (messages, spans)
    }

    fn allowance(input: u64) -> Allowance {
        let (id, version) = Accountant::CURRENT.identity();
        Allowance {
            accountant: id.into(),
            accountant_version: version,
            window: input,
            output: 0,
            tools: 0,
            tool_form: ToolForm::Full,
            guard: 0,
            input,
            calibration: UNCALIBRATED,
        }
    }

    fn run(
        conversation: &[Msg],
        spans: &[PageSpan],
        input: u64,
        live: &Live,
        recalled: &BTreeSet<String>,
    ) -> Result<ResidentPlan, FitError> {
        run_focused(
            conversation,
            spans,
            input,
            (live, recalled),
            &Focus::default(),
        )
    }

    fn run_focused(
        conversation: &[Msg],
        spans: &[PageSpan],
        input: u64,
        (live, recalled): (&Live, &BTreeSet<String>),
        focus: &Focus,
    ) -> Result<ResidentPlan, FitError> {
        run_within(
            conversation,
            spans,
            input,
            (live, recalled),
            focus,
            &every_page(conversation, spans),
        )
    }

    /// A working set of every page: selection alone decides.
    fn every_page(conversation: &[Msg], spans: &[PageSpan]) -> WorkingSet {
        WorkingSet {
            turn: spans.len() as u32 + 1,
            turns: 64,
            pages: pages(conversation, spans)
                .unwrap()
                .into_iter()
                .map(|p| p.id)
                .collect(),
        }
    }

    fn run_within(
        conversation: &[Msg],
        spans: &[PageSpan],
        input: u64,
        (live, recalled): (&Live, &BTreeSet<String>),
        focus: &Focus,
        working_set: &WorkingSet,
    ) -> Result<ResidentPlan, FitError> {
        fit(FitInput {
            conversation,
            spans,
            instruction_tokens: 100,
            allowance: &allowance(input),
            live,
            recalled,
            focus,
            working_set,
        })
    }

    #[test]
    fn a_page_outside_the_working_set_is_tombstoned_with_room_to_spare() {
        let (messages, spans) = conversation(&[
            ("read_file", "src/lib.rs", 300),
            ("read_file", "src/aux.rs", 300),
            ("run_tests", "", 30),
        ]);
        let mut working = every_page(&messages, &spans);
        let outside = working.pages.remove(0);
        working.turns = 2;
        let none = BTreeSet::new();
        let live = Live::default();
        let plan = run_within(
            &messages,
            &spans,
            100_000,
            (&live, &none),
            &Focus::default(),
            &working,
        )
        .unwrap();
        let residency: Vec<Residency> = plan.pages.iter().map(|p| p.residency).collect();
        assert_eq!(
            residency,
            [Residency::Evicted, Residency::Resident, Residency::Pinned]
        );
        assert_eq!(plan.pages[0].id, outside);
        assert!(
            plan.pages[0]
                .reason
                .starts_with("outside the working set: not used in the last 2 turns"),
            "{}",
            plan.pages[0].reason
        );
        let applied = apply_plan(&plan, &messages).unwrap();
        assert!(
            matches!(&applied[0], Msg::Note(t) if t.contains(" turn 1 evicted]")),
            "{applied:?}"
        );
        // Not even a recall restores it from outside: recall works by
        // putting the page in the working set.
        let recalled = BTreeSet::from([outside.clone()]);
        let again = run_within(
            &messages,
            &spans,
            100_000,
            (&live, &recalled),
            &Focus::default(),
            &working,
        )
        .unwrap();
        assert_eq!(again.pages[0].residency, Residency::Evicted);
        // The latest page is pinned whether or not it is in the set.
        working.pages.clear();
        let plan = run_within(
            &messages,
            &spans,
            100_000,
            (&live, &none),
            &Focus::default(),
            &working,
        )
        .unwrap();
        assert_eq!(plan.pages[2].residency, Residency::Pinned);
    }

    #[test]
    fn a_page_about_the_cluster_wins_over_a_same_size_unrelated_one() {
        // Two reads of the same size (paths of the same length) with room
        // for one: recency alone keeps the later, unrelated one.
        let (messages, mut spans) = conversation(&[
            ("read_file", "src/lib.rs", 500),
            ("read_file", "src/aux.rs", 500),
            ("run_tests", "", 10),
        ]);
        let none = BTreeSet::new();
        let live = Live::default();
        let residency = |focus: &Focus, spans: &[PageSpan]| -> Vec<Residency> {
            run_focused(&messages, spans, 1000, (&live, &none), focus)
                .unwrap()
                .pages
                .iter()
                .map(|p| p.residency)
                .collect()
        };
        let plain = residency(&Focus::default(), &spans);
        assert_eq!(
            plain,
            [Residency::Evicted, Residency::Resident, Residency::Pinned]
        );
        // The cluster affects src/lib.rs: its read is kept instead.
        let by_path = Focus {
            paths: BTreeSet::from(["src/lib.rs".to_owned()]),
            tests: BTreeSet::new(),
        };
        let cluster_first = [Residency::Resident, Residency::Evicted, Residency::Pinned];
        assert_eq!(residency(&by_path, &spans), cluster_first);
        let plan = run_focused(&messages, &spans, 1000, (&live, &none), &by_path).unwrap();
        assert!(
            plan.pages[0].reason.contains("cluster-path:src/lib.rs"),
            "{}",
            plan.pages[0].reason
        );
        assert_eq!(
            plan,
            run_focused(&messages, &spans, 1000, (&live, &none), &by_path).unwrap(),
            "deterministic"
        );
        // A failing test of the cluster weighs the same way: the page whose
        // `run_tests` filter selects it wins.
        spans[0].keys.tests = vec!["adds".into()];
        spans[1].keys.tests = vec!["subtracts".into()];
        let by_test = Focus {
            paths: BTreeSet::new(),
            tests: BTreeSet::from(["tests::adds_two".to_owned()]),
        };
        assert_eq!(residency(&by_test, &spans), cluster_first);
    }

    #[test]
    fn a_large_old_page_is_evicted_and_a_recall_brings_it_back_first() {
        let (messages, spans) = conversation(&[
            ("read_file", "data/big.txt", 1000),
            ("read_file", "src/lib.rs", 500),
            ("run_tests", "", 10),
        ]);
        let residency = |plan: &ResidentPlan| -> Vec<Residency> {
            plan.pages.iter().map(|p| p.residency).collect()
        };
        let none = BTreeSet::new();
        let plan = run(&messages, &spans, 1500, &Live::default(), &none).unwrap();
        assert_eq!(
            residency(&plan),
            [Residency::Evicted, Residency::Resident, Residency::Pinned],
            "the more recent page wins the room for one"
        );
        assert!(plan.request_tokens <= 1500);
        let recalled = BTreeSet::from([plan.pages[0].id.clone()]);
        let plan = run(&messages, &spans, 1500, &Live::default(), &recalled).unwrap();
        assert_eq!(
            residency(&plan),
            [Residency::Resident, Residency::Evicted, Residency::Pinned],
            "a recalled page is restored first"
        );
        assert!(plan.request_tokens <= 1500);
        let applied = apply_plan(&plan, &messages).unwrap();
        assert_eq!(applied.len(), messages.len() - 2 + 1, "one page tombstoned");
        assert!(plan.pages[1].reason.starts_with("did not fit"));
    }

    #[test]
    fn an_oversized_mandatory_page_is_infeasible_never_truncated() {
        let (messages, spans) = conversation(&[("read_file", "a.rs", 10), ("run_tests", "", 4000)]);
        let error = run(&messages, &spans, 1000, &Live::default(), &BTreeSet::new()).unwrap_err();
        let FitError::Infeasible(i) = error else {
            panic!("{error}")
        };
        assert!(i.mandatory_tokens > 1000);
        assert!(i.to_string().starts_with("context_infeasible"));
    }

    #[test]
    fn a_stale_page_is_tombstoned_even_when_it_is_the_latest() {
        let (messages, mut spans) =
            conversation(&[("read_file", "a.rs", 10), ("read_file", "b.rs", 10)]);
        for s in &mut spans {
            s.birth = vec![Dependency::File {
                path: "b.rs".into(),
                blob: "old".into(),
            }];
        }
        let mut live = Live::default();
        live.blobs.insert("b.rs".into(), Some("new".into()));
        let plan = run(&messages, &spans, 10_000, &live, &BTreeSet::new()).unwrap();
        assert!(plan.pages.iter().all(|p| p.residency == Residency::Stale));
        let applied = apply_plan(&plan, &messages).unwrap();
        assert!(
            applied
                .iter()
                .all(|m| matches!(m, Msg::Note(content) if content.contains(" stale]")))
        );
    }

    #[test]
    fn replay_lays_out_the_recorded_decisions_without_selecting_again() {
        let (messages, spans) =
            conversation(&[("read_file", "data/big.txt", 3000), ("run_tests", "", 30)]);
        let plan = run(&messages, &spans, 700, &Live::default(), &BTreeSet::new()).unwrap();
        assert_eq!(plan.pages[0].residency, Residency::Evicted);
        // A record that says otherwise is laid out as recorded, even over
        // the allowance: apply_plan reads decisions, it never makes one.
        let mut recorded = plan.clone();
        recorded.pages[0].residency = Residency::Resident;
        let applied = apply_plan(&recorded, &messages).unwrap();
        assert_eq!(applied, messages);
        assert_ne!(apply_plan(&plan, &messages).unwrap(), applied);
    }

    #[test]
    fn replay_refuses_a_plan_over_other_messages() {
        let (messages, spans) = conversation(&[("read_file", "a.rs", 10)]);
        let plan = run(
            &messages,
            &spans,
            10_000,
            &Live::default(),
            &BTreeSet::new(),
        )
        .unwrap();
        let (other, _) = conversation(&[("read_file", "a.rs", 11)]);
        assert!(
            apply_plan(&plan, &other)
                .unwrap_err()
                .contains("does not match")
        );
        assert!(apply_plan(&plan, &messages[..1]).is_err());
    }

    proptest! {
        /// Gate AF's predicate over random conversations: never above the
        /// allowance, every tool pair whole or tombstoned whole, the same
        /// plan for the same inputs, no stale page resident.
        #[test]
        fn plans_fit_keep_pairs_whole_and_are_deterministic(
            sizes in proptest::collection::vec(0usize..2000, 1..8),
            input in 0u64..3000,
            stale in proptest::collection::vec(any::<bool>(), 8),
        ) {
            let turns: Vec<(&str, &str, usize)> = sizes
                .iter()
                .enumerate()
                .map(|(i, s)| ("read_file", if i % 2 == 0 { "a.rs" } else { "b.rs" }, *s))
                .collect();
            let (messages, mut spans) = conversation(&turns);
            let mut live = Live::default();
            for (i, span) in spans.iter_mut().enumerate() {
                let path = format!("f{i}");
                span.birth = vec![Dependency::File { path: path.clone(), blob: "b".into() }];
                live.blobs.insert(path, Some(if stale[i] { "c" } else { "b" }.into()));
            }
            let none = BTreeSet::new();
            let first = run(&messages, &spans, input, &live, &none);
            prop_assert_eq!(&first, &run(&messages, &spans, input, &live, &none));
            if let Ok(plan) = first {
                prop_assert!(plan.request_tokens <= input);
                let applied = apply_plan(&plan, &messages).unwrap();
                let charged = Accountant::CURRENT.messages(&applied) + 100;
                prop_assert_eq!(charged, plan.request_tokens);
                for (i, p) in plan.pages.iter().enumerate() {
                    prop_assert!(!(stale[i] && p.residency.is_resident()));
                }
                // Every call is followed by its result, and no result stands alone.
                for (i, m) in applied.iter().enumerate() {
                    match m {
                        Msg::Call { id, .. } => {
                            let answered = matches!(applied.get(i + 1), Some(Msg::Result { id: r, .. }) if r == id);
                            prop_assert!(answered, "call {} lost its result", id);
                        }
                        Msg::Result { id, .. } => {
                            let called = matches!(i.checked_sub(1).map(|j| &applied[j]), Some(Msg::Call { id: c, .. }) if c == id);
                            prop_assert!(called, "result {} without its call", id);
                        }
                        Msg::Note(_) => {}
                    }
                }
            }
        }
    }
}
