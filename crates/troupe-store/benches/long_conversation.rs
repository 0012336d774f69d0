//! `long_conversation`: what a long run's checkpoints cost when each one writes the whole
//! conversation with the state, against the store's way, which keeps the conversation
//! apart and writes only the messages a boundary added (`Checkpoint::messages`).
//!
//! Both sides are the same `SqliteStore` (a file under `target/tmp`, WAL, `synchronous =
//! FULL`, as the CLI opens it) in the same process, and write the same run: created, then
//! [`BOUNDARIES`] flushed checkpoints, each adding two messages of about 2 KB (a tool call
//! and its result), so the conversation ends at about 240 KB. Runs of both sides
//! alternate, [`ROUNDS`] of each. Per run it prints the CPU time of the process's threads
//! (`/proc/self/task/*/schedstat`) and the bytes it handed to `write` and `pwrite`
//! (`wchar` of `/proc/self/io`), the medians, and their ratio.
//!
//! `cargo bench -p troupe-store --bench long_conversation`

use serde_json::value::{RawValue, to_raw_value};
use serde_json::{Value, json};
use std::time::Instant;
use troupe_store::sqlite::SqliteStore;
use troupe_store::{Checkpoint, MessagesWrite, NewRun, RunRepository, RunStatus};

/// Checkpoints per run.
const BOUNDARIES: usize = 60;
/// Runs of each side.
const ROUNDS: usize = 9;

/// The `n`th message: about 2 KB of text, as a tool's result or a model's answer.
fn message(n: usize) -> Value {
    let role = if n.is_multiple_of(2) { "assistant" } else { "user" };
    json!({"role": role, "content": [{"type": "text", "text": format!("{n}: {}", "lorem ipsum dolor ".repeat(110))}]})
}

/// The state of a run of `messages`, the rest of it small, as a run's is.
fn state(messages: &[Value]) -> Box<RawValue> {
    let state = json!({"run_id": "r", "agent": "bench", "model": "openai/gpt-4o", "messages": messages,
        "iteration": messages.len() / 2, "usage": {"input_tokens": 1000, "output_tokens": 100}, "status": "running"});
    to_raw_value(&state).expect("a state encodes")
}

/// One run, its conversation written whole at each boundary or appended.
async fn run(store: &SqliteStore, id: &str, appended: bool) {
    let new = NewRun {
        id: id.to_owned(),
        agent: "bench".into(),
        status: RunStatus::Running,
        conversation_id: None,
        parent_run_id: None,
        input: json!({"instruction": "work"}).into(),
        state: json!({"messages": [message(0)]}).into(),
        spend: None,
    };
    store.create_run(new, 1).await.expect("the run is created");
    let mut messages = vec![message(0)];
    for boundary in 0..BOUNDARIES {
        let from = if boundary == 0 { 0 } else { messages.len() };
        messages.push(message(messages.len()));
        messages.push(message(messages.len()));
        let checkpoint = if appended {
            let added = messages[from..].iter().map(|m| to_raw_value(m).expect("encodes")).collect();
            Checkpoint {
                messages: Some(MessagesWrite { from, messages: added }),
                ..Checkpoint::new(id, RunStatus::Running, state(&[]))
            }
        } else {
            Checkpoint::new(id, RunStatus::Running, state(&messages))
        };
        store.checkpoint(checkpoint, 2).await.expect("the checkpoint is saved");
    }
}

/// CPU time of this process's threads so far, in microseconds: the sum of each thread's
/// time on a CPU (`/proc/self/task/*/schedstat`, nanoseconds; the runtime's and the
/// store's threads live as long as the benchmark).
fn cpu_micros() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    nanos / 1_000
}

/// Bytes this process handed to `write` calls so far.
fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.parse().ok()).expect("wchar")
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rounds = if bench { ROUNDS } else { 1 };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("long_conversation");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the database");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&dir.join("bench.db")).await.expect("the store opens");
        // (CPU µs, KiB written, ms) per run, for each side.
        let mut sides: [Vec<(f64, f64, f64)>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            // The order flips each round: neither side always runs on a warmer machine.
            let order = if round.is_multiple_of(2) { [false, true] } else { [true, false] };
            for appended in order {
                let (cpu, bytes, wall) = (cpu_micros(), written(), Instant::now());
                run(&store, &format!("run-{round}-{appended}"), appended).await;
                let measured = (
                    (cpu_micros() - cpu) as f64,
                    (written() - bytes) as f64 / 1024.0,
                    wall.elapsed().as_secs_f64() * 1000.0,
                );
                sides[usize::from(appended)].push(measured);
            }
        }
        let [whole, appended] = sides.map(|runs| {
            let pick = |f: fn(&(f64, f64, f64)) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
            (pick(|r| r.0), pick(|r| r.1), pick(|r| r.2))
        });
        println!(
            "long_conversation: {BOUNDARIES} boundaries, 2 messages of about 2 KB each; medians of {rounds} runs a side"
        );
        println!(
            "  whole conversation per checkpoint: {:>9.0} µs CPU, {:>8.0} KiB written, {:>6.0} ms",
            whole.0, whole.1, whole.2
        );
        println!(
            "  messages appended (troupe):        {:>9.0} µs CPU, {:>8.0} KiB written, {:>6.0} ms",
            appended.0, appended.1, appended.2
        );
        println!(
            "  appended / whole: CPU {:.2}×, bytes written {:.2}×, time {:.2}×",
            appended.0 / whole.0,
            appended.1 / whole.1,
            appended.2 / whole.2
        );
    });
}
