//! Errors: the server's own ([`ServerError`]) and the JSON error every endpoint answers
//! a bad request with ([`ApiError`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::fmt;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// No token is configured and the address is not a loopback one: anybody who can
    /// reach the port could run agents.
    #[error(
        "refusing to serve {addr} without a token: set TROUPE_SERVER_TOKEN (or [server] tokens in troupe.toml), \
         or bind a loopback address such as 127.0.0.1"
    )]
    UnprotectedAddress {
        /// The address asked for.
        addr: std::net::SocketAddr,
    },
    /// A configured CORS origin is not a valid header value.
    #[error("the CORS origin `{origin}` is not a valid origin")]
    BadCorsOrigin {
        /// The origin as configured.
        origin: String,
    },
    /// A configured token is empty or not printable.
    #[error("a configured server token is empty or holds whitespace or control characters")]
    BadToken,
    /// The socket failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A request the server refuses, answered as `{"error": {"code", "message"}}` with a 4xx
/// (or 5xx) status. The request had no effect on any run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`unauthorized`, `unknown_run`, …).
    pub code: &'static str,
    /// What went wrong and what to do, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 401: no valid bearer token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404: no such agent or team.
    pub fn unknown_agent(name: &str) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_agent", format!("no agent or team is named `{name}`"))
    }

    /// 404: no such run.
    pub fn unknown_run(id: &str) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_run", format!("no run `{id}` is known to this server"))
    }

    /// 409: the request does not fit the run's state.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, code, message)
    }

    /// 408: the body stopped arriving.
    pub fn body_timeout() -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "the request body stopped arriving before it was complete",
        )
    }

    /// The error of a body that could not be read: too large (413), stalled (408), or
    /// broken off (400).
    pub fn unreadable_body(rejection: &axum::extract::rejection::BytesRejection, limit: usize) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::too_large(limit);
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
        while let Some(error) = source {
            if error.is::<tower_http::timeout::TimeoutError>() {
                return ApiError::body_timeout();
            }
            source = error.source();
        }
        ApiError::bad_request("unreadable_body", rejection.body_text())
    }

    /// 413: the body is larger than the limit.
    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 422 for a body that is JSON but not the expected shape, 400 for one that is not JSON.
    pub fn from_json(error: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        match error.classify() {
            Category::Data => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", format!("invalid request: {error}"))
            }
            _ => ApiError::bad_request("malformed_json", format!("the body is not valid JSON: {error}")),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.status.as_u16(), self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// The JSON body of this error.
    pub fn body(&self) -> serde_json::Value {
        serde_json::to_value(ErrorBody { error: ErrorDetail { code: self.code, message: &self.message } })
            .unwrap_or(serde_json::Value::Null)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
