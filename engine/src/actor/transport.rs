//! The transport port and the pure halves of the OpenAI-compatible wire
//! format: request bytes, response parsing, failure classification.
//!
//! A [`Transport`] moves bytes: it sends a request body and returns the
//! status and the (bounded) response body, or a typed failure. Everything
//! that decides — what the body is, whether a reply is well formed, whether
//! a failure moves to the next endpoint — is a plain function here, so it is
//! unit-tested without a network. Parsing is fail-closed: a body that is not
//! JSON or does not have the chat-completion shape is a failed turn, never
//! a guess at what the model meant.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A boxed future, so transports of different kinds share one chain.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Moves one request body to a model endpoint and its answer back.
pub trait Transport: Send + Sync {
    /// The stable adapter identity prompt routes are resolved with
    /// (`openai-chat`, `scripted`); never an endpoint name.
    fn adapter_kind(&self) -> &'static str;

    /// Sends `body` (the exact bytes to ledger). Resolves when the whole
    /// response body has been read, the deadline passed, or `cancel` fired;
    /// a cancelled request is aborted, not left running.
    fn send<'a>(
        &'a self,
        body: &'a [u8],
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<RawResponse, TransportFailure>>;
}

/// What came back over the wire, before any inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why no response came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TransportFailure {
    #[error("no answer within the deadline of {secs} s")]
    Timeout { secs: u64 },
    #[error("cannot reach the endpoint: {message}")]
    Connect { message: String },
    #[error("the connection failed mid-response: {message}")]
    Io { message: String },
    #[error("the response body exceeded {cap} bytes and was refused")]
    BodyTooLarge { cap: u64 },
    #[error("the API key variable `{var}` is not set")]
    MissingApiKey { var: String },
    #[error("cancelled")]
    Cancelled,
}

/// What one attempt means for the failover chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptClass {
    /// A 2xx response: its body is parsed (and may still be a failed turn).
    Answered,
    /// The endpoint is unwell (429, 5xx, 408, no connection, deadline, no
    /// key): the chain moves to the next endpoint.
    Retryable,
    /// The endpoint answered, but not with a usable response (another 4xx,
    /// an oversized body): a failed turn, ledgered, no failover.
    FailedTurn,
    /// The repair was cancelled: nothing else is tried.
    Cancelled,
}

/// Classifies an attempt's result.
pub fn classify(result: &Result<RawResponse, TransportFailure>) -> AttemptClass {
    match result {
        Ok(r) if (200..300).contains(&r.status) => AttemptClass::Answered,
        Ok(r) if r.status == 408 || r.status == 429 || r.status >= 500 => AttemptClass::Retryable,
        Ok(_) => AttemptClass::FailedTurn,
        Err(
            TransportFailure::Timeout { .. }
            | TransportFailure::Connect { .. }
            | TransportFailure::Io { .. }
            | TransportFailure::MissingApiKey { .. },
        ) => AttemptClass::Retryable,
        Err(TransportFailure::BodyTooLarge { .. }) => AttemptClass::FailedTurn,
        Err(TransportFailure::Cancelled) => AttemptClass::Cancelled,
    }
}

/// One tool call as the model made it. `id` is the server's call id for a
/// native tool call, `None` for a call written as a JSON envelope in text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    /// The arguments exactly as the model wrote them (a JSON text).
    pub arguments: String,
}

/// One message of the conversation after the instruction program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Trusted text from Trellis (instruction programs, turn context).
    System {
        content: String,
    },
    User {
        content: String,
    },
    /// What the model said: text and/or tool calls.
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, already wrapped as an observation.
    /// Sent as a `tool` message for a native call, as a `user` message for
    /// a call made in text (there is no call id to answer).
    ToolResult {
        call_id: Option<String>,
        content: String,
    },
}

/// What the runner asks an endpoint for; the endpoint contributes `model`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [ChatMessage],
    /// Function-calling tool declarations (OpenAI `tools` entries).
    pub tools: &'a [Value],
    pub max_tokens: u64,
}

/// The exact request body: `model`, `messages`, `tools`, `tool_choice:
/// "auto"`, `max_tokens`, in that order, compact JSON. Deterministic in its
/// inputs, so replay rebuilds the same bytes.
pub fn request_body(request: &ChatRequest<'_>) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        model: &'a str,
        messages: Vec<Value>,
        #[serde(skip_serializing_if = "<[Value]>::is_empty")]
        tools: &'a [Value],
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_choice: Option<&'static str>,
        max_tokens: u64,
    }
    let body = Body {
        model: request.model,
        messages: request.messages.iter().map(wire_message).collect(),
        tools: request.tools,
        tool_choice: (!request.tools.is_empty()).then_some("auto"),
        max_tokens: request.max_tokens,
    };
    serde_json::to_string(&body).expect("a request body of strings and numbers serializes")
}

fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({ "role": "system", "content": content }),
        ChatMessage::User { content } => json!({ "role": "user", "content": content }),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            let native: Vec<Value> = tool_calls
                .iter()
                .filter_map(|call| {
                    let id = call.id.as_ref()?;
                    Some(json!({
                        "id": id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    }))
                })
                .collect();
            if native.is_empty() {
                json!({ "role": "assistant", "content": content })
            } else {
                json!({ "role": "assistant", "content": content, "tool_calls": native })
            }
        }
        ChatMessage::ToolResult {
            call_id: Some(id),
            content,
        } => json!({ "role": "tool", "tool_call_id": id, "content": content }),
        ChatMessage::ToolResult {
            call_id: None,
            content,
        } => json!({ "role": "user", "content": content }),
    }
}

/// Tokens the endpoint says it used (`usage`), when it says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl TokenUsage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// A well-formed chat completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatReply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
}

/// Why a 2xx body is not a chat completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("malformed chat completion: {0}")]
pub struct ReplyError(pub String);

/// Parses a chat-completion body, fail-closed: the first choice's message
/// must have a string-or-null `content` and well-typed `tool_calls`
/// (`id`, `function.name`, `function.arguments` as a string); `usage`, when
/// present, must hold non-negative integers. Never panics on any input.
pub fn parse_reply(body: &[u8]) -> Result<ChatReply, ReplyError> {
    let fail = |why: &str| Err(ReplyError(why.to_owned()));
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return fail("the body is not JSON");
    };
    let Some(choice) = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return fail("no `choices[0]`");
    };
    let Some(message) = choice.get("message").and_then(Value::as_object) else {
        return fail("`choices[0].message` is not an object");
    };
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return fail("`message.content` is neither a string nor null"),
    };
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for call in calls {
                let id = call.get("id").and_then(Value::as_str);
                let function = call.get("function");
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                let arguments = function
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str);
                let (Some(id), Some(name), Some(arguments)) = (id, name, arguments) else {
                    return fail(
                        "a tool call lacks a string `id`, `function.name` or `function.arguments`",
                    );
                };
                tool_calls.push(ToolCall {
                    id: Some(id.to_owned()),
                    name: name.to_owned(),
                    arguments: arguments.to_owned(),
                });
            }
        }
        Some(_) => return fail("`message.tool_calls` is not an array"),
    }
    let finish_reason = match choice.get("finish_reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return fail("`finish_reason` is not a string"),
    };
    let usage = match value.get("usage") {
        None | Some(Value::Null) => None,
        Some(usage) => {
            let count = |key: &str| match usage.get(key) {
                None | Some(Value::Null) => Some(0),
                Some(v) => v.as_u64(),
            };
            match (count("prompt_tokens"), count("completion_tokens")) {
                (Some(prompt_tokens), Some(completion_tokens)) if usage.is_object() => {
                    Some(TokenUsage {
                        prompt_tokens,
                        completion_tokens,
                    })
                }
                _ => return fail("`usage` token counts are not non-negative integers"),
            }
        }
    };
    Ok(ChatReply {
        content,
        tool_calls,
        finish_reason,
        usage,
    })
}

/// A tool call written as text, for dialects without native tool calls:
/// the whole content, trimmed, must be exactly one JSON object
/// `{"tool": NAME, "arguments": {...}}` and nothing else (no code fence,
/// no commentary), else it is plain text and no tool was called.
pub fn text_tool_call(content: &str) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(content.trim()).ok()?;
    let object = value.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let name = object.get("tool")?.as_str()?;
    let arguments = object.get("arguments")?;
    Some(ToolCall {
        id: None,
        name: name.to_owned(),
        arguments: arguments.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_body_carries_model_messages_tools_and_auto_choice_in_order() {
        let messages = [
            ChatMessage::System {
                content: "sys".into(),
            },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: Some("c1".into()),
                    name: "finish".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::ToolResult {
                call_id: Some("c1".into()),
                content: "ok".into(),
            },
            ChatMessage::ToolResult {
                call_id: None,
                content: "text result".into(),
            },
        ];
        let tools = [json!({"type": "function", "function": {"name": "finish"}})];
        let body = request_body(&ChatRequest {
            model: "m",
            messages: &messages,
            tools: &tools,
            max_tokens: 7,
        });
        let text = body.clone();
        assert!(text.starts_with(r#"{"model":"m","messages":["#), "{text}");
        assert!(
            text.ends_with(r#""tool_choice":"auto","max_tokens":7}"#),
            "{text}"
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(v["messages"][2]["role"], "tool");
        assert_eq!(v["messages"][2]["tool_call_id"], "c1");
        assert_eq!(v["messages"][3]["role"], "user");
        let again = request_body(&ChatRequest {
            model: "m",
            messages: &messages,
            tools: &tools,
            max_tokens: 7,
        });
        assert_eq!(body, again, "the same inputs give the same bytes");
    }

    #[test]
    fn a_reply_with_tool_calls_and_usage_parses() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/lib.rs\"}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#;
        let reply = parse_reply(body).unwrap();
        assert_eq!(reply.tool_calls[0].name, "read_file");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"src/lib.rs"}"#);
        assert_eq!(reply.usage.unwrap().total(), 15);
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn malformed_bodies_are_refused_not_guessed() {
        for body in [
            &b"<html>502 Bad Gateway</html>"[..],
            b"",
            br#"{"error":{"message":"model not found"}}"#,
            br#"{"choices":[]}"#,
            br#"{"choices":[{"message":{"content":7}}]}"#,
            br#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"x","arguments":{}}}]}}]}"#,
            br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":-1}}"#,
        ] {
            assert!(parse_reply(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn a_text_tool_call_must_be_the_whole_reply() {
        let call =
            text_tool_call(" {\"tool\": \"finish\", \"arguments\": {\"summary\": \"done\"}}\n")
                .unwrap();
        assert_eq!(call.name, "finish");
        assert_eq!(call.id, None);
        assert_eq!(call.arguments, r#"{"summary":"done"}"#);
        assert_eq!(
            text_tool_call("Sure! {\"tool\": \"finish\", \"arguments\": {}}"),
            None
        );
        assert_eq!(
            text_tool_call("```json\n{\"tool\": \"finish\", \"arguments\": {}}\n```"),
            None
        );
        assert_eq!(
            text_tool_call("{\"tool\": \"finish\", \"arguments\": {}, \"x\": 1}"),
            None
        );
    }

    #[test]
    fn failures_classify_for_failover() {
        let status = |s| {
            classify(&Ok(RawResponse {
                status: s,
                body: vec![],
            }))
        };
        assert_eq!(status(200), AttemptClass::Answered);
        assert_eq!(status(429), AttemptClass::Retryable);
        assert_eq!(status(500), AttemptClass::Retryable);
        assert_eq!(status(503), AttemptClass::Retryable);
        assert_eq!(status(400), AttemptClass::FailedTurn);
        assert_eq!(status(404), AttemptClass::FailedTurn);
        assert_eq!(
            classify(&Err(TransportFailure::Timeout { secs: 1 })),
            AttemptClass::Retryable
        );
        assert_eq!(
            classify(&Err(TransportFailure::BodyTooLarge { cap: 1 })),
            AttemptClass::FailedTurn
        );
        assert_eq!(
            classify(&Err(TransportFailure::Cancelled)),
            AttemptClass::Cancelled
        );
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|x| json!(x)),
            prop_oneof![
                Just("choices".to_owned()),
                Just("message".to_owned()),
                Just("tool_calls".to_owned()),
                Just("function".to_owned()),
                ".*"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            let key = prop_oneof![
                Just("choices".to_owned()),
                Just("message".to_owned()),
                Just("content".to_owned()),
                Just("tool_calls".to_owned()),
                Just("function".to_owned()),
                Just("name".to_owned()),
                Just("arguments".to_owned()),
                Just("id".to_owned()),
                Just("usage".to_owned()),
                Just("prompt_tokens".to_owned()),
                Just("finish_reason".to_owned()),
                "[a-z]{1,4}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_parser_never_panics_on_arbitrary_json(value in arbitrary_json()) {
            let body = serde_json::to_vec(&value).unwrap();
            let _ = parse_reply(&body);
            if let Value::String(s) = &value {
                let _ = text_tool_call(s);
            }
            let _ = text_tool_call(&value.to_string());
        }

        #[test]
        fn the_parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse_reply(&bytes);
        }
    }
}
