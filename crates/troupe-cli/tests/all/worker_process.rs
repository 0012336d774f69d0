//! The real worker, `troupe agent run --worker`, under a coordinator: the demo agent
//! completes a task with its events streamed; a scripted model's call of a denied tool is
//! refused inside the worker and blocked by the coordinator; a worker killed mid-task is a
//! failed attempt (and a retry succeeds); a worker whose run is recorded in the
//! coordinator's store and is killed after two side effects is resumed without repeating
//! them; a gibibyte goes each way with both processes' peak memory printed and bounded;
//! a worker whose model the coordinator hosts calls it through the coordinator, holding
//! no key.

use futures::{SinkExt, StreamExt};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::codec::FramedWrite;
use tokio_util::sync::CancellationToken;
use troupe::runtime::{AgentSpec, ApprovalDecision, ApprovalPolicy};
use troupe_core::{AgentEvent, AgentEventKind, RunOutcomeKind};
use troupe_team::{Member, MemberTask};
use troupe_testkit::{MockLlmServer, MockTurn};
use troupe_workers::ipc::{AgentTask, Frame, FrameCodec, PayloadSource, TaskOutputs, ToolPolicy, frame_reader};
use troupe_workers::process::rss::own_peak_rss_kib;
use troupe_workers::process::{
    Backoff, ModelHost, OFFLINE_ENV, ProcessMember, SANDBOX_EVENT, WorkerConfig, WorkerOutcome, WorkerTask,
};

const TROUPE: &str = env!("CARGO_BIN_EXE_troupe");

/// A working directory (no `troupe.toml`) and a workspace holding a README.
struct Dirs {
    cwd: TempDir,
    workspace: TempDir,
}

impl Dirs {
    fn new() -> Self {
        Self::in_dir(&std::env::temp_dir())
    }

    fn in_dir(parent: &Path) -> Self {
        let dirs = Dirs {
            cwd: tempfile::tempdir_in(parent).expect("a temp dir"),
            workspace: tempfile::tempdir_in(parent).expect("a temp dir"),
        };
        std::fs::write(dirs.workspace.path().join("README.md"), "# Gadget\n\nA gadget for tests.\n").expect("writes");
        dirs
    }

    fn workspace(&self) -> &Path {
        self.workspace.path()
    }

    /// The real worker in the workspace; heartbeats generous enough for a debug build.
    fn worker(&self) -> WorkerConfig {
        WorkerConfig::troupe(TROUPE, self.workspace())
            .working_dir(self.cwd.path())
            .heartbeat(Duration::from_millis(250), 40)
            .timeout(Duration::from_secs(300))
            .max_attempts(1)
    }
}

/// A task running `spec` with every call approved (nobody can be asked in a worker).
fn task(id: &str, prompt: &str, model: &str) -> AgentTask {
    let spec = AgentSpec { approval: ApprovalPolicy::auto(), ..AgentSpec::new("coder", model) };
    AgentTask::new(id, "test", "coder", prompt).with_spec(&spec).expect("a spec serializes")
}

async fn run(member: &ProcessMember, task: WorkerTask) -> (WorkerOutcome, Vec<AgentEvent>) {
    let (tx, mut rx) = mpsc::channel(4096);
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let outcome = member.run_task(task, Some(tx), CancellationToken::new()).await;
    (outcome, collect.await.expect("the collector ends"))
}

fn tools_called(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::ToolCallStart { tool, .. } => Some(tool.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_demo_agent_completes_a_task_in_a_worker_and_streams_its_events() {
    let dirs = Dirs::new();
    let member = ProcessMember::new("coder", "the demo agent", dirs.worker());
    let (outcome, events) = run(&member, task("t-demo", "Summarise this repository", "demo").into()).await;
    let result = outcome.result.as_ref().expect("the worker sent a result");
    assert!(outcome.member.success, "{:?} / {:?}", outcome.member, outcome.attempts);
    assert!(outcome.member.content.contains("I wrote a summary to `TROUPE_DEMO.md`"), "{}", outcome.member.content);
    assert_eq!(result.status, RunOutcomeKind::Completed);
    assert!(outcome.member.run_id.is_some());
    let summary = std::fs::read_to_string(dirs.workspace().join("TROUPE_DEMO.md")).expect("the demo wrote its file");
    assert!(summary.contains("# Gadget"), "{summary}");

    println!("sandbox: {}", result.metrics.sandbox);
    assert!(result.metrics.sandbox.starts_with("landlock"), "{}", result.metrics.sandbox);
    let Some(AgentEventKind::Custom { name, value }) = events.first().map(|e| &e.kind) else {
        panic!("the first event reports the sandbox: {:?}", events.first())
    };
    assert_eq!(name, SANDBOX_EVENT);
    assert!(value["status"].is_string(), "{value}");
    assert!(matches!(&events[1].kind, AgentEventKind::RunStarted { model, .. } if model == "demo"), "{:?}", events[1]);
    assert_eq!(tools_called(&events), ["fs.list", "fs.read", "fs.write"]);
    assert!(events.iter().any(|e| matches!(e.kind, AgentEventKind::MessageDelta { .. })));
    assert!(
        matches!(
            events.last().map(|e| &e.kind),
            Some(AgentEventKind::RunFinished { outcome: RunOutcomeKind::Completed, .. })
        ),
        "{:?}",
        events.last()
    );
    let attempt = &outcome.attempts[0];
    assert_eq!(attempt.exit.as_deref(), Some("exit code 0"), "{attempt:?}");
    assert_eq!(attempt.events, events.len() as u64);
}

#[tokio::test]
async fn without_a_spec_the_worker_runs_the_coding_agent_and_says_it_cannot_ask_for_approval() {
    let dirs = Dirs::new();
    let member = ProcessMember::new("coder", "the coding agent", dirs.worker());
    let result = member
        .run(MemberTask::new("t-plain", "lead", "Summarise this repository"), None, CancellationToken::new())
        .await;
    assert!(!result.success, "{result:?}");
    let error = result.error.unwrap_or_default();
    assert_eq!(error, "paused waiting for 1 approval(s), which a worker cannot ask a person for");
    assert!(!dirs.workspace().join("TROUPE_DEMO.md").exists(), "the write waited for an approval that never came");
}

#[tokio::test]
async fn a_cancelled_task_is_stopped_by_the_worker_and_reported_cancelled() {
    let dirs = Dirs::new();
    let member = ProcessMember::new("coder", "the demo agent", dirs.worker().max_attempts(3));
    let (tx, mut rx) = mpsc::channel(4096);
    let cancel = CancellationToken::new();
    let running = {
        let (member, cancel) = (member.clone(), cancel.clone());
        let task = task("t-cancel", "Summarise this repository", "demo");
        tokio::spawn(async move { member.run_task(task.into(), Some(tx), cancel).await })
    };
    while let Some(event) = rx.recv().await {
        if matches!(event.kind, AgentEventKind::RunStarted { .. }) {
            cancel.cancel();
        }
    }
    let outcome = running.await.expect("the coordinator does not panic");
    let result = outcome.result.expect("the worker answered the cancel with its result");
    assert_eq!(result.status, RunOutcomeKind::Cancelled);
    assert_eq!(outcome.member.error.as_deref(), Some("cancelled: cancelled by the coordinator"));
    assert_eq!(outcome.attempts.len(), 1, "a cancelled task is not retried");
    assert_eq!(outcome.attempts[0].exit.as_deref(), Some("exit code 0"));
}

/// A model that calls the shell (touching `marker`), then answers.
async fn shell_calling_model(marker: &Path) -> MockLlmServer {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    let command = format!("touch {}", marker.display());
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": command})));
    server.push(MockTurn::text("done"));
    server
}

fn with_mock(config: WorkerConfig, server: &MockLlmServer) -> WorkerConfig {
    config.env("ANTHROPIC_API_KEY", "sk-ant-fake").env("ANTHROPIC_BASE_URL", server.url())
}

/// The coordinator's providers, reaching the mock server with `key`.
fn coordinator_providers(server: &MockLlmServer, key: &str) -> Arc<troupe::model::Providers> {
    let env: HashMap<String, String> = [("ANTHROPIC_API_KEY", key.to_owned()), ("ANTHROPIC_BASE_URL", server.url())]
        .map(|(k, v)| (k.to_owned(), v))
        .into();
    Arc::new(troupe::model::Providers::with_env(env))
}

/// With a model host, the worker's agent calls its model through the coordinator: the
/// worker is granted no key (its environment is `PATH` alone), and the provider sees the
/// coordinator's key on every call.
#[tokio::test]
async fn a_hosted_model_is_called_by_the_coordinator_and_the_worker_holds_no_key() {
    let dirs = Dirs::new();
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::tool_call("toolu_1", "fs.read", json!({"path": "README.md"})));
    server.push(MockTurn::text("It is a gadget."));
    let host = ModelHost::new(coordinator_providers(&server, "sk-ant-coordinator"), [SONNET]);
    let member = ProcessMember::new("coder", "a hosted coder", dirs.worker().host_models(host));
    let mut granted: Vec<String> =
        member.config().worker_env().iter().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
    granted.sort();
    assert_eq!(granted, ["PATH", OFFLINE_ENV], "no key is granted to the worker");
    let (outcome, events) = run(&member, task("t-hosted", "Read the README", SONNET).into()).await;
    assert!(outcome.member.success, "{:?} / {:?}", outcome.member, outcome.attempts);
    // Its model reached through the coordinator, the worker confined itself without the
    // network: its system-call filter refuses every socket.
    let sandbox = &outcome.result.as_ref().expect("a result").metrics.sandbox;
    assert!(sandbox.ends_with("system calls filtered (seccomp), no network"), "{sandbox}");
    assert_eq!(outcome.member.content, "It is a gadget.");
    assert_eq!(tools_called(&events), ["fs.read"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "both turns went to the provider");
    for request in &requests {
        assert_eq!(request.header("x-api-key"), Some("sk-ant-coordinator"));
    }
    let read = requests[1].body["messages"].to_string();
    assert!(read.contains("A gadget for tests."), "the tool's result went back to the model: {read}");
}

/// A task whose agent names a model the host does not serve fails in the worker, and
/// nothing reaches the provider.
#[tokio::test]
async fn a_model_the_host_does_not_serve_reaches_no_provider() {
    let dirs = Dirs::new();
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::text("never asked"));
    let host = ModelHost::new(coordinator_providers(&server, "sk-ant-coordinator"), [SONNET]);
    let member = ProcessMember::new("coder", "a hosted coder", dirs.worker().host_models(host));
    let (outcome, _) = run(&member, task("t-other", "Read the README", "anthropic/claude-opus-4-1").into()).await;
    assert!(!outcome.member.success, "{:?}", outcome.member);
    let error = outcome.member.error.unwrap_or_default();
    assert!(error.contains("serves only anthropic/claude-sonnet-4-5"), "{error}");
    assert!(server.requests().is_empty());
}

/// A host that cannot serve its model (its key is not set) fails the task before a
/// worker starts, naming the variable.
#[tokio::test]
async fn a_host_without_its_key_fails_the_task_before_a_worker_starts() {
    let dirs = Dirs::new();
    let providers = Arc::new(troupe::model::Providers::with_env(HashMap::<String, String>::new()));
    let member =
        ProcessMember::new("coder", "a hosted coder", dirs.worker().host_models(ModelHost::new(providers, [SONNET])));
    let (outcome, _) = run(&member, task("t-nokey", "Read the README", SONNET).into()).await;
    assert!(outcome.attempts.is_empty(), "no worker started: {:?}", outcome.attempts);
    let error = outcome.member.error.unwrap_or_default();
    assert!(error.contains("cannot serve the worker's model") && error.contains("ANTHROPIC_API_KEY"), "{error}");
}

const SONNET: &str = "anthropic/claude-sonnet-4-5";

#[tokio::test]
async fn a_denied_tool_called_anyway_is_refused_inside_the_worker() {
    let dirs = Dirs::new();
    let marker = dirs.workspace().join("shell-ran");
    let server = shell_calling_model(&marker).await;
    // The protocol by hand, so only the worker's own enforcement is at work.
    let mut task = task("t-deny", "Touch the marker", "anthropic/claude-sonnet-4-5");
    task.tools = ToolPolicy::allow_all().deny("shell");
    let mut child = tokio::process::Command::new(TROUPE)
        .args(["agent", "run", "--worker", "--workspace"])
        .arg(dirs.workspace())
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("ANTHROPIC_BASE_URL", server.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker starts");
    let mut input = FramedWrite::new(child.stdin.take().expect("piped"), FrameCodec::new());
    input.send(Frame::task(task)).await.expect("the task is sent");
    let mut frames = frame_reader(child.stdout.take().expect("piped"), FrameCodec::new());
    let mut events = Vec::new();
    let result = loop {
        match tokio::time::timeout(Duration::from_secs(120), frames.next()).await.expect("the worker answers") {
            Some(Ok(Frame::Event(event))) => events.push(*event),
            Some(Ok(Frame::Heartbeat)) => {}
            Some(Ok(Frame::Result(result))) => break *result,
            other => panic!("unexpected {other:?}"),
        }
    };
    drop(input);
    let status = child.wait().await.expect("the worker exits");
    assert!(status.success(), "{status:?}");

    assert_eq!(tools_called(&events), ["shell"], "the model called it anyway");
    let refusal = events
        .iter()
        .find_map(|e| match &e.kind {
            AgentEventKind::ToolCallResult { content, is_error: true, .. } => Some(content.clone()),
            _ => None,
        })
        .expect("the call was answered with an error");
    println!("the worker answered: {refusal}");
    assert!(refusal.contains("shell") && refusal.to_lowercase().contains("unknown"), "{refusal}");
    assert!(!marker.exists(), "the shell never ran");
    assert_eq!(result.status, RunOutcomeKind::Completed, "{result:?}");
    assert_eq!(result.output, "done");
    let requests = server.requests();
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    assert!(offered.contains(&"fs_read".to_owned()) && !offered.contains(&"shell".to_owned()), "{offered:?}");
}

#[tokio::test]
async fn the_coordinator_stops_a_worker_whose_model_calls_a_denied_tool() {
    let dirs = Dirs::new();
    let marker = dirs.workspace().join("shell-ran");
    let server = shell_calling_model(&marker).await;
    let config = with_mock(dirs.worker(), &server).tool_policy(ToolPolicy::allow_all().deny("shell")).max_attempts(3);
    let member = ProcessMember::new("coder", "a coder without a shell", config);
    let task = task("t-deny", "Touch the marker", "anthropic/claude-sonnet-4-5");
    let (outcome, events) = run(&member, task.into()).await;
    assert!(!outcome.member.success);
    assert_eq!(outcome.member.error.as_deref(), Some("worker called denied tool shell"));
    assert_eq!(outcome.attempts.len(), 1, "a policy breach is not retried");
    assert!(tools_called(&events).is_empty(), "the denied call is not passed on: {events:?}");
    assert!(!marker.exists(), "the shell never ran");
}

/// A scratch directory outside `/tmp` (which the sandbox leaves writable): under target/,
/// or, for a checkout that is itself under `/tmp`, under `$HOME`.
fn scratch_outside_tmp() -> Option<tempfile::TempDir> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base =
        if target.starts_with("/tmp") { std::env::var_os("HOME").map(PathBuf::from)? } else { target.to_owned() };
    if base.starts_with("/tmp") {
        return None;
    }
    tempfile::Builder::new().prefix(".troupe-landlock-").tempdir_in(base).ok()
}

#[tokio::test]
async fn landlock_confines_the_workers_shell_to_its_workspace() {
    let Some(scratch) = scratch_outside_tmp() else {
        troupe_testkit::skip("landlock_confines_the_workers_shell", "no writable directory outside /tmp");
        return;
    };
    let dirs = Dirs::in_dir(scratch.path());
    let outside = scratch.path().join("escaped");
    let inside = dirs.workspace().join("stayed");
    let server = MockLlmServer::start().await.expect("the mock server starts");
    let command = format!("touch {} ; touch {}", inside.display(), outside.display());
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": command})));
    server.push(MockTurn::text("tried"));
    let member = ProcessMember::new("coder", "a coder with a shell", with_mock(dirs.worker(), &server));
    let (outcome, events) = run(&member, task("t-landlock", "Touch both", "anthropic/claude-sonnet-4-5").into()).await;
    let result = outcome.result.expect("a result");
    println!("sandbox: {}", result.metrics.sandbox);
    if !result.metrics.sandbox.starts_with("landlock: enforced")
        && !result.metrics.sandbox.starts_with("landlock: partially")
    {
        let why = format!("this kernel does not enforce Landlock ({})", result.metrics.sandbox);
        troupe_testkit::skip("landlock_confines_the_workers_shell", &why);
        return;
    }
    assert!(inside.exists(), "the workspace is writable");
    assert!(!outside.exists(), "Landlock kept the shell out of {}", outside.display());
    let shell_said = events
        .iter()
        .find_map(|e| match &e.kind {
            AgentEventKind::ToolCallResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    println!("the shell said: {shell_said}");
    assert!(shell_said.contains("Permission denied"), "{shell_said}");
}

/// The worker behind a shell that records its pid (the worker keeps it: `exec`).
fn recorded_worker(dirs: &Dirs, pids: &Path) -> WorkerConfig {
    let script = r#"echo $$ >> "$0"; exec "$1" agent run --worker --workspace "$2""#;
    let mut config = dirs.worker();
    config.command = PathBuf::from("/bin/sh");
    config.args = vec!["-c".into(), script.into(), pids.into(), TROUPE.into(), dirs.workspace().into()];
    config
}

/// Runs the demo task, SIGKILLing the first worker as soon as its run has started.
async fn kill_first_attempt(config: WorkerConfig, pids: &Path) -> (WorkerOutcome, Vec<AgentEvent>) {
    let member = ProcessMember::new("coder", "the demo agent", config);
    let (tx, mut rx) = mpsc::channel(4096);
    let running = tokio::spawn(async move {
        member
            .run_task(task("t-kill", "Summarise this repository", "demo").into(), Some(tx), CancellationToken::new())
            .await
    });
    let mut events = Vec::new();
    let mut killed = false;
    while let Some(event) = rx.recv().await {
        if !killed && matches!(event.kind, AgentEventKind::RunStarted { .. }) {
            let pid = std::fs::read_to_string(pids).expect("the pid was recorded");
            let pid = pid.lines().next().expect("a pid").trim().to_owned();
            let status = std::process::Command::new("kill").args(["-KILL", &pid]).status().expect("kill runs");
            assert!(status.success());
            killed = true;
        }
        events.push(event);
    }
    (running.await.expect("the coordinator does not panic"), events)
}

#[tokio::test]
async fn a_worker_killed_mid_task_is_a_failed_result() {
    let dirs = Dirs::new();
    let pids = dirs.cwd.path().join("pids");
    let (outcome, events) = kill_first_attempt(recorded_worker(&dirs, &pids), &pids).await;
    assert!(!outcome.member.success);
    assert_eq!(
        outcome.member.error.as_deref(),
        Some("the worker exited without a result (killed by signal 9 (SIGKILL))")
    );
    assert!(!events.iter().any(|e| matches!(e.kind, AgentEventKind::RunFinished { .. })), "the run never finished");
    assert!(!dirs.workspace().join("TROUPE_DEMO.md").exists());
}

#[tokio::test]
async fn a_worker_killed_mid_task_is_retried_and_the_retry_completes() {
    let dirs = Dirs::new();
    let pids = dirs.cwd.path().join("pids");
    let config = recorded_worker(&dirs, &pids).max_attempts(2).backoff(Backoff::none());
    let (outcome, _) = kill_first_attempt(config, &pids).await;
    assert!(outcome.member.success, "{:?}", outcome.member);
    assert_eq!(outcome.attempts.len(), 2);
    assert_eq!(outcome.attempts[0].exit.as_deref(), Some("killed by signal 9 (SIGKILL)"));
    assert_eq!(outcome.attempts[1].error, None);
    assert_eq!(std::fs::read_to_string(&pids).expect("pids").lines().count(), 2);
}

const GIB: u64 = 1 << 30;
const MIB: usize = 1 << 20;
/// What each process may peak at while a gibibyte goes through it.
const RSS_LIMIT_KIB: u64 = 256 * 1024;

/// Writes `len` bytes of a pattern that differs in every MiB to `path`.
fn write_pattern(path: &Path, len: u64) {
    use std::io::Write;
    let mut file = std::io::BufWriter::with_capacity(MIB, std::fs::File::create(path).expect("creates"));
    let mut block: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    for n in 0..len / MIB as u64 {
        block[..8].copy_from_slice(&n.to_be_bytes());
        file.write_all(&block).expect("writes");
    }
    file.flush().expect("flushes");
}

/// Whether two files have the same bytes, read a MiB at a time.
fn same_bytes(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (mut a, mut b) = (std::fs::File::open(a).expect("opens"), std::fs::File::open(b).expect("opens"));
    let (mut x, mut y) = (vec![0u8; MIB], vec![0u8; MIB]);
    loop {
        let n = a.read(&mut x).expect("reads");
        if n == 0 {
            return b.read(&mut y).expect("reads") == 0;
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_goes_each_way_with_bounded_memory_on_both_sides() {
    // Under target/, not /tmp: three copies of the payload are on disk at the peak.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch dir");
    let dirs = Dirs::in_dir(scratch.path());
    let source = scratch.path().join("big.bin");
    write_pattern(&source, GIB);
    let artifacts = scratch.path().join("artifacts");
    // Three gibibytes of dirty pages can stall a write for seconds on a loaded machine; this
    // test is about memory, so silence is allowed a minute instead of the default ten seconds.
    let config = dirs.worker().artifact_dir(&artifacts).heartbeat(Duration::from_secs(1), 60);
    let member = ProcessMember::new("coder", "the demo agent", config);
    let mut agent_task = task("t-gib", "Summarise this repository", "demo");
    // The real agent runs, then the worker streams the input back as an artifact.
    agent_task.outputs = TaskOutputs { echo_payloads: true, ..TaskOutputs::default() };
    // SHA-256 in a debug build runs at tens of MB/s; the bytes are compared below instead.
    agent_task.skip_checksums = true;
    // The peak is the process's: start it afresh here, so what other tests of this binary
    // allocated before does not count (Linux: `5` to clear_refs resets VmHWM).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let (outcome, _) =
        run(&member, WorkerTask::new(agent_task).input("big.bin", PayloadSource::File(source.clone()))).await;
    let elapsed = started.elapsed();
    assert!(outcome.member.success, "{:?} / {:?}", outcome.member, outcome.attempts);
    let result = outcome.result.as_ref().expect("a result");
    assert_eq!(result.data.as_ref().map(|d| d["inputs"][0]["len"].clone()), Some(json!(GIB)));
    let received = dirs.workspace().join(".troupe-inputs/big.bin");
    assert_eq!(std::fs::metadata(&received).expect("the worker wrote the input").len(), GIB);
    assert_eq!(outcome.artifacts.len(), 1);
    let artifact = &outcome.artifacts[0];
    assert_eq!((artifact.name.as_str(), artifact.len), ("big.bin", GIB));
    let back = artifact.path.clone().expect("written to the artifact dir");
    assert!(same_bytes(&source, &received), "the worker received the same bytes");
    assert!(same_bytes(&source, &back), "the coordinator received the same bytes back");

    let worker_reported = result.metrics.peak_rss_kib;
    let worker_observed = outcome.attempts[0].peak_rss_kib;
    let coordinator = own_peak_rss_kib();
    println!(
        "1 GiB each way in {elapsed:.1?}: worker peak RSS {} (self-reported VmHWM) / {} (read by the coordinator); \
         coordinator (test process) peak RSS {}",
        kib(worker_reported),
        kib(worker_observed),
        kib(coordinator)
    );
    let worker_peak = worker_observed.or(worker_reported).expect("the worker's peak is known on Linux");
    assert!(worker_peak < RSS_LIMIT_KIB, "worker peak {worker_peak} KiB");
    let coordinator = coordinator.expect("the test process's peak is known on Linux");
    assert!(coordinator < RSS_LIMIT_KIB, "coordinator peak {coordinator} KiB");
}

fn kib(value: Option<u64>) -> String {
    value.map_or_else(|| "unknown".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// The worker's run recorded in a store of the coordinator's: a first worker (confined:
/// its system calls filtered, no core dumps) runs two `shell` calls that each append a
/// line, and is killed while its third model call waits; the second worker resumes the
/// recorded run from its checkpoint.
#[tokio::test]
async fn a_worker_killed_after_two_side_effects_is_resumed_without_repeating_them() {
    let dirs = Dirs::new();
    let pids = dirs.cwd.path().join("pids");
    let store_dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite://{}", store_dir.path().join("troupe.db").display());
    let store = troupe::store::open(&url).await.expect("the store opens");
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "echo one >> lines.txt"})));
    server.push(MockTurn::tool_call("toolu_2", "shell", json!({"command": "echo two >> lines.txt"})));
    // The first worker is killed while it waits for this one.
    server.push(MockTurn::text("never read").with_latency(Duration::from_secs(120)));
    server.push(MockTurn::text("Both lines are written."));
    let config = with_mock(recorded_worker(&dirs, &pids), &server)
        .max_attempts(2)
        .backoff(Backoff::none())
        .record_in(std::sync::Arc::clone(&store));
    let member = ProcessMember::new("coder", "a coder with a shell", config);
    let task = task("t-resume", "Write the two lines", "anthropic/claude-sonnet-4-5");
    let running = tokio::spawn(async move { run(&member, task.into()).await });

    let waited = Instant::now();
    while server.requests().len() < 3 {
        if running.is_finished() {
            let (outcome, _) = running.await.expect("the coordinator does not panic");
            panic!("the task ended before its third model call: {:?} / {:?}", outcome.member, outcome.attempts);
        }
        assert!(waited.elapsed() < Duration::from_secs(120), "the third model call never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lines = std::fs::read_to_string(dirs.workspace().join("lines.txt")).expect("the shell wrote");
    assert_eq!(lines, "one\ntwo\n", "both side effects are done before the kill");
    let pid = std::fs::read_to_string(&pids).expect("the pid was recorded");
    let pid = pid.lines().next().expect("a pid").trim().to_owned();
    // The worker itself is confined: its system calls filtered, no core dumps.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the worker's status");
    assert!(status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]), "{status}");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("the worker's limits");
    let core = limits.lines().find(|l| l.starts_with("Max core file size")).expect("a core limit");
    assert_eq!(core.split_whitespace().nth(4), Some("0"), "{core}");
    assert!(std::process::Command::new("kill").args(["-KILL", &pid]).status().expect("kill runs").success());

    let (outcome, events) = running.await.expect("the coordinator does not panic");
    assert!(outcome.member.success, "{:?} / {:?}", outcome.member, outcome.attempts);
    assert_eq!(outcome.attempts.len(), 2);
    assert_eq!(outcome.attempts[0].exit.as_deref(), Some("killed by signal 9 (SIGKILL)"));
    assert_eq!(outcome.member.content, "Both lines are written.");
    let lines = std::fs::read_to_string(dirs.workspace().join("lines.txt")).expect("the file is there");
    assert_eq!(lines, "one\ntwo\n", "neither command ran again");
    assert_eq!(tools_called(&events), ["shell", "shell"], "the second worker called no tool");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one model call was made again, none more");
    let last = requests[3].body.to_string();
    assert!(last.contains("toolu_1") && last.contains("toolu_2"), "the resumed call carries both results: {last}");

    // The record is the coordinator's: the run completed there, its log intact and
    // saying where it resumed.
    let run_id = outcome.result.as_ref().and_then(|r| r.run_id.clone()).expect("the result names its run");
    let record = store.load_run(run_id.as_str()).await.expect("reads").expect("the run is recorded");
    assert_eq!(record.status, troupe::store::RunStatus::Completed);
    let evidence = store.evidence(run_id.as_str(), 0).await.expect("reads");
    troupe::store::verify_log(&evidence, &record.evidence_head, run_id.as_str()).expect("the log verifies");
    let kinds: Vec<String> = evidence.iter().map(|e| format!("{:?}", e.kind)).collect();
    let started = kinds.iter().filter(|k| k.as_str() == "ActionStarted").count();
    assert_eq!(started, 2, "two actions were started, each once: {kinds:?}");
    assert!(!dirs.workspace().join(".troupe").exists(), "the worker kept no record in the workspace");
}

/// A worker's call that needs a person, in a team someone watches: its run waits, the
/// call is announced on the member's events, and a decision naming only the call
/// (`TeamControl::decide_call`, as a served team's client sends it) reaches the worker
/// through its recorded run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_waiting_call_is_decided_by_its_call_id_alone() {
    let dirs = Dirs::new();
    let marker = dirs.workspace().join("shell-ran");
    let server = shell_calling_model(&marker).await;
    let store_dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite://{}", store_dir.path().join("troupe.db").display());
    let store = troupe::store::open(&url).await.expect("the store opens");
    let control = troupe_team::TeamControl::new();
    let config = with_mock(dirs.worker(), &server).record_in(std::sync::Arc::clone(&store));
    let member = ProcessMember::new("coder", "a coder with a shell", config).with_control(control.clone());
    // The coding agent (no spec in the task): its shell needs approval, and nobody gave it.
    let mut member_task = MemberTask::new("t-ask", "lead", "Touch the marker");
    member_task.parent_run_id = Some(troupe_core::RunId::new("run_lead"));
    let (tx, mut rx) = mpsc::channel(4096);
    let running = tokio::spawn(async move { member.run(member_task, Some(tx), CancellationToken::new()).await });
    let call_id = loop {
        let event = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the call is announced")
            .expect("the member goes on");
        if let AgentEventKind::RunPaused { reason: troupe_core::PauseReason::Approval { call_id, .. } } = &event.kind {
            break call_id.clone();
        }
    };
    assert!(!marker.exists(), "nothing ran before the decision");
    control.decide_call(&call_id, ApprovalDecision::Approve).await.expect("the worker's run is found by its call");
    let collect = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let result = tokio::time::timeout(Duration::from_secs(60), running).await.expect("ends").expect("no panic");
    collect.abort();
    assert!(result.success, "{result:?}");
    assert!(marker.exists(), "the approved command ran in the worker");
}
