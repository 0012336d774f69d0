//! `POST /a2a`: the JSON-RPC binding. A request is read and checked ([`rpc`](super::rpc)),
//! its method run ([`methods`](super::methods), [`push`](super::push)), and its answer
//! sent as a JSON-RPC response — or, for a streaming method, as SSE whose every event is
//! a JSON-RPC response to the request.

use super::legacy;
use super::methods::{self, Answer};
use super::push::{self, PushConfigRequest, TaskPushNotificationConfig, config::legacy as push_legacy};
use super::rpc::{self, Call, Dialect, Method, RpcError};
use super::wire::{GetTaskRequest, SendMessageRequest, TaskIdRequest};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

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
    match dispatch(&state, &headers, call).await {
        Ok(Answer::Result(result)) => Json(rpc::success(&id, result)).into_response(),
        Ok(Answer::Stream(follow, dialect)) => {
            let frame = move |item: &_, last| {
                let result = match dialect {
                    Dialect::V1 => serde_json::to_value(item).unwrap_or(Value::Null),
                    Dialect::V03 => legacy::stream_item(item, last),
                };
                rpc::success(&id, result)
            };
            methods::stream(&state, *follow, frame).into_response()
        }
        Err(error) => Json(rpc::failure(&id, &error, dialect)).into_response(),
    }
}

fn params<T: DeserializeOwned>(call: &Call) -> Result<T, RpcError> {
    serde_json::from_value(call.params.clone()).map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

fn push_config(config: &TaskPushNotificationConfig, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => serde_json::to_value(config).unwrap_or(Value::Null),
        Dialect::V03 => push_legacy::render(config),
    }
}

async fn dispatch(state: &AppState, headers: &HeaderMap, call: Call) -> Result<Answer, RpcError> {
    let dialect = call.dialect;
    match call.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            let request: SendMessageRequest = params(&call)?;
            let push = push::from_send(&call.params, dialect)?;
            methods::send(state, request, push, call.method.is_streaming(), dialect).await
        }
        Method::GetTask => {
            methods::get_task(state, params::<GetTaskRequest>(&call)?, dialect).await.map(Answer::Result)
        }
        Method::ListTasks => methods::list(state, params(&call)?).await.map(Answer::Result),
        Method::CancelTask => {
            let request: TaskIdRequest = params(&call)?;
            methods::cancel(state, &request.id, dialect).await.map(Answer::Result)
        }
        Method::SubscribeToTask => {
            let request: TaskIdRequest = params(&call)?;
            methods::subscribe(state, &request.id, dialect).await
        }
        Method::CreatePushConfig => {
            let config = match dialect {
                Dialect::V1 => params(&call)?,
                Dialect::V03 => push_legacy::read(&call.params)
                    .ok_or_else(|| RpcError::invalid_params("the params have no `pushNotificationConfig`"))?,
            };
            let created = push::create(state, config).await?;
            Ok(Answer::Result(push_config(&created, dialect)))
        }
        Method::GetPushConfig => {
            let mut request = match dialect {
                Dialect::V1 => params(&call)?,
                Dialect::V03 => push_legacy::ids(&call.params),
            };
            if request.id.is_empty() && dialect == Dialect::V03 {
                // 0.3 names only the task when it has one config: its first.
                let first = push::list(state, &request.task_id).await?.configs.into_iter().next();
                request.id = first.map(|c| c.id).unwrap_or_default();
            }
            let found = push::get(state, &request).await?;
            Ok(Answer::Result(push_config(&found, dialect)))
        }
        Method::ListPushConfigs => {
            let task_id = match dialect {
                Dialect::V1 => params::<push::config::ListPushConfigsRequest>(&call)?.task_id,
                Dialect::V03 => push_legacy::ids(&call.params).task_id,
            };
            let listed = push::list(state, &task_id).await?;
            Ok(Answer::Result(match dialect {
                Dialect::V1 => serde_json::to_value(listed).unwrap_or(Value::Null),
                Dialect::V03 => Value::Array(listed.configs.iter().map(push_legacy::render).collect()),
            }))
        }
        Method::DeletePushConfig => {
            let request: PushConfigRequest = match dialect {
                Dialect::V1 => params(&call)?,
                Dialect::V03 => push_legacy::ids(&call.params),
            };
            push::delete(state, &request).await?;
            Ok(Answer::Result(match dialect {
                Dialect::V1 => json!({}),
                Dialect::V03 => Value::Null,
            }))
        }
        Method::ExtendedAgentCard => {
            Ok(Answer::Result(serde_json::to_value(super::card::extended_card(state, headers)).unwrap_or(Value::Null)))
        }
    }
}
