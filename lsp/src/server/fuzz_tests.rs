//! Property tests of what the server reads from a client: the framing
//! layer (headers and bodies), the JSON-RPC admission check, the
//! `executeCommand` arguments, `didChange` positions and the paths a
//! client names. The seeds are the messages a real session sends (the
//! capabilities Helix offers, recorded under `tests/editors/capabilities/`).
//!
//! Its properties: `a_damaged_stream_is_deframed_within_bounds`,
//! `header_spelling_does_not_change_the_bodies`,
//! `an_edited_message_is_admitted_or_refused_with_a_code`,
//! `a_reordered_message_is_admitted`,
//! `edited_command_arguments_parse_or_are_refused_naming_the_command`,
//! `any_change_applies_whole_or_not_at_all`,
//! `any_position_is_a_char_boundary_of_the_text`,
//! `a_named_file_is_inside_the_root_or_refused`; the deframer's own are in
//! `framing.rs` (`frames_survive_any_split`,
//! `garbage_before_a_frame_is_skipped`, `memory_stays_bounded`).

use proptest::prelude::*;
use ropey::Rope;
use serde_json::{Value, json};
use tower_lsp_server::ls_types::{Position, Range, TextDocumentContentChangeEvent, Uri};
use trellis_core::fuzz;

use super::document::Document;
use super::encoding::{PositionEncoding, position_to_byte};
use super::framing::{Deframer, Event, INVALID_REQUEST, PARSE_ERROR, check_message, frame};
use super::paths::WorkspacePaths;
use super::protocol::{Commands, ServerCommand};

/// One session's messages, in order.
fn session() -> Vec<Value> {
    let capabilities: Value = serde_json::from_str(include_str!(
        "../../../tests/editors/capabilities/helix.json"
    ))
    .unwrap();
    let uri = "file:///w/src/lib.rs";
    vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": capabilities}),
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "rust", "version": 0,
            "text": "pub fn add(x: i32) -> i32 {\n    let y = x;\n    y += 1;\n    y\n}\n"}}}),
        json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": 1},
            "contentChanges": [{"range": {"start": {"line": 1, "character": 8},
                "end": {"line": 1, "character": 9}}, "text": "mut y"}]}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "textDocument/codeAction", "params": {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 11}},
            "context": {"diagnostics": [{"range": {"start": {"line": 2, "character": 4},
                "end": {"line": 2, "character": 11}}, "message": "cannot assign twice",
                "data": {"cluster": "c-1a2b3c4d"}}]}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand", "params": {
            "command": Commands::START, "arguments": [{"cluster": "c-1a2b3c4d"}]}}),
        json!({"jsonrpc": "2.0", "id": 7, "result": {"applied": true}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
        json!({"jsonrpc": "2.0", "method": "exit"}),
    ]
}

fn bodies(events: &[Event]) -> Vec<&[u8]> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Body(body) => Some(body.as_slice()),
            Event::Refused { .. } => None,
        })
        .collect()
}

fn deframe(stream: &[u8], chunk: usize) -> Vec<Event> {
    let budget = fuzz::budget(stream.len());
    fuzz::bounded("Deframer::push", budget, || {
        let mut deframer = Deframer::new();
        stream
            .chunks(chunk.max(1))
            .flat_map(|part| deframer.push(part))
            .collect()
    })
}

/// How a header block may be written without changing what it says.
#[derive(Clone, Debug)]
struct HeaderStyle {
    name_case: u8,
    spaces: (usize, usize),
    extra_before: bool,
    extra_after: bool,
}

fn header_style() -> impl Strategy<Value = HeaderStyle> {
    (
        any::<u8>(),
        (0..3usize, 0..3usize),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(name_case, spaces, extra_before, extra_after)| HeaderStyle {
                name_case,
                spaces,
                extra_before,
                extra_after,
            },
        )
}

fn framed_as(body: &[u8], style: &HeaderStyle) -> Vec<u8> {
    let name: String = "Content-Length"
        .chars()
        .enumerate()
        .map(|(i, c)| match (style.name_case >> (i % 8)) & 1 {
            1 => c.to_ascii_uppercase(),
            _ => c.to_ascii_lowercase(),
        })
        .collect();
    let extra = "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n";
    let mut out = String::new();
    if style.extra_before {
        out.push_str(extra);
    }
    let (before, after) = (" ".repeat(style.spaces.0), "\t".repeat(style.spaces.1));
    out.push_str(&format!("{name}:{before}{}{after}\r\n", body.len()));
    if style.extra_after {
        out.push_str(extra);
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn stream_of(messages: &[Value]) -> Vec<u8> {
    messages
        .iter()
        .flat_map(|message| frame(message.to_string().as_bytes()))
        .collect()
}

fn document() -> Document {
    let uri: Uri = "file:///w/src/lib.rs".parse().unwrap();
    Document::new(uri, 0, "fn x() {}\naé𝕏中b\r\nlast\n")
}

fn position() -> impl Strategy<Value = Position> {
    let coordinate = prop_oneof![0..8u32, Just(u32::MAX), any::<u32>()];
    (coordinate.clone(), coordinate).prop_map(|(line, character)| Position::new(line, character))
}

fn change() -> impl Strategy<Value = TextDocumentContentChangeEvent> {
    (prop::option::of((position(), position())), ".{0,12}").prop_map(|(range, text)| {
        TextDocumentContentChangeEvent {
            range: range.map(|(start, end)| Range::new(start, end)),
            range_length: None,
            text,
        }
    })
}

fn encoding() -> impl Strategy<Value = PositionEncoding> {
    prop::sample::select(vec![PositionEncoding::Utf8, PositionEncoding::Utf16])
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// Any damage to a session's byte stream: events within bounds, every
    /// refusal carrying a JSON-RPC code and a reason. Reads of at least 64
    /// bytes: an incomplete header is re-scanned on every read (up to
    /// 8 KiB), so byte-at-a-time delivery of 256 KiB of header-like text
    /// costs seconds in a debug build (a known, bounded cost per byte).
    #[test]
    fn a_damaged_stream_is_deframed_within_bounds(
        edits in fuzz::byte_edits(),
        chunk in 64..4096usize,
    ) {
        let stream = fuzz::apply_bytes(&stream_of(&session()), &edits);
        let events = deframe(&stream, chunk);
        for event in &events {
            if let Event::Refused { code, message } = event {
                prop_assert!([PARSE_ERROR, INVALID_REQUEST].contains(code));
                prop_assert!(!message.is_empty());
            }
        }
        let delivered: usize = bodies(&events).iter().map(|body| body.len()).sum();
        prop_assert!(delivered <= stream.len());
    }

    /// Header names in any case, spaces around the length, other headers
    /// before or after: the same bodies.
    #[test]
    fn header_spelling_does_not_change_the_bodies(
        styles in prop::collection::vec(header_style(), 9),
        chunk in 1..512usize,
    ) {
        let messages = session();
        let bodies_sent: Vec<Vec<u8>> = messages.iter().map(|m| m.to_string().into_bytes()).collect();
        let stream: Vec<u8> = bodies_sent
            .iter()
            .zip(&styles)
            .flat_map(|(body, style)| framed_as(body, style))
            .collect();
        let events = deframe(&stream, chunk);
        prop_assert_eq!(events, bodies_sent.into_iter().map(Event::Body).collect::<Vec<_>>());
    }

    /// A message with a field dropped, repeated, wrapped or of the wrong
    /// type is admitted or refused with a JSON-RPC code.
    #[test]
    fn an_edited_message_is_admitted_or_refused_with_a_code(
        message in prop::sample::select(session()),
        edit in fuzz::json_edit(),
    ) {
        let body = fuzz::apply_json(&message, &edit);
        let verdict = fuzz::bounded("check_message", fuzz::budget(body.len()), || {
            check_message(body.as_bytes())
        });
        if let Err(event) = verdict {
            let Event::Refused { code, .. } = event else {
                return Err(TestCaseError::fail("a refusal that is a body"));
            };
            prop_assert!([PARSE_ERROR, INVALID_REQUEST].contains(&code));
        }
    }

    /// Reordered fields and other whitespace are admitted as before.
    #[test]
    fn a_reordered_message_is_admitted(message in prop::sample::select(session()), order in any::<u64>()) {
        let body = fuzz::rewrite_json(&message, order);
        prop_assert_eq!(check_message(body.as_bytes()), Ok(()));
    }

    /// `executeCommand` arguments of any shape: a command or a reason naming it.
    #[test]
    fn edited_command_arguments_parse_or_are_refused_naming_the_command(
        command in prop::sample::select(Commands::ALL.to_vec()),
        edit in fuzz::json_edit(),
    ) {
        let arguments = json!([{"cluster": "c-1a2b3c4d", "repair_id": "r-1"}]);
        let Ok(Value::Array(arguments)) = serde_json::from_str(&fuzz::apply_json(&arguments, &edit)) else {
            return Ok(());
        };
        let parsed = fuzz::bounded("ServerCommand::parse", fuzz::budget(1 << 20), || {
            ServerCommand::parse(command, &arguments)
        });
        if let Err(reason) = parsed {
            prop_assert!(reason.starts_with(command), "{reason}");
        }
    }

    /// Positions anywhere (past the end, inside a character, `u32::MAX`):
    /// a char boundary inside the text.
    #[test]
    fn any_position_is_a_char_boundary_of_the_text(position in position(), encoding in encoding()) {
        let rope = document().text;
        let byte = position_to_byte(&rope, position, encoding);
        prop_assert!(byte <= rope.len_bytes());
        prop_assert!(rope.to_string().is_char_boundary(byte));
    }

    /// Any `didChange`: applied whole with the new version, or refused with
    /// the document untouched.
    #[test]
    fn any_change_applies_whole_or_not_at_all(
        changes in prop::collection::vec(change(), 0..6),
        encoding in encoding(),
    ) {
        let mut document = document();
        let before: Rope = document.text.clone();
        match document.apply_changes(1, &changes, encoding) {
            Ok(()) => prop_assert_eq!(document.version, 1),
            Err(_) => {
                prop_assert_eq!(document.version, 0);
                prop_assert_eq!(document.text, before);
            }
        }
    }

    /// Whatever a client names as a file, a path it accepts stays inside the root.
    #[test]
    fn a_named_file_is_inside_the_root_or_refused(given in prop_oneof![
        any::<String>(),
        "(file:///w/|/w/|)([a-z.%2F]{0,4}/){0,4}[a-z.]{0,4}",
    ]) {
        let paths = WorkspacePaths::new("/w".into());
        if let Some(rel) = paths.rel_of_any(&given) {
            prop_assert!(!rel.is_empty() && !rel.starts_with('/'));
            prop_assert!(rel.split('/').all(|part| !part.is_empty() && part != ".." && part != "."), "{rel}");
        }
    }
}

/// Found by `a_damaged_stream_is_deframed_within_bounds` with the time
/// bound: header text without a line end, a `Content-Length:` every few
/// bytes, made every push rescan and shift the whole buffer once per
/// candidate header (quadratic: seconds per 64 KiB chunk).
#[test]
fn endless_content_length_candidates_are_skipped_in_linear_time() {
    let stream = b"Content-Length: 1".repeat((1 << 20) / 17);
    let events = deframe(&stream, 64 * 1024);
    assert!(bodies(&events).is_empty());
    assert!(!events.is_empty());
}
