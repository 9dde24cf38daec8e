//! Resident context (PSP-10 Definition 6, Proposition 6, Gate AF): the
//! model actor's conversation as immutable, content-addressed pages, and
//! the deterministic fit of each request under the route's token budget.
//!
//! The conversation the runner keeps is the backing store; a request is a
//! projection of it. Each turn's assistant message with all its tool
//! results is one atomic page (erratum 6) carrying its birth dependency
//! (erratum 8). Before every call [`fit`] pins the mandatory pages, drops
//! stale ones, chooses optional pages by weighted coverage within what is
//! left of β_in, and replaces every page it does not keep by a tombstone
//! charged inside β_in (erratum 5). A request whose instructions and
//! mandatory pages exceed β_in is refused ([`Infeasible`]): nothing is
//! sent. The [`ResidentPlan`] of a request is ledgered with it, so
//! [`apply_plan`] rebuilds the exact messages from the recorded pages
//! without selecting again.
//!
//! This module never calls a model or a summarizer, never rewrites a page
//! (a stale page is invalidated, never relabelled), never truncates a
//! mandatory page or splits a tool pair, and never writes: apart from
//! [`Paging`]'s reads of the branch files a page depends on, and the
//! outline of a file ([`synopsis`]), everything here is a plain function
//! of values.

mod accountant;
mod explain;
mod page;
mod paging;
mod plan;
mod recall;
mod select;
pub mod synopsis;

pub use accountant::{
    ACCOUNTANT, Allowance, MESSAGE_OVERHEAD, message_tokens, messages_tokens, text_tokens,
};
pub use explain::{Outcome, TurnContext, context_turns};
pub use page::{Dependency, Live, Page, PageKeys, PageSpan, pages};
pub use paging::{ContextEvent, Paging};
pub use plan::{Infeasible, PagePlan, Residency, ResidentPlan, apply_plan, tombstone};
pub use recall::{RecallKey, resolve};
pub use select::{FitError, FitInput, fit};
