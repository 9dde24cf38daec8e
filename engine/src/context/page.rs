//! Pages: the immutable, content-addressed units of the conversation.
//!
//! One turn of the actor (its assistant message and every tool result or
//! note that answers it) is one page, so a tool call is never separated
//! from its result (erratum 6). A page's id is the digest of its messages,
//! its turn and its birth dependency: the same bytes born under the same
//! state are the same page, and nothing about a page changes once it is
//! born. Whether a page is still current is decided against [`Live`], the
//! branch as it stands; a page whose dependency no longer holds is stale
//! and is never relabelled as current (erratum 8).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::accountant::Message;
use crate::digest::CanonicalHasher;

/// What a page's content depends on. A page with no dependency is
/// session-invariant history (an edit's acknowledgement stays true).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Dependency {
    /// The content of one branch file, by blob digest, as the page read it.
    File { path: String, blob: String },
    /// The whole branch after `edits` governed edits of this run (a build,
    /// a test run, a listing or a search observes all of it).
    BranchState { edits: u64 },
    /// Restored from a checkpoint that did not record where its messages
    /// were born (erratum 18): never current, so never resident.
    Unknown,
}

/// The typed fields a page is recalled by and covers in selection: never
/// model prose, only tool names, call ids, path arguments and test filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageKeys {
    pub tools: Vec<String>,
    pub call_ids: Vec<String>,
    pub paths: Vec<String>,
    /// The `run_tests` filters the page's calls gave; absent from records
    /// written before selection weighed the residual cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<String>,
}

/// Where a page sits in the conversation and what it was born under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageSpan {
    pub turn: u32,
    pub start: usize,
    pub len: usize,
    pub birth: Vec<Dependency>,
    pub keys: PageKeys,
}

/// A page with its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// 64 hex digits.
    pub id: String,
    pub span: PageSpan,
}

impl Page {
    /// The 16-hex prefix the model sees and may recall by.
    pub fn short_id(&self) -> &str {
        &self.id[..16]
    }

    /// What the page holds, in a few words: `read_file src/lib.rs, run_tests`.
    pub fn summary(&self) -> String {
        summary(&self.span.keys)
    }

    /// Why the page is stale under `live`, or `None` while it is current.
    pub fn stale_because(&self, live: &Live) -> Option<String> {
        self.span.birth.iter().find_map(|d| match d {
            Dependency::File { path, blob } => match live.blobs.get(path) {
                Some(Some(current)) if current == blob => None,
                Some(Some(_)) => Some(format!("`{path}` changed since")),
                _ => Some(format!("`{path}` is gone or unreadable since")),
            },
            Dependency::BranchState { edits } if *edits != live.edits => Some(format!(
                "the branch was edited since ({} edits then, {} now)",
                edits, live.edits
            )),
            Dependency::BranchState { .. } => None,
            Dependency::Unknown => Some("restored without the state it was born under".to_owned()),
        })
    }
}

/// The branch as it stands: the edits made so far and the current blob of
/// every file a page depends on (`None`: missing or unreadable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Live {
    pub edits: u64,
    pub blobs: BTreeMap<String, Option<String>>,
}

/// `read_file src/lib.rs, run_tests`, from a page's keys.
pub(super) fn summary(keys: &PageKeys) -> String {
    if keys.tools.is_empty() {
        return "a reply without a tool call".to_owned();
    }
    let mut paths = keys.paths.iter();
    keys.tools
        .iter()
        .map(|t| match t.as_str() {
            "read_file" | "replace" | "write_file" => match paths.next() {
                Some(p) => format!("{t} {p}"),
                None => t.clone(),
            },
            _ => t.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The content address of a page: its turn, messages and birth.
pub(super) fn page_id<M: Serialize>(span: &PageSpan, messages: &[M]) -> String {
    let mut h = CanonicalHasher::new("trellis.context-page.v1");
    h.u64(u64::from(span.turn)).u64(messages.len() as u64);
    for m in messages {
        h.str(&serde_json::to_string(m).expect("a message serializes"));
    }
    h.u64(span.birth.len() as u64);
    for d in &span.birth {
        h.str(&serde_json::to_string(d).expect("a dependency serializes"));
    }
    h.finish().to_hex()
}

/// The pages of `conversation`, which `spans` must cover exactly, in order.
pub fn pages<M: Message>(conversation: &[M], spans: &[PageSpan]) -> Result<Vec<Page>, String> {
    let mut at = 0;
    let mut out = Vec::with_capacity(spans.len());
    for span in spans {
        if span.start != at || span.len == 0 {
            return Err(format!(
                "page of turn {} starts at message {}, not {at}",
                span.turn, span.start
            ));
        }
        let messages = conversation
            .get(span.start..span.start + span.len)
            .ok_or_else(|| {
                format!(
                    "page of turn {} ends past the conversation ({} messages)",
                    span.turn,
                    conversation.len()
                )
            })?;
        out.push(Page {
            id: page_id(span, messages),
            span: span.clone(),
        });
        at += span.len;
    }
    if at != conversation.len() {
        return Err(format!(
            "the pages cover {at} of {} conversation messages",
            conversation.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::testing::Msg;

    fn span(turn: u32, start: usize, len: usize, birth: Vec<Dependency>) -> PageSpan {
        PageSpan {
            turn,
            start,
            len,
            birth,
            keys: PageKeys::default(),
        }
    }

    fn user(text: &str) -> Msg {
        Msg::Note(text.into())
    }

    #[test]
    fn ids_address_content_turn_and_birth() {
        let conversation = [user("a"), user("b")];
        let one = pages(&conversation, &[span(1, 0, 2, vec![])]).unwrap();
        let again = pages(&conversation, &[span(1, 0, 2, vec![])]).unwrap();
        assert_eq!(one, again);
        let born_later = pages(
            &conversation,
            &[span(1, 0, 2, vec![Dependency::BranchState { edits: 1 }])],
        )
        .unwrap();
        assert_ne!(one[0].id, born_later[0].id);
        let other = pages(&[user("a"), user("c")], &[span(1, 0, 2, vec![])]).unwrap();
        assert_ne!(one[0].id, other[0].id);
        assert_eq!(one[0].id.len(), 64);
    }

    #[test]
    fn spans_must_cover_the_conversation_exactly() {
        let conversation = [user("a"), user("b")];
        assert!(pages(&conversation, &[span(1, 0, 1, vec![])]).is_err());
        assert!(pages(&conversation, &[span(1, 1, 1, vec![])]).is_err());
        assert!(pages(&conversation, &[span(1, 0, 3, vec![])]).is_err());
    }

    #[test]
    fn a_page_is_stale_when_its_file_or_branch_state_moved() {
        let conversation = [user("a")];
        let file = Dependency::File {
            path: "src/lib.rs".into(),
            blob: "b0".into(),
        };
        let page = &pages(&conversation, &[span(1, 0, 1, vec![file])]).unwrap()[0];
        let mut live = Live::default();
        live.blobs.insert("src/lib.rs".into(), Some("b0".into()));
        assert_eq!(page.stale_because(&live), None);
        live.blobs.insert("src/lib.rs".into(), Some("b1".into()));
        assert!(page.stale_because(&live).unwrap().contains("changed"));
        live.blobs.insert("src/lib.rs".into(), None);
        assert!(page.stale_because(&live).unwrap().contains("gone"));
        let tree = &pages(
            &conversation,
            &[span(1, 0, 1, vec![Dependency::BranchState { edits: 0 }])],
        )
        .unwrap()[0];
        assert_eq!(tree.stale_because(&Live::default()), None);
        let edited = Live {
            edits: 1,
            ..Live::default()
        };
        assert!(tree.stale_because(&edited).is_some());
    }
}
