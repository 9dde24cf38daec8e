//! Typed recall keys, v1 (erratum 7): which earlier page a `context_recall`
//! names. A page is named by its id or its 16-hex prefix (its content
//! address is its provenance key), by a path its calls took as an argument,
//! by a tool it called, a call id, or its turn; every key given must match,
//! and the latest matching page wins. Pure.

use serde::{Deserialize, Serialize};

use super::page::Page;

/// The arguments of `context_recall`; at least one is required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
}

impl RecallKey {
    pub fn is_empty(&self) -> bool {
        *self == RecallKey::default()
    }

    fn matches(&self, page: &Page) -> bool {
        let keys = &page.span.keys;
        self.page.as_ref().is_none_or(|id| {
            let id = id
                .strip_prefix("sha256:")
                .unwrap_or(id)
                .to_ascii_lowercase();
            id == page.id || (id.len() == 16 && page.id.starts_with(&id))
        }) && self.path.as_ref().is_none_or(|p| keys.paths.contains(p))
            && self.tool.as_ref().is_none_or(|t| keys.tools.contains(t))
            && self
                .call_id
                .as_ref()
                .is_none_or(|c| keys.call_ids.contains(c))
            && self.turn.is_none_or(|t| t == page.span.turn)
    }
}

/// The page `key` names among `pages`: the latest that matches every key.
pub fn resolve<'p>(key: &RecallKey, pages: &'p [Page]) -> Result<&'p Page, String> {
    if key.is_empty() {
        return Err(
            "`context_recall` needs at least one of page, path, tool, call_id, turn".into(),
        );
    }
    pages
        .iter()
        .rev()
        .find(|p| key.matches(p))
        .ok_or_else(|| "no earlier page matches".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::testing::Msg;
    use crate::context::{PageKeys, PageSpan, pages};

    fn store() -> Vec<Page> {
        let conversation: Vec<Msg> = (0..3).map(|i| Msg::Note(format!("m{i}"))).collect();
        let spans: Vec<PageSpan> = (0..3)
            .map(|i| PageSpan {
                turn: i as u32 + 1,
                start: i,
                len: 1,
                birth: vec![],
                keys: PageKeys {
                    tools: vec!["read_file".into()],
                    call_ids: vec![format!("c{i}")],
                    paths: vec![if i == 2 { "b.rs" } else { "a.rs" }.into()],
                    tests: vec![],
                },
            })
            .collect();
        pages(&conversation, &spans).unwrap()
    }

    #[test]
    fn keys_resolve_by_id_prefix_path_call_and_turn() {
        let pages = store();
        let by = |key: RecallKey| resolve(&key, &pages).map(|p| p.span.turn);
        let id = pages[0].id.clone();
        assert_eq!(
            by(RecallKey {
                page: Some(id.clone()),
                ..Default::default()
            }),
            Ok(1)
        );
        assert_eq!(
            by(RecallKey {
                page: Some(id[..16].to_uppercase()),
                ..Default::default()
            }),
            Ok(1)
        );
        assert!(
            by(RecallKey {
                page: Some(id[..8].into()),
                ..Default::default()
            })
            .is_err()
        );
        assert_eq!(
            by(RecallKey {
                path: Some("a.rs".into()),
                ..Default::default()
            }),
            Ok(2),
            "the latest"
        );
        assert_eq!(
            by(RecallKey {
                call_id: Some("c0".into()),
                ..Default::default()
            }),
            Ok(1)
        );
        assert_eq!(
            by(RecallKey {
                tool: Some("read_file".into()),
                turn: Some(3),
                ..Default::default()
            }),
            Ok(3)
        );
        assert!(
            by(RecallKey {
                path: Some("b.rs".into()),
                turn: Some(1),
                ..Default::default()
            })
            .is_err()
        );
        assert!(
            by(RecallKey::default())
                .unwrap_err()
                .contains("at least one")
        );
    }
}
