//! Request bodies, headers and error mapping.

use serde_json::json;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice, ToolSpec};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{Error, RetryHint, WireFormat};

/// The inspectable body, after checking that the bytes actually sent say the same.
fn body(request: &ModelRequest) -> serde_json::Value {
    crate::built_as_sent(&AnthropicWire::default(), request).body
}

/// Snapshots of `body`, kept with every other test's under `tests/snapshots/`.
fn assert_body_snapshot(name: &str, body: serde_json::Value) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_json_snapshot!(name, body));
}

fn weather_tool() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
}

#[test]
fn simple_request_body() {
    let request = ModelRequest::new("claude-sonnet-4-5").message(Message::user("Hello"));
    assert_body_snapshot("simple_request", body(&request));
}

#[test]
fn rich_request_body() {
    let request = ModelRequest::new("claude-sonnet-4-5")
        .system("You are a weather bot.")
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("What is in this picture, and the weather in Paris and Rome?"),
                ContentBlock::Image {
                    source: ImageSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                },
                ContentBlock::Image { source: ImageSource::Url { url: "https://example.com/cat.jpg".into() } },
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking {
                    text: "Two cities: two calls.".into(),
                    signature: Some("EqQBCkgIBhAB".into()),
                },
                ContentBlock::RedactedThinking { data: "EmwKAhgBEgy3".into() },
                ContentBlock::text("A cat. Checking both cities."),
                ContentBlock::tool_use("toolu_01", "get_weather", json!({"city": "Paris"})),
                ContentBlock::tool_use("toolu_02", "get_weather", json!({"city": "Rome"})),
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("toolu_01", "18°C, sunny"),
                ContentBlock::tool_error("toolu_02", "weather service timed out"),
            ],
        ))
        .message(Message::assistant("Paris is sunny; Rome failed."))
        .message(Message::user("Try Rome again."))
        .tool(weather_tool())
        .tool_choice(ToolChoice::Auto)
        .stop_sequence("\n\nHuman:")
        .stop_sequence("END")
        .max_tokens(8192)
        .temperature(1.0)
        .reasoning(2048)
        .metadata("user_id", "user-42")
        .metadata("session", "local only");
    let mut request = request;
    request.parallel_tool_calls = Some(false);
    assert_body_snapshot("rich_request", body(&request));
}

#[test]
fn sampling_and_choices_without_reasoning() {
    let mut request = ModelRequest::new("claude-haiku-4-5")
        .message(Message::user("Hi"))
        .tool(weather_tool())
        .tool_choice(ToolChoice::Any)
        .temperature(0.7)
        .max_tokens(100);
    let b = body(&request);
    assert_eq!(b["temperature"], json!(0.7), "sent as the decimal written, not its f32 widening");
    assert_eq!(b["max_tokens"], json!(100));
    assert_eq!(b["tool_choice"], json!({"type": "any"}));
    assert!(b.get("thinking").is_none() && b.get("metadata").is_none() && b.get("system").is_none());

    request.tool_choice = None;
    assert!(body(&request).get("tool_choice").is_none(), "Anthropic's default is left alone");
    request.parallel_tool_calls = Some(false);
    assert_eq!(body(&request)["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
    request.tool_choice = Some(ToolChoice::None);
    assert_eq!(body(&request)["tool_choice"], json!({"type": "none"}), "`none` takes no parallelism flag");
    request.tools.clear();
    assert!(body(&request).get("tool_choice").is_none(), "no tool choice without tools");
}

#[test]
fn thinking_sets_a_max_tokens_above_its_budget_and_drops_the_temperature() {
    let request = ModelRequest::new("m").message(Message::user("Hi")).reasoning(10_000).temperature(0.2);
    let b = body(&request);
    assert_eq!(b["thinking"], json!({"type": "enabled", "budget_tokens": 10_000}));
    assert_eq!(b["max_tokens"], json!(14_096));
    assert!(b.get("temperature").is_none());
    let small = ModelRequest::new("m").message(Message::user("Hi")).reasoning(1024);
    assert_eq!(body(&small)["max_tokens"], json!(4096));
    let forced = ModelRequest::new("m")
        .message(Message::user("Hi"))
        .tool(weather_tool())
        .tool_choice(ToolChoice::Tool { name: "get_weather".into() })
        .reasoning(2048)
        .temperature(0.2);
    let b = body(&forced);
    assert!(b.get("thinking").is_none(), "Anthropic refuses thinking with a forced tool call");
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "get_weather"}));
    assert_eq!(b["temperature"], json!(0.2), "without thinking the temperature is free again");
    assert_eq!(b["max_tokens"], json!(4096));
    let wire = AnthropicWire { default_max_tokens: 512, ..AnthropicWire::default() };
    let plain = ModelRequest::new("m").message(Message::user("Hi"));
    assert_eq!(wire.build_request(&plain).expect("builds").body["max_tokens"], json!(512));
}

#[test]
fn blocks_anthropic_would_refuse_are_dropped_or_reordered() {
    let request = ModelRequest::new("m")
        .message(Message::new(
            Role::Assistant,
            vec![
                // Another provider's unsigned reasoning, and an empty text block.
                ContentBlock::Thinking { text: "hmm".into(), signature: None },
                ContentBlock::text(""),
                ContentBlock::ToolUse {
                    id: "c1".into(),
                    name: "t".into(),
                    input: json!("{\"broken"),
                    signature: Some("gemini-signature".into()),
                },
            ],
        ))
        .message(Message::new(Role::User, vec![ContentBlock::text("and also"), ContentBlock::tool_result("c1", "ok")]))
        .message(Message::new(Role::Assistant, vec![ContentBlock::Thinking { text: "x".into(), signature: None }]))
        .message(Message::user("next"));
    let b = body(&request);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                {"type": "text", "text": "and also"},
            ]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
        ])
    );
}

#[test]
fn path_and_headers() {
    let wire = AnthropicWire::default();
    let request = wire.build_request(&ModelRequest::new("m").message(Message::user("Hi"))).expect("builds");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers, vec![("anthropic-version", "2023-06-01".to_owned())]);
    assert_eq!(request.body["stream"], json!(true));
    assert_eq!(wire.auth_headers("sk-ant-test"), vec![("x-api-key", "sk-ant-test".to_owned())]);
}

fn error_body(kind: &str, message: &str) -> Vec<u8> {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011"})
        .to_string()
        .into_bytes()
}

fn map(status: u16, body: &[u8]) -> Error {
    let hint = RetryHint { after: Some(std::time::Duration::from_secs(3)), should_retry: None };
    AnthropicWire::default().map_error("anthropic", status, hint, body)
}

#[test]
fn error_statuses_map_to_typed_errors_with_the_servers_message() {
    let e = map(400, &error_body("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"));
    assert!(
        matches!(&e, Error::ContextWindowExceeded { message, .. } if message.starts_with("prompt is too long")),
        "{e:?}"
    );
    let e = map(
        400,
        &error_body(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000",
        ),
    );
    assert!(matches!(e, Error::ContextWindowExceeded { .. }), "{e:?}");
    let e = map(400, &error_body("invalid_request_error", "messages: roles must alternate"));
    assert!(
        matches!(&e, Error::InvalidRequest { status: 400, message, .. } if message == "messages: roles must alternate (request id req_011)"),
        "{e:?}"
    );
    assert!(matches!(
        map(401, &error_body("authentication_error", "invalid x-api-key")),
        Error::Authentication { status: 401, .. }
    ));
    assert!(matches!(
        map(403, &error_body("permission_error", "no access")),
        Error::Authentication { status: 403, .. }
    ));
    assert!(matches!(map(404, &error_body("not_found_error", "model: x")), Error::InvalidRequest { status: 404, .. }));
    assert!(matches!(map(413, &error_body("request_too_large", "too big")), Error::InvalidRequest { status: 413, .. }));
    let e = map(429, &error_body("rate_limit_error", "slow down"));
    assert!(
        matches!(&e, Error::RateLimited { .. }) && e.retry_after() == Some(std::time::Duration::from_secs(3)),
        "{e:?}"
    );
    assert!(matches!(map(500, &error_body("api_error", "Internal server error")), Error::Server { status: 500, .. }));
    assert!(matches!(map(529, &error_body("overloaded_error", "Overloaded")), Error::Overloaded { .. }));
    assert!(matches!(map(503, b"<html>Service Unavailable</html>"), Error::Overloaded { .. }));
    assert!(matches!(map(408, b""), Error::Server { status: 408, .. }));
    let e = map(502, b"<html>Bad Gateway</html>");
    assert!(matches!(&e, Error::Server { status: 502, message, .. } if message == "<html>Bad Gateway</html>"), "{e:?}");
    let e = map(500, b"");
    assert!(matches!(&e, Error::Server { message, .. } if message.contains("empty body")), "{e:?}");
}
