//! Property tests of the governed tools' argument parser against what a
//! model may send: arbitrary bytes, structural edits of real calls (wrong
//! types, missing and duplicated fields, huge numbers, deep nesting), and
//! rewrites that keep the meaning (reordered fields, other white space).
//!
//! Its properties: `damaged_arguments_are_a_tool_error_naming_the_tool`,
//! `structurally_edited_arguments_parse_or_are_refused`,
//! `reordered_arguments_are_the_same_call`,
//! `any_name_and_bytes_are_a_request_or_a_tool_error`; the reply parser's are
//! in `transport.rs` (`the_parser_never_panics_on_arbitrary_json`,
//! `the_parser_never_panics_on_arbitrary_bytes`).

use proptest::prelude::*;
use trellis_core::fuzz;

use super::{TOOL_NAMES, ToolError, ToolRequest, parse_call};

/// One well-formed call of every tool, as a model sends it.
fn recorded_calls() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "read_file",
            r#"{"path":"src/lib.rs","start_line":3,"end_line":9}"#,
        ),
        ("list_files", r#"{"path":"src"}"#),
        ("search", r#"{"pattern":"fn add","path":"src"}"#),
        (
            "replace",
            r#"{"path":"src/lib.rs","old":"a - b","new":"a + b"}"#,
        ),
        (
            "write_file",
            r#"{"path":"src/new.rs","content":"pub fn f() {}\n"}"#,
        ),
        ("run_build", r#"{}"#),
        ("run_tests", r#"{"filter":"adds"}"#),
        ("finish", r#"{"summary":"fixed the operator"}"#),
        ("context_recall", r#"{"path":"src/lib.rs","turn":2}"#),
    ]
}

fn seed() -> impl Strategy<Value = (&'static str, &'static str)> {
    prop::sample::select(recorded_calls())
}

fn parse_bounded(name: &str, arguments: &str) -> Result<ToolRequest, ToolError> {
    fuzz::bounded("parse_call", fuzz::budget(arguments.len()), || {
        parse_call(name, arguments)
    })
}

#[test]
fn every_recorded_call_parses() {
    for (name, arguments) in recorded_calls() {
        parse_call(name, arguments).unwrap_or_else(|e| panic!("{name}: {}", e.0));
    }
    assert_eq!(
        recorded_calls().len(),
        TOOL_NAMES.len(),
        "one recorded call per governed tool"
    );
}

proptest! {
    #![proptest_config(fuzz::config(192))]

    /// Damaged arguments parse or are a tool error naming the tool.
    #[test]
    fn damaged_arguments_are_a_tool_error_naming_the_tool(
        (name, arguments) in seed(),
        edits in fuzz::byte_edits(),
    ) {
        let damaged = fuzz::apply_bytes(arguments.as_bytes(), &edits);
        let damaged = String::from_utf8_lossy(&damaged);
        if let Err(ToolError(message)) = parse_bounded(name, &damaged) {
            prop_assert!(message.contains(name), "{message}");
        }
    }

    /// Structural edits parse or are refused; never a panic.
    #[test]
    fn structurally_edited_arguments_parse_or_are_refused(
        (name, arguments) in seed(),
        edit in fuzz::json_edit(),
    ) {
        let value: serde_json::Value = serde_json::from_str(arguments).unwrap();
        let edited = fuzz::apply_json(&value, &edit);
        if let Err(ToolError(message)) = parse_bounded(name, &edited) {
            prop_assert!(!message.is_empty());
        }
    }

    /// Reordered fields and other white space are the same call.
    #[test]
    fn reordered_arguments_are_the_same_call((name, arguments) in seed(), order in any::<u64>()) {
        let value: serde_json::Value = serde_json::from_str(arguments).unwrap();
        let rewritten = fuzz::rewrite_json(&value, order);
        prop_assert_eq!(
            parse_bounded(name, &rewritten).unwrap(),
            parse_call(name, arguments).unwrap()
        );
    }

    /// Any tool name with any arguments: a request or a tool error.
    #[test]
    fn any_name_and_bytes_are_a_request_or_a_tool_error(
        name in "[a-z_]{0,12}",
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let arguments = String::from_utf8_lossy(&bytes);
        let _ = parse_bounded(&name, &arguments);
    }
}
