//! The `openai-chat` adapter and the failover chain against our own
//! OpenAI-compatible server on 127.0.0.1: exact request bytes, the API key
//! only in the header, usage parsed, 500 → next endpoint, garbage and
//! oversized bodies, cancellation of a request the server never answers, and
//! a whole actor run over HTTP that edits its branch through the second
//! endpoint and replays every request it sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_engine::actor::{
    AdapterKind, CallOutcome, ChainEndpoint, ChatMessage, ChatRequest, FailoverChain,
    HttpTransport, ModelEndpoint, TransportFailure, parse_reply, request_body,
};
use trellis_test_support::openai_server::{Answer, OpenAiServer};

const KEY: &str = "sk-test-7f3c-SENTINEL";

fn endpoint(name: &str, base_url: &str) -> ModelEndpoint {
    ModelEndpoint {
        name: name.into(),
        adapter: AdapterKind::OpenAiChat,
        base_url: base_url.into(),
        model: "qwen2.5-coder:7b".into(),
        family: None,
        api_key_env: Some("TRELLIS_TEST_API_KEY".into()),
        timeout_secs: 5,
        context_window_tokens: 32_768,
        max_output_tokens: 512,
    }
}

fn link(config: ModelEndpoint) -> ChainEndpoint {
    let transport = HttpTransport::new(&config)
        .unwrap()
        .with_key_lookup(Arc::new(|var| {
            (var == "TRELLIS_TEST_API_KEY").then(|| KEY.to_owned())
        }));
    ChainEndpoint {
        config,
        transport: Box::new(transport),
    }
}

fn body_for(endpoint: &ChainEndpoint) -> String {
    let messages = [
        ChatMessage::System {
            content: "You repair Rust code.".into(),
        },
        ChatMessage::User {
            content: "Fix `add`.".into(),
        },
    ];
    let tools = [
        json!({ "type": "function", "function": { "name": "finish", "parameters": { "type": "object" } } }),
    ];
    request_body(&ChatRequest {
        model: &endpoint.config.model,
        messages: &messages,
        tools: &tools,
        max_tokens: endpoint.config.max_output_tokens,
    })
}

async fn call(
    chain: &mut FailoverChain,
    cancel: &CancellationToken,
) -> trellis_engine::actor::Call {
    chain
        .call(&mut |_, endpoint| Ok(body_for(endpoint)), cancel)
        .await
}

#[tokio::test]
async fn the_exact_body_is_posted_with_the_key_only_in_its_header() {
    let server = OpenAiServer::start(vec![Answer::tool_call(
        "finish",
        json!({ "summary": "done" }),
    )]);
    let config = endpoint("local", &server.base_url);
    let mut chain = FailoverChain::new(vec![link(config.clone())]);
    let result = call(&mut chain, &CancellationToken::new()).await;
    assert_eq!(result.outcome, CallOutcome::Answered);

    let received = server.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let attempt = &result.attempts[0];
    assert_eq!(
        request.body,
        attempt.request_body.as_bytes(),
        "the ledgered bytes are the bytes sent"
    );
    let sent: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(sent["tool_choice"], "auto");
    assert_eq!(sent["max_tokens"], 512);

    let reply = parse_reply(attempt.response.as_ref().unwrap().as_bytes()).unwrap();
    assert_eq!(reply.tool_calls[0].name, "finish");
    assert_eq!(reply.usage.unwrap().total(), 333);

    // Nothing that is printed, serialized or ledgered carries the key.
    for text in [
        format!("{attempt:?}"),
        serde_json::to_string(attempt).unwrap(),
        format!("{config:?}"),
        serde_json::to_string(&config).unwrap(),
        format!("{:?}", HttpTransport::new(&config).unwrap()),
    ] {
        assert!(!text.contains(KEY), "the key leaked into: {text}");
    }
}

#[tokio::test]
async fn a_missing_key_moves_on_without_sending_anything() {
    let server = OpenAiServer::start(vec![]);
    let config = endpoint("keyless", &server.base_url);
    let transport = HttpTransport::new(&config)
        .unwrap()
        .with_key_lookup(Arc::new(|_| None));
    let mut chain = FailoverChain::new(vec![ChainEndpoint {
        config,
        transport: Box::new(transport),
    }]);
    let result = call(&mut chain, &CancellationToken::new()).await;
    assert_eq!(result.outcome, CallOutcome::RouteUnavailable);
    assert_eq!(
        result.attempts[0].failure,
        Some(TransportFailure::MissingApiKey {
            var: "TRELLIS_TEST_API_KEY".into()
        })
    );
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn a_500_fails_over_to_the_second_endpoint() {
    let down = OpenAiServer::start(vec![Answer::Status(
        500,
        b"{\"error\":\"overloaded\"}".to_vec(),
    )]);
    let up = OpenAiServer::start(vec![Answer::tool_call(
        "finish",
        json!({ "summary": "ok" }),
    )]);
    let mut chain = FailoverChain::new(vec![
        link(endpoint("down", &down.base_url)),
        link(endpoint("up", &up.base_url)),
    ]);
    let result = call(&mut chain, &CancellationToken::new()).await;
    assert_eq!(result.outcome, CallOutcome::Answered);
    let names: Vec<_> = result
        .attempts
        .iter()
        .map(|a| (a.endpoint_name.as_str(), a.status))
        .collect();
    assert_eq!(names, [("down", Some(500)), ("up", Some(200))]);
    assert_eq!(down.received().len(), 1);
    assert_eq!(up.received().len(), 1);
}

#[tokio::test]
async fn garbage_is_retryable_and_an_oversized_body_is_a_failed_turn() {
    let garbage = OpenAiServer::start(vec![
        Answer::Garbage(b"\x00\x01 not http\r\n\r\n".to_vec());
        2
    ]);
    let mut chain = FailoverChain::new(vec![link(endpoint("garbage", &garbage.base_url))]);
    let result = call(&mut chain, &CancellationToken::new()).await;
    assert_eq!(result.outcome, CallOutcome::RouteUnavailable);
    assert_eq!(result.attempts.len(), 2, "one try, one retry");
    assert!(
        result
            .attempts
            .iter()
            .all(|a| a.failure.is_some() && a.status.is_none())
    );

    let big = OpenAiServer::start(vec![Answer::Status(200, vec![b'x'; 10_000])]);
    let config = endpoint("big", &big.base_url);
    let transport = HttpTransport::new(&config)
        .unwrap()
        .with_key_lookup(Arc::new(|_| Some(KEY.to_owned())))
        .with_max_response_bytes(1024);
    let mut chain = FailoverChain::new(vec![ChainEndpoint {
        config,
        transport: Box::new(transport),
    }]);
    let result = call(&mut chain, &CancellationToken::new()).await;
    assert_eq!(result.outcome, CallOutcome::FailedTurn);
    assert_eq!(
        result.attempts[0].failure,
        Some(TransportFailure::BodyTooLarge { cap: 1024 })
    );
    assert!(
        !chain.exhausted(),
        "a failed turn does not retire the endpoint"
    );
}

#[tokio::test]
async fn cancelling_aborts_a_request_the_server_never_answers() {
    let server = OpenAiServer::start(vec![Answer::Hang]);
    let mut chain = FailoverChain::new(vec![link(endpoint("hang", &server.base_url))]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let result = call(&mut chain, &cancel).await;
    assert_eq!(result.outcome, CallOutcome::Cancelled);
    assert_eq!(
        result.attempts[0].failure,
        Some(TransportFailure::Cancelled)
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "well before the 5 s deadline"
    );
    assert_eq!(
        server.received().len(),
        1,
        "the request had reached the server"
    );
}

mod run_over_http {
    use std::path::Path;

    use trellis_engine::actor::{
        ActorContext, Attempt, BoxFuture, BranchVerifier, PreparedRequest, PromptInputs,
        StopReason, TurnLedger, TurnLimits, TurnRecord, VerifierReport, replay_request, run_actor,
    };
    use trellis_prompts::composers::{BootstrapState, CorrectTurnState};
    use trellis_prompts::plan::{
        OperatorKind, PlanInput, RemainingBudget, ResidualClass, WitnessKind, plan,
    };
    use trellis_prompts::{
        BoundedList, BoundedText, ObservationText, PromptStage, ResolutionPolicy,
    };

    use super::*;

    #[derive(Default)]
    struct Ledger {
        prepared: Vec<PreparedRequest>,
        attempts: Vec<Attempt>,
        turns: Vec<TurnRecord>,
    }

    impl TurnLedger for Ledger {
        fn reserve_turn(&mut self, _: u32) -> Result<(), String> {
            Ok(())
        }
        fn request_prepared(&mut self, request: &PreparedRequest) {
            self.prepared.push(request.clone());
        }
        fn observed(&mut self, _: u32, _: &str, attempt: &Attempt) {
            self.attempts.push(attempt.clone());
        }
        fn turn_completed(&mut self, record: &TurnRecord) {
            self.turns.push(record.clone());
        }
        // The plans are checked where paging is tested (`context_paging.rs`).
        fn context(&mut self, _: &trellis_engine::actor::ContextEvent) {}
    }

    struct Passing;

    impl BranchVerifier for Passing {
        fn run_build<'a>(
            &'a mut self,
            _: &'a Path,
        ) -> BoxFuture<'a, Result<VerifierReport, String>> {
            Box::pin(async {
                Ok(VerifierReport {
                    passed: true,
                    output: String::new(),
                })
            })
        }
        fn run_tests<'a>(
            &'a mut self,
            _: &'a Path,
            _: Option<&'a str>,
        ) -> BoxFuture<'a, Result<VerifierReport, String>> {
            Box::pin(async {
                Ok(VerifierReport {
                    passed: true,
                    output: "1 passed".into(),
                })
            })
        }
    }

    fn inputs() -> PromptInputs {
        PromptInputs {
            session_id: "http-session".into(),
            bootstrap: BootstrapState {
                workspace_name: BoundedText::new("demo").unwrap(),
                session_id: BoundedText::new("http-session").unwrap(),
                granted_capabilities: BoundedList::new(["edit files in the branch"]).unwrap(),
                write_ahead_note: None,
            },
            correction: CorrectTurnState {
                plan: plan(PlanInput {
                    stage: PromptStage::BranchCorrect,
                    residual: ResidualClass::Type,
                    witness: Some(WitnessKind::CompilerDiagnostic),
                    operator: OperatorKind::Edit,
                    revise_hypothesis: false,
                    remaining: RemainingBudget {
                        turns: 3,
                        tokens: 8000,
                    },
                }),
                tool_names: BoundedList::empty(),
                budget_note: None,
                packet: ObservationText::new("E0308: mismatched types in src/lib.rs").unwrap(),
                diagnostic: Some((
                    BoundedText::new("E0308").unwrap(),
                    ObservationText::new("expected `i32`, found `&str`").unwrap(),
                )),
                failing_test: None,
                previous_hypothesis: None,
                hints: BoundedList::empty(),
            },
            policy: ResolutionPolicy::default(),
            replacements: Vec::new(),
            focus: trellis_engine::context::Focus::default(),
        }
    }

    #[tokio::test]
    async fn a_model_behind_a_failing_endpoint_edits_the_branch_through_the_second() {
        let branch = tempfile::tempdir().unwrap();
        std::fs::create_dir(branch.path().join("src")).unwrap();
        std::fs::write(
            branch.path().join("src/lib.rs"),
            "pub fn one() -> i32 { \"1\" }\n",
        )
        .unwrap();
        let down = OpenAiServer::start(vec![Answer::Status(503, b"busy".to_vec())]);
        let up = OpenAiServer::start(vec![
            Answer::tool_call(
                "replace",
                json!({ "path": "src/lib.rs", "old": "\"1\"", "new": "1" }),
            ),
            Answer::tool_call("finish", json!({ "summary": "returned the integer" })),
        ]);
        let mut chain = FailoverChain::new(vec![
            link(endpoint("down", &down.base_url)),
            link(endpoint("up", &up.base_url)),
        ]);
        let mut ledger = Ledger::default();
        let cancel = CancellationToken::new();
        let limits = TurnLimits {
            max_turns: 4,
            tool_calls_per_turn: 4,
            mutations_per_turn: 2,
            result_bytes: 4096,
            tokens_per_turn: 1024,
            working_set_turns: 4,
        };
        let outcome = run_actor(
            &mut chain,
            &inputs(),
            &limits,
            ActorContext {
                branch: branch.path(),
                withheld: &[],
                verifier: &mut Passing,
                ledger: &mut ledger,
                cancel: &cancel,
            },
        )
        .await;

        assert_eq!(
            outcome.stop,
            StopReason::Finished {
                summary: "returned the integer".into()
            }
        );
        assert_eq!(
            std::fs::read_to_string(branch.path().join("src/lib.rs")).unwrap(),
            "pub fn one() -> i32 { 1 }\n"
        );
        assert_eq!(
            outcome.usage.tokens.total(),
            666,
            "both answered turns' usage is charged"
        );
        // The failed primary gets its one retry on the next turn (and is
        // then retired); what each server received is what was ledgered.
        let order: Vec<&str> = ledger
            .attempts
            .iter()
            .map(|a| a.endpoint_name.as_str())
            .collect();
        assert_eq!(order, ["down", "up", "down", "up"]);
        for (name, server) in [("down", &down), ("up", &up)] {
            let ledgered: Vec<&[u8]> = ledger
                .attempts
                .iter()
                .filter(|a| a.endpoint_name == name)
                .map(|a| a.request_body.as_bytes())
                .collect();
            let received: Vec<Vec<u8>> = server.received().into_iter().map(|r| r.body).collect();
            assert_eq!(received, ledgered, "{name}");
        }
        assert!(
            !chain.exhausted(),
            "the second endpoint is still in service"
        );
        let conversation: Vec<_> = ledger
            .turns
            .iter()
            .flat_map(|t| t.appended.clone())
            .collect();
        for (prepared, attempt) in ledger.prepared.iter().zip(&ledger.attempts) {
            assert_eq!(
                replay_request(prepared, &conversation, &[], &limits).unwrap(),
                attempt.request_body
            );
        }
        let second: serde_json::Value = serde_json::from_slice(&up.received()[1].body).unwrap();
        let tool = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .unwrap();
        assert!(
            tool["content"]
                .as_str()
                .unwrap()
                .starts_with("[trellis:tool-result replace ok]")
        );
    }
}
