//! `concurrent_runs`: 10,000 runs in one process on the multi-thread runtime, at most
//! 1,000 in flight at once, against [`MockLlmServer`](troupe_testkit::MockLlmServer) over
//! loopback HTTP in Anthropic's wire format.
//!
//! Each run is two model calls: a call of `lookup` (a typed read-only no-op tool), then an
//! answer; payloads are small. All runs share one agent built as a user builds one
//! (`Engine::builder().providers(..)`, the built-in `anthropic` provider at the mock), hence
//! one `reqwest::Client`, whose pool keeps up to one loopback connection per in-flight request alive; 1,000 in
//! flight needs ~1,000 sockets, checked against `ulimit -n`.
//!
//! The mock server runs in a child process (this binary, re-executed), so neither its CPU
//! nor its memory (its connections, its log of every request) is counted here; it does
//! share the machine's cores, so runs/s is of the pair.
//!
//! Memory: after a warm-up (a few runs at low concurrency, so the heap has not yet held
//! 1,000 runs), `VmRSS` is the baseline and `VmHWM` is reset to it; the peak is `VmHWM`
//! after the pass (and a sampler's highest `VmRSS`, should the reset be refused). The
//! peak's rise over the baseline, divided by the in-flight count, less the conversation
//! of one run (its messages, serialized), is the memory per in-flight run beyond the
//! conversation. Targets: at most 64 KiB of it, and no run failing.
//!
//! A single measured pass, no criterion timing loop: `cargo bench -p troupe-runtime --bench
//! concurrent_runs`.

mod common;

use common::{lookup_tool, tool_results};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use troupe_model::Providers;
use troupe_runtime::{Agent, Engine, RunOutput, RuntimeError};
use troupe_testkit::process::{RssSampler, open_files_limit, reset_peak_rss, status_bytes};
use troupe_testkit::{ChildMockServer, MockTurn, RecordedRequest, serve_if_child};

const RUNS: usize = 10_000;
const IN_FLIGHT: usize = 1_000;
const ANSWER: &str = "k0 = 42.";
const TARGET_KIB: f64 = 64.0;

/// A call of `lookup` first, then the answer.
fn responder(request: &RecordedRequest) -> MockTurn {
    if tool_results(request) == 0 {
        MockTurn::tool_call("toolu_01", "lookup", serde_json::json!({"key": "k0"})).with_delta_chars(16)
    } else {
        MockTurn::text(ANSWER).with_delta_chars(16)
    }
}

fn agent(base_url: &str) -> Agent {
    // The built-in `anthropic` provider, pointed at the mock as a user's environment would.
    let env = HashMap::from([
        ("ANTHROPIC_API_KEY".to_owned(), "bench-key".to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), base_url.to_owned()),
    ]);
    let engine = Engine::builder().providers(Providers::with_env(env)).build();
    engine
        .agent("bench")
        .model("anthropic/claude-sonnet-4-5")
        .workspace(std::env::temp_dir())
        .tool(lookup_tool())
        .instructions("Look the key up, then answer.")
        .max_iterations(4)
        .build()
        .expect("the benchmark agent builds")
}

/// Why a run does not count as a success, if it does not.
fn failure(result: &Result<RunOutput, RuntimeError>) -> Option<String> {
    match result {
        Err(error) => Some(format!("error: {error}")),
        Ok(output) if !output.is_completed() => Some(format!("outcome: {:?}", output.outcome)),
        Ok(output) if output.tool_calls != 1 || output.text != ANSWER => {
            Some(format!("{} tool calls, answer {:?}", output.tool_calls, output.text))
        }
        Ok(_) => None,
    }
}

#[derive(Default)]
struct Pass {
    runs: usize,
    failed: usize,
    reasons: Vec<String>,
    peak_in_flight: usize,
    elapsed: Duration,
}

/// `runs` runs, at most `in_flight` at once; `first` gets the first successful output.
fn pass(
    runtime: &tokio::runtime::Runtime,
    agent: &Agent,
    runs: usize,
    in_flight: usize,
    first: &mut Option<RunOutput>,
) -> Pass {
    let live = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let started = Instant::now();
    let mut tally = Pass { runs, ..Pass::default() };
    runtime.block_on(async {
        let mut results = futures::stream::iter(0..runs)
            .map(|_| async {
                let now = live.fetch_add(1, Ordering::Relaxed) + 1;
                peak.fetch_max(now, Ordering::Relaxed);
                let result = agent.run("What is k0?").await;
                live.fetch_sub(1, Ordering::Relaxed);
                result
            })
            .buffer_unordered(in_flight);
        while let Some(result) = results.next().await {
            match failure(&result) {
                Some(reason) => {
                    tally.failed += 1;
                    if tally.reasons.len() < 5 {
                        tally.reasons.push(reason);
                    }
                }
                None if first.is_none() => *first = result.ok(),
                None => {}
            }
        }
    });
    tally.elapsed = started.elapsed();
    tally.peak_in_flight = peak.load(Ordering::Relaxed);
    tally
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    serve_if_child(responder);
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("concurrent_runs: bench");
        return;
    }
    // Outside `cargo bench` (which passes `--bench`), e.g. under `cargo test --benches`, a
    // small pass only checks that it works.
    let (runs, in_flight) = if args.iter().any(|a| a == "--bench") { (RUNS, IN_FLIGHT) } else { (200, 20) };
    let limit = open_files_limit();
    // One socket per in-flight request, plus the runtime's and the process's own.
    if let Some(limit) = limit {
        assert!((in_flight as u64) + 256 < limit, "ulimit -n is {limit}: too few for {in_flight} runs in flight");
    }

    let server = ChildMockServer::start().expect("the mock server child starts");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a Tokio runtime");
    let workers = runtime.metrics().num_workers();
    let agent = agent(server.url());

    let mut first = None;
    let warm = pass(&runtime, &agent, 100, 4, &mut first);
    assert_eq!(warm.failed, 0, "warm-up runs failed: {:?}", warm.reasons);
    let conversation = first.as_ref().map_or(0, |o| serde_json::to_vec(&o.messages).map_or(0, |v| v.len()));
    let events =
        first.as_ref().map_or((0, 0), |o| (o.events.len(), serde_json::to_vec(&o.events).map_or(0, |v| v.len())));
    drop(first.take());

    let baseline = status_bytes("VmRSS").unwrap_or(0);
    let reset = reset_peak_rss();
    let sampler = RssSampler::start(Duration::from_millis(2));
    let measured = pass(&runtime, &agent, runs, in_flight, &mut None);
    let sampled = sampler.finish();
    let hwm = if reset { status_bytes("VmHWM").unwrap_or(0) } else { 0 };
    let after = status_bytes("VmRSS").unwrap_or(0);
    let peak = hwm.max(sampled);

    let rise = peak.saturating_sub(baseline);
    let per_run = rise as f64 / measured.peak_in_flight.max(1) as f64;
    let beyond = per_run - conversation as f64;
    println!(
        "\nconcurrent_runs: {} runs (2 model calls + 1 tool call each), at most {in_flight} in flight (buffer_unordered), \
         multi-thread runtime ({workers} workers), Engine + Providers (one client), Anthropic wire, mock server in a child process, \
         ulimit -n {}",
        measured.runs,
        limit.map_or("unknown".to_owned(), |l| l.to_string()),
    );
    println!(
        "concurrent_runs: {:.0} runs/s ({:.2} s), failed runs: {}{}",
        measured.runs as f64 / measured.elapsed.as_secs_f64(),
        measured.elapsed.as_secs_f64(),
        measured.failed,
        if measured.reasons.is_empty() { String::new() } else { format!(" (first: {:?})", measured.reasons) },
    );
    println!(
        "concurrent_runs: RSS baseline {:.1} MiB, peak {:.1} MiB (VmHWM {}, sampled VmRSS max {:.1} MiB), after {:.1} MiB; \
         peak in flight {}",
        mib(baseline),
        mib(peak),
        if reset { format!("{:.1} MiB", mib(hwm)) } else { "not reset".to_owned() },
        mib(sampled),
        mib(after),
        measured.peak_in_flight,
    );
    println!(
        "concurrent_runs: {:.1} KiB per in-flight run, conversation {conversation} B (events kept per run: {} = {} B \
         serialized) => {:.1} KiB per in-flight run beyond the conversation (target <= {TARGET_KIB} KiB)",
        per_run / 1024.0,
        events.0,
        events.1,
        beyond / 1024.0,
    );
    drop(agent);
    drop(runtime);
    drop(server);
    assert_eq!(measured.failed, 0, "runs failed: {:?}", measured.reasons);
}
