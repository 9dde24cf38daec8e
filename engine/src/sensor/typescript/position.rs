//! Positions as the TypeScript tools count them, and byte offsets.
//!
//! tsc reports `(line,col)` and tsserver `{line, offset}`, both 1-based, the
//! column in UTF-16 code units (TypeScript strings are UTF-16), with lines
//! broken where the TypeScript scanner breaks them: LF, CR, CR LF, U+2028
//! and U+2029. Trellis's spans and edits are byte offsets into the file's
//! text. This module converts between the two and never reads a file.

use crate::diagnostic::Span;
use crate::workspace_path::WorkspacePath;

/// Where each line of `text` starts, as TypeScript counts lines.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\r' => {
                if chars.peek().is_some_and(|&(_, next)| next == '\n') {
                    chars.next();
                    starts.push(at + 2);
                } else {
                    starts.push(at + 1);
                }
            }
            '\n' => starts.push(at + 1),
            '\u{2028}' | '\u{2029}' => starts.push(at + c.len_utf8()),
            _ => {}
        }
    }
    starts
}

/// The text of line `index` (0-based), its line break included.
fn line_text<'a>(text: &'a str, starts: &[usize], index: usize) -> Option<&'a str> {
    let start = *starts.get(index)?;
    let end = starts.get(index + 1).copied().unwrap_or(text.len());
    text.get(start..end)
}

/// The byte offset of 1-based `line` and 1-based UTF-16 `column` in `text`.
/// The column counts the line's break too, as tsserver does: at the end
/// of a file that ends with a line break it names the position after it
/// on the last line. `None` when the position is outside the text or
/// splits a surrogate pair.
pub fn byte_offset(text: &str, line: u32, column: u32) -> Option<usize> {
    let starts = line_starts(text);
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let mut units = usize::try_from(column.checked_sub(1)?).ok()?;
    let line_text = line_text(text, &starts, index)?;
    for (at, c) in line_text.char_indices() {
        if units == 0 {
            return Some(starts[index] + at);
        }
        units = units.checked_sub(c.len_utf16())?;
    }
    (units == 0).then_some(starts[index] + line_text.len())
}

/// The 1-based line (as TypeScript counts lines) and 1-based column in
/// chars (as Trellis's spans count them) of byte offset `byte`, which must
/// lie on a char boundary of `text`.
pub fn line_and_char_column(text: &str, byte: usize) -> (u32, u32) {
    line_and_column(text, byte, |before| before.chars().count())
}

/// The 1-based line and 1-based UTF-16 column of byte offset `byte`, as
/// tsserver's requests name a position.
pub fn line_and_utf16_column(text: &str, byte: usize) -> (u32, u32) {
    line_and_column(text, byte, |before| before.encode_utf16().count())
}

fn line_and_column(text: &str, byte: usize, units: impl Fn(&str) -> usize) -> (u32, u32) {
    let starts = line_starts(text);
    let index = starts.partition_point(|&start| start <= byte) - 1;
    let column = text.get(starts[index]..byte).map_or(0, units);
    (
        u32::try_from(index + 1).unwrap_or(u32::MAX),
        u32::try_from(column + 1).unwrap_or(u32::MAX),
    )
}

/// The end of the token that starts at `byte`: an identifier or number
/// runs to its last word character, anything else is one character. tsc
/// prints only where a diagnostic starts; its name is what the diagnostic
/// is about (`Cannot find name 'mean'` starts at `mean`).
pub fn token_end(text: &str, byte: usize) -> usize {
    let Some(rest) = text.get(byte..) else {
        return byte;
    };
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut chars = rest.char_indices();
    match chars.next() {
        None => byte,
        Some((_, '\n' | '\r' | '\u{2028}' | '\u{2029}')) => byte,
        Some((_, c)) if word(c) => {
            byte + chars
                .find(|&(_, c)| !word(c))
                .map_or(rest.len(), |(at, _)| at)
        }
        Some((_, c)) => byte + c.len_utf8(),
    }
}

/// The span of bytes `start..end` of `text`, the file at `path`.
pub(super) fn span_of(path: WorkspacePath, text: &str, start: usize, end: usize) -> Span {
    let (line_start, col_start) = line_and_char_column(text, start);
    let (line_end, col_end) = line_and_char_column(text, end);
    let byte = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
    Span {
        path,
        byte_start: byte(start),
        byte_end: byte(end),
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
    fn columns_count_utf16_units_and_lines_break_where_typescript_breaks_them() {
        let text = "a\r\nb\rc\u{2028}d\n😀x = 1;\n";
        assert_eq!(byte_offset(text, 1, 1), Some(0));
        assert_eq!(byte_offset(text, 2, 1), Some(3));
        assert_eq!(byte_offset(text, 3, 1), Some(5));
        assert_eq!(byte_offset(text, 4, 1), Some(9));
        // The emoji is two UTF-16 units and four bytes.
        assert_eq!(byte_offset(text, 5, 3), Some(15));
        assert_eq!(byte_offset(text, 5, 2), None, "inside a surrogate pair");
        assert_eq!(byte_offset(text, 5, 9), Some(21), "the end of the line");
        assert_eq!(
            byte_offset(text, 5, 10),
            Some(22),
            "past its break, at the file's end"
        );
        assert_eq!(byte_offset(text, 5, 11), None);
        assert_eq!(byte_offset(text, 9, 1), None);
        assert_eq!(byte_offset(text, 0, 1), None);
        assert_eq!(line_and_char_column(text, 15), (5, 2));
        assert_eq!(line_and_utf16_column(text, 15), (5, 3));
        assert_eq!(line_and_char_column(text, 0), (1, 1));
    }

    #[test]
    fn a_token_is_a_word_or_one_character() {
        let text = "x = mean(values);\n";
        assert_eq!(&text[4..token_end(text, 4)], "mean");
        assert_eq!(&text[8..token_end(text, 8)], "(");
        assert_eq!(token_end(text, 17), 17, "a line break is no token");
        assert_eq!(token_end(text, 99), 99);
        assert_eq!(&"ünï $x"[..token_end("ünï $x", 0)], "ünï");
    }
}
