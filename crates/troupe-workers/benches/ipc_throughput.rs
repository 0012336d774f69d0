//! `ipc_throughput`: bytes per second through the frame protocol over a real pipe, against
//! a raw copy of the same bytes through the same kind of pipe, in one run.
//!
//! - framed: this process encodes `payload_start`, 1 MiB `payload_chunk` frames and
//!   `payload_end` with [`FrameCodec`] through the writer task ([`spawn_writer`]) into a
//!   child's stdin; the child (this binary again) decodes them with a [`frame_reader`] over
//!   the worker's own stdin pipe and counts the chunk bytes.
//! - raw: this process writes the same bytes, 1 MiB at a time, with blocking `write_all`
//!   calls into a child's stdin; the child reads them with blocking reads into a 1 MiB
//!   buffer and counts them: a plain `cat`-like copy, no runtime on either side.
//!
//! Both children are this executable; both times run from spawn to the child's exit,
//! with its count checked. Criterion times 64 MiB of each; under
//! `cargo bench` (which passes `--bench`) alternating paired rounds of 2 GiB each print
//! GB/s (10^9 bytes per second) for both and their ratio (target: framed ≥ 0.5 × raw).
//!
//! `cargo bench -p troupe-workers --bench ipc_throughput`

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use futures::StreamExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;
use troupe_workers::ipc::channel::stdio;
use troupe_workers::ipc::{CHUNK_LEN, Frame, FrameCodec, PayloadEnd, PayloadStart, frame_reader, spawn_writer};

/// Set in a child: which side of the copy it is (`framed` or `raw`).
const CHILD_ENV: &str = "TROUPE_IPC_THROUGHPUT_CHILD";
const MIB: u64 = 1 << 20;
const SMALL: u64 = 64 * MIB;
const LARGE: u64 = 2048 * MIB;
const ROUNDS: usize = 5;

/// The child's side: count what arrives, print the count.
fn child(mode: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let count = runtime.block_on(async {
        let mut count = 0u64;
        match mode {
            "framed" => {
                let mut frames = frame_reader(stdio::input(), FrameCodec::new());
                while let Some(frame) = frames.next().await {
                    match frame.expect("a valid frame") {
                        Frame::PayloadStart(_) => {}
                        Frame::PayloadChunk { bytes, .. } => count += bytes.len() as u64,
                        Frame::PayloadEnd(_) => break,
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            _ => {
                use std::io::Read;
                let mut input = std::io::stdin().lock();
                let mut buf = vec![0u8; CHUNK_LEN];
                loop {
                    let n = input.read(&mut buf).expect("reads");
                    if n == 0 {
                        break;
                    }
                    count += n as u64;
                }
            }
        }
        count
    });
    println!("{count}");
}

fn spawn_child(mode: &str) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().expect("the bench binary"))
        .env(CHILD_ENV, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the child starts")
}

async fn child_count(mut child: tokio::process::Child) -> u64 {
    let mut out = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut out).await.expect("reads the count");
    let status = child.wait().await.expect("the child ends");
    assert!(status.success(), "{status:?}");
    out.trim().parse().expect("a count")
}

/// `len` bytes as frames to a decoding child; the time from spawn to its exit.
async fn framed(block: &Bytes, len: u64) -> Duration {
    let started = Instant::now();
    let mut child = spawn_child("framed");
    let (frames, writer) = spawn_writer(child.stdin.take().expect("piped"), FrameCodec::new());
    let start = PayloadStart { stream_id: 1, name: "bench.bin".into(), total_len: Some(len), checksum: false };
    frames.send(Frame::PayloadStart(start)).await.expect("sends");
    for _ in 0..len / block.len() as u64 {
        frames.send(Frame::PayloadChunk { stream_id: 1, bytes: block.clone() }).await.expect("sends");
    }
    frames.send(Frame::PayloadEnd(PayloadEnd { stream_id: 1, sha256: None })).await.expect("sends");
    drop(frames);
    writer.await.expect("joins").expect("writes");
    assert_eq!(child_count(child).await, len);
    started.elapsed()
}

/// `len` raw bytes to a counting child, with blocking writes; the time from spawn to its
/// exit.
fn raw(block: &Bytes, len: u64) -> Duration {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe().expect("the bench binary"))
        .env(CHILD_ENV, "raw")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let mut stdin = child.stdin.take().expect("piped");
    for _ in 0..len / block.len() as u64 {
        stdin.write_all(block).expect("writes");
    }
    drop(stdin);
    let mut out = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut out).expect("reads the count");
    assert!(child.wait().expect("the child ends").success());
    assert_eq!(out.trim().parse::<u64>().expect("a count"), len);
    started.elapsed()
}

fn gb_per_s(len: u64, time: Duration) -> f64 {
    len as f64 / time.as_secs_f64() / 1e9
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn paired(runtime: &Runtime, block: &Bytes) {
    let (mut raw_rates, mut framed_rates) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        // Alternating which goes first keeps drift (page cache, frequency) out of the ratio.
        let (raw_time, framed_time) = if round % 2 == 1 {
            let r = raw(block, LARGE);
            (r, runtime.block_on(framed(block, LARGE)))
        } else {
            let f = runtime.block_on(framed(block, LARGE));
            (raw(block, LARGE), f)
        };
        let (r, f) = (gb_per_s(LARGE, raw_time), gb_per_s(LARGE, framed_time));
        println!("round {round}: raw pipe {r:.2} GB/s, framed {f:.2} GB/s, ratio {:.2}", f / r);
        raw_rates.push(r);
        framed_rates.push(f);
    }
    let (r, f) = (median(raw_rates), median(framed_rates));
    println!(
        "ipc_throughput: {} GiB per copy, {ROUNDS} paired rounds; median raw pipe {r:.2} GB/s, framed {f:.2} GB/s, \
         ratio {:.2} (target >= 0.5)",
        LARGE / 1024 / MIB,
        f / r
    );
}

fn main() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        child(&mode);
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let block = Bytes::from((0..CHUNK_LEN).map(|i| (i % 251) as u8).collect::<Vec<u8>>());

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = criterion.benchmark_group("ipc_throughput");
    group.throughput(Throughput::Bytes(SMALL));
    group.bench_function("framed_64MiB", |b| b.iter(|| runtime.block_on(framed(&block, SMALL))));
    group.bench_function("raw_pipe_64MiB", |b| b.iter(|| raw(&block, SMALL)));
    group.finish();
    criterion.final_summary();
    // The paired rounds run under `cargo bench` (which passes `--bench`) only: not under
    // `cargo test --benches`, nor when listing or profiling.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--list" || a == "--profile-time") {
        return;
    }
    paired(&runtime, &block);
}
