//! End to end over loopback HTTP against the mock server.

use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StopReason, StreamEvent, ToolSpec, Usage};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, Error, HttpConfig, HttpProvider, LlmProvider, ModelResponse};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

async fn server() -> MockLlmServer {
    MockLlmServer::start().await.expect("the mock server starts")
}

fn provider(server: &MockLlmServer) -> HttpProvider<AnthropicWire> {
    let config = HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key")));
    HttpProvider::new(config, AnthropicWire::default()).expect("the client builds")
}

fn hello() -> ModelRequest {
    ModelRequest::new("claude-sonnet-4-5").message(Message::user("Hello"))
}

async fn complete(server: &MockLlmServer, request: &ModelRequest) -> Result<ModelResponse, Error> {
    provider(server).complete(request, CancellationToken::new()).await
}

/// Every item of the stream, stopping after the first error.
async fn stream_items(server: &MockLlmServer) -> (Vec<StreamEvent>, Option<Error>) {
    let mut stream = match provider(server).stream(&hello(), CancellationToken::new()).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

#[tokio::test]
async fn streams_text_and_reports_usage() {
    let server = server().await;
    let usage = Usage { input_tokens: 21, output_tokens: 7, cache_read_tokens: 300, ..Default::default() };
    server.push(MockTurn::text("Hello there, traveller").with_delta_chars(5).with_usage(usage));
    let (events, error) = stream_items(&server).await;
    assert!(error.is_none(), "{error:?}");
    let texts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hello", " ther", "e, tr", "avell", "er"]);
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    let last_usage = events.iter().rev().find_map(|e| match e {
        StreamEvent::Usage { usage } => Some(*usage),
        _ => None,
    });
    assert_eq!(last_usage, Some(usage));
}

#[tokio::test]
async fn several_tool_calls_complete_in_order() {
    let server = server().await;
    server.push(
        MockTurn::text("Checking both.")
            .with_tool_call("toolu_a", "get_weather", json!({"city": "Paris"}))
            .with_tool_call("toolu_b", "get_time", json!({"tz": "Europe/Rome"})),
    );
    let response = complete(&server, &hello()).await.expect("completes");
    assert_eq!(response.message.text(), "Checking both.");
    let calls: Vec<_> = response
        .message
        .tool_uses()
        .map(|(id, name, input)| (id.to_string(), name.to_owned(), input.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("toolu_a".into(), "get_weather".into(), json!({"city": "Paris"})),
            ("toolu_b".into(), "get_time".into(), json!({"tz": "Europe/Rome"})),
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.model.as_deref(), Some("mock-model"));
}

#[tokio::test]
async fn the_server_sees_the_path_key_version_and_body() {
    let server = server().await;
    server.push(MockTurn::text("ok"));
    complete(&server, &hello().max_tokens(64)).await.expect("completes");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("test-key"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None, "Anthropic takes the key in x-api-key only");
    assert_eq!(request.body["model"], json!("claude-sonnet-4-5"));
    assert_eq!(request.body["max_tokens"], json!(64));
    assert_eq!(request.body["stream"], json!(true));
}

#[tokio::test]
async fn tool_names_are_wire_safe_on_the_way_out_and_restored_on_the_way_back() {
    let server = server().await;
    server.push(MockTurn::tool_call("toolu_1", "fs_read", json!({"path": "a.txt"})));
    let request = hello().tool(ToolSpec::new("fs.read", "Reads a file", json!({"type": "object"})));
    let response = complete(&server, &request).await.expect("completes");
    assert_eq!(server.requests()[0].body["tools"][0]["name"], json!("fs_read"));
    let names: Vec<_> = response.message.tool_uses().map(|(_, name, _)| name.to_owned()).collect();
    assert_eq!(names, ["fs.read"]);
}

fn status(code: u16, message: &str, headers: &[(&str, &str)]) -> MockTurn {
    MockTurn::fault(Fault::Status {
        status: code,
        headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        message: message.into(),
    })
}

#[tokio::test]
async fn http_error_statuses_become_typed_errors() {
    let server = server().await;
    server.push_all([
        status(429, "Number of request tokens has exceeded your per-minute rate limit", &[("retry-after", "7")]),
        status(401, "invalid x-api-key", &[]),
        status(400, "prompt is too long: 208310 tokens > 200000 maximum", &[]),
        status(500, "Internal server error", &[]),
        status(529, "Overloaded", &[]),
        status(503, "Service unavailable", &[]),
    ]);
    let e = complete(&server, &hello()).await.expect_err("429");
    assert!(matches!(&e, Error::RateLimited { message, .. } if message.contains("rate limit")), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
    let e = complete(&server, &hello()).await.expect_err("401");
    assert!(matches!(&e, Error::Authentication { status: 401, .. }), "{e:?}");
    assert!(!e.to_string().contains("test-key"), "the key never reaches an error: {e}");
    let e = complete(&server, &hello()).await.expect_err("400");
    assert!(matches!(e, Error::ContextWindowExceeded { .. }), "{e:?}");
    let e = complete(&server, &hello()).await.expect_err("500");
    assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
    let e = complete(&server, &hello()).await.expect_err("529");
    assert!(matches!(e, Error::Overloaded { .. }), "{e:?}");
    let e = complete(&server, &hello()).await.expect_err("503");
    assert!(matches!(e, Error::Overloaded { .. }), "{e:?}");
}

#[tokio::test]
async fn overload_mid_stream_arrives_after_the_first_events() {
    let server = server().await;
    server.push(
        MockTurn::text("a long answer").with_delta_chars(2).with_fault(Fault::OverloadedMidStream { after_events: 4 }),
    );
    let (events, error) = stream_items(&server).await;
    assert!(matches!(error, Some(Error::Overloaded { .. })), "{error:?}");
    assert!(matches!(events.first(), Some(StreamEvent::MessageStart { .. })), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::MessageStop { .. })));
}

#[tokio::test]
async fn a_truncated_stream_is_retryable_and_an_invalid_one_a_decode_error() {
    let server = server().await;
    server.push_all([
        MockTurn::text("cut short").with_fault(Fault::Truncate { after_events: 4 }),
        MockTurn::text("garbage inside").with_fault(Fault::InvalidJson { after_events: 3 }),
    ]);
    let e = complete(&server, &hello()).await.expect_err("truncated");
    assert!(matches!(&e, Error::Truncated { message, .. } if message.contains("message_stop")), "{e:?}");
    assert!(e.is_retryable(), "a broken-off answer may be asked for again");
    let e = complete(&server, &hello()).await.expect_err("invalid JSON");
    assert!(matches!(e, Error::Decode { .. }), "{e:?}");
}

#[tokio::test]
async fn one_byte_chunks_still_parse() {
    let server = server().await;
    let turn = MockTurn::default()
        .with_reasoning("Zürich, then the weather.")
        .with_text("Checking.")
        .with_tool_call("toolu_1", "get_weather", json!({"city": "Zürich"}))
        .with_chunk_bytes(1);
    let expected = turn.expected_message();
    server.push(turn);
    let response = complete(&server, &hello()).await.expect("completes");
    assert_eq!(super::without_signatures(response.message), expected);
}
