//! OpenAI's error objects, over HTTP and inside a stream, mapped to typed [`Error`]s.

use crate::error::{Error, RetryHint};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// `{"code", "message", "type", "param"}`: the error object of an HTTP error body, of a
/// failed response and (nested, on some servers) of an `error` event.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireError<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_text")]
    pub(super) code: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_text")]
    pub(super) message: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "type", deserialize_with = "lenient_text")]
    pub(super) kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(default, borrow)]
    error: Option<WireError<'a>>,
}

/// The typed error of a non-success HTTP response.
pub(super) fn http_error(provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
    let parsed = serde_json::from_slice::<ErrorBody<'_>>(body).ok().and_then(|b| b.error).unwrap_or_default();
    let message = match parsed.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => raw_message(status, body),
    };
    classify(provider, status, parsed.code.as_deref(), parsed.kind.as_deref(), message, hint)
}

/// The typed error of an error reported inside a 200 stream (`status` 0).
pub(super) fn stream_error(provider: &str, error: &WireError<'_>) -> Error {
    let message = error.message.as_deref().filter(|m| !m.trim().is_empty()).unwrap_or("the response failed");
    classify(provider, 0, error.code.as_deref(), error.kind.as_deref(), message.to_owned(), RetryHint::default())
}

/// A body that is not OpenAI's error JSON (a proxy's HTML page, plain text), cut short.
fn raw_message(status: u16, body: &[u8]) -> String {
    const LIMIT: usize = 500;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status} without a body");
    }
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn mentions_context_window(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["context_length_exceeded", "context length", "context window", "maximum context"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// `server_is_overloaded` and `slow_down` are what OpenAI sends when a model is at
/// capacity (HTTP 503 or in a failed response).
fn is_overload(code: Option<&str>, kind: Option<&str>) -> bool {
    [code, kind].into_iter().flatten().any(|c| {
        matches!(c, "server_is_overloaded" | "slow_down" | "service_unavailable_error") || c.contains("overloaded")
    })
}

/// Codes of a failed response that no retry can fix (see the SDK's `ResponseError`).
fn is_request_fault(code: &str) -> bool {
    code.starts_with("invalid_")
        || code.contains("image")
        || matches!(code, "bio_policy" | "data_residency_mismatch" | "context_length_exceeded")
}

fn classify(
    provider: &str,
    status: u16,
    code: Option<&str>,
    kind: Option<&str>,
    message: String,
    mut hint: RetryHint,
) -> Error {
    let provider = provider.to_owned();
    let client_side = status == 0 || (400..500).contains(&status);
    if client_side && (code == Some("context_length_exceeded") || mentions_context_window(&message)) {
        return Error::ContextWindowExceeded { provider, message };
    }
    // An exhausted quota answers 429 too, but waiting does not refill it.
    if code == Some("insufficient_quota") && hint.should_retry.is_none() {
        hint.should_retry = Some(false);
    }
    let rate_limited = code == Some("rate_limit_exceeded") || code == Some("insufficient_quota");
    match status {
        429 => Error::RateLimited { provider, message, hint },
        401 | 403 => Error::Authentication { provider, status, message },
        503 | 529 => Error::Overloaded { provider, message, hint },
        500..=599 if is_overload(code, kind) => Error::Overloaded { provider, message, hint },
        408 | 409 | 500..=599 => Error::Server { provider, status, message, hint },
        400..=499 => Error::InvalidRequest { provider, status, message },
        0 if is_overload(code, kind) => Error::Overloaded { provider, message, hint },
        0 if rate_limited => Error::RateLimited { provider, message, hint },
        0 if code.is_some_and(is_request_fault) => Error::InvalidRequest { provider, status, message },
        _ => Error::Server { provider, status, message, hint },
    }
}

/// A string field that some OpenAI-compatible servers fill with a number (`"code": 400`)
/// or an object; anything but text or a number reads as absent.
fn lenient_text<'de: 'a, 'a, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct Lenient;

    impl<'de> Visitor<'de> for Lenient {
        type Value = Option<Cow<'de, str>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, a number or null")
        }

        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }

        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_any(self)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }

    deserializer.deserialize_any(Lenient)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> Error {
        http_error("openai", status, RetryHint::default(), body.as_bytes())
    }

    #[test]
    fn statuses_and_codes_map_to_variants() {
        let body = |code: &str| format!(r#"{{"error":{{"message":"m","type":"t","param":null,"code":{code}}}}}"#);
        assert!(matches!(http(429, &body("\"rate_limit_exceeded\"")), Error::RateLimited { .. }));
        assert!(matches!(http(401, &body("\"invalid_api_key\"")), Error::Authentication { status: 401, .. }));
        assert!(matches!(http(503, &body("null")), Error::Overloaded { .. }));
        assert!(matches!(http(500, &body("\"server_is_overloaded\"")), Error::Overloaded { .. }));
        assert!(matches!(http(502, &body("null")), Error::Server { status: 502, .. }));
        assert!(matches!(http(404, &body("400")), Error::InvalidRequest { status: 404, .. }), "numeric code");
        assert!(matches!(http(400, &body("\"context_length_exceeded\"")), Error::ContextWindowExceeded { .. }));
    }

    #[test]
    fn context_overflow_is_found_by_its_message_too() {
        let body = r#"{"error":{"message":"Your input exceeds the context window of this model.","code":null}}"#;
        assert!(matches!(http(400, body), Error::ContextWindowExceeded { .. }));
    }

    #[test]
    fn exhausted_quota_is_not_worth_retrying() {
        let err = http(429, r#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#);
        assert!(matches!(err, Error::RateLimited { .. }));
        assert!(!err.is_retryable());
    }

    #[test]
    fn a_body_that_is_not_json_is_kept_as_the_message_cut_short() {
        let html = format!("<html>{}</html>", "x".repeat(2000));
        let Error::Server { message, .. } = http(502, &html) else { panic!("a server error") };
        assert!(message.starts_with("<html>") && message.chars().count() <= 501, "{message}");
        let Error::Server { message, .. } = http(500, "") else { panic!("a server error") };
        assert_eq!(message, "HTTP 500 without a body");
    }

    #[test]
    fn stream_errors_are_classified_by_code() {
        let err = |code: &str| stream_error("openai", &WireError { code: Some(code.into()), ..Default::default() });
        assert!(matches!(err("server_is_overloaded"), Error::Overloaded { .. }));
        assert!(matches!(err("slow_down"), Error::Overloaded { .. }));
        assert!(matches!(err("rate_limit_exceeded"), Error::RateLimited { .. }));
        assert!(matches!(err("invalid_prompt"), Error::InvalidRequest { status: 0, .. }));
        assert!(matches!(err("server_error"), Error::Server { status: 0, .. }));
        assert!(matches!(err("context_length_exceeded"), Error::ContextWindowExceeded { .. }));
    }
}
