//! The resident plan of one request: every page in conversation order with
//! its residency decision, and the figures of Definition 6. It is what the
//! ledger records, and all that replay needs: [`apply_plan`] turns a plan
//! and the recorded conversation back into the request's messages,
//! checking every page's address, without selecting again (Gate AF).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::accountant::{Allowance, Message};
use super::page::{Dependency, PageKeys, PageSpan, page_id};
use crate::digest::CanonicalHasher;

/// What became of a page in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Residency {
    /// Mandatory: the latest turn, the evidence the model acts on.
    Pinned,
    /// Optional, selected.
    Resident,
    /// Optional, not selected: a tombstone stands in its place.
    Evicted,
    /// Born under a state that no longer holds: tombstoned, never resident.
    Stale,
}

impl Residency {
    pub fn is_resident(self) -> bool {
        matches!(self, Residency::Pinned | Residency::Resident)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Residency::Pinned => "pinned",
            Residency::Resident => "resident",
            Residency::Evicted => "evicted",
            Residency::Stale => "stale",
        }
    }
}

/// One page's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagePlan {
    pub id: String,
    pub turn: u32,
    pub start: usize,
    pub len: usize,
    pub birth: Vec<Dependency>,
    pub keys: PageKeys,
    pub residency: Residency,
    /// Tokens of the page itself.
    pub cost: u64,
    /// Tokens of its tombstone.
    pub tombstone_cost: u64,
    /// Why it is where it is (for `trellis context explain-turn`).
    pub reason: String,
}

impl PagePlan {
    pub fn short_id(&self) -> &str {
        &self.id[..16.min(self.id.len())]
    }

    fn span(&self) -> PageSpan {
        PageSpan {
            turn: self.turn,
            start: self.start,
            len: self.len,
            birth: self.birth.clone(),
            keys: self.keys.clone(),
        }
    }
}

/// The plan of one request (Definition 6 and erratum 5): the allowance, the
/// cost of the instructions, the mandatory pages, the resident optional
/// pages and the tombstones, and each page's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidentPlan {
    pub allowance: Allowance,
    /// c(I_t): the programs and the turn block.
    pub instruction_tokens: u64,
    /// c(M_t).
    pub mandatory_tokens: u64,
    /// Resident optional pages.
    pub optional_tokens: u64,
    /// Every tombstone, charged inside β_in.
    pub tombstone_tokens: u64,
    /// The whole composed request's messages; at most `allowance.input`.
    pub request_tokens: u64,
    pub pages: Vec<PagePlan>,
}

impl ResidentPlan {
    /// The plan's digest, over its canonical JSON.
    pub fn digest(&self) -> String {
        let json = serde_json::to_string(self).expect("a plan serializes");
        format!(
            "sha256:{}",
            CanonicalHasher::new("trellis.resident-plan.v1")
                .str(&json)
                .finish()
                .to_hex()
        )
    }

    /// Whether any page is not resident: the request was refitted.
    pub fn refitted(&self) -> bool {
        self.pages.iter().any(|p| !p.residency.is_resident())
    }

    pub fn count(&self, residency: Residency) -> usize {
        self.pages
            .iter()
            .filter(|p| p.residency == residency)
            .count()
    }
}

/// A request that cannot be sent: its instructions and mandatory pages
/// (with the tombstones of the rest) exceed β_in (`context_infeasible`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Infeasible {
    pub allowance: Allowance,
    pub instruction_tokens: u64,
    pub mandatory_tokens: u64,
    pub tombstone_tokens: u64,
}

impl fmt::Display for Infeasible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "context_infeasible: the instructions ({} tokens), the mandatory pages ({}) and the \
             tombstones ({}) exceed the input allowance of {} tokens ({} window − {} output − {} \
             tools − {} guard, accountant {} v{})",
            self.instruction_tokens,
            self.mandatory_tokens,
            self.tombstone_tokens,
            self.allowance.input,
            self.allowance.window,
            self.allowance.output,
            self.allowance.tools,
            self.allowance.guard,
            self.allowance.accountant,
            self.allowance.accountant_version
        )
    }
}

/// The message standing in for a page that is not resident: its id, what
/// it held and how to bring it back, in Trellis's own words.
pub fn tombstone<M: Message>(page: &PagePlan) -> M {
    let what = super::page::summary(&page.keys);
    let content = match page.residency {
        Residency::Stale => format!(
            "[trellis:context-page {} turn {} stale] {what}: {}; what it showed is out of date, \
             read it again.",
            page.short_id(),
            page.turn,
            page.reason
        ),
        _ => format!(
            "[trellis:context-page {} turn {} evicted] {what} ({} tokens) was left out to fit \
             the context window; call `context_recall` with page \"{}\" to have it back.",
            page.short_id(),
            page.turn,
            page.cost,
            page.short_id()
        ),
    };
    M::note(content)
}

/// The conversation part of a request as `plan` lays it out over
/// `conversation`: each resident page's messages, a tombstone for every
/// other. Every page's address is checked against the messages it spans,
/// and the plan must cover the conversation it is applied to; any mismatch
/// is an error, never a best effort.
pub fn apply_plan<M: Message>(plan: &ResidentPlan, conversation: &[M]) -> Result<Vec<M>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    for page in &plan.pages {
        let messages = conversation
            .get(page.start..page.start + page.len)
            .filter(|_| page.start == at && page.len > 0)
            .ok_or_else(|| {
                format!(
                    "page {} (turn {}) does not continue the recorded conversation",
                    page.short_id(),
                    page.turn
                )
            })?;
        if page_id(&page.span(), messages) != page.id {
            return Err(format!(
                "page {} (turn {}) does not match the recorded conversation",
                page.short_id(),
                page.turn
            ));
        }
        if page.residency.is_resident() {
            out.extend_from_slice(messages);
        } else {
            out.push(tombstone(page));
        }
        at += page.len;
    }
    if at != conversation.len() {
        return Err(format!(
            "the plan covers {at} of {} conversation messages",
            conversation.len()
        ));
    }
    Ok(out)
}
