//! The failover chain: the configured endpoints in order, and the rule for
//! moving along them within one repair.
//!
//! An endpoint that fails retryably (429, 5xx, no connection, deadline) is
//! left for the next one. Each endpoint gets at most one retry per repair:
//! its second failure retires it. When every endpoint is retired the model
//! route is unavailable for the rest of the repair, an environmental
//! outcome, so a hung server costs at most two deadlines per endpoint.
//! [`FailoverState`] is the pure rule; [`FailoverChain`] performs it.

use std::time::Instant;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::transport::{AttemptClass, Transport, TransportFailure, classify};
use crate::config::models::ModelEndpoint;

/// Failures that retire an endpoint: the first, then its one retry.
pub const FAILURES_TO_RETIRE: u8 = 2;

/// Per-repair failure counts of the chain's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverState {
    failures: Vec<u8>,
}

impl FailoverState {
    pub fn new(endpoints: usize) -> FailoverState {
        FailoverState {
            failures: vec![0; endpoints],
        }
    }

    /// The first endpoint in chain order that is neither retired nor
    /// already `tried` in the current pass.
    pub fn next_endpoint(&self, tried: &[bool]) -> Option<usize> {
        (0..self.failures.len()).find(|&i| {
            self.failures[i] < FAILURES_TO_RETIRE && !tried.get(i).copied().unwrap_or(false)
        })
    }

    pub fn record_failure(&mut self, endpoint: usize) {
        self.failures[endpoint] = self.failures[endpoint].saturating_add(1);
    }

    /// Every endpoint is retired (or there are none).
    pub fn exhausted(&self) -> bool {
        self.failures.iter().all(|&f| f >= FAILURES_TO_RETIRE)
    }
}

/// One endpoint of the chain: its configuration and its transport.
pub struct ChainEndpoint {
    pub config: ModelEndpoint,
    pub transport: Box<dyn Transport>,
}

/// One request sent to one endpoint: the raw observation to ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Position in the chain.
    pub endpoint: usize,
    pub endpoint_name: String,
    pub adapter: String,
    pub model: String,
    /// The exact bytes sent (headers, and so the API key, excluded).
    pub request_body: String,
    pub status: Option<u16>,
    /// The response body as received; bytes that are not UTF-8 are kept
    /// as bytes so replay parses exactly what arrived.
    pub response: Option<ObservedBody>,
    pub failure: Option<TransportFailure>,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "encoding", content = "body", rename_all = "snake_case")]
pub enum ObservedBody {
    Utf8(String),
    Bytes(Vec<u8>),
}

impl ObservedBody {
    fn new(bytes: Vec<u8>) -> ObservedBody {
        match String::from_utf8(bytes) {
            Ok(text) => ObservedBody::Utf8(text),
            Err(e) => ObservedBody::Bytes(e.into_bytes()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ObservedBody::Utf8(text) => text.as_bytes(),
            ObservedBody::Bytes(bytes) => bytes,
        }
    }
}

/// How one call through the chain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The last attempt got a 2xx; its body is to be parsed.
    Answered,
    /// The last attempt's endpoint answered unusably (see [`AttemptClass::FailedTurn`]).
    FailedTurn,
    /// Every endpoint is retired: no model for the rest of this repair.
    RouteUnavailable,
    Cancelled,
    /// The request for an endpoint could not be built (its programs did not
    /// compile or do not fit); nothing was sent to it.
    Unbuildable {
        endpoint: usize,
        reason: String,
    },
}

/// The attempts of one call, in order, and how it ended.
#[derive(Debug, Clone)]
pub struct Call {
    pub attempts: Vec<Attempt>,
    pub outcome: CallOutcome,
}

/// The endpoints of one repair and their failure counts.
pub struct FailoverChain {
    endpoints: Vec<ChainEndpoint>,
    state: FailoverState,
}

impl FailoverChain {
    pub fn new(endpoints: Vec<ChainEndpoint>) -> FailoverChain {
        FailoverChain {
            state: FailoverState::new(endpoints.len()),
            endpoints,
        }
    }

    pub fn endpoints(&self) -> &[ChainEndpoint] {
        &self.endpoints
    }

    /// No endpoint is left for this repair.
    pub fn exhausted(&self) -> bool {
        self.state.exhausted()
    }

    /// Sends one request through the chain. `build` makes the body for an
    /// endpoint (the programs depend on its route); it is called once per
    /// attempt, right before the send.
    pub async fn call(
        &mut self,
        build: &mut (dyn FnMut(usize, &ChainEndpoint) -> Result<String, String> + Send),
        cancel: &CancellationToken,
    ) -> Call {
        let mut attempts = Vec::new();
        loop {
            let mut tried = vec![false; self.endpoints.len()];
            while let Some(i) = self.state.next_endpoint(&tried) {
                tried[i] = true;
                if cancel.is_cancelled() {
                    return Call {
                        attempts,
                        outcome: CallOutcome::Cancelled,
                    };
                }
                let endpoint = &self.endpoints[i];
                let body = match build(i, endpoint) {
                    Ok(body) => body,
                    Err(reason) => {
                        return Call {
                            attempts,
                            outcome: CallOutcome::Unbuildable {
                                endpoint: i,
                                reason,
                            },
                        };
                    }
                };
                let started = Instant::now();
                let result = endpoint.transport.send(body.as_bytes(), cancel).await;
                let class = classify(&result);
                let (status, response, failure) = match result {
                    Ok(r) => (Some(r.status), Some(ObservedBody::new(r.body)), None),
                    Err(f) => (None, None, Some(f)),
                };
                attempts.push(Attempt {
                    endpoint: i,
                    endpoint_name: endpoint.config.name.clone(),
                    adapter: endpoint.transport.adapter_kind().to_owned(),
                    model: endpoint.config.model.clone(),
                    request_body: body,
                    status,
                    response,
                    failure,
                    elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
                let outcome = match class {
                    AttemptClass::Answered => CallOutcome::Answered,
                    AttemptClass::FailedTurn => CallOutcome::FailedTurn,
                    AttemptClass::Cancelled => CallOutcome::Cancelled,
                    AttemptClass::Retryable => {
                        self.state.record_failure(i);
                        continue;
                    }
                };
                return Call { attempts, outcome };
            }
            if self.state.exhausted() {
                return Call {
                    attempts,
                    outcome: CallOutcome::RouteUnavailable,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_is_retried_once_then_retired() {
        let mut state = FailoverState::new(2);
        assert_eq!(state.next_endpoint(&[false, false]), Some(0));
        state.record_failure(0);
        assert_eq!(state.next_endpoint(&[true, false]), Some(1));
        state.record_failure(1);
        assert_eq!(state.next_endpoint(&[true, true]), None);
        assert!(!state.exhausted(), "each endpoint still has its one retry");
        assert_eq!(state.next_endpoint(&[false, false]), Some(0));
        state.record_failure(0);
        assert_eq!(state.next_endpoint(&[false, false]), Some(1));
        state.record_failure(1);
        assert!(state.exhausted());
        assert_eq!(state.next_endpoint(&[false, false]), None);
        assert!(FailoverState::new(0).exhausted());
    }
}
