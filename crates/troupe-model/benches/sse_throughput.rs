//! `sse_throughput`: bytes → events → assembled message, per vendor, against a baseline of
//! plain `serde_json::from_slice::<Value>` over the same `data:` payloads, in the same run.
//!
//! Both are reported as MB/s of the whole stream, so their ratio is the ratio of times.
//! After criterion's report, a paired measurement (alternating rounds of both, median of
//! the per-round ratios) prints `ratio` lines that are robust to a noisy machine.

use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};
use troupe_model::anthropic::AnthropicParser;
use troupe_model::gemini::GeminiParser;
use troupe_model::openai_chat::OpenAiChatParser;
use troupe_model::openai_responses::OpenAiResponsesParser;
use troupe_model::{EventParser, StreamAccumulator, StreamParser};
use troupe_testkit::MockTurn;
use troupe_testkit::encode::{Vendor, encode_bytes};

/// A long, realistic response: prose in small deltas, reasoning, and tool calls with
/// escaped JSON arguments.
fn workload() -> MockTurn {
    let prose = "The quick brown fox jumps over the lazy dog; \"quotes\", back\\slashes and ünïcödé — all escaped.\n";
    let mut turn = MockTurn::text(prose.repeat(2_000)).with_delta_chars(24);
    for n in 0..20 {
        let args = serde_json::json!({"path": format!("src/module_{n}.rs"), "content": prose.repeat(20), "line": n});
        turn = turn.with_tool_call(format!("call_{n}"), "fs_write", args);
    }
    turn
}

fn data_payloads(bytes: &[u8]) -> Vec<Vec<u8>> {
    let text = std::str::from_utf8(bytes).expect("encoders write UTF-8");
    text.lines()
        .filter_map(|line| line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")))
        .filter(|data| data.trim() != "[DONE]")
        .map(|data| data.as_bytes().to_vec())
        .collect()
}

fn parse_and_accumulate<P: StreamParser>(parser: P, bytes: &[u8]) -> usize {
    let mut parser = EventParser::new("bench", parser);
    let mut events = Vec::with_capacity(64);
    let mut accumulator = StreamAccumulator::new();
    // Network reads arrive in chunks; 16 KiB is a typical read size.
    for chunk in bytes.chunks(16 * 1024) {
        parser.feed(chunk, &mut events).expect("benchmark stream parses");
        for event in events.drain(..) {
            accumulator.push(&event).expect("benchmark stream folds");
        }
    }
    parser.finish(&mut events).expect("benchmark stream is complete");
    for event in events.drain(..) {
        accumulator.push(&event).expect("benchmark stream folds");
    }
    accumulator.finish().expect("benchmark response").message.content.len()
}

fn serde_baseline(payloads: &[Vec<u8>]) -> usize {
    payloads
        .iter()
        .map(|p| match serde_json::from_slice::<serde_json::Value>(p).expect("payload is JSON") {
            serde_json::Value::Object(map) => map.len(),
            _ => 0,
        })
        .sum()
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    payloads: Vec<Vec<u8>>,
    run: fn(&[u8]) -> usize,
}

fn cases() -> Vec<Case> {
    let turn = workload();
    let make = |name, vendor, run| {
        let bytes = encode_bytes(vendor, &turn);
        let payloads = data_payloads(&bytes);
        Case { name, bytes, payloads, run }
    };
    vec![
        make("anthropic", Vendor::Anthropic, |b| parse_and_accumulate(AnthropicParser::new("bench"), b)),
        make("openai_chat", Vendor::OpenAiChat, |b| parse_and_accumulate(OpenAiChatParser::new("bench"), b)),
        make("openai_responses", Vendor::OpenAiResponses, |b| {
            parse_and_accumulate(OpenAiResponsesParser::new("bench"), b)
        }),
        make("gemini", Vendor::Gemini, |b| parse_and_accumulate(GeminiParser::new("bench"), b)),
    ]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Alternates the two measurements so that both see the same machine state, and returns
/// the median of (baseline time / troupe time): troupe's throughput as a multiple of the
/// baseline's.
fn paired_ratio(case: &Case) -> f64 {
    let time = |f: &dyn Fn() -> usize| {
        let start = Instant::now();
        for _ in 0..5 {
            black_box(f());
        }
        start.elapsed().as_secs_f64()
    };
    let ratios = (0..31)
        .map(|_| {
            let ours = time(&|| (case.run)(black_box(&case.bytes)));
            let baseline = time(&|| serde_baseline(black_box(&case.payloads)));
            baseline / ours
        })
        .collect();
    median(ratios)
}

fn main() {
    let cases = cases();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    for case in &cases {
        let mut group = criterion.benchmark_group(format!("sse_throughput/{}", case.name));
        group.throughput(Throughput::Bytes(case.bytes.len() as u64));
        group.bench_function("troupe_parse_accumulate", |b| b.iter(|| (case.run)(black_box(&case.bytes))));
        group
            .bench_function("serde_json_from_slice_baseline", |b| b.iter(|| serde_baseline(black_box(&case.payloads))));
        group.finish();
    }
    criterion.final_summary();
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    println!(
        "\nsse_throughput: troupe parse+accumulate throughput as a multiple of serde_json::from_slice::<Value> (target >= 0.5)"
    );
    for case in &cases {
        let mb = case.bytes.len() as f64 / 1e6;
        println!(
            "ratio {:<17} {:>5.2}x  ({mb:.2} MB stream, {} data payloads)",
            case.name,
            paired_ratio(case),
            case.payloads.len()
        );
    }
}
