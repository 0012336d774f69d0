//! `sse_load`: 1,000 runs at once over troupe's HTTP server — 1,000 clients, each POSTing
//! `/v1/runs` and reading the run's events as Server-Sent Events up to `run_finished` —
//! against the same 1,000 runs started in-process, side by side in one run.
//!
//! - **over_sse**: a [`Server`] over an [`AgentLauncher`] (default [`ServerConfig`]: no
//!   token, loopback) serving on `127.0.0.1` in this process, on the multi-thread runtime,
//!   on a listener with a backlog of [`LISTEN_BACKLOG`] (see below). The clients run in this process too, on the same runtime: one `reqwest::Client`
//!   without a connection pool, so each run opens its own connection, as 1,000 separate
//!   clients would. A client's run fails on a status other than 200, a broken stream, a
//!   stream ending without `run_finished`, or an outcome other than `completed`.
//! - **in_process**: `agent.start(..)` on the same agent, reading the run's live events up
//!   to `run_finished`, then its output. A run fails on an error or an outcome other than
//!   completed.
//!
//! The agent is built as a user builds one — `Engine::builder().providers(..)`, the built-in
//! `anthropic` provider with `ANTHROPIC_BASE_URL` at the mock, `anthropic/claude-sonnet-4-5`.
//! Its model is [`MockLlmServer`](troupe_testkit::MockLlmServer) (Anthropic wire)
//! in a child process (this binary, re-executed), answering every request with a short
//! text turn: one model call per run, no tools. Its CPU and memory are not this
//! process's, but it shares the machine's cores. The agent's model client keeps one
//! loopback connection per in-flight model call; that pool is filled before anything is
//! measured, so neither side pays for connecting to the mock.
//!
//! A run's latency is from its client task's start to `run_finished` as that client sees
//! it. A batch is 1,000 tasks spawned at once and awaited; throughput is 1,000 over the
//! batch's wall time.
//!
//! What is printed:
//! - criterion's group `sse_load`: `in_process` and `over_sse`, one iteration = one batch
//!   (`iter_custom`, flat sampling, 10 samples), then the ratio of their mean batch times
//!   and the latency percentiles over all of criterion's batches. The target time is
//!   about ten of the measured pass's batches, so that a sample is one batch: criterion's
//!   "Unable to complete 10 samples" warning is expected.
//! - a separate measured pass of each (warm, after a few small batches; run before
//!   criterion's, printed after them), in a table: throughput, latency p50/p99/max and the added latency (over_sse minus
//!   in_process), CPU time of this process per run, and peak RSS (`VmHWM` reset before
//!   each pass, cross-checked by a 2 ms `VmRSS` sampler). The in_process pass goes first,
//!   so the heap the over_sse pass starts from has already held 1,000 runs: its peak
//!   over its starting RSS is what the server and its clients add.
//! - the system's TCP counters (`/proc/net/netstat`) around each pass: listen-queue
//!   overflows and SYN retransmits. They count the whole network namespace, so other
//!   programs' connections show too.
//! - failed runs, in every pass: any failure ends the benchmark with exit code 1.
//!
//! The listen backlog: `tokio::net::TcpListener::bind` listens with a backlog of 128 (as
//! the standard library does). 1,000 clients connecting at once overflow it while the
//! runtime is busy, the kernel drops their SYNs, and they retry after the 1 s initial
//! retransmission timeout: latencies then measure that timeout, not the server. The
//! over_sse server listens with a backlog of [`LISTEN_BACKLOG`] (capped by
//! `net.core.somaxconn`); the measured pass is repeated once on a second server bound by
//! `TcpListener::bind`, and printed apart, to show what the backlog costs.
//!
//! Each in-flight run over SSE holds three sockets here (the client's, the server's end
//! of it, the model call's): `ulimit -n` is checked for that up front.
//!
//! `cargo bench -p troupe-server --bench sse_load` (about a minute on two cores; the
//! figures are of the whole machine's load, so read them beside the load average it
//! prints). Outside `cargo bench` (e.g. `cargo test --benches`) a batch is 20 runs and
//! criterion runs each benchmark once: that only checks that it works.

mod common;

/// The allocator of the `troupe` binary, whose `troupe serve` this measures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use common::SseReader;
use criterion::{Criterion, SamplingMode, Throughput};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEventKind, RunOutcomeKind};
use troupe_model::Providers;
use troupe_runtime::{Agent, Engine};
use troupe_server::{AgentLauncher, Server, ServerConfig, ServerError};
use troupe_testkit::process::{RssSampler, open_files_limit, process_cpu_ticks, reset_peak_rss, status_bytes};
use troupe_testkit::{ChildMockServer, MockTurn, RecordedRequest, serve_if_child};

const RUNS: usize = 1_000;
const TEST_RUNS: usize = 20;
const AGENT: &str = "bench";
const INSTRUCTION: &str = "Say that you are done.";
const ANSWER: &str = "Done: nothing else was needed.";
/// Sockets per in-flight run over SSE: the client's, the server's end of it, the model
/// call's.
const SOCKETS_PER_RUN: u64 = 3;
/// The runtime's, the process's own, criterion's files.
const SPARE_FILES: u64 = 256;
/// The over_sse server's listen backlog: room for every client of a batch connecting at
/// once.
use troupe_server::LISTEN_BACKLOG;
/// A run that takes longer than this has failed.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A short text turn, whatever the request.
fn responder(_request: &RecordedRequest) -> MockTurn {
    MockTurn::text(ANSWER).with_delta_chars(16)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    InProcess,
    OverSse,
    /// Over SSE, to the server on a listener from `TcpListener::bind`.
    OverSseBacklog128,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::InProcess => "in_process",
            Mode::OverSse => "over_sse",
            Mode::OverSseBacklog128 => "over_sse_backlog_128",
        }
    }
}

/// A successful run: its latency to `run_finished`, and how many events it had by then.
type RunFigures = (Duration, usize);

/// One run over SSE, from its request to `run_finished` (and the stream's end after it).
async fn over_sse(client: reqwest::Client, runs_url: Arc<str>) -> Result<RunFigures, String> {
    let started = Instant::now();
    let response = client
        .post(&*runs_url)
        .json(&serde_json::json!({"agent": AGENT, "instruction": INSTRUCTION}))
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    if response.status() != reqwest::StatusCode::OK {
        return Err(format!("status {}", response.status()));
    }
    let mut reader = SseReader::new(response);
    let mut events = 0;
    while let Some(frame) = reader.next().await? {
        events += 1;
        if frame.event != "run_finished" {
            continue;
        }
        let latency = started.elapsed();
        let data: serde_json::Value =
            serde_json::from_str(&frame.data).map_err(|e| format!("run_finished is not JSON: {e}"))?;
        if data["outcome"] != "completed" {
            return Err(format!("outcome {} (id {:?})", data["outcome"], frame.id));
        }
        // The rest of the stream: nothing, then its end.
        if let Some(extra) = reader.next().await? {
            return Err(format!("an event after run_finished: {}", extra.event));
        }
        return Ok((latency, events));
    }
    Err(format!("the stream ended after {events} events without run_finished"))
}

/// One run in-process, from `start` to `run_finished` on its live events, then its output.
async fn in_process(agent: Agent) -> Result<RunFigures, String> {
    let started = Instant::now();
    let mut handle = agent.start(INSTRUCTION);
    let mut events = 0;
    let mut finished = None;
    while let Some(event) = handle.events.next_event().await {
        events += 1;
        if let AgentEventKind::RunFinished { outcome, .. } = event.kind {
            finished = Some((started.elapsed(), events, outcome));
        }
    }
    let output = handle.result.await.map_err(|e| format!("error: {e}"))?;
    match finished {
        _ if !output.is_completed() => Err(format!("outcome {:?}", output.outcome)),
        Some((latency, events, RunOutcomeKind::Completed)) => Ok((latency, events)),
        Some((_, _, outcome)) => Err(format!("run_finished says {outcome:?}")),
        None => Err(format!("no run_finished among {events} events")),
    }
}

/// A batch: its wall time, the successful runs' figures, the failed runs' reasons.
#[derive(Default)]
struct Batch {
    wall: Duration,
    runs: Vec<RunFigures>,
    failures: Vec<String>,
}

struct Bench {
    runtime: Runtime,
    agent: Agent,
    /// The model client, shared with the agent's provider: its pool is the agent's.
    client: reqwest::Client,
    runs_url: Arc<str>,
    /// `/v1/runs` of the same server on a listener from `TcpListener::bind`.
    backlog_128_runs_url: Arc<str>,
    shutdown: CancellationToken,
    serving: Vec<tokio::task::JoinHandle<Result<(), ServerError>>>,
}

impl Bench {
    fn start(mock_url: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a Tokio runtime");
        // The built-in `anthropic` provider, pointed at the mock as a user's environment would.
        let env = std::collections::HashMap::from([
            ("ANTHROPIC_API_KEY".to_owned(), "bench-key".to_owned()),
            ("ANTHROPIC_BASE_URL".to_owned(), mock_url.to_owned()),
        ]);
        let engine = Engine::builder().providers(Providers::with_env(env)).build();
        let agent = engine
            .agent(AGENT)
            .model("anthropic/claude-sonnet-4-5")
            .workspace(std::env::temp_dir())
            .instructions("Answer in one sentence.")
            .max_iterations(2)
            .build()
            .expect("the benchmark agent builds");
        let (listener, backlog_128) = runtime
            .block_on(async {
                let listener = troupe_server::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
                let backlog_128 = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                std::io::Result::Ok((listener, backlog_128))
            })
            .expect("loopback ports for the servers");
        let runs_url = |l: &tokio::net::TcpListener| -> Arc<str> {
            format!("http://{}/v1/runs", l.local_addr().expect("a listener's address")).into()
        };
        let (url, backlog_128_url) = (runs_url(&listener), runs_url(&backlog_128));
        let shutdown = CancellationToken::new();
        let serving = [listener, backlog_128]
            .into_iter()
            .map(|listener| {
                let launcher = AgentLauncher::new().agent(agent.clone(), "Answers");
                let server = Server::new(ServerConfig::default(), Arc::new(launcher));
                runtime.spawn(server.serve(listener, shutdown.clone()))
            })
            .collect();
        // No idle connections kept: every run connects anew, as separate clients do.
        let client =
            reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("a client without a pool builds");
        Bench { runtime, agent, client, runs_url: url, backlog_128_runs_url: backlog_128_url, shutdown, serving }
    }

    /// Opens `connections` keep-alive connections to the mock in the agent's model client
    /// pool, by as many runs at once, so that no measured run pays for connecting.
    fn fill_model_pool(&self, connections: usize) {
        let failed = self.runtime.block_on(async {
            let runs = (0..connections).map(|_| {
                let agent = self.agent.clone();
                tokio::spawn(async move { agent.run("warm").await })
            });
            let results = futures::future::join_all(runs.collect::<Vec<_>>()).await;
            results.into_iter().filter(|r| !matches!(r, Ok(Ok(output)) if output.is_completed())).count()
        });
        assert_eq!(failed, 0, "{failed} of {connections} runs filling the model client's pool failed");
    }

    /// `runs` runs of `mode` started at once, awaited.
    fn batch(&self, mode: Mode, runs: usize) -> Batch {
        self.runtime.block_on(async {
            let started = Instant::now();
            let tasks: Vec<_> = (0..runs)
                .map(|_| {
                    let run = match mode {
                        Mode::InProcess => futures::future::Either::Left(in_process(self.agent.clone())),
                        Mode::OverSse => {
                            futures::future::Either::Right(over_sse(self.client.clone(), Arc::clone(&self.runs_url)))
                        }
                        Mode::OverSseBacklog128 => futures::future::Either::Right(over_sse(
                            self.client.clone(),
                            Arc::clone(&self.backlog_128_runs_url),
                        )),
                    };
                    tokio::spawn(tokio::time::timeout(RUN_TIMEOUT, run))
                })
                .collect();
            let mut batch = Batch::default();
            for task in tasks {
                match task.await {
                    Ok(Ok(Ok(figures))) => batch.runs.push(figures),
                    Ok(Ok(Err(reason))) => batch.failures.push(reason),
                    Ok(Err(_)) => batch.failures.push(format!("no run_finished within {RUN_TIMEOUT:?}")),
                    Err(error) => batch.failures.push(format!("the client task failed: {error}")),
                }
            }
            batch.wall = started.elapsed();
            batch
        })
    }

    /// A batch measured for memory and CPU too.
    fn measured(&self, mode: Mode, runs: usize) -> Measured {
        let rss_before = status_bytes("VmRSS").unwrap_or(0);
        let reset = reset_peak_rss();
        let sampler = RssSampler::start(Duration::from_millis(2));
        let (ticks, tcp) = (process_cpu_ticks(), tcp_counters());
        let batch = self.batch(mode, runs);
        let cpu_ticks = process_cpu_ticks().zip(ticks).map(|(after, before)| after - before);
        let tcp = tcp_counters().zip(tcp).map(|(after, before)| after.since(&before));
        let sampled = sampler.finish();
        let hwm = if reset { status_bytes("VmHWM") } else { None };
        Measured { batch, rss_before, hwm, sampled, cpu_ticks, tcp }
    }

    fn stop(self) {
        self.shutdown.cancel();
        for serving in self.serving {
            let stopped = self.runtime.block_on(async { tokio::time::timeout(Duration::from_secs(10), serving).await });
            match stopped {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(error))) => eprintln!("sse_load: the server stopped with an error: {error}"),
                Ok(Err(error)) => eprintln!("sse_load: the server task failed: {error}"),
                Err(_) => eprintln!("sse_load: the server did not stop within 10 s"),
            }
        }
    }
}

struct Measured {
    batch: Batch,
    rss_before: u64,
    hwm: Option<u64>,
    sampled: u64,
    cpu_ticks: Option<u64>,
    tcp: Option<TcpCounters>,
}

/// The network namespace's TCP counters that tell of a full listen queue.
#[derive(Clone, Copy)]
struct TcpCounters {
    /// `TcpExt: ListenOverflows`: handshakes dropped because an accept queue was full.
    listen_overflows: u64,
    /// `TcpExt: TCPSynRetrans`: SYNs sent again, after a timeout of 1 s the first time.
    syn_retransmits: u64,
}

impl TcpCounters {
    fn since(&self, before: &TcpCounters) -> TcpCounters {
        TcpCounters {
            listen_overflows: self.listen_overflows.saturating_sub(before.listen_overflows),
            syn_retransmits: self.syn_retransmits.saturating_sub(before.syn_retransmits),
        }
    }
}

/// From `/proc/net/netstat`, where each group is a line of names and a line of values.
fn tcp_counters() -> Option<TcpCounters> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let values: Vec<&str> = values.split_whitespace().collect();
        let value =
            |name: &str| names.split_whitespace().position(|n| n == name).and_then(|i| values.get(i)?.parse().ok());
        return Some(TcpCounters {
            listen_overflows: value("ListenOverflows")?,
            syn_retransmits: value("TCPSynRetrans")?,
        });
    }
    None
}

impl Measured {
    fn peak(&self) -> u64 {
        self.hwm.unwrap_or(0).max(self.sampled)
    }
}

/// Latency percentiles of successful runs.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn of<'a>(batches: impl IntoIterator<Item = &'a Batch>) -> Self {
        let mut all: Vec<Duration> = batches.into_iter().flat_map(|b| b.runs.iter().map(|(l, _)| *l)).collect();
        all.sort_unstable();
        Latencies(all)
    }

    /// The nearest-rank `p`th percentile, in milliseconds (0 with no runs).
    fn ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1].as_secs_f64() * 1e3
    }
}

/// What criterion's batches of one mode added up to.
#[derive(Default)]
struct Tally {
    batches: Vec<Batch>,
}

impl Tally {
    fn mean_wall(&self) -> Duration {
        let total: Duration = self.batches.iter().map(|b| b.wall).sum();
        total / u32::try_from(self.batches.len().max(1)).unwrap_or(u32::MAX)
    }

    fn failures(&self) -> impl Iterator<Item = &String> {
        self.batches.iter().flat_map(|b| b.failures.iter())
    }

    fn add(&mut self, batch: Batch) {
        self.batches.push(batch);
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn row(label: &str, in_process: String, over_sse: String, added: String, ratio: String) {
    println!("  {label:<30} {in_process:>12} {over_sse:>12} {added:>14} {ratio:>10}");
}

fn report(runs: usize, inp: &Measured, sse: &Measured) {
    let (li, ls) = (Latencies::of([&inp.batch]), Latencies::of([&sse.batch]));
    let rate = |m: &Measured| m.batch.runs.len() as f64 / m.batch.wall.as_secs_f64();
    let cpu = |m: &Measured| m.cpu_ticks.map(|t| t as f64 * troupe_testkit::process::TICK_MICROS / runs.max(1) as f64);
    let events = |m: &Measured| m.batch.runs.first().map_or(0, |(_, e)| *e);
    let f1 = |v: f64| format!("{v:.1}");
    println!("\nsse_load, measured pass: {runs} runs started at once per side");
    row("", "in_process".into(), "over_sse".into(), "added".into(), "ratio".into());
    row(
        "throughput (runs/s)",
        format!("{:.0}", rate(inp)),
        format!("{:.0}", rate(sse)),
        String::new(),
        format!("{:.2}", rate(sse) / rate(inp)),
    );
    row(
        "batch wall time (ms)",
        f1(inp.batch.wall.as_secs_f64() * 1e3),
        f1(sse.batch.wall.as_secs_f64() * 1e3),
        f1((sse.batch.wall.as_secs_f64() - inp.batch.wall.as_secs_f64()) * 1e3),
        format!("{:.2}", sse.batch.wall.as_secs_f64() / inp.batch.wall.as_secs_f64()),
    );
    for (label, p) in [("latency p50 (ms)", 50.0), ("latency p99 (ms)", 99.0), ("latency max (ms)", 100.0)] {
        row(label, f1(li.ms(p)), f1(ls.ms(p)), f1(ls.ms(p) - li.ms(p)), format!("{:.2}", ls.ms(p) / li.ms(p)));
    }
    match (cpu(inp), cpu(sse)) {
        (Some(i), Some(s)) => row("CPU of this process (µs/run)", f1(i), f1(s), f1(s - i), format!("{:.2}", s / i)),
        _ => row("CPU of this process (µs/run)", "unknown".into(), "unknown".into(), String::new(), String::new()),
    }
    row("events per run", events(inp).to_string(), events(sse).to_string(), String::new(), String::new());
    row("RSS before pass (MiB)", f1(mib(inp.rss_before)), f1(mib(sse.rss_before)), String::new(), String::new());
    row(
        "peak RSS during pass (MiB)",
        f1(mib(inp.peak())),
        f1(mib(sse.peak())),
        f1(mib(sse.peak()) - mib(inp.peak())),
        format!("{:.2}", sse.peak() as f64 / inp.peak().max(1) as f64),
    );
    row(
        "peak over RSS before (MiB)",
        f1(mib(inp.peak().saturating_sub(inp.rss_before))),
        f1(mib(sse.peak().saturating_sub(sse.rss_before))),
        String::new(),
        String::new(),
    );
    let hwm = |m: &Measured| m.hwm.map_or("not reset".to_owned(), |h| f1(mib(h)));
    row("  of which VmHWM (MiB)", hwm(inp), hwm(sse), String::new(), String::new());
    row("  sampled VmRSS max (MiB)", f1(mib(inp.sampled)), f1(mib(sse.sampled)), String::new(), String::new());
    let tcp =
        |m: &Measured, f: fn(&TcpCounters) -> u64| m.tcp.as_ref().map_or("unknown".to_owned(), |t| f(t).to_string());
    row(
        "listen overflows (system)",
        tcp(inp, |t| t.listen_overflows),
        tcp(sse, |t| t.listen_overflows),
        String::new(),
        String::new(),
    );
    row(
        "SYN retransmits (system)",
        tcp(inp, |t| t.syn_retransmits),
        tcp(sse, |t| t.syn_retransmits),
        String::new(),
        String::new(),
    );
    row(
        "failed runs",
        inp.batch.failures.len().to_string(),
        sse.batch.failures.len().to_string(),
        String::new(),
        String::new(),
    );
}

fn report_backlog_128(runs: usize, sse: &Measured, b128: &Measured) {
    let (ls, lb) = (Latencies::of([&sse.batch]), Latencies::of([&b128.batch]));
    let rate = |m: &Measured| m.batch.runs.len() as f64 / m.batch.wall.as_secs_f64();
    let tcp = |m: &Measured| {
        m.tcp.map_or("unknown".to_owned(), |t| {
            format!("{} listen overflows, {} SYN retransmits", t.listen_overflows, t.syn_retransmits)
        })
    };
    println!(
        "\nsse_load, the over_sse pass again on a listener from TcpListener::bind (listen backlog 128), {runs} runs: \
         {:.0} runs/s (backlog {LISTEN_BACKLOG}: {:.0}), latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
         (backlog {LISTEN_BACKLOG}: {:.1}, {:.1}, {:.1}); {} (backlog {LISTEN_BACKLOG}: {}); failed runs {}",
        rate(b128),
        rate(sse),
        lb.ms(50.0),
        lb.ms(99.0),
        lb.ms(100.0),
        ls.ms(50.0),
        ls.ms(99.0),
        ls.ms(100.0),
        tcp(b128),
        tcp(sse),
        b128.batch.failures.len(),
    );
}

fn report_criterion(inp: &Tally, sse: &Tally, runs: usize) {
    if inp.batches.is_empty() || sse.batches.is_empty() {
        return;
    }
    let (li, ls) = (Latencies::of(&inp.batches), Latencies::of(&sse.batches));
    let (wi, ws) = (inp.mean_wall().as_secs_f64(), sse.mean_wall().as_secs_f64());
    let f1 = |v: f64| format!("{v:.1}");
    println!(
        "\nsse_load, criterion's batches ({} in_process, {} over_sse, warm-up included; {runs} runs each)",
        inp.batches.len(),
        sse.batches.len()
    );
    row("", "in_process".into(), "over_sse".into(), "added".into(), "ratio".into());
    row("mean batch (ms)", f1(wi * 1e3), f1(ws * 1e3), f1((ws - wi) * 1e3), format!("{:.2}", ws / wi));
    row(
        "throughput (runs/s)",
        format!("{:.0}", runs as f64 / wi),
        format!("{:.0}", runs as f64 / ws),
        String::new(),
        format!("{:.2}", wi / ws),
    );
    for (label, p) in [("latency p50 (ms)", 50.0), ("latency p99 (ms)", 99.0)] {
        row(label, f1(li.ms(p)), f1(ls.ms(p)), f1(ls.ms(p) - li.ms(p)), format!("{:.2}", ls.ms(p) / li.ms(p)));
    }
    row(
        "failed runs",
        inp.failures().count().to_string(),
        sse.failures().count().to_string(),
        String::new(),
        String::new(),
    );
}

fn main() {
    serve_if_child(responder);
    let args: Vec<String> = std::env::args().collect();
    let listing = args.iter().any(|a| a == "--list");
    // `cargo bench` passes `--bench`; anything else (`cargo test --benches`) only checks.
    let runs = if args.iter().any(|a| a == "--bench") { RUNS } else { TEST_RUNS };
    let limit = open_files_limit();
    if let Some(limit) = limit {
        let needed = runs as u64 * SOCKETS_PER_RUN + SPARE_FILES;
        if limit < needed {
            eprintln!(
                "sse_load: ulimit -n is {limit}, too low for {runs} runs at once over SSE ({SOCKETS_PER_RUN} sockets \
                 each, plus {SPARE_FILES}): raise it to at least {needed}, e.g. `ulimit -n {needed}`"
            );
            std::process::exit(1);
        }
    }

    let load_before = load_average();
    let mock = ChildMockServer::start().expect("the mock server child starts");
    let bench = Bench::start(mock.url());
    let workers = bench.runtime.metrics().num_workers();
    bench.fill_model_pool(runs);

    let mut failures: Vec<String> = Vec::new();
    let mut measured = None;
    if !listing {
        // Warm: the server's first connections and runs, the allocator's first arenas.
        for mode in [Mode::InProcess, Mode::OverSse, Mode::OverSseBacklog128] {
            for _ in 0..2 {
                failures.extend(bench.batch(mode, TEST_RUNS).failures);
            }
        }
        let inp = bench.measured(Mode::InProcess, runs);
        let sse = bench.measured(Mode::OverSse, runs);
        let b128 = bench.measured(Mode::OverSseBacklog128, runs);
        for pass in [&inp, &sse, &b128] {
            failures.extend(pass.batch.failures.iter().cloned());
        }
        measured = Some((inp, sse, b128));
    }

    let mut tallies = [Tally::default(), Tally::default()];
    {
        let mut criterion =
            Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).configure_from_args();
        let mut group = criterion.benchmark_group("sse_load");
        group.sampling_mode(SamplingMode::Flat).throughput(Throughput::Elements(runs as u64));
        for (mode, tally) in [Mode::InProcess, Mode::OverSse].into_iter().zip(tallies.iter_mut()) {
            // One batch per sample: ten samples take about ten of the measured pass's batches.
            let wall = measured.as_ref().map_or(Duration::from_secs(1), |(inp, sse, _)| match mode {
                Mode::InProcess => inp.batch.wall,
                Mode::OverSse | Mode::OverSseBacklog128 => sse.batch.wall,
            });
            group.measurement_time((wall * 9).max(Duration::from_millis(500)));
            group.bench_function(mode.name(), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let batch = bench.batch(mode, runs);
                        total += batch.wall;
                        tally.add(batch);
                    }
                    total
                })
            });
        }
        group.finish();
        criterion.final_summary();
    }
    failures.extend(tallies.iter().flat_map(Tally::failures).cloned());

    println!(
        "\nsse_load: one model call per run (a {}-character text turn; mock LLM server, Anthropic wire, in a child \
         process), multi-thread runtime ({workers} workers) on {} CPUs, server and clients in this process; \
         ulimit -n {}; load average {load_before} before, {} after",
        ANSWER.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        limit.map_or("unknown".to_owned(), |l| l.to_string()),
        load_average(),
    );
    if let Some((inp, sse, b128)) = &measured {
        report(runs, inp, sse);
        report_backlog_128(runs, sse, b128);
    }
    report_criterion(&tallies[0], &tallies[1], runs);

    bench.stop();
    drop(mock);
    if !failures.is_empty() {
        eprintln!("\nsse_load: FAILED: {} runs failed; the first ones:", failures.len());
        for reason in failures.iter().take(10) {
            eprintln!("  {reason}");
        }
        std::process::exit(1);
    }
    println!("\nsse_load: no run failed");
}
