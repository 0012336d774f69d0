//! Gemini's error objects (`{"error": {code, message, status, details}}`) → typed errors.

use crate::error::{Error, RetryHint};
use serde::Deserialize;
use std::borrow::Cow;
use std::time::Duration;

/// `google.rpc.Status` as JSON.
#[derive(Deserialize, Debug, Default)]
pub(super) struct ApiError<'a> {
    pub(super) code: Option<u16>,
    #[serde(borrow)]
    pub(super) message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    details: Vec<Detail<'a>>,
}

/// One entry of `details`: `ErrorInfo` carries a `reason`, `RetryInfo` a `retryDelay`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Detail<'a> {
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow)]
    retry_delay: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    error: ApiError<'a>,
}

/// The error of a non-success response body. The streaming endpoint may wrap it in an array.
pub(super) fn map_error(provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
    // Looked at first: serde would also read a struct out of an array, field by position.
    let is_array = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let parsed = if is_array {
        serde_json::from_slice::<Vec<Envelope<'_>>>(body).ok().and_then(|v| v.into_iter().next()).map(|e| e.error)
    } else {
        serde_json::from_slice::<Envelope<'_>>(body).ok().map(|e| e.error)
    };
    match parsed {
        Some(error) => classify(provider, status, hint, &error),
        None => {
            // Not Gemini's JSON (a proxy's page, say): keep the start of the text.
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(500).collect();
            let message = if text.is_empty() { format!("HTTP {status}") } else { text };
            let error = ApiError { message: Some(Cow::Owned(message)), ..ApiError::default() };
            classify(provider, status, hint, &error)
        }
    }
}

/// The typed error for `error`, received with HTTP `status` (for an error inside a stream,
/// the code the object itself gives, or 0).
pub(super) fn classify(provider: &str, status: u16, mut hint: RetryHint, error: &ApiError<'_>) -> Error {
    let provider = provider.to_owned();
    let message = error.message.as_deref().unwrap_or("").to_owned();
    let message = if message.is_empty() { format!("HTTP {status}") } else { message };
    let code = error.status.as_deref().unwrap_or("");
    if hint.after.is_none() {
        // Gemini says how long to wait in the body (`RetryInfo`), seldom in a header.
        hint.after = error.details.iter().find_map(|d| d.retry_delay.as_deref().and_then(parse_delay));
    }
    // An invalid key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
    let bad_key = error.details.iter().any(|d| d.reason.as_deref() == Some("API_KEY_INVALID"));
    if bad_key || matches!(status, 401 | 403) || matches!(code, "UNAUTHENTICATED" | "PERMISSION_DENIED") {
        let status = match (status, code) {
            (0, "PERMISSION_DENIED") => 403,
            (0, _) => 401,
            (status, _) => status,
        };
        return Error::Authentication { provider, status, message };
    }
    if status == 429 || code == "RESOURCE_EXHAUSTED" {
        return Error::RateLimited { provider, message, hint };
    }
    if matches!(status, 503 | 529) || code == "UNAVAILABLE" {
        return Error::Overloaded { provider, message, hint };
    }
    let invalid = matches!(status, 400 | 413) || code == "INVALID_ARGUMENT";
    if invalid && is_context_overflow(&message) {
        return Error::ContextWindowExceeded { provider, message };
    }
    let server_code = matches!(code, "INTERNAL" | "DEADLINE_EXCEEDED" | "ABORTED" | "UNKNOWN" | "DATA_LOSS");
    if (400..500).contains(&status) && !matches!(status, 408 | 409) && !server_code {
        return Error::InvalidRequest { provider, status, message };
    }
    if status == 0 && matches!(code, "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND" | "OUT_OF_RANGE") {
        return Error::InvalidRequest { provider, status: 400, message };
    }
    Error::Server { provider, status, message, hint }
}

fn is_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "exceeds the maximum number of tokens",
        "input token count",
        "context window",
        "context length",
        "too many tokens",
        "prompt is too long",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// A protobuf `Duration` in JSON (`"32s"`, `"1.5s"`), within the 0–60 s the HTTP layer honours.
fn parse_delay(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && (0.0..=60.0).contains(&seconds)).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(code: u16, status: &str, message: &str) -> Vec<u8> {
        serde_json::json!({"error": {"code": code, "message": message, "status": status}}).to_string().into_bytes()
    }

    #[test]
    fn statuses_map_to_variants() {
        let hint = RetryHint::default();
        let e = map_error("gemini", 429, hint, &body(429, "RESOURCE_EXHAUSTED", "quota"));
        assert!(matches!(e, Error::RateLimited { ref message, .. } if message == "quota"), "{e:?}");
        let e = map_error("gemini", 503, hint, &body(503, "UNAVAILABLE", "The model is overloaded."));
        assert!(e.is_overloaded(), "{e:?}");
        let e = map_error("gemini", 403, hint, &body(403, "PERMISSION_DENIED", "denied"));
        assert!(matches!(e, Error::Authentication { status: 403, .. }), "{e:?}");
        let context = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).";
        let e = map_error("gemini", 400, hint, &body(400, "INVALID_ARGUMENT", context));
        assert!(matches!(e, Error::ContextWindowExceeded { .. }), "{e:?}");
        let e = map_error("gemini", 400, hint, &body(400, "INVALID_ARGUMENT", "* contents: must not be empty"));
        assert!(matches!(e, Error::InvalidRequest { status: 400, .. }), "{e:?}");
        let e = map_error("gemini", 500, hint, &body(500, "INTERNAL", "An internal error has occurred."));
        assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
        let e = map_error("gemini", 504, hint, &body(504, "DEADLINE_EXCEEDED", "Deadline expired"));
        assert!(matches!(e, Error::Server { status: 504, .. }), "{e:?}");
    }

    #[test]
    fn an_invalid_key_is_an_authentication_error_despite_its_400() {
        let body = br#"{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}"#;
        let e = map_error("gemini", 400, RetryHint::default(), body);
        assert!(matches!(e, Error::Authentication { status: 400, .. }), "{e:?}");
    }

    #[test]
    fn retry_info_in_the_body_gives_the_delay_and_arrays_are_unwrapped() {
        let body = br#"[{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}]"#;
        let e = map_error("gemini", 429, RetryHint::default(), body);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)), "{e:?}");
        let header = RetryHint { after: Some(Duration::from_secs(2)), should_retry: None };
        assert_eq!(map_error("gemini", 429, header, body).retry_after(), Some(Duration::from_secs(2)), "header wins");
        assert_eq!(parse_delay("600s"), None, "outside 0–60 s");
    }

    #[test]
    fn bodies_that_are_not_json_keep_their_text() {
        let e = map_error("gemini", 502, RetryHint::default(), b"<html>Bad Gateway</html>");
        assert!(
            matches!(e, Error::Server { status: 502, ref message, .. } if message.contains("Bad Gateway")),
            "{e:?}"
        );
        let e = map_error("gemini", 404, RetryHint::default(), b"");
        assert!(matches!(e, Error::InvalidRequest { status: 404, ref message, .. } if message == "HTTP 404"), "{e:?}");
    }
}
