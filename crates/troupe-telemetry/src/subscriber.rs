//! [`init`]: one call that installs the process's `tracing` subscriber — log lines on
//! stderr and, with feature `otlp`, spans to an OpenTelemetry collector — and the
//! [`TelemetryGuard`] that flushes them.

use crate::error::TelemetryError;
use std::fmt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

#[cfg(feature = "otlp")]
use crate::otlp::OtlpConfig;
#[cfg(feature = "otlp")]
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The log filter when neither the configuration, `TROUPE_LOG` nor `RUST_LOG` gives one.
pub const DEFAULT_LOG_FILTER: &str = "info";

/// The filter of exported spans when the configuration gives none: the GenAI spans are
/// `INFO`, so they all pass.
pub const DEFAULT_TRACE_FILTER: &str = "info";

/// What [`init`] installs.
///
/// ```
/// use troupe_telemetry::TelemetryConfig;
///
/// let config = TelemetryConfig::new().log_filter("warn,troupe=debug");
/// assert_eq!(config.log_directives(), "warn,troupe=debug");
/// ```
#[derive(Clone, Debug)]
pub struct TelemetryConfig {
    log_filter: Option<String>,
    logs: bool,
    #[cfg(feature = "otlp")]
    otlp: Option<OtlpConfig>,
    #[cfg(feature = "otlp")]
    trace_filter: Option<String>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl TelemetryConfig {
    /// Log lines on stderr, filtered by `TROUPE_LOG` (else `RUST_LOG`, else
    /// [`DEFAULT_LOG_FILTER`]); no span export.
    pub fn new() -> Self {
        TelemetryConfig {
            log_filter: None,
            logs: true,
            #[cfg(feature = "otlp")]
            otlp: None,
            #[cfg(feature = "otlp")]
            trace_filter: None,
        }
    }

    /// Filters log lines with `tracing` directives (`info`, `warn,troupe=debug`), whatever
    /// the environment says.
    pub fn log_filter(mut self, directives: impl Into<String>) -> Self {
        self.log_filter = Some(directives.into());
        self
    }

    /// No log lines (spans may still be exported).
    pub fn without_logs(mut self) -> Self {
        self.logs = false;
        self
    }

    /// Exports spans to the collector `config` describes.
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, config: OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// Exports spans when the environment names a collector
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set), with
    /// everything else from the environment too.
    #[cfg(feature = "otlp")]
    pub fn otlp_from_env(mut self) -> Self {
        let named = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()));
        if named && self.otlp.is_none() {
            self.otlp = Some(OtlpConfig::new());
        }
        self
    }

    /// Filters exported spans with `tracing` directives (default
    /// [`DEFAULT_TRACE_FILTER`]), apart from the log filter: a quiet terminal can still
    /// export every GenAI span.
    #[cfg(feature = "otlp")]
    pub fn trace_filter(mut self, directives: impl Into<String>) -> Self {
        self.trace_filter = Some(directives.into());
        self
    }

    /// The log filter in force: the configured one, else `TROUPE_LOG`, else `RUST_LOG`,
    /// else [`DEFAULT_LOG_FILTER`].
    pub fn log_directives(&self) -> String {
        self.log_directives_with(|name| std::env::var(name).ok())
    }

    fn log_directives_with(&self, env: impl Fn(&str) -> Option<String>) -> String {
        self.log_filter
            .clone()
            .or_else(|| env("TROUPE_LOG"))
            .or_else(|| env("RUST_LOG"))
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_LOG_FILTER.to_owned())
    }
}

/// Installs the global `tracing` subscriber `config` describes; keep the guard for as long
/// as spans should be exported.
///
/// Fails if a global subscriber is already installed: a process has one. An application
/// with a subscriber of its own adds `otlp_layer` (feature `otlp`) to it instead.
pub fn init(config: TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let log_layer = if config.logs {
        let filter = env_filter(&config.log_directives())?;
        Some(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter))
    } else {
        None
    };
    #[cfg(feature = "otlp")]
    {
        let (otlp_layer, guard) = match &config.otlp {
            Some(otlp) => {
                let filter = env_filter(config.trace_filter.as_deref().unwrap_or(DEFAULT_TRACE_FILTER))?;
                let (layer, guard) = crate::otlp::otlp_layer(otlp)?;
                (Some(layer.with_filter(filter)), guard)
            }
            None => (None, TelemetryGuard::empty()),
        };
        install(tracing_subscriber::registry().with(log_layer).with(otlp_layer))?;
        if let Some(provider) = &guard.provider {
            // Libraries that ask the OpenTelemetry API for a tracer get the same pipeline.
            opentelemetry::global::set_tracer_provider(provider.clone());
        }
        Ok(guard)
    }
    #[cfg(not(feature = "otlp"))]
    {
        install(tracing_subscriber::registry().with(log_layer))?;
        Ok(TelemetryGuard::empty())
    }
}

fn install(subscriber: impl tracing::Subscriber + Send + Sync + 'static) -> Result<(), TelemetryError> {
    tracing::subscriber::set_global_default(subscriber).map_err(|e| TelemetryError::SubscriberAlreadySet(e.to_string()))
}

fn env_filter(directives: &str) -> Result<EnvFilter, TelemetryError> {
    EnvFilter::try_new(directives)
        .map_err(|e| TelemetryError::InvalidFilter { directives: directives.to_owned(), message: e.to_string() })
}

/// Keeps span export alive; dropping it flushes what is buffered and shuts the exporter
/// down, waiting at most a few seconds for the collector. Drop it (or call
/// [`shutdown`](TelemetryGuard::shutdown)) before the process exits, or the last spans
/// are lost.
#[must_use = "dropping the guard stops span export"]
pub struct TelemetryGuard {
    #[cfg(feature = "otlp")]
    provider: Option<SdkTracerProvider>,
    #[cfg(feature = "otlp")]
    endpoint: Option<String>,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard").field("otlp_endpoint", &self.otlp_endpoint()).finish()
    }
}

impl TelemetryGuard {
    /// A guard with nothing to flush.
    pub(crate) fn empty() -> Self {
        TelemetryGuard {
            #[cfg(feature = "otlp")]
            provider: None,
            #[cfg(feature = "otlp")]
            endpoint: None,
        }
    }

    #[cfg(feature = "otlp")]
    pub(crate) fn with_provider(provider: SdkTracerProvider, endpoint: String) -> Self {
        TelemetryGuard { provider: Some(provider), endpoint: Some(endpoint) }
    }

    /// The URL spans are posted to, when they are exported.
    pub fn otlp_endpoint(&self) -> Option<&str> {
        #[cfg(feature = "otlp")]
        {
            self.endpoint.as_deref()
        }
        #[cfg(not(feature = "otlp"))]
        {
            None
        }
    }

    /// Sends every finished span now and waits until the collector has answered (or the
    /// export timed out). Blocks the calling thread.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        #[cfg(feature = "otlp")]
        if let Some(provider) = &self.provider {
            provider.force_flush().map_err(|e| TelemetryError::Flush(e.to_string()))?;
        }
        Ok(())
    }

    /// Flushes and shuts the exporter down, reporting what went wrong. Blocks the calling
    /// thread.
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        #[cfg(feature = "otlp")]
        {
            let mut guard = self;
            if let Some(provider) = guard.provider.take() {
                provider.shutdown().map_err(|e| TelemetryError::Flush(e.to_string()))?;
            }
        }
        Ok(())
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take() {
            // Nobody is left to tell; `shutdown` is there for callers who want to know.
            let _ = provider.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_filter_is_configured_then_troupe_log_then_rust_log_then_info() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        let config = TelemetryConfig::new();
        assert_eq!(config.log_directives_with(env(&[])), DEFAULT_LOG_FILTER);
        assert_eq!(config.log_directives_with(env(&[("RUST_LOG", "warn")])), "warn");
        assert_eq!(config.log_directives_with(env(&[("RUST_LOG", "warn"), ("TROUPE_LOG", "debug")])), "debug");
        let explicit = TelemetryConfig::new().log_filter("error");
        assert_eq!(explicit.log_directives_with(env(&[("TROUPE_LOG", "debug")])), "error");
    }

    #[test]
    fn a_bad_filter_is_a_typed_error_naming_it() {
        match env_filter("info,[[[") {
            Err(TelemetryError::InvalidFilter { directives, .. }) => assert_eq!(directives, "info,[[["),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_empty_guard_flushes_and_shuts_down_as_a_no_op() {
        let guard = TelemetryGuard::empty();
        assert_eq!(guard.otlp_endpoint(), None);
        guard.flush().expect("nothing to flush");
        guard.shutdown().expect("nothing to shut down");
    }
}
