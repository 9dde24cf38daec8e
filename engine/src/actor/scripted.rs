//! A transport that answers from a script: the model stand-in for tests of
//! the runner and, later, of the search runtime.
//!
//! It records every request body it is sent, so a test can check exactly
//! what reached the "model". It never touches the network.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::transport::{BoxFuture, RawResponse, Transport, TransportFailure};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Scripted {
    Reply(RawResponse),
    Fail(TransportFailure),
    /// Never answers; resolves only when the request is cancelled.
    Hang,
}

impl Scripted {
    /// A 200 whose body is `value`.
    pub fn json(value: Value) -> Scripted {
        Scripted::status(200, value.to_string().as_bytes())
    }

    pub fn status(status: u16, body: &[u8]) -> Scripted {
        Scripted::Reply(RawResponse {
            status,
            body: body.to_vec(),
        })
    }

    /// A 200 chat completion making `calls` (name, arguments JSON) natively.
    pub fn tool_calls(calls: &[(&str, Value)]) -> Scripted {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                serde_json::json!({
                    "id": format!("call_{i}"),
                    "type": "function",
                    "function": { "name": name, "arguments": arguments.to_string() },
                })
            })
            .collect();
        Scripted::json(serde_json::json!({
            "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": calls },
                          "finish_reason": "tool_calls" }],
            "usage": { "prompt_tokens": 100, "completion_tokens": 10 },
        }))
    }
}

/// Answers requests from a queue, in order.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTransport {
    script: Arc<Mutex<VecDeque<Scripted>>>,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl ScriptedTransport {
    pub fn new(script: impl IntoIterator<Item = Scripted>) -> ScriptedTransport {
        ScriptedTransport {
            script: Arc::new(Mutex::new(script.into_iter().collect())),
            requests: Arc::default(),
        }
    }

    /// Every request body sent so far (clones share the record).
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.requests.lock().unwrap().clone()
    }
}

impl Transport for ScriptedTransport {
    fn adapter_kind(&self) -> &'static str {
        "scripted"
    }

    fn send<'a>(
        &'a self,
        body: &'a [u8],
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<RawResponse, TransportFailure>> {
        self.requests.lock().unwrap().push(body.to_vec());
        let next = self.script.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                Some(Scripted::Reply(response)) => Ok(response),
                Some(Scripted::Fail(failure)) => Err(failure),
                Some(Scripted::Hang) => {
                    cancel.cancelled().await;
                    Err(TransportFailure::Cancelled)
                }
                None => Err(TransportFailure::Connect {
                    message: "the scripted transport has no answers left".into(),
                }),
            }
        })
    }
}
