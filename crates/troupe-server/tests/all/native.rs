//! The native API over real loopback HTTP: runs streamed as SSE, approvals through
//! signals, lossless reconnects, the WebSocket, the OpenAPI document, shutdown.

use crate::common;

use common::{Frame, SseReader, a_store, serve, serve_with_store, write_call};
use futures::{SinkExt, StreamExt};
use std::time::Duration;
use troupe_server::ServerConfig;
use troupe_testkit::MockTurn;

fn types(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.event.as_deref().unwrap_or("")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_every_event_as_sse_with_positions_and_types() {
    let served = serve(ServerConfig::default(), [MockTurn::text("Hello from the mock.")]).await;
    let response = served
        .post("/v1/runs")
        .json(&serde_json::json!({"agent": "coder", "instruction": "say hello"}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let run_id = response.headers()["x-troupe-run-id"].to_str().expect("id").to_owned();
    let mut reader = SseReader::new(response);
    let mut frames = Vec::new();
    while let Some(frame) = reader.next().await {
        frames.push(frame);
    }
    let kinds = types(&frames);
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    assert!(kinds.contains(&"message_delta"));
    for (n, frame) in frames.iter().enumerate() {
        assert_eq!(frame.id, Some(n), "positions are 0, 1, 2, … without gaps");
        assert_eq!(frame.data["type"].as_str(), frame.event.as_deref(), "the SSE event names the event's type");
        assert_eq!(frame.data["run_id"], run_id.as_str());
    }
    let text: String = frames.iter().filter_map(|f| f.data["delta"].as_str()).collect();
    assert_eq!(text, "Hello from the mock.");
    assert_eq!(frames.last().expect("frames").data["outcome"], "completed");

    let view: serde_json::Value =
        served.get(&format!("/v1/runs/{run_id}")).send().await.expect("request").json().await.expect("json");
    assert_eq!(view["phase"], "ended");
    assert_eq!(view["end"]["output"], "Hello from the mock.");
    assert_eq!(view["events"], frames.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_pause_waits_for_a_signal_then_the_call_runs() {
    let served = serve(
        ServerConfig::default(),
        [write_call("call_w", "notes.md", "approved content\n"), MockTurn::text("Wrote notes.md.")],
    )
    .await;
    let run_id = served.start("write the notes").await;
    let paused = served.events_until(&run_id, None, |f| f.event.as_deref() == Some("run_paused")).await;
    let pause = paused.last().expect("a pause");
    assert_eq!(pause.data["reason"]["type"], "approval");
    assert_eq!(pause.data["reason"]["call_id"], "call_w");
    assert!(!served.workspace.path().join("notes.md").exists(), "nothing is written before the approval");

    let view = served.wait_phase(&run_id, "waiting").await;
    assert_eq!(view["pending"][0]["call_id"], "call_w");

    let accepted = served.approve(&run_id, "call_w").await;
    assert_eq!(accepted.status(), 202);
    let again = served.approve(&run_id, "call_w").await;
    assert_eq!(again.status(), 409, "a decision is taken once");

    let rest = served.events_until(&run_id, pause.id, |_| false).await;
    assert_eq!(rest.first().and_then(|f| f.id), pause.id.map(|n| n + 1));
    let result = rest.iter().find(|f| f.event.as_deref() == Some("tool_call_result")).expect("the call ran");
    assert_eq!(result.data["is_error"], false);
    assert_eq!(rest.last().expect("frames").data["outcome"], "completed");
    let written = std::fs::read_to_string(served.workspace.path().join("notes.md")).expect("the file was written");
    assert_eq!(written, "approved content\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_mid_run_reconnects_with_last_event_id_and_gets_every_event_once_in_order() {
    let long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen";
    let slow = MockTurn::text(long).with_delta_chars(3).with_event_delay(Duration::from_millis(15));
    let served = serve(ServerConfig::default(), [slow]).await;
    let run_id = served.start("count slowly").await;

    // The first client reads six events, then drops its connection mid-run.
    let first = served.events_until(&run_id, None, |f| f.id == Some(5)).await;
    assert_eq!(first.len(), 6);
    let view: serde_json::Value =
        served.get(&format!("/v1/runs/{run_id}")).send().await.expect("request").json().await.expect("json");
    assert_ne!(view["phase"], "ended", "the drop happened mid-run");

    // It reconnects with the last id it saw and reads to the end.
    let last_seen = first.last().and_then(|f| f.id);
    let second = served.events_until(&run_id, last_seen, |_| false).await;
    let mut seen: Vec<Frame> = first.into_iter().chain(second).collect();

    // The whole log, read once the run has ended, is the reference.
    let all = served.events_until(&run_id, None, |_| false).await;
    assert_eq!(all.last().and_then(|f| f.event.as_deref()), Some("run_finished"));
    let positions: Vec<Option<usize>> = seen.iter().map(|f| f.id).collect();
    let expected: Vec<Option<usize>> = (0..all.len()).map(Some).collect();
    assert_eq!(positions, expected, "every event exactly once, in order");
    for (got, want) in seen.iter_mut().zip(&all) {
        assert_eq!(got.data, want.data);
    }
    let text: String = seen.iter().filter_map(|f| f.data["delta"].as_str()).collect();
    assert_eq!(text, long);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_starts_follows_and_signals_a_run() {
    let served = serve(
        ServerConfig::default(),
        [write_call("call_ws", "ws.txt", "over the socket\n"), MockTurn::text("Done over WS.")],
    )
    .await;
    let mut socket = Socket::open(&served).await;
    socket.send(serde_json::json!({"type": "start", "agent": "coder", "instruction": "write ws.txt"})).await;
    socket.send(serde_json::json!({"type": "subscribe", "run_id": "../../etc"})).await;

    let mut run_id = String::new();
    let mut kinds = Vec::new();
    let mut errors = Vec::new();
    loop {
        let value = socket.next().await;
        match value["type"].as_str() {
            Some("started") => run_id = value["run_id"].as_str().expect("id").to_owned(),
            Some("error") => errors.push(value["code"].as_str().unwrap_or("").to_owned()),
            Some("event") => {
                let kind = value["event"]["type"].as_str().unwrap_or("").to_owned();
                if kind == "run_paused" {
                    let call = value["event"]["reason"]["call_id"].as_str().expect("call").to_owned();
                    let signal = serde_json::json!({"type": "signal", "run_id": run_id,
                        "signal": {"type": "approval", "call_id": call, "decision": {"type": "approve"}}});
                    socket.send(signal).await;
                }
                kinds.push(kind);
            }
            Some("ended") => {
                assert_eq!(value["end"]["outcome"], "completed");
                break;
            }
            _ => {}
        }
    }
    assert!(!run_id.is_empty());
    assert_eq!(errors, vec!["invalid_id".to_owned()], "a bad id is refused with a typed error");
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert!(kinds.iter().any(|k| k == "run_paused"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    let written = std::fs::read_to_string(served.workspace.path().join("ws.txt")).expect("written");
    assert_eq!(written, "over the socket\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_path_is_served() {
    let served = serve(ServerConfig::default(), []).await;
    let doc: serde_json::Value = served.get("/openapi.json").send().await.expect("request").json().await.expect("json");
    assert_eq!(doc["openapi"], "3.1.0");
    for (path, method) in troupe_server::openapi::PATHS {
        assert!(doc["paths"][path][method].is_object());
        let concrete = path.replace("{id}", "no_such_run").replace("{agent}", "coder").replace("{file}", "console.js");
        let response = match *method {
            "get" => served.get(&concrete).send().await,
            _ => served.post(&concrete).json(&serde_json::json!({})).send().await,
        }
        .expect("request");
        let status = response.status();
        // The first part of the body: a stream (`/v1/runs/changes`) does not end.
        let mut response = response;
        let first = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await;
        let body = first.ok().and_then(Result::ok).flatten().map(|b| String::from_utf8_lossy(&b).into_owned());
        let body = body.unwrap_or_default();
        assert!(!body.contains("\"not_found\""), "{method} {path} is not routed: {status} {body}");
    }
    let agents: serde_json::Value = served.get("/v1/agents").send().await.expect("request").json().await.expect("json");
    assert_eq!(agents["agents"][0]["name"], "coder");
    assert_eq!(agents["agents"][0]["model"], "mock-model");
    assert!(agents["agents"][0]["tools"].as_array().is_some_and(|t| t.iter().any(|n| n == "fs.write")));
    // Each tool's arguments' schema, for a person editing a waiting call.
    let write = &agents["agents"][0]["inputs"]["fs.write"];
    assert_eq!(write["required"], serde_json::json!(["path", "content"]), "{agents}");
    assert!(write["properties"]["path"]["description"].is_string(), "{agents}");
}

/// A connection that has sent nothing when the server stops is closed at once, not left
/// to hold the shutdown up until its header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_does_not_hold_the_shutdown_up() {
    let config = ServerConfig { header_timeout: Duration::from_secs(60), ..ServerConfig::default() };
    let served = serve(config, []).await;
    let address = served.url.trim_start_matches("http://").to_owned();
    let _silent = tokio::net::TcpStream::connect(&address).await.expect("connects");
    // Accepted, and waiting for its first byte.
    tokio::time::sleep(Duration::from_millis(200)).await;
    served.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), served.serving)
        .await
        .expect("serve returns long before the header timeout")
        .expect("joined")
        .expect("ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_streams_and_cancels_runs_left_without_a_store() {
    let config = ServerConfig { shutdown_grace: Duration::from_millis(200), ..ServerConfig::default() };
    let served = serve(config, [write_call("call_s", "never.txt", "x")]).await;
    let run_id = served.start("wait for approval").await;
    served.wait_phase(&run_id, "waiting").await;
    let stream = served.get(&format!("/v1/runs/{run_id}/events")).send().await.expect("request");
    let mut reader = SseReader::new(stream);
    served.shutdown.cancel();
    let drained = async { while reader.next().await.is_some() {} };
    tokio::time::timeout(Duration::from_secs(10), drained).await.expect("the open stream ends");
    tokio::time::timeout(Duration::from_secs(10), served.serving)
        .await
        .expect("serve returns")
        .expect("joined")
        .expect("ok");
    let run = served.server_hub.get(&run_id).expect("held");
    let end = run.view().end.expect("the run ended");
    assert_eq!(end.outcome, troupe_core::RunOutcomeKind::Cancelled);
    assert!(!served.workspace.path().join("never.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_runs_served_in_prometheus_text() {
    let served = serve(
        ServerConfig::default(),
        [write_call("call_m", "m.txt", "metered\n"), MockTurn::text("Metered."), MockTurn::text("Second.")],
    )
    .await;
    let first = served.start("write m.txt").await;
    served.wait_phase(&first, "waiting").await;
    assert_eq!(served.approve(&first, "call_m").await.status(), 202);
    served.wait_phase(&first, "ended").await;
    let second = served.start("answer").await;
    served.wait_phase(&second, "ended").await;

    let response = served.get("/metrics").send().await.expect("request");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().expect("type").starts_with("text/plain"));
    let text = response.text().await.expect("text");
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    };
    assert_eq!(value("troupe_runs_started_total", None), 2.0, "{text}");
    assert_eq!(value("troupe_runs_finished_total", Some(("outcome", "completed"))), 2.0, "{text}");
    assert_eq!(value("troupe_model_calls_total", None), 3.0, "{text}");
    assert_eq!(value("troupe_tool_approval_requests_total", None), 1.0, "{text}");
    assert!(value("troupe_tokens_total", None) > 0.0, "{text}");
    assert_eq!(value("troupe_active_runs", None), 0.0);
    // The GenAI conventions' metrics, with their attributes: one duration per model call.
    let count = |family: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{family}_count{{")) && l.contains(r#"gen_ai_operation_name="chat""#))
            .unwrap_or_else(|| panic!("no {family}_count in {text}"));
        assert!(line.contains(r#"gen_ai_provider_name="anthropic",gen_ai_request_model="mock-model""#), "{line}");
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a count")
    };
    assert_eq!(count("gen_ai_client_operation_duration_seconds"), 3.0, "{text}");
    assert!(text.contains(r#"gen_ai_client_token_usage_count{gen_ai_operation_name="chat""#), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_request_may_ask_for_a_typed_answer() {
    let served =
        serve(ServerConfig::default(), [MockTurn::text("Approved, I think."), MockTurn::text(r#"{"approved": true}"#)])
            .await;
    let schema = serde_json::json!({
        "type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"],
    });
    let response = served
        .post("/v1/runs")
        .json(&serde_json::json!({
            "agent": "coder", "instruction": "review", "stream": false,
            "output": {"name": "Verdict", "schema": schema},
        }))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().await.expect("json");
    let run_id = body["run_id"].as_str().expect("id");
    let view = served.wait_phase(run_id, "ended").await;
    assert_eq!(view["end"]["output"], r#"{"approved":true}"#, "{view}");
    assert_eq!(view["output_schema"], schema, "the run says what its answer's shape is: {view}");
    let requests = served.mock.requests();
    assert_eq!(requests.len(), 2, "one correction");
    assert_eq!(requests[0].body["output_config"]["format"]["schema"], schema);

    for (output, code) in [
        (serde_json::json!({"schema": {"type": "array"}}), "invalid_output_schema"),
        (serde_json::json!({"name": "a b", "schema": {"type": "object"}}), "invalid_output_schema"),
        (serde_json::json!({"schema": {"type": "object"}, "strict": true}), "invalid_body"),
    ] {
        let refused = served
            .post("/v1/runs")
            .json(&serde_json::json!({"agent": "coder", "instruction": "review", "output": output}))
            .send()
            .await
            .expect("request");
        let status = refused.status();
        let error: serde_json::Value = refused.json().await.expect("json");
        assert!(status == 422 || status == 400, "{status} {error}");
        assert_eq!(error["error"]["code"], code, "{output}: {error}");
    }
    let team = served
        .post("/v1/runs")
        .json(&serde_json::json!({"team": "crew", "instruction": "x", "output": {"schema": {"type": "object"}}}))
        .send()
        .await
        .expect("request");
    assert_eq!(team.status(), 422);
    assert_eq!(served.mock.requests().len(), 2, "nothing refused reached the model");
}

/// Reads `changes` until the count it announces reaches `at_least`; the count.
async fn announced(changes: &mut SseReader, at_least: u64) -> u64 {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .unwrap_or_else(|_| panic!("no announcement reached {at_least}"))
            .expect("the stream goes on");
        assert_eq!(frame.event.as_deref(), Some("runs"), "{frame:?}");
        let count = frame.data.as_u64().expect("a count");
        if count >= at_least {
            return count;
        }
    }
}

/// `GET /v1/runs/changes` announces at once, then at each change to what the list of
/// runs shows: a run taken in, waiting for a decision, decided, ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_the_runs_list_are_announced() {
    let served = serve(
        ServerConfig::default(),
        [write_call("call_w", "notes.md", "approved content\n"), MockTurn::text("Wrote notes.md.")],
    )
    .await;
    let response = served.get("/v1/runs/changes").send().await.expect("request");
    assert_eq!(response.status(), 200);
    let mut changes = SseReader::new(response);
    let first = announced(&mut changes, 0).await;
    let run_id = served.start("write the notes").await;
    served.wait_phase(&run_id, "waiting").await;
    // Taken in, then waiting for a decision.
    let waiting = announced(&mut changes, first + 2).await;
    assert_eq!(served.approve(&run_id, "call_w").await.status(), 202);
    served.wait_phase(&run_id, "ended").await;
    // Decided (no longer waiting), then ended.
    announced(&mut changes, waiting + 2).await;
}

/// Another process starting the running run `id` in the store at `location`: a handle of
/// its own on the same database file. Returns that handle and the run's state.
async fn start_elsewhere(
    location: &str,
    id: &str,
) -> (std::sync::Arc<dyn troupe_store::Store>, troupe_runtime::RunState) {
    let other = troupe_store::open(location).await.expect("the store opens again");
    let state = troupe_runtime::RunState::new(troupe_core::RunId::new(id), "coder", "mock/model", "model");
    let run = troupe_store::NewRun {
        id: id.to_owned(),
        agent: "coder".to_owned(),
        status: troupe_store::RunStatus::Running,
        conversation_id: None,
        parent_run_id: None,
        input: serde_json::json!({"instruction": "elsewhere"}).into(),
        state: serde_json::to_value(&state).expect("a state encodes").into(),
        spend: None,
    };
    other.create_run(run, troupe_store::now_millis()).await.expect("the run is created");
    (other, state)
}

/// A run that another process sharing the store starts, and its end, are announced to a
/// list following the changes (within a look or two, not at the list's next poll); a
/// store where nothing changes announces nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_another_process_starts_in_the_store_are_announced() {
    use troupe_store::{Checkpoint, RunStatus};
    let dir = tempfile::tempdir().expect("a temp dir");
    let location = format!("sqlite://{}", dir.path().join("runs.db").display());
    let store = troupe_store::open(&location).await.expect("the store opens");
    let served = serve_with_store(ServerConfig::default(), [], Some(store)).await;
    let response = served.get("/v1/runs/changes").send().await.expect("request");
    assert_eq!(response.status(), 200);
    let mut changes = SseReader::new(response);
    announced(&mut changes, 0).await;
    let quiet = tokio::time::timeout(troupe_server::native::STORE_LOOK_EVERY * 3, changes.next()).await;
    assert!(quiet.is_err(), "nothing changed, yet it was announced: {quiet:?}");

    let (other, state) = start_elsewhere(&location, "run_elsewhere").await;
    let wait = troupe_server::native::STORE_LOOK_EVERY * 5;
    let started = tokio::time::timeout(wait, changes.next()).await.expect("the new run is announced");
    assert_eq!(started.expect("the stream goes on").event.as_deref(), Some("runs"));
    let listed: serde_json::Value = served.get("/v1/runs").send().await.expect("request").json().await.expect("json");
    assert_eq!(listed["runs"][0]["run_id"], "run_elsewhere", "{listed}");

    // Still running, one checkpoint on: what the list shows of it (its events) changed.
    let mut working = Checkpoint::new(
        "run_elsewhere",
        RunStatus::Running,
        serde_json::value::to_raw_value(&state).expect("a state encodes"),
    );
    working.activity = Some("calling lookup".to_owned());
    other.checkpoint(working, troupe_store::now_millis() + 1).await.expect("saved");
    let working = tokio::time::timeout(wait, changes.next()).await.expect("the run's checkpoint is announced");
    assert_eq!(working.expect("the stream goes on").event.as_deref(), Some("runs"));

    let ended = serde_json::value::to_raw_value(&state).expect("a state encodes");
    other
        .checkpoint(Checkpoint::new("run_elsewhere", RunStatus::Completed, ended), troupe_store::now_millis())
        .await
        .expect("saved");
    let end = tokio::time::timeout(wait, changes.next()).await.expect("the run's end is announced");
    assert_eq!(end.expect("the stream goes on").event.as_deref(), Some("runs"));
}

/// Every open list shares one look at the store a second; each still hears, on its own,
/// a run another process starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_open_list_hears_another_process_run_through_the_shared_look() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let location = format!("sqlite://{}", dir.path().join("runs.db").display());
    let store = troupe_store::open(&location).await.expect("the store opens");
    let served = serve_with_store(ServerConfig::default(), [], Some(store)).await;
    let mut lists = Vec::new();
    for _ in 0..20 {
        let response = served.get("/v1/runs/changes").send().await.expect("request");
        assert_eq!(response.status(), 200);
        let mut changes = SseReader::new(response);
        announced(&mut changes, 0).await;
        lists.push(changes);
    }

    let (_other, _) = start_elsewhere(&location, "run_shared").await;
    let wait = troupe_server::native::STORE_LOOK_EVERY * 5;
    let heard = futures::future::join_all(lists.iter_mut().map(|changes| tokio::time::timeout(wait, changes.next())));
    for (list, frame) in heard.await.into_iter().enumerate() {
        let frame = frame.unwrap_or_else(|_| panic!("list {list} never heard of the run")).expect("the stream goes on");
        assert_eq!(frame.event.as_deref(), Some("runs"), "list {list}: {frame:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_list_is_filtered_by_status_agent_id_and_a_search() {
    let served = serve(ServerConfig::default(), [MockTurn::text("One."), MockTurn::text("Two.")]).await;
    let mut ids = Vec::new();
    for task in ["first", "second"] {
        let response = served
            .post("/v1/runs")
            .json(&serde_json::json!({"agent": "coder", "instruction": task, "stream": false}))
            .send()
            .await
            .expect("request");
        let body: serde_json::Value = response.json().await.expect("json");
        let id = body["run_id"].as_str().expect("id").to_owned();
        served.wait_phase(&id, "ended").await;
        ids.push(id);
    }
    let listed = |query: &'static str| {
        let request = served.get(&format!("/v1/runs{query}"));
        async move {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.expect("json");
            let ids: Vec<String> = body["runs"]
                .as_array()
                .map(|r| r.iter().filter_map(|v| v["run_id"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            (status, ids, body)
        }
    };
    let (status, all, _) = listed("").await;
    assert_eq!((status, all.len()), (200, 2));
    let (_, completed, _) = listed("?status=completed&agent=coder").await;
    assert_eq!(completed.len(), 2, "{completed:?}");
    let (_, failed, _) = listed("?status=failed").await;
    assert!(failed.is_empty(), "{failed:?}");
    let (_, other, _) = listed("?agent=reviewer").await;
    assert!(other.is_empty(), "{other:?}");
    let (status, empty, _) = listed("?status=").await;
    assert_eq!((status, empty.len()), (400, 0), "an empty status is no status");
    let (status, unknown, body) = listed("?status=finished").await;
    assert_eq!((status, unknown.len()), (400, 0), "{body}");
    assert_eq!(body["error"]["code"], "invalid_query", "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("budget_exceeded")), "{body}");
    // A name no run can have matches nothing, and is not an error.
    let (status, none, _) = listed("?agent=%01coder").await;
    assert_eq!((status, none.len()), (200, 0));
    // An id prefix: the first run's whole id is a prefix of nothing else.
    let request = served.get(&format!("/v1/runs?id={}", ids[0])).send().await.expect("request");
    let body: serde_json::Value = request.json().await.expect("json");
    assert_eq!(body["runs"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(body["runs"][0]["run_id"], ids[0].as_str());
    // A search: part of the agent's name or of the model, in either case, or an id's start.
    for (query, found) in [("?q=ODE", 2), ("?q=mock-mod", 2), ("?q=reviewer", 0), ("?q=%25", 0)] {
        let (status, runs, body) = listed(query).await;
        assert_eq!((status, runs.len()), (200, found), "{query}: {body}");
    }
    let (_, failed, _) = listed("?q=coder&status=failed").await;
    assert!(failed.is_empty(), "a search narrows the status: {failed:?}");
    let request = served.get(&format!("/v1/runs?q={}", &ids[1][..ids[1].len() - 1])).send().await.expect("request");
    let body: serde_json::Value = request.json().await.expect("json");
    assert_eq!(body["runs"][0]["run_id"], ids[1].as_str(), "{body}");
    assert_eq!(body["runs"].as_array().map(Vec::len), Some(1), "{body}");
}

/// A start sent again with the same `Idempotency-Key` (a client that lost the answer) gets
/// the run the first started, marked `Idempotent-Replayed`, while it waits and once it has
/// ended, streamed or not, and after a restart on the same store; another key is another start; a key that is
/// not 1 to 255 visible ASCII characters is refused and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_sent_again_with_its_idempotency_key_gets_the_run_it_started() {
    let (_dir, store) = a_store().await;
    let turns = [write_call("w1", "once.txt", "once"), MockTurn::text("Once."), MockTurn::text("Another.")];
    let served = serve_with_store(ServerConfig::default(), turns, Some(std::sync::Arc::clone(&store))).await;
    let start =
        |key: &str, stream: bool| served.start_request("answer once", stream).header("Idempotency-Key", key).send();
    let first = start("order-7f3a", false).await.expect("request");
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none(), "the first start is no replay");
    let run_id = first.headers()["x-troupe-run-id"].to_str().expect("an id").to_owned();
    // Sent again while the run waits for a decision: that run, still waiting.
    served.wait_phase(&run_id, "waiting").await;
    let waiting = start("order-7f3a", false).await.expect("request");
    assert_eq!(waiting.status(), 201);
    assert_eq!(waiting.headers()["idempotent-replayed"], "true");
    assert_eq!(waiting.headers()["x-troupe-run-id"], run_id.as_str());
    assert_eq!(served.approve(&run_id, "w1").await.status(), 202);
    served.wait_phase(&run_id, "ended").await;

    let again = start("order-7f3a", false).await.expect("request");
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["x-troupe-run-id"], run_id.as_str());
    let streamed = start("order-7f3a", true).await.expect("request");
    assert_eq!(streamed.status(), 200);
    assert_eq!(streamed.headers()["idempotent-replayed"], "true");
    assert_eq!(streamed.headers()["x-troupe-run-id"], run_id.as_str());
    assert!(streamed.text().await.expect("the stream").contains("Once."), "the run's own events");
    assert_eq!(served.mock.requests().len(), 2, "the model was asked once per turn of one run");

    let other = start("order-7f3b", false).await.expect("request");
    assert_eq!(other.status(), 201);
    assert!(other.headers().get("idempotent-replayed").is_none());
    let other_id = other.headers()["x-troupe-run-id"].to_str().expect("an id").to_owned();
    assert_ne!(other_id, run_id);

    for bad in ["", "with space", &"k".repeat(256)] {
        let refused = start(bad, false).await.expect("request");
        assert_eq!(refused.status(), 400, "key {bad:?}");
        let body: serde_json::Value = refused.json().await.expect("json");
        assert_eq!(body["error"]["code"], "invalid_idempotency_key", "key {bad:?}");
    }
    // The key sent again with another task, or another model: refused, for it names
    // the first start.
    for (instruction, model) in [("answer twice", None), ("answer once", Some("mock/other-model"))] {
        let mut body = serde_json::json!({"agent": "coder", "instruction": instruction, "stream": false});
        if let Some(model) = model {
            body["model"] = model.into();
        }
        let reused = served.post("/v1/runs").header("Idempotency-Key", "order-7f3a").json(&body).send().await;
        let reused = reused.expect("request");
        assert_eq!(reused.status(), 422, "{body}");
        let error: serde_json::Value = reused.json().await.expect("json");
        assert_eq!(error["error"]["code"], "idempotency_key_reused", "{error}");
    }
    served.wait_phase(&other_id, "ended").await;
    assert_eq!(served.mock.requests().len(), 3, "no refused start ran");

    // The server restarts on the same store: the key still names its run.
    served.shutdown.cancel();
    let _ = served.serving.await;
    let restarted = serve_with_store(ServerConfig::default(), [MockTurn::text("Twice.")], Some(store)).await;
    let after = restarted
        .start_request("answer once", false)
        .header("Idempotency-Key", "order-7f3a")
        .send()
        .await
        .expect("request");
    assert_eq!(after.status(), 201);
    assert_eq!(after.headers()["idempotent-replayed"], "true");
    assert_eq!(after.headers()["x-troupe-run-id"], run_id.as_str());
    let reused = restarted.start_request("answer twice", false).header("Idempotency-Key", "order-7f3a").send().await;
    assert_eq!(reused.expect("request").status(), 422, "the stored run's task is another");
    assert!(restarted.mock.requests().is_empty(), "nothing ran again after the restart");
}

/// A WebSocket to `served`'s `/v1/ws`.
struct Socket(tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>);

impl Socket {
    async fn open(served: &common::Served) -> Self {
        let url = format!("{}/v1/ws", served.url.replacen("http", "ws", 1));
        Socket(tokio_tungstenite::connect_async(url).await.expect("websocket connects").0)
    }

    async fn send(&mut self, message: serde_json::Value) {
        let frame = tokio_tungstenite::tungstenite::Message::Text(message.to_string().into());
        self.0.send(frame).await.expect("send");
    }

    /// The next message from the server (within ten seconds).
    async fn next(&mut self) -> serde_json::Value {
        let read = async {
            loop {
                match self.0.next().await {
                    Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text))) => {
                        return serde_json::from_str(&text).expect("json");
                    }
                    Some(Ok(_)) => continue,
                    other => panic!("the socket closed: {other:?}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("a message")
    }

    /// The messages up to and with the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<serde_json::Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let last = message["type"] == kind;
            seen.push(message);
            if last {
                return seen;
            }
        }
    }
}

fn event_types(messages: &[serde_json::Value]) -> Vec<&str> {
    messages.iter().filter(|m| m["type"] == "event").filter_map(|m| m["event"]["type"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_sent_again_over_the_websocket_with_its_key_gets_the_run_it_started() {
    let (_dir, store) = a_store().await;
    let turns = [write_call("w1", "once.txt", "once"), MockTurn::text("Once.")];
    let served = serve_with_store(ServerConfig::default(), turns, Some(std::sync::Arc::clone(&store))).await;
    let start = serde_json::json!({"type": "start", "agent": "coder", "instruction": "write once", "idempotency_key": "ws-7f3a"});

    // A client hears `started`, and its socket closes.
    let mut lost = Socket::open(&served).await;
    lost.send(start.clone()).await;
    let started = lost.next().await;
    assert_eq!(started["type"], "started", "{started}");
    assert!(started.get("replayed").is_none(), "the first start is no replay: {started}");
    let run_id = started["run_id"].as_str().expect("an id").to_owned();
    drop(lost);
    served.wait_phase(&run_id, "waiting").await;

    // It sends the start again on a new socket: the same run, followed from its start.
    let mut again = Socket::open(&served).await;
    again.send(start.clone()).await;
    let started = again.next().await;
    assert_eq!(
        (&started["type"], &started["run_id"], &started["replayed"]),
        (&"started".into(), &run_id.clone().into(), &true.into())
    );
    let waiting = again.until("event").await;
    assert_eq!(event_types(&waiting), ["run_started"], "from the run's first event");
    let signal = serde_json::json!({"type": "signal", "run_id": run_id,
        "signal": {"type": "approval", "call_id": "w1", "decision": {"type": "approve"}}});
    again.send(signal).await;
    let ended = again.until("ended").await;
    assert_eq!(ended.last().expect("ended")["end"]["outcome"], "completed");
    assert_eq!(event_types(&ended).last(), Some(&"run_finished"));
    assert_eq!(std::fs::read_to_string(served.workspace.path().join("once.txt")).expect("written"), "once");

    // Bad starts are refused, typed, and run nothing.
    let mut bad = Socket::open(&served).await;
    let refusals = [
        (serde_json::json!("with space"), "invalid_idempotency_key"),
        (serde_json::json!("k".repeat(256)), "invalid_idempotency_key"),
        (serde_json::json!(7), "invalid_body"),
    ];
    for (key, code) in refusals {
        let mut message = start.clone();
        message["idempotency_key"] = key.clone();
        bad.send(message).await;
        let refused = bad.next().await;
        assert_eq!((&refused["type"], &refused["code"]), (&"error".into(), &code.into()), "key {key}: {refused}");
    }
    let mut another = start.clone();
    another["instruction"] = "write twice".into();
    bad.send(another).await;
    let refused = bad.next().await;
    assert_eq!(refused["code"], "idempotency_key_reused", "the key named another start: {refused}");
    let mut typo = start.clone();
    typo["instructions"] = "a misspelt field".into();
    bad.send(typo).await;
    let refused = bad.next().await;
    assert_eq!(refused["type"], "error", "a field the start does not know is refused: {refused}");
    assert!(refused["message"].as_str().is_some_and(|m| m.contains("instructions")), "{refused}");
    assert_eq!(served.mock.requests().len(), 2, "the model was asked once per turn of one run");

    // The server restarts on the same store: the key still names the run, read from the
    // store (what its record tells: its start and its end), as is a run subscribed to by id.
    served.shutdown.cancel();
    let _ = served.serving.await;
    let restarted = serve_with_store(ServerConfig::default(), [MockTurn::text("Twice.")], Some(store)).await;
    let mut after = Socket::open(&restarted).await;
    after.send(start).await;
    let started = after.next().await;
    assert_eq!((&started["run_id"], &started["replayed"]), (&run_id.clone().into(), &true.into()), "{started}");
    let replayed = after.until("ended").await;
    assert_eq!(event_types(&replayed), ["run_started"]);
    let end = &replayed.last().expect("ended")["end"];
    assert_eq!((&end["outcome"], &end["output"]), (&"completed".into(), &"Once.".into()), "{end}");
    after.send(serde_json::json!({"type": "subscribe", "run_id": run_id})).await;
    let followed = after.until("ended").await;
    assert_eq!(event_types(&followed), ["run_started"]);
    assert_eq!(followed.last().expect("ended")["end"], *end);
    assert!(restarted.mock.requests().is_empty(), "nothing ran again after the restart");
}

/// Starts sent at once under one `Idempotency-Key` start one run, and the others are
/// answered with it: looking the key's run up and starting it are one step. The store's
/// `runs` table is locked (PostgreSQL) while they arrive, so every look-up waits in the
/// store at once; let go, a server that looked up and started apart would find nothing for
/// each and start each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_sent_at_once_under_one_key_start_one_run_postgres() {
    let Ok(base) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip(
            "starts_sent_at_once_under_one_key_start_one_run_postgres",
            "TROUPE_TEST_DATABASE_URL is not set",
        );
        return;
    };
    let schema = format!("troupe_server_starts_{}", std::process::id());
    let store = troupe_store::postgres::PostgresStore::connect_in_schema(&base, &schema).await.expect("a fresh schema");
    let store = std::sync::Arc::new(store);
    let served = serve_with_store(ServerConfig::default(), [MockTurn::text("Once.")], Some(store.clone())).await;

    let mut lock = store.pool().begin().await.expect("a transaction");
    sqlx::query("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.expect("the table is locked");
    let sent: Vec<_> = (0..6)
        .map(|_| tokio::spawn(served.start_request("once", false).header("Idempotency-Key", "at-once-1").send()))
        .collect();
    // Every request in, each waiting on the store or on the start before it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    lock.rollback().await.expect("the lock is let go");

    let mut runs = Vec::new();
    let mut first_starts = 0;
    for request in sent {
        let response = request.await.expect("joined").expect("answered");
        assert_eq!(response.status(), 201);
        first_starts += usize::from(response.headers().get("idempotent-replayed").is_none());
        runs.push(response.headers()["x-troupe-run-id"].to_str().expect("an id").to_owned());
    }
    assert_eq!(first_starts, 1, "one start started the run, the others found it: {runs:?}");
    runs.dedup();
    assert_eq!(runs.len(), 1, "{runs:?}");
    served.wait_phase(&runs[0], "ended").await;
    assert_eq!(served.mock.requests().len(), 1, "one run asked the model");

    let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    // The schema name is the test's own (`troupe_server_starts_<pid>`), not input.
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(store.pool()).await.expect("the test schema is dropped");
}

/// Two servers share a store; a start sent again to the other one under its key names the
/// run the first holds, and starts nothing there. Its events stream where it is held: the
/// other answers a request for them with `409 run_elsewhere`, over HTTP and the WebSocket,
/// rather than with a stream that would never go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_sent_again_to_another_server_on_the_store_names_the_run_held_elsewhere() {
    let (_dir, store) = a_store().await;
    let turns = [write_call("w1", "held.txt", "held"), MockTurn::text("Held.")];
    let holder = serve_with_store(ServerConfig::default(), turns, Some(std::sync::Arc::clone(&store))).await;
    let other = serve_with_store(ServerConfig::default(), [], Some(store)).await;
    let first = holder.start_request("hold it", false).header("Idempotency-Key", "shared-1").send().await;
    let run_id = first.expect("request").headers()["x-troupe-run-id"].to_str().expect("an id").to_owned();
    holder.wait_phase(&run_id, "waiting").await;

    let by_id = other.start_request("hold it", false).header("Idempotency-Key", "shared-1").send().await;
    let by_id = by_id.expect("request");
    assert_eq!(by_id.status(), 201);
    assert_eq!(by_id.headers()["x-troupe-run-id"], run_id.as_str());
    assert_eq!(by_id.headers()["idempotent-replayed"], "true");
    let streamed = other.start_request("hold it", true).header("Idempotency-Key", "shared-1").send().await;
    let streamed = streamed.expect("request");
    assert_eq!(streamed.status(), 409);
    assert_eq!(streamed.headers()["x-troupe-run-id"], run_id.as_str());
    let error: serde_json::Value = streamed.json().await.expect("json");
    assert_eq!(error["error"]["code"], "run_elsewhere", "{error}");

    let mut socket = Socket::open(&other).await;
    let start =
        serde_json::json!({"type": "start", "agent": "coder", "instruction": "hold it", "idempotency_key": "shared-1"});
    socket.send(start).await;
    let started = socket.next().await;
    assert_eq!((&started["run_id"], &started["replayed"]), (&run_id.clone().into(), &true.into()), "{started}");
    let refused = socket.next().await;
    assert_eq!((&refused["type"], &refused["code"]), (&"error".into(), &"run_elsewhere".into()), "{refused}");
    assert!(other.mock.requests().is_empty(), "the other server ran nothing");

    // Where it is held, it goes on and ends.
    assert_eq!(holder.approve(&run_id, "w1").await.status(), 202);
    holder.wait_phase(&run_id, "ended").await;
    assert_eq!(holder.mock.requests().len(), 2);
}
