//! A2A over its HTTP+JSON binding and push notifications, with the reference Python
//! client (`a2a-sdk`, `tests/a2a/client.py`) configured for REST only, and a webhook
//! receiver on loopback recording what the server POSTs to it.

use crate::a2a::{last, lines, python, scenario_with};
use crate::common::{Served, serve, write_call};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_server::ServerConfig;
use troupe_testkit::MockTurn;

/// One POST the receiver got: its headers, its body, and the status it answered.
#[derive(Clone, Debug)]
struct Delivery {
    headers: HeaderMap,
    body: Value,
    status: u16,
}

/// A webhook on loopback that records every POST and answers 503 to the first
/// `failures` of them.
struct Receiver {
    url: String,
    seen: Arc<Mutex<Vec<Delivery>>>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    async fn start(failures: usize) -> Receiver {
        Receiver::start_with(failures, Duration::ZERO).await
    }

    /// A receiver that takes `delay` to answer each POST.
    async fn start_with(failures: usize, delay: Duration) -> Receiver {
        let seen: Arc<Mutex<Vec<Delivery>>> = Arc::default();
        let count = Arc::new(AtomicUsize::new(0));
        let record = {
            let seen = Arc::clone(&seen);
            move |headers: HeaderMap, body: axum::body::Bytes| {
                let seen = Arc::clone(&seen);
                let count = Arc::clone(&count);
                async move {
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let status = if n < failures { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    seen.lock().expect("lock").push(Delivery { headers, body, status: status.as_u16() });
                    tokio::time::sleep(delay).await;
                    status
                }
            }
        };
        let app = axum::Router::new().route("/hook", axum::routing::post(record));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(until.cancelled_owned()).await;
        });
        Receiver { url, seen, stop }
    }

    fn seen(&self) -> Vec<Delivery> {
        self.seen.lock().expect("lock").clone()
    }

    /// Waits (at most 15 s) for a delivered update of `task` in `state`.
    async fn wait_for_state(&self, task: &str, state: &str) -> Vec<Delivery> {
        let wait = async {
            loop {
                let seen = self.seen();
                let arrived = seen.iter().any(|d| {
                    d.status == 200
                        && d.body["statusUpdate"]["taskId"] == task
                        && d.body["statusUpdate"]["status"]["state"] == state
                });
                if arrived {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let Ok(seen) = tokio::time::timeout(Duration::from_secs(15), wait).await else {
            panic!("no {state} update of {task} reached the webhook: {:#?}", self.seen())
        };
        seen
    }
}

/// The server's default body limit.
fn served_limit() -> usize {
    ServerConfig::default().body_limit
}

/// A loopback URL nobody listens on.
async fn dead_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/hook")
}

fn header<'a>(delivery: &'a Delivery, name: &str) -> Option<&'a str> {
    delivery.headers.get(name).and_then(|v| v.to_str().ok())
}

fn states(deliveries: &[Delivery], task: &str) -> Vec<String> {
    deliveries
        .iter()
        .filter(|d| d.status == 200 && d.body["statusUpdate"]["taskId"] == task)
        .filter_map(|d| d.body["statusUpdate"]["status"]["state"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_only_client_runs_the_whole_task_life_over_http_json() {
    let Some(python) = python("a_rest_only_client_runs_the_whole_task_life_over_http_json") else { return };
    let served = serve(
        ServerConfig::default(),
        [
            MockTurn::text("Hello over REST."),
            write_call("call_w", "notes.md", "rest\n"),
            MockTurn::text("Wrote notes.md."),
            write_call("call_c", "c.md", "c\n"),
        ],
    )
    .await;
    let out = scenario_with(&python, "rest", &served, &[]).await;

    let card = last(&out, "card");
    assert!(
        card["interfaces"].as_array().expect("interfaces").contains(&json!([
            format!("{}/a2a/rest", served.url),
            "HTTP+JSON",
            "1.0"
        ])),
        "{card}"
    );
    assert_eq!(card["push"], true);
    assert_eq!(
        last(&out, "transports"),
        &json!({"event": "transports", "blocking": "RestTransport", "streaming": "RestTransport"})
    );

    let sent = last(&out, "send");
    assert_eq!(
        (&sent["state"], &sent["artifacts"]["answer"]),
        (&json!("TASK_STATE_COMPLETED"), &json!("Hello over REST."))
    );
    let first = lines(&out, "first");
    assert_eq!(first[0]["kind"], "task", "a REST stream starts with the task");
    let paused = last(&out, "first");
    assert_eq!(paused["state"], "TASK_STATE_INPUT_REQUIRED", "{out:#?}");
    assert!(paused["status"].as_str().is_some_and(|s| s.contains("call_w")), "{paused}");
    let second = last(&out, "second");
    assert_eq!((&second["kind"], &second["state"]), (&json!("status_update"), &json!("TASK_STATE_COMPLETED")));
    assert_eq!(std::fs::read_to_string(served.workspace.path().join("notes.md")).expect("approved"), "rest\n");

    let got = last(&out, "get");
    assert_eq!((&got["id"], &got["state"]), (&sent["id"], &json!("TASK_STATE_COMPLETED")));
    assert_eq!(got["history"].as_array().map(Vec::len), Some(1), "historyLength=1 travelled in the query");
    let waiting = last(&out, "waiting");
    assert_eq!(waiting["state"], "TASK_STATE_INPUT_REQUIRED");
    let listed = last(&out, "list");
    assert_eq!((&listed["total"], listed["ids"].as_array().map(Vec::len)), (&json!(3), Some(2)), "{listed}");
    assert_eq!(listed["ids"][0], waiting["id"], "newest first");
    assert!(listed["next"].as_str().is_some_and(|n| !n.is_empty()));
    assert_eq!(last(&out, "list_waiting")["ids"], json!([waiting["id"]]));
    let in_context = &last(&out, "list_context")["tasks"];
    assert_eq!(in_context.as_array().map(Vec::len), Some(1));
    assert_eq!(in_context[0]["artifacts"]["answer"], "Hello over REST.");

    assert_eq!(last(&out, "cancel")["state"], "TASK_STATE_CANCELED");
    assert_eq!(last(&out, "cancel_again")["error"], "TaskNotCancelableError");
    let unknown = last(&out, "get_unknown");
    assert_eq!(unknown["error"], "TaskNotFoundError", "{unknown}");
    let bad_skill = last(&out, "bad_skill");
    assert_eq!(bad_skill["error"], "InvalidParamsError", "{bad_skill}");
    assert!(bad_skill["message"].as_str().is_some_and(|m| m.contains("nobody")));
    assert_eq!(last(&out, "subscribe_ended")["error"], "UnsupportedOperationError");
    assert!(!served.workspace.path().join("c.md").exists(), "a cancelled call never ran");

    // The error shape itself, and the statuses, read raw.
    let missing = served.get("/a2a/rest/tasks/run_nope").send().await.expect("request");
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.expect("json");
    assert_eq!((&body["error"]["code"], &body["error"]["status"]), (&json!(404), &json!("NOT_FOUND")));
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let malformed = served
        .post("/a2a/rest/message:send")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("request");
    assert_eq!(malformed.status(), 400);
    let malformed: Value = malformed.json().await.expect("json");
    assert_eq!(malformed["error"]["details"][0]["reason"], "INVALID_REQUEST", "{malformed}");
    let huge = format!("{{\"message\": {{\"parts\": [{{\"text\": \"{}\"}}]}}}}", "x".repeat(served_limit() + 1));
    let too_large =
        served.post("/a2a/rest/message:send").header("content-type", "application/json").body(huge).send().await;
    assert_eq!(too_large.expect("request").status(), 413);
    let no_action = served.post(&format!("/a2a/rest/tasks/{}:pause", sent["id"].as_str().expect("id"))).send().await;
    assert_eq!(no_action.expect("request").status(), 405);
    let bad_query = served.get("/a2a/rest/tasks?pageSize=many").send().await.expect("request");
    assert_eq!(bad_query.status(), 400);
    assert_eq!(served.mock.requests().len(), 4, "no refused request reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_set_by_the_client_gets_the_updates_to_the_end_with_its_token_and_auth() {
    let test = "a_webhook_set_by_the_client_gets_the_updates_to_the_end_with_its_token_and_auth";
    let Some(python) = python(test) else { return };
    let receiver = Receiver::start(0).await;
    let dead = dead_url().await;
    let served = serve(
        ServerConfig::default(),
        [
            write_call("call_p", "p.md", "p\n"),
            MockTurn::text("Wrote p.md."),
            write_call("call_q", "q.md", "q\n"),
            MockTurn::text("Wrote q.md."),
        ],
    )
    .await;
    let out = scenario_with(&python, "push", &served, &["--webhook", &receiver.url, "--dead", &dead]).await;

    let task = last(&out, "first")["id"].as_str().expect("a task").to_owned();
    let created = &last(&out, "created")["config"];
    assert_eq!(
        created,
        &json!({"id": "hook-1", "taskId": task, "url": receiver.url, "authentication": {"scheme": "Bearer"}}),
        "kept, without the token and credentials"
    );
    assert_eq!(&last(&out, "got")["config"], created);
    assert_eq!(last(&out, "listed")["configs"], json!([created]), "listed over JSON-RPC too");
    for (label, error) in [
        ("not_http", "InvalidParamsError"),
        ("not_a_url", "InvalidParamsError"),
        ("no_url", "InvalidParamsError"),
        ("unknown_task", "TaskNotFoundError"),
        ("unreachable", "InvalidParamsError"),
        ("unreachable_rpc", "InvalidParamsError"),
    ] {
        assert_eq!(last(&out, label)["error"], error, "{label}: {}", last(&out, label));
    }
    let unreachable = last(&out, "unreachable")["message"].as_str().expect("a message");
    assert!(unreachable.contains(&dead) && unreachable.contains("cannot be reached"), "{unreachable}");
    assert!(last(&out, "not_http")["message"].as_str().is_some_and(|m| m.contains("http")));
    assert_eq!(last(&out, "second")["state"], "TASK_STATE_COMPLETED", "refused configs left the task alone");
    assert_eq!(last(&out, "get_unknown_config")["error"], "TaskNotFoundError");
    assert_eq!(last(&out, "after_delete")["configs"], json!([]));

    let seen = receiver.wait_for_state(&task, "TASK_STATE_COMPLETED").await;
    let mine: Vec<&Delivery> = seen.iter().filter(|d| d.body.to_string().contains(&task)).collect();
    for delivery in &mine {
        assert_eq!(header(delivery, "x-a2a-notification-token"), Some("tok-push-123"));
        assert_eq!(header(delivery, "authorization"), Some("Bearer cred-push-456"));
    }
    let told = states(&seen, &task);
    assert_eq!(told.first().map(String::as_str), Some("TASK_STATE_WORKING"), "{told:?}");
    assert_eq!(told.last().map(String::as_str), Some("TASK_STATE_COMPLETED"), "{told:?}");
    let answer = mine
        .iter()
        .rev()
        .find(|d| d.body["artifactUpdate"]["artifact"]["artifactId"] == "answer")
        .expect("the answer was pushed");
    assert_eq!(answer.body["artifactUpdate"]["artifact"]["parts"][0]["text"], "Wrote p.md.");

    // The other task's webhook was deleted before its decision: nothing came for it.
    let other = last(&out, "other")["id"].as_str().expect("a task").to_owned();
    assert_eq!(last(&out, "other_second")["state"], "TASK_STATE_COMPLETED");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(states(&receiver.seen(), &other).is_empty(), "{:#?}", receiver.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_webhook_given_with_the_messages_is_retried_and_told_across_the_pause() {
    let test = "a_failing_webhook_given_with_the_messages_is_retried_and_told_across_the_pause";
    let Some(python) = python(test) else { return };
    let receiver = Receiver::start(2).await;
    let served = serve(ServerConfig::default(), [write_call("call_r", "r.md", "r\n"), MockTurn::text("Told.")]).await;
    let out = scenario_with(&python, "push_on_send", &served, &["--webhook", &receiver.url]).await;
    assert_eq!(last(&out, "first")["state"], "TASK_STATE_INPUT_REQUIRED");
    let sent = last(&out, "send");
    assert_eq!(sent["state"], "TASK_STATE_COMPLETED");
    let task = sent["id"].as_str().expect("a task");
    let listed = &last(&out, "listed")["configs"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "the config sent twice is one webhook: {listed}");
    assert_eq!(listed[0]["id"], task, "named after its task");

    let seen = receiver.wait_for_state(task, "TASK_STATE_COMPLETED").await;
    let statuses: Vec<u16> = seen.iter().map(|d| d.status).collect();
    assert_eq!(&statuses[..3], &[503, 503, 200], "{statuses:?}");
    assert_eq!(seen[0].body, seen[2].body, "the refused update was sent again");
    assert!(seen.iter().all(|d| header(d, "x-a2a-notification-token") == Some("tok-on-send")));
    assert!(seen.iter().all(|d| header(d, "authorization").is_none()), "no authentication was configured");
    let told = states(&seen, task);
    let at = |state: &str| told.iter().position(|s| s == state).unwrap_or_else(|| panic!("no {state} in {told:?}"));
    assert!(at("TASK_STATE_WORKING") < at("TASK_STATE_INPUT_REQUIRED"), "{told:?}");
    assert!(at("TASK_STATE_INPUT_REQUIRED") < at("TASK_STATE_COMPLETED"), "{told:?}");
    assert_eq!(told.iter().filter(|s| *s == "TASK_STATE_COMPLETED").count(), 1, "told once: {told:?}");
    assert_eq!(told.last().map(String::as_str), Some("TASK_STATE_COMPLETED"));
    assert_eq!(std::fs::read_to_string(served.workspace.path().join("r.md")).expect("approved"), "r\n");
}

async fn rpc(served: &Served, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    served.post("/a2a").json(&request).send().await.expect("request").json().await.expect("json")
}

/// The 0.3 names of the push methods, in 0.3 shapes, on a task started over the native
/// API: the webhook is told of the task to its end, with Basic authentication.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_0_3_push_methods_read_and_answer_0_3_shapes() {
    let receiver = Receiver::start(0).await;
    let served =
        serve(ServerConfig::default(), [write_call("call_l", "l.md", "l\n"), MockTurn::text("Wrote l.md.")]).await;
    let run = served.start("write l.md").await;
    served.wait_phase(&run, "waiting").await;

    let config = json!({"url": receiver.url, "token": "tok-03",
        "authentication": {"schemes": ["Basic"], "credentials": "dXNlcjpwdw=="}});
    let set =
        rpc(&served, "tasks/pushNotificationConfig/set", json!({"taskId": run, "pushNotificationConfig": config}))
            .await;
    let kept = json!({"taskId": run, "pushNotificationConfig": {"id": run, "url": receiver.url,
        "authentication": {"schemes": ["Basic"]}}});
    assert_eq!(set["result"], kept, "{set}");
    let got = rpc(&served, "tasks/pushNotificationConfig/get", json!({"id": run})).await;
    assert_eq!(got["result"], kept, "{got}");
    let listed = rpc(&served, "tasks/pushNotificationConfig/list", json!({"id": run})).await;
    assert_eq!(listed["result"], json!([kept]));
    let unknown = rpc(
        &served,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": "run_none", "pushNotificationConfig": {"url": receiver.url}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");

    assert_eq!(served.approve(&run, "call_l").await.status(), 202);
    let seen = receiver.wait_for_state(&run, "TASK_STATE_COMPLETED").await;
    assert!(seen.iter().all(|d| header(d, "authorization") == Some("Basic dXNlcjpwdw==")));
    assert!(seen.iter().all(|d| header(d, "x-a2a-notification-token") == Some("tok-03")));
    assert_eq!(states(&seen, &run).first().map(String::as_str), Some("TASK_STATE_WORKING"), "the approval let it work");

    let deleted =
        rpc(&served, "tasks/pushNotificationConfig/delete", json!({"id": run, "pushNotificationConfigId": run})).await;
    assert!(deleted.get("error").is_none(), "{deleted}");
    let listed = rpc(&served, "tasks/pushNotificationConfig/list", json!({"id": run})).await;
    assert_eq!(listed["result"], json!([]));
    let again = rpc(&served, "DeleteTaskPushNotificationConfig", json!({"taskId": run, "id": run})).await;
    assert_eq!(again["error"]["code"], -32001, "nothing left to delete: {again}");
}

/// Two webhooks on one task, one of them slow: the other is told of the whole task, and
/// the run ends, while the slow one is still on its first update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_webhook_delays_neither_the_run_nor_another_webhook() {
    let slow = Receiver::start_with(0, Duration::from_secs(8)).await;
    let fast = Receiver::start(0).await;
    let served = serve(ServerConfig::default(), [write_call("call_s", "s.md", "s\n"), MockTurn::text("Done.")]).await;
    let run = served.start("write s.md").await;
    served.wait_phase(&run, "waiting").await;
    for (id, receiver) in [("slow", &slow), ("fast", &fast)] {
        let created =
            rpc(&served, "CreateTaskPushNotificationConfig", json!({"taskId": run, "id": id, "url": receiver.url}))
                .await;
        assert_eq!(created["result"]["id"], id, "{created}");
    }
    assert_eq!(served.approve(&run, "call_s").await.status(), 202);
    let told = fast.wait_for_state(&run, "TASK_STATE_COMPLETED").await;
    served.wait_phase(&run, "ended").await;
    let slow_seen = slow.seen().len();
    assert!(told.len() > 2, "{told:#?}");
    assert_eq!(slow_seen, 1, "the slow webhook is still on its first update");
}
