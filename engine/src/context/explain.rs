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

/// Every attempt's context in `rows`, in ledger order, with the recalls
/// and misses of its turn. `Err` names a row whose payload does not read.
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
                ..
            } => {
                sets.retain(|(f, b, _)| (*f, *b) != ids);
                sets.push((
                    ids.0,
                    ids.1,
                    WorkingSet {
                        turn: *turn,
                        turns: *working_set_turns,
                        pages: pages.clone(),
                    },
                ));
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
