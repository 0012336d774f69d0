//! Request bodies: snapshots of a simple and a rich request, the wire's switches, and
//! error-body mapping.

use serde_json::json;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice, ToolSpec};
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{Error, RetryHint, WireFormat};

fn body(wire: &OpenAiChatWire, request: &ModelRequest) -> serde_json::Value {
    let built = crate::built_as_sent(wire, request);
    assert_eq!(built.path, "/chat/completions");
    assert!(built.headers.is_empty());
    built.body
}

macro_rules! snapshot {
    ($name:literal, $value:expr) => {
        insta::with_settings!({snapshot_path => "../snapshots"}, {
            insta::assert_json_snapshot!($name, $value);
        })
    };
}

fn weather_tool() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
}

#[test]
fn simple_request() {
    let request = ModelRequest::new("gpt-4o").message(Message::user("Hello"));
    snapshot!("simple_request", body(&OpenAiChatWire::default(), &request));
}

fn rich_request() -> ModelRequest {
    let mut request = ModelRequest::new("gpt-4.1")
        .system("You are a careful assistant.")
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("What is in this picture, and what is the weather in Paris?"),
                ContentBlock::Image {
                    source: ImageSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                },
                ContentBlock::Image { source: ImageSource::Url { url: "https://example.com/cat.jpg".into() } },
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking { text: "Two questions.".into(), signature: Some("sig".into()) },
                ContentBlock::RedactedThinking { data: "opaque".into() },
                ContentBlock::text("A cat. Let me check the weather and your notes."),
                ContentBlock::tool_use("call_1", "get_weather", json!({"city": "Paris"})),
                ContentBlock::tool_use("call_2", "fs_read", json!({"path": "notes.txt"})),
                ContentBlock::tool_use("call_3", "fs_read", json!("{\"path\": ")),
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("Be brief."),
                ContentBlock::tool_result("call_1", "18°C, sunny"),
                ContentBlock::tool_error("call_2", "no such file: notes.txt"),
                ContentBlock::tool_error("call_3", "Error: arguments are not valid JSON"),
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![ContentBlock::text("18°C and sunny."), ContentBlock::text("No notes.")],
        ))
        .message(Message::user("Thanks!"))
        .tool(weather_tool())
        .tool(ToolSpec::new(
            "fs_read",
            "Reads a file",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ))
        .tool_choice(ToolChoice::Tool { name: "get_weather".into() })
        .max_tokens(1024)
        .temperature(0.2)
        .stop_sequence("END")
        .stop_sequence("\n\nUser:")
        .reasoning(4096)
        .metadata("user_id", "u-42")
        .metadata("run", "r-7");
    request.parallel_tool_calls = Some(false);
    request
}

#[test]
fn rich_request_with_store() {
    let wire = OpenAiChatWire { store: true, ..Default::default() };
    snapshot!("rich_request", body(&wire, &rich_request()));
}

#[test]
fn metadata_needs_store_and_the_switches_change_the_body() {
    let request = rich_request();
    let plain = body(&OpenAiChatWire::default(), &request);
    assert!(plain.get("metadata").is_none() && plain.get("store").is_none(), "{plain}");
    assert_eq!(plain["max_completion_tokens"], json!(1024));
    assert_eq!(plain["stream_options"], json!({"include_usage": true}));

    let legacy = body(
        &OpenAiChatWire { legacy_max_tokens: true, stream_usage: false, store: false, answer_tool: false },
        &request,
    );
    assert_eq!(legacy["max_tokens"], json!(1024));
    assert!(legacy.get("max_completion_tokens").is_none());
    assert!(legacy.get("stream_options").is_none());
    assert_eq!(legacy["stream"], json!(true));
}

#[test]
fn tool_choices_map_to_the_wire_values_and_need_tools() {
    for (choice, expected) in [
        (ToolChoice::Auto, json!("auto")),
        (ToolChoice::Any, json!("required")),
        (ToolChoice::None, json!("none")),
        (
            ToolChoice::Tool { name: "get_weather".into() },
            json!({"type": "function", "function": {"name": "get_weather"}}),
        ),
    ] {
        let request = ModelRequest::new("m").message(Message::user("x")).tool(weather_tool()).tool_choice(choice);
        assert_eq!(body(&OpenAiChatWire::default(), &request)["tool_choice"], expected);
    }
    let mut toolless = ModelRequest::new("m").message(Message::user("x")).tool_choice(ToolChoice::Any);
    toolless.parallel_tool_calls = Some(true);
    let built = body(&OpenAiChatWire::default(), &toolless);
    assert!(built.get("tool_choice").is_none() && built.get("parallel_tool_calls").is_none(), "{built}");
}

fn map(status: u16, body: &str) -> Error {
    OpenAiChatWire::default().map_error("openai", status, RetryHint::default(), body.as_bytes())
}

#[test]
fn error_bodies_map_to_typed_errors_with_the_servers_message() {
    let context = map(
        400,
        r#"{"error":{"message":"Your input is too long.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    );
    assert!(matches!(&context, Error::ContextWindowExceeded { message, .. } if message == "Your input is too long."));
    let vllm = map(
        400,
        r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}"#,
    );
    assert!(matches!(vllm, Error::ContextWindowExceeded { .. }), "{vllm:?}");
    let quota = map(
        429,
        r#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
    );
    assert!(matches!(quota, Error::RateLimited { hint: RetryHint { should_retry: Some(false), .. }, .. }), "{quota:?}");
    assert!(!quota.is_retryable());
    let rate = map(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    );
    assert!(rate.is_retryable() && matches!(rate, Error::RateLimited { .. }));
    assert!(matches!(
        map(503, r#"{"error":{"message":"The server is overloaded or not ready yet."}}"#),
        Error::Overloaded { .. }
    ));
    assert!(matches!(map(500, r#"{"error":{"message":"x","code":"server_is_overloaded"}}"#), Error::Overloaded { .. }));
    assert!(matches!(
        map(500, r#"{"error":{"message":"boom","type":"server_error"}}"#),
        Error::Server { status: 500, .. }
    ));
    assert!(matches!(
        map(401, r#"{"error":{"message":"Incorrect API key"}}"#),
        Error::Authentication { status: 401, .. }
    ));
    assert!(
        matches!(map(404, r#"{"error":"model 'x' not found"}"#), Error::InvalidRequest { status: 404, ref message, .. } if message == "model 'x' not found")
    );
    assert!(
        matches!(map(502, "<html>Bad Gateway</html>"), Error::Server { status: 502, ref message, .. } if message.contains("Bad Gateway"))
    );
    assert!(matches!(map(400, ""), Error::InvalidRequest { ref message, .. } if message == "HTTP 400"));
}

#[test]
fn the_key_goes_in_a_bearer_header() {
    assert_eq!(OpenAiChatWire::default().auth_headers("sk-1"), vec![("authorization", "Bearer sk-1".to_owned())]);
}
