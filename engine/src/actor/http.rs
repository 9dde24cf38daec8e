//! The `openai-chat` adapter: `POST {base_url}/chat/completions` over
//! reqwest with rustls.
//!
//! It owns the edges of one HTTP exchange — the API key read from the
//! environment for this request only, the per-request deadline, abort on
//! cancellation, and a body read chunk by chunk and refused past its cap —
//! and nothing else: what the bytes mean is decided in `transport.rs`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::transport::{BoxFuture, RawResponse, Transport, TransportFailure};
use crate::config::models::ModelEndpoint;

/// Largest response body accepted by default. A chat completion of a few
/// thousand output tokens is tens of kilobytes; anything near this is not
/// an answer to read.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 4 << 20;

/// Where an API key comes from, by variable name. The default reads the
/// process environment at call time; the key is used for one header and
/// dropped.
pub type KeyLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The `openai-chat` transport of one endpoint.
pub struct HttpTransport {
    client: reqwest::Client,
    url: String,
    deadline: Duration,
    api_key_env: Option<String>,
    keys: KeyLookup,
    max_response_bytes: u64,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("url", &self.url)
            .field("deadline", &self.deadline)
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// The transport for `endpoint`, reading keys from the environment.
    pub fn new(endpoint: &ModelEndpoint) -> Result<HttpTransport, String> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("`{}`: cannot build an HTTP client: {e}", endpoint.name))?;
        Ok(HttpTransport {
            client,
            url: format!(
                "{}/chat/completions",
                endpoint.base_url.trim_end_matches('/')
            ),
            deadline: Duration::from_secs(endpoint.timeout_secs),
            api_key_env: endpoint.api_key_env.clone(),
            keys: Arc::new(|var| std::env::var(var).ok()),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Reads API keys through `keys` instead of the environment.
    pub fn with_key_lookup(mut self, keys: KeyLookup) -> Self {
        self.keys = keys;
        self
    }

    /// Refuses response bodies longer than `cap` bytes.
    pub fn with_max_response_bytes(mut self, cap: u64) -> Self {
        self.max_response_bytes = cap;
        self
    }

    async fn exchange(&self, body: &[u8]) -> Result<RawResponse, TransportFailure> {
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(var) = &self.api_key_env {
            let key = (self.keys)(var)
                .filter(|k| !k.is_empty())
                .ok_or_else(|| TransportFailure::MissingApiKey { var: var.clone() })?;
            request = request.bearer_auth(key);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| TransportFailure::Connect {
                message: error_chain(&e),
            })?;
        let status = response.status().as_u16();
        let cap = self.max_response_bytes;
        if response.content_length().is_some_and(|n| n > cap) {
            return Err(TransportFailure::BodyTooLarge { cap });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| TransportFailure::Io {
            message: error_chain(&e),
        })? {
            if bytes.len() as u64 + chunk.len() as u64 > cap {
                return Err(TransportFailure::BodyTooLarge { cap });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(RawResponse {
            status,
            body: bytes,
        })
    }
}

impl Transport for HttpTransport {
    fn adapter_kind(&self) -> &'static str {
        crate::config::models::AdapterKind::OpenAiChat.as_str()
    }

    fn send<'a>(
        &'a self,
        body: &'a [u8],
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<RawResponse, TransportFailure>> {
        Box::pin(async move {
            // Dropping the exchange future closes its connection: that is
            // how a deadline or a cancellation aborts the request.
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(TransportFailure::Cancelled),
                outcome = tokio::time::timeout(self.deadline, self.exchange(body)) => {
                    outcome.unwrap_or(Err(TransportFailure::Timeout { secs: self.deadline.as_secs() }))
                }
            }
        })
    }
}

/// The error and its sources on one line (reqwest's own message omits them).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
