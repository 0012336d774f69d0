//! `turn_overhead`: the CPU troupe spends on one run of 4 model calls and 3 tool calls,
//! against a bare reqwest loop making the same 4 HTTP calls and doing nothing else.
//!
//! Both talk to [`MockLlmServer`] over loopback HTTP in Anthropic's wire format. The server
//! is scripted with a responder that picks the turn from the request (by counting its
//! `tool_result` blocks), so both loops get byte-identical responses: a short text and a
//! call of `lookup` (a typed, read-only no-op tool) on each of the first three turns, an
//! answer on the fourth.
//!
//! - troupe: an [`Agent`] on `HttpProvider<AnthropicWire>` in a [`FixedModel`], with the
//!   `lookup` tool: request building, SSE parsing, accumulation, live events, approval
//!   policy, argument validation, the tool call, the run's task and its output.
//! - bare: `reqwest` POSTs of the 4 request bodies troupe sent (captured from the server,
//!   serialized once up front) with the same headers, each response body read to its end.
//!
//! Both run on one current-thread Tokio runtime, sharing one `reqwest::Client` (whose pool
//! keeps a loopback connection alive across runs). CPU time is the process's
//! `utime + stime` from `/proc/self/stat` around alternating rounds of N runs of each
//! (ticks of 10 ms, so rounds are long); the main thread's schedstat, in nanoseconds, is
//! printed as a cross-check.
//!
//! The target is on the first figure, where the mock server runs **in this process**: its
//! CPU (axum, parsing each request into a `Value`, encoding the reply, growing its log of
//! every request) counts for both loops equally, which pulls the ratio towards 1. The
//! second figure runs the same server in a child process, so the ratio is of client CPU
//! alone; there each response chunk wakes the client from `epoll_wait` across processes,
//! which adds kernel time to both loops alike. Criterion reports wall time per run for
//! both loops (in-process server).
//!
//! A third figure is the store's cost: the same troupe run with a SQLite store
//! (`Engine::builder().store(..)`, a file under `target/tmp`, WAL and `synchronous = FULL`)
//! against the run without one, in alternating rounds of both (in-process server). A
//! recorded run creates its run, takes a lease, checkpoints its state with the evidence
//! of each boundary and releases the lease, each write a transaction that waits for an
//! fsync of the WAL: the wall time includes the disk's latency, and the process's CPU
//! includes SQLite's worker threads and the kernel's part of every write.
//!
//! `cargo bench -p troupe-runtime --bench turn_overhead`; to profile one loop alone, e.g.
//! `perf record --call-graph dwarf <bench binary> --bench troupe_run --profile-time 8`.

mod common;

use bytes::Bytes;
use common::{lookup_tool, tool_results};
use criterion::Criterion;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider};
use troupe_runtime::{Agent, Durability, Engine, FixedModel};
use troupe_store::{EvidenceKind, Store, verify_chain};
use troupe_testkit::process::{TICK_MICROS, process_cpu_ticks, thread_cpu_nanos};
use troupe_testkit::{ChildMockServer, MockLlmServer, MockTurn, RecordedRequest, serve_if_child};

/// Tool turns before the answer.
const TOOL_TURNS: usize = 3;
const QUESTION: &str = "What are the values of k0, k1 and k2? Look each one up.";
const ANSWER: &str = "All three keys have the same value: k0 = 42, k1 = 42 and k2 = 42. Nothing else was needed.";
const API_KEY: &str = "bench-key";

/// Turn `n` (the number of tool results so far): a call of `lookup` while `n < 3`, then the
/// answer. Deltas of 16 characters, roughly what a model streams at a time.
fn responder(request: &RecordedRequest) -> MockTurn {
    let n = tool_results(request);
    let turn = if n < TOOL_TURNS {
        MockTurn::text(format!("I will look up k{n} next.")).with_tool_call(
            format!("toolu_{n:02}"),
            "lookup",
            serde_json::json!({"key": format!("k{n}")}),
        )
    } else {
        MockTurn::text(ANSWER)
    };
    turn.with_delta_chars(16)
}

/// Both loops, against one server.
struct Setup {
    agent: Agent,
    /// The same agent, recording its runs in a store, once [`Setup::with_store`] made it.
    recorded: Option<Recorded>,
    engine: Engine,
    client: reqwest::Client,
    url: String,
    bodies: Vec<Bytes>,
}

/// The agent of a store-on engine, and its store.
struct Recorded {
    agent: Agent,
    store: Arc<dyn Store>,
    /// What one run writes: (evidence entries, status transitions).
    rows_per_run: (usize, usize),
    _dir: tempfile::TempDir,
}

/// The benchmark's agent on `engine`.
fn bench_agent(engine: &Engine) -> Agent {
    engine
        .agent("bench")
        .workspace(std::env::temp_dir())
        .tool(lookup_tool())
        .instructions("You answer questions about keys by looking each key up.")
        .max_iterations(8)
        .build()
        .expect("the benchmark agent builds")
}

async fn checked_run(agent: &Agent) -> troupe_runtime::RunOutput {
    let output = agent.run(QUESTION).await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    output
}

impl Setup {
    /// Checks one troupe run against `base_url`; `bodies` gives the request bodies of a run
    /// for the bare loop.
    fn new(runtime: &Runtime, base_url: &str, bodies: impl FnOnce() -> Vec<Bytes>) -> Self {
        let client = reqwest::Client::new();
        let config = HttpConfig::new("anthropic", base_url, Some(ApiKey::new(API_KEY)));
        let provider = HttpProvider::with_client(config, AnthropicWire::default(), client.clone());
        let engine = Engine::builder().resolver(Arc::new(FixedModel::new(Arc::new(provider), "claude-mock"))).build();
        let agent = bench_agent(&engine);
        let output = runtime.block_on(checked_run(&agent));
        assert_eq!(output.tool_calls, TOOL_TURNS as u32);
        assert_eq!(output.text, ANSWER);
        let bodies = bodies();
        assert_eq!(bodies.len(), TOOL_TURNS + 1, "one request per model call");
        let url = format!("{base_url}/v1/messages");
        let setup = Setup { agent, recorded: None, engine, client, url, bodies };
        let sizes: Vec<usize> = runtime.block_on(setup.bare_responses());
        let last = sizes.len() - 1;
        assert!(sizes[..last].iter().all(|&n| n == sizes[0]) && sizes[last] != sizes[0], "{sizes:?}");
        setup
    }

    /// Adds the same agent on an engine recording its runs in a SQLite store, and checks
    /// that a run of it is recorded whole.
    fn with_store(mut self, runtime: &Runtime) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("turn_overhead")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("a temporary directory under target/tmp");
        let path = dir.path().join("troupe.db");
        let store = runtime
            .block_on(troupe_store::open(path.to_str().expect("the temporary path is UTF-8")))
            .expect("the SQLite store opens");
        let engine = Engine::builder()
            .resolver(self.engine.resolver().clone())
            .store(Durability::new(Arc::clone(&store)))
            .build();
        let agent = bench_agent(&engine);
        let output = runtime.block_on(checked_run(&agent));
        assert_eq!((output.tool_calls, output.text.as_str()), (TOOL_TURNS as u32, ANSWER));
        let log = runtime.block_on(store.evidence(output.run_id.as_str(), 0)).expect("the evidence reads back");
        verify_chain(&log).expect("the run's evidence chain is whole");
        let turns = log.iter().filter(|e| e.kind == EvidenceKind::ModelTurn).count();
        assert_eq!(turns, TOOL_TURNS + 1, "one model_turn entry per model call");
        assert_eq!(log.last().map(|e| e.kind), Some(EvidenceKind::RunFinished));
        let transitions =
            runtime.block_on(store.transitions(output.run_id.as_str())).expect("the transitions read back").len();
        self.recorded = Some(Recorded { agent, store, rows_per_run: (log.len(), transitions), _dir: dir });
        self
    }

    async fn troupe_run(&self) -> u32 {
        checked_run(&self.agent).await.tool_calls
    }

    async fn recorded_run(&self) -> u32 {
        let recorded = self.recorded.as_ref().expect("Setup::with_store made the recorded agent");
        checked_run(&recorded.agent).await.tool_calls
    }

    /// The bytes of each response.
    async fn bare_responses(&self) -> Vec<usize> {
        let mut sizes = Vec::with_capacity(self.bodies.len());
        for body in &self.bodies {
            let mut response = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .header("anthropic-version", "2023-06-01")
                .header("x-api-key", API_KEY)
                .body(body.clone())
                .send()
                .await
                .expect("the mock server answers");
            assert!(response.status().is_success());
            let mut bytes = 0;
            while let Some(chunk) = response.chunk().await.expect("the body streams") {
                bytes += chunk.len();
            }
            sizes.push(bytes);
        }
        sizes
    }

    async fn bare_run(&self) -> usize {
        self.bare_responses().await.iter().sum()
    }
}

/// CPU and wall time of one loop over its rounds.
#[derive(Default)]
struct Tally {
    ticks: u64,
    thread_nanos: u64,
    wall: Duration,
    runs: u64,
}

impl Tally {
    fn measure(&mut self, runtime: &Runtime, runs: u64, f: &impl AsyncFn() -> u64) {
        let cpu_ticks = || process_cpu_ticks().expect("/proc/self/stat holds the CPU time");
        let (ticks, nanos, wall) = (cpu_ticks(), thread_cpu_nanos(), Instant::now());
        runtime.block_on(async {
            for _ in 0..runs {
                black_box(f().await);
            }
        });
        self.wall += wall.elapsed();
        self.ticks += cpu_ticks() - ticks;
        self.thread_nanos += thread_cpu_nanos().zip(nanos).map_or(0, |(after, before)| after - before);
        self.runs += runs;
    }

    fn cpu_micros(&self) -> f64 {
        self.ticks as f64 * TICK_MICROS / self.runs as f64
    }

    fn thread_micros(&self) -> f64 {
        self.thread_nanos as f64 / 1e3 / self.runs as f64
    }

    fn wall_micros(&self) -> f64 {
        self.wall.as_secs_f64() * 1e6 / self.runs as f64
    }
}

const ROUNDS: usize = 20;
/// CPU time each round aims at, per loop: 25 ticks.
const ROUND_TARGET: Duration = Duration::from_millis(250);
/// Wall time a round of the store-on loop aims at: its runs wait on fsyncs, so this buys
/// it about as many ticks of CPU as [`ROUND_TARGET`] does a loop that never waits.
const STORE_ROUND_TARGET: Duration = Duration::from_millis(500);

/// Alternating rounds of two loops (the order flips each round), so both see the same
/// machine state, as many runs of each per round as take `a` about `round_target`;
/// returns (a, b).
fn paired(
    runtime: &Runtime,
    round_target: Duration,
    a: impl AsyncFn() -> u64,
    b: impl AsyncFn() -> u64,
) -> (Tally, Tally) {
    let started = Instant::now();
    runtime.block_on(async {
        for _ in 0..20 {
            black_box(a().await);
        }
    });
    let per_run = started.elapsed() / 20;
    let runs = (round_target.as_secs_f64() / per_run.as_secs_f64()).ceil().max(10.0) as u64;
    let (mut a_tally, mut b_tally) = (Tally::default(), Tally::default());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            a_tally.measure(runtime, runs, &a);
            b_tally.measure(runtime, runs, &b);
        } else {
            b_tally.measure(runtime, runs, &b);
            a_tally.measure(runtime, runs, &a);
        }
    }
    (a_tally, b_tally)
}

/// troupe against the bare loop.
fn troupe_against_bare(runtime: &Runtime, setup: &Setup) -> (Tally, Tally) {
    paired(runtime, ROUND_TARGET, async || u64::from(setup.troupe_run().await), async || setup.bare_run().await as u64)
}

fn report(label: &str, troupe: &Tally, bare: &Tally) {
    let (x, y) = (troupe.cpu_micros(), bare.cpu_micros());
    println!(
        "turn_overhead{label}: troupe {x:.0} µs CPU/run, bare {y:.0} µs CPU/run, ratio {:.2} (target <= 1.5)",
        x / y
    );
    let (tx, ty) = (troupe.thread_micros(), bare.thread_micros());
    println!(
        "  main-thread schedstat: troupe {tx:.0} µs, bare {ty:.0} µs, ratio {:.2}; wall: troupe {:.0} µs/run, bare {:.0} µs/run; {} runs of each",
        tx / ty,
        troupe.wall_micros(),
        bare.wall_micros(),
        troupe.runs,
    );
}

fn main() {
    serve_if_child(responder);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.respond_with(responder);
    // The first run's requests, as the server received them, are the bare loop's bodies:
    // every run sends the same ones.
    let captured = || {
        let bodies: Vec<Bytes> = server
            .requests()
            .iter()
            .map(|r| Bytes::from(serde_json::to_vec(&r.body).expect("a Value serializes")))
            .collect();
        bodies
    };
    let setup = Setup::new(&runtime, &server.url(), captured).with_store(&runtime);

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = criterion.benchmark_group("turn_overhead");
    group.bench_function("troupe_run_4_calls_3_tools", |b| b.iter(|| runtime.block_on(setup.troupe_run())));
    group.bench_function("bare_reqwest_4_calls", |b| b.iter(|| runtime.block_on(setup.bare_run())));
    group.bench_function("troupe_run_4_calls_3_tools_sqlite_store", |b| {
        b.iter(|| runtime.block_on(setup.recorded_run()))
    });
    group.finish();
    criterion.final_summary();
    // The paired measurement runs under `cargo bench` (which passes `--bench`) only: not
    // under `cargo test --benches`, nor when listing or profiling.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--list" || a == "--profile-time") {
        return;
    }

    let (troupe, bare) = troupe_against_bare(&runtime, &setup);
    let (store_on, store_off) = paired(
        &runtime,
        STORE_ROUND_TARGET,
        async || u64::from(setup.recorded_run().await),
        async || u64::from(setup.troupe_run().await),
    );
    let recorded_runs = setup.recorded.as_ref().map(|r| (r.store.info().location, r.rows_per_run));
    let bodies = setup.bodies.clone();
    drop(setup);
    drop(server);
    let child = ChildMockServer::start().expect("the mock server child starts");
    let client_only = troupe_against_bare(&runtime, &Setup::new(&runtime, child.url(), || bodies));

    println!(
        "\nturn_overhead: one run = {} model calls + {TOOL_TURNS} tool calls, Anthropic wire over loopback HTTP, current-thread runtime",
        TOOL_TURNS + 1
    );
    report("", &troupe, &bare);
    println!("  (mock server in this process: its CPU counts for both loops)");
    report(" (client only, mock server in a child process)", &client_only.0, &client_only.1);
    report_store(&store_on, &store_off);
    if let Some((location, (entries, transitions))) = recorded_runs {
        println!(
            "  (a recorded run writes {entries} evidence entries and {transitions} status transitions; store at {location}, removed on exit)"
        );
    }
}

fn report_store(on: &Tally, off: &Tally) {
    println!(
        "turn_overhead with the SQLite store: on {:.0} µs/run (CPU) {:.0} µs/run (wall), off {:.0} µs/run (CPU) {:.0} µs/run (wall), ratio CPU {:.2}, wall {:.2}",
        on.cpu_micros(),
        on.wall_micros(),
        off.cpu_micros(),
        off.wall_micros(),
        on.cpu_micros() / off.cpu_micros(),
        on.wall_micros() / off.wall_micros(),
    );
    println!(
        "  main-thread schedstat: on {:.0} µs, off {:.0} µs, ratio {:.2}; {} runs of each (mock server in this process)",
        on.thread_micros(),
        off.thread_micros(),
        on.thread_micros() / off.thread_micros(),
        on.runs,
    );
}
