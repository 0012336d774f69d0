//! Writing a [`ModelRequest`] as a Chat Completions body.
//!
//! The body borrows from the request and is written straight to its JSON: nothing of the
//! conversation or of the tools' schemas is copied into a `serde_json::Value` tree first,
//! which at every model call cost as much as writing the JSON itself.

use super::OpenAiChatWire;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, OutputSchema, Role, ToolChoice, ToolSpec};

/// The JSON body of `POST /chat/completions`.
#[derive(Serialize)]
pub(super) struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a BTreeMap<String, String>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Named(&'static str),
    Function { r#type: &'static str, function: NamedFunction<'a> },
}

#[derive(Serialize)]
struct NamedFunction<'a> {
    name: &'a str,
}

/// `{type: "json_schema", json_schema: {name, schema, strict}}`.
#[derive(Serialize)]
struct ResponseFormat<'a> {
    r#type: &'static str,
    json_schema: JsonSchema<'a>,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message of the wire: a conversation's turn can make several (a user turn's tool
/// results are messages of their own).
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: AssistantContent<'a>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: Url<'a> },
    File { file: File<'a> },
}

#[derive(Serialize)]
struct Url<'a> {
    url: Cow<'a, str>,
}

#[derive(Serialize)]
struct File<'a> {
    filename: &'a str,
    file_data: Cow<'a, str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum AssistantContent<'a> {
    None(Option<()>),
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

/// The body of `POST /chat/completions` for `request`.
pub(super) fn body<'a>(wire: &OpenAiChatWire, request: &'a ModelRequest) -> Body<'a> {
    let has_tools = !request.tools.is_empty();
    let (max_completion_tokens, max_tokens) = match (request.max_tokens, wire.legacy_max_tokens) {
        (Some(max), false) => (Some(max), None),
        (Some(max), true) => (None, Some(max)),
        (None, _) => (None, None),
    };
    // OpenAI answers 400 ("The 'metadata' parameter is only allowed when 'store' is
    // enabled") to metadata without `store: true`, and storing completions on the vendor's
    // side is a retention decision the caller opts into; without it metadata is dropped.
    let metadata = (wire.store && !request.metadata.is_empty()).then_some(&request.metadata);
    Body {
        model: &request.model,
        messages: messages(request),
        tools: request.tools.iter().map(tool).collect(),
        // OpenAI rejects `tool_choice` and `parallel_tool_calls` in a request without
        // `tools` ("only allowed when 'tools' are specified"), so both ride on the tools.
        tool_choice: request.tool_choice.as_ref().filter(|_| has_tools).map(tool_choice),
        parallel_tool_calls: request.parallel_tool_calls.filter(|_| has_tools),
        max_completion_tokens,
        max_tokens,
        temperature: request.temperature.and_then(number_f32),
        stop: &request.stop_sequences,
        response_format: request.output.as_ref().map(response_format),
        prompt_cache_key: request.cache.map(|_| crate::prompt_cache::key(request)),
        prompt_cache_retention: request.cache.and_then(crate::prompt_cache::retention),
        reasoning_effort: request.reasoning.as_ref().map(|reasoning| reasoning_effort(reasoning.budget_tokens)),
        store: wire.store.then_some(true),
        metadata,
        stream: true,
        stream_options: wire.stream_usage.then_some(StreamOptions { include_usage: true }),
    }
}

fn tool(tool: &ToolSpec) -> WireTool<'_> {
    WireTool {
        r#type: "function",
        function: WireFunction { name: &tool.name, description: &tool.description, parameters: &tool.input_schema },
    }
}

fn response_format(output: &OutputSchema) -> ResponseFormat<'_> {
    ResponseFormat {
        r#type: "json_schema",
        json_schema: JsonSchema { name: &output.name, schema: &output.schema, strict: output.is_strict() },
    }
}

/// Chat Completions has no thinking budget, only `reasoning_effort`. Google documents the
/// efforts of its OpenAI-compatible endpoint as budgets of 1 024 (`low`), 8 192 (`medium`)
/// and 24 576 (`high`) tokens; a budget maps to the smallest effort that covers it.
pub(super) fn reasoning_effort(budget_tokens: u32) -> &'static str {
    match budget_tokens {
        0..=1024 => "low",
        1025..=8192 => "medium",
        _ => "high",
    }
}

/// `value` as the JSON number its decimal form shows (`0.2`, not the `0.20000000298023224`
/// a widening cast to `f64` gives); `None` for NaN and infinities, which JSON cannot hold.
fn number_f32(value: f32) -> Option<f64> {
    let widened: f64 = value.to_string().parse().ok()?;
    widened.is_finite().then_some(widened)
}

fn tool_choice(choice: &ToolChoice) -> WireToolChoice<'_> {
    match choice {
        ToolChoice::Auto => WireToolChoice::Named("auto"),
        ToolChoice::Any => WireToolChoice::Named("required"),
        ToolChoice::None => WireToolChoice::Named("none"),
        ToolChoice::Tool { name } => WireToolChoice::Function { r#type: "function", function: NamedFunction { name } },
    }
}

fn messages(request: &ModelRequest) -> Vec<WireMessage<'_>> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        out.push(WireMessage::System { content: system });
    }
    for message in &request.messages {
        match message.role {
            Role::User => user_messages(message, &mut out),
            Role::Assistant => out.extend(assistant_message(message)),
        }
    }
    out
}

/// A user turn becomes its tool results, each a `role: tool` message, then the rest as one
/// user message. The tool messages come first whatever the block order: OpenAI requires
/// them right after the assistant message whose calls they answer.
fn user_messages<'a>(message: &'a Message, out: &mut Vec<WireMessage<'a>>) {
    let mut parts = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                out.push(WireMessage::Tool {
                    tool_call_id: tool_use_id.as_str(),
                    content: tool_content(content, *is_error),
                });
            }
            ContentBlock::Text { text } => parts.push(Part::Text { text }),
            ContentBlock::Image { source } => parts.push(Part::ImageUrl { image_url: Url { url: image_url(source) } }),
            // Chat takes a file's bytes only (a URL is refused before the request is built).
            ContentBlock::Document { source, name } => parts.push(Part::File {
                file: File { filename: name.as_deref().unwrap_or("document.pdf"), file_data: image_url(source) },
            }),
            // Calls and reasoning are the model's; they cannot appear in a user turn.
            ContentBlock::ToolUse { .. } | ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
        }
    }
    let content = match parts.as_slice() {
        [] => return,
        // A lone text part is sent as a plain string, the form every compatible server accepts.
        [Part::Text { text }] => UserContent::Text(text),
        _ => UserContent::Parts(parts),
    };
    out.push(WireMessage::User { content });
}

/// The wire has no error flag on tool results, so a failure is said in the content itself.
fn tool_content(content: &str, is_error: bool) -> Cow<'_, str> {
    let already_said = content.get(..5).is_some_and(|head| head.eq_ignore_ascii_case("error"));
    if is_error && !already_said { Cow::Owned(format!("Error: {content}")) } else { Cow::Borrowed(content) }
}

fn image_url(source: &ImageSource) -> Cow<'_, str> {
    match source {
        ImageSource::Base64 { media_type, data } => Cow::Owned(format!("data:{media_type};base64,{data}")),
        ImageSource::Url { url } => Cow::Borrowed(url),
    }
}

/// An assistant turn: its text and its tool calls. Reasoning is dropped: Chat Completions
/// accepts none back (DeepSeek even rejects `reasoning_content` in input), and images
/// cannot be written by an assistant. A turn left empty is omitted.
fn assistant_message(message: &Message) -> Option<WireMessage<'_>> {
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => texts.push(text.as_str()),
            ContentBlock::ToolUse { id, name, input, .. } => {
                // Arguments that were not valid JSON come back as the raw string the model
                // wrote; they are echoed as written rather than quoted once more.
                let arguments = match input {
                    Value::String(raw) => Cow::Borrowed(raw.as_str()),
                    other => Cow::Owned(other.to_string()),
                };
                tool_calls.push(WireCall {
                    id: id.as_str(),
                    r#type: "function",
                    function: CallFunction { name, arguments },
                });
            }
            // A call's signature is Gemini's; this wire has no place for it.
            ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Image { .. }
            | ContentBlock::Document { .. }
            | ContentBlock::ToolResult { .. } => {}
        }
    }
    let content = match texts.as_slice() {
        [] if tool_calls.is_empty() => return None,
        [] => AssistantContent::None(None),
        [text] => AssistantContent::Text(text),
        many => AssistantContent::Parts(many.iter().map(|text| Part::Text { text }).collect()),
    };
    Some(WireMessage::Assistant { content, tool_calls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_map_to_the_smallest_covering_effort() {
        assert_eq!(reasoning_effort(0), "low");
        assert_eq!(reasoning_effort(1024), "low");
        assert_eq!(reasoning_effort(1025), "medium");
        assert_eq!(reasoning_effort(8192), "medium");
        assert_eq!(reasoning_effort(32_000), "high");
    }

    #[test]
    fn floats_keep_their_decimal_form() {
        assert_eq!(number_f32(0.2), Some(0.2));
        assert_eq!(number_f32(1.0), Some(1.0));
        assert_eq!(serde_json::to_string(&number_f32(0.2)).expect("writes"), "0.2");
        assert_eq!(number_f32(f32::NAN), None);
    }

    #[test]
    fn error_results_say_so_once() {
        assert_eq!(tool_content("no such file", true), "Error: no such file");
        assert_eq!(tool_content("error: no such file", true), "error: no such file");
        assert_eq!(tool_content("fine", false), "fine");
        assert_eq!(tool_content("é", true), "Error: é", "short and non-ASCII content does not panic");
    }
}
