//! `worker_spawn`: how long the real worker takes from spawn to its first event, against
//! how long the same binary takes from spawn to its first byte of output.
//!
//! - worker: a [`ProcessMember`] runs a demo-model task in `troupe agent run --worker`
//!   (this package's release binary); timed from just before the spawn to the first event
//!   on the sink (the worker's sandbox report, sent once it has read its task and confined
//!   itself), and to the run's `run_started` (its agent built, providers and tools
//!   included). Then the task is cancelled and the worker's end awaited, untimed.
//! - baseline: `troupe --version`, from spawn to the first byte on its stdout: the cost of
//!   starting the binary at all (exec, loading, argument parsing).
//!
//! Criterion times spawn to first event; under `cargo bench` (which passes `--bench`)
//! alternating paired samples print p50 and p90 of all three and the worker's overhead
//! over the baseline.
//!
//! `cargo bench -p troupe-cli --bench worker_spawn`

use criterion::Criterion;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::runtime::{AgentSpec, ApprovalPolicy};
use troupe_core::AgentEventKind;
use troupe_workers::ipc::AgentTask;
use troupe_workers::process::{ProcessMember, WorkerConfig, WorkerTask};

const TROUPE: &str = env!("CARGO_BIN_EXE_troupe");
const SAMPLES: usize = 40;

/// Spawn to first event, and spawn to `run_started`, of one worker.
async fn worker_once(member: &ProcessMember, task: &AgentTask) -> (Duration, Duration) {
    let (tx, mut rx) = mpsc::channel(1024);
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let running = {
        let (member, task, cancel) = (member.clone(), task.clone(), cancel.clone());
        tokio::spawn(async move { member.run_task(WorkerTask::new(task), Some(tx), cancel).await })
    };
    let mut first = None;
    let mut run_started = None;
    while let Some(event) = rx.recv().await {
        first.get_or_insert_with(|| started.elapsed());
        if matches!(event.kind, AgentEventKind::RunStarted { .. }) {
            run_started = Some(started.elapsed());
            cancel.cancel();
            break;
        }
    }
    drop(rx);
    let outcome = running.await.expect("the coordinator does not panic");
    let (Some(first), Some(run_started)) = (first, run_started) else {
        panic!("the worker sent no run_started: {:?} {:?}", outcome.member, outcome.attempts)
    };
    (first, run_started)
}

/// Spawn to the first byte of `troupe --version`.
async fn baseline_once() -> Duration {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(TROUPE)
        .arg("--version")
        .env_clear()
        .stdout(Stdio::piped())
        .spawn()
        .expect("troupe starts");
    let mut byte = [0u8; 1];
    child.stdout.as_mut().expect("piped").read_exact(&mut byte).await.expect("it prints");
    let elapsed = started.elapsed();
    child.wait().await.expect("it ends");
    elapsed
}

fn percentile(values: &[Duration], p: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn paired(runtime: &Runtime, member: &ProcessMember, task: &AgentTask) {
    let (mut firsts, mut starts, mut baselines) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        let (worker, baseline) = if i % 2 == 0 {
            let w = runtime.block_on(worker_once(member, task));
            (w, runtime.block_on(baseline_once()))
        } else {
            let b = runtime.block_on(baseline_once());
            (runtime.block_on(worker_once(member, task)), b)
        };
        firsts.push(worker.0);
        starts.push(worker.1);
        baselines.push(baseline);
    }
    let line = |name: &str, values: &[Duration]| {
        println!("{name}: p50 {}, p90 {}", ms(percentile(values, 0.5)), ms(percentile(values, 0.9)))
    };
    println!("worker_spawn: {SAMPLES} paired samples of each");
    line("  spawn -> first event (sandbox report)", &firsts);
    line("  spawn -> run_started (agent built)   ", &starts);
    line("  baseline: spawn -> first byte of `troupe --version`", &baselines);
    let overhead = percentile(&firsts, 0.5).saturating_sub(percentile(&baselines, 0.5));
    println!("  the worker's p50 overhead over starting the binary: {}", ms(overhead));
}

fn setup(dir: &Path) -> (ProcessMember, AgentTask) {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).expect("creates the workspace");
    std::fs::write(workspace.join("README.md"), "# Bench\n").expect("writes");
    let config = WorkerConfig::troupe(TROUPE, &workspace).working_dir(dir).max_attempts(1);
    let member = ProcessMember::new("bench", "the demo agent", config);
    let spec = AgentSpec { approval: ApprovalPolicy::auto(), ..AgentSpec::new("bench", "demo") };
    let task = AgentTask::new("bench", "bench", "bench", "Summarise").with_spec(&spec).expect("serializes");
    (member, task)
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let (member, task) = setup(dir.path());
    // Checked once before any timing.
    runtime.block_on(worker_once(&member, &task));

    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let mut group = criterion.benchmark_group("worker_spawn");
    group.bench_function("spawn_to_first_event", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| runtime.block_on(worker_once(&member, &task)).0).sum())
    });
    group.bench_function("baseline_spawn_to_first_byte", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| runtime.block_on(baseline_once())).sum())
    });
    group.finish();
    criterion.final_summary();
    // The paired samples run under `cargo bench` (which passes `--bench`) only: not under
    // `cargo test --benches`, nor when listing or profiling.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--list" || a == "--profile-time") {
        return;
    }
    paired(&runtime, &member, &task);
}
