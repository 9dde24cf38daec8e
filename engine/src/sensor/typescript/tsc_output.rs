//! What `tsc --noEmit --pretty false` prints, read as messages.
//!
//! Each message starts on a line of its own, with or without a location:
//!
//! ```text
//! src/report.ts(3,52): error TS2304: Cannot find name 'mean'.
//! error TS5058: The specified path does not exist: 'nowhere'.
//! ```
//!
//! and an elaborated message continues on the lines below it, indented
//! ("The types of 'a.b' are incompatible between these types."). The path
//! is as tsc printed it (relative to its working directory, or absolute);
//! the column counts UTF-16 units. This module is a pure function of the
//! text: it never resolves a path or reads a file, and reads any input
//! without panicking (`tsc_fuzz.rs`).

/// How serious tsc says a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Error,
    Warning,
    Suggestion,
    Message,
}

impl Category {
    const ALL: [(&'static str, Category); 4] = [
        ("error", Category::Error),
        ("warning", Category::Warning),
        ("suggestion", Category::Suggestion),
        ("message", Category::Message),
    ];

    /// The word tsc prints for it.
    pub fn word(self) -> &'static str {
        Category::ALL
            .iter()
            .find(|(_, category)| *category == self)
            .map_or("error", |(word, _)| word)
    }
}

/// Where a message points: the file as printed, 1-based line and UTF-16
/// column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

/// One message tsc printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TscMessage {
    pub location: Option<Location>,
    pub category: Category,
    /// The number after `TS`.
    pub code: u32,
    /// The first line of the message.
    pub message: String,
    /// The elaboration below it, one entry per line, indentation removed.
    pub details: Vec<String>,
}

/// Everything read from one run's output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TscOutput {
    pub messages: Vec<TscMessage>,
    /// Non-empty lines that belong to no message (a crash's stack trace, a
    /// banner): counted, so the stage can say its output was not all read.
    pub unread_lines: usize,
}

/// Reads tsc's output. CR LF line ends read as LF.
pub fn parse(text: &str) -> TscOutput {
    let mut output = TscOutput::default();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(message) = header(line) {
            output.messages.push(message);
        } else if line.starts_with([' ', '\t'])
            && !line.trim().is_empty()
            && let Some(last) = output.messages.last_mut()
        {
            last.details.push(line.trim().to_owned());
        } else if !line.trim().is_empty() {
            output.unread_lines += 1;
        }
    }
    output
}

/// A message's first line: `<file>(<line>,<col>): <category> TS<code>: <text>`
/// or `<category> TS<code>: <text>`.
fn header(line: &str) -> Option<TscMessage> {
    if let Some(message) = unlocated(line) {
        return Some(message);
    }
    // The file name may hold parentheses and `): `; the location is the
    // last `(<line>,<col>): ` before a category.
    let (split, (category, rest)) = line
        .match_indices("): ")
        .filter_map(|(at, _)| Some((at, category_code(&line[at + 3..])?)))
        .next()?;
    let open = line[..split].rfind('(')?;
    let (row, column) = line[open + 1..split].split_once(',')?;
    let file = &line[..open];
    if file.is_empty() {
        return None;
    }
    let (code, message) = rest;
    Some(TscMessage {
        location: Some(Location {
            file: file.to_owned(),
            line: number(row)?,
            column: number(column)?,
        }),
        category,
        code,
        message: message.to_owned(),
        details: Vec::new(),
    })
}

fn unlocated(line: &str) -> Option<TscMessage> {
    let (category, (code, message)) = category_code(line)?;
    Some(TscMessage {
        location: None,
        category,
        code,
        message: message.to_owned(),
        details: Vec::new(),
    })
}

/// `error TS2304: Cannot find name 'x'.` → the category, code and text.
fn category_code(text: &str) -> Option<(Category, (u32, &str))> {
    let (category, rest) = Category::ALL.iter().find_map(|(word, category)| {
        Some((*category, text.strip_prefix(word)?.strip_prefix(" TS")?))
    })?;
    let (code, message) = rest.split_once(": ")?;
    Some((category, (number(code)?, message)))
}

/// A positive decimal number of at most nine digits (tsc's lines, columns
/// and codes), with nothing else around it.
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZOO: &str = include_str!("../../../tests/fixtures/recorded/typescript/zoo.tsc.stdout");

    fn at(file: &str, line: u32, column: u32) -> Option<Location> {
        Some(Location {
            file: file.into(),
            line,
            column,
        })
    }

    #[test]
    fn the_recorded_output_reads_as_what_tsc_reported() {
        let output = parse(ZOO);
        assert_eq!(output.unread_lines, 0);
        assert_eq!(output.messages.len(), 17);
        assert_eq!(
            output.messages[8],
            TscMessage {
                location: at("src/zoo.ts", 5, 1),
                category: Category::Error,
                code: 2304,
                message: "Cannot find name 'area'.".into(),
                details: vec![],
            }
        );
        let elaborated = &output.messages[14];
        assert_eq!(elaborated.code, 2322);
        assert_eq!(
            elaborated.details,
            [
                "The types of 'deep.deeper.deepest' are incompatible between these types.",
                "Type 'number' is not assignable to type 'string'.",
            ]
        );
        assert_eq!(
            output.messages[15].code, 6133,
            "the next message starts anew"
        );
    }

    #[test]
    fn messages_without_a_location_and_odd_file_names_are_read() {
        let output = parse(
            "error TS5058: The specified path does not exist: 'nowhere'.\r\n\
             src/a (copy).ts(2,3): warning TS6385: 'x' is deprecated.\n\
             weird): error TS1.ts(1,1): error TS1005: ';' expected.\n",
        );
        assert_eq!(output.unread_lines, 0);
        assert_eq!(output.messages[0].location, None);
        assert_eq!(output.messages[0].code, 5058);
        assert_eq!(output.messages[1].location, at("src/a (copy).ts", 2, 3));
        assert_eq!(output.messages[1].category, Category::Warning);
        assert_eq!(
            output.messages[2].location,
            at("weird): error TS1.ts", 1, 1)
        );
        assert_eq!(output.messages[2].message, "';' expected.");
    }

    #[test]
    fn lines_of_no_message_are_counted_not_read() {
        let output = parse(
            "  an indented line before any message\n\
             src/a.ts(0,1): error TS1: zero is no line\n\
             src/a.ts(1,x): error TS1: no column\n\
             src/a.ts(1,1): fatal TS1: no category\n\
             src/a.ts(99999999999,1): error TS1: too far\n\
             \n\
             Found 3 errors.\n",
        );
        assert!(output.messages.is_empty(), "{:?}", output.messages);
        assert_eq!(output.unread_lines, 6);
    }
}
