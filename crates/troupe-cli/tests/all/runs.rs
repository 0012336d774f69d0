//! End-to-end tests of durable runs: `troupe run` recording into a store, `troupe runs …`
//! reading, verifying, deciding and resuming them, and `troupe worker` running queued
//! ones. The real binary, without a terminal, on a temp workspace and a temp store file,
//! with the testkit's mock server as the model through `troupe.toml`.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;
use troupe::store::{EvidenceEntry, EvidenceKind, RunSummary};
use troupe_testkit::{MockLlmServer, MockTurn};

/// A model server, a working directory whose `troupe.toml` points at it, a workspace and
/// a store file outside the workspace.
struct Scene {
    _runtime: tokio::runtime::Runtime,
    server: MockLlmServer,
    cwd: TempDir,
    workspace: TempDir,
    /// Another store than the file (a PostgreSQL URL).
    store_url: Option<String>,
}

impl Scene {
    fn new() -> Self {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
        let cwd = tempfile::tempdir().expect("a working directory");
        let config = format!(
            "default_model = \"mock/claude\"\n\n[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n",
            server.url()
        );
        std::fs::write(cwd.path().join("troupe.toml"), config).expect("writes troupe.toml");
        Scene { _runtime: runtime, server, cwd, workspace: tempfile::tempdir().expect("a workspace"), store_url: None }
    }

    fn store(&self) -> PathBuf {
        self.cwd.path().join("runs.db")
    }

    /// The store URL the commands use: `TROUPE_STORE`, or the store file.
    fn store_url(&self) -> String {
        self.store_url.clone().unwrap_or_else(|| self.store().display().to_string())
    }

    fn workspace(&self) -> &Path {
        self.workspace.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
        command
            .args(args)
            .args(["--workspace", self.workspace().to_str().expect("a UTF-8 path")])
            .current_dir(self.cwd.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TROUPE_STORE", self.store_url())
            .stdin(Stdio::null());
        command
    }

    /// `troupe ARGS --workspace W` with `TROUPE_STORE` set to the store file.
    fn troupe(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("the binary runs")
    }

    /// `troupe run ARGS`, which must print `run ID` on stderr; the id and the output.
    fn run(&self, args: &[&str]) -> (String, Output) {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        let output = self.troupe(&all);
        let err = stderr(&output);
        let id = err
            .lines()
            .find_map(|l| l.strip_prefix("run "))
            .unwrap_or_else(|| panic!("the run id is on stderr: {err}"))
            .to_owned();
        (id, output)
    }

    fn list(&self) -> Vec<RunSummary> {
        let output = self.troupe(&["runs", "list", "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("a RunSummary per line")).collect()
    }

    fn status(&self, id: &str) -> String {
        let output = self.troupe(&["runs", "show", id, "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let record: Value = serde_json::from_str(stdout(&output).trim()).expect("one JSON object");
        record["status"].as_str().unwrap_or_default().to_owned()
    }

    fn evidence(&self, id: &str) -> Vec<EvidenceEntry> {
        let output = self.troupe(&["runs", "events", id, "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("an EvidenceEntry per line")).collect()
    }

    /// Waits (at most 20 s) until the workspace holds `name`: a tool call has started.
    fn until_file(&self, name: &str) {
        let started = Instant::now();
        while self.file(name).is_none() {
            assert!(started.elapsed() < Duration::from_secs(20), "{name} never appeared: the command never started");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace().join(name)).ok()
    }

    /// A raw connection to the store file, as anyone with access to it has.
    fn raw(&self) -> (tokio::runtime::Runtime, sqlx::SqliteConnection) {
        use sqlx::Connection;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let url = format!("sqlite://{}", self.store().display());
        let connection = runtime.block_on(sqlx::SqliteConnection::connect(&url)).expect("the store file opens");
        (runtime, connection)
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write_hello() -> MockTurn {
    MockTurn::tool_call("toolu_1", "fs_write", json!({"path": "hello.txt", "content": "hi\n"}))
}

fn count(entries: &[EvidenceEntry], kind: EvidenceKind, call: &str) -> usize {
    entries.iter().filter(|e| e.kind == kind && e.call_id.as_deref() == Some(call)).count()
}

#[test]
fn a_run_is_recorded_listed_shown_and_verified() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let (id, output) = scene.run(&["--approve", "auto", "Write", "hello"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Wrote hello.txt.\n", "stdout is still only the agent's text");
    assert!(scene.store().exists() && !scene.workspace().join(".troupe").exists(), "recorded in --store");

    let runs = scene.list();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].id.as_str(), runs[0].status.as_str(), runs[0].agent.as_str()),
        (id.as_str(), "completed", "troupe")
    );

    let table = stdout(&scene.troupe(&["runs", "list"]));
    assert!(table.contains(&id) && table.contains("completed") && table.contains("updated"), "{table}");
    // A search: part of the agent's name or of the model, in either case, or an id's start.
    for (search, found) in [("ROUP", true), ("MOCK/cl", true), (&id[..8], true), ("laude/mock", false)] {
        let listed = stdout(&scene.troupe(&["runs", "list", "--search", search, "--json"]));
        assert_eq!(listed.contains(&id), found, "{search}: {listed}");
    }

    let show = scene.troupe(&["runs", "show", &id]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    for expected in
        ["task       Write hello", "status     completed", "model      mock/claude", "answer     Wrote hello.txt."]
    {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    assert!(text.contains("(created) → running") && text.contains("running → completed"), "{text}");

    let json = scene.troupe(&["runs", "show", &id, "--json"]);
    let record: Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON object");
    assert_eq!(record["input"]["instruction"], "Write hello");
    assert_eq!(
        record["transitions"].as_array().and_then(|t| t.last()).map(|t| t["to"].clone()),
        Some(json!("completed"))
    );

    let entries = scene.evidence(&id);
    assert_eq!(entries.first().map(|e| e.kind), Some(EvidenceKind::RunStarted));
    assert_eq!(entries.last().map(|e| e.kind), Some(EvidenceKind::RunFinished));
    assert_eq!(count(&entries, EvidenceKind::ActionStarted, "toolu_1"), 1);
    assert_eq!(count(&entries, EvidenceKind::ActionCompleted, "toolu_1"), 1);
    let lines = stdout(&scene.troupe(&["runs", "events", &id]));
    assert_eq!(lines.lines().count(), entries.len(), "{lines}");
    assert!(lines.contains("action_completed") && lines.contains("fs.write ok: Created `hello.txt`"), "{lines}");
    let followed = scene.troupe(&["runs", "events", &id, "--follow"]);
    assert_eq!(stdout(&followed), lines, "--follow stops at once on a finished run");

    let verify = scene.troupe(&["runs", "verify", &id]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    assert_eq!(stdout(&verify), format!("ok: {} entries, hash chain intact\n", entries.len()));
}

#[test]
fn a_recorded_run_replays_identical_an_edited_prompt_diverges_and_a_fork_goes_on_from_a_step() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let (id, output) = scene.run(&["--approve", "auto", "Write", "hello"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::remove_file(scene.workspace().join("hello.txt")).expect("the written file goes");

    let same = scene.troupe(&["runs", "replay", &id]);
    assert_eq!(same.status.code(), Some(0), "{}{}", stdout(&same), stderr(&same));
    assert_eq!(stdout(&same), format!("run {id}: identical (2 model step(s), 1 tool call(s), 0 model call(s) made)\n"));
    assert_eq!(scene.server.requests().len(), 2, "no model call");
    assert!(scene.file("hello.txt").is_none(), "no tool ran");

    std::fs::write(scene.cwd.path().join("prompt.txt"), "You are terse.\n").expect("a prompt");
    let edited = scene.troupe(&["runs", "replay", &id, "--instructions", "prompt.txt", "--json"]);
    assert_eq!(edited.status.code(), Some(1), "{}", stderr(&edited));
    let report: Value = serde_json::from_str(stdout(&edited).trim()).expect("a JSON report");
    assert_eq!(report["divergence"]["step"], 1);
    assert_eq!(report["divergence"]["kind"], "request");
    let detail = report["divergence"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("system prompt:\n-You are a careful coding agent") && detail.ends_with("+You are terse.\n"),
        "{detail}"
    );
    assert!(stderr(&edited).contains(&format!("run {id} now decides differently, at step 1")), "{}", stderr(&edited));
    assert_eq!(scene.server.requests().len(), 2, "still no model call");

    let unknown = scene.troupe(&["runs", "replay", "nope"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));

    // A fork at step 2 with another message goes on live, recorded with its origin.
    scene.server.push(MockTurn::text("Wrote hello.txt, and said so."));
    let forked = scene.troupe(&["runs", "fork", &id, "--at", "2", "--edit-message", "Say so.", "--approve", "auto"]);
    assert_eq!(forked.status.code(), Some(0), "{}", stderr(&forked));
    assert_eq!(stdout(&forked), "Wrote hello.txt, and said so.\n");
    let fork_id = stderr(&forked)
        .lines()
        .find_map(|l| l.strip_prefix("run ").filter(|r| !r.contains(' ')))
        .expect("its id")
        .to_owned();
    assert_eq!(fork_id, format!("{id}.fork.1"), "a fork's id begins with its origin's");
    let requests = scene.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].body["messages"].to_string().contains("Say so."), "{}", requests[2].body);
    let origin = stdout(&scene.troupe(&["runs", "show", &id]));
    let row = |text: &str, label: &str| {
        text.lines().find(|l| l.starts_with(label)).map(|l| l[label.len()..].trim().to_owned())
    };
    assert_eq!(row(&origin, "forks "), Some(format!("{fork_id} (at step 2)")), "{origin}");
    let shown = stdout(&scene.troupe(&["runs", "show", &fork_id]));
    assert_eq!(row(&shown, "forked from "), Some(format!("{id} at step 2")), "{shown}");
    let verify = scene.troupe(&["runs", "verify", &id]);
    assert_eq!(verify.status.code(), Some(0), "the original's chain is intact: {}", stderr(&verify));
    // Exported as a cassette, the run replays with no store.
    let exported = scene.troupe(&["runs", "export", &id, "--cassette", "run.cassette.json"]);
    assert_eq!(exported.status.code(), Some(0), "{}", stderr(&exported));
    let cassette = troupe::testing::Cassette::load(scene.cwd.path().join("run.cassette.json")).expect("a cassette");
    assert_eq!((cassette.recording.run_id.as_str(), cassette.recording.turns.len()), (id.as_str(), 2));

    let too_far = scene.troupe(&["runs", "fork", &id, "--at", "3"]);
    assert_eq!(too_far.status.code(), Some(2), "{}", stderr(&too_far));
    assert!(stderr(&too_far).contains("there is no step 3 to fork at"), "{}", stderr(&too_far));
}

#[test]
fn without_a_terminal_ask_pauses_and_runs_approve_finishes_the_run_writing_once() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let (id, output) = scene.run(&["Write hello"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "paused: approve with `troupe runs approve {id} toolu_1` or reject with `troupe runs reject {id} toolu_1`"
        )),
        "{err}"
    );
    assert!(err.ends_with("error: the run paused waiting for approval of fs.write\n"), "{err}");
    assert_eq!(scene.file("hello.txt"), None);
    assert_eq!(scene.status(&id), "paused");
    let show = stdout(&scene.troupe(&["runs", "show", &id]));
    assert!(show.contains("waiting for a person:") && show.contains("toolu_1  fs.write hello.txt"), "{show}");

    let unknown = scene.troupe(&["runs", "approve", &id, "toolu_9"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("the calls waiting are: toolu_1 (fs.write)"), "{}", stderr(&unknown));
    let nobody = scene.troupe(&["runs", "approve", "run_nope", "toolu_1"]);
    assert_eq!(nobody.status.code(), Some(2));
    assert_eq!(stderr(&nobody), "error: no run `run_nope` in the store\n");

    let approve = scene.troupe(&["runs", "approve", &id, "toolu_1"]);
    let err = stderr(&approve);
    assert_eq!(approve.status.code(), Some(0), "{err}");
    assert!(err.starts_with("signal 1 stored\n"), "{err}");
    assert!(err.contains("✓ fs.write hello.txt (3 bytes)"), "{err}");
    assert_eq!(stdout(&approve), "Wrote hello.txt.\n");
    assert_eq!(scene.file("hello.txt").as_deref(), Some("hi\n"));
    assert_eq!(scene.status(&id), "completed");
    let entries = scene.evidence(&id);
    assert_eq!(count(&entries, EvidenceKind::ActionStarted, "toolu_1"), 1, "the write ran once");
    assert_eq!(count(&entries, EvidenceKind::ActionCompleted, "toolu_1"), 1, "the write ran once");
    assert_eq!(scene.server.requests().len(), 2);

    let again = scene.troupe(&["runs", "approve", &id, "toolu_1"]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(stderr(&again), format!("error: run {id} has finished (completed)\n"));
    let resume = scene.troupe(&["runs", "resume", &id]);
    assert_eq!(resume.status.code(), Some(2));
    assert_eq!(stderr(&resume), format!("error: run {id} has finished (completed)\n"));
}

/// A person types the start of a run's id, and names no call when only one waits.
#[test]
fn a_run_is_named_by_the_start_of_its_id_and_the_only_waiting_call_is_the_default() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let (id, output) = scene.run(&["Write hello"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let prefix = &id[..8];

    let show = scene.troupe(&["runs", "show", prefix]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let shown = stdout(&show);
    assert!(shown.contains(&id), "the whole id is shown: {shown}");
    // What approving the call would do: its arguments, the content included.
    let arguments = shown.lines().find(|l| l.trim_start().starts_with("arguments:")).expect("an arguments line");
    assert!(arguments.contains(r#""path":"hello.txt""#) && arguments.contains(r#""content":"hi\n""#), "{shown}");

    let none = scene.troupe(&["runs", "show", "zz-no-run"]);
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));

    let approve = scene.troupe(&["runs", "approve", prefix]);
    let err = stderr(&approve);
    assert_eq!(approve.status.code(), Some(0), "{err}");
    assert!(err.contains("✓ fs.write hello.txt (3 bytes)"), "{err}");
    assert_eq!(scene.file("hello.txt").as_deref(), Some("hi\n"));
    assert_eq!(scene.status(&id), "completed");

    // Two runs begin `run_`: a prefix of both names neither.
    scene.server.push(MockTurn::text("Hello."));
    let (second, output) = scene.run(&["Say hello"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let both = scene.troupe(&["runs", "show", "run_"]);
    assert_eq!(both.status.code(), Some(2), "{}", stdout(&both));
    let said = stderr(&both);
    assert!(said.contains("several runs") && said.contains(&id) && said.contains(&second), "{said}");
}

#[test]
fn runs_reject_finishes_the_run_without_the_write() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("I did not write it."));
    let (id, output) = scene.run(&["Write hello"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    // Stored only: the run has not taken it yet, and `show` says so rather than "waiting".
    let stored = scene.troupe(&["runs", "reject", &id, "toolu_1", "--reason", "not today", "--no-resume"]);
    assert_eq!(stored.status.code(), Some(0), "{}", stderr(&stored));
    let show = stdout(&scene.troupe(&["runs", "show", &id]));
    assert!(!show.lines().any(|l| l == "waiting for a person:"), "{show}");
    assert!(show.lines().any(|l| l == "decided, applied when the run resumes:"), "{show}");
    assert!(show.contains("toolu_1  fs.write hello.txt: rejected (signal 1)"), "{show}");

    let reject = scene.troupe(&["runs", "resume", &id]);
    let err = stderr(&reject);
    assert_eq!(reject.status.code(), Some(0), "{err}");
    assert!(err.contains("✗ fs.write hello.txt: The user rejected this tool call: not today"), "{err}");
    assert_eq!(scene.file("hello.txt"), None);
    assert_eq!(scene.status(&id), "completed");
    let requests = scene.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body["messages"].to_string().contains("not today"), "the model is told why");
    assert_eq!(count(&scene.evidence(&id), EvidenceKind::ActionStarted, "toolu_1"), 0);
}

#[test]
fn runs_cancel_ends_a_paused_run_cancelled() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    let (id, output) = scene.run(&["Write hello"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    let cancel = scene.troupe(&["runs", "cancel", &id, "--reason", "changed my mind"]);
    let err = stderr(&cancel);
    assert_eq!(cancel.status.code(), Some(0), "{err}");
    assert!(err.starts_with("signal 1 stored\n"), "{err}");
    assert_eq!(scene.status(&id), "cancelled");
    assert_eq!(scene.file("hello.txt"), None);
    assert_eq!(scene.server.requests().len(), 1, "a cancelled run calls no model");
    let show = stdout(&scene.troupe(&["runs", "show", &id]));
    assert!(show.contains("the run was cancelled: changed my mind"), "{show}");
    let cancelled = stdout(&scene.troupe(&["runs", "list", "--status", "cancelled", "--json"]));
    assert!(cancelled.contains(&id), "{cancelled}");

    // Resumed, the cancelled run stays cancelled and its conversation goes on in a new run.
    scene.server.push(MockTurn::text("I stopped there; nothing was written."));
    let resumed = scene.troupe(&["runs", "resume", &id]);
    let err = stderr(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("run {id} was cancelled; its conversation goes on in run ")), "{err}");
    assert_eq!(stdout(&resumed), "I stopped there; nothing was written.\n");
    let sent = scene.server.requests()[1].body["messages"].to_string();
    assert!(sent.contains("Write hello"), "the model sees the conversation so far: {sent}");
    assert_eq!(scene.status(&id), "cancelled");
    assert_eq!(scene.file("hello.txt"), None);
}

#[test]
fn a_detached_run_is_queued_and_a_worker_runs_it() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let detach = scene.troupe(&["run", "--detach", "--approve", "auto", "Write hello"]);
    assert_eq!(detach.status.code(), Some(0), "{}", stderr(&detach));
    let id = stdout(&detach).trim().to_owned();
    assert!(id.starts_with("run_"), "the id is on stdout: {id}");
    assert_eq!(scene.status(&id), "queued");
    assert_eq!(scene.server.requests().len(), 0);

    let worker = scene.troupe(&["worker", "--once", "--lease-ttl", "5", "--poll-ms", "50"]);
    let err = stderr(&worker);
    assert_eq!(worker.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("claimed {id}\n")) && err.contains(&format!("ended {id} completed\n")), "{err}");
    assert_eq!(scene.status(&id), "completed");
    assert_eq!(scene.file("hello.txt").as_deref(), Some("hi\n"));

    // Nothing queued: --once ends at once.
    let idle = scene.troupe(&["worker", "--once", "--poll-ms", "20"]);
    assert_eq!(idle.status.code(), Some(0), "{}", stderr(&idle));
    assert!(!stderr(&idle).contains("claimed"), "{}", stderr(&idle));
}

/// A pipe whose reader has gone: writing to it fails with `EPIPE`.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Stdio::from(writer)
}

#[test]
fn a_closed_stdout_or_stderr_is_no_panic_and_the_work_is_done() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    // The id goes nowhere, and the run is queued all the same.
    let detach = scene
        .command(&["run", "--detach", "--approve", "auto", "Write hello"])
        .stdout(closed_pipe())
        .output()
        .expect("the binary runs");
    assert_eq!(detach.status.code(), Some(0), "{}", stderr(&detach));
    assert!(!stderr(&detach).contains("panicked"), "{}", stderr(&detach));
    let queued = scene.list();
    assert_eq!(queued.len(), 1);
    let id = queued[0].id.to_string();
    assert_eq!(scene.status(&id), "queued");

    // A worker says what it claims on stderr; with nobody reading, it runs the run anyway.
    let worker = scene
        .command(&["worker", "--once", "--lease-ttl", "5", "--poll-ms", "50"])
        .stderr(closed_pipe())
        .output()
        .expect("the binary runs");
    assert_eq!(worker.status.code(), Some(0));
    assert_eq!(scene.status(&id), "completed");
    assert_eq!(scene.file("hello.txt").as_deref(), Some("hi\n"));
}

/// `troupe run` whose stdout is closed cancels its run: nobody reads what it would say.
#[test]
fn a_run_whose_stdout_is_closed_is_cancelled_and_says_why() {
    let scene = Scene::new();
    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let run = scene
        .command(&["run", "--json", "--approve", "auto", "Write hello"])
        .stdout(closed_pipe())
        .output()
        .expect("the binary runs");
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "not completed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let runs = scene.list();
    assert_eq!(runs.len(), 1);
    assert_eq!(scene.status(&runs[0].id.to_string()), "cancelled");
    let log = scene.evidence(&runs[0].id.to_string());
    assert!(log.iter().any(|e| e.payload.to_string().contains("stdout was closed")), "the reason is kept: {log:?}");
    assert_eq!(scene.file("hello.txt"), None, "it stopped before its tool ran");
}

#[test]
fn results_lost_to_a_failed_write_are_a_failure() {
    let scene = Scene::new();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full opens");
    let detach =
        scene.command(&["run", "--detach", "Write hello"]).stdout(Stdio::from(full)).output().expect("the binary runs");
    assert_eq!(detach.status.code(), Some(1), "{}", stderr(&detach));
    let err = stderr(&detach);
    assert!(err.contains("error: cannot write to stdout: No space left on device"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_crash_interrupted_call_is_not_auto_approved() {
    let scene = Scene::new();
    let command = "echo started >> log.txt; sleep 5";
    scene.server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": command})));
    scene.server.push(MockTurn::text("Skipped it."));
    let mut child = scene
        .command(&["run", "--approve", "auto", "Log it"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    scene.until_file("log.txt");
    // A crash mid-call: the shell command started and its end is not on record.
    child.kill().expect("kills the run");
    child.wait().expect("the run is collected");
    let id = scene.list().first().map(|r| r.id.clone()).expect("the run was recorded");
    // The dead process's lease lapses (now, rather than in 30 s, whether or not the
    // runtime sees that its holder is gone).
    let (runtime, mut raw) = scene.raw();
    runtime.block_on(sqlx::query("UPDATE run_queue SET expires_at = 0").execute(&mut raw)).expect("lapses the lease");
    drop(raw);

    let resume = scene.troupe(&["runs", "resume", &id, "--approve", "auto"]);
    let err = stderr(&resume);
    assert_eq!(resume.status.code(), Some(1), "{err}");
    assert!(err.contains("may or may not have happened"), "{err}");
    assert!(err.contains(&format!("paused: approve with `troupe runs approve {id} toolu_1`")), "{err}");
    assert_eq!(scene.status(&id), "paused");

    let reject = scene.troupe(&["runs", "reject", &id, "toolu_1", "--reason", "it ran already"]);
    assert_eq!(reject.status.code(), Some(0), "{}", stderr(&reject));
    assert_eq!(scene.status(&id), "completed");
    assert_eq!(scene.file("log.txt").as_deref(), Some("started\n"), "the command ran once");
    assert_eq!(scene.server.requests().len(), 2);
}

#[test]
fn a_run_held_by_a_live_process_takes_the_signals_sent_from_elsewhere() {
    let scene = Scene::new();
    scene.server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "echo started >> log.txt; sleep 2"})));
    scene.server.push(MockTurn::text("never asked for"));
    let child = scene
        .command(&["run", "--approve", "auto", "Log it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    scene.until_file("log.txt");
    let id = scene.list().first().map(|r| r.id.clone()).expect("the run was recorded");

    let resume = scene.troupe(&["runs", "resume", &id]);
    assert_eq!(resume.status.code(), Some(1), "{}", stderr(&resume));
    assert!(stderr(&resume).contains(&format!("run `{id}` is being run by `local:")), "{}", stderr(&resume));

    let cancel = scene.troupe(&["runs", "cancel", &id, "--reason", "stop it"]);
    let err = stderr(&cancel);
    assert_eq!(cancel.status.code(), Some(0), "{err}");
    assert!(err.starts_with("signal 1 stored\n") && err.contains("which takes the signal"), "{err}");

    let output = child.wait_with_output().expect("the run ends");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.ends_with("error: the run was cancelled: stop it\n"), "the holder took the signal: {err}");
    assert_eq!(scene.status(&id), "cancelled");
    assert_eq!(scene.server.requests().len(), 1, "no model call after the cancellation");
}

/// An approval is on record as applied before the call it approves starts: a crash during
/// that call puts it to a person again, never runs it a second time on the old approval.
#[test]
fn an_approved_call_interrupted_by_a_crash_is_put_to_a_person_again() {
    let scene = Scene::new();
    let command = "echo started >> log.txt; sleep 5";
    scene.server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": command})));
    scene.server.push(MockTurn::text("Done."));
    let (id, output) = scene.run(&["Log it"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let mut approve = scene
        .command(&["runs", "approve", &id, "toolu_1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    scene.until_file("log.txt");
    approve.kill().expect("kills the approving process mid-call");
    approve.wait().expect("the process is collected");
    let (runtime, mut raw) = scene.raw();
    runtime.block_on(sqlx::query("UPDATE run_queue SET expires_at = 0").execute(&mut raw)).expect("lapses the lease");
    drop(raw);

    let resume = scene.troupe(&["runs", "resume", &id]);
    let err = stderr(&resume);
    assert_eq!(resume.status.code(), Some(1), "{err}");
    assert!(err.contains("may or may not have happened"), "{err}");
    assert_eq!(scene.file("log.txt").as_deref(), Some("started\n"), "the command ran once");
}

#[test]
fn a_tampered_evidence_log_does_not_verify() {
    let scene = Scene::new();
    scene.server.push(MockTurn::text("Nothing to do."));
    let (id, output) = scene.run(&["Look around"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(scene.troupe(&["runs", "verify", &id]).status.code(), Some(0));

    let (runtime, mut raw) = scene.raw();
    let forge = "UPDATE evidence SET payload = '{\"forged\":true}' WHERE run_id = ? AND seq = 2";
    let refused = runtime.block_on(sqlx::query(forge).bind(&id).execute(&mut raw));
    assert!(refused.is_err_and(|e| e.to_string().contains("append-only")), "the schema refuses updates");
    runtime.block_on(async {
        sqlx::query("DROP TRIGGER evidence_is_append_only_update").execute(&mut raw).await.expect("drops the guard");
        sqlx::query(forge).bind(&id).execute(&mut raw).await.expect("forges an entry");
    });
    drop(raw);

    let verify = scene.troupe(&["runs", "verify", &id]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    let text = stdout(&verify);
    assert!(
        text.starts_with(&format!("broken: evidence entry 2 of run `{id}`: its content does not match its hash")),
        "{text}"
    );
}

/// A finished run's log with its last entries deleted (the guard dropped) still links up,
/// but falls short of the head its run recorded: `runs verify` says it was cut.
#[test]
fn a_truncated_evidence_log_does_not_verify() {
    let scene = Scene::new();
    scene.server.push(MockTurn::text("Nothing to do."));
    let (id, output) = scene.run(&["Look around"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (runtime, mut raw) = scene.raw();
    let last: i64 = runtime
        .block_on(sqlx::query_scalar("SELECT MAX(seq) FROM evidence WHERE run_id = ?").bind(&id).fetch_one(&mut raw))
        .expect("the last entry");
    assert!(last >= 2, "a run's log has a start and an end: {last}");
    runtime.block_on(async {
        sqlx::query("DROP TRIGGER evidence_is_append_only_delete").execute(&mut raw).await.expect("drops the guard");
        sqlx::query("DELETE FROM evidence WHERE run_id = ? AND seq = ?")
            .bind(&id)
            .bind(last)
            .execute(&mut raw)
            .await
            .expect("cuts the last entry");
    });
    drop(raw);

    let verify = scene.troupe(&["runs", "verify", &id]);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
    let text = stdout(&verify);
    assert!(text.starts_with(&format!("broken: evidence entry {last} of run `{id}`: the log ends at entry")), "{text}");
    assert!(text.contains("the last ones were removed"), "{text}");
}

#[test]
fn a_store_that_cannot_be_opened_is_a_one_line_configuration_error() {
    let scene = Scene::new();
    let corrupt = scene.cwd.path().join("corrupt.db");
    let garbage = b"this is not a database, but it is someone's file\n".repeat(20);
    std::fs::write(&corrupt, &garbage).expect("writes the file");
    let store = corrupt.to_str().expect("a UTF-8 path");
    for args in [&["runs", "list", "--store", store][..], &["run", "--store", store, "Write hello"][..]] {
        let output = scene.troupe(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is not a SQLite database") && err.contains("left unchanged"), "{err}");
    }
    assert_eq!(std::fs::read(&corrupt).expect("the file is still there"), garbage, "the file is unchanged");
    assert_eq!(scene.server.requests().len(), 0);

    for args in [&["runs", "list", "--store", "mysql://x"][..], &["run", "--store", "mysql://x", "Write hello"][..]] {
        let output = scene.troupe(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err,
            "error: `mysql://x` is not a store URL: use sqlite://PATH (or a file path) or postgres://USER@HOST/DB\n"
        );
    }

    // Reading commands do not create a store where there is none.
    let missing = scene.cwd.path().join("missing.db");
    let output = scene.troupe(&["runs", "list", "--store", missing.to_str().expect("a UTF-8 path")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("there is no store at"), "{}", stderr(&output));
    assert!(!missing.exists());
}

#[test]
fn schedules_are_added_listed_fired_by_a_worker_and_removed() {
    let scene = Scene::new();
    scene.server.push(MockTurn::text("Checked."));
    let add = scene.troupe(&["schedule", "add", "tick", "--every", "1s", "Check", "the", "build"]);
    assert_eq!(add.status.code(), Some(0), "{}", stderr(&add));
    assert!(stdout(&add).starts_with("schedule tick added: first run at "), "{}", stdout(&add));
    let bad = scene.troupe(&["schedule", "add", "bad", "--cron", "every day", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
    let neither = scene.troupe(&["schedule", "add", "bad", "x"]);
    assert_eq!(neither.status.code(), Some(2));

    let list = stdout(&scene.troupe(&["schedule", "list"]));
    assert!(list.contains("tick") && list.contains("every 1s") && list.contains("Check the build"), "{list}");
    std::thread::sleep(Duration::from_millis(1100));
    let worker = scene.troupe(&["worker", "--once", "--poll-ms", "50"]);
    let err = stderr(&worker);
    assert_eq!(worker.status.code(), Some(0), "{err}");
    let runs = scene.list();
    assert_eq!(runs.len(), 1, "{err}");
    assert_eq!(runs[0].status.as_str(), "completed", "{err}");
    assert!(err.contains(&format!("ended {} completed", runs[0].id)), "{err}");

    let json = stdout(&scene.troupe(&["schedule", "list", "--json"]));
    let schedule: Value = serde_json::from_str(json.trim()).expect("one schedule");
    assert!(schedule["last_fired_at"].is_i64(), "{schedule}");
    assert_eq!(scene.troupe(&["schedule", "rm", "tick"]).status.code(), Some(0));
    let again = scene.troupe(&["schedule", "rm", "tick"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).starts_with("error: no schedule `tick`"), "{}", stderr(&again));
}

#[test]
fn on_postgresql_a_worker_runs_a_detached_run_and_a_paused_one_is_approved() {
    let Ok(base) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("the PostgreSQL worker test", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = format!("troupe_cli_runs_{}", std::process::id());
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let admin = setup
        .block_on(troupe::store::postgres::PostgresStore::connect_in_schema(&base, &schema))
        .expect("a fresh schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let mut scene = Scene::new();
    scene.store_url = Some(format!("{base}{separator}options=-csearch_path%3D{schema}"));

    scene.server.push(MockTurn::text("Nothing to write."));
    let detach = scene.troupe(&["run", "--detach", "--approve", "auto", "Look around"]);
    assert_eq!(detach.status.code(), Some(0), "{}", stderr(&detach));
    let queued = stdout(&detach).trim().to_owned();
    let worker = scene.troupe(&["worker", "--once", "--lease-ttl", "5", "--poll-ms", "50"]);
    assert!(stderr(&worker).contains(&format!("ended {queued} completed")), "{}", stderr(&worker));

    scene.server.push(write_hello());
    scene.server.push(MockTurn::text("Wrote hello.txt."));
    let (paused, output) = scene.run(&["Write hello"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let approve = scene.troupe(&["runs", "approve", &paused, "toolu_1"]);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr(&approve));
    assert_eq!(scene.file("hello.txt").as_deref(), Some("hi\n"));
    let statuses: Vec<(String, String)> =
        scene.list().into_iter().map(|r| (r.id, r.status.as_str().to_owned())).collect();
    assert_eq!(statuses, [(paused.clone(), "completed".to_owned()), (queued, "completed".to_owned())]);
    let verify = scene.troupe(&["runs", "verify", &paused]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));

    setup.block_on(async {
        let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(admin.pool()).await.expect("the test schema is dropped");
        admin.pool().close().await;
    });
}
