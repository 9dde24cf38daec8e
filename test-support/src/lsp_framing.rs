//! The LSP base protocol's framing over a byte stream: a `Content-Length`
//! header, a blank line, a JSON body. Shared by the test client
//! (`lsp/tests/it/support`) and the code-action bench
//! (`lsp/examples/bench_code_actions.rs`), so both speak the same wire
//! format, and it is written independently of the server's own framing.
//!
//! It only frames: ids, answers to the server's requests and waiting for a
//! message belong to its users. It never writes anything but the message
//! it is given.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver};

use serde_json::Value;

/// Writes `message` with its header and flushes.
pub fn write_message(writer: &mut impl Write, message: &Value) -> std::io::Result<()> {
    let body = serde_json::to_string(message).expect("a JSON value serializes");
    write!(writer, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    writer.flush()
}

/// Reads `stream` on a thread of its own and sends each message to the
/// returned channel, until the stream ends or the receiver is dropped.
pub fn spawn_reader(stream: impl Read + Send + 'static) -> Receiver<Value> {
    let (tx, incoming) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        while let Some(message) = read_message(&mut reader) {
            if tx.send(message).is_err() {
                break;
            }
        }
    });
    incoming
}

/// One message; `None` at the end of the stream or a torn frame. A body
/// that is not JSON panics (the reader thread ends, the channel with it):
/// the server must never send one.
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).expect("the server sent invalid JSON"))
}
