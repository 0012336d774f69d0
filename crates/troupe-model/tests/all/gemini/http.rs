//! End to end over loopback HTTP against the mock server speaking Gemini.

use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, Message, ModelRequest, StopReason, StreamEvent, ToolSpec};
use troupe_model::gemini::GeminiWire;
use troupe_model::{ApiKey, Error, HttpConfig, HttpProvider, LlmProvider, ModelResponse};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

async fn server() -> MockLlmServer {
    MockLlmServer::start().await.expect("mock server starts")
}

fn provider(server: &MockLlmServer) -> HttpProvider<GeminiWire> {
    let config = HttpConfig::new("gemini", server.url(), Some(ApiKey::new("test-key")));
    HttpProvider::new(config, GeminiWire::default()).expect("provider builds")
}

fn request() -> ModelRequest {
    ModelRequest::new("gemini-2.5-flash").message(Message::user("Hello"))
}

async fn complete(server: &MockLlmServer, request: &ModelRequest) -> Result<ModelResponse, Error> {
    provider(server).complete(request, CancellationToken::new()).await
}

/// Every item of the stream, events and the error that ended it.
async fn stream_all(server: &MockLlmServer) -> Result<Vec<Result<StreamEvent, Error>>, Error> {
    let provider = provider(server);
    let request = request();
    let stream = provider.stream(&request, CancellationToken::new()).await?;
    Ok(stream.collect().await)
}

#[tokio::test]
async fn streams_text() {
    let server = server().await;
    server.push(MockTurn::text("Hello from a mock Gemini").with_delta_chars(4));
    let items = stream_all(&server).await.expect("the request is accepted");
    let events: Vec<StreamEvent> = items.into_iter().collect::<Result<_, _>>().expect("no error");
    assert!(matches!(&events[0], StreamEvent::MessageStart { model: Some(m), .. } if m == "mock-model"));
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { index: 0, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 6, "streamed piece by piece: {deltas:?}");
    assert_eq!(deltas.concat(), "Hello from a mock Gemini");
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    let usage = events.iter().rev().find_map(|e| match e {
        StreamEvent::Usage { usage } => Some(*usage),
        _ => None,
    });
    assert_eq!(usage.map(|u| (u.input_tokens, u.output_tokens)), Some((10, 5)));
}

#[tokio::test]
async fn several_tool_calls_and_the_recorded_request() {
    let server = server().await;
    server.push(
        MockTurn::text("Checking both.")
            .with_tool_call("fc_a", "get_weather", json!({"city": "Paris"}))
            .with_tool_call("fc_b", "get_weather", json!({"city": "Rome"})),
    );
    let response = complete(&server, &request()).await.expect("completes");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.message.text(), "Checking both.");
    let calls: Vec<_> =
        response.message.tool_uses().map(|(id, name, input)| (id.to_string(), name, input.clone())).collect();
    assert_eq!(
        calls,
        [
            ("fc_a".to_owned(), "get_weather", json!({"city": "Paris"})),
            ("fc_b".to_owned(), "get_weather", json!({"city": "Rome"}))
        ]
    );

    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    assert_eq!(recorded[0].header("x-goog-api-key"), Some("test-key"));
    assert_eq!(recorded[0].header("authorization"), None, "the key travels in one header only");
    assert_eq!(recorded[0].body["contents"], json!([{"role": "user", "parts": [{"text": "Hello"}]}]));
}

#[tokio::test]
async fn catalog_tool_names_are_encoded_for_the_wire_and_decoded_back() {
    let server = server().await;
    server.push(MockTurn::tool_call("fc_1", "fs_read", json!({"path": "a.txt"})));
    let request = request().tool(ToolSpec::new(
        "fs.read",
        "Read a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    ));
    let response = complete(&server, &request).await.expect("completes");
    let declared = &server.requests()[0].body["tools"][0]["functionDeclarations"][0]["name"];
    assert_eq!(declared, &json!("fs_read"));
    assert_eq!(
        response.message.content,
        vec![ContentBlock::ToolUse {
            id: "fc_1".into(),
            name: "fs.read".into(),
            input: json!({"path": "a.txt"}),
            signature: None
        }]
    );
}

fn status_fault(status: u16, headers: &[(&str, &str)], message: &str) -> MockTurn {
    MockTurn::fault(Fault::Status {
        status,
        headers: headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
        message: message.to_owned(),
    })
}

#[tokio::test]
async fn http_errors_are_typed() {
    let server = server().await;
    server.push(status_fault(429, &[("retry-after", "3")], "Resource has been exhausted (e.g. check quota)."));
    let e = complete(&server, &request()).await.expect_err("429");
    assert!(matches!(e, Error::RateLimited { .. }), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));

    server.push(status_fault(401, &[], "Request had invalid authentication credentials."));
    let e = complete(&server, &request()).await.expect_err("401");
    assert!(matches!(e, Error::Authentication { status: 401, .. }), "{e:?}");
    assert!(!e.to_string().contains("test-key"), "the key never reaches an error: {e}");

    let context = "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).";
    server.push(status_fault(400, &[], context));
    let e = complete(&server, &request()).await.expect_err("400");
    assert!(matches!(e, Error::ContextWindowExceeded { ref message, .. } if message == context), "{e:?}");

    server.push(status_fault(400, &[], "Invalid value at 'contents[0].role'"));
    let e = complete(&server, &request()).await.expect_err("400");
    assert!(matches!(e, Error::InvalidRequest { status: 400, .. }), "{e:?}");

    server.push(status_fault(500, &[], "An internal error has occurred."));
    let e = complete(&server, &request()).await.expect_err("500");
    assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");

    for status in [503, 529] {
        server.push(status_fault(status, &[], "The model is overloaded. Please try again later."));
        let e = complete(&server, &request()).await.expect_err("overloaded");
        assert!(e.is_overloaded(), "{status}: {e:?}");
    }
}

#[tokio::test]
async fn overload_mid_stream_ends_the_stream_after_the_first_events() {
    let server = server().await;
    server.push(
        MockTurn::text("abcdefghij").with_delta_chars(2).with_fault(Fault::OverloadedMidStream { after_events: 2 }),
    );
    let items = stream_all(&server).await.expect("the request is accepted");
    let (last, first) = items.split_last().expect("items");
    assert!(matches!(last, Err(Error::Overloaded { .. })), "{last:?}");
    let texts: Vec<_> = first
        .iter()
        .map(|item| item.as_ref().expect("events before the error"))
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["ab", "cd"]);
}

#[tokio::test]
async fn truncation_and_invalid_json_are_decode_errors() {
    let server = server().await;
    server.push(MockTurn::text("abcdefghij").with_delta_chars(2).with_fault(Fault::Truncate { after_events: 3 }));
    let e = complete(&server, &request()).await.expect_err("truncated");
    assert!(matches!(e, Error::Truncated { .. }) && e.is_retryable(), "{e:?}");

    server.push(MockTurn::text("abcdefghij").with_delta_chars(2).with_fault(Fault::InvalidJson { after_events: 1 }));
    let e = complete(&server, &request()).await.expect_err("invalid JSON");
    assert!(matches!(e, Error::Decode { .. }), "{e:?}");
}

#[tokio::test]
async fn one_byte_chunks_still_parse() {
    let server = server().await;
    let turn = MockTurn::text("ünïcödé \"quoted\" text")
        .with_reasoning("thinking…")
        .with_tool_call("fc_1", "lookup", json!({"q": "x\ny"}))
        .with_delta_chars(3)
        .with_chunk_bytes(1);
    server.push(turn.clone());
    let response = complete(&server, &request()).await.expect("completes");
    let mut message = response.message;
    for block in &mut message.content {
        if let ContentBlock::ToolUse { signature, .. } = block {
            assert!(signature.is_some(), "a reasoning turn signs its first call");
            *signature = None;
        }
    }
    assert_eq!(message, turn.expected_message());
}
