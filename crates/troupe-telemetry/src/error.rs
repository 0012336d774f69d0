//! [`TelemetryError`]: what can go wrong while exporting metrics or installing tracing.

/// An error of this crate. Messages name what failed and what to change; none carries a
/// header value or any other secret from the configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// A snapshot could not be serialized.
    #[error("could not serialize the telemetry snapshot: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The log filter does not parse.
    #[error("invalid log filter `{directives}`: {message}; use `tracing` directives such as `info,troupe=debug`")]
    InvalidFilter {
        /// The directives given.
        directives: String,
        /// What the parser said.
        message: String,
    },
    /// A global `tracing` subscriber is already installed (by an earlier `init` or another
    /// library); compose `otlp_layer` (feature `otlp`) into that subscriber instead.
    #[error("a global tracing subscriber is already installed: {0}")]
    SubscriberAlreadySet(String),
    /// The OTLP endpoint is not a valid `http(s)://` URL.
    #[error("invalid OTLP endpoint `{endpoint}`: {message}")]
    InvalidEndpoint {
        /// The endpoint, as configured.
        endpoint: String,
        /// Why it was refused.
        message: String,
    },
    /// The OTLP exporter (or its HTTP client) could not be built.
    #[error("could not build the OTLP exporter: {0}")]
    Exporter(String),
    /// Spans could not be flushed or the provider could not shut down in time.
    #[error("could not flush OpenTelemetry spans: {0}")]
    Flush(String),
}
