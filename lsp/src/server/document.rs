//! An open text document: its text as the editor has it, and its version.

use ropey::Rope;
use tower_lsp_server::ls_types::{TextDocumentContentChangeEvent, Uri};

use super::encoding::{PositionEncoding, position_to_byte};

#[derive(Clone, Debug)]
pub struct Document {
    pub uri: Uri,
    pub version: i32,
    pub text: Rope,
}

/// A change the client sent that cannot be applied to the text we hold.
#[derive(Debug, PartialEq, Eq)]
pub struct ChangeError(pub String);

impl Document {
    pub fn new(uri: Uri, version: i32, text: &str) -> Document {
        Document {
            uri,
            version,
            text: Rope::from_str(text),
        }
    }

    /// Applies one `didChange` notification: its events in order, then the
    /// new version. A whole-text event replaces everything; a ranged event
    /// replaces the bytes between its (clamped) positions. Nothing changes
    /// unless every event applies.
    pub fn apply_changes(
        &mut self,
        version: i32,
        changes: &[TextDocumentContentChangeEvent],
        encoding: PositionEncoding,
    ) -> Result<(), ChangeError> {
        // Ropes share structure, so the clone is cheap and keeps the
        // original intact if a later event is refused.
        let mut text = self.text.clone();
        for change in changes {
            match change.range {
                None => text = Rope::from_str(&change.text),
                Some(range) => {
                    let start = position_to_byte(&text, range.start, encoding);
                    let end = position_to_byte(&text, range.end, encoding);
                    if end < start {
                        return Err(ChangeError(format!(
                            "{}: change range ends ({}:{}) before it starts ({}:{})",
                            self.uri.as_str(),
                            range.end.line,
                            range.end.character,
                            range.start.line,
                            range.start.character
                        )));
                    }
                    let start_char = text.byte_to_char(start);
                    let end_char = text.byte_to_char(end);
                    text.remove(start_char..end_char);
                    text.insert(start_char, &change.text);
                }
            }
        }
        self.text = text;
        self.version = version;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use tower_lsp_server::ls_types::{Position, Range};

    fn ranged(start: (u32, u32), end: (u32, u32), text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(
                Position::new(start.0, start.1),
                Position::new(end.0, end.1),
            )),
            range_length: None,
            text: text.to_owned(),
        }
    }

    fn doc(text: &str) -> Document {
        Document::new(Uri::from_str("file:///w/src/lib.rs").unwrap(), 1, text)
    }

    #[test]
    fn incremental_edits_after_non_ascii_use_the_negotiated_units() {
        // Replace `b` after `é𝕏` (UTF-16 column 3, UTF-8 column 6).
        let mut utf16 = doc("é𝕏b\n");
        utf16
            .apply_changes(2, &[ranged((0, 3), (0, 4), "B")], PositionEncoding::Utf16)
            .unwrap();
        assert_eq!(utf16.text.to_string(), "é𝕏B\n");
        assert_eq!(utf16.version, 2);

        let mut utf8 = doc("é𝕏b\n");
        utf8.apply_changes(2, &[ranged((0, 6), (0, 7), "B")], PositionEncoding::Utf8)
            .unwrap();
        assert_eq!(utf8.text.to_string(), "é𝕏B\n");
    }

    #[test]
    fn events_apply_in_order_and_full_text_replaces_everything() {
        let mut d = doc("let x = 1;\n");
        let events = [
            ranged((0, 4), (0, 4), "mut "),
            ranged((0, 12), (0, 13), "2"),
            ranged((1, 0), (1, 0), "中\n"),
        ];
        d.apply_changes(5, &events, PositionEncoding::Utf16)
            .unwrap();
        assert_eq!(d.text.to_string(), "let mut x = 2;\n中\n");

        let whole = TextDocumentContentChangeEvent {
            range: None,
            range_length: None,
            text: "fresh".into(),
        };
        d.apply_changes(6, &[whole], PositionEncoding::Utf16)
            .unwrap();
        assert_eq!(d.text.to_string(), "fresh");
    }

    #[test]
    fn a_backwards_range_is_refused_and_names_the_document() {
        let mut d = doc("abc");
        let err = d
            .apply_changes(
                2,
                &[ranged((0, 0), (0, 0), "x"), ranged((0, 2), (0, 1), "")],
                PositionEncoding::Utf8,
            )
            .unwrap_err();
        assert!(err.0.contains("file:///w/src/lib.rs"), "{}", err.0);
        assert_eq!(d.text.to_string(), "abc");
        assert_eq!(d.version, 1);
    }
}
