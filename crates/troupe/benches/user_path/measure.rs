//! One measured pass, in a child process of its own so that its peak memory is its own:
//! `user_path --pass CONTENDER STORE MODE N SECONDS MODEL URL`, printing one JSON line.

use crate::contender::{Contender, lookup_parameters, troupe_agent};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use troupe::runtime::Durability;
use troupe::store::Flush;
use troupe_testkit::process::{process_cpu_ticks, reset_peak_rss, status_bytes};

/// What the child reports.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PassReport {
    /// Runs finished (succeeded or not).
    pub runs: usize,
    /// Runs that did not succeed.
    pub failed: usize,
    /// The first failure, if any.
    pub first_failure: Option<String>,
    /// CPU time of the pass, in ticks of 10 ms (all threads).
    pub cpu_ticks: u64,
    /// The mock server's CPU time during the pass, in ticks of 10 ms: read by the parent
    /// around the pass's child, not reported by the child.
    #[serde(default)]
    pub mock_cpu_ticks: u64,
    /// Wall time of the pass.
    pub elapsed_ms: f64,
    /// `VmRSS` before the pass (after the warm-up).
    pub rss_before: u64,
    /// The process's peak `VmRSS` over its whole life (`VmHWM`), warm-up and pass included.
    pub peak_rss: u64,
    /// The peak during the pass (`VmHWM` after resetting it at the pass's start); 0 when
    /// the kernel refused the reset.
    pub pass_peak_rss: u64,
}

/// How the runs of a pass are driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `n` runs in flight at all times, for the given time.
    Throughput,
    /// `n` runs started at once, each run once.
    InFlight,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Throughput => "throughput",
            Mode::InFlight => "in-flight",
        }
    }

    fn parse(text: &str) -> Option<Mode> {
        match text {
            "throughput" => Some(Mode::Throughput),
            "in-flight" => Some(Mode::InFlight),
            _ => None,
        }
    }
}

/// In a child started with `--pass`: runs the pass, prints its report and exits.
pub fn run_pass_if_asked() {
    let args: Vec<String> = std::env::args().collect();
    let Some(at) = args.iter().position(|a| a == "--pass") else { return };
    let report = match args.get(at + 1..at + 8) {
        Some([contender, store, mode, n, seconds, model, url]) => pass(contender, store, mode, n, seconds, model, url)
            .unwrap_or_else(|e| PassReport { first_failure: Some(e), failed: 1, ..PassReport::default() }),
        _ => {
            PassReport { first_failure: Some(format!("bad pass arguments: {args:?}")), failed: 1, ..Default::default() }
        }
    };
    println!("{}", serde_json::to_string(&report).expect("the report serializes"));
    std::process::exit(0);
}

fn pass(
    contender: &str,
    store: &str,
    mode: &str,
    n: &str,
    seconds: &str,
    model: &str,
    url: &str,
) -> Result<PassReport, String> {
    let mode = Mode::parse(mode).ok_or_else(|| format!("unknown mode {mode}"))?;
    let n: usize = n.parse().map_err(|_| format!("bad count {n}"))?;
    let seconds: f64 = seconds.parse().map_err(|_| format!("bad seconds {seconds}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    // PostgreSQL's schema of this pass, dropped after it.
    let mut postgres_schema = None;
    let contender = runtime.block_on(async {
        Ok::<_, String>(match (contender, store) {
            ("bare", "none") => Contender::Bare(crate::bare::BareLoop::new(url, model, lookup_parameters())),
            ("bare", "sqlite") => {
                let floor = crate::floor::Floor::open(&scratch.path().join("floor.db"))?;
                Contender::Bare(crate::bare::BareLoop::new(url, model, lookup_parameters()).recorded(floor))
            }
            ("troupe", "none") => Contender::Troupe(troupe_agent(url, model, None)),
            ("troupe", sqlite @ ("sqlite" | "sqlite-deferred")) => {
                let path = scratch.path().join("troupe.db");
                let store =
                    troupe::store::open(&format!("sqlite://{}", path.display())).await.map_err(|e| e.to_string())?;
                // `sqlite-deferred`: the opt-in that saves model turns without an fsync of their own.
                let turn_flush = if sqlite == "sqlite" { Flush::BeforeAnswer } else { Flush::WithNextFlush };
                Contender::Troupe(troupe_agent(url, model, Some(Durability::new(store).with_turn_flush(turn_flush))))
            }
            ("troupe", location) => {
                // A schema of the pass's own: each pass starts from empty tables, as SQLite's
                // start from a new file, not from the tables every earlier pass filled.
                let schema = format!("user_path_{}", std::process::id());
                let store = troupe::store::postgres::PostgresStore::connect_in_schema(location, &schema)
                    .await
                    .map_err(|e| e.to_string())?;
                postgres_schema = Some((store.clone(), schema));
                Contender::Troupe(troupe_agent(url, model, Some(Durability::new(Arc::new(store)))))
            }
            (other, _) => return Err(format!("unknown contender {other}")),
        })
    })?;
    // With the tool calls its runs must make on `model`.
    let contender = Arc::new((contender, crate::workload::tool_calls(model)));

    // Warm-up: the pool filled to the pass's width, the allocator's arenas in use.
    let warm = n.min(100);
    let warm_report = runtime.block_on(throughput(&contender, warm, Duration::ZERO, warm * 2));
    if warm_report.failed > 0 {
        return Ok(warm_report);
    }

    let rss_before = status_bytes("VmRSS").unwrap_or(0);
    let reset = reset_peak_rss();
    let cpu = process_cpu_ticks().unwrap_or(0);
    let started = Instant::now();
    let mut report = match mode {
        Mode::Throughput => runtime.block_on(throughput(&contender, n, Duration::from_secs_f64(seconds), 0)),
        Mode::InFlight => runtime.block_on(in_flight(&contender, n)),
    };
    report.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    report.cpu_ticks = process_cpu_ticks().unwrap_or(0).saturating_sub(cpu);
    report.rss_before = rss_before;
    report.pass_peak_rss = if reset { status_bytes("VmHWM").unwrap_or(0) } else { 0 };
    report.peak_rss = status_bytes("VmHWM").unwrap_or(0);
    drop(contender);
    if let Some((store, schema)) = postgres_schema {
        let drop_schema = format!("DROP SCHEMA \"{schema}\" CASCADE");
        runtime
            .block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(drop_schema)).execute(store.pool()))
            .map_err(|e| format!("dropping the pass's schema: {e}"))?;
    }
    drop(runtime);
    Ok(report)
}

/// `width` runs in flight until `duration` has passed and at least `at_least` runs were
/// started.
async fn throughput(
    contender: &Arc<(Contender, u32)>,
    width: usize,
    duration: Duration,
    at_least: usize,
) -> PassReport {
    let started = Instant::now();
    let issued = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..width.max(1))
        .map(|_| {
            let (contender, issued) = (Arc::clone(contender), Arc::clone(&issued));
            tokio::spawn(async move {
                let mut mine = PassReport::default();
                while started.elapsed() < duration || issued.fetch_add(1, Ordering::Relaxed) < at_least {
                    tally(&mut mine, contender.0.run(contender.1).await);
                }
                mine
            })
        })
        .collect();
    let mut report = PassReport::default();
    for worker in workers {
        merge(&mut report, worker.await.unwrap_or_else(|e| failed(format!("a worker panicked: {e}"))));
    }
    report
}

/// `n` runs started at once.
async fn in_flight(contender: &Arc<(Contender, u32)>, n: usize) -> PassReport {
    let runs: Vec<_> = (0..n)
        .map(|_| {
            let contender = Arc::clone(contender);
            tokio::spawn(async move { contender.0.run(contender.1).await })
        })
        .collect();
    let mut report = PassReport::default();
    for run in runs {
        tally(&mut report, run.await.unwrap_or_else(|e| Err(format!("a run panicked: {e}"))));
    }
    report
}

fn tally(report: &mut PassReport, result: Result<(), String>) {
    report.runs += 1;
    if let Err(reason) = result {
        report.failed += 1;
        report.first_failure.get_or_insert(reason);
    }
}

fn merge(into: &mut PassReport, from: PassReport) {
    into.runs += from.runs;
    into.failed += from.failed;
    if into.first_failure.is_none() {
        into.first_failure = from.first_failure;
    }
}

fn failed(reason: String) -> PassReport {
    PassReport { failed: 1, first_failure: Some(reason), ..PassReport::default() }
}
