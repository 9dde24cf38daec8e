//! The context of each model turn as the ledger recorded it (its working
//! set, each attempt's plan or refusal, its recalls), for
//! `trellis context explain-turn` and `trellis status`: read from the
//! `context_*` rows, never recomputed. Reads rows; never writes.

use serde::Serialize;

use super::plan::{Infeasible, ResidentPlan};
use super::working_set::WorkingSet;
use crate::ledger::{DecodedRow, Row, SearchEvent};

/// One attempt's context, or the recall facts of a turn, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnContext {
    pub seq: u64,
    pub forest_id: String,
    pub branch_id: String,
    pub turn: u32,
    pub endpoint: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Pages `context_recall` named during this turn.
    pub recalled: Vec<String>,
    /// Recalls that named no page, with why.
    pub misses: Vec<String>,
    /// The turn's candidate pages (`context_working_set`), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set: Option<WorkingSet>,
}

/// Whether the attempt's request was sent, and its plan or refusal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Sent {
        plan_digest: String,
        plan: ResidentPlan,
    },
    Infeasible {
        figures: Infeasible,
    },
}

/// Every attempt's context in `rows`, in ledger order, with its turn's
/// working set, recalls and misses. `Err` names a row whose payload does
/// not read, or a working set that does not match its recorded digest.
pub fn context_turns(rows: &[Row]) -> Result<Vec<TurnContext>, String> {
    let mut out: Vec<TurnContext> = Vec::new();
    // The latest working set of each branch, for its turn's attempts.
    let mut sets: Vec<(&str, &str, WorkingSet)> = Vec::new();
    for row in rows {
        let DecodedRow::Search { event, .. } = &row.event else {
            continue;
        };
        let unreadable = |e: serde_json::Error| format!("ledger row {}: {e}", row.seq);
        let ids = (event.forest_id(), event.branch_id());
        let attempt = |turn: u32, endpoint: &str, outcome| TurnContext {
            seq: row.seq,
            forest_id: ids.0.to_owned(),
            branch_id: ids.1.to_owned(),
            turn,
            endpoint: endpoint.to_owned(),
            outcome,
            recalled: Vec::new(),
            misses: Vec::new(),
            working_set: sets
                .iter()
                .find(|(f, b, set)| (*f, *b) == ids && set.turn == turn)
                .map(|(_, _, set)| set.clone()),
        };
        match event {
            SearchEvent::ContextWorkingSet {
                turn,
                working_set_turns,
                pages,
                digest,
                ..
            } => {
                let set = WorkingSet {
                    turn: *turn,
                    turns: *working_set_turns,
                    pages: pages.clone(),
                };
                if set.digest() != *digest {
                    return Err(format!(
                        "ledger row {}: the working set of turn {turn} does not match its \
                         digest {digest}",
                        row.seq
                    ));
                }
                sets.retain(|(f, b, _)| (*f, *b) != ids);
                sets.push((ids.0, ids.1, set));
            }
            SearchEvent::ContextPagesSelected {
                turn,
                endpoint,
                plan_digest,
                plan,
                ..
            } => out.push(attempt(
                *turn,
                endpoint,
                Outcome::Sent {
                    plan_digest: plan_digest.clone(),
                    plan: serde_json::from_value(plan.clone()).map_err(unreadable)?,
                },
            )),
            SearchEvent::ContextInfeasible {
                turn,
                endpoint,
                figures,
                ..
            } => out.push(attempt(
                *turn,
                endpoint,
                Outcome::Infeasible {
                    figures: serde_json::from_value(figures.clone()).map_err(unreadable)?,
                },
            )),
            SearchEvent::ContextPageRecalled { turn, page_id, .. }
            | SearchEvent::ContextMiss {
                turn,
                reason: page_id,
                ..
            } => {
                let same = |c: &&mut TurnContext| {
                    c.turn == *turn
                        && c.forest_id == event.forest_id()
                        && c.branch_id == event.branch_id()
                };
                if let Some(c) = out.iter_mut().rev().find(same) {
                    if matches!(event, SearchEvent::ContextMiss { .. }) {
                        c.misses.push(page_id.clone());
                    } else {
                        c.recalled.push(page_id.clone());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Allowance, ResidentPlan, ToolForm, UNCALIBRATED};
    use crate::ledger::test_support::temp_ledger;

    fn working_set(turn: u32, digest: Option<&str>) -> SearchEvent {
        let set = WorkingSet {
            turn,
            turns: 1,
            pages: vec!["a".repeat(64)],
        };
        SearchEvent::ContextWorkingSet {
            forest_id: "f".into(),
            branch_id: "b1".into(),
            turn,
            working_set_turns: set.turns,
            digest: digest.map_or_else(|| set.digest(), str::to_owned),
            pages: set.pages,
        }
    }

    fn selected(turn: u32) -> SearchEvent {
        let plan = ResidentPlan {
            allowance: Allowance::for_route(4096, 512, (ToolForm::Full, &[]), UNCALIBRATED),
            instruction_tokens: 10,
            mandatory_tokens: 0,
            optional_tokens: 0,
            tombstone_tokens: 0,
            request_tokens: 10,
            pages: Vec::new(),
        };
        SearchEvent::ContextPagesSelected {
            forest_id: "f".into(),
            branch_id: "b1".into(),
            turn,
            endpoint: "m0".into(),
            plan_digest: plan.digest(),
            plan: serde_json::to_value(&plan).unwrap(),
        }
    }

    #[test]
    fn each_attempt_reads_back_its_turns_recorded_working_set_and_a_forged_one_fails_closed() {
        let (_dir, ledger) = temp_ledger();
        for event in [
            working_set(1, None),
            selected(1),
            working_set(2, None),
            selected(2),
        ] {
            ledger.append_search(&event).unwrap();
        }
        let turns = context_turns(&ledger.rows().unwrap()).unwrap();
        let sets: Vec<Option<u32>> = turns
            .iter()
            .map(|t| t.working_set.as_ref().map(|s| s.turn))
            .collect();
        assert_eq!(sets, [Some(1), Some(2)]);
        ledger
            .append_search(&working_set(3, Some("sha256:forged")))
            .unwrap();
        let error = context_turns(&ledger.rows().unwrap()).unwrap_err();
        assert!(
            error.contains("working set of turn 3 does not match"),
            "{error}"
        );
    }
}
