//! The stdio framing layer in front of tower-lsp-server.
//!
//! tower-lsp-server ends the whole session at the first frame it cannot
//! decode (its `FramedRead` stops after a decoder error), and buffers a
//! body of whatever `Content-Length` claims. So the server never hands it
//! raw stdin: [`pump_input`] reads stdin through the pure [`Deframer`], which
//! caps every message at [`MAX_MESSAGE_BYTES`] and resynchronises on the next
//! `Content-Length:` after a malformed header; [`check_message`] then admits
//! only bodies that tower-lsp-server decodes (UTF-8 JSON-RPC request,
//! notification or response). Admitted messages are re-framed canonically
//! into an in-memory pipe tower-lsp-server reads; everything else is answered
//! here with a JSON-RPC error (`id: null`).
//!
//! Those answers and tower-lsp-server's own output share stdout, so
//! [`pump_output`] is its only writer: it splits the server's output back
//! into whole frames and writes each frame, or one of our answers, with a
//! single `write_all` and flush, so two frames never interleave.
//!
//! This module owns framing only; it never interprets a method.

use serde::Deserialize as _;
use serde_json::{Value, json};
use std::io::Read as _;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{self, Receiver, UnboundedReceiver, UnboundedSender};
use tower_lsp_server::jsonrpc::{Request, Response};

/// The largest message body accepted (64 MiB); a larger one is refused and
/// its body discarded as it arrives, never buffered.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;

/// The longest header block looked at before it is declared malformed.
const MAX_HEADER_BYTES: usize = 8 << 10;

const CONTENT_LENGTH: &[u8] = b"content-length:";

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the body is JSON but not a request, notification or response.
pub const INVALID_REQUEST: i64 = -32600;

/// What a stretch of input turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A complete body whose header was well-formed.
    Body(Vec<u8>),
    /// Input that cannot be delivered, with the error to answer.
    Refused { code: i64, message: String },
}

/// Splits a byte stream into message bodies (pure: no I/O).
///
/// Memory is bounded by one header block plus one body of at most its
/// limit: an oversized body is counted off, not stored.
#[derive(Debug)]
pub struct Deframer {
    /// The largest body delivered.
    limit: u64,
    buffer: Vec<u8>,
    /// Bytes of a refused oversized body still to be thrown away.
    discarding: u64,
    /// Inside a run of malformed bytes: it was answered once already.
    in_garbage: bool,
}

/// One step of parsing the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
enum Parse {
    /// Need more bytes.
    Incomplete,
    /// `header` bytes of header, then a body of `body` bytes (which may
    /// not have fully arrived yet).
    Header { header: usize, body: u64 },
    /// Not a header: drop `skip` bytes (to the next possible header).
    Garbage { skip: usize, reason: String },
}

impl Deframer {
    /// For the client's input: bodies up to [`MAX_MESSAGE_BYTES`].
    pub fn new() -> Deframer {
        Deframer {
            limit: MAX_MESSAGE_BYTES,
            buffer: Vec::new(),
            discarding: 0,
            in_garbage: false,
        }
    }

    /// For tower-lsp-server's own output, which is never dropped for its size.
    fn trusting() -> Deframer {
        Deframer {
            limit: usize::MAX as u64,
            ..Deframer::new()
        }
    }

    /// Feeds `bytes`, returning every event they complete.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            if self.discarding > 0 {
                let take = usize::try_from(self.discarding)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                self.discarding -= take as u64;
                bytes = &bytes[take..];
                if self.discarding > 0 {
                    return events;
                }
            }
            self.buffer.extend_from_slice(bytes);
            bytes = &[];
            match parse_header(&self.buffer) {
                Parse::Incomplete => return events,
                Parse::Garbage { skip, reason } => {
                    self.buffer.drain(..skip);
                    if !self.in_garbage {
                        self.in_garbage = true;
                        events.push(Event::Refused {
                            code: PARSE_ERROR,
                            message: format!("malformed message header ({reason}); skipped to the next `Content-Length`"),
                        });
                    }
                }
                Parse::Header { header, body } if body > self.limit => {
                    self.in_garbage = false;
                    events.push(Event::Refused {
                        code: INVALID_REQUEST,
                        message: format!(
                            "message of {body} bytes refused: the limit is {} MiB",
                            self.limit >> 20
                        ),
                    });
                    // What follows the header is the start of the refused body.
                    let rest = self.buffer.split_off(header);
                    let arrived = rest.len() as u64;
                    self.buffer = match usize::try_from(body) {
                        Ok(body) if arrived >= body as u64 => rest[body..].to_vec(),
                        _ => {
                            self.discarding = body - arrived;
                            Vec::new()
                        }
                    };
                }
                Parse::Header { header, body } => {
                    let body = usize::try_from(body).expect("within the limit");
                    if self.buffer.len() < header + body {
                        return events;
                    }
                    self.in_garbage = false;
                    let rest = self.buffer.split_off(header + body);
                    let mut frame = std::mem::replace(&mut self.buffer, rest);
                    frame.drain(..header);
                    events.push(Event::Body(frame));
                }
            }
        }
    }
}

/// Parses the header block at the front of `buf`.
///
/// Each line must be `Name: value` (a token name, printable value) ending in
/// CRLF; an empty line ends the block. `Content-Length` (any case) must be
/// present exactly once, as decimal digits; other headers are ignored. A
/// byte that cannot belong to a header makes the block garbage at once, so
/// random input is dropped without waiting for a line end.
fn parse_header(buf: &[u8]) -> Parse {
    let garbage = |reason: &str| Parse::Garbage {
        skip: resync_point(buf),
        reason: reason.to_owned(),
    };
    let mut length: Option<u64> = None;
    let mut at = 0;
    loop {
        let line_end = buf[at..].windows(2).position(|w| w == b"\r\n");
        let line = match line_end {
            Some(end) => &buf[at..at + end],
            // The CR of a CRLF still on its way is not part of the line.
            None => buf[at..].strip_suffix(b"\r").unwrap_or(&buf[at..]),
        };
        if let Err(reason) = check_line_prefix(line, line_end.is_some()) {
            return garbage(reason);
        }
        let Some(end) = line_end else {
            return if buf.len() > MAX_HEADER_BYTES {
                garbage("header longer than 8 KiB")
            } else {
                Parse::Incomplete
            };
        };
        let next = at + end + 2;
        if line.is_empty() {
            return match length {
                Some(body) => Parse::Header { header: next, body },
                None => garbage("no `Content-Length` header"),
            };
        }
        if next > MAX_HEADER_BYTES {
            return garbage("header longer than 8 KiB");
        }
        let colon = line.iter().position(|&b| b == b':').expect("checked");
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(&CONTENT_LENGTH[..CONTENT_LENGTH.len() - 1]) {
            let parsed = (!value.is_empty() && value.iter().all(u8::is_ascii_digit))
                .then(|| std::str::from_utf8(value).ok()?.parse::<u64>().ok())
                .flatten();
            match (parsed, length) {
                (None, _) => return garbage("`Content-Length` is not a number"),
                (Some(a), Some(b)) if a != b => {
                    return garbage("two different `Content-Length` headers");
                }
                (Some(n), _) => length = Some(n),
            }
        }
        at = next;
    }
}

/// Whether `line` (complete, or the start of one) can be a header line.
fn check_line_prefix(line: &[u8], complete: bool) -> Result<(), &'static str> {
    let colon = line.iter().position(|&b| b == b':');
    let name = &line[..colon.unwrap_or(line.len())];
    if !name.iter().all(|&b| is_token(b)) {
        return Err("not a header line");
    }
    if colon == Some(0) {
        return Err("a header line without a name");
    }
    if let Some(colon) = colon
        && !line[colon + 1..]
            .iter()
            .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
    {
        return Err("a header value with a control byte");
    }
    if complete && colon.is_none() && !line.is_empty() {
        return Err("a header line without `:`");
    }
    Ok(())
}

/// RFC 9110 token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Where a header can start again: the next `Content-Length:` (any case)
/// after the first byte, or a tail that may be the start of one; always at
/// least one byte, so parsing progresses.
///
/// A header block ends (empty line) within [`MAX_HEADER_BYTES`] of its start,
/// so a candidate farther than that before the next `\r\n\r\n` (or the end
/// of what arrived) is garbage as well and is skipped unparsed: parsing each
/// one would make a run of `Content-Length:` without line ends quadratic.
fn resync_point(buf: &[u8]) -> usize {
    let block_end = buf
        .get(1..)
        .and_then(|rest| rest.windows(4).position(|w| w == b"\r\n\r\n"))
        .map_or(buf.len(), |at| at + 1 + 4);
    let earliest = block_end.saturating_sub(MAX_HEADER_BYTES + 4).max(1);
    (earliest..buf.len())
        .find(|&i| {
            let tail = &buf[i..];
            let n = tail.len().min(CONTENT_LENGTH.len());
            tail[..n].eq_ignore_ascii_case(&CONTENT_LENGTH[..n])
        })
        .unwrap_or(buf.len())
        .max(1)
}

/// Admits a body tower-lsp-server decodes: UTF-8 JSON that is a JSON-RPC
/// request, notification or response. Anything else is the error to answer.
pub fn check_message(body: &[u8]) -> Result<(), Event> {
    let refuse = |code, message: String| Event::Refused { code, message };
    let text = std::str::from_utf8(body)
        .map_err(|e| refuse(PARSE_ERROR, format!("the message is not UTF-8: {e}")))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| refuse(PARSE_ERROR, format!("the message is not JSON: {e}")))?;
    // The same types tower-lsp-server decodes into, read in place.
    let is_message = value.is_object()
        && (Request::deserialize(&value).is_ok() || Response::deserialize(&value).is_ok());
    if !is_message {
        return Err(refuse(
            INVALID_REQUEST,
            "the message is JSON but not a JSON-RPC 2.0 request, notification or response (batches are not supported)".into(),
        ));
    }
    Ok(())
}

/// `Content-Length: N\r\n\r\n` + `body`: the one framing written anywhere.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// The error response to a refused input: `id` is null, since the id of
/// something that could not be parsed is unknown (JSON-RPC 2.0 §5).
pub fn error_response(code: i64, message: &str) -> Vec<u8> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    frame(body.to_string().as_bytes())
}

/// Stdin, read on a thread of its own and handed over in chunks.
///
/// Not tokio's stdin: its reads run on the runtime's blocking pool, and
/// the runtime waits for them at shutdown, so a client that keeps stdin
/// open after `exit` would keep the server alive. This thread is detached:
/// it ends with the process, or when the receiver is gone.
pub fn stdin_chunks() -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let read = match stdin.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!("reading the client's input failed: {e}");
                    break;
                }
            };
            if tx.blocking_send(chunk[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads the client's input until it ends: admitted messages go to the
/// server (re-framed), refusals become error responses for [`pump_output`].
/// Dropping `server` at the end is the server's end of input.
pub async fn pump_input(
    mut input: Receiver<Vec<u8>>,
    mut server: impl AsyncWrite + Unpin,
    answers: UnboundedSender<Vec<u8>>,
) {
    let mut deframer = Deframer::new();
    while let Some(chunk) = input.recv().await {
        for event in deframer.push(&chunk) {
            let refused = match event {
                Event::Body(body) => match check_message(&body) {
                    Ok(()) => {
                        if server.write_all(&frame(&body)).await.is_err() {
                            // The server stopped reading (after `exit`).
                            return;
                        }
                        continue;
                    }
                    Err(refused) => refused,
                },
                refused @ Event::Refused { .. } => refused,
            };
            if let Event::Refused { code, message } = refused {
                tracing::warn!("refused client input: {message}");
                let _ = answers.send(error_response(code, &message));
            }
        }
    }
    let _ = server.shutdown().await;
}

/// The only writer of stdout: the server's frames and our error answers,
/// each written whole. Ends when the server's output ends, after writing
/// what is left.
pub async fn pump_output(
    mut server: impl AsyncRead + Unpin,
    mut answers: UnboundedReceiver<Vec<u8>>,
    mut output: impl AsyncWrite + Unpin,
) {
    let mut deframer = Deframer::trusting();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut answers_open = true;
    loop {
        tokio::select! {
            biased;
            read = server.read(&mut chunk) => {
                let read = match read {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                for event in deframer.push(&chunk[..read]) {
                    match event {
                        Event::Body(body) => {
                            if write_whole(&mut output, &frame(&body)).await.is_err() {
                                return;
                            }
                        }
                        Event::Refused { message, .. } => {
                            tracing::error!("the server wrote a malformed frame: {message}");
                        }
                    }
                }
            }
            answer = answers.recv(), if answers_open => match answer {
                Some(answer) => {
                    if write_whole(&mut output, &answer).await.is_err() {
                        return;
                    }
                }
                None => answers_open = false,
            },
        }
    }
    while let Ok(answer) = answers.try_recv() {
        if write_whole(&mut output, &answer).await.is_err() {
            return;
        }
    }
}

async fn write_whole(output: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    output.write_all(bytes).await?;
    output.flush().await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bodies(events: &[Event]) -> Vec<&[u8]> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Body(b) => Some(b.as_slice()),
                Event::Refused { .. } => None,
            })
            .collect()
    }

    fn refusals(events: &[Event]) -> Vec<i64> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Refused { code, .. } => Some(*code),
                Event::Body(_) => None,
            })
            .collect()
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

    #[test]
    fn a_frame_with_any_header_case_and_extra_headers_is_one_body() {
        let input = format!(
            "content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  {}\r\n\r\n{PING}",
            PING.len()
        );
        let events = Deframer::new().push(input.as_bytes());
        assert_eq!(events, vec![Event::Body(PING.as_bytes().to_vec())]);
    }

    #[test]
    fn a_non_numeric_length_is_skipped_up_to_the_next_header() {
        let input = format!(
            "Content-Length: abc\r\n\r\n{PING}Content-Length: {}\r\n\r\n{PING}",
            PING.len()
        );
        let events = Deframer::new().push(input.as_bytes());
        assert_eq!(refusals(&events), vec![PARSE_ERROR]);
        assert_eq!(bodies(&events), vec![PING.as_bytes()]);
    }

    #[test]
    fn random_bytes_are_refused_once_and_the_next_frame_still_parses() {
        let mut input = vec![0x00, 0xff, 0x13, b'{', b'\n', 0x80, 0x7f];
        input.extend_from_slice(&frame(PING.as_bytes()));
        let events = Deframer::new().push(&input);
        assert_eq!(refusals(&events), vec![PARSE_ERROR]);
        assert_eq!(bodies(&events), vec![PING.as_bytes()]);
    }

    #[test]
    fn a_missing_length_and_a_conflicting_length_are_malformed() {
        for header in [
            "Content-Type: x\r\n\r\n",
            "Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            let events = Deframer::new().push(header.as_bytes());
            assert_eq!(refusals(&events), vec![PARSE_ERROR], "{header:?}");
        }
    }

    #[test]
    fn an_endless_header_line_is_dropped_at_the_cap() {
        let mut deframer = Deframer::new();
        let events = deframer.push(&vec![b'a'; MAX_HEADER_BYTES + 10]);
        assert_eq!(refusals(&events), vec![PARSE_ERROR]);
        assert!(deframer.buffer.len() < CONTENT_LENGTH.len());
    }

    #[test]
    fn an_oversized_body_is_refused_and_counted_off_without_buffering() {
        let mut deframer = Deframer::new();
        let size = MAX_MESSAGE_BYTES + 5;
        let events = deframer.push(format!("Content-Length: {size}\r\n\r\n").as_bytes());
        assert_eq!(refusals(&events), vec![INVALID_REQUEST]);
        let chunk = vec![b'x'; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            assert!(deframer.push(&chunk[..n]).is_empty());
            assert!(
                deframer.buffer.is_empty(),
                "the discarded body was buffered"
            );
            left -= n as u64;
        }
        let events = deframer.push(&frame(PING.as_bytes()));
        assert_eq!(events, vec![Event::Body(PING.as_bytes().to_vec())]);
    }

    #[test]
    fn bodies_tower_lsp_server_cannot_decode_are_refused_with_their_code() {
        let refused = |body: &str| match check_message(body.as_bytes()) {
            Err(Event::Refused { code, .. }) => code,
            other => panic!("{body}: {other:?}"),
        };
        assert_eq!(refused("not json"), PARSE_ERROR);
        assert_eq!(refused(""), PARSE_ERROR);
        assert_eq!(refused("[]"), INVALID_REQUEST);
        assert_eq!(refused("{}"), INVALID_REQUEST);
        assert_eq!(
            refused(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert!(check_message(&[0xff, 0xfe]).is_err());
        assert_eq!(check_message(PING.as_bytes()), Ok(()));
        assert_eq!(
            check_message(br#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#),
            Ok(())
        );
        assert_eq!(
            check_message(br#"{"jsonrpc":"2.0","id":4,"result":null}"#),
            Ok(())
        );
    }

    #[test]
    fn error_responses_are_framed_null_id_errors() {
        let mut events = Deframer::new().push(&error_response(PARSE_ERROR, "bad"));
        let Some(Event::Body(body)) = events.pop() else {
            panic!("not a frame")
        };
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["id"], Value::Null);
        assert_eq!(value["error"]["code"], PARSE_ERROR);
    }

    /// An answer queued while the server is halfway through writing a
    /// frame waits for that frame's end: stdout gets two whole frames.
    #[tokio::test]
    async fn an_answer_never_lands_inside_a_server_frame() {
        let (mut server, from_server) = tokio::io::duplex(1024);
        let (stdout, mut written) = tokio::io::duplex(1 << 20);
        let (answers, answered) = mpsc::unbounded_channel();
        let output = tokio::spawn(pump_output(from_server, answered, stdout));

        let message = frame(PING.as_bytes());
        let (head, tail) = message.split_at(message.len() / 2);
        server.write_all(head).await.unwrap();
        tokio::task::yield_now().await;
        answers.send(error_response(PARSE_ERROR, "bad")).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        server.write_all(tail).await.unwrap();
        drop(server);
        output.await.unwrap();

        let mut bytes = Vec::new();
        written.read_to_end(&mut bytes).await.unwrap();
        let events = Deframer::new().push(&bytes);
        assert_eq!(events.len(), 2, "{:?}", String::from_utf8_lossy(&bytes));
        let bodies = bodies(&events);
        assert!(bodies.contains(&PING.as_bytes()), "{events:?}");
        assert!(
            bodies
                .iter()
                .all(|b| serde_json::from_slice::<Value>(b).is_ok())
        );
    }

    fn arbitrary_body() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..200)
    }

    proptest! {
        /// Well-formed frames come out whole and in order, however the
        /// stream is split into reads.
        #[test]
        fn frames_survive_any_split(
            messages in prop::collection::vec(arbitrary_body(), 1..6),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let stream: Vec<u8> = messages.iter().flat_map(|m| frame(m)).collect();
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            points.sort_unstable();
            let mut deframer = Deframer::new();
            let mut events = Vec::new();
            let mut from = 0;
            for point in points.into_iter().chain([stream.len()]) {
                events.extend(deframer.push(&stream[from..point]));
                from = point;
            }
            let expected: Vec<Event> = messages.into_iter().map(Event::Body).collect();
            prop_assert_eq!(events, expected);
        }

        /// After any garbage that holds no `Content-Length`, the next frame
        /// still arrives, and the garbage is answered at most once.
        #[test]
        fn garbage_before_a_frame_is_skipped(
            garbage in prop::collection::vec(any::<u8>(), 1..300),
            body in arbitrary_body(),
        ) {
            prop_assume!(!garbage.to_ascii_lowercase().windows(7).any(|w| w == b"content"));
            let mut input = garbage.clone();
            input.extend_from_slice(b"\r\n\r\n");
            input.extend_from_slice(&frame(&body));
            let events = Deframer::new().push(&input);
            prop_assert!(refusals(&events).len() <= 1);
            prop_assert_eq!(bodies(&events).last().copied(), Some(body.as_slice()));
        }

        /// Whatever arrives, the buffer stays within one header block plus
        /// one capped body.
        #[test]
        fn memory_stays_bounded(chunks in prop::collection::vec(arbitrary_body(), 0..20)) {
            let mut deframer = Deframer::new();
            for chunk in &chunks {
                deframer.push(chunk);
                prop_assert!(deframer.buffer.len() <= MAX_HEADER_BYTES + 2 + MAX_MESSAGE_BYTES as usize);
            }
        }
    }
}
