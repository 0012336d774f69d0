//! Events as Server-Sent Events: `id:` is the event's position in its run, `event:` its
//! type, `data:` the event as JSON.

use crate::error::ApiError;
use crate::hub::HubRun;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::AgentEvent;

/// The `type` tag of an event (`run_started`, `message_delta`, …).
pub fn event_type(event: &serde_json::Value) -> &str {
    event.get("type").and_then(serde_json::Value::as_str).unwrap_or("event")
}

/// Where a reconnecting client resumes: after the `Last-Event-ID` it sends, or after
/// `?after=N`; from the start when it sends neither.
pub fn resume_position(headers: &HeaderMap, after: Option<&str>) -> Result<usize, ApiError> {
    let last = match headers.get("last-event-id") {
        Some(value) => Some(value.to_str().map_err(|_| bad_position())?),
        None => after,
    };
    match last {
        None => Ok(0),
        Some(text) => text.trim().parse::<usize>().map(|n| n.saturating_add(1)).map_err(|_| bad_position()),
    }
}

fn bad_position() -> ApiError {
    ApiError::bad_request("invalid_event_id", "Last-Event-ID and `after` must be an event position (a number)")
}

/// One event as an SSE frame.
pub fn frame(position: usize, event: &AgentEvent) -> Event {
    let value = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    let frame = Event::default().id(position.to_string()).event(event_type(&value));
    frame.json_data(&value).unwrap_or_else(|_| Event::default().comment("unserializable event"))
}

/// The run's events from `from` on as an SSE response body, following it live.
pub fn stream(
    run: &Arc<HubRun>,
    from: usize,
    closing: CancellationToken,
    keep_alive: Duration,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let events = run.subscribe(from, closing).map(|(position, event)| Ok(frame(position, &event)));
    Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive))
}
