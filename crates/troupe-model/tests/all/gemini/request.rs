//! Request bodies: snapshots of a simple and a rich request, and the translations that
//! need the history (function names of results, signatures) or refuse input.

use super::{fold, parse, sse};
use serde_json::json;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice, ToolSpec};
use troupe_model::gemini::GeminiWire;
use troupe_model::{Error, WireFormat, WireRequest};

fn build(request: &ModelRequest) -> WireRequest {
    GeminiWire::default().build_request(request).expect("request builds")
}

/// A snapshot of `wire`, kept with every other test's under `tests/snapshots/`.
fn assert_request_snapshot(name: &str, wire: &WireRequest) {
    let value = json!({"path": wire.path, "headers": wire.headers, "body": wire.body});
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_json_snapshot!(name, value));
}

#[test]
fn simple_request() {
    let request = ModelRequest::new("gemini-2.5-flash").message(Message::user("Hello"));
    assert_request_snapshot("simple_request", &build(&request));
}

fn weather_schema() -> serde_json::Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "exclusiveMaximum": 8}
        },
        "required": ["city"]
    })
}

fn rich() -> ModelRequest {
    let mut request = ModelRequest::new("gemini-2.5-pro")
        .system("You are a weather assistant.")
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("Weather in Paris and Rome? Also, what is in these pictures?"),
                ContentBlock::Image {
                    source: ImageSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
                },
                ContentBlock::Image { source: ImageSource::Url { url: "https://example.test/cat.jpeg".into() } },
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking { text: "Two cities: two calls.".into(), signature: None },
                ContentBlock::text("Checking both."),
                ContentBlock::ToolUse {
                    id: "call_0".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Paris"}),
                    signature: Some("CiQBsig==".into()),
                },
                ContentBlock::tool_use("call_1", "get_weather", json!({"city": "Rome"})),
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("call_0", "18°C, sunny"),
                ContentBlock::tool_error("call_1", "weather service timed out"),
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text("Paris is sunny; Rome failed."),
                ContentBlock::RedactedThinking { data: "opaque".into() },
            ],
        ))
        .message(Message::user("Try Rome again."))
        .tool(ToolSpec::new("get_weather", "Current weather for a city", weather_schema()))
        .tool(ToolSpec::new("now", "The current time", json!({"type": "object", "properties": {}})))
        .tool_choice(ToolChoice::Tool { name: "get_weather".into() })
        .max_tokens(1024)
        .temperature(0.5)
        .stop_sequence("END")
        .reasoning(2048)
        .metadata("user_id", "u-42");
    request.parallel_tool_calls = Some(false);
    request
}

#[test]
fn rich_request() {
    assert_request_snapshot("rich_request", &build(&rich()));
}

#[test]
fn results_name_the_nearest_earlier_call_with_their_id() {
    // Generated ids (`call_0`) recur in every response, so ids repeat across turns.
    let request = ModelRequest::new("gemini-2.5-flash")
        .message(Message::user("go"))
        .message(Message::new(Role::Assistant, vec![ContentBlock::tool_use("call_0", "first", json!({}))]))
        .message(Message::new(Role::User, vec![ContentBlock::tool_result("call_0", "a")]))
        .message(Message::new(Role::Assistant, vec![ContentBlock::tool_use("call_0", "second", json!({}))]))
        .message(Message::new(Role::User, vec![ContentBlock::tool_result("call_0", "b")]));
    let body = build(&request).body;
    assert_eq!(body["contents"][2]["parts"][0]["functionResponse"]["name"], json!("first"));
    assert_eq!(body["contents"][4]["parts"][0]["functionResponse"]["name"], json!("second"));
    assert!(body["contents"][1]["parts"][0]["functionCall"].get("id").is_none(), "ids stay home by default");
}

#[test]
fn a_result_without_its_call_cannot_be_expressed() {
    let request = ModelRequest::new("gemini-2.5-flash")
        .message(Message::new(Role::User, vec![ContentBlock::tool_result("call_9", "orphan")]));
    let e = GeminiWire::default().build_request(&request).expect_err("no name to give");
    assert!(matches!(e, Error::Config(ref m) if m.contains("call_9")), "{e:?}");
}

#[test]
fn call_ids_are_sent_when_asked() {
    let wire = GeminiWire { send_call_ids: true, ..GeminiWire::default() };
    let request = ModelRequest::new("gemini-2.5-flash")
        .message(Message::new(Role::Assistant, vec![ContentBlock::tool_use("fc_1", "f", json!({"x": 1}))]))
        .message(Message::new(Role::User, vec![ContentBlock::tool_result("fc_1", "ok")]));
    let body = wire.build_request(&request).expect("builds").body;
    assert_eq!(body["contents"][0]["parts"][0]["functionCall"], json!({"id": "fc_1", "name": "f", "args": {"x": 1}}));
    assert_eq!(
        body["contents"][1]["parts"][0]["functionResponse"],
        json!({"id": "fc_1", "name": "f", "response": {"output": "ok"}})
    );
}

#[test]
fn model_names_that_would_change_the_path_are_refused() {
    for model in ["../../v1/files", "gemini/../../x", "gemini?alt=json", "gemini#x", "", "a b"] {
        let e = GeminiWire::default().build_request(&ModelRequest::new(model)).expect_err(model);
        assert!(matches!(e, Error::Config(_)), "{model}: {e:?}");
    }
    let wire = build(&ModelRequest::new("models/gemini-2.0-flash-001"));
    assert_eq!(wire.path, "/v1beta/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse");
}

#[test]
fn tool_choices_map_to_function_calling_modes() {
    let tool = ToolSpec::new("f", "d", json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    for (choice, expected) in [
        (ToolChoice::Auto, json!({"mode": "AUTO"})),
        (ToolChoice::Any, json!({"mode": "ANY"})),
        (ToolChoice::None, json!({"mode": "NONE"})),
        (ToolChoice::Tool { name: "f".into() }, json!({"mode": "ANY", "allowedFunctionNames": ["f"]})),
    ] {
        let body = build(&ModelRequest::new("m").tool(tool.clone()).tool_choice(choice)).body;
        assert_eq!(body["toolConfig"]["functionCallingConfig"], expected);
    }
    let no_tools = build(&ModelRequest::new("m").tool_choice(ToolChoice::None)).body;
    assert!(no_tools.get("toolConfig").is_none(), "a tool config needs tools");
    let off = build(&ModelRequest::new("m").reasoning(0)).body;
    assert_eq!(off["generationConfig"]["thinkingConfig"], json!({"thinkingBudget": 0}));
}

#[test]
fn a_parsed_text_signature_goes_back_onto_its_text_part() {
    let chunks = [
        json!({"candidates": [{"content": {"parts": [{"text": "Hi", "thought": true}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "Hello.", "thoughtSignature": "SIG"}]}, "finishReason": "STOP"}]}),
    ];
    let response = fold(&parse(&sse(&chunks)).expect("parses")).expect("folds");
    let request = ModelRequest::new("m").message(Message::user("hi")).message(response.message);
    let body = build(&request).body;
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "Hi", "thought": true}, {"text": "Hello.", "thoughtSignature": "SIG"}])
    );
}
