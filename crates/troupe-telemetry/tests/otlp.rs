//! Spans emitted with `tracing` on troupe's convention reach a real OTLP/HTTP receiver as
//! protobuf, named, attributed and nested as the GenAI conventions say.

mod common;

use common::{Collector, emit_run_spans, int_attribute, string_attribute};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use std::time::Duration;
use tracing_subscriber::prelude::*;
use troupe_telemetry::{OtlpConfig, otlp_layer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genai_spans_arrive_at_the_collector_with_attributes_and_parents() {
    let mut collector = Collector::start().await;
    let config = OtlpConfig::new()
        .endpoint(&collector.base_url)
        .header("x-api-key", "test-key")
        .service_name("inbox-service")
        .timeout(Duration::from_secs(5));
    let (layer, guard) = otlp_layer(&config).expect("builds the OTLP layer");
    assert_eq!(guard.otlp_endpoint(), Some(format!("{}/v1/traces", collector.base_url).as_str()));

    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit_run_spans);
    // Flushing blocks until the collector answers, so it runs off the async workers.
    tokio::task::spawn_blocking(move || guard.shutdown()).await.expect("joins").expect("flushes");

    let exports = collector.received(Duration::from_secs(5)).await;
    assert!(!exports.is_empty(), "the collector received no export");
    for export in &exports {
        assert_eq!(export.headers["content-type"], "application/x-protobuf");
        assert_eq!(export.headers["x-api-key"], "test-key", "configured headers are sent");
    }
    let spans: Vec<_> = exports.iter().flat_map(|e| e.spans()).collect();
    let find = |name: &str| {
        spans.iter().find(|(_, s)| s.name == name).unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
            panic!("no span `{name}` among {names:?}")
        })
    };
    let (service, agent) = find("invoke_agent triage");
    let (_, chat) = find("chat demo-model");
    let (_, tool) = find("execute_tool fs.read");
    assert_eq!(spans.len(), 3, "one span per operation");
    assert_eq!(service.as_deref(), Some("inbox-service"));

    assert_eq!(string_attribute(&agent.attributes, "gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(string_attribute(&agent.attributes, "gen_ai.agent.name"), Some("triage"));
    assert_eq!(string_attribute(&agent.attributes, "troupe.run.id"), Some("run_1"));
    assert!(agent.parent_span_id.is_empty(), "the run is the root");

    assert_eq!(string_attribute(&chat.attributes, "gen_ai.operation.name"), Some("chat"));
    assert_eq!(string_attribute(&chat.attributes, "gen_ai.provider.name"), Some("demo"));
    assert_eq!(string_attribute(&chat.attributes, "gen_ai.request.model"), Some("demo-model"));
    assert_eq!(string_attribute(&chat.attributes, "gen_ai.response.model"), Some("demo-model-2026"));
    assert_eq!(int_attribute(&chat.attributes, "gen_ai.usage.input_tokens"), Some(1200), "recorded after start");
    assert_eq!(int_attribute(&chat.attributes, "gen_ai.usage.output_tokens"), Some(80));
    assert_eq!(int_attribute(&chat.attributes, "gen_ai.usage.cache_read.input_tokens"), Some(1000));
    assert_eq!(chat.kind, SpanKind::Client as i32, "otel.kind = client");
    assert!(
        chat.attributes.iter().all(|kv| !kv.key.starts_with("otel.")),
        "otel.* fields steer the span, they are not attributes"
    );

    assert_eq!(string_attribute(&tool.attributes, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(string_attribute(&tool.attributes, "gen_ai.tool.name"), Some("fs.read"));
    assert_eq!(string_attribute(&tool.attributes, "gen_ai.tool.call.id"), Some("call_1"));

    for child in [chat, tool] {
        assert_eq!(child.trace_id, agent.trace_id, "{} is in the run's trace", child.name);
        assert_eq!(child.parent_span_id, agent.span_id, "{} is a child of the run", child.name);
    }
    assert!(chat.end_time_unix_nano <= tool.start_time_unix_nano, "the tool ran after the model answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_costs_the_application_nothing_but_an_error() {
    // Bind, then close, a port: connections to it are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("binds").local_addr().expect("addr").port();
    let config = OtlpConfig::new().endpoint(format!("http://127.0.0.1:{port}")).timeout(Duration::from_secs(2));
    let (layer, guard) = otlp_layer(&config).expect("building does not connect");
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit_run_spans);
    let started = std::time::Instant::now();
    let flushed = tokio::task::spawn_blocking(move || guard.flush()).await.expect("joins");
    assert!(flushed.is_err(), "a failed export is reported by flush");
    assert!(started.elapsed() < Duration::from_secs(10), "and it gives up in time: {:?}", started.elapsed());
}
