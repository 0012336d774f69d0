//! Errors in OpenAI's shape, which the SDKs raise as their typed errors.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An error as the OpenAI API gives one: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug)]
pub(super) struct OpenAiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: &'static str,
}

impl OpenAiError {
    /// A request the client must change (400).
    pub(super) fn invalid(message: impl Into<String>, param: Option<&'static str>) -> Self {
        OpenAiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: "invalid_request",
        }
    }

    /// No agent or team has the name given as `model` (404).
    pub(super) fn unknown_model(model: &str) -> Self {
        OpenAiError {
            status: StatusCode::NOT_FOUND,
            message: format!("the model `{model}` does not exist: it names no agent or team of this server"),
            kind: "invalid_request_error",
            param: Some("model"),
            code: "model_not_found",
        }
    }

    /// The run could not start, or did not end well (`code` says how).
    pub(super) fn run(status: StatusCode, message: impl Into<String>, code: &'static str) -> Self {
        OpenAiError { status, message: message.into(), kind: "server_error", param: None, code }
    }

    /// The error object, as a response body or a stream's last chunk carries it.
    pub(super) fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<crate::error::ApiError> for OpenAiError {
    fn from(error: crate::error::ApiError) -> Self {
        let kind = if error.status.is_client_error() { "invalid_request_error" } else { "server_error" };
        OpenAiError { status: error.status, message: error.message, kind, param: None, code: error.code }
    }
}
