//! Positions in the negotiated encoding, and their byte offsets.
//!
//! The engine speaks byte offsets; LSP speaks `(line, character)` where a
//! character is a UTF-8 byte or a UTF-16 code unit, whichever the server
//! chose at `initialize`. Every conversion between the two goes through this
//! module so that non-ASCII text (`é`, `𝕏`, CJK) lands on the same bytes
//! whichever encoding the client uses.
//!
//! Lines end at `\n`, `\r\n` or `\r`, exactly as LSP counts them (ropey is
//! built without its Unicode line breaks for this reason).

use ropey::{Rope, RopeSlice};
use tower_lsp_server::ls_types::{Position, PositionEncodingKind};

/// The unit in which a [`Position`]'s `character` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionEncoding {
    Utf8,
    Utf16,
}

impl PositionEncoding {
    /// UTF-8 when the client offers it (no transcoding on either side),
    /// otherwise UTF-16, the encoding every client must support.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> PositionEncoding {
        let offers_utf8 = offered
            .unwrap_or_default()
            .contains(&PositionEncodingKind::UTF8);
        if offers_utf8 {
            PositionEncoding::Utf8
        } else {
            PositionEncoding::Utf16
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            PositionEncoding::Utf8 => PositionEncodingKind::UTF8,
            PositionEncoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }
}

/// The byte offset of `position` in `rope`.
///
/// Out-of-range positions are clamped the way LSP asks: a line past the end
/// means the end of the text, a character past the end of its line means the
/// end of that line (before its line break). A position that falls inside a
/// multi-byte character (or between the halves of a surrogate pair) rounds
/// down to the start of that character, so the result is always a char
/// boundary.
pub fn position_to_byte(rope: &Rope, position: Position, encoding: PositionEncoding) -> usize {
    let line = position.line as usize;
    if line >= rope.len_lines() {
        return rope.len_bytes();
    }
    let line_start = rope.line_to_byte(line);
    let slice = rope.line(line);
    let content_chars = slice.len_chars() - line_break_chars(slice);
    let wanted = position.character as usize;
    let char_in_line = match encoding {
        PositionEncoding::Utf8 => {
            let content_bytes = slice.char_to_byte(content_chars);
            // `byte_to_char` names the char containing the byte: rounds down.
            slice.byte_to_char(wanted.min(content_bytes))
        }
        PositionEncoding::Utf16 => {
            let content_units = slice.char_to_utf16_cu(content_chars);
            slice.utf16_cu_to_char(wanted.min(content_units))
        }
    };
    line_start + slice.char_to_byte(char_in_line)
}

/// The position of byte offset `byte` in `rope`; an offset past the end is
/// the end, an offset inside a character is that character's start.
pub fn byte_to_position(rope: &Rope, byte: usize, encoding: PositionEncoding) -> Position {
    let char_index = rope.byte_to_char(byte.min(rope.len_bytes()));
    let line = rope.char_to_line(char_index);
    let line_start_char = rope.line_to_char(line);
    let character = match encoding {
        PositionEncoding::Utf8 => rope.char_to_byte(char_index) - rope.line_to_byte(line),
        PositionEncoding::Utf16 => {
            rope.char_to_utf16_cu(char_index) - rope.char_to_utf16_cu(line_start_char)
        }
    };
    Position::new(to_u32(line), to_u32(character))
}

/// How many chars at the end of `line` are its line break (0, 1 or 2).
fn line_break_chars(line: RopeSlice<'_>) -> usize {
    let len = line.len_chars();
    match (
        len.checked_sub(2).map(|i| line.char(i)),
        len.checked_sub(1).map(|i| line.char(i)),
    ) {
        (Some('\r'), Some('\n')) => 2,
        (_, Some('\n' | '\r')) => 1,
        _ => 0,
    }
}

/// LSP positions are `u32`; a text longer than 4 GiB saturates rather than wraps.
fn to_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    use PositionEncoding::{Utf8, Utf16};

    fn pos(line: u32, character: u32) -> Position {
        Position::new(line, character)
    }

    /// Line 1 is `aé𝕏中b`: `é` is 2 bytes / 1 unit, `𝕏` 4 bytes / 2 units
    /// (a surrogate pair), `中` 3 bytes / 1 unit.
    const TEXT: &str = "fn x() {}\naé𝕏中b\r\nlast";

    #[test]
    fn negotiation_prefers_utf8_only_when_offered() {
        let both = [PositionEncodingKind::UTF16, PositionEncodingKind::UTF8];
        assert_eq!(PositionEncoding::negotiate(Some(&both)), Utf8);
        let only16 = [PositionEncodingKind::UTF16];
        assert_eq!(PositionEncoding::negotiate(Some(&only16)), Utf16);
        let only32 = [PositionEncodingKind::UTF32];
        assert_eq!(PositionEncoding::negotiate(Some(&only32)), Utf16);
        assert_eq!(PositionEncoding::negotiate(None), Utf16);
    }

    #[test]
    fn non_ascii_characters_map_to_the_same_bytes_in_both_encodings() {
        let rope = Rope::from_str(TEXT);
        let line1 = TEXT.find('a').unwrap();
        // (utf-8 column, utf-16 column, byte offset from the line start)
        let columns = [
            (0, 0, 0),   // before `a`
            (1, 1, 1),   // before `é`
            (3, 2, 3),   // before `𝕏`
            (7, 4, 7),   // before `中`
            (10, 5, 10), // before `b`
            (11, 6, 11), // end of line, before `\r\n`
        ];
        for (utf8, utf16, offset) in columns {
            let byte = line1 + offset;
            assert_eq!(position_to_byte(&rope, pos(1, utf8), Utf8), byte);
            assert_eq!(position_to_byte(&rope, pos(1, utf16), Utf16), byte);
            assert_eq!(byte_to_position(&rope, byte, Utf8), pos(1, utf8));
            assert_eq!(byte_to_position(&rope, byte, Utf16), pos(1, utf16));
        }
    }

    #[test]
    fn positions_inside_a_character_round_down_to_its_start() {
        let rope = Rope::from_str(TEXT);
        let x_start = TEXT.find('𝕏').unwrap();
        // Between the two UTF-16 units of the surrogate pair.
        assert_eq!(position_to_byte(&rope, pos(1, 3), Utf16), x_start);
        // Inside the 4-byte UTF-8 sequence.
        assert_eq!(position_to_byte(&rope, pos(1, 5), Utf8), x_start);
        assert_eq!(byte_to_position(&rope, x_start + 2, Utf16), pos(1, 2));
    }

    #[test]
    fn out_of_range_positions_clamp_to_line_end_and_text_end() {
        let rope = Rope::from_str(TEXT);
        let line1_end = TEXT.find("\r\n").unwrap();
        assert_eq!(position_to_byte(&rope, pos(1, 99), Utf16), line1_end);
        assert_eq!(position_to_byte(&rope, pos(1, 99), Utf8), line1_end);
        assert_eq!(
            position_to_byte(&rope, pos(0, 99), Utf8),
            TEXT.find('\n').unwrap()
        );
        assert_eq!(position_to_byte(&rope, pos(9, 0), Utf16), TEXT.len());
        assert_eq!(byte_to_position(&rope, TEXT.len() + 5, Utf8), pos(2, 4));
    }

    #[test]
    fn crlf_and_lone_cr_are_single_line_breaks() {
        let text = "a\r\nb\rc\n";
        let rope = Rope::from_str(text);
        assert_eq!(position_to_byte(&rope, pos(1, 0), Utf16), 3);
        assert_eq!(position_to_byte(&rope, pos(2, 0), Utf16), 5);
        assert_eq!(position_to_byte(&rope, pos(3, 0), Utf16), 7);
        assert_eq!(byte_to_position(&rope, 5, Utf8), pos(2, 0));
    }

    #[test]
    fn unicode_line_separators_are_not_line_breaks() {
        // U+2028 is a line break for ropey's default features, not for LSP.
        let text = "a\u{2028}b\nc";
        let rope = Rope::from_str(text);
        assert_eq!(rope.len_lines(), 2);
        assert_eq!(
            byte_to_position(&rope, text.find('b').unwrap(), Utf16),
            pos(0, 2)
        );
    }

    #[test]
    fn every_char_boundary_round_trips_in_both_encodings() {
        let text = "ü𝕏\n日本語 é\r\n\r\n🦀x";
        let rope = Rope::from_str(text);
        for (byte, _) in text.char_indices().chain([(text.len(), ' ')]) {
            for encoding in [Utf8, Utf16] {
                let position = byte_to_position(&rope, byte, encoding);
                let back = position_to_byte(&rope, position, encoding);
                // A byte on a line break's `\n` of `\r\n` is not addressable.
                let inside_crlf = byte > 0
                    && text.as_bytes()[byte - 1] == b'\r'
                    && text[byte..].starts_with('\n');
                if !inside_crlf {
                    assert_eq!(back, byte, "{encoding:?} at byte {byte}");
                }
            }
        }
    }
}
