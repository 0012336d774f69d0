//! [`PrometheusExporter`]: the Prometheus text exposition format, version 0.0.4.

use crate::error::TelemetryError;
use crate::exporter::MetricsExporter;
use crate::histogram::HistogramSnapshot;
use crate::semconv::{CHAT, provider_and_model};
use crate::snapshot::TelemetrySnapshot;
use std::fmt::Write as _;

/// The prefix of every metric name.
pub const METRIC_PREFIX: &str = "troupe_";

/// Renders a snapshot in the Prometheus text format 0.0.4, for a `/metrics` endpoint.
///
/// Every family has its `# HELP` and `# TYPE` lines, even before it has a sample;
/// counters end in `_total`; histograms give cumulative `_bucket{le="…"}` samples ending
/// with `le="+Inf"`, then `_sum` and `_count`. Label values are escaped (`\\`, `\"`,
/// `\n`), so any agent, model or tool name is safe. Output is sorted by label value, so
/// equal snapshots render identically.
///
/// | metric | type | labels |
/// |---|---|---|
/// | `troupe_runs_started_total` | counter | `agent` |
/// | `troupe_runs_finished_total` | counter | `agent`, `outcome` |
/// | `troupe_run_errors_total` | counter | `agent`, `code` |
/// | `troupe_run_duration_seconds` | histogram | `agent`, `outcome` |
/// | `troupe_model_calls_total` | counter | `model` |
/// | `troupe_model_unpriced_calls_total` | counter | `model` |
/// | `troupe_tokens_total` | counter | `model`, `type` (`input`, `output`, `cache_read`, `cache_write`) |
/// | `troupe_reasoning_tokens_total` | counter | `model` (a part of the `output` tokens) |
/// | `troupe_cost_usd_total` | counter | `model` |
/// | `gen_ai_client_token_usage` | histogram | `gen_ai_operation_name` (`chat`), `gen_ai_provider_name`, `gen_ai_request_model`, `gen_ai_token_type` (`input`, `output`) |
/// | `gen_ai_client_operation_duration_seconds` | histogram | `gen_ai_operation_name` (`chat`), `gen_ai_provider_name`, `gen_ai_request_model` |
/// | `troupe_model_retries_total` | counter | |
/// | `troupe_model_fallbacks_total` | counter | `from`, `to` |
/// | `troupe_tool_calls_total` | counter | `tool`, `result` (`ok`, `error`) |
/// | `troupe_tool_approval_requests_total` | counter | `tool` |
/// | `troupe_queue_depth` | gauge | |
/// | `troupe_active_runs` | gauge | |
/// | `troupe_runs_in_flight` | gauge | |
///
/// The `gen_ai_…` families are the OpenTelemetry GenAI metrics `gen_ai.client.token.usage`
/// and `gen_ai.client.operation.duration` under the usual OpenTelemetry-to-Prometheus
/// renaming, with the conventions' required attributes (the provider's conventional
/// name, the model's name without troupe's `provider/` prefix) and bucket boundaries,
/// beside troupe's own `troupe_…` families; token usage's `input` counts every prompt
/// token of a call, cached ones included, and a step's first model call lasts from the
/// step's start to its usage.
///
/// ```
/// use troupe_telemetry::{PrometheusExporter, TelemetryMetrics};
///
/// let metrics = TelemetryMetrics::new();
/// metrics.set_active_runs(2);
/// let text = PrometheusExporter::new().render(&metrics.snapshot());
/// assert!(text.contains("# TYPE troupe_active_runs gauge\ntroupe_active_runs 2\n"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PrometheusExporter;

/// The `Content-Type` of the text format 0.0.4.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl PrometheusExporter {
    /// The exporter.
    pub fn new() -> Self {
        PrometheusExporter
    }

    /// The snapshot as exposition text.
    pub fn render(&self, snapshot: &TelemetrySnapshot) -> String {
        let mut out = Text::default();
        render_runs(&mut out, snapshot);
        render_models(&mut out, snapshot);
        render_tools(&mut out, snapshot);
        render_gauges(&mut out, snapshot);
        out.0
    }
}

impl MetricsExporter for PrometheusExporter {
    fn content_type(&self) -> &'static str {
        PROMETHEUS_CONTENT_TYPE
    }

    fn export(&self, snapshot: &TelemetrySnapshot) -> Result<Vec<u8>, TelemetryError> {
        Ok(self.render(snapshot).into_bytes())
    }
}

fn render_runs(out: &mut Text, s: &TelemetrySnapshot) {
    out.family("runs_started_total", "counter", "Runs that began; a resumed run begins again.");
    for (agent, a) in &s.agents {
        out.sample("runs_started_total", &[("agent", agent)], a.runs_started as f64);
    }
    out.family("runs_finished_total", "counter", "Runs that ended or paused, by outcome.");
    for (agent, a) in &s.agents {
        for (outcome, n) in &a.runs_finished {
            out.sample("runs_finished_total", &[("agent", agent), ("outcome", outcome)], *n as f64);
        }
    }
    out.family("run_errors_total", "counter", "Runs that failed with an error, by error code.");
    for (agent, a) in &s.agents {
        for (code, n) in &a.run_errors {
            out.sample("run_errors_total", &[("agent", agent), ("code", code)], *n as f64);
        }
    }
    out.family("run_duration_seconds", "histogram", "Wall-clock time from a run's start to its end, in seconds.");
    for (agent, a) in &s.agents {
        for (outcome, h) in &a.run_duration_seconds {
            out.histogram("run_duration_seconds", &[("agent", agent), ("outcome", outcome)], h);
        }
    }
}

fn render_models(out: &mut Text, s: &TelemetrySnapshot) {
    out.family("model_calls_total", "counter", "Model calls.");
    for (model, m) in &s.models {
        out.sample("model_calls_total", &[("model", model)], m.calls as f64);
    }
    out.family("model_unpriced_calls_total", "counter", "Model calls whose price is unknown, counted at 0 USD.");
    for (model, m) in &s.models {
        out.sample("model_unpriced_calls_total", &[("model", model)], m.unpriced_calls as f64);
    }
    out.family("tokens_total", "counter", "Tokens of model calls, by type.");
    for (model, m) in &s.models {
        let t = &m.tokens;
        for (kind, n) in [
            ("input", t.input_tokens),
            ("output", t.output_tokens),
            ("cache_read", t.cache_read_tokens),
            ("cache_write", t.cache_write_tokens),
        ] {
            out.sample("tokens_total", &[("model", model), ("type", kind)], n as f64);
        }
    }
    out.family("reasoning_tokens_total", "counter", "Output tokens spent on reasoning, where the provider reports it.");
    for (model, m) in &s.models {
        out.sample("reasoning_tokens_total", &[("model", model)], m.tokens.reasoning_tokens as f64);
    }
    out.family("cost_usd_total", "counter", "Cost of model calls by the registry's prices, in USD.");
    for (model, m) in &s.models {
        out.sample("cost_usd_total", &[("model", model)], m.cost_usd);
    }
    out.family("gen_ai_client_token_usage", "histogram", "Tokens per model call (gen_ai.client.token.usage).");
    for (model, m) in &s.models {
        let (provider, name) = provider_and_model(model);
        for (kind, h) in [("input", &m.input_token_usage), ("output", &m.output_token_usage)] {
            let labels = [
                ("gen_ai_operation_name", CHAT),
                ("gen_ai_provider_name", provider),
                ("gen_ai_request_model", name),
                ("gen_ai_token_type", kind),
            ];
            out.histogram("gen_ai_client_token_usage", &labels, h);
        }
    }
    out.family(
        "gen_ai_client_operation_duration_seconds",
        "histogram",
        "Seconds per model call (gen_ai.client.operation.duration).",
    );
    for (model, m) in &s.models {
        let (provider, name) = provider_and_model(model);
        let labels =
            [("gen_ai_operation_name", CHAT), ("gen_ai_provider_name", provider), ("gen_ai_request_model", name)];
        out.histogram("gen_ai_client_operation_duration_seconds", &labels, &m.operation_duration);
    }
    out.family("model_retries_total", "counter", "Model calls retried after a transient failure.");
    out.sample("model_retries_total", &[], s.model_retries as f64);
    out.family("model_fallbacks_total", "counter", "Times a model was overloaded and the next of its chain took over.");
    for (from, m) in &s.models {
        for (to, n) in &m.fallbacks {
            out.sample("model_fallbacks_total", &[("from", from), ("to", to)], *n as f64);
        }
    }
}

fn render_tools(out: &mut Text, s: &TelemetrySnapshot) {
    out.family("tool_calls_total", "counter", "Tool calls that returned a result, by result.");
    for (tool, t) in &s.tools {
        out.sample("tool_calls_total", &[("tool", tool), ("result", "ok")], t.calls_ok as f64);
        out.sample("tool_calls_total", &[("tool", tool), ("result", "error")], t.calls_error as f64);
    }
    out.family("tool_approval_requests_total", "counter", "Tool calls that asked a person for approval.");
    for (tool, t) in &s.tools {
        out.sample("tool_approval_requests_total", &[("tool", tool)], t.approval_requests as f64);
    }
}

fn render_gauges(out: &mut Text, s: &TelemetrySnapshot) {
    let g = &s.gauges;
    out.family("queue_depth", "gauge", "Runs waiting to be claimed.");
    out.sample("queue_depth", &[], g.queue_depth as f64);
    out.family("active_runs", "gauge", "Runs executing.");
    out.sample("active_runs", &[], g.active_runs as f64);
    out.family("runs_in_flight", "gauge", "Runs whose start was observed and whose end was not yet.");
    out.sample("runs_in_flight", &[], g.runs_in_flight as f64);
}

/// The exposition text being written. Writing to a `String` cannot fail, so the
/// `fmt::Result`s are dropped.
#[derive(Default)]
struct Text(String);

/// The prefix of a family: [`METRIC_PREFIX`] for troupe's own; none for the GenAI
/// conventions' metrics, which keep the names every GenAI dashboard knows.
fn prefix_of(name: &str) -> &'static str {
    if name.starts_with(GEN_AI_PREFIX) { "" } else { METRIC_PREFIX }
}

/// The start of the GenAI conventions' metric names.
const GEN_AI_PREFIX: &str = "gen_ai_";

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let prefix = prefix_of(name);
        let _ = writeln!(self.0, "# HELP {prefix}{name} {}", escape_help(help));
        let _ = writeln!(self.0, "# TYPE {prefix}{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.series(name, "", labels, None, value);
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        for bucket in &h.buckets {
            self.series(name, "_bucket", labels, Some(bucket.le), bucket.count as f64);
        }
        self.series(name, "_bucket", labels, Some(f64::INFINITY), h.count as f64);
        self.series(name, "_sum", labels, None, h.sum);
        self.series(name, "_count", labels, None, h.count as f64);
    }

    fn series(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], le: Option<f64>, value: f64) {
        let _ = write!(self.0, "{}{name}{suffix}", prefix_of(name));
        if !labels.is_empty() || le.is_some() {
            self.0.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{key}=\"{}\"", escape_label_value(value));
            }
            if let Some(le) = le {
                if !labels.is_empty() {
                    self.0.push(',');
                }
                let _ = write!(self.0, "le=\"{}\"", format_value(le));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {}", format_value(value));
    }
}

/// A label value as the text format quotes it: backslash, double quote and line feed
/// escaped.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text as the text format wants it: backslash and line feed escaped.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: integers without a fraction, `+Inf`, `-Inf`, `NaN` as Prometheus
/// spells them.
fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value == f64::INFINITY {
        "+Inf".to_owned()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        // `Display` never uses an exponent and prints integral values without ".0".
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Bucket;
    use crate::snapshot::AgentTelemetry;

    #[test]
    fn label_values_escape_backslash_quote_and_newline_only() {
        assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label_value("line\nnext"), "line\\nnext");
        assert_eq!(escape_label_value("tab\tand é"), "tab\tand é");
    }

    #[test]
    fn values_are_spelled_as_prometheus_spells_them() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(1e-7), "0.0000001");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
    }

    #[test]
    fn a_histogram_renders_cumulative_buckets_inf_sum_and_count() {
        let mut snapshot = TelemetrySnapshot::default();
        let h = HistogramSnapshot {
            buckets: vec![Bucket { le: 0.5, count: 1 }, Bucket { le: 1.0, count: 3 }],
            sum: 7.5,
            count: 4,
        };
        let mut agent = AgentTelemetry::default();
        agent.run_duration_seconds.insert("completed".into(), h);
        snapshot.agents.insert("a".into(), agent);
        let text = PrometheusExporter::new().render(&snapshot);
        let expected = "\
troupe_run_duration_seconds_bucket{agent=\"a\",outcome=\"completed\",le=\"0.5\"} 1
troupe_run_duration_seconds_bucket{agent=\"a\",outcome=\"completed\",le=\"1\"} 3
troupe_run_duration_seconds_bucket{agent=\"a\",outcome=\"completed\",le=\"+Inf\"} 4
troupe_run_duration_seconds_sum{agent=\"a\",outcome=\"completed\"} 7.5
troupe_run_duration_seconds_count{agent=\"a\",outcome=\"completed\"} 4
";
        assert!(text.contains(expected), "{text}");
    }

    #[test]
    fn every_family_has_help_and_type_even_when_empty_and_counters_end_in_total() {
        let text = PrometheusExporter::new().render(&TelemetrySnapshot::default());
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(types.len(), 18);
        assert_eq!(helps, types.len());
        for line in types {
            let mut parts = line.split(' ').skip(2);
            let (name, kind) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            assert!(name.starts_with(METRIC_PREFIX) || name.starts_with("gen_ai_client_"), "{line}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
        }
        assert!(text.ends_with('\n'));
    }
}
