//! The coordinator against misbehaving workers, each a real process (`sh -c SCRIPT`): one
//! that prints garbage, hangs, writes an oversized header or a truncated frame, kills
//! itself mid-task, outlives its timeout while heartbeating, or calls a denied tool. Each
//! becomes a failed result after the expected attempts, the coordinator carries on, and no
//! process of the worker's group is left behind.

use bytes::{Bytes, BytesMut};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::codec::Encoder;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, RunOutcomeKind, ToolCallId};
use troupe_team::{Member, MemberTask};
use troupe_workers::ipc::{
    AgentResult, ArtifactRef, Frame, FrameCodec, ModelCall, PayloadEnd, PayloadStart, ToolPolicy,
};
use troupe_workers::process::{Backoff, ModelHost, ProcessMember, WorkerConfig, WorkerOutcome, WorkerTask};

const TASK_ID: &str = "task-1";

/// The bytes of `frames` on the wire.
fn wire(frames: Vec<Frame>) -> Vec<u8> {
    let mut codec = FrameCodec::new();
    let mut bytes = BytesMut::new();
    for frame in frames {
        codec.encode(frame, &mut bytes).expect("encodes");
    }
    bytes.to_vec()
}

/// A shell command printing exactly `bytes`.
fn printf(bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().map(|b| format!("\\{b:03o}")).collect();
    format!("printf '{escaped}'")
}

fn event(seq: u64, kind: AgentEventKind) -> Frame {
    let attribution = Attribution::now(AgentId::new("fake"), RunId::new("run_fake"), seq);
    Frame::event(AgentEvent::new(attribution, kind))
}

fn run_started() -> Frame {
    event(0, AgentEventKind::RunStarted { instruction: "x".into(), model: "fake".into() })
}

/// A worker running `script`, which first records its pid (its process group id) in
/// `pids` and starts a background child in its group.
fn fake(pids: &Path, script: &str) -> WorkerConfig {
    let script = format!("echo $$ >> '{}'; sleep 300 & {script}", pids.display());
    WorkerConfig::new("/bin/sh")
        .args(["-c", &script])
        .heartbeat(Duration::from_millis(100), 3)
        .timeout(Duration::from_secs(20))
        .backoff(Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) })
        .cancel_grace(Duration::from_millis(200))
}

struct Run {
    outcome: WorkerOutcome,
    events: Vec<AgentEvent>,
    pids: Vec<u32>,
    elapsed: Duration,
}

async fn run(config: impl FnOnce(&Path) -> WorkerConfig) -> Run {
    run_with(config, CancellationToken::new()).await
}

async fn run_with(config: impl FnOnce(&Path) -> WorkerConfig, cancel: CancellationToken) -> Run {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pids_file = dir.path().join("pids");
    let member = ProcessMember::new("fake", "a misbehaving worker", config(&pids_file));
    let (tx, mut rx) = mpsc::channel(1024);
    let started = Instant::now();
    let task = troupe_workers::AgentTask::new(TASK_ID, "test", "fake", "do it");
    let outcome = member.run_task(WorkerTask::new(task), Some(tx), cancel).await;
    let elapsed = started.elapsed();
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    let pids =
        std::fs::read_to_string(&pids_file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
    let run = Run { outcome, events, pids, elapsed };
    assert_groups_gone(&run.pids).await;
    println!("{} attempt(s) in {:?}: {:?}", run.outcome.attempts.len(), run.elapsed, run.outcome.member.error);
    run
}

/// The processes of process group `pgid`, with their state letter.
fn group_members(pgid: u32) -> Vec<(u32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let state = fields.first()?.chars().next()?;
            (fields.get(2)?.parse::<u32>().ok()? == pgid).then_some((pid, state))
        })
        .collect()
}

/// Every group is dead: no member runs. A killed member whose parent died waits as a
/// zombie until init reaps it, which this machine's init does only every second or so;
/// a zombie runs nothing and holds nothing but its pid, so it counts as gone.
async fn assert_groups_gone(pids: &[u32]) {
    for &pgid in pids {
        let deadline = Instant::now() + Duration::from_secs(2);
        let living =
            || group_members(pgid).into_iter().filter(|(_, state)| *state != 'Z' && *state != 'X').collect::<Vec<_>>();
        let mut left = living();
        while !left.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            left = living();
        }
        assert!(left.is_empty(), "processes of group {pgid} still run: {left:?}");
    }
}

fn error(run: &Run) -> &str {
    run.outcome.member.error.as_deref().unwrap_or_default()
}

fn assert_failed(run: &Run, attempts: usize) {
    assert!(!run.outcome.member.success, "{:?}", run.outcome.member);
    assert!(run.outcome.result.is_none());
    assert_eq!(run.outcome.attempts.len(), attempts, "{:?}", run.outcome.attempts);
    assert_eq!(run.pids.len(), attempts, "one process per attempt: {:?}", run.pids);
    for (report, pid) in run.outcome.attempts.iter().zip(&run.pids) {
        assert_eq!(report.pid, Some(*pid));
        assert!(report.error.is_some());
    }
}

#[tokio::test]
async fn garbage_on_stdout_fails_each_attempt_at_once() {
    let run = run(|pids| fake(pids, "echo 'hello, this is not a frame'; sleep 300").max_attempts(2)).await;
    assert_failed(&run, 2);
    assert!(
        error(&run).starts_with("the worker broke the protocol: a frame header announces 1751477356 bytes"),
        "{}",
        error(&run)
    );
    assert!(error(&run).ends_with("(after 2 attempts)"), "{}", error(&run));
    assert!(run.elapsed < Duration::from_secs(5), "garbage is found at once, not at a timeout: {:?}", run.elapsed);
    assert_eq!(run.outcome.attempts[0].exit.as_deref(), Some("killed by signal 9 (SIGKILL)"));
}

#[tokio::test]
async fn a_silent_worker_is_hung_and_retried_up_to_its_attempts() {
    let run = run(|pids| fake(pids, "sleep 300").max_attempts(3)).await;
    assert_failed(&run, 3);
    assert_eq!(error(&run), "the worker hung: no frame for 300 ms (3 heartbeat intervals) (after 3 attempts)");
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
}

#[tokio::test]
async fn a_heartbeating_worker_that_never_answers_times_out() {
    let beat = printf(&wire(vec![Frame::Heartbeat]));
    let script = format!("while :; do {beat}; sleep 0.05; done");
    let run = run(|pids| fake(pids, &script).timeout(Duration::from_millis(700)).max_attempts(2)).await;
    assert_failed(&run, 2);
    assert_eq!(error(&run), "the worker timed out after 700 ms (after 2 attempts)");
    for attempt in &run.outcome.attempts {
        assert!(
            attempt.duration >= Duration::from_millis(700) && attempt.duration < Duration::from_secs(3),
            "{attempt:?}"
        );
    }
}

#[tokio::test]
async fn an_oversized_header_is_refused_before_its_bytes_arrive() {
    let script = format!("{}; sleep 300", printf(&[0x7f, 0xff, 0xff, 0xff, 0x02]));
    let run = run(|pids| fake(pids, &script).max_attempts(1)).await;
    assert_failed(&run, 1);
    assert_eq!(
        error(&run),
        "the worker broke the protocol: a frame header announces 2147483647 bytes, more than the 16777216-byte maximum"
    );
    assert!(run.elapsed < Duration::from_secs(2), "{:?}", run.elapsed);
}

#[tokio::test]
async fn a_truncated_frame_fails_after_the_events_before_it() {
    let mut bytes = wire(vec![run_started()]);
    let partial = wire(vec![event(1, AgentEventKind::StepStarted { step: 1 })]);
    bytes.extend_from_slice(&partial[..partial.len() - 3]);
    let script = format!("{}; exit 0", printf(&bytes));
    let run = run(|pids| fake(pids, &script).max_attempts(2)).await;
    assert_failed(&run, 2);
    let expected =
        format!("the stream ended inside a frame: {} of its {} bytes arrived", partial.len() - 3, partial.len());
    assert!(error(&run).contains(&expected), "{}", error(&run));
    assert_eq!(run.events.len(), 2, "the whole frame of each attempt was streamed: {:?}", run.events);
    assert!(matches!(run.events[0].kind, AgentEventKind::RunStarted { .. }));
}

#[tokio::test]
async fn a_worker_killed_mid_task_is_a_failed_attempt() {
    let script = format!("{}; sleep 0.2; kill -9 $$", printf(&wire(vec![run_started()])));
    let run = run(|pids| fake(pids, &script).max_attempts(2)).await;
    assert_failed(&run, 2);
    assert_eq!(error(&run), "the worker exited without a result (killed by signal 9 (SIGKILL)) (after 2 attempts)");
    assert_eq!(run.events.len(), 2);
}

#[tokio::test]
async fn a_crash_with_stderr_quotes_its_end() {
    let run = run(|pids| fake(pids, "echo 'panicked at src/main.rs: boom' >&2; exit 101").max_attempts(1)).await;
    assert_failed(&run, 1);
    assert_eq!(
        error(&run),
        "the worker exited without a result (exit code 101); its stderr ends: panicked at src/main.rs: boom"
    );
}

#[tokio::test]
async fn a_denied_tool_in_the_event_stream_kills_the_worker_without_retry() {
    let call = ToolCallId::new("call_1");
    let frames = vec![
        run_started(),
        event(
            1,
            AgentEventKind::ToolCallStart { call_id: call.clone(), tool: "fs.read".into(), parent_message_id: None },
        ),
        event(2, AgentEventKind::ToolCallStart { call_id: call, tool: "shell".into(), parent_message_id: None }),
    ];
    let script = format!("{}; sleep 300", printf(&wire(frames)));
    let policy = ToolPolicy::only(["fs.read", "fs.list"]);
    let run = run(|pids| fake(pids, &script).tool_policy(policy).max_attempts(3)).await;
    assert_failed(&run, 1);
    assert_eq!(error(&run), "worker called denied tool shell");
    assert_eq!(run.events.len(), 2, "the denied call's event is not passed on");
}

#[tokio::test]
async fn a_cancelled_task_that_the_worker_ignores_is_killed_after_the_grace_period() {
    let beat = printf(&wire(vec![Frame::Heartbeat]));
    let script = format!("while :; do {beat}; sleep 0.05; done");
    let cancel = CancellationToken::new();
    let trip = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trip.cancel();
    });
    let run = run_with(|pids| fake(pids, &script).max_attempts(3), cancel).await;
    assert_failed(&run, 1);
    assert_eq!(error(&run), "cancelled: the worker did not stop within its grace period");
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[tokio::test]
async fn a_program_that_does_not_exist_fails_once() {
    let member =
        ProcessMember::new("ghost", "missing", WorkerConfig::new("/nonexistent/troupe-worker").max_attempts(3));
    let result = member.run(MemberTask::new("t", "test", "hi"), None, CancellationToken::new()).await;
    assert!(!result.success);
    let error = result.error.unwrap_or_default();
    assert!(error.starts_with("cannot start the worker `/nonexistent/troupe-worker`"), "{error}");
}

#[tokio::test]
async fn a_well_behaved_worker_streams_events_and_artifacts_and_its_result_succeeds() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let artifacts = dir.path().join("artifacts");
    let report = Bytes::from_static(b"# Report\nall good\n");
    let sha = {
        use sha2::{Digest, Sha256};
        Sha256::digest(&report).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let mut result = AgentResult::failed(TASK_ID, "");
    result.status = RunOutcomeKind::Completed;
    result.error = None;
    result.output = "Done.".into();
    result.artifacts.push(ArtifactRef {
        stream_id: 1,
        name: "report.md".into(),
        len: report.len() as u64,
        sha256: Some(sha.clone()),
    });
    let frames = vec![
        run_started(),
        Frame::PayloadStart(PayloadStart {
            stream_id: 1,
            name: "report.md".into(),
            total_len: Some(report.len() as u64),
            checksum: true,
        }),
        Frame::PayloadChunk { stream_id: 1, bytes: report.slice(..5) },
        Frame::Heartbeat,
        Frame::PayloadChunk { stream_id: 1, bytes: report.slice(5..) },
        Frame::PayloadEnd(PayloadEnd { stream_id: 1, sha256: Some(sha.clone()) }),
        Frame::result(result),
    ];
    // Reads its whole task first, as a worker does, then answers.
    let script = format!("head -c 5 > /dev/null; {}", printf(&wire(frames)));
    let destination = artifacts.clone();
    let run = run(move |pids| fake(pids, &script).artifact_dir(destination)).await;
    let member = &run.outcome.member;
    assert!(member.success, "{member:?}");
    assert_eq!((member.name.as_str(), member.task_id.as_str(), member.content.as_str()), ("fake", TASK_ID, "Done."));
    assert_eq!(run.outcome.attempts.len(), 1);
    assert_eq!(run.events.len(), 1);
    let received = &run.outcome.artifacts;
    assert_eq!(received.len(), 1);
    assert_eq!((received[0].name.as_str(), received[0].sha256.as_deref()), ("report.md", Some(sha.as_str())));
    assert_eq!(std::fs::read(artifacts.join("report.md")).expect("written"), report);
}

#[tokio::test]
async fn a_result_for_another_task_is_a_protocol_error() {
    let script = format!("{}; sleep 300", printf(&wire(vec![Frame::result(AgentResult::failed("someone-else", "x"))])));
    let run = run(|pids| fake(pids, &script).max_attempts(1)).await;
    assert_failed(&run, 1);
    assert_eq!(error(&run), "the worker broke the protocol: the result is for task `someone-else`, not `task-1`");
}

#[tokio::test]
async fn the_worker_gets_only_the_granted_environment() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let env_file = dir.path().join("env");
    let script = format!("env > '{}'; sleep 300", env_file.display());
    let run = run(|pids| fake(pids, &script).env("TROUPE_GRANTED", "yes").max_attempts(1)).await;
    assert_failed(&run, 1);
    let env = std::fs::read_to_string(&env_file).expect("the worker wrote its environment");
    let names: Vec<&str> = env.lines().filter_map(|l| l.split_once('=').map(|(n, _)| n)).collect();
    assert!(names.contains(&"PATH") && names.contains(&"TROUPE_GRANTED"), "{names:?}");
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "cargo sets it for the test process");
    for leaked in ["CARGO_MANIFEST_DIR", "HOME", "CARGO_PKG_NAME"] {
        assert!(!names.contains(&leaked), "{leaked} leaked into {names:?}");
    }
    // What sh itself sets besides the granted ones.
    let own: Vec<&&str> =
        names.iter().filter(|n| !["PATH", "TROUPE_GRANTED", "PWD", "SHLVL", "_", "OLDPWD"].contains(n)).collect();
    assert!(own.is_empty(), "{own:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_survives_many_broken_workers_at_once() {
    let scripts = [
        ("echo garbage", "the worker broke the protocol: a frame header announces 1734439522 bytes"),
        ("sleep 300", "the worker hung"),
        ("kill -9 $$", "the worker exited without a result (killed by signal 9 (SIGKILL))"),
        ("exit 3", "the worker exited without a result (exit code 3)"),
    ];
    let runs =
        futures::future::join_all(scripts.iter().map(|(s, _)| run(move |pids| fake(pids, s).max_attempts(1)))).await;
    for (run, (script, expected)) in runs.iter().zip(scripts) {
        assert_failed(run, 1);
        assert!(error(run).starts_with(expected), "{script}: {}", error(run));
    }
}

/// A worker that makes more model calls at once than an agent does is stopped before
/// they all reach the provider: the coordinator's key is not spent on a flood.
#[tokio::test]
async fn a_worker_flooding_its_coordinator_with_model_calls_is_stopped() {
    let server = troupe_testkit::MockLlmServer::start().await.expect("the mock server starts");
    server.respond_with(|_| troupe_testkit::MockTurn::text("slow").with_latency(Duration::from_secs(3)));
    let provider: std::sync::Arc<dyn troupe_model::LlmProvider> = std::sync::Arc::new(
        troupe_model::HttpProvider::new(
            troupe_model::HttpConfig::new("anthropic", server.url(), Some(troupe_model::ApiKey::new("k"))),
            troupe_model::anthropic::AnthropicWire::default(),
        )
        .expect("a provider"),
    );
    let host = ModelHost::new(std::sync::Arc::new(troupe_runtime::FixedModel::new(provider, "m")), ["anthropic/m"]);
    let calls: Vec<Frame> = (1..=6)
        .map(|id| {
            let request = troupe_core::ModelRequest::new("m");
            Frame::ModelCall(Box::new(ModelCall { id, model: "anthropic/m".into(), request }))
        })
        .collect();
    let script = format!("{}; sleep 300", printf(&wire(calls)));
    let run = run(|pids| fake(pids, &script).host_models(host).max_attempts(1)).await;
    assert_failed(&run, 1);
    assert!(error(&run).contains("more than 4 model calls at once"), "{}", error(&run));
    assert!(server.requests().len() <= 4, "at most 4 reached the provider: {}", server.requests().len());
}

/// A model call still streaming when its worker is given up on (here: it stops
/// heartbeating) is stopped with the attempt, and what it had spent by then counts
/// against the team's budget: a worker cannot spend the team's key uncounted by dying.
#[tokio::test]
async fn a_hosted_call_cut_off_with_its_worker_still_counts_its_spend() {
    let server = troupe_testkit::MockLlmServer::start().await.expect("the mock server starts");
    let usage = troupe_core::Usage { input_tokens: 1_200, output_tokens: 3, ..Default::default() };
    // Anthropic reports the input's usage with its first event; the rest comes slowly.
    server.respond_with(move |_| {
        troupe_testkit::MockTurn::text("a long answer").with_usage(usage).with_event_delay(Duration::from_secs(30))
    });
    let provider: std::sync::Arc<dyn troupe_model::LlmProvider> = std::sync::Arc::new(
        troupe_model::HttpProvider::new(
            troupe_model::HttpConfig::new("anthropic", server.url(), Some(troupe_model::ApiKey::new("k"))),
            troupe_model::anthropic::AnthropicWire::default(),
        )
        .expect("a provider"),
    );
    let priced = troupe_runtime::FixedModel::new(provider, "m").with_pricing(troupe_model::Pricing::flat(1.0, 1.0));
    let budget = troupe_team::TeamBudget { max_total_tokens: Some(1_000_000), ..Default::default() };
    let meter = troupe_workers::team_meter::TeamMeter::new(budget, troupe_model::ModelRegistry::builtin());
    meter.arm(0, 0.0, CancellationToken::new());
    let host = ModelHost::new(std::sync::Arc::new(priced), ["anthropic/m"]).metered(std::sync::Arc::clone(&meter));
    let call = ModelCall { id: 1, model: "anthropic/m".into(), request: troupe_core::ModelRequest::new("m") };
    let script = format!("{}; sleep 300", printf(&wire(vec![Frame::ModelCall(Box::new(call))])));
    let run =
        run(|pids| fake(pids, &script).heartbeat(Duration::from_millis(500), 3).host_models(host).max_attempts(1))
            .await;
    assert_failed(&run, 1);
    assert_eq!(server.requests().len(), 1, "the call reached the provider");
    let (tokens, usd) = meter.spent();
    assert!(tokens >= 1_200, "the input the provider reported is counted: {tokens} tokens");
    assert!(usd > 0.0, "and priced: ${usd}");
}
