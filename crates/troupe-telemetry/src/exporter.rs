//! [`MetricsExporter`]: the one interface every metrics format implements, and
//! [`JsonExporter`].

use crate::error::TelemetryError;
use crate::snapshot::TelemetrySnapshot;

/// Renders a [`TelemetrySnapshot`] in one wire format.
///
/// An exporter is a pure function of the snapshot: it holds no metrics of its own, so one
/// [`TelemetryMetrics`](crate::TelemetryMetrics) can be served in several formats at once
/// (Prometheus text on `/metrics`, JSON for a dashboard) and each format tested by itself.
/// Pull-based exporters hand the bytes to an HTTP response with
/// [`content_type`](MetricsExporter::content_type); push-based ones send them.
///
/// The trait is object-safe, so a server can choose a `Box<dyn MetricsExporter>` by the
/// request's `Accept` header.
///
/// ```
/// use troupe_telemetry::{JsonExporter, MetricsExporter, PrometheusExporter, TelemetryMetrics};
///
/// let metrics = TelemetryMetrics::new();
/// metrics.set_queue_depth(3);
/// let exporters: Vec<Box<dyn MetricsExporter>> = vec![Box::new(PrometheusExporter::new()), Box::new(JsonExporter::new())];
/// for exporter in &exporters {
///     let body = exporter.export(&metrics.snapshot())?;
///     assert!(!body.is_empty(), "{}", exporter.content_type());
/// }
/// # Ok::<(), troupe_telemetry::TelemetryError>(())
/// ```
pub trait MetricsExporter: Send + Sync {
    /// The media type of what [`export`](MetricsExporter::export) returns, for an HTTP
    /// `Content-Type` header.
    fn content_type(&self) -> &'static str;

    /// The snapshot in this exporter's format.
    fn export(&self, snapshot: &TelemetrySnapshot) -> Result<Vec<u8>, TelemetryError>;
}

/// The snapshot as JSON: the [`TelemetrySnapshot`] fields, exactly as they serialize, so
/// the output parses back into a `TelemetrySnapshot`.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonExporter {
    pretty: bool,
}

impl JsonExporter {
    /// Compact JSON, one line.
    pub fn new() -> Self {
        JsonExporter { pretty: false }
    }

    /// Indented JSON, for people.
    pub fn pretty() -> Self {
        JsonExporter { pretty: true }
    }

    /// The snapshot as a JSON string.
    pub fn render(&self, snapshot: &TelemetrySnapshot) -> Result<String, TelemetryError> {
        let json = if self.pretty { serde_json::to_string_pretty(snapshot)? } else { serde_json::to_string(snapshot)? };
        Ok(json)
    }
}

impl MetricsExporter for JsonExporter {
    fn content_type(&self) -> &'static str {
        "application/json"
    }

    fn export(&self, snapshot: &TelemetrySnapshot) -> Result<Vec<u8>, TelemetryError> {
        self.render(snapshot).map(String::into_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ToolTelemetry;

    #[test]
    fn json_round_trips_into_the_same_snapshot() {
        let mut snapshot = TelemetrySnapshot { timestamp_ms: 42, model_retries: 2, ..Default::default() };
        snapshot.tools.insert("fs.read".into(), ToolTelemetry { calls_ok: 3, calls_error: 1, approval_requests: 0 });
        for exporter in [JsonExporter::new(), JsonExporter::pretty()] {
            let bytes = exporter.export(&snapshot).expect("exports");
            let back: TelemetrySnapshot = serde_json::from_slice(&bytes).expect("parses");
            assert_eq!(back, snapshot);
        }
        assert!(!JsonExporter::new().render(&snapshot).expect("renders").contains('\n'));
        assert!(JsonExporter::pretty().render(&snapshot).expect("renders").contains('\n'));
    }
}
