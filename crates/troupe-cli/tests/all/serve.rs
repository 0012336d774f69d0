//! `troupe serve` end to end: the real binary on a loopback port, the demo agent paused
//! for an approval, the server stopped with SIGTERM and started again: the run is
//! resumed, still waiting, and an approval over HTTP completes it with its write done
//! once. Also the refusal to serve a public address without a token.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) struct Serving {
    child: Child,
    pub(crate) url: String,
    stderr: std::sync::mpsc::Receiver<String>,
    /// What it said before it was listening.
    early: Vec<String>,
    /// What it said since, as far as read.
    later: Vec<String>,
}

/// Starts `troupe serve` in `workspace` (recording in its store) and waits for its address.
pub(crate) fn start(workspace: &Path, extra: &[&str]) -> Serving {
    start_with(workspace, extra, &[])
}

/// [`start`] with `env` set (after the variables a test must not inherit are removed).
pub(crate) fn start_with(workspace: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serving {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .arg("serve")
        .args(if extra.contains(&"--addr") { &[][..] } else { &["--addr", "127.0.0.1:0"][..] })
        .args(["--model", "demo", "-w"])
        .arg(workspace)
        .args(if extra.contains(&"--shutdown-grace") { &[][..] } else { &["--shutdown-grace", "1"][..] })
        .args(extra)
        .current_dir(workspace)
        .env_remove("TROUPE_SERVER_TOKEN")
        .env_remove("TROUPE_STORE")
        .env_remove("TROUPE_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    Serving::spawn(command, "troupe serving on ")
}

impl Serving {
    /// Spawns `command` (its stderr piped) and waits for the line starting with `prefix`
    /// followed by its address.
    pub(crate) fn spawn(mut command: Command, prefix: &str) -> Serving {
        let mut child = command.spawn().expect("troupe starts");
        let stderr = child.stderr.take().expect("stderr");
        let (lines, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut early = Vec::new();
        let url = loop {
            let Ok(line) = received.recv_timeout(Duration::from_secs(60)) else {
                panic!("troupe serve did not say where it listens: {early:?}");
            };
            if let Some(rest) = line.strip_prefix(prefix) {
                break rest.split_whitespace().next().expect("an address").to_owned();
            }
            early.push(line);
        };
        Serving { child, url, stderr: received, early, later: Vec::new() }
    }

    /// Whether it has said a line containing `text` so far.
    pub(crate) fn said(&mut self, text: &str) -> bool {
        self.later.extend(self.stderr.try_iter());
        self.early.iter().chain(&self.later).any(|line| line.contains(text))
    }

    /// Everything it said so far.
    pub(crate) fn lines(&mut self) -> Vec<String> {
        self.later.extend(self.stderr.try_iter());
        self.early.iter().chain(&self.later).cloned().collect()
    }

    /// Kills it with SIGKILL: nothing of its own shutdown happens.
    pub(crate) fn kill(mut self) {
        let sent = Command::new("kill").args(["-KILL", &self.child.id().to_string()]).status().expect("kill runs");
        assert!(sent.success(), "SIGKILL sent");
        let _ = self.child.wait();
    }

    pub(crate) fn stop(mut self) -> Vec<String> {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill runs");
        assert!(sent.success(), "SIGTERM sent");
        let status = self.child.wait().expect("exits");
        assert!(status.success(), "troupe serve exits cleanly on SIGTERM: {status:?}");
        self.early.into_iter().chain(self.later).chain(self.stderr.try_iter()).collect()
    }
}

pub(crate) async fn view(client: &reqwest::Client, url: &str, run: &str) -> serde_json::Value {
    client.get(format!("{url}/v1/runs/{run}")).send().await.expect("request").json().await.expect("json")
}

pub(crate) async fn wait_phase(client: &reqwest::Client, url: &str, run: &str, phase: &str) -> serde_json::Value {
    for _ in 0..1000 {
        let view = view(client, url, run).await;
        if view["phase"] == phase {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("run {run} never reached {phase}: {}", view(client, url, run).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_at_shutdown_resumes_on_the_next_start_and_completes_once_approved() {
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let client = reqwest::Client::new();

    let first = start(workspace.path(), &[]);
    let started: serde_json::Value = client
        .post(format!("{}/v1/runs", first.url))
        .json(&serde_json::json!({"agent": "troupe", "instruction": "Summarise this repository", "stream": false}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let run = started["run_id"].as_str().expect("a run id").to_owned();
    let waiting = wait_phase(&client, &first.url, &run, "waiting").await;
    assert_eq!(waiting["pending"][0]["tool"], "fs.write");
    let said = first.stop();
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "nothing written before the approval");
    assert!(said.iter().any(|l| l.contains("shutting down")), "{said:?}");

    let audit = workspace.path().join("audit.jsonl");
    let second = start(workspace.path(), &["--audit-log", audit.to_str().expect("a UTF-8 path")]);
    let resumed = wait_phase(&client, &second.url, &run, "waiting").await;
    assert_eq!(resumed["pending"][0]["tool"], "fs.write", "the resumed run waits for the same decision");
    let call = resumed["pending"][0]["call_id"].as_str().expect("a call id").to_owned();
    let approved = client
        .post(format!("{}/v1/runs/{run}/signals", second.url))
        .json(&serde_json::json!({"type": "approval", "call_id": call, "decision": {"type": "approve"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(approved.status(), 202);
    let ended = wait_phase(&client, &second.url, &run, "ended").await;
    assert_eq!(ended["end"]["outcome"], "completed", "{ended}");
    let summary = std::fs::read_to_string(workspace.path().join("TROUPE_DEMO.md")).expect("the summary was written");
    assert!(summary.contains("README.md"), "{summary}");
    let said = second.stop();
    assert!(said.iter().any(|l| l.contains(&format!("resumed run {run}"))), "{said:?}");
    let decisions: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .expect("the audit log was written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert!(
        decisions.iter().any(|d| d["kind"] == "approval" && d["tool"] == "fs.write" && d["decision"] == "allowed"),
        "the approval over HTTP is audited: {decisions:?}"
    );
}

#[test]
fn a_public_address_without_a_token_is_refused() {
    let workspace = tempfile::tempdir().expect("workspace");
    let out = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["serve", "--addr", "0.0.0.0:0", "--no-store", "-w"])
        .arg(workspace.path())
        .env_remove("TROUPE_SERVER_TOKEN")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TROUPE_SERVER_TOKEN"), "{stderr}");
}

/// A served team is one run carrying every member's events; a member's call that needs
/// approval pauses that member, announced on the team's stream, and a decision posted to
/// the team's run reaches the member; the team's run and its members' runs are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_file_is_served_as_one_run_carrying_every_members_events() {
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/team.toml");
    let team = team.to_str().expect("a UTF-8 path");
    let serving = start(workspace.path(), &["--team", team]);
    let client = reqwest::Client::new();

    let agents: serde_json::Value =
        client.get(format!("{}/v1/agents", serving.url)).send().await.expect("request").json().await.expect("json");
    let project = agents["agents"].as_array().and_then(|a| a.iter().find(|t| t["name"] == "project")).cloned();
    assert_eq!(project.expect("the team is listed")["kind"], "team");
    // A request naming the team finds it, as a team: client tools are offered to an agent's
    // runs alone.
    let with_tools = serde_json::json!({"threadId": "t", "runId": "r", "tools": [{"name": "pick"}],
        "messages": [{"id": "u", "role": "user", "content": "Describe this repository"}]});
    let refused = client.post(format!("{}/agui/project", serving.url)).json(&with_tools).send().await.expect("request");
    assert_eq!(refused.status(), 422);
    let error: serde_json::Value = refused.json().await.expect("a JSON error");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("is a team")), "{error}");

    let mut response = client
        .post(format!("{}/v1/runs", serving.url))
        .json(&serde_json::json!({"team": "project", "instruction": "Describe this repository"}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let mut events: Vec<serde_json::Value> = Vec::new();
    let mut pending = String::new();
    let mut decided = Vec::new();
    let read = async {
        while let Some(chunk) = response.chunk().await.expect("the stream") {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                let Some(data) = line.trim_end().strip_prefix("data: ") else { continue };
                let event: serde_json::Value = serde_json::from_str(data).expect("JSON");
                if event["type"] == "run_paused" {
                    // The person approves the member's call through the team's run.
                    let team_run = events.first().map(|e| e["run_id"].clone()).expect("the team's run started");
                    let call_id = event["reason"]["call_id"].clone();
                    let signal =
                        serde_json::json!({"type": "approval", "call_id": call_id, "decision": {"type": "approve"}});
                    let url = format!("{}/v1/runs/{}/signals", serving.url, team_run.as_str().expect("an id"));
                    let sent = client.post(url).json(&signal).send().await.expect("the signal is posted");
                    assert!(sent.status().is_success(), "{}", sent.text().await.unwrap_or_default());
                    decided.push((event["agent_id"].clone(), event["reason"]["tool"].clone()));
                }
                events.push(event);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read).await.expect("the team ends");
    assert_eq!(decided, [(serde_json::json!("writer"), serde_json::json!("fs.write"))], "the writer asked once");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write ran");
    let first = events.first().expect("events");
    let last = events.last().expect("events");
    assert_eq!((first["type"].as_str(), first["agent_id"].as_str()), (Some("run_started"), Some("project")));
    assert_eq!((last["type"].as_str(), last["agent_id"].as_str()), (Some("run_finished"), Some("project")));
    assert_eq!(last["outcome"], "completed", "{last}");
    assert_eq!(first["run_id"], last["run_id"]);
    for member in ["lead", "researcher", "reviewer", "writer"] {
        assert!(events.iter().any(|e| e["agent_id"] == member), "{member}'s events are carried");
    }
    assert!(last["output"].as_str().is_some_and(|o| !o.trim().is_empty()), "the team answered: {last}");
    let member_tokens: u64 = events
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| e["usage"]["input_tokens"].as_u64().unwrap_or(0) + e["usage"]["output_tokens"].as_u64().unwrap_or(0))
        .sum();
    assert!(member_tokens > 0, "the members' calls report usage");
    let team_tokens =
        last["usage"]["input_tokens"].as_u64().unwrap_or(0) + last["usage"]["output_tokens"].as_u64().unwrap_or(0);
    assert_eq!(team_tokens, member_tokens, "the team's end sums every member's usage: {last}");
    serving.stop();

    // The team's run, under the server's run id, with its members' runs under it.
    let listed = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["runs", "list", "--json", "-w"])
        .arg(workspace.path())
        .env_remove("TROUPE_STORE")
        .output()
        .expect("the binary runs");
    let runs: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let team_run = runs.iter().find(|r| r["agent"] == "project").expect("the team's run is recorded");
    assert_eq!(team_run["id"], first["run_id"], "recorded under the server's run id: {runs:?}");
    assert_eq!(team_run["status"], "completed");
    assert_eq!(team_run["runs_under"], 4, "the leader, the researcher, the reviewer and the writer: {runs:?}");
    let researcher = runs.iter().find(|r| r["agent"] == "researcher").expect("the worker's run is recorded");
    assert_eq!(researcher["status"], "completed", "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_team_stops_when_its_token_budget_runs_out() {
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    let teams = tempfile::tempdir().expect("team dir");
    std::fs::create_dir(teams.path().join("agents")).expect("agents");
    for entry in std::fs::read_dir(example.join("agents")).expect("example agents") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), teams.path().join("agents").join(entry.file_name())).expect("copy");
    }
    let team = std::fs::read_to_string(example.join("team.toml")).expect("team file");
    let team = team.replace("max_total_tokens = 200000", "max_total_tokens = 10");
    assert!(team.contains("max_total_tokens = 10"));
    let file = teams.path().join("team.toml");
    std::fs::write(&file, team).expect("write");
    let serving = start(workspace.path(), &["--no-store", "--team", file.to_str().expect("a UTF-8 path")]);
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/v1/runs", serving.url))
        .json(&serde_json::json!({"team": "project", "instruction": "Describe this repository"}))
        .send()
        .await
        .expect("request");
    let run = response.headers()["x-troupe-run-id"].to_str().expect("an id").to_owned();
    let body = response.text();
    let body = tokio::time::timeout(Duration::from_secs(120), body).await.expect("the team ends").expect("body");
    let last: serde_json::Value = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .next_back()
        .map(|data| serde_json::from_str(data).expect("JSON"))
        .expect("events");
    assert_eq!((last["type"].as_str(), last["agent_id"].as_str()), (Some("run_finished"), Some("project")));
    assert_eq!(last["outcome"], "failed", "{last}");
    let ended = wait_phase(&client, &serving.url, &run, "ended").await;
    let error = ended["end"]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("tokens") && error.contains("budget"), "{ended}");
    serving.stop();
}

const WRITER: &str = r#"[agent]
id = "writer"
name = "Writer"
version = "0.1.0"
description = "Writes the summary."

[provider]
model = "demo"

[system]
prompt = "You write summaries."

[[tools]]
name = "fs.list"

[[tools]]
name = "fs.read"

[[tools]]
name = "fs.write"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_an_agent_file_reconfigures_its_running_run_and_a_bad_edit_changes_nothing() {
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let agents = workspace.path().join(".troupe/agents");
    std::fs::create_dir_all(&agents).expect("agents dir");
    let file = agents.join("writer.toml");
    std::fs::write(&file, WRITER).expect("agent file");
    let serving = start(workspace.path(), &["--no-store"]);
    let client = reqwest::Client::new();
    let started: serde_json::Value = client
        .post(format!("{}/v1/runs", serving.url))
        .json(&serde_json::json!({"agent": "writer", "instruction": "Summarise this repository", "stream": false}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let run = started["run_id"].as_str().expect("a run id").to_owned();
    let waiting = wait_phase(&client, &serving.url, &run, "waiting").await;
    let seen = waiting["events"].as_u64().expect("a count");

    // A good edit: the waiting run takes it at its boundary and says so.
    std::fs::write(&file, WRITER.replace("You write summaries.", "You write short summaries.")).expect("edit");
    let changed = config_changes(&client, &serving.url, &run, seen, 1).await;
    assert_eq!(changed[0]["changed"], serde_json::json!(["instructions"]), "{changed:?}");

    // A bad edit is refused with its place in the file, and no run hears of it.
    std::fs::write(&file, WRITER.replace("model = \"demo\"", "model = \"demo\"\nsurprise = 1")).expect("edit");
    let refusal = loop {
        let line = serving.stderr.recv_timeout(Duration::from_secs(20)).expect("the reloader reports the bad edit");
        if line.contains("not applied") {
            break line;
        }
    };
    assert!(refusal.contains("writer.toml") && refusal.contains("surprise"), "{refusal}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events: serde_json::Value =
        client.get(format!("{}/v1/runs/{run}", serving.url)).send().await.expect("request").json().await.expect("json");
    let all = config_changes(&client, &serving.url, &run, seen, 1).await;
    assert_eq!(all.len(), 1, "the bad edit changed nothing: {events}");
    serving.stop();
}

/// Waits for `count` `config_changed` events of `run` after position `after`.
async fn config_changes(
    client: &reqwest::Client,
    url: &str,
    run: &str,
    after: u64,
    count: usize,
) -> Vec<serde_json::Value> {
    for _ in 0..500 {
        let view: serde_json::Value =
            client.get(format!("{url}/v1/runs/{run}")).send().await.expect("request").json().await.expect("json");
        let total = view["events"].as_u64().unwrap_or(0);
        if total > after {
            // Read what is there so far (the run is still waiting, so close the stream ourselves).
            let response = client
                .get(format!("{url}/v1/runs/{run}/events"))
                .header("last-event-id", (after - 1).to_string())
                .send()
                .await
                .expect("request");
            let body = read_for(response, Duration::from_millis(300)).await;
            let changes: Vec<serde_json::Value> = body
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .filter(|e| e["type"] == "config_changed")
                .collect();
            if changes.len() >= count {
                return changes;
            }
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    panic!("run {run} never reported {count} configuration change(s)");
}

/// The body of a streaming response, as far as it got within `window`.
async fn read_for(mut response: reqwest::Response, window: Duration) -> String {
    let mut body = Vec::new();
    let deadline = tokio::time::Instant::now() + window;
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        body.extend_from_slice(&chunk);
    }
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_the_runs_waiting_in_the_stores_queue() {
    let workspace = tempfile::tempdir().expect("workspace");
    let queued = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["run", "--model", "demo", "--detach", "-w"])
        .arg(workspace.path())
        .arg("Summarise this repository")
        .env_remove("TROUPE_STORE")
        .output()
        .expect("runs");
    assert!(queued.status.success(), "{}", String::from_utf8_lossy(&queued.stderr));
    let serving = start(workspace.path(), &[]);
    let client = reqwest::Client::new();
    let mut text = String::new();
    for _ in 0..100 {
        text =
            client.get(format!("{}/metrics", serving.url)).send().await.expect("request").text().await.expect("text");
        if text.lines().any(|l| l == "troupe_queue_depth 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(text.lines().any(|l| l == "troupe_queue_depth 1"), "{text}");
    serving.stop();
}

/// Over AG-UI, with the real `@ag-ui/client`: a served team's member call that needs
/// approval ends the client's run with an interrupt naming the member's call; resuming it
/// approved reaches the member, and the team completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_approval_is_an_ag_ui_interrupt_the_real_client_resumes() {
    use troupe_testkit::test_deps;
    let Some(modules) = test_deps::node_modules("@ag-ui/client") else {
        test_deps::skip("a_members_approval_is_an_ag_ui_interrupt", "node or @ag-ui/client is not installed");
        return;
    };
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/team.toml");
    let serving = start(workspace.path(), &["--team", team.to_str().expect("a UTF-8 path")]);
    let plan = serde_json::json!({
        "modules": modules,
        "url": format!("{}/agui/project", serving.url),
        "threadId": "thread-team",
        "runs": [
            {"message": "Describe this repository", "runId": "run-1"},
            {"runId": "run-2", "resume": {"status": "resolved", "payload": {"approved": true}}}
        ]
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-server/tests/agui/client.mjs");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node").arg(script).arg(plan.to_string()).kill_on_drop(true).output(),
    )
    .await
    .expect("the client finishes")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let trouble: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l.get("warning").is_some() || l.get("error").is_some()).collect();
    assert!(trouble.is_empty(), "the client warned or failed: {trouble:#?}");
    let finished = |n: u64| {
        lines
            .iter()
            .filter(|l| l["run"] == n)
            .filter_map(|l| l.get("event"))
            .rfind(|e| e["type"] == "RUN_FINISHED")
            .cloned()
            .unwrap_or_else(|| panic!("run {n} did not finish: {lines:#?}"))
    };
    let interrupted = finished(0);
    assert_eq!(interrupted["outcome"]["type"], "interrupt", "{interrupted}");
    let interrupt = &interrupted["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "approval", "{interrupt}");
    assert!(interrupt["message"].as_str().is_some_and(|m| m.contains("fs.write")), "{interrupt}");
    let id = interrupt["id"].as_str().expect("an interrupt id");
    assert!(id.contains("@run_"), "a member's call is named with its run, unique in the team's stream: {id}");
    assert_eq!(interrupt["toolCallId"].as_str(), Some(id), "{interrupt}");
    let resumed = finished(1);
    assert_ne!(resumed["outcome"]["type"], "interrupt", "{resumed}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !workspace.path().join("TROUPE_DEMO.md").exists() {
        assert!(std::time::Instant::now() < deadline, "the approved write never ran: {lines:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    serving.stop();
}

/// Over A2A, with the real `a2a-sdk` client: a served team's member call that needs
/// approval makes the task `input-required`, naming the member's call; a follow-up
/// `approve` reaches the member, and the task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_approval_is_an_a2a_input_required_the_real_client_answers() {
    use troupe_testkit::test_deps;
    let Some(python) = test_deps::python_with("a2a.client") else {
        test_deps::skip("a_members_approval_is_an_a2a_input_required", "the Python package a2a-sdk is not installed");
        return;
    };
    let workspace = tempfile::tempdir().expect("workspace");
    std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/team.toml");
    let serving = start(workspace.path(), &["--team", team.to_str().expect("a UTF-8 path")]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-server/tests/a2a/client.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .arg("team_approval")
            .arg(&serving.url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes")
    .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let last = |event: &str| {
        lines.iter().rfind(|l| l["event"] == event).cloned().unwrap_or_else(|| panic!("no {event}: {lines:#?}"))
    };
    let paused = last("first");
    assert_eq!(paused["state"], "TASK_STATE_INPUT_REQUIRED", "{lines:#?}");
    let said = paused["status"].as_str().expect("a status message");
    assert!(said.contains("fs.write"), "the member's call is named: {said}");
    assert_eq!(last("second")["state"], "TASK_STATE_COMPLETED", "{lines:#?}");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write ran");
    serving.stop();
}
