//! AG-UI over real loopback HTTP, driven by the real `@ag-ui/client` (its `HttpAgent`,
//! with its schema check and event verifier) in a Node process: a text answer, an
//! approval interrupt and its resume, model selection, and the JSON errors.

use crate::common;

use common::{Served, SseReader, write_call};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider, ResolvedModel};
use troupe_runtime::{Engine, ModelResolver};
use troupe_server::{AgentLauncher, Server, ServerConfig};
use troupe_testkit::{MockLlmServer, MockTurn, test_deps};

/// Serves every model id asked for on the mock, under that name: the model a request
/// selects is the one the mock is asked for.
struct MockModels {
    provider: Arc<dyn LlmProvider>,
}

impl ModelResolver for MockModels {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        let name = model.rsplit_once('/').map_or(model, |(_, name)| name);
        Ok(ResolvedModel {
            id: format!("anthropic/{name}"),
            model: name.to_owned(),
            provider: Arc::clone(&self.provider),
            info: None,
        })
    }
}

/// Agent `coder` (the coding tools in a temporary workspace, model `mock-model` unless a
/// request picks another) on the mock, which answers with `turns`.
pub(crate) async fn serve(turns: impl IntoIterator<Item = MockTurn>) -> Served {
    let mock = MockLlmServer::start().await.expect("mock server starts");
    mock.push_all(turns);
    let provider: Arc<dyn LlmProvider> = Arc::new(
        HttpProvider::new(
            HttpConfig::new("anthropic", mock.url(), Some(ApiKey::new("test-key"))),
            AnthropicWire::default(),
        )
        .expect("client"),
    );
    let workspace = tempfile::tempdir().expect("workspace");
    let engine = Engine::builder().resolver(Arc::new(MockModels { provider })).build();
    let agent = engine
        .agent("coder")
        .model("mock-model")
        .workspace(workspace.path())
        .coding_tools()
        .max_iterations(6)
        .build()
        .expect("agent builds");
    let server = Server::new(ServerConfig::default(), Arc::new(AgentLauncher::new().agent(agent, "Writes code")));
    let server_hub = Arc::clone(server.hub());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(listener, shutdown.clone()));
    Served { url, mock, workspace, client: reqwest::Client::new(), token: None, shutdown, serving, server_hub }
}

/// The installed client, or `None` (with the skip printed).
pub(crate) fn client_modules(test: &str) -> Option<PathBuf> {
    let modules = test_deps::node_modules("@ag-ui/client");
    if modules.is_none() {
        test_deps::skip(test, "node or the npm package @ag-ui/client is not installed");
    }
    modules
}

/// What the client printed for `plan` (see tests/agui/client.mjs), one value per line.
pub(crate) async fn run_client(modules: &std::path::Path, mut plan: Value) -> Vec<Value> {
    plan["modules"] = json!(modules);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agui/client.mjs");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("node").arg(script).arg(plan.to_string()).kill_on_drop(true).output(),
    )
    .await
    .expect("the client finishes within a minute")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "client failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout.lines().map(|line| serde_json::from_str(line).expect("each line is JSON")).collect()
}

/// The events the client accepted in run `n`.
pub(crate) fn events(lines: &[Value], n: u64) -> Vec<Value> {
    lines.iter().filter(|l| l["run"] == n && l.get("event").is_some()).map(|l| l["event"].clone()).collect()
}

pub(crate) fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap_or("")).collect()
}

pub(crate) fn done(lines: &[Value], n: u64) -> Value {
    lines
        .iter()
        .find(|l| l["run"] == n && l.get("done").is_some())
        .map(|l| l["done"].clone())
        .unwrap_or_else(|| panic!("run {n} did not complete: {lines:#?}"))
}

pub(crate) fn assert_clean(lines: &[Value]) {
    let trouble: Vec<&Value> =
        lines.iter().filter(|l| l.get("warning").is_some() || l.get("error").is_some()).collect();
    assert!(trouble.is_empty(), "the client warned or failed: {trouble:#?}");
}

pub(crate) fn position(types: &[&str], kind: &str) -> usize {
    types.iter().position(|t| *t == kind).unwrap_or_else(|| panic!("no {kind} in {types:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answer_reaches_the_real_client_in_order_and_the_next_run_carries_the_history() {
    let Some(modules) = client_modules("a_text_answer_reaches_the_real_client") else { return };
    let served = serve([
        MockTurn::default().with_reasoning("The user greets me.").with_text("Hello from the mock."),
        MockTurn::text("You said hello."),
    ])
    .await;
    let plan = json!({
        "url": format!("{}/agui/coder", served.url), "threadId": "thread-1",
        "runs": [
            {"message": "say hello", "runId": "run-1"},
            {"message": "what did I say?", "runId": "run-2",
             "context": [{"description": "current page", "value": "/greetings"}]}
        ]
    });
    let lines = run_client(&modules, plan).await;
    assert_clean(&lines);

    let first = events(&lines, 0);
    let kinds = types(&first);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"), "{kinds:?}");
    assert_eq!((first[0]["threadId"].as_str(), first[0]["runId"].as_str()), (Some("thread-1"), Some("run-1")));
    assert!(position(&kinds, "REASONING_END") < position(&kinds, "TEXT_MESSAGE_START"), "reasoning closes before text");
    for (open, close) in [
        ("STEP_STARTED", "STEP_FINISHED"),
        ("TEXT_MESSAGE_START", "TEXT_MESSAGE_END"),
        ("REASONING_START", "REASONING_END"),
    ] {
        assert!(position(&kinds, open) < position(&kinds, close), "{open} before {close} in {kinds:?}");
    }
    let text: String =
        first.iter().filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "Hello from the mock.");
    let thought: String =
        first.iter().filter(|e| e["type"] == "REASONING_MESSAGE_CONTENT").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(thought, "The user greets me.");
    let finished = first.last().expect("events");
    assert_eq!(finished["result"], "Hello from the mock.");
    assert_eq!(finished["usage"][0]["model"], "mock-model");
    assert!(first.iter().any(|e| e["type"] == "CUSTOM" && e["name"] == "troupe.usage"));

    let after = done(&lines, 0);
    assert_eq!(after["result"], "Hello from the mock.");
    let assistant = after["messages"].as_array().expect("messages").iter().find(|m| m["role"] == "assistant");
    assert_eq!(assistant.map(|m| m["content"].clone()), Some(json!("Hello from the mock.")));
    assert!(after["messages"].as_array().expect("messages").iter().any(|m| m["role"] == "reasoning"));

    // The second run sends the whole thread: the model sees the earlier turn as history,
    // and the context in the instruction.
    let second = events(&lines, 1);
    assert_eq!(second.last().expect("events")["result"], "You said hello.");
    let requests = served.mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].body["messages"].to_string();
    assert!(sent.contains("say hello") && sent.contains("Hello from the mock."), "{sent}");
    assert!(sent.contains("what did I say?") && sent.contains("## current page\\n/greetings"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_interrupts_the_run_and_a_resume_approves_it_and_streams_the_rest() {
    let Some(modules) = client_modules("an_approval_interrupts_the_run") else { return };
    let served =
        serve([write_call("call_w", "notes.md", "approved content\n"), MockTurn::text("Wrote notes.md.")]).await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/coder", served.url), "threadId": "thread-w", "runs": [
            {"message": "write the notes", "runId": "run-a"},
            {"runId": "run-b", "resume": {"status": "resolved", "payload": {"approved": true}}}
        ]}),
    )
    .await;
    assert_clean(&lines);

    let interrupted = events(&lines, 0);
    let kinds = types(&interrupted);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert!(position(&kinds, "TOOL_CALL_START") < position(&kinds, "TOOL_CALL_END"), "{kinds:?}");
    assert!(!kinds.contains(&"TOOL_CALL_RESULT"), "the call has not run: {kinds:?}");
    let start = &interrupted[position(&kinds, "TOOL_CALL_START")];
    assert_eq!((start["toolCallId"].as_str(), start["toolCallName"].as_str()), (Some("call_w"), Some("fs.write")));
    assert!(start["parentMessageId"].is_string());
    let args: String =
        interrupted.iter().filter(|e| e["type"] == "TOOL_CALL_ARGS").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&args).expect("JSON arguments")["path"], "notes.md");
    let finished = interrupted.last().expect("events");
    assert_eq!(finished["type"], "RUN_FINISHED");
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(finished["outcome"]["type"], "interrupt", "{finished}");
    assert_eq!((interrupt["id"].as_str(), interrupt["reason"].as_str()), (Some("call_w"), Some("approval")));
    assert_eq!(interrupt["toolCallId"], "call_w");
    assert_eq!(interrupt["metadata"]["arguments"]["path"], "notes.md");
    assert!(interrupt["message"].as_str().is_some_and(|m| m.contains("fs.write")));
    assert_eq!(done(&lines, 0)["pendingInterrupts"][0]["id"], "call_w", "the client holds the interrupt");

    let rest = events(&lines, 1);
    let kinds = types(&rest);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"), "{kinds:?}");
    assert_eq!(rest[0]["runId"], "run-b", "the resume is a run of its own");
    let result = &rest[position(&kinds, "TOOL_CALL_RESULT")];
    assert_eq!(result["toolCallId"], "call_w");
    assert!(result.get("metadata").is_none(), "the call succeeded: {result}");
    let text: String =
        rest.iter().filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "Wrote notes.md.");
    let end = rest.last().expect("events");
    assert_eq!(end["type"], "RUN_FINISHED");
    assert!(end.get("outcome").is_none(), "success: {end}");
    assert_eq!(end["result"], "Wrote notes.md.");
    let after = done(&lines, 1);
    assert_eq!(after["pendingInterrupts"], json!([]));
    assert!(
        after["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .any(|m| m["role"] == "tool" && m["toolCallId"] == "call_w"),
        "the client placed the result in its thread"
    );
    let written = std::fs::read_to_string(served.workspace.path().join("notes.md")).expect("the file was written");
    assert_eq!(written, "approved content\n");
    let runs = served.server_hub.list();
    assert_eq!(runs.len(), 1, "both AG-UI runs showed the one troupe run");
    assert_eq!(runs[0].end.as_ref().map(|e| e.outcome), Some(troupe_core::RunOutcomeKind::Completed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_interrupt_rejects_the_call_and_the_run_waits_until_then() {
    let Some(modules) = client_modules("a_cancelled_interrupt_rejects_the_call") else { return };
    let served = serve([write_call("call_r", "secret.md", "no\n"), MockTurn::text("Understood, I won't.")]).await;
    let url = format!("{}/agui/coder", served.url);
    let lines = run_client(
        &modules,
        json!({"url": url, "threadId": "thread-r", "runs": [{"message": "write it", "runId": "run-1"}]}),
    )
    .await;
    assert_clean(&lines);
    assert_eq!(events(&lines, 0).last().expect("events")["outcome"]["interrupts"][0]["id"], "call_r");

    // Between the two requests nothing has run, and the troupe run waits.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!served.workspace.path().join("secret.md").exists());
    let views = served.server_hub.list();
    assert_eq!(views[0].phase, troupe_server::RunPhase::Waiting);
    assert_eq!(served.mock.requests().len(), 1);

    // Another client process answers it by id.
    let lines = run_client(
        &modules,
        json!({"url": url, "threadId": "thread-r", "runs": [
            {"runId": "run-2", "resume": {"status": "cancelled", "ids": ["call_r"]}}
        ]}),
    )
    .await;
    assert_clean(&lines);
    let rest = events(&lines, 0);
    let result = rest.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").expect("a result");
    assert_eq!(result["metadata"]["isError"], true, "{result}");
    assert_eq!(rest.last().expect("events")["result"], "Understood, I won't.");
    assert!(!served.workspace.path().join("secret.md").exists(), "a rejected call does not run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_selected_in_forwarded_props_is_the_model_asked() {
    let Some(modules) = client_modules("the_model_selected_in_forwarded_props") else { return };
    let served = serve([MockTurn::text("one"), MockTurn::text("two")]).await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/coder", served.url), "threadId": "thread-m", "runs": [
            {"message": "hi", "forwardedProps": {"modelSelection": {"provider": "anthropic", "model": "picked-model"}}},
            {"message": "again", "forwardedProps": {"modelSelection": "anthropic/other-model"}}
        ]}),
    )
    .await;
    assert_clean(&lines);
    let models: Vec<Value> = served.mock.requests().iter().map(|r| r.body["model"].clone()).collect();
    assert_eq!(models, [json!("picked-model"), json!("other-model")]);
    let started = events(&lines, 0)
        .into_iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "troupe.run_started")
        .expect("the troupe run's start");
    assert_eq!(started["value"]["model"], "anthropic/picked-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_before_any_stream() {
    let served = serve([write_call("call_p", "p.md", "x\n"), MockTurn::text("ok")]).await;
    let ok_body = |thread: &str| json!({"threadId": thread, "runId": "r1", "messages": [{"id": "u", "role": "user", "content": "write p"}]});
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/agui/coder", b"{not json".to_vec(), 400, "malformed_json"),
        ("/agui/coder", br#"{"runId": "r", "messages": []}"#.to_vec(), 422, "invalid_body"),
        ("/agui/coder", ok_body("../etc").to_string().into_bytes(), 400, "invalid_id"),
        ("/agui/nobody", ok_body("t").to_string().into_bytes(), 404, "unknown_agent"),
        ("/agui/bad%20name", ok_body("t").to_string().into_bytes(), 400, "invalid_id"),
        (
            "/agui/coder",
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "a", "role": "assistant", "content": "hi"}]})
                .to_string()
                .into_bytes(),
            422,
            "invalid_body",
        ),
        (
            "/agui/coder",
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}],
                   "forwardedProps": {"modelSelection": 7}})
            .to_string()
            .into_bytes(),
            422,
            "invalid_model_selection",
        ),
        (
            "/agui/coder",
            json!({"threadId": "t", "runId": "r", "messages": [],
                   "resume": [{"interruptId": "nope", "status": "resolved"}]})
            .to_string()
            .into_bytes(),
            404,
            "unknown_interrupt",
        ),
    ];
    for (path, body, status, code) in cases {
        let response = served
            .post(path)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), status, "{path} {}", String::from_utf8_lossy(&body));
        assert!(response.headers()["content-type"].to_str().expect("type").starts_with("application/json"));
        let error: Value = response.json().await.expect("a JSON error");
        assert_eq!(error["error"]["code"], code, "{error}");
    }
    assert!(served.server_hub.list().is_empty(), "no refused request started a run");

    // A run that waits: the SSE frames are bare `data:` lines, and a resume with a bad
    // payload, or from another thread, is refused without touching it.
    let response = served.post("/agui/coder").json(&ok_body("thread-p")).send().await.expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert!(response.headers().contains_key("x-troupe-run-id"));
    let mut reader = SseReader::new(response);
    let mut last = None;
    while let Some(frame) = reader.next().await {
        assert_eq!((frame.id, frame.event.as_deref()), (None, None), "AG-UI frames carry only data");
        last = Some(frame.data);
    }
    assert_eq!(last.expect("frames")["outcome"]["interrupts"][0]["id"], "call_p");
    let resume = |thread: &str, payload: Value| {
        json!({"threadId": thread, "runId": "r2", "messages": [],
               "resume": [{"interruptId": "call_p", "status": "resolved", "payload": payload}]})
    };
    for (body, status, code) in [
        (resume("thread-p", json!({"approved": false, "arguments": {}})), 422, "invalid_resume"),
        (resume("thread-p", json!("yes")), 422, "invalid_resume"),
        (resume("other-thread", json!({"approved": true})), 404, "unknown_interrupt"),
    ] {
        let response = served.post("/agui/coder").json(&body).send().await.expect("request");
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.expect("a JSON error");
        assert_eq!(error["error"]["code"], code, "{error}");
    }
    let views = served.server_hub.list();
    assert_eq!(views[0].phase, troupe_server::RunPhase::Waiting, "the run still waits");
    assert!(!served.workspace.path().join("p.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_client_reports_an_unknown_agent_as_an_http_error() {
    let Some(modules) = client_modules("the_real_client_reports_an_unknown_agent") else { return };
    let served = serve([]).await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/nobody", served.url), "threadId": "t", "runs": [{"message": "hi"}]}),
    )
    .await;
    let error = lines.iter().find_map(|l| l["error"].as_str()).expect("the run fails");
    assert!(error.contains("HTTP 404") && error.contains("unknown_agent"), "{error}");
}

/// The harness itself: a stream that breaks the protocol's ordering makes the client's
/// verifier reject the run, so the clean runs above are evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_verifier_is_on_and_rejects_a_misordered_stream() {
    let Some(modules) = client_modules("the_clients_verifier_is_on") else { return };
    let body = [
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "no start"}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ]
    .iter()
    .map(|e| format!("data: {e}\n\n"))
    .collect::<String>();
    let app = axum::Router::new().route(
        "/bad",
        axum::routing::post(move || {
            let body = body.clone();
            async move { ([("content-type", "text/event-stream")], body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/bad", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let lines = run_client(&modules, json!({"url": url, "threadId": "t", "runs": [{"message": "hi"}]})).await;
    let error = lines.iter().find_map(|l| l["error"].as_str()).expect("the client rejects the stream");
    assert!(error.contains("TEXT_MESSAGE_CONTENT"), "{error}");
}

/// A long answer: many small text events, 50 ms apart (about 10 s in all).
fn slow_answer() -> MockTurn {
    MockTurn::text("word ".repeat(200)).with_delta_chars(5).with_event_delay(Duration::from_millis(50))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_stop_stops_the_run_and_its_model_stream_within_a_second() {
    let Some(modules) = client_modules("the_clients_stop_stops_the_run") else { return };
    let served = serve([slow_answer()]).await;
    let plan = json!({
        "url": format!("{}/agui/coder", served.url),
        "threadId": "thread-stop",
        "runs": [{"message": "Tell me a long story", "abortAfter": "TEXT_MESSAGE_CONTENT"}],
    });
    let lines = run_client(&modules, plan).await;
    let aborted = lines.iter().find_map(|l| l["aborted"].as_u64()).unwrap_or_else(|| panic!("no abort: {lines:#?}"));
    let aborted = std::time::UNIX_EPOCH + Duration::from_millis(aborted);
    // The model's stream is dropped: the mock sees its answer abandoned.
    let mut closed = None;
    for _ in 0..150 {
        if let Some(at) = served.mock.abandoned_streams().first() {
            closed = Some(*at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let closed = closed.expect("the model stream was closed");
    let took = closed.duration_since(aborted).unwrap_or_default();
    assert!(took < Duration::from_secs(1), "the model stream stopped {took:?} after the client's Stop");
    let runs = served.server_hub.list();
    assert_eq!(runs.len(), 1);
    let run = served.server_hub.get(runs[0].run_id.as_str()).expect("held");
    for _ in 0..100 {
        if run.is_ended() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = run.view().end.expect("the run ended");
    assert_eq!(end.outcome, troupe_core::RunOutcomeKind::Cancelled, "{end:?}");
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_detaches_leaves_its_run_going() {
    let Some(modules) = client_modules("a_client_that_detaches_leaves_its_run_going") else { return };
    let served =
        serve([MockTurn::text("word ".repeat(40)).with_delta_chars(5).with_event_delay(Duration::from_millis(20))])
            .await;
    let plan = json!({
        "url": format!("{}/agui/coder", served.url),
        "threadId": "thread-detach",
        "runs": [{"message": "Go on without me", "abortAfter": "TEXT_MESSAGE_CONTENT",
                  "forwardedProps": {"detach": true}}],
    });
    let lines = run_client(&modules, plan).await;
    assert!(lines.iter().any(|l| l.get("aborted").is_some()), "{lines:#?}");
    let runs = served.server_hub.list();
    let run = served.server_hub.get(runs[0].run_id.as_str()).expect("held");
    for _ in 0..300 {
        if run.is_ended() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = run.view().end.expect("the run ended");
    assert_eq!(end.outcome, troupe_core::RunOutcomeKind::Completed, "{end:?}");
    assert!(served.mock.abandoned_streams().is_empty(), "the model answered to the end");
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_shared_state_reaches_the_model() {
    let Some(modules) = client_modules("the_clients_shared_state_reaches_the_model") else { return };
    let served = serve([MockTurn::text("You have apples.")]).await;
    let plan = json!({
        "url": format!("{}/agui/coder", served.url),
        "threadId": "thread-state",
        "state": {"cart": ["apples"], "total": 3},
        "runs": [{"message": "What is in my cart?"}],
    });
    let lines = run_client(&modules, plan).await;
    assert_clean(&lines);
    done(&lines, 0);
    let sent = served.mock.requests()[0].body.to_string();
    assert!(sent.contains("shared state") && sent.contains("apples"), "the model reads the state: {sent}");
    served.shutdown.cancel();
}
