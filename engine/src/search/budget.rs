//! The forest's search budget (PSP-10 Definition 5, system 20, errata 2, 3, 14, 21).
//!
//! One [`SearchLimits`] and one [`SearchBudget`] belong to each forest. Every
//! action — a fork, a model turn, a verifier run — calls
//! [`SearchBudget::reserve`] *before* it runs. The reservation checks every
//! limit against the worst case and charges that worst case at once, so a
//! usage snapshot taken right after it (and ledgered) already covers the
//! action: a crash inside the action resumes over-charged, never refilled.
//! [`SearchBudget::settle`] then replaces the worst case by the observed
//! actuals. Settling releases unused per-turn allowances (tokens, tool calls,
//! mutations, result bytes) but never the action unit, the model-turn or
//! verifier-run unit, or a fork's eager-copy reservation, which is held for
//! the forest's lifetime.
//!
//! Two numbers exist per counter: *consumed* (settled, monotone) and *held*
//! (reserved by actions still in flight). `consumed + held` never exceeds the
//! limit. When settled actuals would cross a limit, the counter is charged
//! *to the limit* and the budget closes (erratum 3): recorded usage can never
//! sit above a limit because no code path writes such a value. A closed
//! budget refuses every reservation and settlement forever.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The ten budgeted quantities, in snapshot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    Actions,
    ModelTurns,
    ToolCalls,
    Mutations,
    VerifierRuns,
    Tokens,
    ElapsedSecs,
    ResultBytes,
    WorkspaceFiles,
    WorkspaceBytes,
}

impl Counter {
    pub const ALL: [Counter; 10] = [
        Counter::Actions,
        Counter::ModelTurns,
        Counter::ToolCalls,
        Counter::Mutations,
        Counter::VerifierRuns,
        Counter::Tokens,
        Counter::ElapsedSecs,
        Counter::ResultBytes,
        Counter::WorkspaceFiles,
        Counter::WorkspaceBytes,
    ];

    /// The key used in usage snapshots and configuration.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Actions => "actions",
            Counter::ModelTurns => "model_turns",
            Counter::ToolCalls => "tool_calls",
            Counter::Mutations => "mutations",
            Counter::VerifierRuns => "verifier_runs",
            Counter::Tokens => "tokens",
            Counter::ElapsedSecs => "elapsed_secs",
            Counter::ResultBytes => "result_bytes",
            Counter::WorkspaceFiles => "workspace_files",
            Counter::WorkspaceBytes => "workspace_bytes",
        }
    }

    fn from_name(name: &str) -> Option<Counter> {
        Counter::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value per [`Counter`]. Used for limits, consumption and charges alike,
/// so every comparison is counter-by-counter over the same ten fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Counters {
    pub actions: u64,
    pub model_turns: u64,
    pub tool_calls: u64,
    pub mutations: u64,
    pub verifier_runs: u64,
    pub tokens: u64,
    pub elapsed_secs: u64,
    pub result_bytes: u64,
    pub workspace_files: u64,
    pub workspace_bytes: u64,
}

impl Counters {
    pub const ZERO: Counters = Counters {
        actions: 0,
        model_turns: 0,
        tool_calls: 0,
        mutations: 0,
        verifier_runs: 0,
        tokens: 0,
        elapsed_secs: 0,
        result_bytes: 0,
        workspace_files: 0,
        workspace_bytes: 0,
    };

    pub fn get(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Actions => self.actions,
            Counter::ModelTurns => self.model_turns,
            Counter::ToolCalls => self.tool_calls,
            Counter::Mutations => self.mutations,
            Counter::VerifierRuns => self.verifier_runs,
            Counter::Tokens => self.tokens,
            Counter::ElapsedSecs => self.elapsed_secs,
            Counter::ResultBytes => self.result_bytes,
            Counter::WorkspaceFiles => self.workspace_files,
            Counter::WorkspaceBytes => self.workspace_bytes,
        }
    }

    fn slot(&mut self, counter: Counter) -> &mut u64 {
        match counter {
            Counter::Actions => &mut self.actions,
            Counter::ModelTurns => &mut self.model_turns,
            Counter::ToolCalls => &mut self.tool_calls,
            Counter::Mutations => &mut self.mutations,
            Counter::VerifierRuns => &mut self.verifier_runs,
            Counter::Tokens => &mut self.tokens,
            Counter::ElapsedSecs => &mut self.elapsed_secs,
            Counter::ResultBytes => &mut self.result_bytes,
            Counter::WorkspaceFiles => &mut self.workspace_files,
            Counter::WorkspaceBytes => &mut self.workspace_bytes,
        }
    }

    /// The counters as a snapshot map keyed by [`Counter::name`]; the payload
    /// shape of the ledger's `search_usage_snapshot`.
    pub fn to_snapshot(&self) -> BTreeMap<String, u64> {
        Counter::ALL
            .into_iter()
            .map(|c| (c.name().to_owned(), self.get(c)))
            .collect()
    }

    /// Reads a snapshot map back. Every counter must be present and no other
    /// key may be: a snapshot that does not name exactly the ten counters is
    /// not trusted to carry the consumption it claims.
    pub fn from_snapshot(snapshot: &BTreeMap<String, u64>) -> Result<Counters, SnapshotError> {
        let mut out = Counters::ZERO;
        for (key, value) in snapshot {
            let counter =
                Counter::from_name(key).ok_or_else(|| SnapshotError::UnknownKey(key.clone()))?;
            *out.slot(counter) = *value;
        }
        if let Some(missing) = Counter::ALL
            .into_iter()
            .find(|c| !snapshot.contains_key(c.name()))
        {
            return Err(SnapshotError::MissingKey(missing));
        }
        Ok(out)
    }

    /// True when every counter of `self` is at least the one of `other`.
    pub fn covers(&self, other: &Counters) -> bool {
        Counter::ALL
            .into_iter()
            .all(|c| self.get(c) >= other.get(c))
    }
}

/// A usage snapshot that cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("usage snapshot has unknown counter `{0}`")]
    UnknownKey(String),
    #[error("usage snapshot lacks counter `{0}`")]
    MissingKey(Counter),
}

/// The limits of one forest.
pub type SearchLimits = Counters;

/// What a forest has charged: consumed plus held reservations.
pub type SearchUsage = Counters;

impl SearchLimits {
    /// The release defaults: enough for three deterministic branches of a few
    /// steps each, or one model branch of a dozen turns. `workspace_files`
    /// and `workspace_bytes` match `[exploration]`'s defaults.
    pub const DEFAULT_LIMITS: SearchLimits = Counters {
        actions: 48,
        model_turns: 12,
        tool_calls: 96,
        mutations: 48,
        verifier_runs: 24,
        tokens: 400_000,
        elapsed_secs: 900,
        result_bytes: 8 << 20,
        workspace_files: 100_000,
        workspace_bytes: 2 << 30,
    };
}

/// One action, with its worst case (when reserving) or its actuals (when
/// settling).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ActionKind {
    /// An eager copy of the seed into a branch workspace.
    Fork { files: u64, bytes: u64 },
    /// One model turn with its per-turn allowances.
    ModelTurn {
        tokens: u64,
        tool_calls: u64,
        mutations: u64,
        result_bytes: u64,
    },
    /// One run of the required sensors over a realized candidate.
    VerifierRun,
}

impl ActionKind {
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::Fork { .. } => "fork",
            ActionKind::ModelTurn { .. } => "model_turn",
            ActionKind::VerifierRun => "verifier_run",
        }
    }

    /// What the action charges, counter by counter.
    fn charge(&self) -> Counters {
        let mut c = Counters {
            actions: 1,
            ..Counters::ZERO
        };
        match *self {
            ActionKind::Fork { files, bytes } => {
                c.workspace_files = files;
                c.workspace_bytes = bytes;
            }
            ActionKind::ModelTurn {
                tokens,
                tool_calls,
                mutations,
                result_bytes,
            } => {
                c.model_turns = 1;
                c.tokens = tokens;
                c.tool_calls = tool_calls;
                c.mutations = mutations;
                c.result_bytes = result_bytes;
            }
            ActionKind::VerifierRun => c.verifier_runs = 1,
        }
        c
    }
}

/// A reservation was refused; nothing was charged (erratum 21).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BudgetRefusal {
    #[error("the search budget is closed; no further action may run")]
    Closed,
    #[error("`{counter}` would reach {requested} of its limit {limit} ({charged} already charged)")]
    OverLimit {
        counter: Counter,
        charged: u64,
        requested: u64,
        limit: u64,
    },
}

/// A settlement that could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettleError {
    #[error(
        "the search budget closed while the action was in flight; its worst case stays charged"
    )]
    Closed,
    #[error("a {reserved} reservation cannot be settled with {settled} actuals")]
    KindMismatch {
        reserved: &'static str,
        settled: &'static str,
    },
    #[error("the reservation belongs to budget `{owner}`, not this one")]
    ForeignReservation { owner: String },
}

/// Permission to run one action. It cannot be cloned or built outside this
/// module, so every action the runtime performs traces back to exactly one
/// successful [`SearchBudget::reserve`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation must be settled with the action's actuals"]
pub struct Reservation {
    id: u64,
    kind: ActionKind,
    owner: String,
}

impl Reservation {
    pub fn kind(&self) -> ActionKind {
        self.kind
    }
}

/// Proof that an action was reserved and settled; the forest demands one
/// before it creates a branch (fork) or records a measurement (verifier run).
#[derive(Debug, PartialEq, Eq)]
pub struct Receipt {
    kind: ActionKind,
    owner: String,
}

impl Receipt {
    pub fn kind(&self) -> ActionKind {
        self.kind
    }

    /// The owner of the budget that settled the action (the forest id).
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

/// Settled actuals crossed a limit: the counter was charged to the limit and
/// the budget closed. Ledgered as an observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overflow {
    pub counter: Counter,
    /// What the counter would have reached.
    pub attempted: u64,
    pub limit: u64,
}

/// The result of settling one action.
#[derive(Debug, PartialEq, Eq)]
pub struct Settlement {
    pub receipt: Receipt,
    /// Set when the actuals crossed a limit; the budget is now closed.
    pub overflow: Option<Overflow>,
    /// A fork copied more files or bytes than it reserved: the copy must be
    /// aborted and contained, and no branch may be created from it.
    pub exceeded_reservation: bool,
}

/// Why a budget is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "closure", rename_all = "snake_case")]
pub enum Closure {
    /// The forest finished (selected, committed, or ran out of triggers).
    Finished,
    /// Settled actuals crossed a limit (erratum 3).
    Overflow(Overflow),
}

/// The limits and monotone usage of one forest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchBudget {
    limits: SearchLimits,
    consumed: Counters,
    held: Counters,
    in_flight: BTreeMap<u64, Counters>,
    next_reservation: u64,
    closure: Option<Closure>,
    /// The forest this budget belongs to; reservations and receipts carry
    /// it so one forest's permission cannot be spent in another.
    owner: String,
}

impl SearchBudget {
    pub fn new(limits: SearchLimits) -> Self {
        SearchBudget {
            limits,
            consumed: Counters::ZERO,
            held: Counters::ZERO,
            in_flight: BTreeMap::new(),
            next_reservation: 0,
            closure: None,
            owner: String::new(),
        }
    }

    /// A budget that starts with `prior` already consumed: the usage of an
    /// interrupted forest, never refilled. A counter above its limit (the
    /// limits shrank between runs) is charged to the limit and the budget
    /// opens closed.
    pub fn with_consumed(limits: SearchLimits, prior: SearchUsage) -> Self {
        let mut budget = SearchBudget::new(limits);
        for counter in Counter::ALL {
            let limit = limits.get(counter);
            let value = prior.get(counter);
            *budget.consumed.slot(counter) = value.min(limit);
            if value > limit && budget.closure.is_none() {
                budget.closure = Some(Closure::Overflow(Overflow {
                    counter,
                    attempted: value,
                    limit,
                }));
            }
        }
        budget
    }

    /// Binds the budget to its forest; done once, by the forest that owns it.
    pub(crate) fn bind(&mut self, owner: &str) {
        self.owner = owner.to_owned();
    }

    pub fn limits(&self) -> &SearchLimits {
        &self.limits
    }

    /// Everything charged so far: settled actuals plus the worst case of
    /// actions still in flight. This is what a snapshot records and what a
    /// resume must start from.
    pub fn usage(&self) -> SearchUsage {
        let mut usage = self.consumed;
        for counter in Counter::ALL {
            *usage.slot(counter) += self.held.get(counter);
        }
        usage
    }

    /// The settled part of [`usage`](Self::usage); it never decreases.
    pub fn consumed(&self) -> &Counters {
        &self.consumed
    }

    /// What is left under each limit.
    pub fn remaining(&self) -> Counters {
        let usage = self.usage();
        let mut left = Counters::ZERO;
        for counter in Counter::ALL {
            *left.slot(counter) = self.limits.get(counter) - usage.get(counter);
        }
        left
    }

    /// The `search_usage_snapshot` payload.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.usage().to_snapshot()
    }

    pub fn closure(&self) -> Option<Closure> {
        self.closure
    }

    pub fn is_closed(&self) -> bool {
        self.closure.is_some()
    }

    /// Whether `kind` would be admitted now, without reserving anything.
    pub fn admits(&self, kind: &ActionKind) -> Result<(), BudgetRefusal> {
        if self.is_closed() {
            return Err(BudgetRefusal::Closed);
        }
        let usage = self.usage();
        let charge = kind.charge();
        for counter in Counter::ALL {
            let charged = usage.get(counter);
            let requested = charged.saturating_add(charge.get(counter));
            let limit = self.limits.get(counter);
            if requested > limit {
                return Err(BudgetRefusal::OverLimit {
                    counter,
                    charged,
                    requested,
                    limit,
                });
            }
        }
        Ok(())
    }

    /// Checks every limit against `kind`'s worst case and charges it. A
    /// refusal charges nothing.
    pub fn reserve(&mut self, kind: ActionKind) -> Result<Reservation, BudgetRefusal> {
        self.admits(&kind)?;
        let charge = kind.charge();
        for counter in Counter::ALL {
            *self.held.slot(counter) += charge.get(counter);
        }
        let id = self.next_reservation;
        self.next_reservation += 1;
        self.in_flight.insert(id, charge);
        Ok(Reservation {
            id,
            kind,
            owner: self.owner.clone(),
        })
    }

    /// Replaces a reservation's worst case with the action's actuals.
    ///
    /// `actual` must be the same kind of action. Unit counters (the action,
    /// the model turn, the verifier run) stay charged; a fork stays charged at
    /// least its reservation; a model turn's allowances are charged at what
    /// it used. Actuals that cross a limit are charged to the limit and close
    /// the budget.
    pub fn settle(
        &mut self,
        reservation: Reservation,
        actual: ActionKind,
    ) -> Result<Settlement, SettleError> {
        if reservation.owner != self.owner {
            return Err(SettleError::ForeignReservation {
                owner: reservation.owner,
            });
        }
        if std::mem::discriminant(&reservation.kind) != std::mem::discriminant(&actual) {
            return Err(SettleError::KindMismatch {
                reserved: reservation.kind.name(),
                settled: actual.name(),
            });
        }
        let Some(reserved) = self.in_flight.remove(&reservation.id) else {
            // Closing folded this reservation into consumption already.
            return Err(SettleError::Closed);
        };
        for counter in Counter::ALL {
            *self.held.slot(counter) -= reserved.get(counter);
        }
        let observed = actual.charge();
        let mut charge = observed;
        let mut exceeded_reservation = false;
        if let ActionKind::Fork { .. } = actual {
            // The eager-copy reservation is held for the forest's lifetime.
            for counter in [Counter::WorkspaceFiles, Counter::WorkspaceBytes] {
                exceeded_reservation |= observed.get(counter) > reserved.get(counter);
                *charge.slot(counter) = observed.get(counter).max(reserved.get(counter));
            }
        }
        let overflow = self.charge_clamped(&charge);
        Ok(Settlement {
            receipt: Receipt {
                kind: actual,
                owner: self.owner.clone(),
            },
            overflow,
            exceeded_reservation,
        })
    }

    /// Charges elapsed wall-clock time, which has no pre-action hook
    /// (erratum 2): the runtime calls this at branch boundaries. Crossing the
    /// limit closes the budget like any other overflow.
    pub fn charge_elapsed(&mut self, secs: u64) -> Result<Option<Overflow>, BudgetRefusal> {
        if self.is_closed() {
            return Err(BudgetRefusal::Closed);
        }
        Ok(self.charge_clamped(&Counters {
            elapsed_secs: secs,
            ..Counters::ZERO
        }))
    }

    /// Closes the budget. Reservations still in flight become consumption:
    /// an action interrupted by the close is charged its worst case.
    pub fn close(&mut self) {
        if self.closure.is_none() {
            self.closure = Some(Closure::Finished);
        }
        self.fold_in_flight();
    }

    fn fold_in_flight(&mut self) {
        for (_, reserved) in std::mem::take(&mut self.in_flight) {
            for counter in Counter::ALL {
                *self.consumed.slot(counter) += reserved.get(counter);
            }
        }
        self.held = Counters::ZERO;
    }

    /// Adds `charge` to consumption, clamping each counter so that consumed
    /// plus held never exceeds its limit; the first clamped counter closes
    /// the budget.
    fn charge_clamped(&mut self, charge: &Counters) -> Option<Overflow> {
        let mut overflow = None;
        for counter in Counter::ALL {
            let room = self.limits.get(counter) - self.held.get(counter);
            let attempted = self
                .consumed
                .get(counter)
                .saturating_add(charge.get(counter));
            let slot = self.consumed.slot(counter);
            if attempted > room {
                *slot = room;
                overflow.get_or_insert(Overflow {
                    counter,
                    attempted: attempted + self.held.get(counter),
                    limit: self.limits.get(counter),
                });
            } else {
                *slot = attempted;
            }
        }
        if let Some(overflow) = overflow {
            self.closure = Some(Closure::Overflow(overflow));
            self.fold_in_flight();
        }
        overflow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn turn(tokens: u64) -> ActionKind {
        ActionKind::ModelTurn {
            tokens,
            tool_calls: 4,
            mutations: 2,
            result_bytes: 1000,
        }
    }

    fn small_limits() -> SearchLimits {
        Counters {
            actions: 4,
            model_turns: 2,
            tool_calls: 8,
            mutations: 4,
            verifier_runs: 2,
            tokens: 1000,
            elapsed_secs: 60,
            result_bytes: 4000,
            workspace_files: 10,
            workspace_bytes: 1000,
        }
    }

    #[test]
    fn reservation_charges_the_worst_case_before_the_action() {
        let mut b = SearchBudget::new(small_limits());
        let r = b.reserve(turn(600)).unwrap();
        assert_eq!(b.usage().tokens, 600);
        assert_eq!(b.usage().actions, 1);
        assert_eq!(b.consumed().tokens, 0);
        assert_eq!(b.snapshot()["tokens"], 600);
        b.settle(r, turn(100)).unwrap();
        assert_eq!(b.usage().tokens, 100);
        assert_eq!(b.usage().actions, 1, "the action unit is never returned");
        assert_eq!(b.usage().model_turns, 1);
    }

    #[test]
    fn refusal_names_the_counter_and_charges_nothing() {
        let mut b = SearchBudget::new(small_limits());
        let before = b.usage();
        let refusal = b.reserve(turn(1001)).unwrap_err();
        assert_eq!(
            refusal,
            BudgetRefusal::OverLimit {
                counter: Counter::Tokens,
                charged: 0,
                requested: 1001,
                limit: 1000
            }
        );
        assert!(refusal.to_string().contains("`tokens`"));
        assert_eq!(b.usage(), before);
        assert!(!b.is_closed(), "a refusal does not close the forest");
    }

    #[test]
    fn fork_reservation_is_held_and_an_oversized_copy_is_flagged() {
        let mut b = SearchBudget::new(small_limits());
        let r = b
            .reserve(ActionKind::Fork {
                files: 5,
                bytes: 500,
            })
            .unwrap();
        let s = b
            .settle(
                r,
                ActionKind::Fork {
                    files: 3,
                    bytes: 100,
                },
            )
            .unwrap();
        assert!(!s.exceeded_reservation);
        assert_eq!(
            b.usage().workspace_files,
            5,
            "held for the forest's lifetime"
        );
        assert_eq!(b.usage().workspace_bytes, 500);
        let r = b
            .reserve(ActionKind::Fork {
                files: 2,
                bytes: 10,
            })
            .unwrap();
        let s = b
            .settle(
                r,
                ActionKind::Fork {
                    files: 3,
                    bytes: 10,
                },
            )
            .unwrap();
        assert!(s.exceeded_reservation);
        assert_eq!(b.usage().workspace_files, 8);
    }

    #[test]
    fn settle_with_another_kind_is_refused() {
        let mut b = SearchBudget::new(small_limits());
        let r = b.reserve(ActionKind::VerifierRun).unwrap();
        assert!(matches!(
            b.settle(r, turn(1)),
            Err(SettleError::KindMismatch { .. })
        ));
    }

    #[test]
    fn another_budgets_reservation_is_refused_and_changes_nothing() {
        let mut mine = SearchBudget::new(small_limits());
        mine.bind("f1");
        let mut theirs = SearchBudget::new(small_limits());
        theirs.bind("f2");
        let held = mine.reserve(turn(10)).unwrap();
        let foreign = theirs.reserve(turn(10)).unwrap();
        let before = mine.clone();
        assert_eq!(
            mine.settle(foreign, turn(1)),
            Err(SettleError::ForeignReservation { owner: "f2".into() })
        );
        assert_eq!(mine, before);
        assert_eq!(mine.settle(held, turn(1)).unwrap().receipt.owner(), "f1");
    }

    #[test]
    fn overflow_is_charged_to_the_limit_and_closes() {
        let mut b = SearchBudget::new(small_limits());
        let r = b.reserve(turn(900)).unwrap();
        let s = b.settle(r, turn(1500)).unwrap();
        assert_eq!(
            s.overflow,
            Some(Overflow {
                counter: Counter::Tokens,
                attempted: 1500,
                limit: 1000
            })
        );
        assert_eq!(b.usage().tokens, 1000);
        assert_eq!(b.closure(), Some(Closure::Overflow(s.overflow.unwrap())));
        assert_eq!(
            b.reserve(ActionKind::VerifierRun),
            Err(BudgetRefusal::Closed)
        );
    }

    #[test]
    fn closing_keeps_in_flight_worst_cases_and_refuses_their_settlement() {
        let mut b = SearchBudget::new(small_limits());
        let r = b.reserve(turn(700)).unwrap();
        b.close();
        assert_eq!(b.consumed().tokens, 700);
        assert_eq!(b.settle(r, turn(10)), Err(SettleError::Closed));
        assert_eq!(b.usage().tokens, 700);
    }

    #[test]
    fn elapsed_time_is_charged_at_boundaries_and_clamped() {
        let mut b = SearchBudget::new(small_limits());
        assert_eq!(b.charge_elapsed(30), Ok(None));
        let overflow = b.charge_elapsed(45).unwrap().unwrap();
        assert_eq!(overflow.counter, Counter::ElapsedSecs);
        assert_eq!(b.usage().elapsed_secs, 60);
        assert_eq!(b.charge_elapsed(1), Err(BudgetRefusal::Closed));
    }

    #[test]
    fn snapshot_round_trips_and_rejects_unknown_or_missing_keys() {
        let mut b = SearchBudget::new(small_limits());
        let r = b.reserve(turn(5)).unwrap();
        b.settle(r, turn(3)).unwrap();
        let snap = b.snapshot();
        assert_eq!(Counters::from_snapshot(&snap), Ok(b.usage()));
        let mut extra = snap.clone();
        extra.insert("refills".into(), 1);
        assert_eq!(
            Counters::from_snapshot(&extra),
            Err(SnapshotError::UnknownKey("refills".into()))
        );
        let mut missing = snap;
        missing.remove("verifier_runs");
        assert_eq!(
            Counters::from_snapshot(&missing),
            Err(SnapshotError::MissingKey(Counter::VerifierRuns))
        );
    }

    #[test]
    fn resumed_budget_is_never_refilled_and_clamps_shrunken_limits() {
        let prior = Counters {
            actions: 3,
            tokens: 900,
            ..Counters::ZERO
        };
        let b = SearchBudget::with_consumed(small_limits(), prior);
        assert_eq!(b.usage(), prior);
        assert!(!b.is_closed());
        let mut tighter = small_limits();
        tighter.tokens = 500;
        let b = SearchBudget::with_consumed(tighter, prior);
        assert_eq!(b.usage().tokens, 500);
        assert!(b.is_closed());
    }

    /// One step of a generated budget session.
    #[derive(Clone, Debug)]
    enum Step {
        Reserve(ActionKind),
        /// Settle the oldest open reservation with these actuals.
        Settle(ActionKind),
        Elapsed(u64),
        Close,
    }

    fn action() -> impl Strategy<Value = ActionKind> {
        prop_oneof![
            (0u64..8, 0u64..600).prop_map(|(files, bytes)| ActionKind::Fork { files, bytes }),
            (0u64..600, 0u64..6, 0u64..4, 0u64..3000).prop_map(
                |(tokens, tool_calls, mutations, result_bytes)| ActionKind::ModelTurn {
                    tokens,
                    tool_calls,
                    mutations,
                    result_bytes
                }
            ),
            Just(ActionKind::VerifierRun),
        ]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => action().prop_map(Step::Reserve),
            4 => action().prop_map(Step::Settle),
            1 => (0u64..40).prop_map(Step::Elapsed),
            1 => Just(Step::Close),
        ]
    }

    /// Runs `steps`, calling `check(before, after, outcome)` after each.
    fn run(steps: &[Step], mut check: impl FnMut(&SearchBudget, &SearchBudget, &Step, bool)) {
        let mut budget = SearchBudget::new(small_limits());
        let mut open: Vec<Reservation> = Vec::new();
        for step in steps {
            let before = budget.clone();
            let admitted = match step {
                Step::Reserve(kind) => match budget.reserve(*kind) {
                    Ok(r) => {
                        open.push(r);
                        true
                    }
                    Err(_) => false,
                },
                Step::Settle(actual) => {
                    // Settle with actuals of the reservation's own kind.
                    let same_kind = open.iter().position(|r| {
                        std::mem::discriminant(&r.kind) == std::mem::discriminant(actual)
                    });
                    match same_kind {
                        Some(i) => budget.settle(open.remove(i), *actual).is_ok(),
                        None => false,
                    }
                }
                Step::Elapsed(secs) => budget.charge_elapsed(*secs).is_ok(),
                Step::Close => {
                    budget.close();
                    true
                }
            };
            check(&before, &budget, step, admitted);
        }
    }

    proptest! {
        /// Gate AC: an action runs only with a reservation, and the
        /// reservation charged at least one action unit before it ran.
        #[test]
        fn gate_ac_no_action_without_a_reservation(steps in proptest::collection::vec(step(), 0..40)) {
            run(&steps, |before, after, step, admitted| {
                if let Step::Reserve(_) = step {
                    if admitted {
                        assert_eq!(after.usage().actions, before.usage().actions + 1);
                    } else {
                        assert_eq!(after.usage(), before.usage(), "a refusal charges nothing");
                    }
                }
            });
        }

        /// Gate AC: consumed usage never decreases on any counter, and the
        /// charged action count never decreases.
        #[test]
        fn gate_ac_usage_never_decreases(steps in proptest::collection::vec(step(), 0..40)) {
            run(&steps, |before, after, _, _| {
                assert!(after.consumed().covers(before.consumed()));
                assert!(after.usage().actions >= before.usage().actions);
                assert!(after.usage().model_turns >= before.usage().model_turns);
                assert!(after.usage().verifier_runs >= before.usage().verifier_runs);
                assert!(after.usage().workspace_files >= before.usage().workspace_files);
                assert!(after.usage().workspace_bytes >= before.usage().workspace_bytes);
            });
        }

        /// Gate AC: whatever the actuals, recorded usage is never above a limit.
        #[test]
        fn gate_ac_usage_never_above_a_limit(steps in proptest::collection::vec(step(), 0..40)) {
            run(&steps, |_, after, _, _| {
                assert!(after.limits().covers(&after.usage()), "{:?} above {:?}", after.usage(), after.limits());
            });
        }

        /// Gate AC: once closed, the budget admits and records nothing.
        #[test]
        fn gate_ac_nothing_after_close(steps in proptest::collection::vec(step(), 0..40)) {
            run(&steps, |before, after, step, admitted| {
                if before.is_closed() {
                    assert!(after.is_closed(), "a closed budget never reopens");
                    assert_eq!(after.usage(), before.usage());
                    if !matches!(step, Step::Close) {
                        assert!(!admitted);
                    }
                }
            });
        }
    }
}
