//! `POST /agui/{agent}`: a new run, or the rest of a waiting one, as AG-UI events.

use super::events::Event;
use super::input::{Message, ResumeEntry, ResumeStatus, RunAgentInput};
use super::projection::Projection;
use super::resume::find_waiting;
use super::run_input::{client_tools, run_input, tool_result};
use crate::error::ApiError;
use crate::hub::HubRun;
use crate::ids::checked_id;
use crate::launcher::{LaunchError, TargetKind};
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use troupe_core::{AgentEvent, ToolCallId};
use troupe_runtime::Signal;

pub(super) async fn run(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match start(&state, &agent, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

/// Everything that can still be refused with a JSON error happens here, before the
/// first byte of the stream.
async fn start(state: &AppState, agent: &str, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let agent = checked_id("agent", agent)?;
    let input: RunAgentInput = state.parse(body)?;
    checked_id("thread", &input.thread_id)?;
    checked_id("run", &input.run_id)?;
    if let Some(parent) = &input.parent_run_id {
        checked_id("run", parent)?;
    }
    // A client that closes its stream (AG-UI's `abortRun`) stops the run, unless it asked
    // to leave it going (`forwardedProps.detach`).
    let detach = input.forwarded_props.get("detach").and_then(serde_json::Value::as_bool).unwrap_or(false);
    let projection = |run: &HubRun| {
        Projection::new(input.thread_id.clone(), input.run_id.clone(), run.run_id().clone())
            .with_parent_run(input.parent_run_id.clone())
            .with_messages(input.messages.clone())
    };
    // The answers to a waiting run's interrupts: `resume` entries, or (as CopilotKit
    // answers its tools) the client tools' results the messages end with.
    let (entries, results) = match input.resume.as_deref() {
        Some(entries) if !entries.is_empty() => (entries.to_vec(), None),
        _ => match client_tool_results(&input.messages)? {
            Some(results) => (results.iter().map(|(entry, _)| entry.clone()).collect(), Some(results)),
            None => (Vec::new(), None),
        },
    };
    if entries.is_empty() {
        let run_input = run_input(&input)?;
        check_client_tools(state, agent, &input)?;
        let launched = state.launcher.launch(agent, run_input).map_err(|error| match error {
            LaunchError::UnknownTarget(name) => ApiError::unknown_agent(&name),
            LaunchError::Refused(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "launch_refused", why),
        })?;
        let run = state.hub.insert(agent, launched);
        return Ok(respond(state, &run, projection(&run), &[], 0, !detach));
    }
    let waiting = find_waiting(state, agent, &input.thread_id, &entries).await?;
    let signals = match results {
        None => entries.iter().map(|entry| waiting.signal(entry)).collect::<Result<Vec<_>, _>>()?,
        Some(results) => {
            let mut signals = Vec::new();
            for (entry, signal) in results {
                if !waiting.is_client_call(&entry.interrupt_id) {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_resume",
                        format!(
                            "call `{}` waits for a person's approval, not a client tool's result: answer it with `resume`",
                            entry.interrupt_id
                        ),
                    ));
                }
                signals.push(signal);
            }
            signals
        }
    };
    for signal in signals {
        waiting.run.signal(signal).await?;
    }
    let from = waiting.resume_position();
    let projection = projection(&waiting.run).with_answered(entries.iter().map(|e| e.interrupt_id.clone()));
    Ok(respond(state, &waiting.run, projection, &waiting.history, from, !detach))
}

/// The client tools' results `messages` end with (the `tool` messages after the last
/// other message), each as the resume entry it answers and the signal it sends; `None`
/// when the messages do not end with a tool message.
fn client_tool_results(messages: &[Message]) -> Result<Option<Vec<(ResumeEntry, Signal)>>, ApiError> {
    let trailing = messages.iter().rev().take_while(|m| matches!(m, Message::Tool(_))).count();
    if trailing == 0 {
        return Ok(None);
    }
    let mut results = Vec::new();
    for message in &messages[messages.len() - trailing..] {
        let Message::Tool(message) = message else { continue };
        let (content, is_error) = tool_result(message)?;
        let entry =
            ResumeEntry { interrupt_id: message.tool_call_id.clone(), status: ResumeStatus::Resolved, payload: None };
        let call_id = ToolCallId::new(message.tool_call_id.clone());
        results.push((entry, Signal::ToolResult { call_id, content, is_error }));
    }
    Ok(Some(results))
}

/// Client tools are offered to an agent's run only, and may not take the names of the
/// agent's own tools.
fn check_client_tools(state: &AppState, agent: &str, input: &RunAgentInput) -> Result<(), ApiError> {
    if input.tools.is_empty() {
        return Ok(());
    }
    let Some(target) = state.launcher.target(agent) else {
        return Ok(());
    };
    if target.kind == TargetKind::Team {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_client_tools",
            format!("`{agent}` is a team: its runs take no client tools"),
        ));
    }
    let mut taken = target.tools;
    taken.push(troupe_runtime::STATE_UPDATE_TOOL.to_owned());
    client_tools(input, &taken).map(drop)
}

/// The stream: `RUN_STARTED`, then the run's events from position `from` projected,
/// until the projection finishes the AG-UI run (the troupe run may go on, waiting). With
/// `stop_on_close`, a stream the client drops before that cancels the run.
fn respond(
    state: &AppState,
    run: &Arc<HubRun>,
    mut projection: Projection,
    history: &[AgentEvent],
    from: usize,
    stop_on_close: bool,
) -> Response {
    let queue: VecDeque<Event> = projection.start(history).into();
    let events = run.subscribe(from, state.closing.child_token()).boxed();
    let abandoned = AbandonedStops { run: stop_on_close.then(|| Arc::clone(run)) };
    let streaming = Streaming { projection, events, queue, run: Arc::clone(run), done: false, abandoned };
    let body = futures::stream::unfold(streaming, Streaming::next);
    let mut response = Sse::new(body).keep_alive(KeepAlive::new().interval(state.config.keep_alive)).into_response();
    if let Ok(id) = HeaderValue::from_str(run.run_id().as_str()) {
        response.headers_mut().insert("x-troupe-run-id", id);
    }
    response
}

struct Streaming {
    projection: Projection,
    events: Pin<Box<dyn Stream<Item = (usize, AgentEvent)> + Send>>,
    queue: VecDeque<Event>,
    run: Arc<HubRun>,
    done: bool,
    abandoned: AbandonedStops,
}

/// Cancels the run when the stream is dropped before its AG-UI run finished: the client
/// closed the connection or aborted. Disarmed once the stream finishes (an ended run, or
/// one that waits for the client's decision).
struct AbandonedStops {
    run: Option<Arc<HubRun>>,
}

impl Drop for AbandonedStops {
    fn drop(&mut self) {
        if let Some(run) = self.run.take().filter(|run| !run.is_ended()) {
            tracing::info!(run = %run.run_id(), "the AG-UI client went away; cancelling its run");
            run.cancel_token().cancel();
        }
    }
}

impl Streaming {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                let frame = SseEvent::default()
                    .json_data(&event)
                    .unwrap_or_else(|_| SseEvent::default().comment("unserializable event"));
                return Some((Ok(frame), self));
            }
            if self.done {
                return None;
            }
            let more = match self.events.next().await {
                Some((_, event)) => self.projection.next(&event),
                None => self.projection.end(self.run.view().end.as_ref()),
            };
            self.queue.extend(more);
            self.done = self.projection.is_finished();
            if self.done {
                self.abandoned.run = None;
            }
        }
    }
}
