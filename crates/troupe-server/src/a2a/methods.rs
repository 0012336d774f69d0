//! `POST /a2a`: the JSON-RPC endpoint and its methods, over the hub's runs.

use super::follow::{Follow, Item};
use super::legacy;
use super::projection::pending_call;
use super::reply::{self, Decision};
use super::rpc::{
    self, Call, Dialect, EXTENDED_AGENT_CARD_NOT_CONFIGURED, INTERNAL_ERROR, Method, PUSH_NOTIFICATION_NOT_SUPPORTED,
    RequestId, RpcError, TASK_NOT_CANCELABLE, UNSUPPORTED_OPERATION,
};
use super::wire::{
    GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskIdRequest, parse_timestamp,
};
use crate::error::ApiError;
use crate::hub::HubRun;
use crate::ids::checked_id;
use crate::native::{StartRun, launch};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::channel::mpsc;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use troupe_runtime::{ApprovalDecision, Signal};

/// The page size of `ListTasks` unless asked otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page of `ListTasks`.
pub const MAX_PAGE_SIZE: usize = 100;
/// How long `CancelTask` waits for the run to stop before answering with the task as
/// it stands.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// How many stream items wait for a slow client before the follower waits.
const STREAM_BUFFER: usize = 64;

/// What a method answers: one JSON result, or a stream of them.
enum Answer {
    Result(Value),
    Stream(Box<Follow>, Dialect),
}

/// `POST /a2a`.
pub(super) async fn endpoint(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let why = format!("the request body could not be read: {}", rejection.body_text());
            return Json(rpc::failure(&Value::Null, &RpcError::invalid_request(why), Dialect::V1)).into_response();
        }
    };
    let call = match rpc::read_call(&body) {
        Ok(call) => call,
        Err((id, error)) => return Json(rpc::failure(&id, &error, Dialect::V1)).into_response(),
    };
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    if let Err(error) = rpc::check_version(version, call.dialect) {
        return Json(rpc::failure(&call.id, &error, call.dialect)).into_response();
    }
    let id = call.id.clone();
    let dialect = call.dialect;
    match dispatch(&state, call).await {
        Ok(Answer::Result(result)) => Json(rpc::success(&id, result)).into_response(),
        Ok(Answer::Stream(follow, dialect)) => stream(&state, *follow, id, dialect).into_response(),
        Err(error) => Json(rpc::failure(&id, &error, dialect)).into_response(),
    }
}

fn params<T: DeserializeOwned>(call: &Call) -> Result<T, RpcError> {
    serde_json::from_value(call.params.clone()).map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

async fn dispatch(state: &AppState, call: Call) -> Result<Answer, RpcError> {
    let dialect = call.dialect;
    match call.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            let request: SendMessageRequest = params(&call)?;
            send(state, request, call.method.is_streaming(), dialect).await
        }
        Method::GetTask => {
            let request: GetTaskRequest = params(&call)?;
            let run = held(state, &request.id).await?;
            let follow = Follow::start(&run, state.closing.child_token()).await;
            Ok(Answer::Result(render_task(&follow.task(history_length(request.history_length)?), dialect)))
        }
        Method::ListTasks => list(state, params(&call)?).await.map(Answer::Result),
        Method::CancelTask => {
            let request: TaskIdRequest = params(&call)?;
            cancel(state, &request.id, dialect).await.map(Answer::Result)
        }
        Method::SubscribeToTask => {
            let request: TaskIdRequest = params(&call)?;
            let run = held(state, &request.id).await?;
            let follow = Follow::start(&run, state.closing.child_token()).await;
            if follow.projection().state().is_terminal() {
                return Err(RpcError::new(
                    UNSUPPORTED_OPERATION,
                    format!("task `{}` has ended; read it with GetTask", request.id),
                ));
            }
            if state.hub.get(&request.id).is_none() {
                return Err(RpcError::new(
                    UNSUPPORTED_OPERATION,
                    format!(
                        "task `{}` is held by another server: subscribe there, or read it with GetTask",
                        request.id
                    ),
                ));
            }
            Ok(Answer::Stream(Box::new(follow), dialect))
        }
        Method::PushNotificationConfig => {
            Err(RpcError::new(PUSH_NOTIFICATION_NOT_SUPPORTED, "push notifications are not offered; stream instead"))
        }
        Method::ExtendedAgentCard => {
            Err(RpcError::new(EXTENDED_AGENT_CARD_NOT_CONFIGURED, "there is no extended agent card"))
        }
    }
}

fn render_task(task: &Task, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => serde_json::to_value(task).unwrap_or(Value::Null),
        Dialect::V03 => legacy::task(task),
    }
}

fn history_length(length: Option<i32>) -> Result<Option<usize>, RpcError> {
    length
        .map(|n| usize::try_from(n).map_err(|_| RpcError::invalid_params("`historyLength` must not be negative")))
        .transpose()
}

/// The task `id`: a run held here, or read from the store.
async fn held(state: &AppState, id: &str) -> Result<Arc<HubRun>, RpcError> {
    let id = checked_id("task", id).map_err(|e| RpcError::invalid_params(e.message))?;
    match state.find_run(id).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(RpcError::task_not_found(id)),
        Err(error) => Err(RpcError::new(INTERNAL_ERROR, error.message)),
    }
}

/// A hub refusal as the JSON-RPC error a client can act on.
fn refused(error: ApiError) -> RpcError {
    match error.code {
        "unknown_agent" | "launch_refused" | "invalid_id" | "invalid_body" | "no_such_call" => {
            RpcError::invalid_params(error.message)
        }
        _ => RpcError::new(UNSUPPORTED_OPERATION, error.message),
    }
}

async fn send(
    state: &AppState,
    request: SendMessageRequest,
    streaming: bool,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let (run, context) = match request.message.task_id.as_deref().filter(|t| !t.is_empty()) {
        Some(task_id) => {
            let run = held(state, task_id).await?;
            continue_task(&run, &request).await?;
            (run, None)
        }
        None => {
            let (run, context) = start_task(state, &request)?;
            (run, Some(context))
        }
    };
    let mut follow = Follow::start(&run, state.closing.child_token()).await;
    if let Some(context) = context {
        follow.set_context(context);
    }
    if streaming {
        return Ok(Answer::Stream(Box::new(follow), dialect));
    }
    let configuration = request.configuration.unwrap_or_default();
    let history = history_length(configuration.history_length)?;
    let at_once = configuration.return_immediately.unwrap_or(false) || configuration.blocking == Some(false);
    let task = if at_once { follow.task(history) } else { follow.run(None).await.snapshot(history, true) };
    Ok(Answer::Result(match dialect {
        Dialect::V1 => serde_json::to_value(SendMessageResponse::Task(task)).unwrap_or(Value::Null),
        Dialect::V03 => legacy::task(&task),
    }))
}

/// Starts the task a message without a task id asks for: a run of the named agent (or
/// the first one) in the message's context, or in a new one; the run and its context.
fn start_task(state: &AppState, request: &SendMessageRequest) -> Result<(Arc<HubRun>, String), RpcError> {
    let targets = state.launcher.targets();
    let agent = match reply::target(request) {
        Some(name) => name,
        None => targets
            .first()
            .map(|t| t.name.clone())
            .ok_or_else(|| RpcError::new(UNSUPPORTED_OPERATION, "this server exposes no agent or team to run"))?,
    };
    if !targets.iter().any(|t| t.name == agent) {
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        return Err(RpcError::invalid_params(format!(
            "no skill `{agent}`; name one of the card's skills ({}) as metadata `agent`",
            names.join(", ")
        )));
    }
    let instruction = reply::instruction(&request.message)
        .ok_or_else(|| RpcError::invalid_params("the message has no text, data or file part to work on"))?;
    let context = match request.message.context_id.as_deref().filter(|c| !c.is_empty()) {
        Some(context) => checked_id("context", context).map_err(|e| RpcError::invalid_params(e.message))?.to_owned(),
        None => format!("ctx-{}", uuid::Uuid::new_v4().simple()),
    };
    let start = StartRun {
        agent: Some(agent),
        instruction,
        conversation_id: Some(context.clone()),
        stream: Some(false),
        ..StartRun::default()
    };
    Ok((launch(state, &start).map_err(refused)?, context))
}

/// Delivers what a message with a task id says to its run: decisions about the calls it
/// waits for, or a message for it to read.
async fn continue_task(run: &Arc<HubRun>, request: &SendMessageRequest) -> Result<(), RpcError> {
    let view = run.view();
    let task_id = run.run_id().as_str();
    if let Some(end) = &view.end {
        let state = super::projection::outcome_state(end.outcome);
        return Err(RpcError::new(
            UNSUPPORTED_OPERATION,
            format!(
                "task `{task_id}` has ended ({}); send the message without a task id, in the same context, to start a new one",
                state.name()
            ),
        ));
    }
    let waiting: Vec<&str> = view.pending.iter().filter_map(pending_call).collect();
    match reply::decision(&request.message)? {
        Some(decision) => {
            if waiting.is_empty() {
                return Err(RpcError::invalid_params(format!("task `{task_id}` is not waiting for a decision")));
            }
            let calls: Vec<&str> = match &decision.call_id {
                Some(call) if waiting.contains(&call.as_str()) => vec![call.as_str()],
                Some(call) => {
                    return Err(RpcError::invalid_params(format!(
                        "task `{task_id}` is not waiting for call `{call}` (it waits for {})",
                        waiting.join(", ")
                    )));
                }
                None => waiting,
            };
            for call in calls {
                run.signal(approval(call, &decision)).await.map_err(refused)?;
            }
            Ok(())
        }
        None if !waiting.is_empty() => Err(RpcError::invalid_params(format!(
            "task `{task_id}` waits for a decision about call {}: reply `approve` or `reject`",
            waiting.join(", ")
        ))),
        None => {
            let text = reply::instruction(&request.message)
                .ok_or_else(|| RpcError::invalid_params("the message has no text, data or file part"))?;
            run.signal(Signal::UserMessage { text }).await.map_err(refused)
        }
    }
}

fn approval(call_id: &str, decision: &Decision) -> Signal {
    let decision = if decision.approve {
        ApprovalDecision::Approve
    } else {
        ApprovalDecision::Reject { reason: decision.reason.clone() }
    };
    Signal::Approval { call_id: troupe_core::ToolCallId::new(call_id), decision }
}

async fn cancel(state: &AppState, id: &str, dialect: Dialect) -> Result<Value, RpcError> {
    let run = held(state, id).await?;
    let not_cancelable =
        || RpcError::new(TASK_NOT_CANCELABLE, format!("task `{id}` has ended and cannot be cancelled"));
    if run.is_ended() {
        return Err(not_cancelable());
    }
    // The token, not a cancel signal: a signal waits for the run's next boundary (the
    // end of a model call), the token stops it between two chunks.
    run.cancel_token().cancel();
    let ended = async {
        let mut events = std::pin::pin!(run.subscribe(run.view().events, state.closing.child_token()));
        while events.next().await.is_some() {}
    };
    let _ = tokio::time::timeout(CANCEL_WAIT, ended).await;
    let follow = Follow::start(&run, state.closing.child_token()).await;
    Ok(render_task(&follow.task(None), dialect))
}

async fn list(state: &AppState, request: ListTasksRequest) -> Result<Value, RpcError> {
    let page_size = match request.page_size {
        None | Some(0) => DEFAULT_PAGE_SIZE,
        Some(n) => usize::try_from(n)
            .map_err(|_| RpcError::invalid_params("`pageSize` must be between 1 and 100"))?
            .min(MAX_PAGE_SIZE),
    };
    let offset = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => {
            token.parse::<usize>().map_err(|_| RpcError::invalid_params("`pageToken` is not one of ours"))?
        }
    };
    let after = match request.status_timestamp_after.as_deref() {
        None => None,
        Some(text) => Some(
            parse_timestamp(text)
                .ok_or_else(|| RpcError::invalid_params("`statusTimestampAfter` is not an RFC 3339 timestamp"))?,
        ),
    };
    let history = Some(history_length(request.history_length)?.unwrap_or(0));
    let with_artifacts = request.include_artifacts.unwrap_or(false);
    let mut matching = Vec::new();
    let runs = state.all_runs(u32::try_from(MAX_PAGE_SIZE).unwrap_or(u32::MAX)).await.map_err(refused)?;
    for run in runs {
        let follow = Follow::start(&run, state.closing.child_token()).await;
        let task = follow.projection();
        let keep = request.context_id.as_deref().is_none_or(|c| c == task.context_id())
            && request.status.is_none_or(|s| s == task.state())
            && after.is_none_or(|after| task.status_ms() > after);
        if keep {
            matching.push(task.snapshot(history, with_artifacts));
        }
    }
    let total = matching.len();
    let tasks: Vec<Task> = matching.into_iter().skip(offset).take(page_size).collect();
    let next = offset + tasks.len();
    let response = ListTasksResponse {
        next_page_token: if next < total { next.to_string() } else { String::new() },
        page_size: i32::try_from(page_size).unwrap_or(i32::MAX),
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
        tasks,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// The task as it stands, then its updates, as SSE: each event's data is a JSON-RPC
/// response to request `id`.
fn stream(
    state: &AppState,
    follow: Follow,
    id: RequestId,
    dialect: Dialect,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    let (tx, rx) = mpsc::channel::<Item>(STREAM_BUFFER);
    let first = StreamResponse::Task(follow.task(None));
    let ended = follow.projection().state().is_terminal();
    // A client that goes away drops the frames, and with them this guard: the follower
    // stops instead of waiting on a run nobody watches.
    let stop_on_drop = follow.stop_token().clone().drop_guard();
    tokio::spawn(async move {
        let mut tx = tx;
        if futures::SinkExt::send(&mut tx, (first, ended)).await.is_ok() && !ended {
            follow.run(Some(tx)).await;
        }
    });
    let frames = rx.map(move |(item, last)| {
        let _watched = &stop_on_drop;
        let result = match dialect {
            Dialect::V1 => serde_json::to_value(&item).unwrap_or(Value::Null),
            Dialect::V03 => legacy::stream_item(&item, last),
        };
        let frame = Event::default().json_data(rpc::success(&id, result));
        Ok(frame.unwrap_or_else(|_| Event::default().comment("unserializable item")))
    });
    Sse::new(frames).keep_alive(KeepAlive::new().interval(state.config.keep_alive))
}
