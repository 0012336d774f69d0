//! End to end over loopback HTTP.

use super::*;

fn provider(server: &MockLlmServer) -> HttpProvider<OpenAiResponsesWire> {
    let config = HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("test-key")));
    HttpProvider::new(config, OpenAiResponsesWire::default()).expect("a client")
}

/// The streamed events, and the error that ended the stream if any.
async fn stream(
    provider: &HttpProvider<OpenAiResponsesWire>,
    request: &ModelRequest,
) -> troupe_model::Result<(Vec<StreamEvent>, Option<Error>)> {
    let mut stream = provider.stream(request, CancellationToken::new()).await?;
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return Ok((events, Some(e))),
        }
    }
    Ok((events, None))
}

fn hello() -> ModelRequest {
    ModelRequest::new("gpt-4.1").message(Message::user("Say hello"))
}

#[tokio::test]
async fn streams_text_and_sends_auth_and_path() {
    let server = MockLlmServer::start().await.expect("server");
    server.push(MockTurn::text("Hello, world! ✓").with_delta_chars(3));
    let provider = provider(&server);
    let (events, error) = stream(&provider, &hello()).await.expect("accepted");
    assert!(error.is_none(), "{error:?}");
    let deltas: Vec<_> = events.iter().filter(|e| matches!(e, StreamEvent::TextDelta { .. })).collect();
    assert_eq!(deltas.len(), 5, "cut in pieces of three characters");
    let response = accumulate(&events);
    assert_eq!(response.message.text(), "Hello, world! ✓");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.model.as_deref(), Some("mock-model"));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/responses");
    assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(requests[0].body["stream"], json!(true));
    assert_eq!(requests[0].body["input"][0]["content"][0], json!({"type": "input_text", "text": "Say hello"}));
}

#[tokio::test]
async fn completes_several_tool_calls() {
    let server = MockLlmServer::start().await.expect("server");
    server.push(
        MockTurn::text("Checking both.")
            .with_tool_call("call_a", "get_weather", json!({"city": "Paris"}))
            .with_tool_call("call_b", "get_time", json!({"tz": "Europe/Paris"}))
            .with_delta_chars(4),
    );
    let response = provider(&server).complete(&hello(), CancellationToken::new()).await.expect("completes");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.message.text(), "Checking both.");
    let calls: Vec<_> =
        response.message.tool_uses().map(|(id, name, input)| (id.to_string(), name, input.clone())).collect();
    assert_eq!(
        calls,
        [
            ("call_a".to_owned(), "get_weather", json!({"city": "Paris"})),
            ("call_b".to_owned(), "get_time", json!({"tz": "Europe/Paris"})),
        ]
    );
    assert_eq!(response.usage, Usage { input_tokens: 10, output_tokens: 5, ..Default::default() });
}

#[tokio::test]
async fn tool_names_are_wire_safe_on_the_wire_and_catalog_names_in_the_response() {
    let server = MockLlmServer::start().await.expect("server");
    server.push(MockTurn::tool_call("call_2", "fs_read", json!({"path": "b.txt"})));
    let request = ModelRequest::new("gpt-4.1")
        .message(Message::user("Read a.txt then b.txt"))
        .message(Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("call_1", "fs.read", json!({"path": "a.txt"}))],
        ))
        .message(Message::new(Role::User, vec![ContentBlock::tool_result("call_1", "contents of a")]))
        .tool(ToolSpec::new("fs.read", "Reads a file", json!({"type": "object"})))
        .tool_choice(ToolChoice::Tool { name: "fs.read".into() });
    let response = provider(&server).complete(&request, CancellationToken::new()).await.expect("completes");
    assert_eq!(response.message.tool_uses().map(|(_, name, _)| name).collect::<Vec<_>>(), ["fs.read"]);

    let body = &server.requests()[0].body;
    assert_eq!(body["tools"][0]["name"], json!("fs_read"));
    assert_eq!(body["tool_choice"], json!({"type": "function", "name": "fs_read"}));
    assert_eq!(
        body["input"][1],
        json!({"type": "function_call", "call_id": "call_1", "name": "fs_read", "arguments": "{\"path\":\"a.txt\"}"})
    );
    assert_eq!(
        body["input"][2],
        json!({"type": "function_call_output", "call_id": "call_1", "output": "contents of a"})
    );
}

async fn http_failure(turn: MockTurn) -> Error {
    let server = MockLlmServer::start().await.expect("server");
    server.push(turn);
    match provider(&server).stream(&hello(), CancellationToken::new()).await {
        Ok(_) => panic!("the request should fail"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn http_faults_map_to_typed_errors() {
    let limited = http_failure(MockTurn::fault(Fault::Status {
        status: 429,
        headers: vec![("retry-after".into(), "2".into())],
        message: "Rate limit reached for requests".into(),
    }))
    .await;
    match &limited {
        Error::RateLimited { provider, message, hint } => {
            assert_eq!(provider, "openai");
            assert_eq!(message, "Rate limit reached for requests");
            assert_eq!(hint.after, Some(Duration::from_secs(2)));
        }
        other => panic!("rate limited, got {other:?}"),
    }
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));

    let auth = http_failure(MockTurn::status(401, "Incorrect API key provided: test-****-key.")).await;
    assert!(matches!(&auth, Error::Authentication { status: 401, .. }), "{auth:?}");
    assert!(!auth.to_string().contains("test-key"), "{auth}");

    let context = http_failure(MockTurn::status(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ))
    .await;
    assert!(matches!(&context, Error::ContextWindowExceeded { .. }), "{context:?}");

    let invalid = http_failure(MockTurn::status(400, "Invalid value for 'input'.")).await;
    assert!(matches!(&invalid, Error::InvalidRequest { status: 400, .. }), "{invalid:?}");

    let server = http_failure(MockTurn::status(500, "The server had an error while processing your request.")).await;
    assert!(matches!(&server, Error::Server { status: 500, .. }), "{server:?}");

    for status in [503, 529] {
        let overloaded = http_failure(MockTurn::status(status, "The engine is currently overloaded.")).await;
        assert!(matches!(&overloaded, Error::Overloaded { .. }), "{status}: {overloaded:?}");
    }
}

#[tokio::test]
async fn mid_stream_faults() {
    let server = MockLlmServer::start().await.expect("server");
    let long = MockTurn::text("A long answer that streams in many pieces.").with_delta_chars(4);
    server.push(long.clone().with_fault(Fault::OverloadedMidStream { after_events: 6 }));
    server.push(long.clone().with_fault(Fault::Truncate { after_events: 6 }));
    server.push(long.clone().with_fault(Fault::InvalidJson { after_events: 6 }));
    let provider = provider(&server);

    let (events, error) = stream(&provider, &hello()).await.expect("accepted");
    assert!(matches!(events.first(), Some(StreamEvent::MessageStart { .. })), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })), "{events:?}");
    assert!(matches!(error, Some(Error::Overloaded { .. })), "{error:?}");

    let (events, error) = stream(&provider, &hello()).await.expect("accepted");
    assert!(!events.is_empty());
    assert!(matches!(error, Some(Error::Truncated { .. })), "truncated: {error:?}");

    let (_, error) = stream(&provider, &hello()).await.expect("accepted");
    assert!(matches!(error, Some(Error::Decode { .. })), "invalid JSON: {error:?}");
}

#[tokio::test]
async fn one_byte_chunks_still_parse() {
    let server = MockLlmServer::start().await.expect("server");
    let turn = MockTurn::text("héllo wörld 😀")
        .with_reasoning("thinking…")
        .with_tool_call("call_1", "f", json!({"q": "ü"}))
        .with_chunk_bytes(1);
    server.push(turn.clone());
    let response = provider(&server).complete(&hello(), CancellationToken::new()).await.expect("completes");
    assert_eq!(response.message, turn.expected_message());
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}
