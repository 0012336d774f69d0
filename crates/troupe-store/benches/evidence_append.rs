//! `evidence_append`: what recording one evidence entry at a boundary costs, against a bare
//! `INSERT` of the same values through the same driver and pool.
//!
//! - troupe: `EvidenceChain::seal` of one `action_completed` entry (a payload of about 300
//!   bytes of JSON, as the runtime writes after a tool call), `append_evidence` (one
//!   `INSERT` into `evidence`) and `EvidenceChain::advance`: hashing, the payload's
//!   serialization, the boxed future and the clones of the binds are all in.
//! - bare: one `INSERT` into `bare_evidence`, a table with the same columns and primary
//!   key, created by this benchmark in the same database, binding the payload's text
//!   (serialized once up front), fixed 64-character hashes and an incrementing `seq`.
//!
//! On SQLite both write to one file (under `target/tmp`, on the disk of the build, not a
//! tmpfs) in WAL mode with `synchronous = FULL`, as the store opens it, so both pay one
//! fsync of the WAL per entry. On PostgreSQL (when `TROUPE_TEST_DATABASE_URL` is set and
//! the `postgres` feature is on) both write to a fresh schema, dropped at the end, and
//! pay a round trip and a commit each.
//!
//! The cost is I/O, so the measure is wall time per entry. After criterion's report, under
//! `cargo bench` only, entries of both alternate (in pairs whose order flips each time),
//! each timed, and per backend the medians and their ratio are printed, then the means. One
//! more criterion function times the in-memory part alone (seal and advance, no store):
//! what troupe adds on the CPU.
//!
//! `cargo bench -p troupe-store --features postgres --bench evidence_append`, with
//! `TROUPE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test` for PostgreSQL.

use criterion::Criterion;
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use troupe_store::sqlite::SqliteStore;
use troupe_store::{EvidenceChain, EvidenceKind, EvidenceRepository, NewEvidence, now_millis};

const RUN_ID: &str = "bench-run";
const CALL_ID: &str = "toolu_01";
const KIND: &str = "action_completed";

/// How long the paired measurement runs, per backend (both sides together).
const PAIRED_TIME: Duration = Duration::from_secs(8);
/// The fewest pairs it takes, however slow the disk.
const MIN_PAIRS: usize = 300;

/// What the runtime records after a call of a tool whose evidence is a summary of its
/// result: about 300 bytes of JSON.
fn payload() -> Value {
    let content = "Wrote 42 lines to src/report.rs (1873 bytes). The file now defines `Report`, \
                   `Report::render` and `Report::totals`, and src/lib.rs declares the module; \
                   cargo check passed with no warnings and cargo test ran 18 tests, all passed.";
    json!({
        "tool": "fs.write",
        "is_error": false,
        "capture": "summary",
        "content": content,
        "content_chars": content.chars().count(),
    })
}

/// troupe's path: seal, append, advance.
struct Troupe<S> {
    store: S,
    chain: EvidenceChain,
    payload: Value,
}

impl<S: EvidenceRepository> Troupe<S> {
    fn new(store: S, payload: &Value) -> Self {
        Troupe { store, chain: EvidenceChain::new(RUN_ID), payload: payload.clone() }
    }

    async fn append(&mut self) -> i64 {
        let entry = NewEvidence::new(EvidenceKind::ActionCompleted, self.payload.clone()).for_call(CALL_ID);
        let sealed = self.chain.seal(vec![entry], now_millis());
        self.store.append_evidence(&sealed, None).await.expect("the store appends the entry");
        self.chain.advance(&sealed);
        self.chain.next_seq()
    }
}

/// The values the bare `INSERT` binds, all prepared up front but the sequence number and
/// the time.
struct BareValues {
    seq: i64,
    payload: String,
    prev_hash: String,
    hash: String,
}

impl BareValues {
    fn new(payload: &Value) -> Self {
        BareValues { seq: 0, payload: payload.to_string(), prev_hash: "a".repeat(64), hash: "b".repeat(64) }
    }

    fn next_seq(&mut self) -> i64 {
        self.seq += 1;
        self.seq
    }
}

const BARE_TABLE_SQLITE: &str = "CREATE TABLE bare_evidence (
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    call_id     TEXT,
    payload     TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
)";

const BARE_INSERT_SQLITE: &str = "INSERT INTO bare_evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

/// Both sides on one SQLite store.
struct SqliteCase {
    troupe: Troupe<SqliteStore>,
    bare: BareValues,
    _dir: tempfile::TempDir,
}

impl SqliteCase {
    async fn open() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("evidence_append")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("a temporary directory under target/tmp");
        let store = SqliteStore::open(&dir.path().join("troupe.db")).await.expect("the SQLite store opens");
        sqlx::query(BARE_TABLE_SQLITE).execute(store.pool()).await.expect("the bare table is created");
        let payload = payload();
        SqliteCase { troupe: Troupe::new(store, &payload), bare: BareValues::new(&payload), _dir: dir }
    }

    async fn troupe(&mut self) -> i64 {
        self.troupe.append().await
    }

    async fn bare(&mut self) -> i64 {
        let seq = self.bare.next_seq();
        sqlx::query(BARE_INSERT_SQLITE)
            .bind(RUN_ID)
            .bind(seq)
            .bind(KIND)
            .bind(CALL_ID)
            .bind(self.bare.payload.as_str())
            .bind(now_millis())
            .bind(self.bare.prev_hash.as_str())
            .bind(self.bare.hash.as_str())
            .execute(self.troupe.store.pool())
            .await
            .expect("the bare insert succeeds");
        seq
    }
}

#[cfg(feature = "postgres")]
mod pg {
    use super::{BareValues, CALL_ID, KIND, RUN_ID, Troupe, payload};
    use sqlx::AssertSqlSafe;
    use troupe_store::now_millis;
    use troupe_store::postgres::PostgresStore;

    const BARE_TABLE: &str = "CREATE TABLE bare_evidence (
        run_id      TEXT NOT NULL,
        seq         BIGINT NOT NULL,
        kind        TEXT NOT NULL,
        call_id     TEXT,
        payload     TEXT NOT NULL,
        recorded_at BIGINT NOT NULL,
        prev_hash   TEXT NOT NULL,
        hash        TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    )";

    const BARE_INSERT: &str = "INSERT INTO bare_evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

    /// Both sides on one PostgreSQL store, in a schema of their own.
    pub struct PostgresCase {
        troupe: Troupe<PostgresStore>,
        bare: BareValues,
        schema: String,
    }

    impl PostgresCase {
        /// A store in a fresh schema on the server at `url`.
        pub async fn connect(url: &str) -> Self {
            let schema = format!("troupe_bench_{}", uuid::Uuid::new_v4().simple());
            let store = PostgresStore::connect_in_schema(url, &schema).await.expect("the PostgreSQL store connects");
            sqlx::query(BARE_TABLE).execute(store.pool()).await.expect("the bare table is created");
            let payload = payload();
            PostgresCase { troupe: Troupe::new(store, &payload), bare: BareValues::new(&payload), schema }
        }

        pub async fn troupe(&mut self) -> i64 {
            self.troupe.append().await
        }

        pub async fn bare(&mut self) -> i64 {
            let seq = self.bare.next_seq();
            sqlx::query(BARE_INSERT)
                .bind(RUN_ID)
                .bind(seq)
                .bind(KIND)
                .bind(CALL_ID)
                .bind(self.bare.payload.as_str())
                .bind(now_millis())
                .bind(self.bare.prev_hash.as_str())
                .bind(self.bare.hash.as_str())
                .execute(self.troupe.store.pool())
                .await
                .expect("the bare insert succeeds");
            seq
        }

        /// Drops the schema and closes the pool.
        pub async fn drop_schema(self) {
            let pool = self.troupe.store.pool();
            // The name is ours: `troupe_bench_` and hex digits.
            sqlx::raw_sql(AssertSqlSafe(format!("DROP SCHEMA \"{}\" CASCADE", self.schema)))
                .execute(pool)
                .await
                .expect("the benchmark's schema is dropped");
            pool.close().await;
        }
    }
}

/// The wall time of each entry of one side, over all its rounds.
#[derive(Default)]
struct Latencies {
    micros: Vec<f64>,
}

impl Latencies {
    /// The `q` quantile (0.5 for the median).
    fn quantile(&self, q: f64) -> f64 {
        quantile(self.micros.clone(), q)
    }

    /// The ratio of the medians of the entries at even and at odd positions: how far
    /// apart two halves of one side's entries come, the noise of the medians' ratio.
    fn halves_ratio(&self) -> f64 {
        let half = |parity: usize| self.micros.iter().skip(parity).step_by(2).copied().collect::<Vec<_>>();
        quantile(half(0), 0.5) / quantile(half(1), 0.5)
    }

    fn mean(&self) -> f64 {
        self.micros.iter().sum::<f64>() / self.micros.len() as f64
    }
}

fn quantile(mut values: Vec<f64>, q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// Alternating entries of `troupe` and `bare`, in pairs whose order flips from one to the
/// next: the disk's latency comes in bursts (other processes' writes, the WAL's
/// checkpoints), which rounds of a single entry share out evenly. Pairs for
/// [`PAIRED_TIME`] after a warm-up; the wall time of every entry, (troupe, bare).
fn paired<C>(
    runtime: &Runtime,
    case: &mut C,
    troupe: impl AsyncFn(&mut C) -> i64,
    bare: impl AsyncFn(&mut C) -> i64,
) -> (Latencies, Latencies) {
    let (mut troupe_times, mut bare_times) = (Latencies::default(), Latencies::default());
    runtime.block_on(async {
        for _ in 0..20 {
            black_box(troupe(case).await);
            black_box(bare(case).await);
        }
        let started = Instant::now();
        let mut pair = 0;
        while pair < MIN_PAIRS || started.elapsed() < PAIRED_TIME {
            pair += 1;
            for troupe_side in [pair % 2 == 0, pair % 2 != 0] {
                let started = Instant::now();
                black_box(if troupe_side { troupe(case).await } else { bare(case).await });
                let times = if troupe_side { &mut troupe_times } else { &mut bare_times };
                times.micros.push(started.elapsed().as_secs_f64() * 1e6);
            }
        }
    });
    (troupe_times, bare_times)
}

/// The target is on the medians: the disk's latency has a long tail (a WAL checkpoint,
/// another process's burst of writes) that lands on either side by chance and swamps a
/// few microseconds of troupe's in the means, which are printed as well.
fn report(backend: &str, (troupe, bare): &(Latencies, Latencies)) {
    let (x, y) = (troupe.quantile(0.5), bare.quantile(0.5));
    println!(
        "evidence_append {backend}: troupe {x:.1} µs/entry, bare INSERT {y:.1} µs/entry, ratio {:.2} (target <= 1.5)",
        x / y
    );
    let (mx, my) = (troupe.mean(), bare.mean());
    println!(
        "  medians of {} entries of each, alternating; means: troupe {mx:.1} µs, bare {my:.1} µs, ratio {:.2}; p90: troupe {:.1} µs, bare {:.1} µs; noise: medians of halves of one side differ by {:.2} (troupe) {:.2} (bare)",
        troupe.micros.len(),
        mx / my,
        troupe.quantile(0.9),
        bare.quantile(0.9),
        troupe.halves_ratio(),
        bare.halves_ratio(),
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a Tokio runtime");
    let mut sqlite = runtime.block_on(SqliteCase::open());
    #[cfg(feature = "postgres")]
    let mut postgres = match std::env::var("TROUPE_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(runtime.block_on(pg::PostgresCase::connect(&url))),
        _ => None,
    };

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    let mut group = criterion.benchmark_group("evidence_append/sqlite");
    group.bench_function("troupe_seal_append_advance", |b| b.iter(|| runtime.block_on(sqlite.troupe())));
    group.bench_function("bare_insert", |b| b.iter(|| runtime.block_on(sqlite.bare())));
    group.finish();
    criterion.bench_function("evidence_append/seal_advance_in_memory", |b| {
        let (mut chain, payload) = (EvidenceChain::new(RUN_ID), payload());
        b.iter(|| {
            let entry = NewEvidence::new(EvidenceKind::ActionCompleted, payload.clone()).for_call(CALL_ID);
            let sealed = chain.seal(vec![entry], now_millis());
            chain.advance(&sealed);
            sealed
        })
    });
    #[cfg(feature = "postgres")]
    if let Some(postgres) = postgres.as_mut() {
        let mut group = criterion.benchmark_group("evidence_append/postgres");
        group.bench_function("troupe_seal_append_advance", |b| b.iter(|| runtime.block_on(postgres.troupe())));
        group.bench_function("bare_insert", |b| b.iter(|| runtime.block_on(postgres.bare())));
        group.finish();
    }
    criterion.final_summary();

    // The paired measurement runs under `cargo bench` (which passes `--bench`) only: not
    // under `cargo test --benches`, nor when listing or profiling.
    let args: Vec<String> = std::env::args().collect();
    let paired_run =
        args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--profile-time");
    if paired_run {
        println!(
            "\nevidence_append: one action_completed entry ({} bytes of JSON) per append",
            payload().to_string().len()
        );
        let sqlite_figures = paired(&runtime, &mut sqlite, SqliteCase::troupe, SqliteCase::bare);
        report("sqlite", &sqlite_figures);
    }
    #[cfg(feature = "postgres")]
    if let Some(mut postgres) = postgres {
        if paired_run {
            let figures = paired(&runtime, &mut postgres, pg::PostgresCase::troupe, pg::PostgresCase::bare);
            report("postgres", &figures);
        }
        runtime.block_on(postgres.drop_schema());
    }
    let postgres_ran =
        cfg!(feature = "postgres") && std::env::var("TROUPE_TEST_DATABASE_URL").is_ok_and(|u| !u.trim().is_empty());
    if !postgres_ran {
        let why = if cfg!(feature = "postgres") {
            "TROUPE_TEST_DATABASE_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/test)"
        } else {
            "the `postgres` feature is off (--features postgres)"
        };
        println!("evidence_append postgres: skipped: {why}");
    }
}
