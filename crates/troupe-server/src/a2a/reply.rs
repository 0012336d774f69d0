//! What a client's message asks for: a task's instruction, the agent to run, or a
//! decision about a call that waits for approval.
//!
//! A decision is either a data part `{"approval": "approve" | "reject", "callId"?: …,
//! "reason"?: …}` or a message whose whole text is `approve` or `reject` (any case, a
//! trailing `.` or `!` ignored; `reject: <reason>` gives the model a reason). Without a
//! `callId` it applies to every call the task waits for. A data part `{"approval":
//! "modify", "callId": …, "arguments": {…}}` runs one call with the arguments a person
//! edited (the extended card's [`TOOL_INPUTS_EXTENSION`](troupe_a2a::TOOL_INPUTS_EXTENSION)
//! gives each tool's schema).

use super::rpc::RpcError;
use super::wire::{Message, SendMessageRequest};
use crate::native::OutputRequest;
use serde_json::Value;

/// A decision about waiting calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Approve (run the call) or reject (the model sees the reason as its error).
    pub approve: bool,
    /// The call; every waiting call when `None`.
    pub call_id: Option<String>,
    /// Why, for a rejection.
    pub reason: Option<String>,
    /// The arguments to run the call with instead of the model's, for an approval that
    /// edits them.
    pub arguments: Option<Value>,
}

pub use troupe_a2a::{AGENT_KEY, OUTPUT_KEY};

/// The agent (skill id) a request names: `agent` (or `skill`) in the message's metadata,
/// then in the request's.
pub fn target(request: &SendMessageRequest) -> Option<String> {
    let named = |metadata: &Option<Value>| {
        let metadata = metadata.as_ref()?;
        [AGENT_KEY, "skill"].iter().find_map(|key| metadata.get(*key)?.as_str().map(str::to_owned))
    };
    named(&request.message.metadata).or_else(|| named(&request.metadata))
}

/// The typed answer a request asks for: `output` (`{"schema": {...}, "name": "..."}`) in
/// the message's metadata, then in the request's. `Err` when it is there but not that
/// shape; the schema itself is checked when the run starts.
pub fn output(request: &SendMessageRequest) -> Result<Option<OutputRequest>, RpcError> {
    let found = [&request.message.metadata, &request.metadata]
        .into_iter()
        .find_map(|metadata| metadata.as_ref()?.get(OUTPUT_KEY).cloned());
    let Some(output) = found else { return Ok(None) };
    serde_json::from_value(output).map(Some).map_err(|e| {
        RpcError::invalid_params(format!("metadata `{OUTPUT_KEY}` is not {{\"schema\": {{…}}, \"name\": \"…\"}}: {e}"))
    })
}

/// The instruction a message gives: its text parts, its data parts as JSON and its
/// files as links, one per line; `None` when it has none of them.
pub fn instruction(message: &Message) -> Option<String> {
    let lines: Vec<String> = message
        .parts
        .iter()
        .filter_map(|part| {
            if let Some(text) = &part.text {
                Some(text.clone())
            } else if let Some(data) = &part.data {
                Some(data.to_string())
            } else {
                let link = part.url.as_deref().or(part.filename.as_deref())?;
                Some(format!("[file: {link}]"))
            }
        })
        .filter(|line| !line.trim().is_empty())
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The decision `message` gives, if it is one.
pub fn decision(message: &Message) -> Result<Option<Decision>, RpcError> {
    for part in &message.parts {
        let Some(data) = part.data.as_ref().and_then(Value::as_object) else { continue };
        let Some(approval) = data.get("approval") else { continue };
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        let call_id = text("callId").or_else(|| text("call_id"));
        let (approve, arguments) = match approval.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("approve") => (true, None),
            Some("reject") => (false, None),
            Some("modify") => match (data.get("arguments").filter(|a| a.is_object()), &call_id) {
                (Some(arguments), Some(_)) => (true, Some(arguments.clone())),
                _ => {
                    return Err(RpcError::invalid_params(
                        "a `modify` decision names its call (`callId`) and gives its `arguments` as an object",
                    ));
                }
            },
            _ => {
                return Err(RpcError::invalid_params(
                    "`approval` in a data part is \"approve\", \"reject\" or \"modify\"",
                ));
            }
        };
        return Ok(Some(Decision { approve, call_id, reason: text("reason"), arguments }));
    }
    let said = message.text();
    let said = said.trim();
    let (word, rest) = match said.split_once(':') {
        Some((word, rest)) => (word, Some(rest.trim())),
        None => (said, None),
    };
    let word = word.trim().trim_end_matches(['.', '!']).to_ascii_lowercase();
    let reason = rest.filter(|r| !r.is_empty()).map(str::to_owned);
    Ok(match (word.as_str(), &reason) {
        ("approve", _) => Some(Decision { approve: true, call_id: None, reason: None, arguments: None }),
        ("reject", _) => Some(Decision { approve: false, call_id: None, reason, arguments: None }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::wire::{Part, Role};
    use serde_json::json;

    fn message(parts: Vec<Part>) -> Message {
        Message::new("m", Role::User, parts)
    }

    #[test]
    fn a_typed_answer_is_asked_in_the_metadata_and_a_malformed_ask_is_refused() {
        let mut request = SendMessageRequest {
            message: message(vec![Part::text("Review it")]),
            configuration: None,
            metadata: Some(json!({"output": {"schema": {"type": "object"}, "name": "Review"}})),
        };
        let asked = output(&request).expect("well formed").expect("asked");
        assert_eq!((asked.name.as_deref(), &asked.schema), (Some("Review"), &json!({"type": "object"})));
        // The message's own metadata comes first.
        request.message.metadata = Some(json!({"agent": "reviewer", "output": {"schema": {"type": "object"}}}));
        assert_eq!(output(&request).expect("well formed").expect("asked").name, None);
        request.message.metadata = Some(json!({"output": "a schema, please"}));
        let refused = output(&request).expect_err("refused");
        assert!(refused.message.contains("metadata `output`"), "{}", refused.message);
        request.message.metadata = None;
        request.metadata = None;
        assert!(output(&request).expect("nothing asked").is_none());
    }

    #[test]
    fn decisions_come_as_data_or_as_a_single_word() {
        let data = message(vec![Part::data(json!({"approval": "reject", "callId": "c1", "reason": "no"}))]);
        assert_eq!(
            decision(&data).expect("valid"),
            Some(Decision { approve: false, call_id: Some("c1".into()), reason: Some("no".into()), arguments: None })
        );
        let word = message(vec![Part::text(" Approve. ")]);
        assert_eq!(decision(&word).expect("valid").map(|d| d.approve), Some(true));
        let with_reason = message(vec![Part::text("reject: use a temp file")]);
        assert_eq!(decision(&with_reason).expect("valid").and_then(|d| d.reason), Some("use a temp file".into()));
        assert_eq!(decision(&message(vec![Part::text("approve the plan and go on")])).expect("valid"), None);
        let edited = json!({"approval": "modify", "callId": "c2", "arguments": {"path": "b.txt"}});
        let modify = decision(&message(vec![Part::data(edited)])).expect("valid").expect("a decision");
        assert_eq!((modify.approve, modify.arguments), (true, Some(json!({"path": "b.txt"}))));
        for unsound in [json!({"approval": "modify", "arguments": {}}), json!({"approval": "modify", "callId": "c2"})] {
            assert!(decision(&message(vec![Part::data(unsound.clone())])).is_err(), "{unsound}");
        }
        let bad = message(vec![Part::data(json!({"approval": "maybe"}))]);
        assert_eq!(decision(&bad).map_err(|e| e.code), Err(crate::a2a::rpc::INVALID_PARAMS));
    }

    #[test]
    fn the_instruction_gathers_text_data_and_files_and_the_target_comes_from_metadata() {
        let mut request = SendMessageRequest {
            message: message(vec![
                Part::text("Summarise"),
                Part::data(json!({"n": 3})),
                Part { url: Some("https://x/a.pdf".into()), ..Part::default() },
            ]),
            ..SendMessageRequest::default()
        };
        assert_eq!(instruction(&request.message).as_deref(), Some("Summarise\n{\"n\":3}\n[file: https://x/a.pdf]"));
        assert_eq!(target(&request), None);
        request.metadata = Some(json!({"skill": "writer"}));
        assert_eq!(target(&request).as_deref(), Some("writer"));
        request.message.metadata = Some(json!({"agent": "coder"}));
        assert_eq!(target(&request).as_deref(), Some("coder"), "the message's metadata wins");
        assert_eq!(instruction(&message(vec![Part::text("  ")])), None);
    }
}
