//! Writing a [`ModelRequest`] as a Chat Completions body.

use super::OpenAiChatWire;
use serde_json::{Map, Value, json};
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice};

/// The JSON body of `POST /chat/completions` for `request`.
pub(super) fn body(wire: &OpenAiChatWire, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema},
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        // OpenAI rejects `tool_choice` and `parallel_tool_calls` in a request without
        // `tools` ("only allowed when 'tools' are specified"), so both ride on the tools.
        if let Some(choice) = &request.tool_choice {
            body.insert("tool_choice".into(), tool_choice(choice));
        }
        if let Some(parallel) = request.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
        }
    }
    if let Some(max_tokens) = request.max_tokens {
        let field = if wire.legacy_max_tokens { "max_tokens" } else { "max_completion_tokens" };
        body.insert(field.into(), Value::from(max_tokens));
    }
    if let Some(temperature) = request.temperature.and_then(number_f32) {
        body.insert("temperature".into(), temperature);
    }
    if !request.stop_sequences.is_empty() {
        body.insert("stop".into(), json!(request.stop_sequences));
    }
    if let Some(output) = &request.output {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": output.name, "schema": output.schema, "strict": output.is_strict()}}),
        );
    }
    if let Some(ttl) = request.cache {
        body.insert("prompt_cache_key".into(), Value::String(crate::prompt_cache::key(request)));
        if let Some(retention) = crate::prompt_cache::retention(ttl) {
            body.insert("prompt_cache_retention".into(), Value::String(retention.into()));
        }
    }
    if let Some(reasoning) = &request.reasoning {
        body.insert("reasoning_effort".into(), Value::String(reasoning_effort(reasoning.budget_tokens).into()));
    }
    // OpenAI answers 400 ("The 'metadata' parameter is only allowed when 'store' is
    // enabled") to metadata without `store: true`, and storing completions on the vendor's
    // side is a retention decision the caller opts into; without it metadata is dropped.
    if wire.store {
        body.insert("store".into(), Value::Bool(true));
        if !request.metadata.is_empty() {
            body.insert("metadata".into(), json!(request.metadata));
        }
    }
    body.insert("stream".into(), Value::Bool(true));
    if wire.stream_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
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
fn number_f32(value: f32) -> Option<Value> {
    let widened: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(widened).map(Value::Number)
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Any => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool { name } => json!({"type": "function", "function": {"name": name}}),
    }
}

fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        out.push(json!({"role": "system", "content": system}));
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
fn user_messages(message: &Message, out: &mut Vec<Value>) {
    let mut parts = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                out.push(
                    json!({"role": "tool", "tool_call_id": tool_use_id, "content": tool_content(content, *is_error)}),
                );
            }
            ContentBlock::Text { text } => parts.push(json!({"type": "text", "text": text})),
            ContentBlock::Image { source } => {
                parts.push(json!({"type": "image_url", "image_url": {"url": image_url(source)}}))
            }
            // Chat takes a file's bytes only (a URL is refused before the request is built).
            ContentBlock::Document { source, name } => {
                let mut file = Map::new();
                file.insert("filename".into(), Value::String(name.clone().unwrap_or_else(|| "document.pdf".into())));
                file.insert("file_data".into(), Value::String(image_url(source)));
                parts.push(json!({"type": "file", "file": file}));
            }
            // Calls and reasoning are the model's; they cannot appear in a user turn.
            ContentBlock::ToolUse { .. } | ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
        }
    }
    if parts.is_empty() {
        return;
    }
    let content = match <[Value; 1]>::try_from(parts) {
        // A lone text part is sent as a plain string, the form every compatible server accepts.
        Ok([Value::Object(mut part)]) if part.get("type").and_then(Value::as_str) == Some("text") => {
            part.remove("text").unwrap_or_default()
        }
        Ok([part]) => Value::Array(vec![part]),
        Err(parts) => Value::Array(parts),
    };
    out.push(json!({"role": "user", "content": content}));
}

/// The wire has no error flag on tool results, so a failure is said in the content itself.
fn tool_content(content: &str, is_error: bool) -> String {
    let already_said = content.get(..5).is_some_and(|head| head.eq_ignore_ascii_case("error"));
    if is_error && !already_said { format!("Error: {content}") } else { content.to_owned() }
}

fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// An assistant turn: its text and its tool calls. Reasoning is dropped: Chat Completions
/// accepts none back (DeepSeek even rejects `reasoning_content` in input), and images
/// cannot be written by an assistant. A turn left empty is omitted.
fn assistant_message(message: &Message) -> Option<Value> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => texts.push(text.as_str()),
            ContentBlock::ToolUse { id, name, input, .. } => {
                // Arguments that were not valid JSON come back as the raw string the model
                // wrote; they are echoed as written rather than quoted once more.
                let arguments = match input {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}));
            }
            // A call's signature is Gemini's; this wire has no place for it.
            ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Image { .. }
            | ContentBlock::Document { .. }
            | ContentBlock::ToolResult { .. } => {}
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let content = match texts.as_slice() {
        [] => Value::Null,
        [text] => Value::String((*text).to_owned()),
        many => Value::Array(many.iter().map(|text| json!({"type": "text", "text": text})).collect()),
    };
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert("content".into(), content);
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(out))
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
        assert_eq!(number_f32(0.2), Some(json!(0.2)));
        assert_eq!(number_f32(1.0), Some(json!(1.0)));
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
