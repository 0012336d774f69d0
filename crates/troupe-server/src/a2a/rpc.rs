//! JSON-RPC 2.0 as A2A uses it: the request envelope, the methods of both protocol
//! versions, and the errors with their codes.

use serde_json::{Value, json};
use std::fmt;

pub use troupe_a2a::codes::{
    CONTENT_TYPE_NOT_SUPPORTED, EXTENDED_AGENT_CARD_NOT_CONFIGURED, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, PARSE_ERROR, PUSH_NOTIFICATION_NOT_SUPPORTED, TASK_NOT_CANCELABLE, TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION, VERSION_NOT_SUPPORTED,
};

/// Which version's shapes a request is answered in: chosen by its method name (the two
/// versions' names do not overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// A2A 1.0 (`SendMessage`, …): `{"task": …}` results, `TASK_STATE_…` names.
    V1,
    /// A2A 0.3 (`message/send`, …): `kind`-tagged results, `input-required` names.
    V03,
}

/// An A2A method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Send a message, answered with the task when it ends or needs input.
    SendMessage,
    /// Send a message, answered with a stream of the task's updates.
    SendStreamingMessage,
    /// Read a task.
    GetTask,
    /// List tasks (1.0 only).
    ListTasks,
    /// Cancel a task.
    CancelTask,
    /// Follow a task's updates.
    SubscribeToTask,
    /// Add a webhook the task's updates are pushed to.
    CreatePushConfig,
    /// Read one of a task's webhooks.
    GetPushConfig,
    /// List a task's webhooks.
    ListPushConfigs,
    /// Remove one of a task's webhooks.
    DeletePushConfig,
    /// The authenticated extended card: not configured.
    ExtendedAgentCard,
}

impl Method {
    /// The method called `name`, and the version whose name it is.
    pub fn parse(name: &str) -> Option<(Method, Dialect)> {
        let found = match name {
            "SendMessage" => (Method::SendMessage, Dialect::V1),
            "SendStreamingMessage" => (Method::SendStreamingMessage, Dialect::V1),
            "GetTask" => (Method::GetTask, Dialect::V1),
            "ListTasks" => (Method::ListTasks, Dialect::V1),
            "CancelTask" => (Method::CancelTask, Dialect::V1),
            "SubscribeToTask" => (Method::SubscribeToTask, Dialect::V1),
            "CreateTaskPushNotificationConfig" => (Method::CreatePushConfig, Dialect::V1),
            "GetTaskPushNotificationConfig" => (Method::GetPushConfig, Dialect::V1),
            "ListTaskPushNotificationConfigs" => (Method::ListPushConfigs, Dialect::V1),
            "DeleteTaskPushNotificationConfig" => (Method::DeletePushConfig, Dialect::V1),
            "GetExtendedAgentCard" => (Method::ExtendedAgentCard, Dialect::V1),
            "message/send" => (Method::SendMessage, Dialect::V03),
            "message/stream" => (Method::SendStreamingMessage, Dialect::V03),
            "tasks/get" => (Method::GetTask, Dialect::V03),
            "tasks/cancel" => (Method::CancelTask, Dialect::V03),
            "tasks/resubscribe" => (Method::SubscribeToTask, Dialect::V03),
            "tasks/pushNotificationConfig/set" => (Method::CreatePushConfig, Dialect::V03),
            "tasks/pushNotificationConfig/get" => (Method::GetPushConfig, Dialect::V03),
            "tasks/pushNotificationConfig/list" => (Method::ListPushConfigs, Dialect::V03),
            "tasks/pushNotificationConfig/delete" => (Method::DeletePushConfig, Dialect::V03),
            "agent/getAuthenticatedExtendedCard" => (Method::ExtendedAgentCard, Dialect::V03),
            _ => return None,
        };
        Some(found)
    }

    /// Whether it answers with a stream.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

/// A JSON-RPC error: a code, a message, and for 1.0 the `google.rpc.ErrorInfo` detail
/// the reference SDK reads the reason from.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
    /// Structured detail.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    /// -32700.
    pub fn parse(message: impl Into<String>) -> Self {
        RpcError::new(PARSE_ERROR, message)
    }

    /// -32600.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_REQUEST, message)
    }

    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    /// -32001 for `id`.
    pub fn task_not_found(id: &str) -> Self {
        RpcError::new(TASK_NOT_FOUND, format!("no task `{id}` is known to this server"))
    }

    /// The A2A reason name of the code (`TASK_NOT_FOUND`, …).
    pub fn reason(&self) -> &'static str {
        match self.code {
            PARSE_ERROR => "PARSE_ERROR",
            INVALID_REQUEST => "INVALID_REQUEST",
            METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
            INVALID_PARAMS => "INVALID_PARAMS",
            TASK_NOT_FOUND => "TASK_NOT_FOUND",
            TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
            PUSH_NOTIFICATION_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
            CONTENT_TYPE_NOT_SUPPORTED => "CONTENT_TYPE_NOT_SUPPORTED",
            EXTENDED_AGENT_CARD_NOT_CONFIGURED => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
            _ => "INTERNAL_ERROR",
        }
    }

    /// The error object, in `dialect`'s form.
    pub fn to_value(&self, dialect: Dialect) -> Value {
        let data = match (dialect, &self.data) {
            (Dialect::V1, metadata) => Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason(),
                "domain": "a2a-protocol.org",
                "metadata": metadata.clone().unwrap_or_else(|| json!({})),
            }])),
            (Dialect::V03, data) => data.clone(),
        };
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = data {
            error["data"] = data;
        }
        error
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// A request's `id`: a string, a number or null.
pub type RequestId = Value;

/// A checked request: its id, method, version and params.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The id to answer with.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// Whose shapes.
    pub dialect: Dialect,
    /// The params (an empty object when absent).
    pub params: Value,
}

/// Reads `body` as one JSON-RPC 2.0 request. On failure, the error and the id to answer
/// it with (null when the id could not be read).
pub fn read_call(body: &[u8]) -> Result<Call, (RequestId, RpcError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (Value::Null, RpcError::parse(format!("the body is not valid JSON: {e}"))))?;
    let Value::Object(mut request) = value else {
        let why = if value.is_array() { "batch requests are not supported" } else { "a request is a JSON object" };
        return Err((Value::Null, RpcError::invalid_request(why)));
    };
    let id = match request.remove("id") {
        None | Some(Value::Null) => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => return Err((Value::Null, RpcError::invalid_request("`id` must be a string, a number or null"))),
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::invalid_request("`jsonrpc` must be exactly \"2.0\"")));
    }
    let Some(name) = request.get("method").and_then(Value::as_str) else {
        return Err((id, RpcError::invalid_request("`method` must be a string")));
    };
    let Some((method, dialect)) = Method::parse(name) else {
        return Err((id, RpcError::new(METHOD_NOT_FOUND, format!("no method `{name}`"))));
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params,
        Some(_) => return Err((id, RpcError::invalid_params("`params` must be an object"))),
    };
    Ok(Call { id, method, dialect, params })
}

/// A success response.
pub fn success(id: &RequestId, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn failure(id: &RequestId, error: &RpcError, dialect: Dialect) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value(dialect)})
}

/// Checks the `A2A-Version` header against the method's version: absent is accepted
/// for both (a plain JSON-RPC client need not send it); any other version, or one that
/// contradicts the method name, is -32009.
pub fn check_version(header: Option<&str>, dialect: Dialect) -> Result<(), RpcError> {
    let Some(version) = header.map(str::trim).filter(|v| !v.is_empty()) else { return Ok(()) };
    let mut numbers = version.split('.');
    let major = numbers.next().unwrap_or_default();
    let minor = numbers.next().unwrap_or("0");
    let spoken = match (major, minor) {
        ("1", "0") => Dialect::V1,
        ("0", "3") => Dialect::V03,
        _ => {
            return Err(RpcError::new(
                VERSION_NOT_SUPPORTED,
                format!("A2A version `{version}` is not supported; this server speaks 1.0 and 0.3"),
            ));
        }
    };
    if spoken != dialect {
        return Err(RpcError::new(
            VERSION_NOT_SUPPORTED,
            format!("the method is not part of A2A {version}; use the method names of that version"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> (Value, i64) {
        let (id, error) = read_call(body.as_bytes()).expect_err("refused");
        (id, error.code)
    }

    #[test]
    fn malformed_requests_get_their_codes() {
        assert_eq!(code("{"), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#), (json!(1), INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#).1, INVALID_REQUEST);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":"a","method":"Nope"}"#), (json!("a"), METHOD_NOT_FOUND));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":[1]}"#).1, INVALID_PARAMS);
        let call = read_call(br#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"x"}}"#).expect("ok");
        assert_eq!((call.method, call.dialect), (Method::GetTask, Dialect::V03));
    }

    #[test]
    fn the_version_header_must_agree_with_the_method() {
        assert!(check_version(None, Dialect::V1).is_ok());
        assert!(check_version(Some("1.0"), Dialect::V1).is_ok());
        assert!(check_version(Some("0.3.0"), Dialect::V03).is_ok());
        assert_eq!(check_version(Some("0.3"), Dialect::V1).map_err(|e| e.code), Err(VERSION_NOT_SUPPORTED));
        assert_eq!(check_version(Some("2.1"), Dialect::V1).map_err(|e| e.code), Err(VERSION_NOT_SUPPORTED));
    }

    #[test]
    fn a_1_0_error_carries_the_reason_a_0_3_error_does_not() {
        let error = RpcError::task_not_found("t");
        let v1 = error.to_value(Dialect::V1);
        assert_eq!(v1["code"], TASK_NOT_FOUND);
        assert_eq!(v1["data"][0]["reason"], "TASK_NOT_FOUND");
        assert!(error.to_value(Dialect::V03).get("data").is_none());
    }
}
