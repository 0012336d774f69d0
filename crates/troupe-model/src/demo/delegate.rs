//! The demo model as a team leader: offered a `delegate` tool, it hands the task to each
//! teammate the tool names, one after the other, then answers with what they reported.
//!
//! Like the rest of the demo model it keeps no state: each step is decided from the
//! conversation since the task.

use super::{DemoBlock, DemoReply, truncate};
use serde_json::json;
use troupe_core::{ContentBlock, ModelRequest, Role, StopReason, ToolChoice};

/// The delegation tool's name.
pub(super) const DELEGATE: &str = "delegate";

/// The next step of a leader, or `None` when no `delegate` tool with named teammates is
/// offered.
pub(super) fn reply(request: &ModelRequest) -> Option<DemoReply> {
    if request.tool_choice == Some(ToolChoice::None) {
        return None;
    }
    let tool = request.tools.iter().find(|t| t.name == DELEGATE)?;
    let teammates: Vec<&str> =
        tool.input_schema["properties"]["to"]["enum"].as_array()?.iter().filter_map(|v| v.as_str()).collect();
    if teammates.is_empty() {
        return None;
    }
    let messages = &request.messages;
    let start = messages.iter().rposition(|m| {
        m.role == Role::User && m.content.iter().any(|b| b.as_text().is_some_and(|t| !t.trim().is_empty()))
    });
    let task = start.map(|i| messages[i].text()).unwrap_or_default();
    let since = &messages[start.map_or(0, |i| i + 1)..];
    // Every delegation so far, with what came back.
    let mut reports = Vec::new();
    for (id, name, input) in since.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| m.tool_uses()) {
        if name != DELEGATE {
            continue;
        }
        let to = input["to"].as_str().unwrap_or_default().to_owned();
        let result = since.iter().flat_map(|m| &m.content).find_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, content, is_error } if tool_use_id == id => {
                Some((content.clone(), *is_error))
            }
            _ => None,
        });
        reports.push((to, result));
    }
    let calls = messages.iter().flat_map(|m| m.tool_uses()).count();
    if let Some(next) = teammates.iter().find(|t| !reports.iter().any(|(to, _)| to == *t)) {
        let brief = format!("{} (your part, as {next}: do what your role covers and report briefly)", task.trim());
        let text = format!("I'll ask {next} to take their part.\n");
        return Some(DemoReply {
            blocks: vec![
                DemoBlock::Text(text),
                DemoBlock::ToolCall {
                    id: format!("call_demo_{}", calls + 1),
                    name: DELEGATE.to_owned(),
                    input: json!({"to": next, "brief": brief}),
                },
            ],
            stop_reason: StopReason::ToolUse,
        });
    }
    let mut answer = format!("The team worked on “{}”:\n", truncate(task.trim(), 120));
    for (to, result) in &reports {
        let line = match result {
            Some((content, false)) => truncate(&report_line(content), 320),
            Some((content, true)) => {
                format!("failed: {}", truncate(content.lines().next().unwrap_or_default().trim(), 160))
            }
            None => "no report came back".to_owned(),
        };
        answer.push_str(&format!("- {to}: {line}\n"));
    }
    Some(DemoReply { blocks: vec![DemoBlock::Text(answer)], stop_reason: StopReason::EndTurn })
}

/// The line a leader quotes of a teammate's report: a typed report's `summary` (or the
/// whole document on one line), else the report's first line.
fn report_line(content: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(content) {
        Ok(serde_json::Value::Object(report)) => match report.get("summary").and_then(|s| s.as_str()) {
            Some(summary) => summary.lines().next().unwrap_or_default().trim().to_owned(),
            None => serde_json::Value::Object(report).to_string(),
        },
        _ => content.lines().next().unwrap_or_default().trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::{Message, ToolSpec};

    fn leader_request(messages: Vec<Message>) -> ModelRequest {
        let mut request = ModelRequest::new("demo");
        request.messages = messages;
        let schema =
            json!({"type": "object", "properties": {"to": {"enum": ["coder", "tester"]}, "brief": {"type": "string"}}});
        request.tools = vec![ToolSpec::new(DELEGATE, "Hands work to a teammate.", schema)];
        request
    }

    #[test]
    fn a_leader_delegates_to_each_teammate_then_answers() {
        let first = reply(&leader_request(vec![Message::user("Fix the bug")])).expect("a leader step");
        let DemoBlock::ToolCall { input, id, .. } = &first.blocks[1] else { panic!("a delegation first") };
        assert_eq!(input["to"], "coder");
        assert!(input["brief"].as_str().is_some_and(|b| b.starts_with("Fix the bug")));

        let mut history = vec![Message::user("Fix the bug")];
        history.push(Message::new(
            Role::Assistant,
            vec![ContentBlock::ToolUse {
                id: id.as_str().into(),
                name: DELEGATE.into(),
                input: input.clone(),
                signature: None,
            }],
        ));
        history.push(Message::new(
            Role::User,
            vec![ContentBlock::ToolResult {
                tool_use_id: id.as_str().into(),
                content: "Fixed it.".into(),
                is_error: false,
            }],
        ));
        let second = reply(&leader_request(history.clone())).expect("a leader step");
        let DemoBlock::ToolCall { input, .. } = &second.blocks[1] else { panic!("the second delegation") };
        assert_eq!(input["to"], "tester");

        history.push(Message::new(
            Role::Assistant,
            vec![ContentBlock::ToolUse {
                id: "t2".into(),
                name: DELEGATE.into(),
                input: input.clone(),
                signature: None,
            }],
        ));
        history.push(Message::new(
            Role::User,
            vec![ContentBlock::ToolResult { tool_use_id: "t2".into(), content: "Tests pass.".into(), is_error: false }],
        ));
        let last = reply(&leader_request(history)).expect("an answer");
        assert_eq!(last.stop_reason, StopReason::EndTurn);
        let DemoBlock::Text(text) = &last.blocks[0] else { panic!("text") };
        assert!(text.contains("coder: Fixed it.") && text.contains("tester: Tests pass."), "{text}");
    }

    #[test]
    fn without_a_delegate_tool_it_does_not_lead() {
        assert!(reply(&ModelRequest::new("demo").message(Message::user("hi"))).is_none());
    }
}
