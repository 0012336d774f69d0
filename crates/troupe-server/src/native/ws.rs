//! `/v1/ws`: the native API over one WebSocket. The client starts runs, subscribes to
//! runs' events (from a position, like SSE's `Last-Event-ID`) and sends signals; the
//! server sends events, run ends and errors. Every message is one JSON text frame. A
//! `start` may name itself with an idempotency key, as `POST /v1/runs` may with its
//! header: a client whose socket closed before it heard `started` sends it again and
//! follows the run the first one started.

use super::runs::{StartRun, checked_idempotency_key, followable, held_or_ended, start_once};
use crate::error::ApiError;
use crate::hub::HubRun;
use crate::ids::checked_id;
use crate::launcher::RunEnd;
use crate::state::AppState;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, RunId};
use troupe_runtime::Signal;

/// How many messages wait for a slow WebSocket client before its runs' forwarders wait.
const OUTBOX: usize = 256;

/// What a client sends.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Start a run and follow it.
    Start(WsStart),
    /// Follow a run's events after position `after` (from the start when absent).
    Subscribe {
        /// The run.
        run_id: String,
        /// The last position already seen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<usize>,
    },
    /// Send a signal to a run.
    Signal {
        /// The run.
        run_id: String,
        /// The signal.
        signal: Signal,
    },
}

/// A `start` message: the body of `POST /v1/runs`, and the key that names this start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct WsStart {
    /// Names this start, as `POST /v1/runs`'s `Idempotency-Key` header does: the same key
    /// sent again for the same agent or team (by a client whose socket closed before it
    /// heard `started`) gets the run the first message started, not a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// What to run.
    #[serde(flatten)]
    pub run: StartRun,
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for WsStart {
    type Error = serde_json::Error;

    /// The key taken out, the rest read as a [`StartRun`], which refuses a field it does
    /// not know (serde's `flatten` would pass it over).
    fn try_from(mut fields: serde_json::Map<String, serde_json::Value>) -> Result<Self, Self::Error> {
        let idempotency_key = match fields.remove("idempotency_key") {
            None | Some(serde_json::Value::Null) => None,
            Some(key) => Some(serde_json::from_value(key)?),
        };
        let run = serde_json::from_value(serde_json::Value::Object(fields))?;
        Ok(WsStart { idempotency_key, run })
    }
}

/// What the server sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// A run was started.
    Started {
        /// Its id.
        run_id: RunId,
        /// Whether the run is the one an earlier `start` with the same idempotency key
        /// started (present only then).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replayed: bool,
    },
    /// One event of a followed run, at `position`.
    Event {
        /// The run.
        run_id: RunId,
        /// The event's position in its run.
        position: usize,
        /// The event.
        event: Box<AgentEvent>,
    },
    /// A followed run ended (all its events were sent before this).
    Ended {
        /// The run.
        run_id: RunId,
        /// How.
        end: Option<RunEnd>,
    },
    /// A signal was taken.
    SignalAccepted {
        /// The run.
        run_id: RunId,
    },
    /// A message was refused; the codes are those of the HTTP errors.
    Error {
        /// A stable machine-readable code (`unknown_run`, `invalid_id`, …).
        code: String,
        /// What went wrong.
        message: String,
    },
}

pub(super) async fn upgrade(
    State(state): State<AppState>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        // A plain request to the WebSocket endpoint gets the JSON error every endpoint gives.
        Err(rejection) => {
            let why = format!("{} (this endpoint speaks WebSocket: send an upgrade request)", rejection.body_text());
            return axum::response::IntoResponse::into_response(crate::error::ApiError::bad_request(
                "websocket_upgrade_required",
                why,
            ));
        }
    };
    let limit = state.config.body_limit;
    ws.max_message_size(limit).on_upgrade(move |socket| session(state, socket))
}

async fn session(state: AppState, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let (outbox, mut outgoing) = mpsc::channel::<ServerMessage>(OUTBOX);
    let done = state.closing.child_token();
    let _stop_forwarders = done.clone().drop_guard();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let Ok(text) = serde_json::to_string(&message) else { continue };
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let frame = tokio::select! {
            frame = incoming.next() => frame,
            () = done.cancelled() => break,
        };
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
            Some(Ok(_)) => continue,
        };
        let reply = match serde_json::from_str::<ClientMessage>(&text) {
            Ok(message) => handle(&state, message, &outbox, &done).await,
            Err(error) => Err(ApiError::from_json(&error)),
        };
        if let Err(error) = reply
            && outbox.send(ServerMessage::Error { code: error.code.to_owned(), message: error.message }).await.is_err()
        {
            break;
        }
    }
    drop(outbox);
    done.cancel();
    let _ = writer.await;
}

async fn handle(
    state: &AppState,
    message: ClientMessage,
    outbox: &mpsc::Sender<ServerMessage>,
    done: &CancellationToken,
) -> Result<(), ApiError> {
    match message {
        ClientMessage::Start(start) => {
            let key = start.idempotency_key.as_deref().map(checked_idempotency_key).transpose()?;
            let (run, replayed) = start_once(state, &start.run, key).await?;
            let _ = outbox.send(ServerMessage::Started { run_id: run.run_id().clone(), replayed }).await;
            held_or_ended(state, &run)?;
            follow(run, 0, outbox, done);
            Ok(())
        }
        ClientMessage::Subscribe { run_id, after } => {
            let run = followable(state, &run_id).await?;
            follow(run, after.map_or(0, |n| n.saturating_add(1)), outbox, done);
            Ok(())
        }
        ClientMessage::Signal { run_id, signal } => {
            let id = checked_id("run", &run_id)?;
            let run = state.find_run(id).await?.ok_or_else(|| ApiError::unknown_run(id))?;
            run.signal(signal).await?;
            let _ = outbox.send(ServerMessage::SignalAccepted { run_id: run.run_id().clone() }).await;
            Ok(())
        }
    }
}

/// Sends `run`'s events from position `from` on, then its end, until the socket closes.
fn follow(run: Arc<HubRun>, from: usize, outbox: &mpsc::Sender<ServerMessage>, done: &CancellationToken) {
    let outbox = outbox.clone();
    let stop = done.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(run.subscribe(from, stop.clone()));
        while let Some((position, event)) = events.next().await {
            let message = ServerMessage::Event { run_id: run.run_id().clone(), position, event: Box::new(event) };
            if outbox.send(message).await.is_err() {
                return;
            }
        }
        if !stop.is_cancelled() {
            let _ = outbox.send(ServerMessage::Ended { run_id: run.run_id().clone(), end: run.view().end }).await;
        }
    });
}
