//! Resuming: the decision a resume entry stands for, and the waiting run it answers.
//!
//! An AG-UI run ends at a troupe run's pause (an approval, or a call of a client tool)
//! while the troupe run itself keeps waiting in the hub. The interrupt's id is the tool
//! call's id, so a resume entry finds its run by looking for a held run, of the same
//! agent, that waits for that call, and whose pause belongs to the same thread. An
//! approval's entry becomes a decision ([`decision`]); a client tool's, its result
//! ([`client_tool_answer`]).

use super::input::{ResumeEntry, ResumeStatus};
use crate::error::ApiError;
use crate::hub::{HubRun, RunPhase};
use crate::state::AppState;
use axum::http::StatusCode;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason};
use troupe_runtime::{ApprovalDecision, Signal, is_client_tool_wait};

/// The JSON Schema of an approval interrupt's resume `payload`, sent as the interrupt's
/// `responseSchema`.
pub fn approval_response_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "approved": {"type": "boolean", "description": "false rejects the call; absent or true approves it"},
            "arguments": {"type": "object", "description": "run the call with these arguments instead of the model's"},
            "alwaysAllow": {"type": "boolean", "description": "also allow every later call of this tool in the run"},
            "reason": {"type": "string", "description": "why the call is rejected, for the model"}
        }
    })
}

/// An approval payload, as [`approval_response_schema`] describes it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalPayload {
    approved: Option<bool>,
    arguments: Option<Value>,
    always_allow: Option<bool>,
    reason: Option<String>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_resume", message)
}

/// The decision `entry` stands for:
///
/// - `cancelled` rejects the call (the model is told, with `payload.reason` if given);
/// - `resolved` with no payload, `null` or `true` approves it, `false` rejects it;
/// - `resolved` with an object: `{"approved": false, "reason"?}` rejects,
///   `{"arguments": {…}}` runs the call with those arguments instead, `{"alwaysAllow": true}`
///   approves it and every later call of the tool in the run, anything else approves.
pub fn decision(entry: &ResumeEntry) -> Result<ApprovalDecision, ApiError> {
    let payload = match &entry.payload {
        None | Some(Value::Null) | Some(Value::Bool(true)) => ApprovalPayload::default(),
        Some(Value::Bool(false)) => ApprovalPayload { approved: Some(false), ..ApprovalPayload::default() },
        Some(value @ Value::Object(_)) => ApprovalPayload::deserialize(value).map_err(|e| {
            invalid(format!(
                "the payload for interrupt `{}` is not an approval ({e}); see the interrupt's responseSchema",
                entry.interrupt_id
            ))
        })?,
        Some(_) => {
            return Err(invalid(format!(
                "the payload for interrupt `{}` must be an object, a boolean or absent",
                entry.interrupt_id
            )));
        }
    };
    if entry.status == ResumeStatus::Cancelled {
        let reason = payload.reason.or_else(|| Some("the person dismissed the request".to_owned()));
        return Ok(ApprovalDecision::Reject { reason });
    }
    let always = payload.always_allow.unwrap_or(false);
    match (payload.approved.unwrap_or(true), payload.arguments, always) {
        (false, None, false) => Ok(ApprovalDecision::Reject { reason: payload.reason }),
        (false, _, _) => Err(invalid("`approved: false` cannot be combined with `arguments` or `alwaysAllow`")),
        (true, Some(_), true) => Err(invalid("`arguments` and `alwaysAllow` cannot be combined")),
        (true, Some(arguments @ Value::Object(_)), false) => Ok(ApprovalDecision::Modify { arguments }),
        (true, Some(_), false) => Err(invalid("`arguments` must be an object")),
        (true, None, true) => Ok(ApprovalDecision::AlwaysAllow),
        (true, None, false) => Ok(ApprovalDecision::Approve),
    }
}

/// What a client tool's resume entry answers: `resolved` gives the call the payload as
/// its result (a string as it is, anything else as JSON text, none as an empty result);
/// `cancelled` tells the model the client did not run it (with `payload.reason`, when
/// given).
pub fn client_tool_answer(entry: &ResumeEntry) -> Signal {
    let call_id = troupe_core::ToolCallId::new(entry.interrupt_id.clone());
    match entry.status {
        ResumeStatus::Resolved => {
            let content = match &entry.payload {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
            };
            Signal::ToolResult { call_id, content, is_error: false }
        }
        ResumeStatus::Cancelled => {
            let reason = entry.payload.as_ref().and_then(|p| p.get("reason")).and_then(Value::as_str);
            let reason = reason.unwrap_or("the client cancelled it").to_owned();
            Signal::Approval { call_id, decision: ApprovalDecision::Reject { reason: Some(reason) } }
        }
    }
}

/// A held run waiting for the interrupts a request answers.
#[derive(Debug)]
pub(crate) struct Waiting {
    /// The run.
    pub(crate) run: Arc<HubRun>,
    /// Its events up to the first answered pause (inclusive).
    pub(crate) history: Vec<AgentEvent>,
    /// The answered calls that are calls of client tools.
    client_calls: Vec<String>,
}

impl Waiting {
    /// Where the rest of the run starts: just after the first answered pause.
    pub(crate) fn resume_position(&self) -> usize {
        self.history.len()
    }

    /// Whether interrupt `id` is a call of a client tool (rather than an approval).
    pub(crate) fn is_client_call(&self, id: &str) -> bool {
        self.client_calls.iter().any(|c| c == id)
    }

    /// The signal `entry` stands for: a client tool's result, or an approval decision.
    pub(crate) fn signal(&self, entry: &ResumeEntry) -> Result<Signal, ApiError> {
        if self.is_client_call(&entry.interrupt_id) {
            return Ok(client_tool_answer(entry));
        }
        let call_id = troupe_core::ToolCallId::new(entry.interrupt_id.clone());
        Ok(Signal::Approval { call_id, decision: decision(entry)? })
    }
}

fn pause_id(event: &AgentEvent) -> Option<&str> {
    match &event.kind {
        AgentEventKind::RunPaused {
            reason: PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. },
        } => Some(call_id.as_str()),
        _ => None,
    }
}

/// The run of `agent` on `thread` waiting for every interrupt in `entries`, with its
/// events up to the first of those pauses. A 404 when an interrupt is not pending on
/// that thread, a 422 when the entries name interrupts of different runs.
pub(crate) async fn find_waiting(
    state: &AppState,
    agent: &str,
    thread: &str,
    entries: &[ResumeEntry],
) -> Result<Waiting, ApiError> {
    let first = entries.first().ok_or_else(|| invalid("`resume` is empty"))?;
    let (run, mut history) = locate(state, agent, thread, &first.interrupt_id)
        .await
        .ok_or_else(|| unknown_interrupt(&first.interrupt_id, thread))?;
    let pending = run.view().pending;
    let mut first_pause = usize::MAX;
    for (n, entry) in entries.iter().enumerate() {
        let id = entry.interrupt_id.as_str();
        if entries[..n].iter().any(|e| e.interrupt_id == id) {
            return Err(invalid(format!("interrupt `{id}` is answered twice")));
        }
        let waits = pending.iter().any(|p| pending_id(p) == Some(id));
        match history.iter().position(|e| pause_id(e) == Some(id) && on_thread(e, thread)) {
            Some(position) if waits => first_pause = first_pause.min(position),
            _ if locate(state, agent, thread, id).await.is_some() => {
                return Err(invalid(
                    "the resume entries answer interrupts of different runs; resume them one run at a time",
                ));
            }
            _ => return Err(unknown_interrupt(id, thread)),
        }
    }
    history.truncate(first_pause.saturating_add(1));
    let client_calls = entries
        .iter()
        .filter(|e| pending.iter().any(|p| pending_id(p) == Some(e.interrupt_id.as_str()) && is_client_tool_wait(p)))
        .map(|e| e.interrupt_id.clone())
        .collect();
    Ok(Waiting { run, history, client_calls })
}

fn unknown_interrupt(id: &str, thread: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_interrupt",
        format!("no interrupt `{id}` is pending on thread `{thread}`; it may have been answered already"),
    )
}

fn pending_id(reason: &PauseReason) -> Option<&str> {
    match reason {
        PauseReason::Approval { call_id, .. } | PauseReason::UncertainAction { call_id, .. } => Some(call_id.as_str()),
        PauseReason::Input { .. } => None,
    }
}

fn on_thread(event: &AgentEvent, thread: &str) -> bool {
    event.attribution.conversation_id.as_ref().is_some_and(|c| c.as_str() == thread)
}

/// The held run of `agent` that waits for call `id` paused on `thread`, with its events.
async fn locate(state: &AppState, agent: &str, thread: &str, id: &str) -> Option<(Arc<HubRun>, Vec<AgentEvent>)> {
    let candidates = state.hub.list().into_iter().filter(|view| {
        view.phase == RunPhase::Waiting
            && view.target == agent
            && view.pending.iter().any(|p| pending_id(p) == Some(id))
    });
    for view in candidates {
        let Some(run) = state.hub.get(view.run_id.as_str()) else { continue };
        let count = run.view().events;
        // Every one of these events is already logged, so the replay ends at once.
        let events: Vec<AgentEvent> =
            run.subscribe(0, CancellationToken::new()).take(count).map(|(_, event)| event).collect().await;
        if events.iter().any(|e| pause_id(e) == Some(id) && on_thread(e, thread)) {
            return Some((run, events));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: ResumeStatus, payload: Option<Value>) -> ResumeEntry {
        ResumeEntry { interrupt_id: "c1".into(), status, payload }
    }

    #[test]
    fn payloads_map_to_decisions() {
        use ResumeStatus::{Cancelled, Resolved};
        let cases = [
            (entry(Resolved, None), ApprovalDecision::Approve),
            (entry(Resolved, Some(json!(true))), ApprovalDecision::Approve),
            (entry(Resolved, Some(json!({"approved": true}))), ApprovalDecision::Approve),
            (entry(Resolved, Some(json!(false))), ApprovalDecision::Reject { reason: None }),
            (
                entry(Resolved, Some(json!({"approved": false, "reason": "no"}))),
                ApprovalDecision::Reject { reason: Some("no".into()) },
            ),
            (
                entry(Resolved, Some(json!({"arguments": {"path": "b.md"}}))),
                ApprovalDecision::Modify { arguments: json!({"path": "b.md"}) },
            ),
            (entry(Resolved, Some(json!({"alwaysAllow": true}))), ApprovalDecision::AlwaysAllow),
            (
                entry(Cancelled, None),
                ApprovalDecision::Reject { reason: Some("the person dismissed the request".into()) },
            ),
            (
                entry(Cancelled, Some(json!({"reason": "later"}))),
                ApprovalDecision::Reject { reason: Some("later".into()) },
            ),
        ];
        for (entry, expected) in cases {
            assert_eq!(decision(&entry).expect("a decision"), expected, "{entry:?}");
        }
    }

    #[test]
    fn contradictory_or_misspelt_payloads_are_refused() {
        for payload in [
            json!({"approved": false, "arguments": {}}),
            json!({"arguments": {}, "alwaysAllow": true}),
            json!({"arguments": "x"}),
            json!({"aproved": true}),
            json!("yes"),
            json!(1),
        ] {
            let error = decision(&entry(ResumeStatus::Resolved, Some(payload.clone()))).expect_err("refused");
            assert_eq!(error.status, StatusCode::UNPROCESSABLE_ENTITY, "{payload}");
            assert_eq!(error.code, "invalid_resume");
        }
    }
}
