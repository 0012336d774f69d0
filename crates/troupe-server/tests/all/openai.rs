//! The OpenAI-compatible routes with the official OpenAI Python SDK (`openai`, run as a
//! real process by `tests/openai/client.py`): models, chat completions and responses,
//! streamed and not, the refusals the SDK raises as its typed errors, and a run that
//! waits for an approval.

use crate::common::{serve, write_call};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use troupe_server::ServerConfig;
use troupe_testkit::{MockTurn, test_deps};

/// The test virtualenv's Python when it has the OpenAI SDK; `None` (and a note) when not.
fn python(test: &str) -> Option<PathBuf> {
    let found = test_deps::python_with("openai");
    if found.is_none() {
        test_deps::skip(test, "the Python package openai is not installed in .test-deps/py");
    }
    found
}

/// Runs `scenario` of the client script against the server at `url`; its JSON lines.
async fn scenario(python: &Path, name: &str, url: &str) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openai/client.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(&script).arg(name).arg(url).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("the client finishes within 90 s")
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "client.py {name} failed:\n{stdout}\n{stderr}");
    stdout.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

fn last<'a>(lines: &'a [Value], event: &str) -> &'a Value {
    lines.iter().rev().find(|l| l["event"] == event).unwrap_or_else(|| panic!("no `{event}` in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_lists_the_agents_as_models_and_completes_chats_streamed_and_not() {
    let Some(python) = python("the_sdk_lists_the_agents_as_models_and_completes_chats_streamed_and_not") else {
        return;
    };
    let served = serve(ServerConfig::default(), [MockTurn::text("It is 4."), MockTurn::text("Streamed answer.")]).await;
    let out = scenario(&python, "models", &served.url).await;
    assert_eq!(last(&out, "models")["ids"], json!(["coder"]));
    assert_eq!(last(&out, "model")["id"], "coder");
    assert_eq!(last(&out, "unknown")["raised"], "NotFoundError");
    assert_eq!(last(&out, "unknown")["code"], "model_not_found");

    let out = scenario(&python, "chat", &served.url).await;
    let chat = last(&out, "chat");
    assert_eq!(chat["content"], "It is 4.");
    assert_eq!((chat["role"].as_str(), chat["finish_reason"].as_str()), (Some("assistant"), Some("stop")));
    assert_eq!(chat["object"], "chat.completion");
    assert!(chat["usage"]["total_tokens"].as_u64().is_some_and(|n| n > 0), "{chat}");
    let run = chat["run_id"].as_str().expect("the run's id in x-troupe-run-id");
    let view: Value = served.get(&format!("/v1/runs/{run}")).send().await.expect("get").json().await.expect("json");
    assert_eq!(view["end"]["outcome"], "completed", "a run like any other: {view}");
    // The system message comes before the task; the earlier turns are the run's history.
    let sent = served.mock.requests()[0].body.to_string();
    assert!(sent.contains("Answer in one line.") && sent.contains("Say it now."), "{sent}");
    assert!(sent.contains("What is 2 + 2?") && sent.contains("Let me think."), "{sent}");

    let out = scenario(&python, "chat_stream", &served.url).await;
    let streamed = last(&out, "chat_stream");
    let deltas: Vec<&str> = streamed["deltas"].as_array().expect("deltas").iter().filter_map(Value::as_str).collect();
    assert_eq!(deltas.concat(), "Streamed answer.");
    assert!(deltas.len() > 1, "streamed in pieces: {deltas:?}");
    assert_eq!(streamed["finish_reason"], "stop");
    assert!(streamed["usage"]["completion_tokens"].as_u64().is_some_and(|n| n > 0), "{streamed}");
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_creates_responses_streamed_and_not() {
    let Some(python) = python("the_sdk_creates_responses_streamed_and_not") else { return };
    let served = serve(ServerConfig::default(), [MockTurn::text("It is 4."), MockTurn::text("Streamed answer.")]).await;
    let out = scenario(&python, "responses", &served.url).await;
    let response = last(&out, "responses");
    assert_eq!(response["text"], "It is 4.");
    assert_eq!(response["status"], "completed");
    assert!(response["usage"]["output_tokens"].as_u64().is_some_and(|n| n > 0), "{response}");
    assert!(response["id"].as_str().is_some_and(|id| id.starts_with("resp_")), "{response}");
    let sent = served.mock.requests()[0].body.to_string();
    assert!(sent.contains("Answer in one line.") && sent.contains("What is 2 + 2?"), "{sent}");

    let out = scenario(&python, "responses_stream", &served.url).await;
    let streamed = last(&out, "responses_stream");
    assert_eq!(streamed["text"], "Streamed answer.");
    assert_eq!(streamed["final"], "Streamed answer.");
    assert_eq!(streamed["status"], "completed");
    let kinds: Vec<&str> = streamed["kinds"].as_array().expect("kinds").iter().filter_map(Value::as_str).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert!(kinds.contains(&"response.output_text.delta") && kinds.contains(&"response.output_item.done"), "{kinds:?}");
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_the_sdks_typed_errors_and_start_no_run() {
    let Some(python) = python("bad_requests_are_the_sdks_typed_errors_and_start_no_run") else { return };
    let served = serve(ServerConfig::default(), []).await;
    let out = scenario(&python, "refusals", &served.url).await;
    let case = |name: &str| {
        out.iter().find(|l| l["case"] == name).unwrap_or_else(|| panic!("no case {name} in {out:#?}")).clone()
    };
    assert_eq!(case("unknown_model")["raised"], "NotFoundError");
    assert_eq!(case("unknown_model")["code"], "model_not_found");
    assert_eq!(case("responses_unknown_model")["raised"], "NotFoundError");
    for name in ["empty", "tool_role", "image", "last_not_user"] {
        let refused = case(name);
        assert_eq!(refused["raised"], "BadRequestError", "{refused}");
        assert_eq!(refused["status"], 400, "{refused}");
    }
    assert!(case("image")["message"].as_str().is_some_and(|m| m.contains("image_url")), "{out:#?}");
    let runs: Value = served.get("/v1/runs").send().await.expect("get").json().await.expect("json");
    assert_eq!(runs["runs"], json!([]), "no run was started");
    assert!(served.mock.requests().is_empty(), "no model was called");
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_an_approval_ends_the_completion_naming_the_call() {
    let Some(python) = python("a_run_waiting_for_an_approval_ends_the_completion_naming_the_call") else { return };
    let turns = [write_call("c1", "notes.txt", "the notes"), MockTurn::text("Wrote them.")];
    let served = serve(ServerConfig::default(), turns).await;
    let out = scenario(&python, "approval", &served.url).await;
    let waiting = last(&out, "approval");
    let troupe = &waiting["troupe"];
    assert_eq!(troupe["pending"][0]["tool"], "fs.write", "{waiting}");
    assert_eq!(troupe["pending"][0]["call_id"], "c1", "{waiting}");
    assert!(waiting["content"].as_str().is_some_and(|c| c.contains("fs.write")), "{waiting}");
    // The decision goes to the native API, and the run completes.
    let run = troupe["run_id"].as_str().expect("a run id");
    let approved = served
        .post(&format!("/v1/runs/{run}/signals"))
        .json(&json!({"type": "approval", "call_id": "c1", "decision": {"type": "approve"}}))
        .send()
        .await
        .expect("post");
    assert_eq!(approved.status(), 202);
    for _ in 0..500 {
        let view: Value = served.get(&format!("/v1/runs/{run}")).send().await.expect("get").json().await.expect("json");
        if view["phase"] == "ended" {
            assert_eq!(view["end"]["outcome"], "completed", "{view}");
            assert!(served.workspace.path().join("notes.txt").exists(), "the approved write happened");
            served.shutdown.cancel();
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the approved run did not end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_is_an_error_the_sdk_raises() {
    let Some(python) = python("a_run_that_fails_is_an_error_the_sdk_raises") else { return };
    let served = serve(ServerConfig::default(), [MockTurn::status(400, "the request is malformed")]).await;
    let out = scenario(&python, "failed", &served.url).await;
    let failed = last(&out, "failed");
    assert_eq!(failed["status"], 502, "{failed}");
    assert_eq!(failed["code"], "run_failed", "{failed}");
    assert!(failed["message"].as_str().is_some_and(|m| m.contains("malformed")), "{failed}");
    served.shutdown.cancel();
}
