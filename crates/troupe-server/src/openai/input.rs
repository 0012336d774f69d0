//! The conversation a client sends, as a run's input: the last user message the task, the
//! user and assistant messages before it the history, system and developer messages (and
//! the Responses `instructions`) before the task.

use super::error::OpenAiError;
use crate::ids::checked_id;
use crate::state::AppState;
use serde_json::Value;
use troupe_core::Message;
use troupe_runtime::RunInput;

/// One message of the conversation, its text joined from its parts.
pub(super) struct Said {
    pub(super) role: String,
    pub(super) text: String,
}

/// The text of a message's `content`: a string, or parts whose text is taken (`text`,
/// `input_text`, `output_text`); any other part (an image, a file, audio) is refused.
pub(super) fn content_text(content: &Value, param: &'static str) -> Result<String, OpenAiError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("text" | "input_text" | "output_text", Some(piece)) => text.push_str(piece),
                    _ => {
                        return Err(OpenAiError::invalid(
                            format!("a content part of type `{kind}` is not taken here: send text"),
                            Some(param),
                        ));
                    }
                }
            }
            Ok(text)
        }
        _ => Err(OpenAiError::invalid("`content` must be a string or a list of parts", Some(param))),
    }
}

/// The name given as `model`, checked against the server's agents and teams.
pub(super) fn target(state: &AppState, model: &str) -> Result<String, OpenAiError> {
    let name = checked_id("model", model).map_err(|e| OpenAiError::invalid(e.message, Some("model")))?;
    if state.launcher.target(name).is_some() { Ok(name.to_owned()) } else { Err(OpenAiError::unknown_model(name)) }
}

/// The run's input from the conversation `said` (and `instructions`, the Responses field).
pub(super) fn run_input(
    said: Vec<Said>,
    instructions: Option<&str>,
    param: &'static str,
) -> Result<RunInput, OpenAiError> {
    let mut preamble: Vec<String> =
        instructions.filter(|i| !i.trim().is_empty()).map(str::to_owned).into_iter().collect();
    let mut history = Vec::new();
    let mut said = said;
    let Some(last) = said.pop() else {
        return Err(OpenAiError::invalid("the conversation is empty: send at least one user message", Some(param)));
    };
    if last.role != "user" {
        return Err(OpenAiError::invalid(
            format!("the last message must be the user's, not the {}'s", last.role),
            Some(param),
        ));
    }
    for message in said {
        match message.role.as_str() {
            "system" | "developer" => preamble.push(message.text),
            "user" => history.push(Message::user(message.text)),
            "assistant" => history.push(Message::assistant(message.text)),
            other => {
                return Err(OpenAiError::invalid(
                    format!("messages of role `{other}` are not taken here (the agent runs its own tools)"),
                    Some(param),
                ));
            }
        }
    }
    let task = if preamble.is_empty() { last.text } else { format!("{}\n\n{}", preamble.join("\n\n"), last.text) };
    if task.trim().is_empty() {
        return Err(OpenAiError::invalid("the last user message has no text", Some(param)));
    }
    Ok(RunInput::new(task).history(history))
}
