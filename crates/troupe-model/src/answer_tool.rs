//! A typed answer asked for with a tool, for servers without structured outputs.
//!
//! Some OpenAI-compatible servers take tools but no `json_schema` response format. For
//! them a request's [`ModelRequest::output`] becomes one more tool, [`ANSWER_TOOL`], whose
//! arguments are the answer's schema, and the tool choice requires a call: the model works
//! with its other tools and ends by calling this one. The call is turned back into what a
//! native structured output gives: the answer as the turn's text (the arguments, streamed
//! as they come), and the turn ending as a final answer rather than a tool call. Above the
//! provider nothing tells the two apart.

use crate::error::{Error, Result};
use troupe_core::{ModelRequest, StopReason, StreamEvent, ToolChoice, ToolSpec};

/// The tool that carries the answer.
pub const ANSWER_TOOL: &str = "final_answer";

/// `request` with its output schema moved into the [`ANSWER_TOOL`] tool.
pub(crate) fn offer(provider: &str, request: &ModelRequest) -> Result<ModelRequest> {
    let Some(output) = &request.output else {
        return Ok(request.clone());
    };
    crate::output_dialect::adapt(crate::output_dialect::Dialect::AnswerTool, provider, output)?;
    if request.tools.iter().any(|tool| tool.name == ANSWER_TOOL) {
        return Err(Error::Config(format!(
            "a typed answer is asked for with the `{ANSWER_TOOL}` tool here, and the request already offers a tool of that name"
        )));
    }
    let mut request = request.clone();
    request.output = None;
    request.tools.push(ToolSpec::new(
        ANSWER_TOOL,
        format!("Give your final answer (`{}`). Call this once, when you are done.", output.name),
        output.schema.clone(),
    ));
    request.tool_choice = Some(ToolChoice::Any);
    Ok(request)
}

/// Turns the [`ANSWER_TOOL`] call of one response back into the turn's text.
#[derive(Debug, Default)]
pub(crate) struct AnswerCall {
    /// The block of the answer's call, once it started.
    index: Option<u32>,
}

impl AnswerCall {
    /// `event` as the caller sees it; `None` for an event that has no counterpart.
    pub(crate) fn map(&mut self, event: StreamEvent) -> Option<StreamEvent> {
        match event {
            StreamEvent::ToolUseStart { index, name, .. } if name == ANSWER_TOOL => {
                self.index = Some(index);
                None
            }
            StreamEvent::ToolUseInputDelta { index, partial_json } if self.index == Some(index) => {
                Some(StreamEvent::TextDelta { index, text: partial_json })
            }
            StreamEvent::ToolUseEnd { index } if self.index == Some(index) => None,
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse } if self.index.is_some() => {
                Some(StreamEvent::MessageStop { stop_reason: StopReason::EndTurn })
            }
            other => Some(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_core::OutputSchema;

    #[test]
    fn the_output_schema_becomes_a_required_tool() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let request = ModelRequest::new("m").output(OutputSchema::new("Place", schema.clone()));
        let offered = offer("p", &request).expect("ok");
        assert_eq!(offered.output, None);
        assert_eq!(offered.tools.len(), 1);
        assert_eq!(offered.tools[0].name, ANSWER_TOOL);
        assert_eq!(*offered.tools[0].input_schema, schema);
        assert_eq!(offered.tool_choice, Some(ToolChoice::Any));
    }

    #[test]
    fn a_tool_of_the_same_name_is_refused() {
        let request = ModelRequest::new("m")
            .tool(ToolSpec::new(ANSWER_TOOL, "mine", json!({"type": "object"})))
            .output(OutputSchema::new("Place", json!({"type": "object"})));
        assert!(matches!(offer("p", &request), Err(Error::Config(m)) if m.contains("already offers")));
    }

    #[test]
    fn the_answer_call_becomes_text_and_other_calls_pass() {
        let mut call = AnswerCall::default();
        let events = [
            StreamEvent::ToolUseStart { index: 0, id: "a".into(), name: "fs.read".into() },
            StreamEvent::ToolUseInputDelta { index: 0, partial_json: "{}".into() },
            StreamEvent::ToolUseEnd { index: 0 },
            StreamEvent::ToolUseStart { index: 1, id: "b".into(), name: ANSWER_TOOL.into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "{\"city\":".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "\"Oslo\"}".into() },
            StreamEvent::ToolUseEnd { index: 1 },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ];
        let out: Vec<_> = events.into_iter().filter_map(|e| call.map(e)).collect();
        assert_eq!(out.len(), 6, "{out:?}");
        assert!(matches!(&out[3], StreamEvent::TextDelta { index: 1, text } if text == "{\"city\":"));
        assert!(matches!(&out[4], StreamEvent::TextDelta { index: 1, text } if text == "\"Oslo\"}"));
        assert!(matches!(out[5], StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    }
}
