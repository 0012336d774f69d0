//! [`ModelRequest`] → a `streamGenerateContent` request.

use super::{GeminiWire, schema};
use crate::error::{Error, Result};
use crate::wire::WireRequest;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice};

pub(super) fn build(wire: &GeminiWire, request: &ModelRequest) -> Result<WireRequest> {
    let model = model_segment(&request.model)?;
    let path = format!("/{}/models/{model}:streamGenerateContent?alt=sse", wire.api_version);

    let mut body = Map::new();
    body.insert("contents".to_owned(), Value::Array(contents(wire, &request.messages)?));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("systemInstruction".to_owned(), json!({"parts": [{"text": system}]}));
    }
    // Every schema of the request draws on one budget: it bounds what inlining `$ref`s
    // makes of them all, whatever their number.
    let mut budget = schema::Budget::default();
    if !request.tools.is_empty() {
        let mut declarations = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let mut declaration = Map::new();
            declaration.insert("name".to_owned(), Value::String(tool.name.clone()));
            if !tool.description.is_empty() {
                declaration.insert("description".to_owned(), Value::String(tool.description.clone()));
            }
            let parameters = schema::parameters(&tool.input_schema, &mut budget).map_err(|too_large| {
                Error::Config(format!("the input schema of tool `{}` cannot be sent to Gemini: {too_large}", tool.name))
            })?;
            if let Some(parameters) = parameters {
                declaration.insert("parameters".to_owned(), parameters);
            }
            declarations.push(Value::Object(declaration));
        }
        body.insert("tools".to_owned(), json!([{"functionDeclarations": declarations}]));
        // A tool config without declarations is refused, so it only travels with tools.
        if let Some(choice) = &request.tool_choice {
            let config = match choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::Any => json!({"mode": "ANY"}),
                ToolChoice::Tool { name } => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
                ToolChoice::None => json!({"mode": "NONE"}),
            };
            body.insert("toolConfig".to_owned(), json!({"functionCallingConfig": config}));
        }
    }
    // `parallel_tool_calls` is dropped: Gemini has no switch for it (the model decides).

    let mut generation = Map::new();
    if let Some(max) = request.max_tokens.or(wire.max_output_tokens) {
        generation.insert("maxOutputTokens".to_owned(), json!(max));
    }
    if let Some(temperature) = request.temperature {
        generation.insert("temperature".to_owned(), json!(temperature));
    }
    if !request.stop_sequences.is_empty() {
        generation.insert("stopSequences".to_owned(), json!(request.stop_sequences));
    }
    if let Some(reasoning) = request.reasoning {
        // A budget of 0 turns thinking off; there are no thoughts to include then.
        let thinking = if reasoning.budget_tokens == 0 {
            json!({"thinkingBudget": 0})
        } else {
            json!({"thinkingBudget": reasoning.budget_tokens, "includeThoughts": true})
        };
        generation.insert("thinkingConfig".to_owned(), thinking);
    }
    if let Some(output) = &request.output {
        generation.insert("responseMimeType".to_owned(), json!("application/json"));
        // `GeminiWire::adapt_output` has refused an output schema too large alone, under the
        // provider's name; here it can still outgrow what the tools' schemas left.
        let converted = schema::response_schema(&output.schema, &mut budget).map_err(|too_large| {
            Error::UnsupportedOutputSchema {
                provider: "gemini".to_owned(),
                name: output.name.clone(),
                reason: too_large.to_string(),
            }
        })?;
        generation.insert("responseSchema".to_owned(), converted);
    }
    if !generation.is_empty() {
        body.insert("generationConfig".to_owned(), Value::Object(generation));
    }
    // `metadata` is dropped: the Generative Language API has no labels or user field
    // (Vertex AI's `labels` is a different endpoint). Streaming is chosen by the endpoint
    // and `alt=sse`, not by a body field.
    Ok(WireRequest { path, body: Value::Object(body), headers: Vec::new() })
}

/// The model as one URL path segment. Names come from configuration and the command line,
/// so anything that could leave the segment (`/`, `?`, `#`, `%`, `..`) is refused rather
/// than escaped: no real Gemini model name needs it.
fn model_segment(model: &str) -> Result<&str> {
    // The SDKs accept the resource form `models/gemini-2.5-flash` too.
    let name = model.strip_prefix("models/").unwrap_or(model);
    let valid = !name.is_empty()
        && !name.contains("..")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(name)
    } else {
        Err(Error::Config(format!(
            "`{model}` is not a valid Gemini model name (letters, digits, `-`, `_` and `.` only)"
        )))
    }
}

fn contents(wire: &GeminiWire, messages: &[Message]) -> Result<Vec<Value>> {
    // The wire name of each call, by id, as of the message being translated: a result names
    // the function it answers, and ids generated per response (`call_0`) recur across turns,
    // so the nearest earlier call wins.
    let mut calls: HashMap<&str, &str> = HashMap::new();
    let mut contents = Vec::with_capacity(messages.len());
    for message in messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "model",
        };
        let mut parts: Vec<Value> = Vec::with_capacity(message.content.len());
        for block in &message.content {
            match block {
                ContentBlock::Text { text } => {
                    // Gemini refuses empty text parts.
                    if !text.is_empty() {
                        parts.push(json!({"text": text}));
                    }
                }
                ContentBlock::Image { source } => parts.push(image(source)),
                ContentBlock::Document { source: ImageSource::Base64 { media_type, data }, .. } => {
                    parts.push(json!({"inlineData": {"mimeType": media_type, "data": data}}))
                }
                ContentBlock::Document { source: ImageSource::Url { url }, .. } => {
                    parts.push(json!({"fileData": {"fileUri": url, "mimeType": "application/pdf"}}))
                }
                ContentBlock::ToolUse { id, name, input, signature } => {
                    calls.insert(id.as_str(), name.as_str());
                    let mut call = Map::new();
                    if wire.send_call_ids {
                        call.insert("id".to_owned(), Value::String(id.to_string()));
                    }
                    call.insert("name".to_owned(), Value::String(name.clone()));
                    call.insert("args".to_owned(), arguments(input));
                    let mut part = Map::new();
                    part.insert("functionCall".to_owned(), Value::Object(call));
                    if let Some(signature) = signature {
                        part.insert("thoughtSignature".to_owned(), Value::String(signature.clone()));
                    }
                    parts.push(Value::Object(part));
                }
                ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                    let Some(name) = calls.get(tool_use_id.as_str()) else {
                        return Err(Error::Config(format!(
                            "the tool result for `{tool_use_id}` answers no earlier tool call; Gemini needs the function's name"
                        )));
                    };
                    // `output` and `error` are the keys the API documents for a function's
                    // result and its failure.
                    let key = if *is_error { "error" } else { "output" };
                    let mut response = Map::new();
                    if wire.send_call_ids {
                        response.insert("id".to_owned(), Value::String(tool_use_id.to_string()));
                    }
                    response.insert("name".to_owned(), Value::String((*name).to_owned()));
                    response.insert("response".to_owned(), json!({ key: content }));
                    parts.push(json!({"functionResponse": response}));
                }
                ContentBlock::Thinking { text, signature } => thinking(&mut parts, text, signature.as_deref()),
                // Gemini has no encrypted reasoning to echo: its opaque state travels as
                // `thoughtSignature`, which troupe keeps on the blocks themselves.
                ContentBlock::RedactedThinking { .. } => {}
            }
        }
        // A content without parts is refused; a message of only dropped blocks has nothing to say.
        if !parts.is_empty() {
            contents.push(json!({"role": role, "parts": parts}));
        }
    }
    Ok(contents)
}

fn image(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { media_type, data } => json!({"inlineData": {"mimeType": media_type, "data": data}}),
        ImageSource::Url { url } => {
            let mut file = Map::new();
            file.insert("fileUri".to_owned(), Value::String(url.clone()));
            if let Some(mime) = image_mime(url) {
                file.insert("mimeType".to_owned(), Value::String(mime.to_owned()));
            }
            json!({"fileData": file})
        }
    }
}

/// The MIME type an image URL's extension implies, for the formats Gemini reads.
fn image_mime(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        _ => return None,
    })
}

/// `args` must be an object. Arguments that are not one (a model's malformed call, kept raw
/// by the accumulator) are wrapped so the history can still be sent and the model sees them.
fn arguments(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::Null => Value::Object(Map::new()),
        other => json!({"arguments": other}),
    }
}

fn thinking(parts: &mut Vec<Value>, text: &str, signature: Option<&str>) {
    if !text.is_empty() {
        let mut part = Map::new();
        part.insert("text".to_owned(), Value::String(text.to_owned()));
        part.insert("thought".to_owned(), Value::Bool(true));
        if let Some(signature) = signature {
            part.insert("thoughtSignature".to_owned(), Value::String(signature.to_owned()));
        }
        parts.push(Value::Object(part));
        return;
    }
    let Some(signature) = signature else { return };
    // An empty, signed reasoning block is how the parser keeps a signature Gemini put on an
    // answer's text part (troupe's text blocks carry none): it goes back onto that part.
    if let Some(Value::Object(previous)) = parts.last_mut() {
        let plain_text = previous.contains_key("text")
            && !previous.contains_key("thought")
            && !previous.contains_key("thoughtSignature");
        if plain_text {
            previous.insert("thoughtSignature".to_owned(), Value::String(signature.to_owned()));
            return;
        }
    }
    parts.push(json!({"text": "", "thoughtSignature": signature}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_cannot_leave_their_path_segment() {
        assert_eq!(model_segment("gemini-2.5-flash").ok(), Some("gemini-2.5-flash"));
        assert_eq!(model_segment("models/gemini-2.0-flash-001").ok(), Some("gemini-2.0-flash-001"));
        for bad in ["", "models/", "../v1/files", "a/b", "x?alt=json", "x#y", "x%2Fy", "..", "gemini 2"] {
            assert!(matches!(model_segment(bad), Err(Error::Config(_))), "{bad:?} must be refused");
        }
    }

    #[test]
    fn image_urls_get_a_mime_type_when_the_extension_says() {
        assert_eq!(image_mime("https://x.test/a/cat.JPG?size=2"), Some("image/jpeg"));
        assert_eq!(image_mime("https://x.test/files/abc"), None);
    }

    #[test]
    fn schemas_too_large_to_inline_are_refused_naming_what_carries_them() {
        use troupe_core::{OutputSchema, ToolSpec};
        let wire = GeminiWire::default();
        let ladder = schema::ladder(8, 16, json!({"type": "string"}));
        let small = json!({"type": "object", "properties": {"q": {"type": "string"}}});

        let tool = ModelRequest::new("gemini-2.5-flash").tool(ToolSpec::new("deep", "", ladder.clone()));
        let error = build(&wire, &tool).expect_err("the tool's schema is refused");
        assert!(matches!(&error, Error::Config(message) if message.contains("tool `deep`")), "{error}");

        let output = ModelRequest::new("gemini-2.5-flash")
            .tool(ToolSpec::new("search", "", small.clone()))
            .output(OutputSchema::new("Deep", ladder));
        let error = build(&wire, &output).expect_err("the output schema is refused");
        assert!(matches!(&error, Error::UnsupportedOutputSchema { name, .. } if name == "Deep"), "{error}");
        assert_eq!(error.code(), "unsupported_output_schema");

        let fine = ModelRequest::new("gemini-2.5-flash").tool(ToolSpec::new("search", "", small));
        assert!(build(&wire, &fine).is_ok());
    }
}
