//! The Prometheus text rendered from a realistic event sequence, read back by real
//! text-format parsers: every sample equals what the events said, no more, no less, and
//! label values that need escaping survive.
//!
//! Two parsers: the `prometheus-parse` crate (it does not unescape label values, and splits
//! them on `,` and `=`, so its tool name avoids those and its expectation is the escaped
//! text), and the official Python client's parser (`prometheus_client`, installed by
//! `scripts/install-test-deps`), which unescapes as Prometheus does: there the tool name
//! comes back byte for byte.

use prometheus_parse::{Scrape, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use troupe_core::{
    AgentEvent, AgentEventKind, AgentId, Attribution, PauseReason, RunId, RunOutcomeKind, ToolCallId, Usage,
};
use troupe_telemetry::{PrometheusExporter, TelemetryMetrics};
use troupe_testkit::test_deps;

const CLAUDE: &str = "anthropic/claude-sonnet";
const MINI: &str = "openai/gpt-5-mini";

/// A tool name with a quote, a backslash and a line feed.
const AWKWARD: &str = "fs\"odd\\name\nline2";
/// How the text format must write it.
const AWKWARD_ESCAPED: &str = r#"fs\"odd\\name\nline2"#;
/// Worse still: separators and braces too, for the parser that handles them.
const AWKWARD_FULL: &str = "fs\"odd\\name\nline2,{a=b} é";

/// Three runs of two agents: one completes after two model calls and two tool calls (one
/// failing), one fails after a retry and a fallback, one pauses for an approval.
fn observe_runs(metrics: &TelemetryMetrics, awkward_tool: &str) {
    let mut seq = 0;
    let mut emit = |agent: &str, run: &str, at: u64, kind: AgentEventKind| {
        let attribution =
            Attribution { timestamp_ms: at, ..Attribution::now(AgentId::new(agent), RunId::new(run), seq) };
        seq += 1;
        metrics.observe(&AgentEvent::new(attribution, kind));
    };
    let call = |id: &str| ToolCallId::new(id);
    let first = Usage {
        input_tokens: 1000,
        output_tokens: 200,
        cache_read_tokens: 5000,
        cache_write_tokens: 300,
        cache_write_long_tokens: 0,
        reasoning_tokens: 50,
    };
    let second = Usage { input_tokens: 200, output_tokens: 50, ..Usage::default() };

    emit("triage", "r1", 1_000, AgentEventKind::RunStarted { instruction: "sort".into(), model: CLAUDE.into() });
    emit("triage", "r1", 1_001, AgentEventKind::StepStarted { step: 1 });
    emit("triage", "r1", 1_002, AgentEventKind::MessageDelta { message_id: "m1".into(), delta: "Reading".into() });
    emit("triage", "r1", 1_100, AgentEventKind::Usage { model: CLAUDE.into(), usage: first, cost_usd: Some(0.0123) });
    let start = |id, tool: &str| AgentEventKind::ToolCallStart {
        call_id: call(id),
        tool: tool.into(),
        parent_message_id: Some("m1".into()),
    };
    emit("triage", "r1", 1_200, start("c1", "fs.read"));
    emit("triage", "r1", 1_201, start("c2", awkward_tool));
    let result = |id, is_error| AgentEventKind::ToolCallResult { call_id: call(id), content: "…".into(), is_error };
    emit("triage", "r1", 1_300, result("c1", false));
    emit("triage", "r1", 1_301, result("c2", true));
    emit("triage", "r1", 2_000, AgentEventKind::Usage { model: CLAUDE.into(), usage: second, cost_usd: Some(0.0021) });
    let total = first + second;
    let done = AgentEventKind::RunFinished {
        outcome: RunOutcomeKind::Completed,
        output: Some("sorted".into()),
        usage: total,
        cost_usd: 0.0144,
    };
    emit("triage", "r1", 4_500, done);

    emit("triage", "r2", 10_000, AgentEventKind::RunStarted { instruction: "again".into(), model: CLAUDE.into() });
    emit("triage", "r2", 10_050, AgentEventKind::Retrying { attempt: 1, delay_ms: 20, reason: "503".into() });
    let fallback = AgentEventKind::ModelFallback { from: CLAUDE.into(), to: MINI.into(), reason: "overloaded".into() };
    emit("triage", "r2", 10_100, fallback);
    let mini = Usage { input_tokens: 400, output_tokens: 10, ..Usage::default() };
    emit("triage", "r2", 10_200, AgentEventKind::Usage { model: MINI.into(), usage: mini, cost_usd: None });
    let error = AgentEventKind::RunError { message: "upstream".into(), code: Some("provider_error".into()) };
    emit("triage", "r2", 10_250, error);

    emit("coder", "r3", 0, AgentEventKind::RunStarted { instruction: "fix".into(), model: CLAUDE.into() });
    emit("coder", "r3", 100, start("c3", "fs.write"));
    let reason = PauseReason::Approval {
        call_id: call("c3"),
        tool: "fs.write".into(),
        arguments: serde_json::json!({"path": "src/lib.rs"}),
        reason: "writes the workspace".into(),
    };
    emit("coder", "r3", 200, AgentEventKind::RunPaused { reason });
    let paused = AgentEventKind::RunFinished {
        outcome: RunOutcomeKind::Paused,
        output: None,
        usage: Usage::default(),
        cost_usd: 0.0,
    };
    emit("coder", "r3", 700, paused);

    metrics.set_queue_depth(4);
    metrics.set_active_runs(2);
}

type Key = (String, BTreeMap<String, String>);

/// The family `name`: troupe's own are prefixed, the GenAI conventions' are not.
fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    let name = if name.starts_with("gen_ai_") { name.to_owned() } else { format!("troupe_{name}") };
    (name, labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
}

fn histogram(out: &mut BTreeMap<Key, f64>, name: &str, labels: &[(&str, &str)], buckets: &[(&str, f64)], sum: f64) {
    for (le, count) in buckets {
        let mut with_le = labels.to_vec();
        with_le.push(("le", le));
        out.insert(key(&format!("{name}_bucket"), &with_le), *count);
    }
    let count = buckets.last().map_or(0.0, |(_, c)| *c);
    out.insert(key(&format!("{name}_sum"), labels), sum);
    out.insert(key(&format!("{name}_count"), labels), count);
}

/// Every bucket bound as the exposition writes it.
fn bounds(bounds: &[f64]) -> Vec<String> {
    bounds.iter().map(|b| b.to_string()).chain(["+Inf".to_owned()]).collect()
}

/// Cumulative bucket counts of `observations` over `bounds`, paired with the `le` text.
fn cumulative(bound_values: &[f64], observations: &[f64]) -> Vec<(String, f64)> {
    bounds(bound_values)
        .into_iter()
        .zip(bound_values.iter().copied().chain([f64::INFINITY]))
        .map(|(le, bound)| (le, observations.iter().filter(|o| **o <= bound).count() as f64))
        .collect()
}

/// Every sample the runs above must produce, with the awkward tool labelled `tool_label`.
fn expected(tool_label: &str) -> BTreeMap<Key, f64> {
    let mut out = BTreeMap::new();
    let mut put = |name: &str, labels: &[(&str, &str)], value: f64| {
        out.insert(key(name, labels), value);
    };
    put("runs_started_total", &[("agent", "triage")], 2.0);
    put("runs_started_total", &[("agent", "coder")], 1.0);
    put("runs_finished_total", &[("agent", "triage"), ("outcome", "completed")], 1.0);
    put("runs_finished_total", &[("agent", "triage"), ("outcome", "failed")], 1.0);
    put("runs_finished_total", &[("agent", "coder"), ("outcome", "paused")], 1.0);
    put("run_errors_total", &[("agent", "triage"), ("code", "provider_error")], 1.0);
    put("model_calls_total", &[("model", CLAUDE)], 2.0);
    put("model_calls_total", &[("model", MINI)], 1.0);
    put("model_unpriced_calls_total", &[("model", CLAUDE)], 0.0);
    put("model_unpriced_calls_total", &[("model", MINI)], 1.0);
    for (model, tokens) in [(CLAUDE, [1200.0, 250.0, 5000.0, 300.0]), (MINI, [400.0, 10.0, 0.0, 0.0])] {
        for (kind, n) in ["input", "output", "cache_read", "cache_write"].into_iter().zip(tokens) {
            put("tokens_total", &[("model", model), ("type", kind)], n);
        }
    }
    put("reasoning_tokens_total", &[("model", CLAUDE)], 50.0);
    put("reasoning_tokens_total", &[("model", MINI)], 0.0);
    put("cost_usd_total", &[("model", CLAUDE)], 0.0144);
    put("cost_usd_total", &[("model", MINI)], 0.0);
    put("model_retries_total", &[], 1.0);
    put("model_fallbacks_total", &[("from", CLAUDE), ("to", MINI)], 1.0);
    put("tool_calls_total", &[("tool", "fs.read"), ("result", "ok")], 1.0);
    put("tool_calls_total", &[("tool", "fs.read"), ("result", "error")], 0.0);
    put("tool_calls_total", &[("tool", tool_label), ("result", "ok")], 0.0);
    put("tool_calls_total", &[("tool", tool_label), ("result", "error")], 1.0);
    put("tool_calls_total", &[("tool", "fs.write"), ("result", "ok")], 0.0);
    put("tool_calls_total", &[("tool", "fs.write"), ("result", "error")], 0.0);
    put("tool_approval_requests_total", &[("tool", "fs.read")], 0.0);
    put("tool_approval_requests_total", &[("tool", tool_label)], 0.0);
    put("tool_approval_requests_total", &[("tool", "fs.write")], 1.0);
    put("queue_depth", &[], 4.0);
    put("active_runs", &[], 2.0);
    put("runs_in_flight", &[], 0.0);

    let durations = troupe_telemetry::RUN_DURATION_BUCKETS;
    for (agent, outcome, seconds) in
        [("triage", "completed", 3.5), ("triage", "failed", 0.25), ("coder", "paused", 0.7)]
    {
        let buckets = cumulative(durations, &[seconds]);
        let buckets: Vec<(&str, f64)> = buckets.iter().map(|(le, c)| (le.as_str(), *c)).collect();
        histogram(&mut out, "run_duration_seconds", &[("agent", agent), ("outcome", outcome)], &buckets, seconds);
    }
    let tokens = troupe_telemetry::TOKEN_USAGE_BUCKETS;
    // The conventions' attributes: the operation, the provider's conventional name, the
    // model's own name.
    let (claude, mini) = (("anthropic", "claude-sonnet"), ("openai", "gpt-5-mini"));
    for ((provider, model), kind, observations) in [
        (claude, "input", vec![6300.0, 200.0]),
        (claude, "output", vec![200.0, 50.0]),
        (mini, "input", vec![400.0]),
        (mini, "output", vec![10.0]),
    ] {
        let buckets = cumulative(tokens, &observations);
        let buckets: Vec<(&str, f64)> = buckets.iter().map(|(le, c)| (le.as_str(), *c)).collect();
        let labels = [
            ("gen_ai_operation_name", "chat"),
            ("gen_ai_provider_name", provider),
            ("gen_ai_request_model", model),
            ("gen_ai_token_type", kind),
        ];
        histogram(&mut out, "gen_ai_client_token_usage", &labels, &buckets, observations.iter().sum());
    }
    // A step's first call lasts from the step's start to its usage: r1's first (99 ms);
    // r2's call came with no step observed.
    let seconds = troupe_telemetry::OPERATION_DURATION_BUCKETS;
    for ((provider, model), observations) in [(claude, vec![0.099]), (mini, vec![])] {
        let buckets = cumulative(seconds, &observations);
        let buckets: Vec<(&str, f64)> = buckets.iter().map(|(le, c)| (le.as_str(), *c)).collect();
        let labels =
            [("gen_ai_operation_name", "chat"), ("gen_ai_provider_name", provider), ("gen_ai_request_model", model)];
        let name = "gen_ai_client_operation_duration_seconds";
        histogram(&mut out, name, &labels, &buckets, observations.iter().sum());
    }
    out
}

fn assert_same_samples(parsed: &BTreeMap<Key, f64>, expected: &BTreeMap<Key, f64>) {
    let missing: Vec<_> = expected.keys().filter(|k| !parsed.contains_key(*k)).collect();
    let extra: Vec<_> = parsed.keys().filter(|k| !expected.contains_key(*k)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:#?}\nextra {extra:#?}");
    for (k, want) in expected {
        let got = parsed[k];
        assert!((got - want).abs() < 1e-9, "{k:?}: got {got}, want {want}");
    }
}

fn render(awkward_tool: &str) -> String {
    let metrics = TelemetryMetrics::new();
    observe_runs(&metrics, awkward_tool);
    PrometheusExporter::new().render(&metrics.snapshot())
}

#[test]
fn prometheus_parse_reads_back_every_observed_sample_with_types_and_escapes() {
    let text = render(AWKWARD);
    assert!(text.contains(&format!("tool=\"{AWKWARD_ESCAPED}\"")), "{text}");
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");

    let mut parsed = BTreeMap::new();
    for sample in &scrape.samples {
        let labels: BTreeMap<String, String> = sample.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let name = sample.metric.clone();
        let counter = name.ends_with("_total");
        let gauge = ["troupe_queue_depth", "troupe_active_runs", "troupe_runs_in_flight"].contains(&name.as_str());
        match &sample.value {
            // A counter's TYPE line names it with `_total`, or it would parse untyped.
            Value::Counter(v) => {
                assert!(counter, "{name} typed counter");
                parsed.insert((name, labels), *v);
            }
            Value::Gauge(v) => {
                assert!(gauge, "{name} typed gauge");
                parsed.insert((name, labels), *v);
            }
            Value::Histogram(buckets) => {
                for bucket in buckets {
                    let mut with_le = labels.clone();
                    let le =
                        if bucket.less_than.is_infinite() { "+Inf".to_owned() } else { bucket.less_than.to_string() };
                    with_le.insert("le".into(), le);
                    parsed.insert((format!("{name}_bucket"), with_le), bucket.count);
                }
            }
            // `_sum` and `_count` have no TYPE line of their own.
            Value::Untyped(v) => {
                assert!(name.ends_with("_sum") || name.ends_with("_count"), "{name} is untyped");
                parsed.insert((name, labels), *v);
            }
            Value::Summary(_) => panic!("{name}: no summaries are exported"),
        }
    }
    assert_same_samples(&parsed, &expected(AWKWARD_ESCAPED));
    assert_eq!(scrape.docs.len(), 18, "every family has its HELP line");
    assert!(scrape.docs.contains_key("troupe_runs_started_total"));
}

/// Parses the exposition on stdin with the official client and prints every family's type
/// and every sample as JSON.
const PYTHON_PARSER: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {"types": {}, "samples": []}
for family in text_string_to_metric_families(sys.stdin.read()):
    out["types"][family.name] = family.type
    for s in family.samples:
        out["samples"].append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;

#[test]
fn the_official_python_parser_unescapes_every_label_back_to_the_observed_name() {
    let Some(python) = test_deps::python_with("prometheus_client") else {
        test_deps::skip(
            "the_official_python_parser_unescapes_every_label_back_to_the_observed_name",
            "prometheus_client is not installed",
        );
        return;
    };
    let text = render(AWKWARD_FULL);
    let mut child = Command::new(python)
        .args(["-c", PYTHON_PARSER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts python");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("writes the exposition");
    let output = child.wait_with_output().expect("python ends");
    assert!(output.status.success(), "the parser refused the text: {}", String::from_utf8_lossy(&output.stderr));
    let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON from the parser");

    let types = parsed["types"].as_object().expect("types");
    assert_eq!(types.len(), 18);
    // The client names a counter family without `_total`, as OpenMetrics does.
    assert_eq!(types["troupe_tool_calls"], "counter");
    assert_eq!(types["troupe_run_duration_seconds"], "histogram");
    assert_eq!(types["gen_ai_client_token_usage"], "histogram");
    assert_eq!(types["gen_ai_client_operation_duration_seconds"], "histogram");
    assert_eq!(types["troupe_queue_depth"], "gauge");

    let mut samples = BTreeMap::new();
    for sample in parsed["samples"].as_array().expect("samples") {
        let name = sample[0].as_str().expect("name").to_owned();
        let labels = sample[1]
            .as_object()
            .expect("labels")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_owned()))
            .collect();
        samples.insert((name, labels), sample[2].as_f64().expect("value"));
    }
    assert_same_samples(&samples, &expected(AWKWARD_FULL));
}
