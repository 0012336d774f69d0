//! A [`ModelRequest`] written as a `POST /v1/responses` body.

use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, ReasoningConfig, Role, ToolChoice, ToolSpec};

/// The request body, borrowing from the [`ModelRequest`] it was built from.
#[derive(Serialize)]
pub(super) struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<InputItem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "is_empty_map")]
    metadata: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    stream: bool,
    store: bool,
}

fn is_empty_map(map: &&BTreeMap<String, String>) -> bool {
    map.is_empty()
}

/// One item of the `input` list.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputItem<'a> {
    Message { role: &'static str, content: Vec<Part<'a>> },
    FunctionCall { call_id: &'a str, name: &'a str, arguments: Cow<'a, str> },
    FunctionCallOutput { call_id: &'a str, output: Cow<'a, str> },
}

/// One content part of a `message` item.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText {
        text: &'a str,
    },
    OutputText {
        text: &'a str,
    },
    // `detail` is marked required in the official SDK's input-image type.
    InputImage {
        image_url: Cow<'a, str>,
        detail: &'static str,
    },
    InputFile {
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_data: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_url: Option<&'a str>,
    },
}

/// A function tool: flat, unlike Chat Completions' `{type, function: {...}}`.
#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    // Strict mode demands every property be required and `additionalProperties: false`,
    // which arbitrary catalog schemas do not satisfy.
    strict: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Function { r#type: &'static str, name: &'a str },
}

#[derive(Serialize)]
struct Reasoning<'a> {
    effort: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
}

/// `text`: how the answer is written; only its `format` is set, for a typed answer.
#[derive(Serialize)]
struct Text<'a> {
    format: JsonSchemaFormat<'a>,
}

/// `{type: "json_schema", name, schema, strict}`: flat, unlike Chat Completions'
/// `response_format.json_schema`.
#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    r#type: &'static str,
    name: &'a str,
    schema: &'a serde_json::Value,
    strict: bool,
}

/// What the wire options contribute to a body.
pub(super) struct Options<'a> {
    pub(super) reasoning_summary: Option<&'a str>,
    pub(super) store: bool,
}

/// The body for `request`.
pub(super) fn body<'a>(request: &'a ModelRequest, options: Options<'a>) -> Body<'a> {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        push_message(message, &mut input);
    }
    Body {
        model: &request.model,
        instructions: request.system.as_deref(),
        input,
        tools: request.tools.iter().map(tool).collect(),
        tool_choice: request.tool_choice.as_ref().map(tool_choice),
        parallel_tool_calls: request.parallel_tool_calls,
        max_output_tokens: request.max_tokens,
        temperature: request.temperature.and_then(decimal_f64),
        // The Responses API has no stop sequences at all: `request.stop_sequences` cannot
        // be expressed and is dropped.
        metadata: &request.metadata,
        reasoning: request
            .reasoning
            .map(|config| Reasoning { effort: effort(config), summary: options.reasoning_summary }),
        text: request.output.as_ref().map(|output| Text {
            format: JsonSchemaFormat {
                r#type: "json_schema",
                name: &output.name,
                schema: &output.schema,
                strict: output.is_strict(),
            },
        }),
        prompt_cache_key: request.cache.map(|_| crate::prompt_cache::key(request)),
        prompt_cache_retention: request.cache.and_then(crate::prompt_cache::retention),
        stream: true,
        store: options.store,
    }
}

/// The reasoning effort for a token budget. The Responses API takes an effort level, not
/// a budget; the thresholds follow the budgets other vendors document for "a little",
/// "some" and "a lot" of thinking.
pub(super) fn effort(config: ReasoningConfig) -> &'static str {
    match config.budget_tokens {
        0..4_096 => "low",
        4_096..16_384 => "medium",
        _ => "high",
    }
}

/// `value` as the f64 with the same shortest decimal form (`0.7f32` is 0.699999988 as a
/// plain cast, which the server would echo back as such).
fn decimal_f64(value: f32) -> Option<f64> {
    if !value.is_finite() {
        return None;
    }
    Some(value.to_string().parse::<f64>().unwrap_or(f64::from(value)))
}

fn tool(spec: &ToolSpec) -> Tool<'_> {
    Tool {
        r#type: "function",
        name: &spec.name,
        description: &spec.description,
        parameters: &spec.input_schema,
        strict: false,
    }
}

fn tool_choice(choice: &ToolChoice) -> WireToolChoice<'_> {
    match choice {
        ToolChoice::Auto => WireToolChoice::Mode("auto"),
        ToolChoice::Any => WireToolChoice::Mode("required"),
        ToolChoice::None => WireToolChoice::Mode("none"),
        ToolChoice::Tool { name } => WireToolChoice::Function { r#type: "function", name },
    }
}

/// Appends `message` as input items, keeping the order of its blocks: text and images
/// gather into `message` items, while tool calls and results are items of their own
/// (the API requires each result to follow its call).
fn push_message<'a>(message: &'a Message, input: &mut Vec<InputItem<'a>>) {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let mut parts: Vec<Part<'a>> = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } if text.is_empty() => {}
            ContentBlock::Text { text } => parts.push(match message.role {
                Role::User => Part::InputText { text },
                Role::Assistant => Part::OutputText { text },
            }),
            // Assistant output cannot hold images; only user turns carry them.
            ContentBlock::Image { source } if message.role == Role::User => {
                parts.push(Part::InputImage { image_url: image_url(source), detail: "auto" })
            }
            ContentBlock::Image { .. } => {}
            ContentBlock::Document { source, name } if message.role == Role::User => {
                let (file_data, file_url) = match source {
                    ImageSource::Base64 { .. } => (Some(image_url(source)), None),
                    ImageSource::Url { url } => (None, Some(url.as_str())),
                };
                let filename = Some(name.as_deref().unwrap_or("document.pdf")).filter(|_| file_data.is_some());
                parts.push(Part::InputFile { filename, file_data, file_url })
            }
            ContentBlock::Document { .. } => {}
            ContentBlock::ToolUse { id, name, input: arguments, .. } => {
                flush(role, &mut parts, input);
                input.push(InputItem::FunctionCall {
                    call_id: id.as_str(),
                    name,
                    arguments: arguments_text(arguments),
                });
            }
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                flush(role, &mut parts, input);
                // `function_call_output` has no error flag: the prefix is how the model
                // learns the call failed.
                let output =
                    if *is_error { Cow::Owned(format!("Error: {content}")) } else { Cow::Borrowed(content.as_str()) };
                input.push(InputItem::FunctionCallOutput { call_id: tool_use_id.as_str(), output });
            }
            // Reasoning could only be echoed as a `reasoning` item carrying the id and the
            // `encrypted_content` the server returns with `include:
            // ["reasoning.encrypted_content"]`; troupe keeps neither, and a summary alone
            // is not accepted back. With `store: false` the server keeps nothing either, so
            // earlier reasoning is dropped and the model reasons afresh each turn.
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
        }
    }
    flush(role, &mut parts, input);
}

fn flush<'a>(role: &'static str, parts: &mut Vec<Part<'a>>, input: &mut Vec<InputItem<'a>>) {
    if !parts.is_empty() {
        input.push(InputItem::Message { role, content: std::mem::take(parts) });
    }
}

fn image_url(source: &ImageSource) -> Cow<'_, str> {
    match source {
        ImageSource::Url { url } => Cow::Borrowed(url),
        ImageSource::Base64 { media_type, data } => Cow::Owned(format!("data:{media_type};base64,{data}")),
    }
}

/// The call's arguments as the JSON text the API expects. Arguments the model wrote as
/// invalid JSON are kept by the accumulator as a string of the raw text; that text is
/// echoed unchanged so the model sees what it actually sent.
fn arguments_text(arguments: &serde_json::Value) -> Cow<'_, str> {
    match arguments {
        serde_json::Value::String(raw) => Cow::Borrowed(raw),
        other => Cow::Owned(other.to_string()),
    }
}
