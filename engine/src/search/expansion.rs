//! Adaptive expansion (PSP-10 system 20): when to open another branch, and
//! which one.
//!
//! A search starts with one branch. [`next_expansions`] is a pure function of
//! what the current branch measured. It first continues a witnessed partial
//! checkpoint that still has a correction to work from and local retries
//! left. Otherwise it opens a new branch only on a measured [`Trigger`], and
//! picks the attempt by preference: a new correction operator, then a new
//! strategy, then a new route. A recurring residual signature forces an
//! alternative: the next compiler alternative, then another proposer. A
//! descent that is no hard pass is a trigger while the tools' alternatives
//! are untried ([`Trigger::DescentOnly`]): Proposition 5 ranks any hard
//! pass above every descent, so that key can only act once the
//! alternatives are measured. A new branch forks from the seed its
//! evidence came from: a new partial checkpoint, else the seed of the
//! branch that measured (siblings of one choice share one seed). This is a
//! search heuristic, not a certificate; selection and the gate decide.

use serde::{Deserialize, Serialize};

use super::forest::{PartialCheckpointRef, Seed};
use super::strategy::{Strategy, StrategyContext};
use crate::correction::CorrectionOperator;
use crate::diagnostic::is_tool_route;
use crate::digest::Digest;

/// A correction operator without its counts: the identity expansion varies.
/// The vocabulary is shared with the prompt plane.
pub use trellis_core::vocabulary::OperatorKind;

/// One way of attempting the correction: the identity of a branch's
/// approach. Expansion never repeats an attempt within a forest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Attempt {
    pub operator: OperatorKind,
    pub strategy: Strategy,
    /// A model route or a deterministic proposer id.
    pub route: String,
    /// Which of the tools' alternatives a `ChooseAlternative` attempt takes
    /// (0-based); `None` for every other operator. Three possible imports
    /// are three attempts, not one.
    pub alternative: Option<u32>,
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} via {:?}", self.strategy.name(), self.operator)?;
        if let Some(i) = self.alternative {
            write!(f, " #{}", i + 1)?;
        }
        write!(f, " on {}", self.route)
    }
}

impl Attempt {
    /// An attempt that is not a choice between alternatives.
    pub fn new(operator: OperatorKind, strategy: Strategy, route: &str) -> Attempt {
        Attempt {
            operator,
            strategy,
            route: route.to_owned(),
            alternative: None,
        }
    }
}

/// How the current branch's last quantum ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BranchOutcome {
    /// Measured eligible but no hard pass: a descent, which selection may
    /// pick once nothing better is left to measure. (A hard pass ends the
    /// forest: nothing outranks it on Proposition 5's first key, so
    /// expansion is never asked after one.)
    Eligible,
    /// Measured, but E(y) failed. (A `RejectedNonDescending` commit, the
    /// seed's other half of this trigger, cannot happen here: only a
    /// candidate whose preview the gate accepts is eligible, and a commit
    /// must reproduce its preview or it fails closed, see
    /// [`SearchForest::commit`](super::SearchForest::commit).)
    Ineligible,
    /// The state was kept as a partial checkpoint.
    Partial(PartialCheckpointRef),
}

/// What the current branch has shown so far.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchProgress {
    pub attempt: Attempt,
    /// What the branch started from: a sibling it opens forks from there
    /// too, unless the branch left a partial checkpoint of its own.
    pub seed: Seed,
    pub outcome: BranchOutcome,
    /// Energy of each of the branch's probes, oldest first.
    pub energies: Vec<f64>,
    /// Digest of the dominant residual cluster of each measurement.
    pub signatures: Vec<Digest>,
    /// The operator, strategy or route changed since the previous
    /// measurement.
    pub route_changed: bool,
    /// Continuations of a partial checkpoint this branch may still take.
    pub local_retries_left: u32,
    /// The correction packet of the branch's latest measurement (its
    /// dominant residual) carries no evidence at all: no diagnostic and no
    /// counterexample, e.g. a required stage that could not run.
    pub correction_empty: bool,
}

/// Everything [`next_expansions`] decides from.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpansionState {
    pub branches_opened: usize,
    pub max_branches: usize,
    /// The forest can still reserve a fork and a verifier run.
    pub budget_remains: bool,
    /// The gate margin ρ; a plateau is a spread of energies below it.
    pub rho: f64,
    pub current: BranchProgress,
    /// Operators of the latest correction packet, in packet order.
    pub operators: Vec<CorrectionOperator>,
    /// Routes that may propose, preferred first (the current one included).
    pub routes: Vec<String>,
    pub context: StrategyContext,
    /// Every attempt already made in this forest.
    pub tried: Vec<Attempt>,
    /// The attempt continuing the current partial checkpoint would make,
    /// when the proposer can make one.
    pub continuation: Option<Attempt>,
}

/// A measured reason to open another branch (system 20).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    IneligibleMeasurement,
    /// A descent that is no hard pass, while an alternative the tools
    /// offered is unmeasured: committing it now would keep the first key
    /// of Proposition 5 from ever acting.
    DescentOnly,
    RecurringSignature,
    EmptyCorrection,
    Plateau,
    FailedAssumption,
    OutOfLocalRetries,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::IneligibleMeasurement => "ineligible measurement",
            Trigger::DescentOnly => "a descent, not a hard pass",
            Trigger::RecurringSignature => "recurring residual signature",
            Trigger::EmptyCorrection => "empty correction packet",
            Trigger::Plateau => "plateau",
            Trigger::FailedAssumption => "failed strategy assumption",
            Trigger::OutOfLocalRetries => "out of local retries",
        }
    }
}

/// What changed relative to the current attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Novelty {
    Operator,
    Strategy,
    Route,
}

impl Novelty {
    pub fn name(self) -> &'static str {
        match self {
            Novelty::Operator => "correction operator",
            Novelty::Strategy => "strategy",
            Novelty::Route => "route",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expansion {
    /// Give the same branch another quantum on its partial checkpoint.
    ContinuePartial { partial: PartialCheckpointRef },
    /// Open a new branch.
    Open {
        /// Every trigger that fired, in [`Trigger`] order.
        triggers: Vec<Trigger>,
        seed: Seed,
        attempt: Attempt,
        novelty: Novelty,
    },
}

/// Probes considered for a plateau.
pub const PLATEAU_PROBES: usize = 3;

/// Whether a choice should be probed rather than tried branch by branch:
/// when more alternatives are untried than branches are left, one branch per
/// alternative cannot cover them, so a diagnostic probe narrows them first.
pub fn probe_first(untried_alternatives: usize, branch_room: usize) -> bool {
    untried_alternatives > branch_room
}

/// The attempt that probes a choice: the probe, not the attempt, picks the
/// alternative.
pub fn probe_attempt(route: &str) -> Attempt {
    Attempt::new(
        OperatorKind::ChooseAlternative,
        Strategy::DiagnosticProbe,
        route,
    )
}

/// The triggers the current branch's measurements fire.
pub fn triggers(state: &ExpansionState) -> Vec<Trigger> {
    let current = &state.current;
    let mut fired = Vec::new();
    if current.outcome == BranchOutcome::Ineligible {
        fired.push(Trigger::IneligibleMeasurement);
    }
    if current.outcome == BranchOutcome::Eligible && state.context.untried_alternatives > 0 {
        fired.push(Trigger::DescentOnly);
    }
    let repeated =
        matches!(current.signatures.as_slice(), [.., previous, last] if previous == last);
    if repeated && !current.route_changed {
        fired.push(Trigger::RecurringSignature);
    }
    if current.correction_empty {
        fired.push(Trigger::EmptyCorrection);
    }
    if current.energies.len() >= PLATEAU_PROBES {
        let recent = &current.energies[current.energies.len() - PLATEAU_PROBES..];
        let max = recent.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = recent.iter().copied().fold(f64::INFINITY, f64::min);
        if max - min < state.rho {
            fired.push(Trigger::Plateau);
        }
    }
    if !current.attempt.strategy.assumption_holds(&state.context) {
        fired.push(Trigger::FailedAssumption);
    }
    // Only a branch with local work left (a partial checkpoint with a
    // correction to continue) can exhaust its retries: an eligible or
    // rejected state has nothing to retry in place.
    if out_of_local_retries(current) && state.budget_remains {
        fired.push(Trigger::OutOfLocalRetries);
    }
    fired
}

/// The branch stopped at a partial checkpoint it would continue, but its
/// local retry allocation is spent.
fn out_of_local_retries(current: &BranchProgress) -> bool {
    matches!(&current.outcome, BranchOutcome::Partial(partial) if partial.correction.is_some())
        && current.local_retries_left == 0
}

/// What follows the current branch's quantum, continuation first: the
/// branch continues its partial checkpoint when that has a correction,
/// local retries are left and the branch is not stagnating; and a measured
/// trigger opens one new branch (seeded from that checkpoint, if any)
/// besides. Both can hold at once: the continued branch stays live beside
/// the child it seeded, and the frontier's keys order them. Empty when
/// nothing warrants another quantum (the forest then selects or closes).
pub fn next_expansions(state: &ExpansionState) -> Vec<Expansion> {
    let fired = triggers(state);
    let current = &state.current;
    let stagnating = fired
        .iter()
        .any(|t| matches!(t, Trigger::RecurringSignature | Trigger::Plateau));
    let mut out = Vec::new();
    let mut state = std::borrow::Cow::Borrowed(state);
    if let BranchOutcome::Partial(partial) = &current.outcome
        && partial.correction.is_some()
        && current.local_retries_left > 0
        && !stagnating
        && state.continuation.is_some()
    {
        out.push(Expansion::ContinuePartial {
            partial: partial.clone(),
        });
        // The new branch must not make the continuation's attempt again.
        if let Some(continuation) = &state.continuation {
            let continuation = continuation.clone();
            state.to_mut().tried.push(continuation);
        }
    }
    if fired.is_empty() || !state.budget_remains || state.branches_opened >= state.max_branches {
        return out;
    }
    let seed = match &current.outcome {
        BranchOutcome::Partial(partial) => Seed::Partial(partial.clone()),
        _ => current.seed.clone(),
    };
    let forced = fired.contains(&Trigger::RecurringSignature);
    if let Some((attempt, novelty)) = candidates(&state, forced)
        .into_iter()
        .find(|(attempt, _)| admissible(&state, attempt))
    {
        out.push(Expansion::Open {
            triggers: fired,
            seed,
            attempt,
            novelty,
        });
    }
    out
}

/// Attempts in preference order. A forced alternative skips the operator
/// and strategy variations: the next compiler alternative on this route,
/// then another proposer.
fn candidates(state: &ExpansionState, forced: bool) -> Vec<(Attempt, Novelty)> {
    let current = &state.current.attempt;
    let operators: Vec<OperatorKind> = state
        .operators
        .iter()
        .filter_map(CorrectionOperator::kind)
        .collect();
    // A choice takes the first alternative not yet tried on its route; with
    // none left, the choice is not an attempt at all.
    let attempt = |operator, strategy, route: &str| -> Option<Attempt> {
        let alternative = if operator == OperatorKind::ChooseAlternative
            && strategy != Strategy::DiagnosticProbe
        {
            Some(next_alternative(state, route)?)
        } else {
            None
        };
        Some(Attempt {
            alternative,
            ..Attempt::new(operator, strategy, route)
        })
    };
    let mut out = Vec::new();
    let room = state.max_branches.saturating_sub(state.branches_opened);
    if operators.contains(&OperatorKind::ChooseAlternative)
        && probe_first(state.context.untried_alternatives, room)
    {
        out.push((Some(probe_attempt(&current.route)), Novelty::Strategy));
    }
    if forced {
        out.push((
            attempt(
                OperatorKind::ChooseAlternative,
                Strategy::NextAlternative,
                &current.route,
            ),
            Novelty::Strategy,
        ));
    } else {
        for &op in &operators {
            out.push((
                attempt(op, current.strategy, &current.route),
                Novelty::Operator,
            ));
        }
        for strategy in Strategy::ALL {
            for &op in &operators {
                out.push((attempt(op, strategy, &current.route), Novelty::Strategy));
            }
        }
    }
    for route in state
        .routes
        .iter()
        .filter(|r| !same_route(r, &current.route))
    {
        for strategy in std::iter::once(current.strategy).chain(Strategy::ALL) {
            for &op in &operators {
                out.push((attempt(op, strategy, route), Novelty::Route));
            }
        }
    }
    out.into_iter()
        .filter_map(|(attempt, novelty)| Some((attempt?, novelty)))
        .collect()
}

/// The first alternative of the packet's widest choice that no attempt on
/// `route` has taken yet.
fn next_alternative(state: &ExpansionState, route: &str) -> Option<u32> {
    let offered = state
        .operators
        .iter()
        .filter_map(|op| match op {
            CorrectionOperator::ChooseAlternative { alternatives } => Some(*alternatives),
            _ => None,
        })
        .max()?;
    let taken = |i: u32| {
        state
            .tried
            .iter()
            .chain([&state.current.attempt])
            .any(|a| same_route(&a.route, route) && a.alternative == Some(i))
    };
    (0..u32::try_from(offered).unwrap_or(u32::MAX)).find(|&i| !taken(i))
}

/// Whether two routes are one route to expansion. The tools' fixes are one
/// deterministic route whichever tool names it: a Python repair that moves
/// on from ty's fixes to ruff's, or an old ledger's `rustc-suggestions`
/// for a TypeScript fix, opens no "new route".
pub fn same_route(a: &str, b: &str) -> bool {
    a == b || (is_tool_route(a) && is_tool_route(b))
}

/// The same attempt, its routes compared by [`same_route`].
fn same_attempt(a: &Attempt, b: &Attempt) -> bool {
    (a.operator, a.strategy, a.alternative) == (b.operator, b.strategy, b.alternative)
        && same_route(&a.route, &b.route)
}

fn admissible(state: &ExpansionState, attempt: &Attempt) -> bool {
    // Local repair continues a partial, so only a partial can seed it.
    let seeded_right = attempt.strategy != Strategy::LocalRepair
        || matches!(state.current.outcome, BranchOutcome::Partial(_));
    seeded_right
        && attempt.strategy.supports(attempt.operator)
        && attempt.strategy.assumption_holds(&state.context)
        && !same_attempt(attempt, &state.current.attempt)
        && !state.tried.iter().any(|tried| same_attempt(tried, attempt))
        && (attempt.operator != OperatorKind::ChooseAlternative
            || (state.context.untried_alternatives > 0
                && state
                    .operators
                    .iter()
                    .any(|op| op.kind() == Some(OperatorKind::ChooseAlternative))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Fixer;
    use crate::digest::blob_digest;

    const RUSTC: &str = Fixer::Rustc.route();
    const MODEL: &str = "openai:qwen";

    fn apply(route: &str) -> Attempt {
        Attempt::new(
            OperatorKind::ApplySuggestions,
            Strategy::ApplySuggestions,
            route,
        )
    }

    /// A branch that applied suggestions and measured an eligible descent
    /// with no alternative left unmeasured: no trigger.
    fn quiet() -> ExpansionState {
        ExpansionState {
            branches_opened: 1,
            max_branches: 3,
            budget_remains: true,
            rho: 0.5,
            current: BranchProgress {
                attempt: apply(RUSTC),
                seed: Seed::Accepted,
                outcome: BranchOutcome::Eligible,
                energies: vec![4.0],
                signatures: vec![blob_digest(b"c1")],
                route_changed: false,
                local_retries_left: 2,
                correction_empty: false,
            },
            operators: vec![
                CorrectionOperator::ApplySuggestions { count: 1 },
                CorrectionOperator::ChooseAlternative { alternatives: 3 },
                CorrectionOperator::Edit,
            ],
            routes: vec![RUSTC.into(), MODEL.into()],
            context: StrategyContext {
                single_fix_suggestions: 1,
                untried_alternatives: 0,
                localized_sites: 1,
                witnessed_partial: false,
            },
            tried: vec![apply(RUSTC)],
            continuation: None,
        }
    }

    /// A branch of the compiler's route that took the first of
    /// `alternatives` alternatives of one choice.
    fn took_the_first_of(alternatives: usize) -> ExpansionState {
        let mut s = quiet();
        s.operators = vec![CorrectionOperator::ChooseAlternative { alternatives }];
        s.routes = vec![RUSTC.into()];
        s.current.attempt = Attempt {
            alternative: Some(0),
            ..Attempt::new(
                OperatorKind::ChooseAlternative,
                Strategy::NextAlternative,
                RUSTC,
            )
        };
        s.tried = vec![s.current.attempt.clone()];
        s
    }

    /// What comes first: a continuation before a new branch.
    fn first_expansion(state: &ExpansionState) -> Option<Expansion> {
        next_expansions(state).into_iter().next()
    }

    /// The continuation the runtime would offer for a partial: local repair
    /// with the partial's first alternative.
    fn local_repair() -> Attempt {
        Attempt {
            alternative: Some(0),
            ..Attempt::new(
                OperatorKind::ChooseAlternative,
                Strategy::LocalRepair,
                RUSTC,
            )
        }
    }

    fn partial(correction: bool) -> PartialCheckpointRef {
        PartialCheckpointRef {
            state_root: blob_digest(b"p"),
            accepted_ancestor: blob_digest(b"x0"),
            parent_witness: vec![blob_digest(b"x0")],
            correction: correction.then(|| blob_digest(b"packet")),
            remaining_obligations: vec![],
            evidence_digest: blob_digest(b"e"),
        }
    }

    fn opened(state: &ExpansionState) -> (Vec<Trigger>, Seed, Attempt, Novelty) {
        let all = next_expansions(state);
        match all.iter().find(|e| matches!(e, Expansion::Open { .. })) {
            Some(Expansion::Open {
                triggers,
                seed,
                attempt,
                novelty,
            }) => (triggers.clone(), seed.clone(), attempt.clone(), *novelty),
            _ => panic!("expected a new branch, got {all:?}"),
        }
    }

    #[test]
    fn no_trigger_opens_nothing() {
        assert!(triggers(&quiet()).is_empty());
        assert_eq!(first_expansion(&quiet()), None);
    }

    #[test]
    fn ineligible_measurement_triggers_a_new_operator_first() {
        let mut s = quiet();
        s.context.untried_alternatives = 2;
        s.current.outcome = BranchOutcome::Ineligible;
        let (fired, seed, attempt, novelty) = opened(&s);
        assert_eq!(fired, vec![Trigger::IneligibleMeasurement]);
        assert_eq!(seed, Seed::Accepted);
        // ApplySuggestions supports only its own operator, which was tried,
        // so the first new attempt changes the strategy.
        assert_eq!(novelty, Novelty::Strategy);
        assert_eq!(attempt.strategy, Strategy::NextAlternative);
        assert_eq!(attempt.operator, OperatorKind::ChooseAlternative);
    }

    #[test]
    fn a_strategy_with_several_operators_varies_the_operator_before_anything_else() {
        let mut s = quiet();
        s.current.attempt = Attempt::new(OperatorKind::Edit, Strategy::DiagnosticProbe, RUSTC);
        s.tried = vec![s.current.attempt.clone()];
        s.operators.push(CorrectionOperator::SatisfyCounterexample);
        s.context.untried_alternatives = 2;
        s.current.outcome = BranchOutcome::Ineligible;
        // The probe supports choosing among alternatives and satisfying a
        // counterexample; the packet's order decides.
        let (_, _, attempt, novelty) = opened(&s);
        assert_eq!(novelty, Novelty::Operator);
        assert_eq!(attempt.operator, OperatorKind::ChooseAlternative);
        assert_eq!(attempt.strategy, Strategy::DiagnosticProbe);
        s.tried.push(attempt);
        let (_, _, attempt, novelty) = opened(&s);
        assert_eq!(novelty, Novelty::Operator);
        assert_eq!(attempt.operator, OperatorKind::SatisfyCounterexample);
        assert_eq!(attempt.strategy, Strategy::DiagnosticProbe);
    }

    #[test]
    fn recurring_signature_forces_the_next_alternative_then_another_proposer() {
        let mut s = quiet();
        s.context.untried_alternatives = 2;
        s.current.signatures = vec![blob_digest(b"c1"), blob_digest(b"c1")];
        let (fired, _, attempt, novelty) = opened(&s);
        assert_eq!(
            fired,
            vec![Trigger::DescentOnly, Trigger::RecurringSignature]
        );
        assert_eq!(attempt.strategy, Strategy::NextAlternative);
        assert_eq!(novelty, Novelty::Strategy);

        // With no alternative left, the forced step goes to another route.
        s.context.untried_alternatives = 0;
        let (fired, _, attempt, novelty) = opened(&s);
        assert!(fired.contains(&Trigger::RecurringSignature));
        assert_eq!(novelty, Novelty::Route);
        assert_eq!(attempt.route, MODEL);
    }

    /// The tools' fixes are one route whatever tool names it: another
    /// tool's name (or an old ledger's `rustc-suggestions` for a Python
    /// fix) is no new route, and an attempt tried under one name is tried.
    #[test]
    fn every_tool_route_is_one_route_whichever_tool_names_it() {
        let mut s = quiet();
        s.current.attempt = apply(Fixer::Ty.route());
        s.tried = vec![apply(Fixer::Ty.route())];
        s.routes = vec![RUSTC.into(), Fixer::Ruff.route().into(), MODEL.into()];
        s.current.signatures = vec![blob_digest(b"c1"), blob_digest(b"c1")];
        s.context.untried_alternatives = 0;
        let (_, _, attempt, novelty) = opened(&s);
        assert_eq!((novelty, attempt.route.as_str()), (Novelty::Route, MODEL));

        let mut s = quiet();
        s.current.outcome = BranchOutcome::Ineligible;
        let (_, _, first, _) = opened(&s);
        s.tried.push(Attempt {
            route: Fixer::Ty.route().into(),
            ..first.clone()
        });
        let (_, _, next, _) = opened(&s);
        assert_ne!(
            (next.operator, next.strategy, next.alternative),
            (first.operator, first.strategy, first.alternative),
            "{next}"
        );
        assert!(same_route(RUSTC, Fixer::Tsserver.route()) && !same_route(RUSTC, MODEL));
    }

    /// Issue 36: a descent that is no hard pass, with an alternative the
    /// tools offered still unmeasured, opens a branch for that alternative
    /// from the seed the descent came from, so Proposition 5's first key
    /// can still find a hard pass; with every alternative measured, or no
    /// branch left, the descent awaits selection.
    #[test]
    fn a_descent_that_is_no_hard_pass_measures_the_next_alternative_first() {
        let mut s = took_the_first_of(3);
        s.context.untried_alternatives = 2;
        let (fired, seed, attempt, novelty) = opened(&s);
        assert_eq!(fired, vec![Trigger::DescentOnly]);
        assert_eq!((seed, novelty), (Seed::Accepted, Novelty::Operator));
        assert_eq!(attempt.alternative, Some(1));

        // A sibling of a branch seeded from a partial checkpoint forks
        // from that checkpoint too.
        s.current.seed = Seed::Partial(partial(true));
        assert_eq!(opened(&s).1, Seed::Partial(partial(true)));

        s.context.untried_alternatives = 0;
        assert_eq!(first_expansion(&s), None, "every alternative was measured");
        s.context.untried_alternatives = 2;
        s.branches_opened = s.max_branches;
        assert_eq!(first_expansion(&s), None, "no branch left");
        s.branches_opened = 1;
        s.current.outcome = BranchOutcome::Ineligible;
        assert!(!triggers(&s).contains(&Trigger::DescentOnly), "no descent");
    }

    #[test]
    fn a_changed_route_makes_a_repeated_signature_no_trigger() {
        let mut s = quiet();
        s.current.signatures = vec![blob_digest(b"c1"), blob_digest(b"c1")];
        s.current.route_changed = true;
        assert!(triggers(&s).is_empty());
    }

    #[test]
    fn empty_correction_triggers() {
        let mut s = quiet();
        s.current.correction_empty = true;
        assert_eq!(triggers(&s), vec![Trigger::EmptyCorrection]);
    }

    #[test]
    fn plateau_triggers_only_over_enough_flat_probes() {
        let mut s = quiet();
        s.current.energies = vec![4.0, 3.9];
        assert!(triggers(&s).is_empty());
        s.current.energies = vec![9.0, 4.0, 3.9, 3.8];
        assert_eq!(triggers(&s), vec![Trigger::Plateau]);
        s.current.energies = vec![4.0, 3.9, 3.4];
        assert!(triggers(&s).is_empty(), "a spread of ρ is progress");
    }

    #[test]
    fn failed_strategy_assumption_triggers() {
        let mut s = quiet();
        s.context.single_fix_suggestions = 0;
        let (fired, _, attempt, _) = opened(&s);
        assert_eq!(fired, vec![Trigger::FailedAssumption]);
        assert_ne!(attempt.strategy, Strategy::ApplySuggestions);
    }

    #[test]
    fn out_of_local_retries_triggers_only_while_budget_remains() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.current.local_retries_left = 0;
        assert_eq!(triggers(&s), vec![Trigger::OutOfLocalRetries]);
        s.budget_remains = false;
        assert!(triggers(&s).is_empty());
        s.current.outcome = BranchOutcome::Ineligible;
        assert_eq!(first_expansion(&s), None, "no budget, no branch");
    }

    /// Item 15: an eligible measurement that is not a hard pass, or a
    /// rejected one, has no local retry to exhaust, whatever the counter
    /// says; so does a partial with retries left or no correction.
    #[test]
    fn out_of_local_retries_fires_only_when_retries_are_exhausted() {
        let mut s = quiet();
        s.current.local_retries_left = 0;
        assert!(
            triggers(&s).is_empty(),
            "an eligible descent retries nothing"
        );
        assert_eq!(first_expansion(&s), None);
        s.current.outcome = BranchOutcome::Ineligible;
        assert_eq!(triggers(&s), vec![Trigger::IneligibleMeasurement]);
        s.current.outcome = BranchOutcome::Partial(partial(false));
        assert!(triggers(&s).is_empty(), "no correction: nothing to retry");
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.current.local_retries_left = 1;
        assert!(triggers(&s).is_empty(), "a retry is left");
        s.current.local_retries_left = 0;
        assert_eq!(triggers(&s), vec![Trigger::OutOfLocalRetries]);
    }

    #[test]
    fn no_branch_beyond_the_branch_limit() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Ineligible;
        s.branches_opened = 3;
        assert_eq!(first_expansion(&s), None);
    }

    #[test]
    fn a_partial_with_a_correction_is_continued_before_any_fork() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.continuation = Some(local_repair());
        assert_eq!(
            next_expansions(&s),
            vec![Expansion::ContinuePartial {
                partial: partial(true)
            }]
        );
        s.continuation = None;
        assert_eq!(
            next_expansions(&s),
            vec![],
            "nothing the proposer can continue with"
        );
    }

    /// Item 13: a trigger on a partial that is still continued opens a
    /// child from it, and the parent stays live beside it (continuation
    /// first); the child never repeats the continuation's alternative.
    #[test]
    fn a_continued_partial_can_seed_a_child_and_still_be_served() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.continuation = Some(local_repair());
        s.operators = vec![CorrectionOperator::ChooseAlternative { alternatives: 2 }];
        s.routes = vec![RUSTC.into()];
        s.context = StrategyContext {
            single_fix_suggestions: 0,
            untried_alternatives: 2,
            localized_sites: 1,
            witnessed_partial: true,
        };
        let all = next_expansions(&s);
        assert_eq!(
            all[0],
            Expansion::ContinuePartial {
                partial: partial(true)
            }
        );
        let (fired, seed, attempt, _) = opened(&s);
        assert_eq!(fired, vec![Trigger::FailedAssumption]);
        assert_eq!(seed, Seed::Partial(partial(true)));
        assert_eq!(attempt.strategy, Strategy::NextAlternative);
        assert_eq!(attempt.alternative, Some(1), "#1 is the continuation's");
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn a_stagnating_partial_forks_a_child_from_it() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.context.witnessed_partial = true;
        s.current.energies = vec![3.0, 3.0, 3.0];
        s.continuation = Some(local_repair());
        let (fired, seed, attempt, _) = opened(&s);
        assert_eq!(
            next_expansions(&s).len(),
            1,
            "a stagnating partial is not continued"
        );
        assert_eq!(fired, vec![Trigger::Plateau]);
        assert_eq!(seed, Seed::Partial(partial(true)));
        assert_ne!(attempt, s.current.attempt);
    }

    #[test]
    fn a_partial_without_correction_or_retries_is_not_continued() {
        let mut s = quiet();
        s.current.outcome = BranchOutcome::Partial(partial(false));
        assert_eq!(first_expansion(&s), None, "no trigger fired either");
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.current.local_retries_left = 0;
        assert!(matches!(first_expansion(&s), Some(Expansion::Open { .. })));
    }

    #[test]
    fn local_repair_is_chosen_only_with_a_witnessed_partial() {
        let mut s = quiet();
        s.operators = vec![CorrectionOperator::ApplySuggestions { count: 1 }];
        s.routes = vec![RUSTC.into()];
        s.current.outcome = BranchOutcome::Ineligible;
        s.context.witnessed_partial = true;
        assert_eq!(
            first_expansion(&s),
            None,
            "local repair needs a partial seed"
        );
        s.current.outcome = BranchOutcome::Partial(partial(true));
        s.current.local_retries_left = 0;
        s.context.witnessed_partial = false;
        assert_eq!(
            first_expansion(&s),
            None,
            "its assumption needs a witnessed partial"
        );
        s.context.witnessed_partial = true;
        let (fired, seed, attempt, _) = opened(&s);
        assert_eq!(fired, vec![Trigger::OutOfLocalRetries]);
        assert_eq!(seed, Seed::Partial(partial(true)));
        assert_eq!(attempt.strategy, Strategy::LocalRepair);
    }

    #[test]
    fn alternatives_are_taken_one_at_a_time_and_never_twice() {
        let mut s = took_the_first_of(2);
        s.current.outcome = BranchOutcome::Ineligible;
        s.context.untried_alternatives = 1;
        let (_, seed, attempt, novelty) = opened(&s);
        assert_eq!((seed, novelty), (Seed::Accepted, Novelty::Operator));
        assert_eq!(attempt.alternative, Some(1));

        s.tried.push(attempt.clone());
        s.current.attempt = attempt;
        s.context.untried_alternatives = 0;
        assert_eq!(first_expansion(&s), None, "both alternatives were tried");
    }

    #[test]
    fn more_untried_alternatives_than_branches_left_are_probed_first() {
        let mut s = quiet();
        s.operators = vec![CorrectionOperator::ChooseAlternative { alternatives: 15 }];
        s.routes = vec![RUSTC.into()];
        s.current.outcome = BranchOutcome::Ineligible;
        s.context.untried_alternatives = 14;
        let (_, seed, attempt, novelty) = opened(&s);
        assert_eq!((seed, novelty), (Seed::Accepted, Novelty::Strategy));
        assert_eq!(attempt, probe_attempt(RUSTC));

        // Once probed, or with room for every alternative, they are tried
        // one branch each.
        s.tried.push(probe_attempt(RUSTC));
        assert_eq!(opened(&s).2.strategy, Strategy::NextAlternative);
        s.tried.pop();
        s.context.untried_alternatives = 2;
        assert_eq!(opened(&s).2.strategy, Strategy::NextAlternative);
        assert!(probe_first(3, 2) && !probe_first(2, 2));
    }

    #[test]
    fn strategy_digests_are_distinct() {
        let digests: std::collections::BTreeSet<_> =
            Strategy::ALL.iter().map(|s| s.digest()).collect();
        assert_eq!(digests.len(), Strategy::ALL.len());
    }
}
