//! The A2A methods over the hub's runs, shared by both bindings (JSON-RPC in
//! [`jsonrpc`](super::jsonrpc), HTTP+JSON in [`rest`](super::rest)): each takes its
//! request and answers with the result in the version's shapes, or a task to stream.

use super::follow::{Follow, Item};
use super::legacy;
use super::projection::pending_call;
use super::push::TaskPushNotificationConfig;
use super::reply::{self, Decision};
use super::rpc::{Dialect, INTERNAL_ERROR, RpcError, TASK_NOT_CANCELABLE, UNSUPPORTED_OPERATION};
use super::wire::{
    GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    parse_timestamp,
};
use crate::error::ApiError;
use crate::hub::HubRun;
use crate::ids::checked_id;
use crate::native::{StartRun, launch, start_as};
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use troupe_core::RunId;
use troupe_runtime::durable::child_run_id;
use troupe_runtime::{ApprovalDecision, Signal};

/// The page size of `ListTasks` unless asked otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page of `ListTasks`.
pub const MAX_PAGE_SIZE: usize = 100;
/// How long `CancelTask` waits for the run to stop before answering with the task as
/// it stands.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// How many stream items wait for a slow client before the follower waits.
pub(super) const STREAM_BUFFER: usize = 64;

/// What a method answers: one JSON result, or a stream of them.
pub(super) enum Answer {
    /// The result.
    Result(Value),
    /// The task followed, its items to be rendered in this version's shapes.
    Stream(Box<Follow>, Dialect),
}

/// The task `id` as it stands, with the latest `history_length` messages.
pub(super) async fn get_task(state: &AppState, request: GetTaskRequest, dialect: Dialect) -> Result<Value, RpcError> {
    let run = held(state, &request.id).await?;
    let follow = Follow::start(&run, state.closing.child_token()).await;
    Ok(render_task(&follow.task(history_length(request.history_length)?), dialect))
}

/// The stream of task `id`'s updates, from the task as it stands: refused for a task that
/// has ended, or that another server holds (its live events are there).
pub(super) async fn subscribe(state: &AppState, id: &str, dialect: Dialect) -> Result<Answer, RpcError> {
    let run = held(state, id).await?;
    let follow = Follow::start(&run, state.closing.child_token()).await;
    if follow.projection().state().is_terminal() {
        return Err(RpcError::new(UNSUPPORTED_OPERATION, format!("task `{id}` has ended; read it with GetTask")));
    }
    if state.hub.get(id).is_none() {
        return Err(RpcError::new(
            UNSUPPORTED_OPERATION,
            format!("task `{id}` is held by another server: subscribe there, or read it with GetTask"),
        ));
    }
    Ok(Answer::Stream(Box::new(follow), dialect))
}

pub(super) fn render_task(task: &Task, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => serde_json::to_value(task).unwrap_or(Value::Null),
        Dialect::V03 => legacy::task(task),
    }
}

pub(super) fn history_length(length: Option<i32>) -> Result<Option<usize>, RpcError> {
    length
        .map(|n| usize::try_from(n).map_err(|_| RpcError::invalid_params("`historyLength` must not be negative")))
        .transpose()
}

/// The task `id`: a run held here, or read from the store.
pub(super) async fn held(state: &AppState, id: &str) -> Result<Arc<HubRun>, RpcError> {
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
        _ if error.status.is_server_error() => RpcError::new(INTERNAL_ERROR, error.message),
        _ => RpcError::new(UNSUPPORTED_OPERATION, error.message),
    }
}

/// Sends a message: a new task, or a follow-up to one (a decision, a message); `push`
/// is a webhook the request asks to be told of the task's updates (checked before the task
/// starts).
pub(super) async fn send(
    state: &AppState,
    request: SendMessageRequest,
    push: Option<TaskPushNotificationConfig>,
    streaming: bool,
    dialect: Dialect,
) -> Result<Answer, RpcError> {
    let webhook = match push {
        Some(config) => Some(super::push::check(config).await?),
        None => None,
    };
    let (run, context) = match request.message.task_id.as_deref().filter(|t| !t.is_empty()) {
        Some(task_id) => {
            let run = held(state, task_id).await?;
            if let Some(webhook) = &webhook {
                state.push.admit(state, &run, &webhook.config().id)?;
            }
            continue_task(&run, &request).await?;
            (run, None)
        }
        None => start_task(state, &request).await?,
    };
    if let Some(webhook) = webhook {
        state.push.add(state, &run, webhook)?;
    }
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
/// the first one) in the message's context, or in a new one; the run and its new context.
///
/// The task's id is made from the skill and the message's `messageId`, so a message sent
/// again (by a client that lost the answer, or a team resumed after a crash) finds the task
/// its first sending started, here or in the store, instead of starting it twice; the
/// context is then the task's own (`None`).
async fn start_task(state: &AppState, request: &SendMessageRequest) -> Result<(Arc<HubRun>, Option<String>), RpcError> {
    let agent = match reply::target(request) {
        Some(name) => name,
        None => state
            .launcher
            .targets()
            .first()
            .map(|t| t.name.clone())
            .ok_or_else(|| RpcError::new(UNSUPPORTED_OPERATION, "this server exposes no agent or team to run"))?,
    };
    if state.launcher.target(&agent).is_none() {
        let targets = state.launcher.targets();
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
    let message_id = request.message.message_id.as_str();
    let task_id = (!message_id.is_empty()).then(|| task_id_of(&agent, message_id));
    let start = StartRun {
        agent: Some(agent),
        instruction,
        conversation_id: Some(context.clone()),
        stream: Some(false),
        output: reply::output(request)?,
        ..StartRun::default()
    };
    match task_id {
        Some(task_id) => {
            let (run, found) = start_as(state, &start, task_id).await.map_err(refused)?;
            Ok((run, (!found).then_some(context)))
        }
        None => Ok((launch(state, &start).map_err(refused)?, Some(context))),
    }
}

/// The id of the task message `message_id` starts for skill `agent`: the same for the same
/// message sent again, and of the form of a run's id.
fn task_id_of(agent: &str, message_id: &str) -> RunId {
    child_run_id(&RunId::new("a2a-message"), &format!("{agent}\0{message_id}"))
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
    let decision = match (decision.approve, &decision.arguments) {
        (true, Some(arguments)) => ApprovalDecision::Modify { arguments: arguments.clone() },
        (true, None) => ApprovalDecision::Approve,
        (false, _) => ApprovalDecision::Reject { reason: decision.reason.clone() },
    };
    Signal::Approval { call_id: troupe_core::ToolCallId::new(call_id), decision }
}

pub(super) async fn cancel(state: &AppState, id: &str, dialect: Dialect) -> Result<Value, RpcError> {
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

pub(super) async fn list(state: &AppState, request: ListTasksRequest) -> Result<Value, RpcError> {
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

/// The task as it stands, then its updates, as SSE: each event's data is what `frame`
/// makes of an item (and whether it is the last).
pub(super) fn stream<F>(
    state: &AppState,
    follow: Follow,
    frame: F,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>> + Send + 'static>
where
    F: Fn(&StreamResponse, bool) -> Value + Send + 'static,
{
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
        let event = Event::default().json_data(frame(&item, last));
        Ok(event.unwrap_or_else(|_| Event::default().comment("unserializable item")))
    });
    Sse::new(frames).keep_alive(KeepAlive::new().interval(state.config.keep_alive))
}
