//! The paging state of one actor run (resident context, Definition 6): the
//! page spans of its conversation, the edits made so far, the pages a
//! recall asked for and when, and the context events waiting to be
//! ledgered; and
//! the texts of a [`ChatMessage`] the accountant charges.
//!
//! This is the edge between the runner and the pure core in
//! `crate::context`: it reads the branch files a page depends on (to hash
//! them at a page's birth and to check them before each request), through
//! the same confinement as the tools, and nothing else. It never writes
//! and never decides residency ([`working_set`] and [`fit`] do).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use serde::Serialize;

use super::tools::{ToolEffect, ToolError, ToolOutput, ToolRecord, ToolRequest};
use super::transport::ChatMessage;
use crate::context::{
    Allowance, Dependency, FitError, FitInput, Focus, Infeasible, Live, Message, PageKeys,
    PageSpan, RecallKey, ResidentPlan, Underestimate, WorkingSet, WorkingSetInput, fit, pages,
    resolve, working_set,
};
use crate::digest::blob_digest;
use crate::snapshot::fsutil::confine;

impl Message for ChatMessage {
    /// Its text, its tool calls' names, ids and arguments, a result's call id.
    fn texts(&self) -> Vec<&str> {
        match self {
            ChatMessage::System { content } | ChatMessage::User { content } => vec![content],
            ChatMessage::ToolResult { call_id, content } => std::iter::once(content.as_str())
                .chain(call_id.as_deref())
                .collect(),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => content
                .as_deref()
                .into_iter()
                .chain(tool_calls.iter().flat_map(|c| {
                    [c.name.as_str(), &c.arguments]
                        .into_iter()
                        .chain(c.id.as_deref())
                }))
                .collect(),
        }
    }

    fn tool_calls(&self) -> usize {
        match self {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        }
    }

    /// A user-role note: every dialect accepts one between turns.
    fn note(content: String) -> ChatMessage {
        ChatMessage::User { content }
    }
}

/// A fact of system 21's `context_*` family, for the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ContextEvent {
    /// `context_working_set`: the candidate pages of one turn's request.
    WorkingSet {
        working_set: WorkingSet,
        digest: String,
    },
    /// `context_pages_selected`: the plan of one attempt's request.
    PagesSelected {
        turn: u32,
        endpoint: String,
        plan_digest: String,
        plan: ResidentPlan,
    },
    /// `context_infeasible`: nothing was sent.
    Infeasible {
        turn: u32,
        endpoint: String,
        infeasible: Infeasible,
    },
    /// `context_page_recalled`: the page is a candidate for the next request.
    PageRecalled {
        turn: u32,
        page_id: String,
        key: RecallKey,
    },
    /// `context_miss`: no page matched.
    Miss {
        turn: u32,
        key: RecallKey,
        reason: String,
    },
    /// `context_underestimated`: the endpoint counted the answered request
    /// larger than its plan charged; later plans are calibrated.
    Underestimated {
        turn: u32,
        endpoint: String,
        underestimate: Underestimate,
    },
}

/// The paging state of one run.
#[derive(Debug, Default)]
pub struct Paging {
    spans: Vec<PageSpan>,
    edits: u64,
    /// Recalled during the running turn: candidates for the next request.
    pending: BTreeSet<String>,
    /// Recalled in the turn before: candidates for this request.
    recalled: BTreeSet<String>,
    /// The last turn each page was recalled in, by id: a reference that
    /// keeps it in the working set.
    recalls: BTreeMap<String, u32>,
    events: Vec<ContextEvent>,
}

impl Paging {
    /// The paging state of a run that continues `conversation` without
    /// its pages' provenance (erratum 18): it is one page whose birth state
    /// is unknowable, tombstoned and recallable but never resident, never
    /// relabelled with the live state. Empty for a fresh run.
    pub fn restored(conversation: &[ChatMessage]) -> Paging {
        let mut paging = Paging::default();
        if !conversation.is_empty() {
            paging.spans.push(PageSpan {
                turn: 0,
                start: 0,
                len: conversation.len(),
                birth: vec![Dependency::Unknown],
                keys: PageKeys::default(),
            });
        }
        paging
    }

    /// The page of turn `turn`: `conversation[start..]`, what `tools` did.
    /// Born when the turn ends: each file it read with the blob it has now,
    /// the branch state for whole-branch observations.
    pub fn turn_ended(
        &mut self,
        branch: &Path,
        turn: u32,
        conversation: &[ChatMessage],
        start: usize,
        tools: &[ToolRecord],
    ) {
        self.recalled = std::mem::take(&mut self.pending);
        if conversation.len() <= start {
            return;
        }
        self.edits += tools
            .iter()
            .filter(
                |t| matches!(&t.result, Ok(o) if matches!(o.effect, ToolEffect::Mutated { .. })),
            )
            .count() as u64;
        let mut keys = PageKeys::default();
        let mut birth = BTreeSet::new();
        for t in tools {
            keys.tools.push(t.call.name.clone());
            keys.call_ids.extend(t.call.id.clone());
            let Some(request) = &t.request else { continue };
            keys.paths.extend(request.path().map(str::to_owned));
            if let ToolRequest::RunTests {
                filter: Some(filter),
            } = request
            {
                keys.tests.push(filter.clone());
            }
            if t.result.is_err() {
                continue;
            }
            match request {
                ToolRequest::ReadFile { path, .. } => {
                    if let Some(blob) = blob_of(branch, path) {
                        birth.insert(Dependency::File {
                            path: path.clone(),
                            blob,
                        });
                    }
                }
                ToolRequest::ListFiles { .. }
                | ToolRequest::Search { .. }
                | ToolRequest::RunBuild
                | ToolRequest::RunTests { .. } => {
                    birth.insert(Dependency::BranchState { edits: self.edits });
                }
                ToolRequest::Replace { .. }
                | ToolRequest::WriteFile { .. }
                | ToolRequest::Finish { .. }
                | ToolRequest::ContextRecall(_) => {}
            }
        }
        self.spans.push(PageSpan {
            turn,
            start,
            len: conversation.len() - start,
            birth: birth.into_iter().collect(),
            keys,
        });
    }

    /// The branch as it stands, for every dependency of every page.
    pub fn live(&self, branch: &Path) -> Live {
        let mut live = Live {
            edits: self.edits,
            ..Live::default()
        };
        for span in &self.spans {
            for d in &span.birth {
                if let Dependency::File { path, .. } = d
                    && !live.blobs.contains_key(path)
                {
                    live.blobs.insert(path.clone(), blob_of(branch, path));
                }
            }
        }
        live
    }

    /// The working set of turn `turn`'s request over `conversation`, with
    /// θ = `turns`.
    pub fn working_set(
        &self,
        conversation: &[ChatMessage],
        (turn, turns): (u32, u32),
        live: &Live,
        focus: &Focus,
    ) -> Result<WorkingSet, FitError> {
        let pages = pages(conversation, &self.spans).map_err(FitError::Pages)?;
        let set = working_set(WorkingSetInput {
            pages: &pages,
            turn,
            turns,
            live,
            focus,
            recalls: &self.recalls,
            recalled: &self.recalled,
        });
        Ok(set)
    }

    /// The plan of the next request over `conversation`, within `working_set`.
    pub fn plan(
        &self,
        conversation: &[ChatMessage],
        instruction_tokens: u64,
        allowance: &Allowance,
        (live, focus): (&Live, &Focus),
        working_set: &WorkingSet,
    ) -> Result<ResidentPlan, FitError> {
        fit(FitInput {
            conversation,
            spans: &self.spans,
            instruction_tokens,
            allowance,
            live,
            recalled: &self.recalled,
            focus,
            working_set,
        })
    }

    /// `context_recall` in turn `turn`: a hit makes the page a candidate
    /// for the next request (the running one is never changed); a miss is
    /// a tool error. Either is recorded.
    pub fn recall(
        &mut self,
        turn: u32,
        conversation: &[ChatMessage],
        key: &RecallKey,
    ) -> Result<ToolOutput, ToolError> {
        // The running turn's messages are not a page yet.
        let born: usize = self.spans.iter().map(|s| s.len).sum();
        let found = pages(&conversation[..born.min(conversation.len())], &self.spans)
            .map_err(|e| e.to_string())
            .and_then(|pages| {
                resolve(key, &pages).map(|p| (p.id.clone(), p.span.turn, p.summary()))
            });
        match found {
            Ok((id, page_turn, summary)) => {
                self.pending.insert(id.clone());
                self.recalls.insert(id.clone(), turn);
                self.events.push(ContextEvent::PageRecalled {
                    turn,
                    page_id: id.clone(),
                    key: key.clone(),
                });
                Ok(ToolOutput {
                    note: format!(
                        "page {} (turn {page_turn}: {summary}) is restored in your next request, \
                         unless it is stale",
                        &id[..16]
                    ),
                    data: String::new(),
                    truncated_bytes: 0,
                    effect: ToolEffect::None,
                })
            }
            Err(reason) => {
                self.events.push(ContextEvent::Miss {
                    turn,
                    key: key.clone(),
                    reason: reason.clone(),
                });
                Err(ToolError(format!("`context_recall`: {reason}")))
            }
        }
    }

    /// The events recorded since the last call, in order.
    pub fn take_events(&mut self) -> Vec<ContextEvent> {
        std::mem::take(&mut self.events)
    }
}

/// The blob digest of a branch file a tool read, `None` when it is gone,
/// a symlink, or unreadable.
fn blob_of(branch: &Path, rel: &str) -> Option<String> {
    let path = confine(branch, rel).ok()?;
    if fs::symlink_metadata(&path).ok()?.file_type().is_symlink() {
        return None;
    }
    fs::read(&path).ok().map(|b| blob_digest(&b).to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Residency, ToolForm, UNCALIBRATED, apply_plan};

    #[test]
    fn a_conversation_restored_without_provenance_is_tombstoned_never_resident() {
        let prior = vec![
            ChatMessage::Assistant {
                content: Some("earlier".into()),
                tool_calls: Vec::new(),
            },
            ChatMessage::User {
                content: "[trellis:turn-note] earlier".into(),
            },
        ];
        let paging = Paging::restored(&prior);
        let allowance = Allowance {
            input: 10_000,
            ..Allowance::for_route(20_000, 0, (ToolForm::Full, &[]), UNCALIBRATED)
        };
        let live = paging.live(Path::new("/nonexistent"));
        let focus = Focus::default();
        let working = paging.working_set(&prior, (1, 6), &live, &focus).unwrap();
        assert!(working.pages.is_empty(), "a stale page is no candidate");
        let plan = paging
            .plan(&prior, 0, &allowance, (&live, &focus), &working)
            .unwrap();
        assert_eq!(plan.pages.len(), 1);
        assert_eq!(plan.pages[0].residency, Residency::Stale);
        let sent = apply_plan(&plan, &prior).unwrap();
        assert!(
            matches!(&sent[..], [ChatMessage::User { content }] if content.contains(" stale]"))
        );
        assert!(Paging::restored(&[]).spans.is_empty());
    }
}
