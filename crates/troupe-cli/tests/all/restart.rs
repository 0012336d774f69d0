//! Two `troupe serve` processes on one store: the store is the truth. The second answers
//! for every run of the store (one the first started and ended included), adopts the runs
//! the first held as soon as the first is gone (killed with SIGKILL) — those waiting for
//! a person and those working — and completes a run the first started once a person
//! approves it through the second. Then the second is stopped gracefully while a run waits:
//! it does not wait out its grace, and a third server adopts that run at once. On SQLite
//! and on PostgreSQL. Lookups go through the native API and A2A's `GetTask`.

use crate::serve::{Serving, start, view, wait_phase};
use std::time::{Duration, Instant};

/// The lease every server here holds its runs by, in seconds.
const LEASE: &str = "1.5";

/// An agent that cannot list the workspace: the demo model answers it in one streamed
/// reply (about 1.5 s), with no call to approve.
const ECHO: &str = r#"[agent]
id = "echo"
name = "Echo"
version = "0.1.0"
description = "Answers in one reply."

[provider]
model = "demo"

[system]
prompt = "You answer."

[[tools]]
name = "grep"
"#;

/// Starts a run of `agent` on the server at `url`; its id.
async fn post_run(client: &reqwest::Client, url: &str, agent: &str, instruction: &str) -> String {
    let started: serde_json::Value = client
        .post(format!("{url}/v1/runs"))
        .json(&serde_json::json!({"agent": agent, "instruction": instruction, "stream": false}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    started["run_id"].as_str().unwrap_or_else(|| panic!("a run id: {started}")).to_owned()
}

async fn approve(client: &reqwest::Client, url: &str, run: &str, waiting: &serde_json::Value) {
    let call = waiting["pending"][0]["call_id"].as_str().expect("a call id");
    let approved = client
        .post(format!("{url}/v1/runs/{run}/signals"))
        .json(&serde_json::json!({"type": "approval", "call_id": call, "decision": {"type": "approve"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(approved.status(), 202, "{}", approved.text().await.unwrap_or_default());
}

/// Waits until `serving` says it resumed `run`; the time it took.
fn until_resumed(serving: &mut Serving, run: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if serving.said(&format!("resumed run {run}")) {
            return start.elapsed();
        }
        assert!(start.elapsed() < within, "run {run} was not adopted within {within:?}: {:?}", serving.lines());
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn two_servers_on_one_store(store: &[&str]) {
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    std::fs::create_dir_all(workspace.path().join(".troupe/agents")).expect("agents dir");
    std::fs::write(workspace.path().join(".troupe/agents/echo.toml"), ECHO).expect("agent file");
    let client = reqwest::Client::new();
    let args = |grace: &'static str| -> Vec<&str> {
        let mut args = store.to_vec();
        args.extend(["--lease-ttl", LEASE, "--shutdown-grace", grace]);
        args
    };

    let first = start(workspace.path(), &args("1"));
    let ended = post_run(&client, &first.url, "echo", "hello").await;
    wait_phase(&client, &first.url, &ended, "ended").await;
    let waiting = post_run(&client, &first.url, "troupe", "Summarise this repository").await;
    wait_phase(&client, &first.url, &waiting, "waiting").await;

    // The second server answers for the first's runs from the store, and takes none the
    // first holds.
    let mut second = start(workspace.path(), &args("20"));
    let seen = view(&client, &second.url, &ended).await;
    assert_eq!(seen["phase"], "ended", "{seen}");
    assert_eq!(seen["end"]["outcome"], "completed", "{seen}");
    let seen = view(&client, &second.url, &waiting).await;
    assert_eq!(seen["phase"], "waiting", "{seen}");
    assert_eq!(seen["pending"][0]["tool"], "fs.write", "{seen}");
    let task: serde_json::Value = client
        .post(format!("{}/a2a", second.url))
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": ended}}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(task["result"]["status"]["state"], "TASK_STATE_COMPLETED", "A2A finds it too: {task}");
    let listed: serde_json::Value =
        client.get(format!("{}/v1/runs", second.url)).send().await.expect("request").json().await.expect("json");
    let ids: Vec<&str> = listed["runs"].as_array().expect("runs").iter().filter_map(|r| r["run_id"].as_str()).collect();
    assert!(ids.contains(&ended.as_str()) && ids.contains(&waiting.as_str()), "{listed}");
    // Its live events stream only where it is held.
    let elsewhere = client.get(format!("{}/v1/runs/{waiting}/events", second.url)).send().await.expect("request");
    assert_eq!(elsewhere.status(), 409);
    let body: serde_json::Value = elsewhere.json().await.expect("json");
    assert_eq!(body["error"]["code"], "run_elsewhere", "{body}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!second.said(&format!("resumed run {waiting}")), "a held run stays with its holder: {:?}", second.lines());
    let working = post_run(&client, &first.url, "echo", "hello again").await;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(view(&client, &first.url, &working).await["phase"], "running", "killed while it works");

    // The first is killed while one run waits and another works: the second adopts both
    // within a lease.
    first.kill();
    let lease = Duration::from_secs_f64(LEASE.parse().expect("a number"));
    let took = until_resumed(&mut second, &waiting, lease * 3);
    assert!(took <= lease + Duration::from_millis(800), "adopted in {took:?}, more than a lease and a poll");
    until_resumed(&mut second, &working, lease * 3);
    let done = wait_phase(&client, &second.url, &working, "ended").await;
    assert_eq!(done["end"]["outcome"], "completed", "{done}");

    // A person approves, through the second, the call the first's run waits for.
    let seen = wait_phase(&client, &second.url, &waiting, "waiting").await;
    assert_eq!(seen["pending"][0]["tool"], "fs.write", "the adopted run waits for the same decision: {seen}");
    approve(&client, &second.url, &waiting, &seen).await;
    let done = wait_phase(&client, &second.url, &waiting, "ended").await;
    assert_eq!(done["end"]["outcome"], "completed", "{done}");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write happened");

    // Stopped gracefully while a run waits for a person, the second does not wait out its
    // 20 s grace, and a third server takes the run at once.
    let mut third = start(workspace.path(), &args("1"));
    let left = post_run(&client, &second.url, "troupe", "Summarise this repository").await;
    wait_phase(&client, &second.url, &left, "waiting").await;
    let stopping = Instant::now();
    second.stop();
    assert!(stopping.elapsed() < Duration::from_secs(5), "shutdown took {:?}", stopping.elapsed());
    let took = until_resumed(&mut third, &left, lease * 3);
    assert!(took < Duration::from_secs(1), "a paused run is adopted on the next look: {took:?}");
    let seen = wait_phase(&client, &third.url, &left, "waiting").await;
    approve(&client, &third.url, &left, &seen).await;
    let done = wait_phase(&client, &third.url, &left, "ended").await;
    assert_eq!(done["end"]["outcome"], "completed", "{done}");
    third.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_answers_for_the_store_and_adopts_the_runs_of_a_first_sqlite() {
    two_servers_on_one_store(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_answers_for_the_store_and_adopts_the_runs_of_a_first_postgres() {
    let Ok(base) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("the PostgreSQL restart test", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = format!("troupe_restart_{}", std::process::id());
    let admin =
        troupe::store::postgres::PostgresStore::connect_in_schema(&base, &schema).await.expect("a fresh schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-csearch_path%3D{schema}");
    two_servers_on_one_store(&["--store", &url]).await;
    let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    // The schema name is the test's own (`troupe_restart_<pid>`), not input.
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(admin.pool()).await.expect("the test schema is dropped");
}
