//! Push notifications: webhooks a client sets for a task, to which the server POSTs the
//! task's updates as it works, needs input and ends.
//!
//! - A config (`CreateTaskPushNotificationConfig`, or `taskPushNotificationConfig` in a
//!   send's configuration) names the task, an http(s) `url`, an optional `token` and
//!   optional `authentication` (`scheme` and `credentials`), and an `id` (by default the
//!   task's: a config sent again with the same id replaces the one before, or changes
//!   nothing when it is the same). It is refused with a clear
//!   error — nothing kept, the task untouched — when its task is unknown, its URL is not
//!   http(s) or names no host, its headers could not be sent, or the server cannot
//!   connect to the URL (checked on arrival, [`webhook::REACH_TIMEOUT`]).
//! - Each update is POSTed as the stream item it is (`{"statusUpdate": …}`,
//!   `{"artifactUpdate": …}`), with `Authorization: <scheme> <credentials>` and
//!   `X-A2A-Notification-Token: <token>` when set; a failed delivery is retried with
//!   backoff ([`webhook::ATTEMPTS`] tries in all), then given up: a webhook never holds
//!   up the run, nor another webhook ([`registry`]).
//! - `Get`/`List` answer with the configs without their token and credentials.
//! - The configs live in memory: a restarted server has none, and a task held by another
//!   server is configured there.

pub mod config;
pub mod registry;
pub mod webhook;

pub use config::{AuthenticationInfo, ListPushConfigsResponse, PushConfigRequest, TaskPushNotificationConfig};
pub use registry::PushRegistry;
pub use webhook::Webhook;

use super::methods::held;
use super::rpc::{Dialect, RpcError, TASK_NOT_FOUND};
use crate::state::AppState;
use serde_json::{Value, json};

/// The webhook a send's configuration asks for: 1.0 `taskPushNotificationConfig`, 0.3
/// `pushNotificationConfig`.
pub(crate) fn from_send(params: &Value, dialect: Dialect) -> Result<Option<TaskPushNotificationConfig>, RpcError> {
    let configuration = &params["configuration"];
    match dialect {
        Dialect::V1 => match configuration.get("taskPushNotificationConfig") {
            None | Some(Value::Null) => Ok(None),
            Some(config) => serde_json::from_value(config.clone())
                .map(Some)
                .map_err(|e| RpcError::invalid_params(format!("invalid taskPushNotificationConfig: {e}"))),
        },
        Dialect::V03 => match configuration.get("pushNotificationConfig") {
            None | Some(Value::Null) => Ok(None),
            Some(config) => Ok(config::legacy::read(&json!({"pushNotificationConfig": config}))),
        },
    }
}

/// `config` checked: its fields, then that its URL can be reached.
pub async fn check(config: TaskPushNotificationConfig) -> Result<Webhook, RpcError> {
    let webhook = Webhook::parse(config)?;
    webhook.check_reachable().await?;
    Ok(webhook)
}

/// Adds a webhook to its task; the config as kept, without its secrets.
pub(crate) async fn create(
    state: &AppState,
    config: TaskPushNotificationConfig,
) -> Result<TaskPushNotificationConfig, RpcError> {
    if config.task_id.is_empty() {
        return Err(RpcError::invalid_params("the push config names no task (`taskId`)"));
    }
    let run = held(state, &config.task_id).await?;
    let webhook = Webhook::parse(config)?;
    state.push.admit(state, &run, &webhook.config().id)?;
    webhook.check_reachable().await?;
    Ok(state.push.add(state, &run, webhook)?.redacted())
}

fn no_config(request: &PushConfigRequest) -> RpcError {
    RpcError::new(TASK_NOT_FOUND, format!("task `{}` has no push config `{}`", request.task_id, request.id))
}

/// One of a task's configs, without its secrets.
pub(crate) async fn get(state: &AppState, request: &PushConfigRequest) -> Result<TaskPushNotificationConfig, RpcError> {
    held(state, &request.task_id).await?;
    let configs = state.push.configs(&request.task_id);
    let found = configs.iter().find(|c| c.id == request.id).ok_or_else(|| no_config(request))?;
    Ok(found.redacted())
}

/// A task's configs, without their secrets.
pub(crate) async fn list(state: &AppState, task_id: &str) -> Result<ListPushConfigsResponse, RpcError> {
    held(state, task_id).await?;
    let configs = state.push.configs(task_id).iter().map(TaskPushNotificationConfig::redacted).collect();
    Ok(ListPushConfigsResponse { configs, next_page_token: String::new() })
}

/// Removes one of a task's configs: nothing more is sent to it.
pub(crate) async fn delete(state: &AppState, request: &PushConfigRequest) -> Result<(), RpcError> {
    held(state, &request.task_id).await?;
    if state.push.remove(&request.task_id, &request.id) { Ok(()) } else { Err(no_config(request)) }
}
