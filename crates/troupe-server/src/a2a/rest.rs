//! The HTTP+JSON (REST) binding of A2A 1.0, under [`REST_PATH`]: the same methods as the
//! JSON-RPC endpoint (the shared `methods`, and [`push`]), as resources.
//!
//! | route (under `/a2a/rest`)                             | method                               |
//! |-------------------------------------------------------|--------------------------------------|
//! | `POST /message:send`                                  | `SendMessage`                        |
//! | `POST /message:stream`                                | `SendStreamingMessage` (SSE)         |
//! | `GET /tasks/{id}?historyLength=`                      | `GetTask`                            |
//! | `GET /tasks?contextId=&status=&pageSize=&pageToken=…` | `ListTasks`                          |
//! | `POST /tasks/{id}:cancel`                             | `CancelTask`                         |
//! | `POST` (or `GET`) `/tasks/{id}:subscribe`             | `SubscribeToTask` (SSE)              |
//! | `POST /tasks/{id}/pushNotificationConfigs`            | `CreateTaskPushNotificationConfig`   |
//! | `GET /tasks/{id}/pushNotificationConfigs`             | `ListTaskPushNotificationConfigs`    |
//! | `GET /tasks/{id}/pushNotificationConfigs/{config}`    | `GetTaskPushNotificationConfig`      |
//! | `DELETE /tasks/{id}/pushNotificationConfigs/{config}` | `DeleteTaskPushNotificationConfig`   |
//! | `GET /extendedAgentCard`                              | `GetExtendedAgentCard`               |
//!
//! Bodies and answers are the 1.0 JSON shapes; a stream's events carry one stream item
//! each. An error is `{"error": {"code": <HTTP status>, "status": <gRPC status>,
//! "message", "details": [google.rpc.ErrorInfo with the A2A reason]}}`, with the HTTP
//! status A2A maps its errors to (no such task 404, bad params 400, not cancelable or
//! not in this state 400, failure 500).

use super::methods::{self, Answer};
use super::push::{self, PushConfigRequest, TaskPushNotificationConfig};
use super::rpc::{self, Dialect, METHOD_NOT_FOUND, RpcError};
use super::wire::{GetTaskRequest, ListTasksRequest, SendMessageRequest};
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Where the binding is served, under the server's base URL.
pub const REST_PATH: &str = "/a2a/rest";

/// The binding's routes.
pub(super) fn routes() -> Router<AppState> {
    let at = |path: &str| format!("{REST_PATH}{path}");
    Router::new()
        .route(&at("/message:send"), post(send))
        .route(&at("/message:stream"), post(send_streaming))
        .route(&at("/tasks"), get(list))
        .route(&at("/tasks/{task}"), any(task))
        .route(&at("/tasks/{task}/pushNotificationConfigs"), get(list_push).post(create_push))
        .route(&at("/tasks/{task}/pushNotificationConfigs/{config}"), get(get_push).delete(delete_push))
        .route(&at("/extendedAgentCard"), get(extended_card))
}

/// An A2A error as the binding answers it, with the HTTP status that A2A maps its code
/// to unless another is given.
struct RestError {
    error: RpcError,
    status: Option<StatusCode>,
    /// The methods a 405 names.
    allow: Option<&'static str>,
}

impl From<RpcError> for RestError {
    fn from(mut error: RpcError) -> Self {
        // REST has no parse error of its own: a body that is not JSON is a bad request.
        if error.code == rpc::PARSE_ERROR {
            error.code = rpc::INVALID_REQUEST;
        }
        RestError { error, status: None, allow: None }
    }
}

/// The HTTP status and gRPC status name A2A gives an error code.
fn statuses(code: i64) -> (StatusCode, &'static str) {
    match code {
        rpc::TASK_NOT_FOUND | METHOD_NOT_FOUND => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        rpc::TASK_NOT_CANCELABLE
        | rpc::PUSH_NOTIFICATION_NOT_SUPPORTED
        | rpc::UNSUPPORTED_OPERATION
        | rpc::EXTENDED_AGENT_CARD_NOT_CONFIGURED
        | rpc::VERSION_NOT_SUPPORTED => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION"),
        rpc::PARSE_ERROR | rpc::INVALID_REQUEST | rpc::INVALID_PARAMS | rpc::CONTENT_TYPE_NOT_SUPPORTED => {
            (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let (mapped, name) = statuses(self.error.code);
        let status = self.status.unwrap_or(mapped);
        let details = self.error.to_value(Dialect::V1)["data"].clone();
        let body = json!({"error": {
            "code": status.as_u16(),
            "status": name,
            "message": self.error.message,
            "details": details,
        }});
        let mut response = (status, Json(body)).into_response();
        if let Some(allow) = self.allow {
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

type Answered = Result<Response, RestError>;

fn version(headers: &HeaderMap) -> Result<(), RestError> {
    let header = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    Ok(rpc::check_version(header, Dialect::V1)?)
}

/// The body as JSON, and as `T`.
fn body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<(T, Value), RestError> {
    // Too large (413) or too slow (408): the status the rejection names.
    let bytes = body.map_err(|r| RestError {
        status: Some(r.status()),
        ..RpcError::invalid_request(format!("the request body could not be read: {}", r.body_text())).into()
    })?;
    let bytes = if bytes.is_empty() { Bytes::from_static(b"{}") } else { bytes };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| RpcError::parse(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(RpcError::invalid_request("the body is a JSON object").into());
    }
    let typed = serde_json::from_value(value.clone())
        .map_err(|e| RpcError::invalid_params(format!("invalid request body: {e}")))?;
    Ok((typed, value))
}

/// `a_b` as `aB`: query parameters come in either form.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The query, with the fields `path` gives, as a request of type `T`: `ints` and
/// `bools` are read as numbers and booleans, the rest as text.
fn query<T: DeserializeOwned>(
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    path: Map<String, Value>,
    ints: &[&str],
    bools: &[&str],
) -> Result<T, RestError> {
    let Query(pairs) = query.map_err(|e| RpcError::invalid_params(format!("invalid query: {}", e.body_text())))?;
    let mut object = Map::new();
    for (key, text) in pairs {
        let key = camel(&key);
        let value = if ints.contains(&key.as_str()) {
            let n: i64 = text.parse().map_err(|_| {
                RpcError::invalid_params(format!("query parameter `{key}` is an integer, not `{text}`"))
            })?;
            json!(n)
        } else if bools.contains(&key.as_str()) {
            match text.as_str() {
                "true" | "1" => json!(true),
                "false" | "0" => json!(false),
                _ => return Err(RpcError::invalid_params(format!("query parameter `{key}` is true or false")).into()),
            }
        } else {
            json!(text)
        };
        object.insert(key, value);
    }
    object.extend(path);
    Ok(serde_json::from_value(Value::Object(object))
        .map_err(|e| RpcError::invalid_params(format!("invalid query: {e}")))?)
}

fn answer(answer: Answer, state: &AppState) -> Response {
    match answer {
        Answer::Result(value) => Json(value).into_response(),
        Answer::Stream(follow, _) => {
            methods::stream(state, *follow, |item, _| serde_json::to_value(item).unwrap_or(Value::Null)).into_response()
        }
    }
}

async fn send_message(
    state: &AppState,
    headers: &HeaderMap,
    raw: Result<Bytes, BytesRejection>,
    streaming: bool,
) -> Answered {
    version(headers)?;
    let (request, value): (SendMessageRequest, Value) = body(raw)?;
    let push = push::from_send(&value, Dialect::V1)?;
    let answered = methods::send(state, request, push, streaming, Dialect::V1).await?;
    Ok(answer(answered, state))
}

/// `POST /message:send`.
async fn send(State(state): State<AppState>, headers: HeaderMap, raw: Result<Bytes, BytesRejection>) -> Answered {
    send_message(&state, &headers, raw, false).await
}

/// `POST /message:stream`.
async fn send_streaming(
    State(state): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Answered {
    send_message(&state, &headers, raw, true).await
}

/// `GET /tasks`.
async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    raw: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Answered {
    version(&headers)?;
    let request: ListTasksRequest = query(raw, Map::new(), &["pageSize", "historyLength"], &["includeArtifacts"])?;
    Ok(Json(methods::list(&state, request).await?).into_response())
}

/// `/tasks/{id}` (GET), `/tasks/{id}:cancel` (POST) and `/tasks/{id}:subscribe` (GET or
/// POST): one route, as the router cannot tell a path parameter from its suffix.
async fn task(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(task): Path<String>,
    raw: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Answered {
    let (id, action) = match task.rsplit_once(':') {
        Some((id, action @ ("cancel" | "subscribe"))) => (id, action),
        _ => (task.as_str(), ""),
    };
    let reads = method == Method::GET || method == Method::HEAD;
    match (action, reads, method == Method::POST) {
        ("", true, _) => {
            version(&headers)?;
            let path = Map::from_iter([("id".to_owned(), json!(id))]);
            let request: GetTaskRequest = query(raw, path, &["historyLength"], &[])?;
            Ok(Json(methods::get_task(&state, request, Dialect::V1).await?).into_response())
        }
        ("cancel", _, true) => {
            version(&headers)?;
            Ok(Json(methods::cancel(&state, id, Dialect::V1).await?).into_response())
        }
        ("subscribe", true, _) | ("subscribe", _, true) => {
            version(&headers)?;
            Ok(answer(methods::subscribe(&state, id, Dialect::V1).await?, &state))
        }
        ("", ..) => Err(not_allowed(&method, &format!("tasks/{task}"), "GET,HEAD")),
        ("cancel", ..) => Err(not_allowed(&method, &format!("tasks/{task}"), "POST")),
        _ => Err(not_allowed(&method, &format!("tasks/{task}"), "GET,HEAD,POST")),
    }
}

/// `POST /tasks/{id}/pushNotificationConfigs`.
async fn create_push(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(task): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Answered {
    version(&headers)?;
    let (mut config, _): (TaskPushNotificationConfig, Value) = body(raw)?;
    if !config.task_id.is_empty() && config.task_id != task {
        return Err(RpcError::invalid_params(format!(
            "the body names task `{}`, the path task `{task}`",
            config.task_id
        ))
        .into());
    }
    config.task_id = task;
    Ok(Json(push::create(&state, config).await?).into_response())
}

/// `GET /tasks/{id}/pushNotificationConfigs`.
async fn list_push(State(state): State<AppState>, headers: HeaderMap, Path(task): Path<String>) -> Answered {
    version(&headers)?;
    Ok(Json(push::list(&state, &task).await?).into_response())
}

/// `GET /tasks/{id}/pushNotificationConfigs/{config}`.
async fn get_push(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((task_id, id)): Path<(String, String)>,
) -> Answered {
    version(&headers)?;
    Ok(Json(push::get(&state, &PushConfigRequest { task_id, id }).await?).into_response())
}

/// `DELETE /tasks/{id}/pushNotificationConfigs/{config}`.
async fn delete_push(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((task_id, id)): Path<(String, String)>,
) -> Answered {
    version(&headers)?;
    push::delete(&state, &PushConfigRequest { task_id, id }).await?;
    Ok(Json(json!({})).into_response())
}

/// A route that exists, asked with a method it does not take: 405, with the methods it
/// takes in `Allow`.
fn not_allowed(method: &Method, path: &str, allowed: &'static str) -> RestError {
    let error = RpcError::new(METHOD_NOT_FOUND, format!("`{path}` does not take {method}; it takes {allowed}"));
    RestError { error, status: Some(StatusCode::METHOD_NOT_ALLOWED), allow: Some(allowed) }
}

/// `GET /extendedAgentCard`.
async fn extended_card(State(state): State<AppState>, headers: HeaderMap) -> Answered {
    version(&headers)?;
    Ok(Json(super::card::extended_card(&state, &headers)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_get_the_http_status_a2a_maps_them_to() {
        assert_eq!(statuses(rpc::TASK_NOT_FOUND).0, StatusCode::NOT_FOUND);
        assert_eq!(statuses(rpc::INVALID_PARAMS), (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"));
        assert_eq!(statuses(rpc::TASK_NOT_CANCELABLE), (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION"));
        assert_eq!(statuses(rpc::INTERNAL_ERROR).0, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(camel("page_size"), "pageSize");
        assert_eq!(camel("pageSize"), "pageSize");
    }
}
