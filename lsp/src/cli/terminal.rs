//! What the CLI prints for a person, escaped: no byte of a workspace can
//! drive the terminal. An ESC sequence in a file (a cursor move, a line
//! erase, a title), a carriage return that overwrites a line, a bidi
//! control that reorders one, or a newline in a file name that forges one
//! is shown as `\x1b`, `\r`, `\u{202e}`, `\n`.
//!
//! Renderers pass every value they print on one line through [`line`]: a
//! file name, and what may quote one or a file's content (a cluster's
//! title, a candidate's label, a reason). Everything printed in the human
//! format goes out through [`print`] or [`eprint`] (or `println_escaped!`),
//! which escape the rest as [`text`]. JSON output
//! never passes here: it is exact, and JSON escapes itself.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write as _;

/// A value printed on one line (a file name, a title): every control
/// character (line feeds and tabs included) and every bidi control escaped.
pub fn line(line: &str) -> Cow<'_, str> {
    escape(line, false)
}

/// Text of several lines (file content, a report, a message): as [`line`],
/// but line feeds and tabs stay.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Prints `text` on stdout, escaped as [`text`].
pub fn print(text: &str) {
    let _ = std::io::stdout().write_all(self::text(text).as_bytes());
}

/// Prints `text` on stderr, escaped as [`text`].
pub fn eprint(text: &str) {
    let _ = std::io::stderr().write_all(self::text(text).as_bytes());
}

/// `println!` through [`print`].
macro_rules! println_escaped {
    ($($arg:tt)*) => {
        $crate::cli::terminal::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`eprint`].
macro_rules! eprintln_escaped {
    ($($arg:tt)*) => {
        $crate::cli::terminal::eprint(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {eprintln_escaped, println_escaped};

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| unsafe_on_a_terminal(c, keep_lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !unsafe_on_a_terminal(c, keep_lines) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1), bidi controls and the Unicode line and
/// paragraph separators; line feeds and tabs only when not `keep_lines`.
fn unsafe_on_a_terminal(c: char, keep_lines: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_lines,
        '\u{061c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => true,
        '\u{2028}' | '\u{2029}' => true,
        c => c.is_control(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_visibly_and_text_keeps_its_lines() {
        let forged = "ok\x1b[2K\rdone\u{9b}\u{202e}txt.rs\u{2066}\u{2028}\x7f";
        let escaped = r"ok\x1b[2K\rdone\u{9b}\u{202e}txt.rs\u{2066}\u{2028}\x7f";
        assert_eq!(line(forged), escaped);
        assert_eq!(text(forged), escaped);
        assert_eq!(line("a\nb\tc"), r"a\nb\tc");
        assert_eq!(text("a\nb\tc\n"), "a\nb\tc\n");
        // Printable text, any script, is left alone and not copied.
        assert!(matches!(text("Σ 𝕏 é 中 `mut` \\x1b"), Cow::Borrowed(_)));
    }
}
