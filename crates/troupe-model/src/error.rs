//! The typed errors of model calls.

use std::time::Duration;

/// What the server said about retrying, read from its response headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryHint {
    /// The delay the server asked for (`retry-after-ms`, then `retry-after`).
    pub after: Option<Duration>,
    /// The server's explicit verdict (`x-should-retry`), overriding the status.
    pub should_retry: Option<bool>,
}

/// What can go wrong when calling a model. Each variant names the provider (`anthropic`,
/// `openai`, `gemini`, a preset name) and carries what a caller needs to act on it.
/// No variant ever holds an API key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider limits the rate of requests (HTTP 429).
    #[error("{provider}: rate limited{}: {message}", fmt_delay(&.hint.after))]
    RateLimited {
        /// The provider.
        provider: String,
        /// The server's message.
        message: String,
        /// What the server said about retrying.
        hint: RetryHint,
    },
    /// The provider is overloaded (HTTP 529 or 503, or an `overloaded_error` event).
    #[error("{provider}: overloaded: {message}")]
    Overloaded {
        /// The provider.
        provider: String,
        /// The server's message.
        message: String,
        /// What the server said about retrying.
        hint: RetryHint,
    },
    /// The provider failed (HTTP 5xx, 408, 409, or an error event mid-stream).
    #[error("{provider}: server error (HTTP {status}): {message}")]
    Server {
        /// The provider.
        provider: String,
        /// The HTTP status (0 for an error event inside a 200 stream).
        status: u16,
        /// The server's message.
        message: String,
        /// What the server said about retrying.
        hint: RetryHint,
    },
    /// The API key was refused (HTTP 401 or 403).
    #[error("{provider}: authentication failed (HTTP {status}): {message}; check the API key")]
    Authentication {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The provider rejected the request as malformed (HTTP 400, 404, 413, 422).
    #[error("{provider}: invalid request (HTTP {status}): {message}")]
    InvalidRequest {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The conversation does not fit the model's context window.
    #[error("{provider}: context window exceeded: {message}")]
    ContextWindowExceeded {
        /// The provider.
        provider: String,
        /// The server's message.
        message: String,
    },
    /// The provider took too long.
    #[error("{provider}: timed out {phase} after {}ms", .after.as_millis())]
    Timeout {
        /// The provider.
        provider: String,
        /// What was being waited for (`connecting`, `waiting for the next event`).
        phase: &'static str,
        /// How long was waited.
        after: Duration,
    },
    /// The connection failed or broke.
    #[error("{provider}: transport error: {message}")]
    Transport {
        /// The provider.
        provider: String,
        /// What failed.
        message: String,
    },
    /// The response stream ended before its end marker: the connection broke off mid-answer.
    /// Retryable: the same request may be answered whole.
    #[error("{provider}: the response broke off: {message}")]
    Truncated {
        /// The provider.
        provider: String,
        /// Where it ended.
        message: String,
    },
    /// The response could not be understood (malformed JSON, a missing field, an
    /// impossible event order).
    #[error("{provider}: could not decode the response: {message}")]
    Decode {
        /// The provider.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// No API key is configured for the provider.
    #[error("{variable} is not set; export it or pass --model demo")]
    MissingApiKey {
        /// The provider.
        provider: String,
        /// The environment variable to set.
        variable: String,
    },
    /// The model id names no known provider or model.
    #[error("unknown model `{id}`: {reason}")]
    UnknownModel {
        /// The id as given.
        id: String,
        /// Why it could not be resolved, and what would be valid.
        reason: String,
    },
    /// The request carries an input this vendor does not take (a PDF by URL where only its
    /// bytes are accepted, say); nothing was sent.
    #[error("{provider} does not take {what}: {reason}")]
    UnsupportedInput {
        /// The provider.
        provider: String,
        /// The input.
        what: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The typed answer asked for has a schema this vendor cannot take; nothing was sent.
    #[error("{provider} cannot take the output schema `{name}`: {reason}")]
    UnsupportedOutputSchema {
        /// The provider.
        provider: String,
        /// The schema's name (the Rust type's, or the file's).
        name: String,
        /// What the vendor cannot take, where, and what to do instead.
        reason: String,
    },
    /// The configuration is inconsistent (two tools encoding to one wire name, a bad base
    /// URL, an invalid `troupe.toml`).
    #[error("configuration error: {0}")]
    Config(String),
    /// The call was cancelled by its [`CancellationToken`](tokio_util::sync::CancellationToken).
    #[error("the model call was cancelled")]
    Cancelled,
}

fn fmt_delay(delay: &Option<Duration>) -> String {
    match delay {
        Some(d) => format!(" (retry after {}ms)", d.as_millis()),
        None => String::new(),
    }
}

impl Error {
    /// Whether trying the same request again may succeed.
    ///
    /// An explicit `x-should-retry` from the server wins; otherwise rate limits, overloads,
    /// server errors, timeouts and transport failures are retryable.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::RateLimited { hint, .. } | Error::Overloaded { hint, .. } | Error::Server { hint, .. } => {
                hint.should_retry.unwrap_or(true)
            }
            Error::Timeout { .. } | Error::Transport { .. } | Error::Truncated { .. } => true,
            _ => false,
        }
    }

    /// Whether this failure should move the request to the next model of a fallback chain.
    pub fn is_overloaded(&self) -> bool {
        matches!(self, Error::Overloaded { .. })
    }

    /// The delay the server asked for before a retry, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { hint, .. } | Error::Overloaded { hint, .. } | Error::Server { hint, .. } => hint.after,
            _ => None,
        }
    }

    /// A short machine-readable name of the variant, for events and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Error::RateLimited { .. } => "rate_limited",
            Error::Overloaded { .. } => "overloaded",
            Error::Server { .. } => "server_error",
            Error::Authentication { .. } => "authentication",
            Error::InvalidRequest { .. } => "invalid_request",
            Error::ContextWindowExceeded { .. } => "context_window_exceeded",
            Error::Timeout { .. } => "timeout",
            Error::Transport { .. } => "transport",
            Error::Truncated { .. } => "truncated",
            Error::Decode { .. } => "decode",
            Error::MissingApiKey { .. } => "missing_api_key",
            Error::UnknownModel { .. } => "unknown_model",
            Error::UnsupportedOutputSchema { .. } => "unsupported_output_schema",
            Error::UnsupportedInput { .. } => "unsupported_input",
            Error::Config(_) => "config",
            Error::Cancelled => "cancelled",
        }
    }

    /// A truncated stream of `provider`.
    pub fn truncated(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Truncated { provider: provider.into(), message: message.into() }
    }

    /// A decode error of `provider`.
    pub fn decode(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Decode { provider: provider.into(), message: message.into() }
    }
}

/// The result type of `troupe-model`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_retry_header_overrides_the_status() {
        let no = Error::Server {
            provider: "p".into(),
            status: 500,
            message: "m".into(),
            hint: RetryHint { after: None, should_retry: Some(false) },
        };
        assert!(!no.is_retryable());
        let yes = Error::RateLimited { provider: "p".into(), message: "m".into(), hint: RetryHint::default() };
        assert!(yes.is_retryable());
        let auth = Error::Authentication { provider: "p".into(), status: 401, message: "m".into() };
        assert!(!auth.is_retryable());
    }

    #[test]
    fn missing_key_message_names_the_variable() {
        let e = Error::MissingApiKey { provider: "openai".into(), variable: "OPENAI_API_KEY".into() };
        assert_eq!(e.to_string(), "OPENAI_API_KEY is not set; export it or pass --model demo");
    }
}
