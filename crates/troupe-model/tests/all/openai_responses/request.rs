//! Request bodies.

use super::*;

/// Snapshots live with the other vendors' in `tests/snapshots`.
macro_rules! snapshot {
    ($name:literal, $value:expr) => {
        insta::with_settings!({snapshot_path => "../snapshots"}, {
            insta::assert_json_snapshot!($name, $value);
        })
    };
}

/// The inspectable body, after checking that the bytes actually sent say the same.
fn wire_body(request: &ModelRequest) -> serde_json::Value {
    crate::built_as_sent(&OpenAiResponsesWire::default(), request).body
}

#[test]
fn simple_request_body() {
    let request = ModelRequest::new("gpt-4.1").message(Message::user("Hello"));
    let built = OpenAiResponsesWire::default().build_request(&request).expect("builds");
    assert_eq!(built.path, "/responses");
    assert!(built.headers.is_empty());
    snapshot!("simple_request", built.body);
}

#[test]
fn rich_request_body() {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let request = ModelRequest::new("o4-mini")
        .system("You are a careful engineer.")
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("What is in this picture and in a.txt?"),
                ContentBlock::Image {
                    source: ImageSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                },
                ContentBlock::Image { source: ImageSource::Url { url: "https://example.com/cat.jpg".into() } },
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking { text: "I should read the file.".into(), signature: Some("sig".into()) },
                ContentBlock::RedactedThinking { data: "opaque".into() },
                ContentBlock::text("A cat. Let me read the files."),
                ContentBlock::tool_use("call_1", "fs_read", json!({"path": "a.txt"})),
                ContentBlock::tool_use("call_2", "fs_read", json!({"path": "missing.txt"})),
                ContentBlock::ToolUse {
                    id: "call_3".into(),
                    name: "fs_read".into(),
                    input: json!("{\"path\": "),
                    signature: None,
                },
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("call_1", "hello"),
                ContentBlock::tool_error("call_2", "no such file"),
                ContentBlock::tool_error("call_3", "arguments are not valid JSON"),
            ],
        ))
        .message(Message::assistant("a.txt says hello; missing.txt does not exist."))
        .message(Message::user("Thanks. Read b.txt too."))
        .tool(ToolSpec::new("fs_read", "Reads a file", schema))
        .tool(ToolSpec::new("shell", "Runs a command", json!({"type": "object"})))
        .tool_choice(ToolChoice::Tool { name: "fs_read".into() })
        .stop_sequence("STOP")
        .temperature(0.2)
        .max_tokens(1024)
        .reasoning(8_000)
        .metadata("user_id", "u-42");
    let request = ModelRequest { parallel_tool_calls: Some(false), ..request };
    let body = wire_body(&request);
    assert!(body.get("stop").is_none(), "the Responses API has no stop sequences");
    snapshot!("rich_request", body);
}

#[test]
fn tool_choices_map_to_the_wire() {
    let choice = |c: ToolChoice| wire_body(&ModelRequest::new("m").tool_choice(c))["tool_choice"].clone();
    assert_eq!(choice(ToolChoice::Auto), json!("auto"));
    assert_eq!(choice(ToolChoice::Any), json!("required"));
    assert_eq!(choice(ToolChoice::None), json!("none"));
    assert_eq!(choice(ToolChoice::Tool { name: "f".into() }), json!({"type": "function", "name": "f"}));
}
