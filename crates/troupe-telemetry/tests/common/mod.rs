//! A local OTLP/HTTP collector: an axum server on 127.0.0.1 that decodes every
//! `POST /v1/traces` body as the real OTLP protobuf and hands the spans to the test.

// Each test binary uses its own part of these helpers.
#![allow(dead_code)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::time::Duration;
use tokio::sync::mpsc;

/// One export request as the collector saw it.
pub struct Export {
    pub headers: HeaderMap,
    pub request: ExportTraceServiceRequest,
}

impl Export {
    /// Every span of the request, with the `service.name` of its resource.
    pub fn spans(&self) -> Vec<(Option<String>, Span)> {
        let mut out = Vec::new();
        for resource_spans in &self.request.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| string_attribute(&r.attributes, "service.name"))
                .map(str::to_owned);
            for scope in &resource_spans.scope_spans {
                out.extend(scope.spans.iter().map(|span| (service.clone(), span.clone())));
            }
        }
        out
    }
}

pub struct Collector {
    /// The base URL (`http://127.0.0.1:port`), without `/v1/traces`.
    pub base_url: String,
    exports: mpsc::UnboundedReceiver<Export>,
}

impl Collector {
    pub async fn start() -> Collector {
        let (tx, exports) = mpsc::unbounded_channel();
        let app = Router::new().route("/v1/traces", post(receive)).with_state(tx);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("has an address"));
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
        Collector { base_url, exports }
    }

    /// Exports received so far, waiting up to `wait` for the first.
    pub async fn received(&mut self, wait: Duration) -> Vec<Export> {
        let mut out = Vec::new();
        if let Ok(Some(first)) = tokio::time::timeout(wait, self.exports.recv()).await {
            out.push(first);
        }
        while let Ok(more) = self.exports.try_recv() {
            out.push(more);
        }
        out
    }
}

async fn receive(
    State(tx): State<mpsc::UnboundedSender<Export>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let content = [(header::CONTENT_TYPE, "application/x-protobuf")];
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            let _ = tx.send(Export { headers, request });
            (StatusCode::OK, content, ExportTraceServiceResponse::default().encode_to_vec())
        }
        Err(_) => (StatusCode::BAD_REQUEST, content, Vec::new()),
    }
}

pub fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

pub fn string_attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

pub fn int_attribute(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attribute(attributes, key) {
        Some(any_value::Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

/// Emits one agent run's spans the way the runtime does (see `troupe_telemetry::semconv`):
/// `invoke_agent triage` with a `chat demo-model` and an `execute_tool fs.read` child.
pub fn emit_run_spans() {
    use tracing::field::Empty;
    use troupe_telemetry::semconv;
    let agent = tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent triage",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "triage",
        troupe.run.id = "run_1",
        error.type = Empty,
    );
    agent.in_scope(|| {
        let chat = tracing::info_span!(
            "chat",
            otel.name = "chat demo-model",
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = "demo",
            gen_ai.request.model = "demo-model",
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
        );
        chat.in_scope(|| tracing::info!("model answered"));
        chat.record("gen_ai.response.model", "demo-model-2026");
        chat.record("gen_ai.usage.input_tokens", semconv::count(1200_u64));
        chat.record("gen_ai.usage.output_tokens", semconv::count(80_u64));
        chat.record("gen_ai.usage.cache_read.input_tokens", semconv::count(1000_u64));
        drop(chat);
        let tool = tracing::info_span!(
            "execute_tool",
            otel.name = "execute_tool fs.read",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "fs.read",
            gen_ai.tool.call.id = "call_1",
        );
        tool.in_scope(|| {});
    });
}
