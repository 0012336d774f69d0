//! Where a replay first decided differently from its recording, and a readable diff of
//! what differs.

use serde::Serialize;
use similar::{ChangeTag, TextDiff};
use std::fmt;
use troupe_core::{Message, ModelRequest};
use troupe_runtime::durable::RequestDigest;

/// What kind of decision differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceKind {
    /// The request to the model differs: system prompt, tools or messages.
    Request,
    /// The model (live) asked for other tool calls than the recorded model did.
    ToolCall,
    /// A call is now asked about where it was not, or the reverse.
    ApprovalVerdict,
    /// The run makes a model call the recorded run did not make.
    ExtraModelCall,
    /// The run ended before making every model call the recorded run made.
    EndedEarly,
    /// The run ended otherwise than the recorded run.
    Outcome,
}

impl fmt::Display for DivergenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DivergenceKind::Request => "the request to the model differs",
            DivergenceKind::ToolCall => "the tool calls differ",
            DivergenceKind::ApprovalVerdict => "the approval verdict differs",
            DivergenceKind::ExtraModelCall => "a model call the recorded run did not make",
            DivergenceKind::EndedEarly => "the run ended earlier",
            DivergenceKind::Outcome => "the run ended otherwise",
        })
    }
}

/// The first point where a replay decided differently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// The model step (1 for the first model call) at or after which it happened.
    pub step: u32,
    /// What differs.
    pub kind: DivergenceKind,
    /// What differs, for a person: a unified diff (`-` recorded, `+` now) or sentences.
    pub detail: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.kind)?;
        if !self.detail.is_empty() {
            write!(f, "\n{}", self.detail.trim_end())?;
        }
        Ok(())
    }
}

/// What differs between the recorded request of `step` and `now`, part by part.
pub(crate) fn request_detail(
    recorded: &RequestDigest,
    recorded_system: Option<&str>,
    recorded_tools: Option<&[String]>,
    recorded_messages: &[Message],
    now: &ModelRequest,
) -> String {
    let digest = RequestDigest::of(now);
    let mut parts = Vec::new();
    if digest.system != recorded.system {
        let now_system = now.system.as_deref().unwrap_or("");
        match recorded_system {
            Some(before) => parts.push(format!("system prompt:\n{}", unified(before, now_system))),
            None => parts.push("system prompt: changed (the recorded text is known only by its digest)".to_owned()),
        }
    }
    if digest.tools != recorded.tools {
        let names: Vec<String> = now.tools.iter().map(|t| t.name.clone()).collect();
        match recorded_tools {
            Some(before) if before != names.as_slice() => {
                parts.push(format!("tools:\n{}", unified(&before.join("\n"), &names.join("\n"))));
            }
            _ => parts.push("tools: the same names, but a description or an argument schema changed".to_owned()),
        }
    }
    if digest.messages != recorded.messages {
        parts.push(messages_detail(recorded_messages, &now.messages));
    }
    if parts.is_empty() {
        // Same system, tools and messages: another setting of the request differs.
        parts.push(
            "the model's settings differ (model, temperature, output limit, output schema, caching hint)".to_owned(),
        );
    }
    parts.join("\n")
}

/// The first message that differs, with a diff of its text.
fn messages_detail(recorded: &[Message], now: &[Message]) -> String {
    let at = recorded.iter().zip(now).position(|(a, b)| a != b).unwrap_or(recorded.len().min(now.len()));
    let shown = |m: Option<&Message>| m.map(render).unwrap_or_default();
    let header = match (recorded.get(at), now.get(at)) {
        (Some(_), Some(_)) => format!("message {} differs:", at + 1),
        (None, Some(_)) => format!("message {} is new (the recording had {}):", at + 1, recorded.len()),
        (Some(_), None) => format!("message {} is gone (now {}):", at + 1, now.len()),
        (None, None) => "the messages differ".to_owned(),
    };
    format!("{header}\n{}", unified(&shown(recorded.get(at)), &shown(now.get(at))))
}

/// A message as lines a person reads: its role, then each block.
fn render(message: &Message) -> String {
    let role = serde_json::to_value(message.role).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let mut lines = vec![format!("[{role}]")];
    for block in &message.content {
        lines.push(match block {
            troupe_core::ContentBlock::Text { text } => text.clone(),
            troupe_core::ContentBlock::ToolUse { id, name, input, .. } => format!("call {id}: {name} {input}"),
            troupe_core::ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                format!("result of {tool_use_id}{}: {content}", if *is_error { " (error)" } else { "" })
            }
            other => serde_json::to_string(other).unwrap_or_default(),
        });
    }
    lines.join("\n")
}

/// A unified line diff, `-` recorded and `+` now, with a line of context around changes.
pub(crate) fn unified(before: &str, after: &str) -> String {
    let diff = TextDiff::from_lines(before, after);
    let mut out = String::new();
    for group in diff.grouped_ops(1) {
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                    ChangeTag::Equal => ' ',
                };
                out.push(sign);
                out.push_str(change.value().trim_end_matches('\n'));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_system_prompt_is_shown_as_a_line_diff() {
        let before = ModelRequest::new("m").system("Be brief.\nAnswer in English.").message(Message::user("hi"));
        let recorded = RequestDigest::of(&before);
        let now = ModelRequest::new("m").system("Be thorough.\nAnswer in English.").message(Message::user("hi"));
        let detail = request_detail(&recorded, before.system.as_deref(), None, &before.messages, &now);
        assert_eq!(detail, "system prompt:\n-Be brief.\n+Be thorough.\n Answer in English.\n");
    }

    #[test]
    fn the_first_differing_message_is_named() {
        let messages = vec![Message::user("hi"), Message::assistant("hello")];
        let before = ModelRequest { messages: messages.clone(), ..ModelRequest::new("m") };
        let mut changed = messages;
        changed[1] = Message::assistant("hey");
        let now = ModelRequest { messages: changed, ..ModelRequest::new("m") };
        let detail = request_detail(&RequestDigest::of(&before), None, None, &before.messages, &now);
        assert!(detail.starts_with("message 2 differs:\n [assistant]\n-hello\n+hey"), "{detail}");
    }
}
