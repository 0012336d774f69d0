//! Reading OpenAI-style error bodies into typed [`Error`]s.
//!
//! OpenAI writes `{"error": {"message", "type", "param", "code"}}`; compatible servers
//! vary it (`code` as a number, `{"error": "text"}`, vLLM's top-level
//! `{"object": "error", "message", ...}`, FastAPI's `{"detail": ...}`), so the body is
//! read leniently. This is the cold path: a `serde_json::Value` is fine here.

use crate::error::{Error, RetryHint};
use serde_json::Value;

/// What an error body says.
#[derive(Debug, Default)]
pub(super) struct ErrorInfo {
    pub message: String,
    pub kind: Option<String>,
    pub code: Option<String>,
}

impl ErrorInfo {
    /// Reads an error body; an unreadable one keeps its text as the message.
    pub fn from_body(body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_value(&value),
            Err(_) => {
                // Proxies answer with HTML or plain text; keep a bounded piece of it.
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                let cut = text.char_indices().nth(500).map_or(text.len(), |(i, _)| i);
                ErrorInfo { message: text[..cut].to_owned(), ..Default::default() }
            }
        }
    }

    /// Reads the error of a parsed body or stream chunk.
    pub fn from_value(value: &Value) -> Self {
        let object = match value.get("error") {
            Some(Value::String(message)) => return ErrorInfo { message: message.clone(), ..Default::default() },
            Some(error @ Value::Object(_)) => error,
            _ => value,
        };
        let text = |key: &str| match object.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let message = text("message").or_else(|| text("detail")).unwrap_or_else(|| {
            // FastAPI validation errors put a list under `detail`; show it as JSON.
            object.get("detail").map(Value::to_string).unwrap_or_default()
        });
        ErrorInfo { message, kind: text("type"), code: text("code") }
    }

    fn is(&self, needle: &str) -> bool {
        self.kind.as_deref() == Some(needle) || self.code.as_deref() == Some(needle)
    }

    fn mentions(&self, needle: &str) -> bool {
        [self.kind.as_deref(), self.code.as_deref()].into_iter().flatten().any(|s| s.contains(needle))
    }

    /// OpenAI's `context_length_exceeded`, or the wording of compatible servers (vLLM:
    /// "maximum context length", llama.cpp: "exceeds the available context size").
    pub fn is_context_exceeded(&self) -> bool {
        if self.is("context_length_exceeded") || self.mentions("exceed_context") {
            return true;
        }
        let message = self.message.to_ascii_lowercase();
        ["context length", "context_length", "context window", "context size", "maximum context"]
            .iter()
            .any(|phrase| message.contains(phrase))
    }

    /// OpenAI's `server_is_overloaded` / `service_unavailable_error`, its older "That model
    /// is currently overloaded" wording, and Anthropic-style `overloaded_error` from proxies.
    pub fn is_overloaded(&self) -> bool {
        self.mentions("overloaded")
            || self.is("service_unavailable_error")
            || self.is("slow_down")
            || self.message.to_ascii_lowercase().contains("overloaded")
    }

    /// An exhausted quota or billing limit: a 429 that waiting does not fix.
    pub fn is_quota(&self) -> bool {
        self.is("insufficient_quota") || self.is("billing_hard_limit_reached")
    }

    fn message_or(&self, fallback: impl FnOnce() -> String) -> String {
        if self.message.is_empty() { fallback() } else { self.message.clone() }
    }
}

/// The typed error of an HTTP error response.
pub(super) fn from_status(provider: &str, status: u16, mut hint: RetryHint, info: &ErrorInfo) -> Error {
    let provider = provider.to_owned();
    let message = info.message_or(|| format!("HTTP {status}"));
    if info.is_context_exceeded() && (status == 400 || status == 413 || status == 422) {
        return Error::ContextWindowExceeded { provider, message };
    }
    match status {
        429 => {
            if info.is_quota() {
                hint.should_retry = Some(false);
            }
            Error::RateLimited { provider, message, hint }
        }
        503 | 529 => Error::Overloaded { provider, message, hint },
        401 | 403 => Error::Authentication { provider, status, message },
        408 | 409 => Error::Server { provider, status, message, hint },
        500..=599 if info.is_overloaded() => Error::Overloaded { provider, message, hint },
        400..=499 => Error::InvalidRequest { provider, status, message },
        _ => Error::Server { provider, status, message, hint },
    }
}

/// The typed error of an error chunk inside a 200 stream (HTTP status 0 in the error).
pub(super) fn from_stream(provider: &str, info: &ErrorInfo) -> Error {
    let provider = provider.to_owned();
    let message = info.message_or(|| "error event in the stream".to_owned());
    // Compatible servers put an HTTP status in `code`; read it as one.
    let status = info.code.as_deref().and_then(|c| c.parse::<u16>().ok());
    let hint = RetryHint::default();
    if info.is_context_exceeded() {
        return Error::ContextWindowExceeded { provider, message };
    }
    if info.is_overloaded() || matches!(status, Some(503 | 529)) {
        return Error::Overloaded { provider, message, hint };
    }
    if info.is_quota() {
        return Error::RateLimited { provider, message, hint: RetryHint { should_retry: Some(false), ..hint } };
    }
    if info.mentions("rate_limit") || status == Some(429) {
        return Error::RateLimited { provider, message, hint };
    }
    match status {
        Some(status @ (401 | 403)) => Error::Authentication { provider, status, message },
        Some(status @ (400..=499)) if status != 408 && status != 409 => {
            Error::InvalidRequest { provider, status, message }
        }
        _ => Error::Server { provider, status: 0, message, hint },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(body: &str) -> ErrorInfo {
        ErrorInfo::from_body(body.as_bytes())
    }

    #[test]
    fn reads_the_shapes_compatible_servers_send() {
        let openai = info(r#"{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"x"}}"#);
        assert_eq!(
            (openai.message.as_str(), openai.kind.as_deref(), openai.code.as_deref()),
            ("bad", Some("invalid_request_error"), Some("x"))
        );
        let numeric =
            info(r#"{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}"#);
        assert_eq!((numeric.message.as_str(), numeric.code.as_deref()), ("too long", Some("400")));
        assert_eq!(info(r#"{"error":"model 'x' not found"}"#).message, "model 'x' not found");
        assert_eq!(info(r#"{"detail":"Not Found"}"#).message, "Not Found");
        assert_eq!(info("<html>502 Bad Gateway</html>").message, "<html>502 Bad Gateway</html>");
    }

    #[test]
    fn stream_errors_with_a_numeric_code_map_like_statuses() {
        let e = from_stream("p", &info(r#"{"error":{"message":"slow down","code":429}}"#));
        assert!(matches!(e, Error::RateLimited { .. }), "{e:?}");
        let e = from_stream("p", &info(r#"{"error":{"message":"bad input","code":400}}"#));
        assert!(matches!(e, Error::InvalidRequest { status: 400, .. }), "{e:?}");
        let e = from_stream("p", &info(r#"{"error":{"message":"boom","type":"server_error","code":null}}"#));
        assert!(matches!(e, Error::Server { status: 0, .. }), "{e:?}");
    }
}
