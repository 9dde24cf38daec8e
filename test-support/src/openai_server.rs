//! An OpenAI-compatible chat endpoint of our own on 127.0.0.1: it serves a
//! queue of scripted answers, one per request, and records every request
//! (headers and body) so a test can check exactly what was sent.
//!
//! It speaks just enough HTTP/1.1 for one request per connection
//! (`Connection: close`), on a plain thread, so it works under any runtime
//! and from tests that drive the shipped binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A status with a JSON (or any) body.
    Status(u16, Vec<u8>),
    /// Reads the request, then never answers (holds the connection open).
    Hang,
    /// Bytes that are not HTTP at all, then close.
    Garbage(Vec<u8>),
}

impl Answer {
    /// A 200 chat completion calling `tool` with `arguments` natively.
    pub fn tool_call(tool: &str, arguments: serde_json::Value) -> Answer {
        let body = serde_json::json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{ "id": "call_1", "type": "function",
                                 "function": { "name": tool, "arguments": arguments.to_string() } }]
            } }],
            "usage": { "prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333 }
        });
        Answer::Status(200, body.to_string().into_bytes())
    }

    /// The same completion, reporting that the endpoint counted the request
    /// as `prompt_tokens` (`usage.prompt_tokens`).
    pub fn counting_prompt(self, prompt_tokens: u64) -> Answer {
        let Answer::Status(status, body) = self else {
            panic!("only a completion reports usage");
        };
        let mut body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        body["usage"]["prompt_tokens"] = prompt_tokens.into();
        Answer::Status(status, body.to_string().into_bytes())
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The running server. Its thread lives as long as the test process, so a
/// client never finds it gone mid-test.
pub struct OpenAiServer {
    pub base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl OpenAiServer {
    /// Serves `script` in order; once it is used up, every request gets a 500.
    pub fn start(script: Vec<Answer>) -> OpenAiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(std::collections::VecDeque::from(script)));
        let record = Arc::clone(&received);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let record = Arc::clone(&record);
                let script = Arc::clone(&script);
                thread::spawn(move || serve(stream, &record, &script));
            }
        });
        OpenAiServer { base_url, received }
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The bodies of the requests received so far, in order, as text.
    pub fn bodies(&self) -> Vec<String> {
        self.received()
            .into_iter()
            .map(|r| String::from_utf8(r.body).expect("a request body is UTF-8"))
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    record: &Mutex<Vec<Received>>,
    script: &Mutex<std::collections::VecDeque<Answer>>,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let Some(request) = read_request(&mut reader) else {
        return;
    };
    record.lock().unwrap().push(request);
    let answer = script.lock().unwrap().pop_front().unwrap_or(Answer::Status(
        500,
        b"{\"error\":\"script exhausted\"}".to_vec(),
    ));
    let mut stream = stream;
    match answer {
        Answer::Status(status, body) => {
            let head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
        Answer::Garbage(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        Answer::Hang => {
            // Keep the connection open until the client gives up.
            let mut sink = [0u8; 1024];
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}
