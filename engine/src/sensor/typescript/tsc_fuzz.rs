//! Property tests of everything that reads tsc's output: the message parser
//! (`tsc_output::parse`) and the stage interpretation over it (spans in
//! the workspace, the status), fed arbitrary text and mutations of the
//! output recorded from a real `tsc --noEmit --pretty false` run on
//! `engine/tests/fixtures/recorded/typescript/zoo`.
//!
//! Its properties: `any_text_is_read_as_messages`,
//! `damaged_tsc_output_is_read_within_bounds`,
//! `damaged_tsc_output_interprets_to_spans_in_the_workspace`,
//! `crlf_line_ends_are_the_same_messages`; tsserver's and TAP's are beside
//! their parsers (`damaged_tsserver_output_is_read_within_bounds`,
//! `a_structurally_edited_answer_is_read_or_skipped`,
//! `any_bytes_are_read_as_frames`; `a_damaged_report_is_read_within_bounds`,
//! `any_text_is_read_as_a_report`).

use proptest::prelude::*;
use trellis_core::fuzz;

use super::tests::{output, zoo};
use super::*;
use crate::sensor::typescript::tsc_output::{TscOutput, parse};

const RECORDED: &str = include_str!("../../../tests/fixtures/recorded/typescript/zoo.tsc.stdout");

fn parse_bounded(text: &str) -> TscOutput {
    fuzz::bounded("tsc_output::parse", fuzz::budget(text.len()), || {
        parse(text)
    })
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// Arbitrary text: never a panic, and never more messages than lines.
    #[test]
    fn any_text_is_read_as_messages(text in any::<String>()) {
        let output = parse_bounded(&text);
        prop_assert!(output.messages.len() + output.unread_lines <= text.lines().count());
    }

    /// The recorded output with lines truncated, dropped, repeated and
    /// moved, NULs, invalid UTF-8, huge numbers spliced in: read within
    /// bounds, every position a positive number.
    #[test]
    fn damaged_tsc_output_is_read_within_bounds(bytes in fuzz::mutated_lines(RECORDED)) {
        let text = String::from_utf8_lossy(&bytes);
        let output = parse_bounded(&text);
        prop_assert!(output.messages.len() + output.unread_lines <= text.lines().count());
        for message in &output.messages {
            prop_assert!(message.code > 0);
            prop_assert!(message.location.as_ref().is_none_or(|at| at.line > 0 && at.column > 0));
        }
    }

    /// Damaged output interpreted against the real sources: every span in
    /// a workspace file and on char boundaries, and a status that follows
    /// from the errors read.
    #[test]
    fn damaged_tsc_output_interprets_to_spans_in_the_workspace(
        bytes in fuzz::mutated_lines(RECORDED),
        code in prop::sample::select(vec![0, 1, 2]),
    ) {
        let root = zoo();
        let mut paths = WorkspacePaths::new(&root, &root.join("target")).unwrap();
        let output = output(code, &bytes);
        let observation = fuzz::bounded("tsc::interpret", fuzz::budget(bytes.len()), || {
            interpret(&output, &mut paths)
        });
        for span in observation.diagnostics.iter().filter_map(|d| d.primary.as_ref()) {
            let text = std::fs::read_to_string(root.join(&span.path)).unwrap();
            prop_assert!(!span.path.starts_with('/') && !span.path.contains(".."));
            prop_assert!(span.byte_start <= span.byte_end);
            prop_assert!(text.is_char_boundary(span.byte_start as usize));
            prop_assert!(text.is_char_boundary(span.byte_end as usize));
        }
        let errors = observation.diagnostics.iter().any(|d| d.level == Level::Error);
        match observation.status {
            StageStatus::Passed => prop_assert!(!errors && code == 0),
            StageStatus::Failed => prop_assert!(errors),
            StageStatus::Unavailable { ref reason } => prop_assert!(!reason.is_empty()),
        }
    }
}

/// CR LF line ends read as LF.
#[test]
fn crlf_line_ends_are_the_same_messages() {
    assert_eq!(parse(&RECORDED.replace('\n', "\r\n")), parse(RECORDED));
}
