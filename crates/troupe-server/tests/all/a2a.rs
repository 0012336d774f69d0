//! A2A over real loopback HTTP: the reference Python client (`a2a-sdk`, run as a real
//! process by `tests/a2a/client.py`) against the server, then the server's own
//! [`RemoteAgent`] as a team member against the server.

use crate::common;

use common::{Served, a_store, serve, write_call};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEventKind, PauseReason};
use troupe_runtime::ApprovalDecision;
use troupe_server::ServerConfig;
use troupe_server::a2a::RemoteAgent;
use troupe_team::{AgentGroup, Member, MemberTask, TeamControl};
use troupe_testkit::{MockTurn, test_deps};

/// The test virtualenv's Python when it has the A2A client; `None` (and a note) when not.
pub(crate) fn python(test: &str) -> Option<PathBuf> {
    let found = test_deps::python_with("a2a.client");
    if found.is_none() {
        test_deps::skip(test, "the Python package a2a-sdk is not installed in .test-deps/py");
    }
    found
}

/// Runs `scenario` of the client script against `served`; its JSON lines.
async fn scenario(python: &Path, name: &str, served: &Served) -> Vec<Value> {
    scenario_with(python, name, served, &[]).await
}

/// Runs `scenario` with more arguments (`--webhook URL`, …).
pub(crate) async fn scenario_with(python: &Path, name: &str, served: &Served, args: &[&str]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(&script).arg(name).arg(&served.url).args(args).kill_on_drop(true);
    if let Some(token) = &served.token {
        command.arg("--token").arg(token);
    }
    let output = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("the client finishes within 90 s")
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "client.py {name} failed:\n{stdout}\n{stderr}");
    stdout.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

pub(crate) fn lines<'a>(all: &'a [Value], event: &str) -> Vec<&'a Value> {
    all.iter().filter(|l| l["event"] == event).collect()
}

pub(crate) fn last<'a>(all: &'a [Value], event: &str) -> &'a Value {
    lines(all, event).last().copied().unwrap_or_else(|| panic!("no `{event}` line in {all:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_client_reads_the_card_and_gets_answers_sent_and_streamed() {
    let Some(python) = python("the_reference_client_reads_the_card_and_gets_answers_sent_and_streamed") else {
        return;
    };
    let served =
        serve(ServerConfig::default(), [MockTurn::text("Hello from the mock."), MockTurn::text("Hello again.")]).await;
    let out = scenario(&python, "card_and_answer", &served).await;

    let card = last(&out, "card");
    assert_eq!(card["name"], "coder");
    assert_eq!(card["streaming"], true);
    assert_eq!(card["interfaces"][0], json!([format!("{}/a2a", served.url), "JSONRPC", "1.0"]));
    assert_eq!(card["skills"], json!(["coder"]));
    assert_eq!(card["schemes"], json!([]), "no token, no security scheme");
    let old = last(&out, "card_v03");
    assert_eq!((&old["url"], &old["protocolVersion"]), (&json!(format!("{}/a2a", served.url)), &json!("0.3.0")));

    let sent = last(&out, "send");
    assert_eq!(sent["kind"], "task");
    assert_eq!(sent["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(sent["artifacts"]["answer"], "Hello from the mock.");
    assert_eq!(sent["history"][0], json!(["ROLE_USER", "say hello"]));
    let run: Value = served
        .get(&format!("/v1/runs/{}", sent["id"].as_str().expect("an id")))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(run["phase"], "ended", "the task is the hub's run");

    let streamed = lines(&out, "stream");
    assert_eq!(streamed[0]["kind"], "task", "a stream starts with the task");
    let context = &streamed[0]["contextId"];
    assert!(context.as_str().is_some_and(|c| c.starts_with("ctx-")), "a new context: {context}");
    assert!(streamed.iter().all(|s| &s["contextId"] == context || s["kind"] == "artifact_update"));
    assert!(streamed.iter().any(|s| s["kind"] == "status_update" && s["state"] == "TASK_STATE_WORKING"));
    let answer = streamed.iter().rev().find(|s| s["kind"] == "artifact_update").expect("the answer artifact");
    assert_eq!(
        (&answer["artifactId"], &answer["text"], &answer["lastChunk"]),
        (&json!("answer"), &json!("Hello again."), &json!(true))
    );
    assert_streamed_in_chunks(&streamed, "Hello again.");
    let end = streamed.last().expect("items");
    assert_eq!((&end["kind"], &end["state"]), (&json!("status_update"), &json!("TASK_STATE_COMPLETED")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_the_card_stays_public_names_the_bearer_scheme_and_calls_need_the_token() {
    let test = "with_tokens_the_card_stays_public_names_the_bearer_scheme_and_calls_need_the_token";
    let Some(python) = python(test) else { return };
    let config = ServerConfig::default().token("s3cr3t-token");
    let served = serve(config, [MockTurn::text("Authorised."), MockTurn::text("Still authorised.")]).await;
    let out = scenario(&python, "card_and_answer", &served).await;
    assert_eq!(last(&out, "card")["schemes"], json!(["bearer"]));
    assert_eq!(last(&out, "card_v03")["schemes"], json!(["bearer"]), "a 0.3 client reads the scheme too");
    assert_eq!(last(&out, "send")["artifacts"]["answer"], "Authorised.");

    let anonymous = reqwest::Client::new()
        .post(format!("{}/a2a", served.url))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(anonymous.status(), 401);
    let rest = reqwest::Client::new().get(format!("{}/a2a/rest/tasks", served.url)).send().await.expect("request");
    assert_eq!(rest.status(), 401, "the HTTP+JSON binding needs the token too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_pauses_the_task_and_a_follow_up_message_approves_it() {
    let Some(python) = python("an_approval_pauses_the_task_and_a_follow_up_message_approves_it") else { return };
    let served = serve(
        ServerConfig::default(),
        [write_call("call_w", "notes.md", "approved content\n"), MockTurn::text("Wrote notes.md.")],
    )
    .await;
    let out = scenario(&python, "approval", &served).await;

    let paused = last(&out, "first");
    assert_eq!(paused["state"], "TASK_STATE_INPUT_REQUIRED", "{out:#?}");
    let said = paused["status"].as_str().expect("a status message");
    assert!(said.contains("fs.write") && said.contains("call_w") && said.contains("notes.md"), "{said}");
    assert_eq!(paused["data"][0]["pending"][0]["callId"], "call_w");
    assert_eq!(paused["data"][0]["pending"][0]["arguments"]["path"], "notes.md");

    let resumed = lines(&out, "second");
    assert_eq!(resumed[0]["kind"], "task");
    assert_eq!(resumed[0]["state"], "TASK_STATE_WORKING", "decided, so working again");
    let answer = resumed.iter().rev().find(|s| s["kind"] == "artifact_update").expect("an answer");
    assert_eq!(answer["text"], "Wrote notes.md.");
    assert_eq!(answer["lastChunk"], true);
    assert_eq!(resumed.last().expect("items")["state"], "TASK_STATE_COMPLETED");
    assert!(resumed.iter().all(|s| s["id"] == paused["id"]), "the same task goes on");
    let written = std::fs::read_to_string(served.workspace.path().join("notes.md")).expect("the file was written");
    assert_eq!(written, "approved content\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_part_rejects_the_call_and_the_blocking_task_still_completes() {
    let Some(python) = python("a_data_part_rejects_the_call_and_the_blocking_task_still_completes") else { return };
    let served =
        serve(ServerConfig::default(), [write_call("call_r", "nope.md", "x"), MockTurn::text("Left it alone.")]).await;
    let out = scenario(&python, "approval_data", &served).await;

    let paused = last(&out, "first");
    assert_eq!((&paused["kind"], &paused["state"]), (&json!("task"), &json!("TASK_STATE_INPUT_REQUIRED")));
    let done = last(&out, "second");
    assert_eq!(done["state"], "TASK_STATE_COMPLETED", "{out:#?}");
    assert_eq!(done["artifacts"]["answer"], "Left it alone.");
    assert!(!served.workspace.path().join("nope.md").exists(), "a rejected call does not run");
    let told = served.mock.requests().last().expect("requests").body.to_string();
    assert!(told.contains("not that file"), "the model sees the reason: {told}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_read_listed_cancelled_and_bad_ids_are_errors() {
    let Some(python) = python("tasks_are_read_listed_cancelled_and_bad_ids_are_errors") else { return };
    let served = serve(ServerConfig::default(), [MockTurn::text("First."), write_call("call_c", "c.md", "x")]).await;
    let out = scenario(&python, "tasks", &served).await;

    let done = last(&out, "done");
    let waiting = last(&out, "waiting");
    assert_eq!(waiting["state"], "TASK_STATE_INPUT_REQUIRED");
    let got = last(&out, "get");
    assert_eq!((&got["id"], &got["state"]), (&done["id"], &json!("TASK_STATE_COMPLETED")));
    assert_eq!(got["history"], json!([["ROLE_AGENT", "First."]]), "historyLength 1 keeps the last message");
    assert_eq!(got["artifacts"]["answer"], "First.");

    let page = last(&out, "list");
    assert_eq!(page["ids"], json!([waiting["id"]]), "newest first");
    assert_eq!((&page["total"], &page["pageSize"]), (&json!(2), &json!(1)));
    assert_ne!(page["next"], "");
    let rest = last(&out, "list_rest");
    assert_eq!((&rest["ids"], &rest["next"]), (&json!([done["id"]]), &json!("")));
    assert_eq!(last(&out, "list_waiting")["ids"], json!([waiting["id"]]));
    let in_context = &last(&out, "list_context")["tasks"];
    assert_eq!(in_context.as_array().map(Vec::len), Some(1));
    assert_eq!(in_context[0]["artifacts"]["answer"], "First.");

    assert_eq!(last(&out, "cancel")["state"], "TASK_STATE_CANCELED");
    let subscribed = last(&out, "subscribed")["items"].as_array().expect("items").clone();
    assert_eq!(
        (&subscribed[0]["kind"], &subscribed[0]["state"]),
        (&json!("task"), &json!("TASK_STATE_INPUT_REQUIRED"))
    );
    let end = subscribed.last().expect("items");
    assert_eq!((&end["kind"], &end["state"]), (&json!("status_update"), &json!("TASK_STATE_CANCELED")));
    assert_eq!(last(&out, "cancel_again")["error"], "TaskNotCancelableError");
    assert_eq!(last(&out, "get_unknown")["error"], "TaskNotFoundError");
    assert_eq!(last(&out, "subscribe_ended")["error"], "UnsupportedOperationError");
    assert!(!served.workspace.path().join("c.md").exists(), "a cancelled call never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_client_is_answered_in_0_3_shapes() {
    let Some(python) = python("a_0_3_client_is_answered_in_0_3_shapes") else { return };
    let served = serve(
        ServerConfig::default(),
        [MockTurn::text("Hi, old friend."), write_call("call_o", "old.md", "old\n"), MockTurn::text("Wrote old.md.")],
    )
    .await;
    let out = scenario(&python, "legacy", &served).await;
    assert_eq!(last(&out, "legacy_card")["versions"], json!(["0.3"]));
    let sent = last(&out, "send");
    assert_eq!(
        (&sent["state"], &sent["artifacts"]["answer"]),
        (&json!("TASK_STATE_COMPLETED"), &json!("Hi, old friend."))
    );
    assert_eq!(last(&out, "get")["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last(&out, "stream")["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(last(&out, "stream_second")["state"], "TASK_STATE_COMPLETED");
    assert_eq!(std::fs::read_to_string(served.workspace.path().join("old.md")).expect("written"), "old\n");

    // The same task read raw through the 0.3 method: kinds and lower-case names.
    let raw: Value = served
        .post("/a2a")
        .json(&json!({"jsonrpc": "2.0", "id": "r", "method": "tasks/get", "params": {"id": sent["id"]}}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let task = &raw["result"];
    assert_eq!((&task["kind"], &task["status"]["state"]), (&json!("task"), &json!("completed")), "{raw}");
    assert_eq!(task["artifacts"][0]["parts"][0], json!({"kind": "text", "text": "Hi, old friend."}));
    assert_eq!(task["history"][0]["role"], "user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_rpc_errors_with_the_a2a_codes() {
    let Some(python) = python("bad_requests_get_json_rpc_errors_with_the_a2a_codes") else { return };
    let served = serve(ServerConfig::default(), []).await;
    let out = scenario(&python, "errors", &served).await;
    let code = |label: &str| {
        let line = lines(&out, "raw").into_iter().find(|l| l["label"] == label).expect(label).clone();
        assert_eq!(line["status"], 200, "JSON-RPC errors come with HTTP 200: {line}");
        line
    };
    for (label, expected) in [
        ("parse", -32700),
        ("batch", -32600),
        ("invalid_request", -32600),
        ("method", -32601),
        ("params", -32602),
        ("no_message", -32602),
        ("empty_message", -32602),
        ("unknown_skill", -32602),
        ("version", -32009),
        ("push", -32602),
        ("unknown_task", -32001),
    ] {
        let line = code(label);
        assert_eq!(line["error"]["code"], expected, "{label}: {line}");
        assert!(line["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{label} says why");
    }
    assert_eq!(code("parse")["id"], Value::Null);
    assert_eq!(code("invalid_request")["id"], 1);
    assert_eq!(code("version")["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    assert!(code("unknown_task")["error"].get("data").is_none(), "0.3 errors carry no 1.0 detail");
    assert!(code("unknown_skill")["error"]["message"].as_str().is_some_and(|m| m.contains("coder")));
    assert_eq!(served.mock.requests().len(), 0, "no bad request reached a model");
}

// The server's own client, as a team member.

fn task(prompt: &str) -> MemberTask {
    MemberTask::new("t1", "user", prompt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_runs_a_task_as_a_team_member_streaming_or_not() {
    let served =
        serve(ServerConfig::default(), [MockTurn::text("Remote answer."), MockTurn::text("Polled answer.")]).await;
    let remote = RemoteAgent::resolve(&served.url).await.expect("the card resolves");
    assert_eq!(remote.name(), "coder");
    assert_eq!(remote.description(), "Writes code");
    assert_eq!(remote.endpoint(), format!("{}/a2a", served.url));
    assert!(remote.card().capabilities.streaming);

    let (sink, mut events) = tokio::sync::mpsc::channel(256);
    let result = remote.run(task("answer remotely"), Some(sink), CancellationToken::new()).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.content, "Remote answer.");
    let run_id = result.run_id.clone().expect("the remote task's id");
    assert!(served.server_hub.get(run_id.as_str()).is_some(), "the task is a run of the remote server");
    let mut names = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let AgentEventKind::Custom { name, .. } = event.kind {
            names.push(name);
        }
    }
    assert_eq!(names.first().map(String::as_str), Some("a2a.task"), "{names:?}");
    assert!(names.iter().any(|n| n == "a2a.artifact_update"), "{names:?}");

    let polled = remote.clone().named("poller").streaming(false);
    let result = polled.run(task("answer again"), None, CancellationToken::new()).await;
    assert!(result.success, "{result:?}");
    assert_eq!((result.name.as_str(), result.content.as_str()), ("poller", "Polled answer."));
}

/// A team's task given again to a remote member (a team resumed after a crash gives it
/// again under the same parent run) is the same A2A message; a server with a store finds
/// the task its first sending started, streaming or not, and after a restart too, and
/// nothing runs twice. A server without a store does not promise it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_given_again_to_a_remote_member_is_found_not_run_twice() {
    let unstored = serve(ServerConfig::default(), []).await;
    let remote = RemoteAgent::resolve(&unstored.url).await.expect("the card resolves");
    assert!(!remote.resumable(), "a server without a store keeps no task across a restart");
    let delegate =
        troupe_team::DelegateTool::new("lead", [Arc::new(remote.clone()) as Arc<dyn Member>]).expect("a delegate tool");
    let args = json!({"to": remote.name(), "task": "answer once"});
    assert_eq!(troupe_tools::Tool::idempotency(&delegate, &args), troupe_tools::Idempotency::NonIdempotent);

    let (_dir, store) = a_store().await;
    let turns = [MockTurn::text("First answer."), MockTurn::text("Second answer.")];
    let served = troupe_server_served_with(turns, Arc::clone(&store)).await;
    let remote = RemoteAgent::resolve(&served.url).await.expect("the card resolves");
    assert!(remote.resumable(), "a server with a store finds a task sent again");
    // So a leader's interrupted delegation to it may be made again.
    let delegate =
        troupe_team::DelegateTool::new("lead", [Arc::new(remote.clone()) as Arc<dyn Member>]).expect("a delegate tool");
    let args = json!({"to": remote.name(), "task": "answer once"});
    assert_eq!(troupe_tools::Tool::idempotency(&delegate, &args), troupe_tools::Idempotency::Idempotent);

    let mut given = task("answer once");
    given.parent_run_id = Some(troupe_core::RunId::new("run_team_parent"));
    let first = remote.run(given.clone(), None, CancellationToken::new()).await;
    assert!(first.success, "{first:?}");
    assert_eq!(first.content, "First answer.");
    let task_id = first.run_id.clone().expect("the remote task's id");
    for streaming in [true, false] {
        let again = remote.clone().streaming(streaming).run(given.clone(), None, CancellationToken::new()).await;
        assert!(again.success, "streaming {streaming}: {again:?}");
        assert_eq!(again.content, "First answer.", "streaming {streaming}");
        assert_eq!(again.run_id.as_ref(), Some(&task_id), "streaming {streaming}");
    }
    assert_eq!(served.mock.requests().len(), 1, "the model was asked once");

    // Another task of the same parent is another message, and runs.
    let mut other = given.clone();
    other.task_id = "t2".to_owned();
    let second = remote.run(other, None, CancellationToken::new()).await;
    assert!(second.success, "{second:?}");
    assert_eq!(second.content, "Second answer.");
    assert_ne!(second.run_id.as_ref(), Some(&task_id));

    // One task given eight times at once starts one remote task, even where no store
    // refuses a second run of one id.
    unstored.mock.push_all([MockTurn::text("Third answer."), MockTurn::text("Third answer.")]);
    let unstored_remote = RemoteAgent::resolve(&unstored.url).await.expect("the card resolves");
    let mut at_once = given.clone();
    at_once.task_id = "t3".to_owned();
    let members: Vec<RemoteAgent> = (0..8).map(|n| unstored_remote.clone().streaming(n % 2 == 0)).collect();
    let results = futures::future::join_all(
        members.iter().map(|member| member.run(at_once.clone(), None, CancellationToken::new())),
    )
    .await;
    for result in &results {
        assert!(result.success, "{result:?}");
        assert_eq!(result.content, "Third answer.");
        assert_eq!(result.run_id, results[0].run_id);
    }
    assert_eq!(unstored.mock.requests().len(), 1, "the model was asked once");

    // The server restarts on the same store: the task is found there.
    served.shutdown.cancel();
    let _ = served.serving.await;
    let restarted = troupe_server_served_with([MockTurn::text("Run twice.")], store).await;
    let remote = RemoteAgent::resolve(&restarted.url).await.expect("the card resolves");
    for streaming in [true, false] {
        let after = remote.clone().streaming(streaming).run(given.clone(), None, CancellationToken::new()).await;
        assert!(after.success, "streaming {streaming}: {after:?}");
        assert_eq!(after.content, "First answer.", "streaming {streaming}");
        assert_eq!(after.run_id.as_ref(), Some(&task_id), "streaming {streaming}");
    }
    assert!(restarted.mock.requests().is_empty(), "nothing ran again after the restart");
}

/// The `coder` server recording its runs in `store`, its model answering with `turns`.
async fn troupe_server_served_with(
    turns: impl IntoIterator<Item = MockTurn>,
    store: Arc<dyn troupe_store::Store>,
) -> Served {
    common::serve_with_store(ServerConfig::default(), turns, Some(store)).await
}

/// A remote member whose task waits for a decision, in a team someone watches: the call
/// is announced on the member's events like a local member's, the decision given through
/// the team's control reaches the remote task, and the task completes; a rejection is
/// told to the remote agent, which goes on without the call. Edited arguments reach a
/// member that read the server's tool inputs (the call runs with them); a member that did
/// not rejects the call, telling the remote agent why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_members_waiting_call_is_decided_through_the_teams_control() {
    let edited = ApprovalDecision::Modify { arguments: json!({"path": "edited.md", "content": "edited\n"}) };
    let cases = [
        (ApprovalDecision::Approve, false, Some("notes.md")),
        (ApprovalDecision::Reject { reason: Some("not now".into()) }, false, None),
        (edited.clone(), true, Some("edited.md")),
        (edited, false, None),
    ];
    for (decision, reads_inputs, written) in cases {
        let served =
            serve(ServerConfig::default(), [write_call("call_w", "notes.md", "approved\n"), MockTurn::text("Done.")])
                .await;
        let control = TeamControl::new();
        let mut remote = RemoteAgent::resolve(&served.url).await.expect("resolves").with_control(control.clone());
        if reads_inputs {
            remote = remote.read_tool_inputs().await.expect("the extended card");
        }
        let (sink, mut events) = tokio::sync::mpsc::channel(256);
        let member =
            tokio::spawn(async move { remote.run(task("write notes"), Some(sink), CancellationToken::new()).await });
        let (run_id, call_id) = loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
                .await
                .expect("the call is announced")
                .expect("the member goes on");
            if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, arguments, .. } } =
                &event.kind
            {
                assert_eq!((tool.as_str(), arguments["path"].as_str()), ("fs.write", Some("notes.md")));
                break (event.attribution.run_id.clone(), call_id.clone());
            }
        };
        assert_eq!(call_id.as_str(), "call_w");
        assert!(served.server_hub.get(run_id.as_str()).is_some(), "the paused run is the remote task");
        control.decide(&run_id, call_id, decision.clone()).await.expect("the decision is relayed");
        let result = tokio::time::timeout(Duration::from_secs(30), member).await.expect("ends").expect("no panic");
        assert!(result.success, "{decision:?}: {result:?}");
        assert_eq!(result.content, "Done.");
        for path in ["notes.md", "edited.md"] {
            let exists = served.workspace.path().join(path).exists();
            assert_eq!(exists, written == Some(path), "{decision:?}, inputs read: {reads_inputs}: {path}");
        }
        if matches!(decision, ApprovalDecision::Modify { .. }) && !reads_inputs {
            let told = served.mock.requests()[1].body["messages"].to_string();
            assert!(told.contains("cannot be sent to a remote agent"), "the remote agent is told why: {told}");
        }
        assert!(control.decide(&run_id, "call_w", ApprovalDecision::Approve).await.is_err(), "nothing waits now");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agent_sends_its_bearer_token_and_never_shows_it() {
    let served = serve(ServerConfig::default().token("s3cr3t-token"), [MockTurn::text("Let in.")]).await;
    let anonymous = RemoteAgent::resolve(&served.url).await.expect("the card is public");
    let refused = anonymous.run(task("hi"), None, CancellationToken::new()).await;
    assert!(!refused.success);
    assert!(refused.error.as_deref().is_some_and(|e| e.contains("401")), "{refused:?}");

    let trusted = anonymous.bearer("s3cr3t-token");
    assert!(!format!("{trusted:?}").contains("s3cr3t"), "the token stays out of Debug");
    let result = trusted.run(task("hi"), None, CancellationToken::new()).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.content, "Let in.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_can_have_remote_members() {
    let served = serve(ServerConfig::default(), [MockTurn::text("Step one."), MockTurn::text("Step two.")]).await;
    let group = relay(&served.url).await;
    let output = group.run("Draft, then edit.").await.expect("the group runs");
    assert!(output.all_succeeded(), "{output:?}");
    assert_eq!(output.output, "Step two.");
    let requests = served.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body.to_string().contains("Step one."), "the editor got the drafter's answer");
}

/// A pipeline of two members of the server at `url`: `drafter`, then `editor`.
async fn relay(url: &str) -> AgentGroup {
    let first = RemoteAgent::resolve(url).await.expect("resolves").named("drafter");
    let second = first.clone().named("editor");
    AgentGroup::builder("relay").member(Arc::new(first)).member(Arc::new(second)).pipeline().build().expect("a group")
}

/// A pipeline of remote members run again under the team's run (as a resumed team runs
/// it) finds each member's remote task: the same answers, and the model asked once per
/// member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_run_again_under_its_team_run_finds_its_remote_tasks() {
    let (_dir, store) = a_store().await;
    let turns = [MockTurn::text("Step one."), MockTurn::text("Step two."), MockTurn::text("Ran again.")];
    let served = troupe_server_served_with(turns, store).await;
    let group = relay(&served.url).await;
    let team_run = troupe_core::RunId::new("run_team_relay");
    for _ in 0..2 {
        let output = group
            .run_under("Draft, then edit.", Some(team_run.clone()), None, CancellationToken::new())
            .await
            .expect("the group runs");
        assert!(output.all_succeeded(), "{output:?}");
        assert_eq!(output.output, "Step two.");
    }
    assert_eq!(served.mock.requests().len(), 2, "each member's task ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_failures_become_failed_results() {
    let served =
        serve(ServerConfig::default(), [MockTurn::status(400, "the model refuses"), write_call("call_x", "x.md", "x")])
            .await;
    let remote = RemoteAgent::resolve(&served.url).await.expect("resolves");

    let refused = remote.clone().skill("nobody").run(task("hi"), None, CancellationToken::new()).await;
    assert!(!refused.success);
    assert!(refused.error.as_deref().is_some_and(|e| e.contains("-32602") && e.contains("nobody")), "{refused:?}");

    let failed = remote.run(task("fail"), None, CancellationToken::new()).await;
    assert!(!failed.success);
    assert!(failed.error.as_deref().is_some_and(|e| e.contains("TASK_STATE_FAILED")), "{failed:?}");

    let waiting = remote.run(task("write x.md"), None, CancellationToken::new()).await;
    assert!(!waiting.success);
    assert!(
        waiting.error.as_deref().is_some_and(|e| e.contains("needs input") && e.contains("fs.write")),
        "{waiting:?}"
    );
    let run = served.server_hub.get(waiting.run_id.as_ref().expect("a task").as_str()).expect("held");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while !run.is_ended() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the waiting remote task was cancelled");
    assert!(!served.workspace.path().join("x.md").exists());

    served.shutdown.cancel();
    let _ = served.serving.await;
    let gone = remote.run(task("anyone there?"), None, CancellationToken::new()).await;
    assert!(!gone.success);
    assert!(gone.error.as_deref().is_some_and(|e| e.contains("cannot reach")), "{gone:?}");
    let unresolvable = RemoteAgent::resolve(&served.url).await.expect_err("nobody serves the card");
    assert!(unresolvable.to_string().contains("cannot reach"), "{unresolvable}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_member_cancels_its_remote_task_streaming_or_not() {
    // Slow answers: one character every 50 ms.
    let slow = || {
        MockTurn::text("a long, slow answer that takes seconds to write")
            .with_delta_chars(1)
            .with_event_delay(Duration::from_millis(50))
    };
    let served = serve(ServerConfig::default(), [slow(), slow()]).await;
    for (n, streaming) in [true, false].into_iter().enumerate() {
        let remote = RemoteAgent::resolve(&served.url).await.expect("resolves").streaming(streaming);
        let cancel = CancellationToken::new();
        let running = {
            let cancel = cancel.clone();
            tokio::spawn(async move { remote.run(task("answer slowly"), None, cancel).await })
        };
        let started = async {
            loop {
                let runs = served.server_hub.list();
                if runs.len() > n {
                    return runs[0].run_id.clone();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let run_id = tokio::time::timeout(Duration::from_secs(10), started).await.expect("the remote task starts");
        cancel.cancel();
        let result = running.await.expect("the member call ends");
        assert!(!result.success);
        assert_eq!(result.error.as_deref(), Some("cancelled"));
        let run = served.server_hub.get(run_id.as_str()).expect("held");
        tokio::time::timeout(Duration::from_secs(10), async {
            while !run.is_ended() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the remote task ends");
        let outcome = run.view().end.map(|e| e.outcome);
        assert_eq!(outcome, Some(troupe_core::RunOutcomeKind::Cancelled), "streaming: {streaming}");
    }
}

/// The answer came in pieces while the task worked: the first creates the `answer`
/// artifact, the next ones append to it, none is the last, and together they are `answer`
/// (the last update, whole, replaces them).
fn assert_streamed_in_chunks(streamed: &[&Value], answer: &str) {
    let chunks: Vec<&Value> =
        streamed.iter().copied().filter(|s| s["kind"] == "artifact_update" && s["lastChunk"] == false).collect();
    assert!(chunks.len() > 1, "the answer streamed in pieces: {streamed:#?}");
    assert_eq!(chunks[0]["append"], false, "the first piece creates the artifact");
    assert!(chunks[1..].iter().all(|c| c["append"] == true), "the next ones append: {chunks:#?}");
    let text: String = chunks.iter().filter_map(|c| c["text"].as_str()).collect();
    assert_eq!(text, answer);
}

/// The extended card, read with the token over JSON-RPC and HTTP+JSON, gives each skill's
/// tools' arguments' schemas, which the public card keeps to itself; a remote member reads
/// its skill's from it, with its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_card_gives_the_tools_schemas_that_a_remote_member_reads() {
    let served = serve(ServerConfig::default().token("s3cr3t-token"), []).await;
    let public: Value =
        served.get("/.well-known/agent-card.json").send().await.expect("request").json().await.expect("json");
    assert_eq!(public["capabilities"]["extendedAgentCard"], true, "{public}");
    assert!(
        !public.to_string().contains(troupe_a2a::TOOL_INPUTS_EXTENSION),
        "the public card gives no schema: {public}"
    );

    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}});
    let anonymous =
        reqwest::Client::new().post(format!("{}/a2a", served.url)).json(&rpc).send().await.expect("request");
    assert_eq!(anonymous.status(), 401, "the extended card needs the token");
    let answered: Value = served.post("/a2a").json(&rpc).send().await.expect("request").json().await.expect("json");
    let rest: Value =
        served.get("/a2a/rest/extendedAgentCard").send().await.expect("request").json().await.expect("json");
    let v03 = json!({"jsonrpc": "2.0", "id": 2, "method": "agent/getAuthenticatedExtendedCard"});
    let v03: Value = served.post("/a2a").json(&v03).send().await.expect("request").json().await.expect("json");
    for card in [&answered["result"], &rest, &v03["result"]] {
        let extensions = card["capabilities"]["extensions"].as_array().expect("extensions");
        let inputs = extensions.iter().find(|e| e["uri"] == troupe_a2a::TOOL_INPUTS_EXTENSION).expect("the extension");
        let write = &inputs["params"]["skills"]["coder"]["fs.write"];
        assert_eq!(write["required"], json!(["path", "content"]), "{card}");
        assert_eq!(card["name"], public["name"], "the public card's, and more");
    }

    let member = RemoteAgent::resolve(&served.url).await.expect("the card").bearer("s3cr3t-token");
    assert!(member.tool_inputs().is_empty(), "nothing read yet");
    let member = member.read_tool_inputs().await.expect("the extended card");
    assert_eq!(member.tool_inputs()["fs.write"]["required"], json!(["path", "content"]));
    assert!(member.tool_inputs().contains_key("fs.read"), "{:?}", member.tool_inputs().keys());
    let anonymous = RemoteAgent::resolve(&served.url).await.expect("the card");
    assert!(anonymous.read_tool_inputs().await.is_err(), "without the token the server refuses");
}
