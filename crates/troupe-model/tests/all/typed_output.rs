//! A typed answer asked for on each wire, over loopback HTTP against the mock server: the
//! request body carries the schema by the vendor's own mechanism (snapshots), and the
//! OpenAI-compatible fallback asks with a forced `final_answer` tool whose call comes
//! back as the answer's text.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, OutputSchema, StopReason, ToolSpec};
use troupe_model::answer_tool::ANSWER_TOOL;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::gemini::GeminiWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::openai_responses::OpenAiResponsesWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider, ModelResponse, WireFormat};
use troupe_testkit::{MockLlmServer, MockTurn};

fn weather() -> OutputSchema {
    OutputSchema::new(
        "Weather",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"],
            "additionalProperties": false,
        }),
    )
}

fn request(model: &str) -> ModelRequest {
    ModelRequest::new(model)
        .message(Message::user("Weather in Oslo?"))
        .tool(ToolSpec::new(
            "lookup",
            "Looks a city up.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ))
        .output(weather())
}

/// The answer to `request` from `wire` over HTTP, and the body the server received.
async fn exchange<W: WireFormat>(
    wire: W,
    openai_style: bool,
    request: &ModelRequest,
    turn: MockTurn,
) -> (ModelResponse, Value) {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(turn);
    let url = if openai_style { server.openai_url() } else { server.url() };
    let provider = HttpProvider::new(HttpConfig::new("vendor", url, Some(ApiKey::new("k"))), wire).expect("builds");
    let response = provider.complete(request, CancellationToken::new()).await.expect("the call succeeds");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    (response, requests[0].body.clone())
}

macro_rules! snapshot {
    ($name:literal, $value:expr) => {
        insta::with_settings!({snapshot_path => "snapshots"}, {
            insta::assert_json_snapshot!($name, $value);
        })
    };
}

const ANSWER: &str = r#"{"city":"Oslo","celsius":4.5}"#;

#[tokio::test]
async fn openai_chat_sends_a_strict_json_schema_response_format() {
    let (response, body) = exchange(OpenAiChatWire::default(), true, &request("gpt-5"), MockTurn::text(ANSWER)).await;
    assert_eq!(body["response_format"]["json_schema"]["schema"], weather().schema);
    assert_eq!(body["response_format"]["json_schema"]["strict"], json!(true));
    assert_eq!(response.message.text(), ANSWER);
    snapshot!("typed_output_openai_chat", body);
}

#[tokio::test]
async fn openai_responses_sends_a_text_format() {
    let (response, body) =
        exchange(OpenAiResponsesWire::default(), true, &request("gpt-5"), MockTurn::text(ANSWER)).await;
    assert_eq!(body["text"]["format"]["type"], json!("json_schema"));
    assert_eq!(body["text"]["format"]["schema"], weather().schema);
    assert_eq!(response.message.text(), ANSWER);
    snapshot!("typed_output_openai_responses", body);
}

#[tokio::test]
async fn anthropic_sends_an_output_config_format() {
    let (response, body) =
        exchange(AnthropicWire::default(), false, &request("claude-sonnet-4-5"), MockTurn::text(ANSWER)).await;
    assert_eq!(body["output_config"]["format"], json!({"type": "json_schema", "schema": weather().schema}));
    assert_eq!(response.message.text(), ANSWER);
    snapshot!("typed_output_anthropic", body);
}

#[tokio::test]
async fn gemini_sends_a_response_schema_in_its_dialect() {
    let (response, body) =
        exchange(GeminiWire::default(), false, &request("gemini-2.5-flash"), MockTurn::text(ANSWER)).await;
    let generation = &body["generationConfig"];
    assert_eq!(generation["responseMimeType"], json!("application/json"));
    assert_eq!(generation["responseSchema"]["required"], json!(["city", "celsius"]));
    assert!(generation["responseSchema"].get("additionalProperties").is_none(), "Gemini refuses the keyword");
    assert_eq!(response.message.text(), ANSWER);
    snapshot!("typed_output_gemini", body);
}

#[tokio::test]
async fn a_server_without_response_formats_is_asked_with_a_forced_answer_tool() {
    let wire = OpenAiChatWire { answer_tool: true, ..OpenAiChatWire::default() };
    let turn = MockTurn::tool_call("call_1", ANSWER_TOOL, json!({"city": "Oslo", "celsius": 4.5})).with_delta_chars(4);
    let (response, body) = exchange(wire, true, &request("local-model"), turn).await;
    assert!(body.get("response_format").is_none(), "{body}");
    assert_eq!(body["tool_choice"], json!("required"));
    let tools: Vec<&str> =
        body["tools"].as_array().expect("tools").iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(tools, ["lookup", ANSWER_TOOL]);
    assert_eq!(body["tools"][1]["function"]["parameters"], weather().schema);
    // The call comes back as the answer: text, ending the turn, no tool call.
    let answer: Value = serde_json::from_str(&response.message.text()).expect("the answer is JSON");
    assert_eq!(answer, json!({"city": "Oslo", "celsius": 4.5}));
    assert_eq!(response.message.tool_uses().count(), 0, "{response:?}");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    snapshot!("typed_output_answer_tool", body);
}

/// The error `wire` gives for a request asking for `output`, and how many requests the
/// server saw (none: a schema the vendor cannot take is refused before sending).
async fn refusal<W: WireFormat>(wire: W, openai_style: bool, output: OutputSchema) -> (troupe_model::Error, usize) {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::text("{}"));
    let url = if openai_style { server.openai_url() } else { server.url() };
    let provider = HttpProvider::new(HttpConfig::new("vendor", url, Some(ApiKey::new("k"))), wire).expect("builds");
    let request = ModelRequest::new("m").message(Message::user("go")).output(output);
    let error = provider.complete(&request, CancellationToken::new()).await.expect_err("refused");
    (error, server.requests().len())
}

#[tokio::test]
async fn a_schema_a_vendor_cannot_take_is_refused_with_the_reason_and_nothing_sent() {
    let list = OutputSchema::new("Cities", json!({"type": "array", "items": {"type": "string"}}));
    let tree = OutputSchema::new(
        "Tree",
        json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["children"], "additionalProperties": false}}}),
    );
    let map = OutputSchema::new(
        "Scores",
        json!({"type": "object", "properties": {"by_name": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "required": ["by_name"], "additionalProperties": false}),
    );
    let cases: Vec<(troupe_model::Error, usize, &str)> = vec![
        {
            let (e, n) = refusal(OpenAiChatWire::default(), true, list.clone()).await;
            (e, n, "the root is of type `array`; OpenAI's structured outputs take an object at the root")
        },
        {
            let (e, n) = refusal(OpenAiResponsesWire::default(), true, list.clone()).await;
            (e, n, "the root is of type `array`")
        },
        {
            let wire = OpenAiChatWire { answer_tool: true, ..OpenAiChatWire::default() };
            let (e, n) = refusal(wire, true, list.clone()).await;
            (e, n, "tool arguments are objects")
        },
        {
            let (e, n) = refusal(AnthropicWire::default(), false, tree.clone()).await;
            (e, n, "`Node` refers to itself, and Anthropic's structured outputs take no recursive schema")
        },
        {
            let (e, n) = refusal(GeminiWire::default(), false, tree.clone()).await;
            (e, n, "`Node` refers to itself, and Gemini's")
        },
        {
            let (e, n) = refusal(AnthropicWire::default(), false, map).await;
            (e, n, "`/properties/by_name` is a map")
        },
    ];
    for (error, sent, reason) in cases {
        assert_eq!(sent, 0, "nothing is sent: {error}");
        assert_eq!(error.code(), "unsupported_output_schema");
        assert!(!error.is_retryable());
        let text = error.to_string();
        assert!(text.starts_with("vendor cannot take the output schema `"), "{text}");
        assert!(text.contains(reason), "{text} lacks {reason}");
    }
}

#[tokio::test]
async fn anthropic_is_sent_the_bounds_it_does_not_enforce_as_descriptions() {
    let counted = OutputSchema::new(
        "Count",
        json!({"type": "object", "properties": {"n": {"type": "integer", "format": "uint32", "minimum": 0}},
            "required": ["n"], "additionalProperties": false}),
    );
    let request = ModelRequest::new("claude-sonnet-4-5").message(Message::user("count")).output(counted);
    let (response, body) = exchange(AnthropicWire::default(), false, &request, MockTurn::text(r#"{"n":3}"#)).await;
    assert_eq!(
        body["output_config"]["format"]["schema"]["properties"]["n"],
        json!({"type": "integer", "description": "Must satisfy: minimum 0, format uint32."})
    );
    assert_eq!(response.message.text(), r#"{"n":3}"#);
}
