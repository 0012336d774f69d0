//! Anthropic's error bodies and error events as typed [`Error`]s.

use super::parser::ErrorWire;
use crate::error::{Error, RetryHint};
use serde::Deserialize;

/// `{"type": "error", "error": {"type", "message"}, "request_id"}`.
#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(borrow)]
    error: Option<ErrorWire<'a>>,
    request_id: Option<std::borrow::Cow<'a, str>>,
}

/// The most of a non-JSON error body (a proxy's HTML page) kept in the message.
const MAX_RAW_MESSAGE: usize = 512;

/// Maps a non-success HTTP response of the Messages API to a typed error.
pub(super) fn map_error(provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody<'_>>(body) {
        Ok(ErrorBody { error: Some(error), request_id }) => {
            let mut message = error.message().to_owned();
            if message.is_empty() {
                message = format!("HTTP {status}");
            }
            if let Some(id) = request_id {
                // Anthropic's support asks for this id; it identifies the request, not the key.
                message.push_str(&format!(" (request id {id})"));
            }
            classify(provider, status, error.kind(), message, hint)
        }
        _ => classify(provider, status, "", raw_message(status, body), hint),
    }
}

fn raw_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    match text.char_indices().nth(MAX_RAW_MESSAGE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Whether `message` says the prompt does not fit the context window. Anthropic answers
/// 400 `invalid_request_error` with "prompt is too long: N tokens > M maximum" or "input
/// length and `max_tokens` exceed context limit: ...".
fn is_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["prompt is too long", "exceed context limit", "context window", "context length"]
        .iter()
        .any(|needle| message.contains(needle))
}

/// The typed error of an HTTP status (0 for an error event inside a 200 stream) and
/// Anthropic's error `kind` (`rate_limit_error`, `overloaded_error`, ...; empty if unknown).
pub(super) fn classify(provider: &str, status: u16, kind: &str, message: String, hint: RetryHint) -> Error {
    let provider = provider.to_owned();
    if status == 429 || kind == "rate_limit_error" {
        return Error::RateLimited { provider, message, hint };
    }
    if matches!(status, 503 | 529) || kind == "overloaded_error" {
        return Error::Overloaded { provider, message, hint };
    }
    if matches!(status, 401 | 403) || matches!(kind, "authentication_error" | "permission_error") {
        return Error::Authentication { provider, status, message };
    }
    if matches!(status, 0 | 400 | 413) && is_context_overflow(&message) {
        return Error::ContextWindowExceeded { provider, message };
    }
    match status {
        408 | 409 | 500..=599 => Error::Server { provider, status, message, hint },
        400..=499 => Error::InvalidRequest { provider, status, message },
        // An error event mid-stream: its kind is all there is to go on.
        0 => match kind {
            "invalid_request_error" | "not_found_error" | "request_too_large" | "billing_error" => {
                Error::InvalidRequest { provider, status, message }
            }
            _ => Error::Server { provider, status, message, hint },
        },
        // A success or redirect status reaching here is a broken server or proxy.
        _ => Error::Server { provider, status, message, hint },
    }
}
