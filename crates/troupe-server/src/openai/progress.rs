//! A run started for an OpenAI-compatible request, and what its client hears of it: the
//! text the agent writes, then its end — or the decisions it waits for.

use super::error::OpenAiError;
use crate::hub::HubRun;
use crate::launcher::{LaunchError, RunEnd};
use crate::state::AppState;
use axum::http::{HeaderValue, StatusCode};
use futures::{Stream, StreamExt};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEventKind, PauseReason, RunOutcomeKind};
use troupe_runtime::RunInput;

/// What the client hears, in order.
pub(super) enum Heard {
    /// Text the agent wrote.
    Text(String),
    /// The run waits for these decisions (its response ends here).
    Waiting(Vec<PauseReason>),
    /// The run ended.
    Ended(RunEnd),
}

/// Starts a run of `target` with `input`, held in the hub like any other run.
pub(super) fn start(state: &AppState, target: &str, input: RunInput) -> Result<Arc<HubRun>, OpenAiError> {
    let launched = state.launcher.launch(target, input).map_err(|error| match error {
        LaunchError::UnknownTarget(name) => OpenAiError::unknown_model(&name),
        LaunchError::Refused(why) => OpenAiError::run(StatusCode::UNPROCESSABLE_ENTITY, why, "launch_refused"),
    })?;
    Ok(state.hub.insert(target, launched))
}

/// The run's id as the `x-troupe-run-id` header.
pub(super) fn run_header(run: &HubRun) -> (&'static str, HeaderValue) {
    ("x-troupe-run-id", HeaderValue::from_str(run.run_id().as_str()).unwrap_or(HeaderValue::from_static("")))
}

/// What the client of `run` hears: the text of the run's own messages as it comes, then
/// its end, or what it waits for. A team's answer, written by its members, comes whole
/// with the end.
pub(super) fn heard(run: &Arc<HubRun>, closing: CancellationToken) -> impl Stream<Item = Heard> + Send + 'static {
    let own = run.run_id().clone();
    let watched = Arc::clone(run);
    let events = run.subscribe(0, closing);
    futures::stream::unfold((Box::pin(events), watched, false, false), move |(mut events, run, wrote, done)| {
        let own = own.clone();
        async move {
            if done {
                return None;
            }
            while let Some((_, event)) = events.next().await {
                match event.kind {
                    AgentEventKind::MessageDelta { delta, .. }
                        if event.attribution.run_id == own && !delta.is_empty() =>
                    {
                        return Some((Heard::Text(delta), (events, run, true, false)));
                    }
                    AgentEventKind::RunPaused { .. } if !run.is_ended() => {
                        let pending = run.view().pending;
                        return Some((Heard::Waiting(pending), (events, run, wrote, true)));
                    }
                    _ => {}
                }
            }
            let end = run.view().end.unwrap_or_else(|| RunEnd::failed("the server is shutting down"));
            // A team's members wrote its answer; say it whole.
            let end = match (&end.output, wrote) {
                (Some(output), false) if end.outcome == RunOutcomeKind::Completed => {
                    return Some((Heard::Text(output.clone()), (events, run, true, false)));
                }
                _ => end,
            };
            Some((Heard::Ended(end), (events, run, wrote, true)))
        }
    })
}

/// What a response that is not streamed says: the text, the `troupe` field when the run
/// waits for decisions, and the run's end when it ended (one that is no answer is the
/// error instead).
pub(super) struct Collected {
    pub(super) text: String,
    pub(super) troupe: Option<serde_json::Value>,
    pub(super) end: Option<RunEnd>,
}

/// Hears `run` out, for a response that is not streamed.
pub(super) async fn collect(
    run: &HubRun,
    mut heard: std::pin::Pin<Box<dyn Stream<Item = Heard> + Send>>,
) -> Result<Collected, OpenAiError> {
    let mut collected = Collected { text: String::new(), troupe: None, end: None };
    while let Some(piece) = heard.next().await {
        match piece {
            Heard::Text(delta) => collected.text.push_str(&delta),
            Heard::Waiting(pending) => {
                collected.text.push_str(&waiting_note(run, &pending));
                collected.troupe = Some(troupe_field(run, &pending));
            }
            Heard::Ended(end) => {
                if let Some(error) = failure(&end) {
                    return Err(error);
                }
                collected.end = Some(end);
            }
        }
    }
    Ok(collected)
}

/// The note that ends the response of a run waiting for `pending`.
pub(super) fn waiting_note(run: &HubRun, pending: &[PauseReason]) -> String {
    let calls: Vec<String> = pending
        .iter()
        .map(|reason| match reason {
            PauseReason::Approval { call_id, tool, reason, .. } => format!("`{tool}` (call {call_id}: {reason})"),
            PauseReason::UncertainAction { call_id, tool, .. } => {
                format!("`{tool}` (call {call_id}, interrupted: it may or may not have run)")
            }
            PauseReason::Input { prompt } => format!("an answer to: {prompt}"),
        })
        .collect();
    format!(
        "\n\n[run {} waits for a person to decide on {}: POST /v1/runs/{}/signals]",
        run.run_id(),
        calls.join(", "),
        run.run_id()
    )
}

/// The `troupe` field of a response that ends waiting.
pub(super) fn troupe_field(run: &HubRun, pending: &[PauseReason]) -> serde_json::Value {
    serde_json::json!({"run_id": run.run_id(), "pending": pending})
}

/// An end that is no answer, as the error the client sees.
pub(super) fn failure(end: &RunEnd) -> Option<OpenAiError> {
    let error = |code, what: &str| {
        let message = end.error.clone().unwrap_or_else(|| what.to_owned());
        Some(OpenAiError::run(StatusCode::BAD_GATEWAY, message, code))
    };
    match end.outcome {
        RunOutcomeKind::Completed | RunOutcomeKind::Incomplete | RunOutcomeKind::MaxIterations => None,
        RunOutcomeKind::Paused => None,
        RunOutcomeKind::Cancelled => error("run_cancelled", "the run was cancelled"),
        RunOutcomeKind::BudgetExceeded => error("budget_exceeded", "the run's budget ran out"),
        RunOutcomeKind::Failed => error("run_failed", "the run failed"),
    }
}

/// OpenAI's `finish_reason` for an end.
pub(super) fn finish_reason(end: &RunEnd) -> &'static str {
    match end.outcome {
        RunOutcomeKind::Incomplete | RunOutcomeKind::MaxIterations => "length",
        _ => "stop",
    }
}
