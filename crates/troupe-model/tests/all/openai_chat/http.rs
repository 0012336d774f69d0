//! End to end over loopback HTTP: `HttpProvider<OpenAiChatWire>` against the mock server.

use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StopReason, StreamEvent, ToolSpec, Usage};
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, Error, HttpConfig, HttpProvider, LlmProvider};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

async fn server() -> MockLlmServer {
    MockLlmServer::start().await.expect("mock server starts")
}

fn provider(server: &MockLlmServer) -> HttpProvider<OpenAiChatWire> {
    let config = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("test-key")));
    HttpProvider::new(config, OpenAiChatWire::default()).expect("client builds")
}

fn request() -> ModelRequest {
    ModelRequest::new("gpt-4o").message(Message::user("Hi"))
}

/// Every event the stream yields, and the error that ended it, if any.
async fn drain(provider: &HttpProvider<OpenAiChatWire>, request: &ModelRequest) -> (Vec<StreamEvent>, Option<Error>) {
    let mut stream = match provider.stream(request, CancellationToken::new()).await {
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

/// A benchmark's server keeps no log: it answers as before, and grows by nothing.
#[tokio::test]
async fn a_server_that_keeps_no_requests_still_answers_from_its_responder() {
    let server = server().await;
    let provider = provider(&server);
    server.respond_with(|request| MockTurn::text(format!("you sent {}", request.body["model"])));
    let (_, error) = drain(&provider, &request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.requests().len(), 1, "kept until told otherwise");

    server.keep_no_requests();
    let (events, error) = drain(&provider, &request()).await;
    assert!(error.is_none(), "{error:?}");
    let text: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect();
    assert_eq!(text, "you sent \"gpt-4o\"", "the responder still reads the request");
    assert_eq!(server.requests().len(), 1, "the second request is not kept");
}

#[tokio::test]
async fn streams_text_and_sends_the_key_to_the_chat_path() {
    let server = server().await;
    let usage = Usage { input_tokens: 7, output_tokens: 4, cache_read_tokens: 3, ..Default::default() };
    let turn = MockTurn::text("Hello from the mock").with_delta_chars(5).with_usage(usage);
    server.push(MockTurn { model: "gpt-4o-mini".into(), ..turn });
    let provider = provider(&server);
    let (events, error) = drain(&provider, &request().max_tokens(50)).await;
    assert!(error.is_none(), "{error:?}");
    let text: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect();
    assert_eq!(text, "Hello from the mock");
    assert!(events.iter().filter(|e| matches!(e, StreamEvent::TextDelta { .. })).count() >= 4, "streamed in deltas");
    assert_eq!(
        events.first(),
        Some(&StreamEvent::MessageStart { id: Some("chatcmpl-mock".into()), model: Some("gpt-4o-mini".into()) })
    );
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    assert!(events.contains(&StreamEvent::Usage { usage }));

    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(recorded[0].body["model"], json!("gpt-4o"));
    assert_eq!(recorded[0].body["stream"], json!(true));
    assert_eq!(recorded[0].body["max_completion_tokens"], json!(50));
    assert_eq!(recorded[0].body["messages"], json!([{"role": "user", "content": "Hi"}]));
}

#[tokio::test]
async fn several_tool_calls_complete_with_their_arguments() {
    let server = server().await;
    server.push(
        MockTurn::text("Checking both.")
            .with_tool_call("call_a", "get_weather", json!({"city": "Paris"}))
            .with_tool_call("call_b", "get_time", json!({"tz": "Europe/Paris"}))
            .with_delta_chars(3),
    );
    let response = provider(&server).complete(&request(), CancellationToken::new()).await.expect("completes");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.message.text(), "Checking both.");
    let calls: Vec<_> = response
        .message
        .tool_uses()
        .map(|(id, name, input)| (id.to_string(), name.to_owned(), input.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".into(), "get_weather".into(), json!({"city": "Paris"})),
            ("call_b".into(), "get_time".into(), json!({"tz": "Europe/Paris"}))
        ]
    );
}

#[tokio::test]
async fn tool_names_are_wire_safe_on_the_wire_and_catalog_names_in_the_response() {
    let server = server().await;
    server.push(MockTurn::tool_call("call_1", "fs_read", json!({"path": "a.txt"})));
    let request = request().tool(ToolSpec::new("fs.read", "Reads a file", json!({"type": "object"})));
    let response = provider(&server).complete(&request, CancellationToken::new()).await.expect("completes");
    let recorded = server.requests();
    assert_eq!(recorded[0].body["tools"][0]["function"]["name"], json!("fs_read"));
    let names: Vec<_> = response.message.tool_uses().map(|(_, name, _)| name.to_owned()).collect();
    assert_eq!(names, ["fs.read"]);
}

#[tokio::test]
async fn http_error_statuses_map_to_typed_errors() {
    let server = server().await;
    let provider = provider(&server);
    server.push(MockTurn::fault(Fault::Status {
        status: 429,
        headers: vec![("retry-after".into(), "2".into())],
        message: "Rate limit reached for gpt-4o".into(),
    }));
    let (_, error) = drain(&provider, &request()).await;
    match error {
        Some(e @ Error::RateLimited { .. }) => {
            assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
            assert!(e.is_retryable());
            assert!(e.to_string().contains("Rate limit reached for gpt-4o"), "{e}");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }

    server.push(MockTurn::status(429, "You exceeded your current quota, please check your plan and billing details."));
    let (_, error) = drain(&provider, &request()).await;
    assert!(
        matches!(&error, Some(e @ Error::RateLimited { .. }) if !e.is_retryable()),
        "an exhausted quota is not retried: {error:?}"
    );

    server.push(MockTurn::status(401, "Incorrect API key provided"));
    let (_, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::Authentication { status: 401, .. })), "{error:?}");

    server.push(MockTurn::status(400, "This model's maximum context length is 128000 tokens."));
    let (_, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::ContextWindowExceeded { .. })), "{error:?}");

    server.push(MockTurn::status(400, "Invalid value for 'temperature'"));
    let (_, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::InvalidRequest { status: 400, .. })), "{error:?}");

    server.push(MockTurn::status(500, "The server had an error"));
    let (_, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::Server { status: 500, .. })), "{error:?}");

    for status in [503, 529] {
        server.push(MockTurn::status(status, "The server is overloaded or not ready yet."));
        let (_, error) = drain(&provider, &request()).await;
        assert!(matches!(error, Some(Error::Overloaded { .. })), "{status}: {error:?}");
    }
}

#[tokio::test]
async fn overload_mid_stream_fails_after_the_first_events() {
    let server = server().await;
    server.push(
        MockTurn::text("Hello there, world")
            .with_delta_chars(4)
            .with_fault(Fault::OverloadedMidStream { after_events: 3 }),
    );
    let (events, error) = drain(&provider(&server), &request()).await;
    assert!(matches!(error, Some(Error::Overloaded { .. })), "{error:?}");
    assert!(matches!(events.first(), Some(StreamEvent::MessageStart { .. })));
    assert!(events.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::MessageStop { .. })));
}

#[tokio::test]
async fn a_truncated_stream_is_retryable_and_an_invalid_one_a_decode_error() {
    let server = server().await;
    let provider = provider(&server);
    server.push(MockTurn::text("Hello there, world").with_fault(Fault::Truncate { after_events: 2 }));
    let (events, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::Truncated { .. })), "{error:?}");
    assert!(!events.is_empty(), "events before the cut are delivered");

    server.push(MockTurn::text("Hello there, world").with_fault(Fault::InvalidJson { after_events: 2 }));
    let (_, error) = drain(&provider, &request()).await;
    assert!(matches!(error, Some(Error::Decode { .. })), "{error:?}");
}

#[tokio::test]
async fn one_byte_chunks_still_parse() {
    let server = server().await;
    let turn = MockTurn::text("Héllo, wörld 😀")
        .with_tool_call("call_1", "get_weather", json!({"city": "Zürich"}))
        .with_chunk_bytes(1);
    server.push(turn.clone());
    let response = provider(&server).complete(&request(), CancellationToken::new()).await.expect("completes");
    assert_eq!(response.message, turn.expected_message());
    assert_eq!(response.usage, turn.usage);
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

/// Configured headers travel with every request, beside the key's and the content types.
#[tokio::test]
async fn configured_headers_travel_with_the_key() {
    let server = server().await;
    server.push(MockTurn::text("ok"));
    server.push(MockTurn::text("ok again"));
    let mut config = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("test-key")));
    config.headers = vec![("x-gateway-token".into(), "g-1".into()), ("OpenAI-Organization".into(), "org-1".into())];
    let provider = HttpProvider::new(config, OpenAiChatWire::default()).expect("client builds");
    for _ in 0..2 {
        let (_, error) = drain(&provider, &request()).await;
        assert!(error.is_none(), "{error:?}");
    }
    let recorded = server.requests();
    assert_eq!(recorded.len(), 2);
    for request in &recorded {
        assert_eq!(request.header("authorization"), Some("Bearer test-key"));
        assert_eq!(request.header("x-gateway-token"), Some("g-1"));
        assert_eq!(request.header("openai-organization"), Some("org-1"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("accept"), Some("text/event-stream"));
    }
}

/// A header no HTTP request can carry (a line break in a pasted key or token) fails each
/// request as a configuration error before anything is sent, and the error does not show
/// the value.
#[tokio::test]
async fn a_header_that_cannot_be_sent_is_a_configuration_error_that_does_not_show_it() {
    let server = server().await;
    let mut with_token = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("test-key")));
    with_token.headers = vec![("x-gateway-token".into(), "tok-secret\nx".into())];
    let with_key = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("sk-secret\r\n")));
    let mut with_name = HttpConfig::new("openai", server.openai_url(), None);
    with_name.headers = vec![("bad header".into(), "v".into())];
    for config in [with_token, with_key, with_name] {
        let provider = HttpProvider::new(config, OpenAiChatWire::default()).expect("client builds");
        let (events, error) = drain(&provider, &request()).await;
        assert!(events.is_empty());
        let Some(Error::Config(message)) = error else { panic!("a configuration error, got {error:?}") };
        assert!(message.contains("openai"), "names the provider: {message}");
        assert!(!message.contains("secret"), "the value stays out of the error: {message}");
    }
    assert!(server.requests().is_empty(), "nothing was sent");
}
