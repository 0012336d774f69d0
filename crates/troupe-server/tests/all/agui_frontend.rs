//! What a CopilotKit-style frontend needs of the AG-UI endpoint, driven by the real
//! `@ag-ui/client` over loopback HTTP: tools the client runs itself (answered by a
//! `resume` entry or by a `tool` message, or cancelled), the state it shares with the
//! agent (a snapshot at the start, a delta per change, the same state after a resume),
//! the messages snapshot a client without history rebuilds its thread from, and the JSON
//! errors for what cannot be offered or answered.

use crate::agui::{assert_clean, client_modules, done, events, position, run_client, serve, types};
use serde_json::{Value, json};
use troupe_testkit::MockTurn;

/// The client tool the tests' frontend offers.
fn pick_color() -> Value {
    json!({
        "name": "pick_color",
        "description": "Asks the user to pick a color.",
        "parameters": {"type": "object", "properties": {"for": {"type": "string"}}, "required": ["for"]}
    })
}

/// The model calls `pick_color` for the wall.
fn color_call(id: &str) -> MockTurn {
    MockTurn::tool_call(id, "pick_color", json!({"for": "wall"}))
}

/// The result block the model was sent for call `call`, in the Anthropic wire's shape.
fn sent_result(body: &Value, call: &str) -> Option<Value> {
    body["messages"].as_array()?.iter().find_map(|message| {
        message["content"]
            .as_array()?
            .iter()
            .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == call)
            .cloned()
    })
}

fn interrupt(events: &[Value]) -> Value {
    let finished = events.last().expect("events");
    assert_eq!(finished["type"], "RUN_FINISHED", "{finished}");
    assert_eq!(finished["outcome"]["type"], "interrupt", "{finished}");
    finished["outcome"]["interrupts"][0].clone()
}

/// The messages snapshot comes just before `RUN_FINISHED`.
fn snapshot_before_the_end(events: &[Value]) -> Vec<Value> {
    let kinds = types(events);
    assert_eq!(kinds[kinds.len() - 2], "MESSAGES_SNAPSHOT", "{kinds:?}");
    events[kinds.len() - 2]["messages"].as_array().expect("messages").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_interrupts_the_run_and_its_result_sent_by_resume_reaches_the_model() {
    let Some(modules) = client_modules("a_client_tool_interrupts_the_run") else { return };
    let served = serve([color_call("call_c"), MockTurn::text("Painting it teal.")]).await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/coder", served.url), "threadId": "thread-ct", "runs": [
            {"message": "paint the wall", "runId": "run-1", "tools": [pick_color()]},
            {"runId": "run-2", "resume": {"status": "resolved", "payload": {"color": "teal"}}}
        ]}),
    )
    .await;
    assert_clean(&lines);

    // The model was offered the client's tool beside the agent's own.
    let requests = served.mock.requests();
    let offered = requests[0].body["tools"].as_array().expect("tools").clone();
    let tool = offered.iter().find(|t| t["name"] == "pick_color").expect("the client tool is offered");
    assert_eq!(tool["input_schema"]["required"], json!(["for"]));
    assert!(offered.iter().any(|t| t["name"] == "fs_read"), "and the agent's: {offered:?}");

    let first = events(&lines, 0);
    let kinds = types(&first);
    assert!(position(&kinds, "TOOL_CALL_START") < position(&kinds, "TOOL_CALL_END"), "{kinds:?}");
    assert!(!kinds.contains(&"TOOL_CALL_RESULT"), "nothing here ran it: {kinds:?}");
    let asked = interrupt(&first);
    assert_eq!((asked["id"].as_str(), asked["reason"].as_str()), (Some("call_c"), Some("client_tool")));
    assert_eq!(asked["toolCallId"], "call_c");
    assert_eq!(asked["metadata"], json!({"tool": "pick_color", "arguments": {"for": "wall"}}));
    assert_eq!(done(&lines, 0)["pendingInterrupts"][0]["id"], "call_c");

    let rest = events(&lines, 1);
    let kinds = types(&rest);
    assert_eq!(rest[0]["runId"], "run-2");
    let result = &rest[position(&kinds, "TOOL_CALL_RESULT")];
    assert_eq!(
        (result["toolCallId"].as_str(), result["content"].as_str()),
        (Some("call_c"), Some(r#"{"color":"teal"}"#))
    );
    let end = rest.last().expect("events");
    assert!(end.get("outcome").is_none(), "success: {end}");
    assert_eq!(end["result"], "Painting it teal.");

    // The same troupe run went on, and the model saw the client's result as the call's.
    let requests = served.mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = sent_result(&requests[1].body, "call_c").expect("the result was sent");
    assert!(sent.to_string().contains(r#"{\"color\":\"teal\"}"#), "{sent}");
    assert_ne!(sent["is_error"], true, "{sent}");
    let runs = served.server_hub.list();
    assert_eq!(runs.len(), 1, "one troupe run");
    assert_eq!(runs[0].end.as_ref().map(|e| e.outcome), Some(troupe_core::RunOutcomeKind::Completed));
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_answered_with_a_tool_message_as_copilotkit_does_reaches_the_model_once() {
    let Some(modules) = client_modules("a_client_tool_answered_with_a_tool_message") else { return };
    let served = serve([color_call("call_m"), MockTurn::text("Teal it is.")]).await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/coder", served.url), "threadId": "thread-cm", "runs": [
            {"message": "paint the wall", "runId": "run-1", "tools": [pick_color()]},
            {"runId": "run-2", "tools": [pick_color()], "toolResult": {"content": "teal"}}
        ]}),
    )
    .await;
    assert_clean(&lines);
    assert_eq!(interrupt(&events(&lines, 0))["reason"], "client_tool");

    let rest = events(&lines, 1);
    let kinds = types(&rest);
    assert!(!kinds.contains(&"TOOL_CALL_RESULT"), "the client has the result already: {kinds:?}");
    assert_eq!(rest.last().expect("events")["result"], "Teal it is.");
    let requests = served.mock.requests();
    assert_eq!(requests.len(), 2, "no new troupe run: the waiting one went on");
    let sent = sent_result(&requests[1].body, "call_m").expect("the result was sent");
    assert!(sent.to_string().contains("teal"), "{sent}");
    let after = done(&lines, 1);
    let messages = after["messages"].as_array().expect("messages");
    let results: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 1, "one result in the thread: {messages:#?}");
    assert_eq!((results[0]["id"].as_str(), results[0]["toolCallId"].as_str()), (Some("tool-1"), Some("call_m")));
    assert_eq!(served.server_hub.list().len(), 1);
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_client_tool_is_an_error_for_the_model_and_a_fresh_client_rebuilds_the_thread() {
    let Some(modules) = client_modules("a_cancelled_client_tool_is_an_error") else { return };
    let served = serve([color_call("call_x"), MockTurn::text("Fine, no color then.")]).await;
    let url = format!("{}/agui/coder", served.url);
    let lines = run_client(
        &modules,
        json!({"url": url, "threadId": "thread-cx", "runs": [
            {"message": "paint the wall", "runId": "run-1", "tools": [pick_color()]}
        ]}),
    )
    .await;
    assert_clean(&lines);
    let first = events(&lines, 0);
    assert_eq!(interrupt(&first)["id"], "call_x");
    let snapshot = snapshot_before_the_end(&first);
    assert_eq!(snapshot[0]["id"], "user-0", "the client's own messages keep their ids");
    let call = snapshot.iter().find(|m| m["role"] == "assistant").expect("the call's message");
    assert_eq!(call["toolCalls"][0]["id"], "call_x");
    assert_eq!(call["toolCalls"][0]["type"], "function");

    // Another client, which never saw the thread, dismisses the call by id.
    let lines = run_client(
        &modules,
        json!({"url": url, "threadId": "thread-cx", "runs": [
            {"runId": "run-2", "resume": {"status": "cancelled", "ids": ["call_x"]}}
        ]}),
    )
    .await;
    assert_clean(&lines);
    let rest = events(&lines, 0);
    let result = rest.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").expect("a result");
    assert_eq!(result["metadata"]["isError"], true, "{result}");
    assert_eq!(rest.last().expect("events")["result"], "Fine, no color then.");
    let sent = sent_result(&served.mock.requests()[1].body, "call_x").expect("the result was sent");
    assert_eq!(sent["is_error"], true, "{sent}");
    assert!(sent.to_string().contains("cancelled"), "{sent}");

    // The snapshot gave the fresh client the call it never saw, in order.
    let messages = done(&lines, 0)["messages"].as_array().expect("messages").clone();
    let shape: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["role"] != "reasoning")
        .map(|m| {
            let what = match m["role"].as_str() {
                Some("assistant") if m["toolCalls"].is_array() => format!("calls {}", m["toolCalls"][0]["id"]),
                Some("tool") => format!("answers {}", m["toolCallId"]),
                _ => m["content"].as_str().unwrap_or_default().to_owned(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), what)
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("assistant".to_owned(), "calls \"call_x\"".to_owned()),
            ("tool".to_owned(), "answers \"call_x\"".to_owned()),
            ("assistant".to_owned(), "Fine, no color then.".to_owned()),
        ],
        "{messages:#?}"
    );
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_state_is_snapshotted_patched_by_the_agent_and_kept_across_a_resume() {
    let Some(modules) = client_modules("the_shared_state_is_snapshotted") else { return };
    let add = json!({"patch": [{"op": "add", "path": "/items/-", "value": "eggs"}]});
    let bad = json!({"patch": [{"op": "remove", "path": "/nothing"}]});
    let served = serve([
        MockTurn::tool_call("call_s", "state.update", add).with_tool_call("call_bad", "state.update", bad),
        color_call("call_p"),
        MockTurn::text("Eggs added, wall teal."),
    ])
    .await;
    let lines = run_client(
        &modules,
        json!({"url": format!("{}/agui/coder", served.url), "threadId": "thread-st",
               "state": {"items": ["milk"]}, "runs": [
            {"message": "add eggs, then paint the wall", "runId": "run-1", "tools": [pick_color()]},
            {"runId": "run-2", "tools": [pick_color()], "resume": {"status": "resolved", "payload": "teal"}}
        ]}),
    )
    .await;
    assert_clean(&lines);

    let first = events(&lines, 0);
    let kinds = types(&first);
    // The AG-UI run starts with the state it was sent.
    let snapshot = position(&kinds, "STATE_SNAPSHOT");
    assert!(kinds[..snapshot].iter().all(|k| matches!(*k, "RUN_STARTED" | "CUSTOM")), "{kinds:?}");
    assert_eq!(first[snapshot]["snapshot"], json!({"items": ["milk"]}));
    // One change, announced before its result; the bad patch is an error for the model.
    let deltas: Vec<&Value> = first.iter().filter(|e| e["type"] == "STATE_DELTA").collect();
    assert_eq!(deltas.len(), 1, "{kinds:?}");
    assert_eq!(deltas[0]["delta"], json!([{"op": "add", "path": "/items/-", "value": "eggs"}]));
    assert!(position(&kinds, "STATE_DELTA") < position(&kinds, "TOOL_CALL_RESULT"), "{kinds:?}");
    let failed = first
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "call_bad")
        .expect("the bad patch's result");
    assert_eq!(failed["metadata"]["isError"], true, "{failed}");
    assert_eq!(interrupt(&first)["id"], "call_p");
    assert_eq!(done(&lines, 0)["state"], json!({"items": ["milk", "eggs"]}), "the client applied the delta");
    let sent = served.mock.requests()[1].body.to_string();
    assert!(sent.contains("not applied"), "the model was told the bad patch failed: {sent}");

    // The resumed AG-UI run starts with the state the troupe run has.
    let rest = events(&lines, 1);
    let kinds = types(&rest);
    assert_eq!(rest[position(&kinds, "STATE_SNAPSHOT")]["snapshot"], json!({"items": ["milk", "eggs"]}));
    assert_eq!(rest.last().expect("events")["result"], "Eggs added, wall teal.");
    assert_eq!(done(&lines, 1)["state"], json!({"items": ["milk", "eggs"]}));
    served.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_that_cannot_be_offered_and_answers_for_unknown_calls_get_json_errors() {
    let served = serve([color_call("call_q"), MockTurn::text("ok")]).await;
    let ask = |tools: Value| {
        json!({"threadId": "thread-q", "runId": "r1", "tools": tools,
               "messages": [{"id": "u", "role": "user", "content": "paint"}]})
    };
    let answer = |call: &str| {
        json!({"threadId": "thread-q", "runId": "r2", "messages": [
            {"id": "u", "role": "user", "content": "paint"},
            {"id": "t", "role": "tool", "toolCallId": call, "content": "teal"}]})
    };
    let cases = [
        (ask(json!([{"name": "fs.read", "parameters": {"type": "object"}}])), 422, "invalid_client_tools", "own tools"),
        (ask(json!([{"name": "state.update"}])), 422, "invalid_client_tools", "own tools"),
        (ask(json!([{"name": "pick", "parameters": {"type": "string"}}])), 422, "invalid_client_tools", "`type`"),
        (ask(json!([{"name": "pick"}, {"name": "pick"}])), 422, "invalid_client_tools", "twice"),
        (ask(json!([{"name": "no spaces"}])), 422, "invalid_client_tools", "a name is"),
        (answer("call_unknown"), 404, "unknown_interrupt", "call_unknown"),
    ];
    for (body, status, code, says) in cases {
        let response = served.post("/agui/coder").json(&body).send().await.expect("request");
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.expect("a JSON error");
        assert_eq!(error["error"]["code"], code, "{error}");
        assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains(says)), "{error}");
    }
    assert!(served.server_hub.list().is_empty(), "no refused request started a run");

    // The native API answers a client tool's call too, once, and only a call that waits.
    let response = served.post("/agui/coder").json(&ask(json!([pick_color()]))).send().await.expect("request");
    let run = response.headers()["x-troupe-run-id"].to_str().expect("a run id").to_owned();
    let _ = response.text().await;
    let result = |call: &str| json!({"type": "tool_result", "call_id": call, "content": "teal"});
    let signals = format!("/v1/runs/{run}/signals");
    for (body, status) in [(result("call_other"), 409), (result("call_q"), 202), (result("call_q"), 409)] {
        let response = served.post(&signals).json(&body).send().await.expect("request");
        assert_eq!(response.status(), status, "{body}");
    }
    let hub_run = served.server_hub.get(&run).expect("held");
    for _ in 0..500 {
        if hub_run.is_ended() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(hub_run.view().end.map(|e| e.output), Some(Some("ok".to_owned())));
    let sent = sent_result(&served.mock.requests()[1].body, "call_q").expect("the result was sent");
    assert!(sent.to_string().contains("teal"), "{sent}");

    // A run waiting for an approval is not answered by a tool message.
    let served = serve([crate::common::write_call("call_w", "w.md", "x\n"), MockTurn::text("ok")]).await;
    let response = served
        .post("/agui/coder")
        .json(&json!({"threadId": "thread-w", "runId": "r1",
                      "messages": [{"id": "u", "role": "user", "content": "write"}]}))
        .send()
        .await
        .expect("request");
    let _ = response.text().await;
    let response = served
        .post("/agui/coder")
        .json(&json!({"threadId": "thread-w", "runId": "r2", "messages": [
            {"id": "u", "role": "user", "content": "write"},
            {"id": "t", "role": "tool", "toolCallId": "call_w", "content": "done"}]}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 422);
    let error: Value = response.json().await.expect("a JSON error");
    assert_eq!(error["error"]["code"], "invalid_resume", "{error}");
    assert_eq!(served.server_hub.list()[0].phase, troupe_server::RunPhase::Waiting, "the run still waits");
    assert!(!served.workspace.path().join("w.md").exists());
}
