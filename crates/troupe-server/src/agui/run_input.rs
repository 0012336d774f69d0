//! From an AG-UI `RunAgentInput` to a troupe [`RunInput`]: the conversation, the
//! instruction, the model.

use super::input::{AssistantMessage, Content, ContentPart, Message, PartSource, RunAgentInput, ToolMessage};
use crate::error::ApiError;
use axum::http::StatusCode;
use serde_json::{Value, json};
use troupe_core::{ContentBlock, ConversationId, ImageSource, Message as TroupeMessage, Role, ToolSpec};
use troupe_runtime::RunInput;

fn unprocessable(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
}

/// The troupe run `input` asks for: the last message (the person's) is the
/// instruction, with the `context` entries, any system or developer messages and the
/// client's shared `state` (when it says anything) appended under a `Context:` heading;
/// the messages before it are the history; the thread is the conversation;
/// `forwardedProps.modelSelection` picks the model; `tools` are the client tools
/// offered beside the agent's ([`client_tools`]), and a `state` that is not `null` is
/// the state shared with the run.
pub fn run_input(input: &RunAgentInput) -> Result<RunInput, ApiError> {
    let (last, earlier) = input
        .messages
        .split_last()
        .ok_or_else(|| unprocessable("invalid_body", "`messages` is empty: there is nothing to answer"))?;
    let Message::User(last) = last else {
        return Err(unprocessable("invalid_body", "the last message must be the person's (role `user`)"));
    };
    let mut context: Vec<(String, String)> = Vec::new();
    let mut history: Vec<TroupeMessage> = Vec::new();
    for message in earlier {
        match message {
            Message::System(m) => context.push(("system message".to_owned(), m.content.clone())),
            Message::Developer(m) => context.push(("developer message".to_owned(), m.content.clone())),
            Message::User(m) => history.push(TroupeMessage::new(Role::User, blocks(&m.content, &m.id)?)),
            Message::Assistant(m) => {
                let blocks = assistant_blocks(m)?;
                if !blocks.is_empty() {
                    history.push(TroupeMessage::new(Role::Assistant, blocks));
                }
            }
            Message::Tool(m) => push_tool_result(&mut history, m)?,
            // Shown by the client only: neither is something the model said or was told.
            Message::Activity(_) | Message::Reasoning(_) => {}
        }
    }
    context.extend(input.context.iter().map(|c| (c.description.clone(), c.value.clone())));
    // The state the client shares with the agent: what the agent reads of the app.
    if let Some(state) = input.state.as_ref().filter(|s| !is_empty_state(s)) {
        let shown = serde_json::to_string_pretty(state).unwrap_or_else(|_| state.to_string());
        context.push(("the client's shared state (JSON)".to_owned(), shown));
    }
    let mut instruction = text_only(&last.content, &last.id)?;
    if !context.is_empty() {
        instruction.push_str("\n\nContext:");
        for (description, value) in context {
            instruction.push_str(&format!("\n\n## {description}\n{value}"));
        }
    }
    let mut run = RunInput::new(instruction)
        .history(history)
        .conversation(ConversationId::new(input.thread_id.clone()))
        .client_tools(client_tools(input, &[])?);
    if let Some(state) = input.state.as_ref().filter(|s| !s.is_null()) {
        run = run.shared_state(state.clone());
    }
    if let Some(model) = model_selection(&input.forwarded_props)? {
        run = run.model(model);
    }
    Ok(run)
}

/// The client tools `input` offers, as the model will see them (parameters left out
/// take no arguments), checked: well-formed names given once, none of `taken` (the
/// agent's own tools), object schemas. A 422 `invalid_client_tools` says what is wrong.
pub fn client_tools(input: &RunAgentInput, taken: &[String]) -> Result<Vec<ToolSpec>, ApiError> {
    let tools: Vec<ToolSpec> = input
        .tools
        .iter()
        .map(|tool| {
            let schema = tool.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            ToolSpec::new(tool.name.clone(), tool.description.clone(), schema)
        })
        .collect();
    troupe_runtime::validate_client_tools(&tools, taken.iter().map(String::as_str))
        .map_err(|why| unprocessable("invalid_client_tools", why))?;
    Ok(tools)
}

/// What a tool message says: its text (or, when it has none, its error) and whether the
/// call failed.
pub(crate) fn tool_result(message: &ToolMessage) -> Result<(String, bool), ApiError> {
    let mut content = text_only(&message.content, &message.id)?;
    if let Some(error) = &message.error
        && content.is_empty()
    {
        content.clone_from(error);
    }
    Ok((content, message.error.is_some()))
}

/// Whether `state` says nothing: null, or an empty object or list.
fn is_empty_state(state: &Value) -> bool {
    match state {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// The model `forwardedProps.modelSelection` names: a string (`"anthropic/claude-x"`),
/// or an object with `model` (or `id`) and, optionally, `provider`, which is prefixed
/// when the model names none (`{"provider": "anthropic", "model": "claude-x"}`).
pub fn model_selection(forwarded_props: &Value) -> Result<Option<String>, ApiError> {
    let bad = || {
        unprocessable(
            "invalid_model_selection",
            "`forwardedProps.modelSelection` must be a model id (`provider/model`) or an object with a `model` \
             (or `id`) string and an optional `provider`",
        )
    };
    let selection = match forwarded_props.get("modelSelection") {
        None | Some(Value::Null) => return Ok(None),
        Some(selection) => selection,
    };
    fn non_empty(value: Option<&Value>) -> Option<&str> {
        value.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    let model = match selection {
        Value::String(_) => non_empty(Some(selection)).ok_or_else(bad)?.to_owned(),
        Value::Object(map) => {
            let model = non_empty(map.get("model")).or_else(|| non_empty(map.get("id"))).ok_or_else(bad)?;
            match (map.get("provider"), non_empty(map.get("provider"))) {
                (None | Some(Value::Null), _) => model.to_owned(),
                (Some(_), None) => return Err(bad()),
                (Some(_), Some(_)) if model.contains('/') => model.to_owned(),
                (Some(_), Some(provider)) => format!("{provider}/{model}"),
            }
        }
        _ => return Err(bad()),
    };
    Ok(Some(model))
}

fn unsupported(id: &str, what: &str) -> ApiError {
    unprocessable("unsupported_content", format!("message `{id}`: {what} content is not supported"))
}

fn text_only(content: &Content, id: &str) -> Result<String, ApiError> {
    match content {
        Content::Text(text) => Ok(text.clone()),
        Content::Parts(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                match part {
                    ContentPart::Text { text } => texts.push(text.as_str()),
                    _ => return Err(unsupported(id, "media in the last message")),
                }
            }
            Ok(texts.join("\n"))
        }
    }
}

fn blocks(content: &Content, id: &str) -> Result<Vec<ContentBlock>, ApiError> {
    match content {
        Content::Text(text) => Ok(vec![ContentBlock::text(text.clone())]),
        Content::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => Ok(ContentBlock::text(text.clone())),
                ContentPart::Image { source: PartSource::Data { value, mime_type } } => Ok(ContentBlock::Image {
                    source: ImageSource::Base64 { media_type: mime_type.clone(), data: value.clone() },
                }),
                ContentPart::Image { source: PartSource::Url { value, .. } } => {
                    Ok(ContentBlock::Image { source: ImageSource::Url { url: value.clone() } })
                }
                ContentPart::Image { source: PartSource::File { .. } } => Err(unsupported(id, "provider file")),
                ContentPart::Audio { .. } => Err(unsupported(id, "audio")),
                ContentPart::Video { .. } => Err(unsupported(id, "video")),
                ContentPart::Document { .. } => Err(unsupported(id, "document")),
            })
            .collect(),
    }
}

fn assistant_blocks(message: &AssistantMessage) -> Result<Vec<ContentBlock>, ApiError> {
    let mut blocks = Vec::new();
    if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
        blocks.push(ContentBlock::text(text));
    }
    for call in &message.tool_calls {
        let arguments = if call.function.arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(&call.function.arguments).map_err(|e| {
                unprocessable(
                    "invalid_body",
                    format!("message `{}`: the arguments of tool call `{}` are not JSON: {e}", message.id, call.id),
                )
            })?
        };
        blocks.push(ContentBlock::tool_use(call.id.clone(), call.function.name.clone(), arguments));
    }
    Ok(blocks)
}

/// Adds a tool result to the history; results that follow one another share one user
/// message, as the providers want the answers to one turn's calls together.
fn push_tool_result(history: &mut Vec<TroupeMessage>, message: &ToolMessage) -> Result<(), ApiError> {
    let (content, is_error) = tool_result(message)?;
    let block = ContentBlock::ToolResult { tool_use_id: message.tool_call_id.clone().into(), content, is_error };
    match history.last_mut() {
        Some(last)
            if last.role == Role::User
                && !last.content.is_empty()
                && last.content.iter().all(|b| matches!(b, ContentBlock::ToolResult { .. })) =>
        {
            last.content.push(block);
        }
        _ => history.push(TroupeMessage::new(Role::User, vec![block])),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> RunAgentInput {
        serde_json::from_value(body).expect("a RunAgentInput")
    }

    #[test]
    fn the_last_user_message_is_the_instruction_and_the_rest_the_history() {
        let input = parse(json!({
            "threadId": "thread-1", "runId": "r",
            "messages": [
                {"id": "s", "role": "system", "content": "Answer in French."},
                {"id": "u1", "role": "user", "content": "read a.txt"},
                {"id": "a1", "role": "assistant", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "fs.read", "arguments": "{\"path\":\"a.txt\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "fs.read", "arguments": ""}}]},
                {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "alpha"},
                {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "", "error": "missing path"},
                {"id": "a2", "role": "assistant", "content": "It says alpha."},
                {"id": "r", "role": "reasoning", "content": "..."},
                {"id": "u2", "role": "user", "content": [{"type": "text", "text": "and"}, {"type": "text", "text": "b.txt?"}]}
            ],
            "context": [{"description": "open file", "value": "b.txt"}],
            "forwardedProps": {"modelSelection": {"provider": "anthropic", "model": "claude-x"}}
        }));
        let run = run_input(&input).expect("maps");
        assert_eq!(
            run.instruction,
            "and\nb.txt?\n\nContext:\n\n## system message\nAnswer in French.\n\n## open file\nb.txt"
        );
        assert_eq!(run.conversation_id.as_ref().map(|c| c.as_str()), Some("thread-1"));
        assert_eq!(run.model.as_deref(), Some("anthropic/claude-x"));
        let roles: Vec<Role> = run.history.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User, Role::Assistant]);
        assert_eq!(run.history[1].tool_uses().count(), 2);
        let (_, _, arguments) = run.history[1].tool_uses().next().expect("a call");
        assert_eq!(arguments, &json!({"path": "a.txt"}));
        assert_eq!(
            run.history[2].content,
            [ContentBlock::tool_result("c1", "alpha"), ContentBlock::tool_error("c2", "missing path"),],
            "consecutive results share one message"
        );
        assert_eq!(run.history[3].text(), "It says alpha.");
    }

    #[test]
    fn the_clients_shared_state_is_context_the_agent_reads() {
        let input = |state: Value| {
            parse(json!({
                "threadId": "t", "runId": "r", "state": state,
                "messages": [{"id": "u", "role": "user", "content": "what is in my cart?"}],
            }))
        };
        let run = run_input(&input(json!({"cart": ["apples"], "total": 3}))).expect("maps");
        assert!(
            run.instruction.starts_with("what is in my cart?\n\nContext:\n\n## the client's shared state (JSON)\n")
        );
        assert!(run.instruction.contains("\"cart\": [\n    \"apples\"\n  ]"), "{}", run.instruction);
        for nothing in [json!(null), json!({}), json!([])] {
            assert_eq!(run_input(&input(nothing)).expect("maps").instruction, "what is in my cart?");
        }
    }

    #[test]
    fn model_selection_takes_a_string_or_an_object() {
        assert_eq!(model_selection(&json!({})).expect("ok"), None);
        assert_eq!(model_selection(&Value::Null).expect("ok"), None);
        assert_eq!(
            model_selection(&json!({"modelSelection": "openai/gpt-x"})).expect("ok").as_deref(),
            Some("openai/gpt-x")
        );
        assert_eq!(model_selection(&json!({"modelSelection": {"id": "demo"}})).expect("ok").as_deref(), Some("demo"));
        let both = json!({"modelSelection": {"provider": "openai", "model": "anthropic/claude-x"}});
        assert_eq!(model_selection(&both).expect("ok").as_deref(), Some("anthropic/claude-x"));
        for bad in [json!(""), json!(3), json!({"name": "x"}), json!({"model": "m", "provider": 1}), json!([])] {
            let error = model_selection(&json!({"modelSelection": bad})).expect_err("refused");
            assert_eq!(error.code, "invalid_model_selection");
        }
    }

    #[test]
    fn inputs_that_cannot_be_a_run_are_refused() {
        let cases = [
            (json!([]), "invalid_body"),
            (json!([{"id": "a", "role": "assistant", "content": "hi"}]), "invalid_body"),
            (
                json!([{"id": "u", "role": "user", "content": [{"type": "image", "source": {"type": "url", "value": "u"}}]}]),
                "unsupported_content",
            ),
            (
                json!([{"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "type": "function",
                    "function": {"name": "t", "arguments": "{oops"}}]}, {"id": "u", "role": "user", "content": "go"}]),
                "invalid_body",
            ),
        ];
        for (messages, code) in cases {
            let input = parse(json!({"threadId": "t", "runId": "r", "messages": messages}));
            let error = run_input(&input).expect_err("refused");
            assert_eq!(error.code, code, "{messages}");
            assert_eq!(error.status, StatusCode::UNPROCESSABLE_ENTITY);
        }
    }

    #[test]
    fn images_in_the_history_become_image_blocks() {
        let input = parse(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "u1", "role": "user", "content": [
                {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}]},
            {"id": "u2", "role": "user", "content": "what is it?"}]}));
        let run = run_input(&input).expect("maps");
        assert_eq!(
            run.history[0].content,
            [ContentBlock::Image {
                source: ImageSource::Base64 { media_type: "image/png".into(), data: "AAAA".into() }
            }]
        );
    }
}
