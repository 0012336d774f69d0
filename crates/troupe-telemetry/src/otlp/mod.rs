//! OTLP export of `tracing` spans over HTTP/protobuf (feature `otlp`).
//!
//! Spans go through `tracing-opentelemetry` to the OpenTelemetry SDK, whose batch
//! processor sends them to a collector's `/v1/traces` with the workspace's `reqwest` (see
//! the `client` module). No gRPC stack is involved.

mod client;

use crate::error::TelemetryError;
use crate::subscriber::TelemetryGuard;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// The collector's base URL when neither the configuration nor the environment names one.
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318";

/// The path of the OTLP/HTTP traces service under a collector's base URL.
pub const TRACES_PATH: &str = "/v1/traces";

/// The service name spans carry when neither the configuration nor `OTEL_SERVICE_NAME`
/// gives one.
pub const DEFAULT_SERVICE_NAME: &str = "troupe";

/// The name of the tracer (the instrumentation scope) troupe's spans are recorded under.
pub const TRACER_NAME: &str = "troupe";

/// The layer [`otlp_layer`] returns, for a subscriber `S`.
pub type OtlpLayer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>;

/// Where and how spans are sent. The environment fills in what is not set here, following
/// the OpenTelemetry conventions; what is set here wins over the environment.
///
/// | setting | here | environment | default |
/// |---|---|---|---|
/// | endpoint | [`endpoint`](OtlpConfig::endpoint) (a base URL) | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is), then `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL) | [`DEFAULT_OTLP_ENDPOINT`] |
/// | headers | [`header`](OtlpConfig::header) | `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (added to these) | none |
/// | service name | [`service_name`](OtlpConfig::service_name) | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | [`DEFAULT_SERVICE_NAME`] |
/// | timeout | [`timeout`](OtlpConfig::timeout) | | 10 s |
///
/// A base URL gets [`TRACES_PATH`] appended (unless it already ends with it). Header
/// values (API keys) never appear in `Debug` output or errors.
///
/// ```
/// use std::time::Duration;
/// use troupe_telemetry::OtlpConfig;
///
/// let config = OtlpConfig::new()
///     .endpoint("http://collector.internal:4318/")
///     .header("x-api-key", "secret")
///     .timeout(Duration::from_secs(3));
/// assert_eq!(config.traces_endpoint()?, "http://collector.internal:4318/v1/traces");
/// assert!(!format!("{config:?}").contains("secret"));
/// # Ok::<(), troupe_telemetry::TelemetryError>(())
/// ```
#[derive(Clone)]
pub struct OtlpConfig {
    endpoint: Option<String>,
    headers: Vec<(String, String)>,
    timeout: Duration,
    service_name: Option<String>,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("OtlpConfig")
            .field("endpoint", &self.endpoint)
            .field("header_names", &header_names)
            .field("timeout", &self.timeout)
            .field("service_name", &self.service_name)
            .finish()
    }
}

impl OtlpConfig {
    /// Everything from the environment or the defaults.
    pub fn new() -> Self {
        OtlpConfig { endpoint: None, headers: Vec::new(), timeout: Duration::from_secs(10), service_name: None }
    }

    /// Sends to the collector at base URL `url` (e.g. `http://localhost:4318`), whatever
    /// the environment says.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// Adds a header to every export request (e.g. a vendor's API key).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Gives up on an export request after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Names the service the spans come from (the `service.name` resource attribute).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// The URL spans are posted to, resolved from this configuration and the process
    /// environment.
    pub fn traces_endpoint(&self) -> Result<String, TelemetryError> {
        self.traces_endpoint_with(|name| std::env::var(name).ok())
    }

    /// [`traces_endpoint`](OtlpConfig::traces_endpoint) with the environment read through
    /// `env`.
    fn traces_endpoint_with(&self, env: impl Fn(&str) -> Option<String>) -> Result<String, TelemetryError> {
        let present = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let url = if let Some(base) = &self.endpoint {
            join_traces_path(base)
        } else if let Some(url) = present("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            url.trim().to_owned()
        } else if let Some(base) = present("OTEL_EXPORTER_OTLP_ENDPOINT") {
            join_traces_path(&base)
        } else {
            join_traces_path(DEFAULT_OTLP_ENDPOINT)
        };
        validate_endpoint(&url)?;
        Ok(url)
    }
}

fn join_traces_path(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with(TRACES_PATH) { base.to_owned() } else { format!("{base}{TRACES_PATH}") }
}

fn validate_endpoint(url: &str) -> Result<(), TelemetryError> {
    let invalid = |message: &str| TelemetryError::InvalidEndpoint { endpoint: url.to_owned(), message: message.into() };
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        Some("http" | "https") => Err(invalid("it has no host")),
        _ => Err(invalid("OTLP/HTTP needs an http:// or https:// URL")),
    }
}

/// A `tracing` layer that sends spans to an OpenTelemetry collector, for an application
/// that builds its own subscriber; [`init`](crate::init) uses it too.
///
/// Keep the guard: dropping it flushes the spans still buffered and shuts the exporter
/// down. Spans follow the convention of [`semconv`](crate::semconv).
///
/// ```
/// use tracing_subscriber::prelude::*;
/// use troupe_telemetry::{OtlpConfig, otlp_layer};
///
/// // Nothing listens on port 9 of this host: export fails quietly, the application goes on.
/// let (layer, guard) = otlp_layer(&OtlpConfig::new().endpoint("http://127.0.0.1:9"))?;
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info_span!("chat", otel.name = "chat demo-model").in_scope(|| {});
/// });
/// assert_eq!(guard.otlp_endpoint(), Some("http://127.0.0.1:9/v1/traces"));
/// # Ok::<(), troupe_telemetry::TelemetryError>(())
/// ```
pub fn otlp_layer<S>(config: &OtlpConfig) -> Result<(OtlpLayer<S>, TelemetryGuard), TelemetryError>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    let (provider, endpoint) = tracer_provider(config)?;
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(TRACER_NAME));
    Ok((layer, TelemetryGuard::with_provider(provider, endpoint)))
}

/// The SDK provider exporting to the configured collector, and the URL it posts to.
pub(crate) fn tracer_provider(config: &OtlpConfig) -> Result<(SdkTracerProvider, String), TelemetryError> {
    let endpoint = config.traces_endpoint()?;
    let http_client = client::ReqwestOtlpClient::new(config.timeout)?;
    let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http_client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.clone())
        .with_timeout(config.timeout)
        .with_headers(headers)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource(config)).build();
    Ok((provider, endpoint))
}

/// The detected resource (environment included), named by the configuration, else by the
/// environment, else [`DEFAULT_SERVICE_NAME`].
fn resource(config: &OtlpConfig) -> Resource {
    let detected = Resource::builder().build();
    let service = opentelemetry::Key::from_static_str("service.name");
    let unnamed = detected.get(&service).is_none_or(|name| name.as_str().starts_with("unknown_service"));
    match (&config.service_name, unnamed) {
        (Some(name), _) => Resource::builder().with_service_name(name.clone()).build(),
        (None, true) => Resource::builder().with_service_name(DEFAULT_SERVICE_NAME).build(),
        (None, false) => detected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn the_endpoint_comes_from_config_then_signal_env_then_base_env_then_default() {
        let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318");
        let signal = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://signal:4318/custom/path");
        let config = OtlpConfig::new();
        assert_eq!(config.traces_endpoint_with(env(&[])).expect("default"), "http://localhost:4318/v1/traces");
        assert_eq!(config.traces_endpoint_with(env(&[base])).expect("base"), "http://base:4318/v1/traces");
        assert_eq!(
            config.traces_endpoint_with(env(&[base, signal])).expect("signal"),
            "http://signal:4318/custom/path",
            "the per-signal variable is used as is"
        );
        let explicit = OtlpConfig::new().endpoint("https://mine:443/");
        assert_eq!(
            explicit.traces_endpoint_with(env(&[base, signal])).expect("explicit"),
            "https://mine:443/v1/traces"
        );
        let full = OtlpConfig::new().endpoint("http://mine:4318/v1/traces");
        assert_eq!(full.traces_endpoint_with(env(&[])).expect("full"), "http://mine:4318/v1/traces");
        let blank = [("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")];
        assert_eq!(config.traces_endpoint_with(env(&blank)).expect("blank"), "http://localhost:4318/v1/traces");
    }

    #[test]
    fn a_bad_endpoint_is_refused_with_its_url() {
        for bad in ["not a url", "ftp://collector:21", "/v1/traces"] {
            let config = OtlpConfig::new().endpoint(bad);
            match config.traces_endpoint_with(env(&[])) {
                Err(TelemetryError::InvalidEndpoint { endpoint, .. }) => {
                    assert!(endpoint.contains(bad.trim_end_matches("/v1/traces")), "{endpoint}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn debug_shows_header_names_not_values() {
        let config = OtlpConfig::new().header("authorization", "Bearer sk-live-123");
        let debug = format!("{config:?}");
        assert!(debug.contains("authorization"), "{debug}");
        assert!(!debug.contains("sk-live-123"), "{debug}");
    }

    #[test]
    fn the_service_name_is_configured_or_troupe() {
        let named = resource(&OtlpConfig::new().service_name("inbox"));
        let service = opentelemetry::Key::from_static_str("service.name");
        assert_eq!(named.get(&service).map(|v| v.as_str().into_owned()), Some("inbox".to_owned()));
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() && std::env::var_os("OTEL_RESOURCE_ATTRIBUTES").is_none() {
            let default = resource(&OtlpConfig::new());
            assert_eq!(default.get(&service).map(|v| v.as_str().into_owned()), Some(DEFAULT_SERVICE_NAME.to_owned()));
        }
    }
}
