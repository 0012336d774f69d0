//! `user_path`: what a run costs on the path a newcomer writes, against the same work
//! written by hand, measured in the same benchmark run.
//!
//! - troupe: `Engine::builder().providers(..)` with the built-in `openai` preset
//!   (`OPENAI_BASE_URL` at the mock server), an agent on `openai/gpt-4o`, one typed tool
//!   (`lookup`), `agent.run(task)`; without a store, with SQLite (a file under the target
//!   directory, power-loss safe as the CLI's default) and with PostgreSQL
//!   (`TROUPE_TEST_DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/test`).
//! - the baseline: one `reqwest::Client`, requests built with `serde_json`, SSE frames
//!   split and parsed by hand (`bare.rs`).
//!
//! A run is 4 streaming model calls (OpenAI Chat wire) and 3 tool calls. The mock server
//! runs in a child process (its CPU and memory are not counted); each pass runs in a
//! child process of its own, so its peak memory is its own, and reports its CPU time
//! (user + system, every thread), its wall time and `VmHWM`.
//!
//! Passes: 1 and 100 runs in flight (CPU per run, runs/s, peak RSS), in three rounds of
//! every such pass; each ratio is the median of the rounds' own. The same rounds take the
//! floor (`floor.rs`: the bare loop recording its runs by hand in the fewest flushed
//! writes a power-loss-safe record needs) at 1 and at 100. For reference, they also take
//! 100 runs in flight without a store and with SQLite against a model that takes 50 ms
//! before each response, as a vendor would, and long runs one at a time by the bare loop
//! and by troupe without a store and with SQLite (31 model calls, 30 tool calls, about
//! 2 KB of text a turn, so the conversation grows to about 60 KB). Then 10,000 runs
//! started at once against a model that takes 200 ms before each response (memory per
//! in-flight run: the rise of the peak RSS over the RSS before the pass, divided by
//! 10,000). The targets are printed beside the figures.
//!
//! `cargo bench -p troupe --bench user_path` (about two minutes); with
//! `USER_PATH_ONLY=contender:store:n` (e.g. `troupe:sqlite:100`, or a PostgreSQL URL as the
//! store) only that pass runs, for a profiler. Outside `cargo bench`
//! (e.g. `cargo test --benches`) each pass is short and small: it only checks that
//! every contender works.

mod bare;
mod contender;
mod floor;
mod measure;
mod workload;

use measure::{Mode, PassReport};
use std::process::{Command, Stdio};
use troupe_testkit::{ChildMockServer, serve_if_child};

/// One pass to run.
struct Pass {
    contender: &'static str,
    store: String,
    mode: Mode,
    n: usize,
    seconds: f64,
    model: &'static str,
}

fn run_pass(pass: &Pass, server: &ChildMockServer) -> PassReport {
    let mock_before = server.cpu_ticks();
    let mut report = run_pass_child(pass, server.url());
    if let (Some(before), Some(after)) = (mock_before, server.cpu_ticks()) {
        report.mock_cpu_ticks = after.saturating_sub(before);
    }
    report
}

fn run_pass_child(pass: &Pass, url: &str) -> PassReport {
    let exe = std::env::current_exe().expect("the benchmark knows its own path");
    let n = pass.n.to_string();
    let seconds = pass.seconds.to_string();
    let args = [pass.contender, &pass.store, pass.mode.as_str(), &n, &seconds, pass.model, url];
    let output = Command::new(exe)
        .arg("--pass")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("the pass's child starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| PassReport {
        failed: 1,
        first_failure: Some(format!("the pass printed {stdout:?} ({e}); {}", output.status)),
        ..PassReport::default()
    })
}

fn cpu_us_per_run(report: &PassReport) -> f64 {
    report.cpu_ticks as f64 * troupe_testkit::process::TICK_MICROS / report.runs.max(1) as f64
}

/// What serving the pass cost the mock server, per run.
fn mock_us_per_run(report: &PassReport) -> f64 {
    report.mock_cpu_ticks as f64 * troupe_testkit::process::TICK_MICROS / report.runs.max(1) as f64
}

fn runs_per_s(report: &PassReport) -> f64 {
    report.runs as f64 / (report.elapsed_ms / 1000.0).max(1e-9)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn main() {
    serve_if_child(workload::responder);
    measure::run_pass_if_asked();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("user_path: bench");
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    // Three rounds of 2 s passes: as long as one round of 4 s passes, and a median to take.
    let (seconds, in_flight, rounds) = if full { (2.0, 10_000, 3) } else { (0.2, 50, 1) };
    let postgres = std::env::var("TROUPE_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());

    let server = ChildMockServer::start().expect("the mock server child starts");
    let throughput = |contender, store: &str, n| Pass {
        contender,
        store: store.to_owned(),
        mode: Mode::Throughput,
        n,
        seconds,
        model: workload::FAST_MODEL,
    };
    let paced = |store: &str| Pass { model: workload::PACED_MODEL, ..throughput("troupe", store, 100) };
    let long = |contender, store: &str| Pass { model: workload::LONG_MODEL, ..throughput(contender, store, 1) };
    if let Ok(only) = std::env::var("USER_PATH_ONLY") {
        // One pass, for a profiler: `contender:store:n`, e.g. `troupe:sqlite:100`; the store
        // may be a PostgreSQL URL, colons and all.
        let parts = only.split_once(':').and_then(|(contender, rest)| Some((contender, rest.rsplit_once(':')?)));
        let Some((contender, (store, n))) = parts else { panic!("USER_PATH_ONLY is contender:store:n, not {only:?}") };
        let contender = if contender == "bare" { "bare" } else { "troupe" };
        let store = if contender == "bare" && store != "none" { "sqlite" } else { store };
        let n = n.parse().unwrap_or_else(|_| panic!("USER_PATH_ONLY's n is a number, not {n:?}"));
        let report = run_pass(&throughput(contender, store, n), &server);
        println!(
            "user_path: {only}: {:.1} µs CPU/run, {:.0} runs/s, mock server {:.1} µs CPU/run",
            cpu_us_per_run(&report),
            runs_per_s(&report),
            mock_us_per_run(&report)
        );
        return;
    }
    let mut failures = Vec::new();
    let mut print = |label: &str, report: &PassReport| {
        println!(
            "user_path: {label:<40} {:>6} runs  {:>8.1} µs CPU/run  {:>7.0} runs/s  mock {:>6.1} µs/run  \
             peak RSS {:>6.1} MiB  failed {}{}",
            report.runs,
            cpu_us_per_run(report),
            runs_per_s(report),
            mock_us_per_run(report),
            mib(report.peak_rss),
            report.failed,
            report.first_failure.as_deref().map(|f| format!(" (first: {f})")).unwrap_or_default(),
        );
        if report.failed > 0 || report.runs == 0 {
            failures.push(format!("{label}: {:?}", report.first_failure));
        }
    };

    // The throughput passes run in rounds, each round every pass once in this order: a
    // ratio is taken within each round, between passes minutes apart at most, and the
    // median of the rounds' ratios is reported. The machine's slow and fast phases, which
    // last longer than a pass, then move both sides of a ratio alike.
    let passes = [
        ("bare loop, 1 at a time", throughput("bare", "none", 1)),
        ("troupe, 1 at a time", throughput("troupe", "none", 1)),
        ("troupe + SQLite, 1 at a time", throughput("troupe", "sqlite", 1)),
        ("troupe + SQLite, turns deferred, 1", throughput("troupe", "sqlite-deferred", 1)),
        ("troupe + PostgreSQL, 1", throughput("troupe", &postgres, 1)),
        ("bare loop + SQLite floor, 1", throughput("bare", "sqlite", 1)),
        ("bare loop, 100 at a time", throughput("bare", "none", 100)),
        ("bare loop + SQLite floor, 100", throughput("bare", "sqlite", 100)),
        ("troupe, 100 at a time", throughput("troupe", "none", 100)),
        ("troupe + SQLite, 100", throughput("troupe", "sqlite", 100)),
        ("troupe + SQLite, turns deferred, 100", throughput("troupe", "sqlite-deferred", 100)),
        ("troupe + PostgreSQL, 100", throughput("troupe", &postgres, 100)),
        ("troupe, 100, model takes 50 ms", paced("none")),
        ("troupe + SQLite, 100, model takes 50 ms", paced("sqlite")),
        ("bare loop, long runs, 1 at a time", long("bare", "none")),
        ("troupe, long runs, 1 at a time", long("troupe", "none")),
        ("troupe + SQLite, long runs, 1 at a time", long("troupe", "sqlite")),
    ];
    println!(
        "\nuser_path: 4 model calls + 3 tool calls per run, OpenAI Chat wire, mock server in a child process; \
         {rounds} round(s) of {seconds} s passes"
    );
    let mut rounds_run: Vec<Vec<PassReport>> = Vec::new();
    for round in 1..=rounds {
        let reports: Vec<PassReport> = passes.iter().map(|(_, pass)| run_pass(pass, &server)).collect();
        if rounds > 1 {
            for ((label, _), report) in passes.iter().zip(&reports) {
                println!(
                    "user_path: round {round}: {label:<40} {:>8.1} µs CPU/run  {:>7.0} runs/s",
                    cpu_us_per_run(report),
                    runs_per_s(report)
                );
            }
        }
        rounds_run.push(reports);
    }
    let pooled: Vec<PassReport> = (0..passes.len()).map(|i| pool(rounds_run.iter().map(|round| &round[i]))).collect();
    println!();
    for ((label, _), report) in passes.iter().zip(&pooled) {
        print(label, report);
    }
    // Where a pass is in `passes` (and in each round), by its label.
    let at = |label: &str| {
        passes.iter().position(|(l, _)| *l == label).unwrap_or_else(|| panic!("no pass is labelled {label:?}"))
    };
    let (bare_1, troupe_1, sqlite_1) =
        (at("bare loop, 1 at a time"), at("troupe, 1 at a time"), at("troupe + SQLite, 1 at a time"));
    let (deferred_1, pg_1, floor_1) =
        (at("troupe + SQLite, turns deferred, 1"), at("troupe + PostgreSQL, 1"), at("bare loop + SQLite floor, 1"));
    let (bare_100, troupe_100, sqlite_100) =
        (at("bare loop, 100 at a time"), at("troupe, 100 at a time"), at("troupe + SQLite, 100"));
    let (deferred_100, pg_100, floor_100) = (
        at("troupe + SQLite, turns deferred, 100"),
        at("troupe + PostgreSQL, 100"),
        at("bare loop + SQLite floor, 100"),
    );
    let (paced_none, paced_sqlite) =
        (at("troupe, 100, model takes 50 ms"), at("troupe + SQLite, 100, model takes 50 ms"));
    let (long_bare, long_none, long_sqlite) = (
        at("bare loop, long runs, 1 at a time"),
        at("troupe, long runs, 1 at a time"),
        at("troupe + SQLite, long runs, 1 at a time"),
    );
    // The median over the rounds of a figure taken within each round.
    let median_of = |figure: &dyn Fn(&[PassReport]) -> f64| median(rounds_run.iter().map(|round| figure(round)));
    let ratio = |a: usize, b: usize| median_of(&|r| cpu_us_per_run(&r[a]) / cpu_us_per_run(&r[b]).max(1e-9));
    let throughput_ratio = |a: usize, b: usize| median_of(&|r| runs_per_s(&r[a]) / runs_per_s(&r[b]).max(1e-9));
    let added = |a: usize, b: usize| median_of(&|r| cpu_us_per_run(&r[a]) - cpu_us_per_run(&r[b]));
    let slow = |contender| Pass {
        contender,
        store: "none".to_owned(),
        mode: Mode::InFlight,
        n: in_flight,
        seconds: 0.0,
        model: workload::SLOW_MODEL,
    };
    let bare_wide = run_pass(&slow("bare"), &server);
    print("bare loop, all in flight", &bare_wide);
    let troupe_wide = run_pass(&slow("troupe"), &server);
    print("troupe, all in flight", &troupe_wide);

    let per_run_kib = |r: &PassReport| {
        let peak = if r.pass_peak_rss > 0 { r.pass_peak_rss } else { r.peak_rss };
        peak.saturating_sub(r.rss_before) as f64 / 1024.0 / r.runs.max(1) as f64
    };
    let rss_ratio = median_of(&|r| r[troupe_1].peak_rss as f64 / r[bare_1].peak_rss.max(1) as f64);
    println!();
    let checks = [
        ("CPU per run vs bare loop, 1 at a time", ratio(troupe_1, bare_1), 1.5, "×"),
        ("CPU per run vs bare loop, 100 at a time", ratio(troupe_100, bare_100), 1.5, "×"),
        ("CPU per run, SQLite vs no store, 1", ratio(sqlite_1, troupe_1), 2.0, "×"),
        ("CPU per run, SQLite vs no store, 100", ratio(sqlite_100, troupe_100), 2.0, "×"),
        ("peak RSS vs bare loop, 1 at a time", rss_ratio, 2.0, "×"),
        ("memory per in-flight run (KiB)", per_run_kib(&troupe_wide), 64.0, " KiB"),
    ];
    for (what, value, target, unit) in checks {
        println!("user_path: {what:<42} {value:>8.2}{unit}  (target <= {target}{unit}) {}", verdict(value <= target));
    }
    let kept = throughput_ratio(sqlite_100, troupe_100);
    println!(
        "user_path: {:<42} {:>8.2}   (target >= 0.70) {}",
        "throughput, SQLite vs no store, 100",
        kept,
        verdict(kept >= 0.7)
    );
    println!(
        "user_path: for reference: SQLite with model turns deferred (opt-in) vs no store CPU {:.2}× (1), \
         {:.2}× (100), throughput {:.2} (100)",
        ratio(deferred_1, troupe_1),
        ratio(deferred_100, troupe_100),
        throughput_ratio(deferred_100, troupe_100),
    );
    println!(
        "user_path: for reference: with a model that takes 50 ms per response, SQLite vs no store at 100: \
         throughput {:.2}, CPU {:.2}×",
        throughput_ratio(paced_sqlite, paced_none),
        ratio(paced_sqlite, paced_none),
    );
    println!(
        "user_path: for reference: long runs ({} model calls, {} tool calls, about 2 KB of text a turn), one at \
         a time: troupe vs bare loop CPU {:.2}×; SQLite vs no store: CPU {:.2}×, {:.0} µs added per run, \
         throughput {:.2}",
        workload::LONG_TOOL_CALLS + 1,
        workload::LONG_TOOL_CALLS,
        ratio(long_none, long_bare),
        ratio(long_sqlite, long_none),
        added(long_sqlite, long_none),
        throughput_ratio(long_sqlite, long_none),
    );
    println!(
        "user_path: for reference: PostgreSQL vs no store CPU {:.2}× (1), {:.2}× (100), throughput {:.2} (100); \
         bare loop {:.1} KiB per in-flight run; troupe vs bare throughput at 100: {:.2}",
        ratio(pg_1, troupe_1),
        ratio(pg_100, troupe_100),
        throughput_ratio(pg_100, troupe_100),
        per_run_kib(&bare_wide),
        throughput_ratio(troupe_100, bare_100),
    );
    println!(
        "user_path: for reference: the floor at 1 at a time, the bare loop recording its runs by hand in the same \
         five flushed SQLite commits: {:.2}× the bare loop; it adds {:.0} µs per run, troupe's record adds {:.0} µs",
        ratio(floor_1, bare_1),
        added(floor_1, bare_1),
        added(sqlite_1, troupe_1),
    );
    println!(
        "user_path: for reference: the floor at 100 in flight, its writes committed in groups: {:.2}× the bare \
         loop's CPU and {:.2} of its throughput; it adds {:.0} µs per run, troupe's record adds {:.0} µs",
        ratio(floor_100, bare_100),
        throughput_ratio(floor_100, bare_100),
        added(floor_100, bare_100),
        added(sqlite_100, troupe_100),
    );
    // The mock shares the machine's cores: at 100 its CPU per run is part of what the
    // throughput of each pass can be.
    let mock = |a: usize| median_of(&|r| mock_us_per_run(&r[a]));
    println!(
        "user_path: for reference: the mock server's CPU per run at 100 at a time: {:.0} µs serving the unrecorded \
         runs, {:.0} µs serving the SQLite ones",
        mock(troupe_100),
        mock(sqlite_100),
    );
    drop(server);
    assert!(failures.is_empty(), "passes with failed runs: {failures:#?}");
}

/// The rounds of one pass as one: their runs, CPU and time added up, the highest peaks.
fn pool<'a>(rounds: impl Iterator<Item = &'a PassReport>) -> PassReport {
    let mut pooled = PassReport::default();
    for report in rounds {
        pooled.runs += report.runs;
        pooled.failed += report.failed;
        pooled.cpu_ticks += report.cpu_ticks;
        pooled.mock_cpu_ticks += report.mock_cpu_ticks;
        pooled.elapsed_ms += report.elapsed_ms;
        pooled.rss_before = pooled.rss_before.max(report.rss_before);
        pooled.peak_rss = pooled.peak_rss.max(report.peak_rss);
        pooled.pass_peak_rss = pooled.pass_peak_rss.max(report.pass_peak_rss);
        if pooled.first_failure.is_none() {
            pooled.first_failure.clone_from(&report.first_failure);
        }
    }
    pooled
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}
