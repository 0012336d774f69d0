//! `POST /agui/{agent}`: a new run, or the rest of a waiting one, as AG-UI events.

use super::events::Event;
use super::input::RunAgentInput;
use super::projection::Projection;
use super::resume::{decision, find_waiting};
use super::run_input::run_input;
use crate::error::ApiError;
use crate::hub::HubRun;
use crate::ids::checked_id;
use crate::launcher::LaunchError;
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
    };
    match input.resume.as_deref() {
        Some(entries) if !entries.is_empty() => {
            let decisions = entries.iter().map(decision).collect::<Result<Vec<_>, _>>()?;
            let waiting = find_waiting(state, agent, &input.thread_id, entries).await?;
            for (entry, decision) in entries.iter().zip(decisions) {
                let call_id = ToolCallId::new(entry.interrupt_id.clone());
                waiting.run.signal(Signal::Approval { call_id, decision }).await?;
            }
            let from = waiting.resume_position();
            let projection = projection(&waiting.run).with_answered(entries.iter().map(|e| e.interrupt_id.clone()));
            Ok(respond(state, &waiting.run, projection, &waiting.history, from, !detach))
        }
        _ => {
            let run_input = run_input(&input)?;
            let launched = state.launcher.launch(agent, run_input).map_err(|error| match error {
                LaunchError::UnknownTarget(name) => ApiError::unknown_agent(&name),
                LaunchError::Refused(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "launch_refused", why),
            })?;
            let run = state.hub.insert(agent, launched);
            Ok(respond(state, &run, projection(&run), &[], 0, !detach))
        }
    }
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
