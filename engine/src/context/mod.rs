//! Resident context (PSP-10 Definition 6, Proposition 6, Gate AF): the
//! model actor's conversation as immutable, content-addressed pages, and
//! the deterministic fit of each request under the route's token budget.
//!
//! The conversation the runner keeps is the backing store; a request is a
//! projection of it. Each turn's assistant message with all its tool
//! results is one atomic page (erratum 6) carrying its birth dependency
//! (erratum 8). Before every call [`working_set`] names the optional
//! candidates (the pages of the last θ turns, those the residual cluster
//! names, those recalled), and [`fit`] pins the mandatory pages, drops
//! stale ones, chooses candidates by weighted coverage within what is
//! left of β_in, and replaces every page it does not keep by a tombstone
//! charged inside β_in (erratum 5). A request whose instructions and
//! mandatory pages exceed β_in is refused ([`Infeasible`]): nothing is
//! sent. The [`ResidentPlan`] of a request is ledgered with it, so
//! [`apply_plan`] rebuilds the exact messages from the recorded pages
//! without selecting again. Before any of that, [`fixed_overhead`] decides
//! how much of a small window the instructions and tool schemas may take.
//!
//! This module never calls a model or a summarizer, never rewrites a page
//! (a stale page is invalidated, never relabelled), never truncates a
//! mandatory page or splits a tool pair, and never reads or writes a file:
//! everything here is a plain function of values, generic over the
//! conversation's [`Message`] type so it never depends on the actor (whose
//! `actor::paging` is the edge that feeds it: page births, the live branch,
//! recall).

mod accountant;
mod calibration;
mod explain;
mod overhead;
mod page;
mod plan;
mod recall;
mod select;
pub mod synopsis;
mod working_set;

pub use accountant::{
    Accountant, Allowance, MESSAGE_OVERHEAD, Message, TOOL_CALL_OVERHEAD, ToolForm, UNCALIBRATED,
};
pub use calibration::{Calibrations, Underestimate};
pub use explain::{Outcome, TurnContext, context_turns};
pub use overhead::{OVERHEAD_SHARE, Overhead, OverheadInput, fixed_overhead, overhead_cap};
pub use page::{Dependency, Live, Page, PageKeys, PageSpan, pages};
pub use plan::{Infeasible, PagePlan, Residency, ResidentPlan, apply_plan, tombstone};
pub use recall::{RecallKey, resolve};
pub use select::{FitError, FitInput, fit};
pub use working_set::{Focus, WorkingSet, WorkingSetInput, working_set};

#[cfg(test)]
pub(crate) mod testing {
    //! A conversation message for the pure core's tests: a tool call, its
    //! result, or a note.

    use serde::Serialize;

    use super::Message;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    pub enum Msg {
        Call {
            id: String,
            tool: String,
            arguments: String,
        },
        Result {
            id: String,
            content: String,
        },
        Note(String),
    }

    impl Message for Msg {
        fn texts(&self) -> Vec<&str> {
            match self {
                Msg::Call {
                    id,
                    tool,
                    arguments,
                } => vec![id, tool, arguments],
                Msg::Result { id, content } => vec![id, content],
                Msg::Note(content) => vec![content],
            }
        }

        fn tool_calls(&self) -> usize {
            usize::from(matches!(self, Msg::Call { .. }))
        }

        fn note(content: String) -> Msg {
            Msg::Note(content)
        }
    }
}
