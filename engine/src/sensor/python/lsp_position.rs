//! LSP-style positions (0-based line, column in the encoding's code
//! units), as `ty server` and pyright report them, converted to and from
//! byte offsets and Trellis spans (1-based lines, char columns).

use serde_json::{Value, json};
use trellis_core::text;

use crate::diagnostic::Span;
use crate::workspace_path::WorkspacePath;

/// How the server counts columns (LSP `positionEncoding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

impl Encoding {
    /// The encoding the server chose; UTF-16 is the protocol's default.
    pub fn of(initialize: &Value) -> Self {
        match initialize["capabilities"]["positionEncoding"].as_str() {
            Some("utf-8") => Encoding::Utf8,
            _ => Encoding::Utf16,
        }
    }

    fn units(self, text: &str) -> usize {
        match self {
            Encoding::Utf8 => text.len(),
            Encoding::Utf16 => text.encode_utf16().count(),
        }
    }

    /// The LSP position of byte `byte` of `text`.
    pub fn position(self, text: &str, byte: u32) -> Value {
        let byte = (byte as usize).min(text.len());
        let before = &text[..text::floor_char_boundary(text, byte)];
        let line = before.matches('\n').count();
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        json!({"line": line, "character": self.units(&before[line_start..])})
    }

    /// The byte offset of an LSP position in `text`; `None` outside it.
    pub fn byte(self, text: &str, position: &Value) -> Option<usize> {
        let line = usize::try_from(position["line"].as_u64()?).ok()?;
        let character = usize::try_from(position["character"].as_u64()?).ok()?;
        let line_start: usize = if line == 0 {
            0
        } else {
            text.match_indices('\n').nth(line - 1)?.0 + 1
        };
        let rest = text.get(line_start..)?;
        let line_text = rest.split('\n').next().unwrap_or_default();
        let mut units = 0;
        for (offset, c) in line_text.char_indices() {
            if units >= character {
                return Some(line_start + offset);
            }
            units += match self {
                Encoding::Utf8 => c.len_utf8(),
                Encoding::Utf16 => c.len_utf16(),
            };
        }
        (units >= character).then_some(line_start + line_text.len())
    }
}

/// A span over bytes `start..end` of `text` (the file `path`), with 1-based
/// lines and char columns.
pub fn span_of(path: &WorkspacePath, text: &str, start: usize, end: usize) -> Span {
    let point = |byte: usize| {
        let before = &text[..byte];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    };
    let (line_start, col_start) = point(start);
    let (line_end, col_end) = point(end);
    Span {
        path: path.clone(),
        byte_start: u32::try_from(start).unwrap_or(u32::MAX),
        byte_end: u32::try_from(end).unwrap_or(u32::MAX),
        line_start,
        col_start,
        line_end,
        col_end,
        label: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_in_both_encodings() {
        let text = "s = \"é😀\" + name\nnext line\n";
        let name = text.find("name").unwrap() as u32;
        for encoding in [Encoding::Utf8, Encoding::Utf16] {
            let position = encoding.position(text, name);
            assert_eq!(
                encoding.byte(text, &position),
                Some(name as usize),
                "{encoding:?}"
            );
        }
        assert_eq!(Encoding::Utf16.position(text, name)["character"], 12);
        assert_eq!(Encoding::Utf8.position(text, name)["character"], 15);
        let beyond = json!({"line": 5, "character": 0});
        assert_eq!(Encoding::Utf8.byte(text, &beyond), None);
    }
}
