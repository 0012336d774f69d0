//! `init` installs the process's one global subscriber; its guard's drop sends the spans.
//! (One test: a process has one global subscriber.)

mod common;

use common::{Collector, emit_run_spans};
use std::time::Duration;
use troupe_telemetry::{OtlpConfig, TelemetryConfig, TelemetryError, init};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_exports_filtered_spans_until_the_guard_drops_and_refuses_a_second_subscriber() {
    let mut collector = Collector::start().await;
    let config = TelemetryConfig::new()
        .log_filter("warn")
        .otlp(OtlpConfig::new().endpoint(&collector.base_url).service_name("init-test"));
    let guard = init(config).expect("installs the subscriber");

    emit_run_spans();
    // Below the default trace filter (`info`): never exported.
    tracing::debug_span!("noise", otel.name = "debug noise").in_scope(|| {});

    let again = init(TelemetryConfig::new().without_logs());
    assert!(matches!(again, Err(TelemetryError::SubscriberAlreadySet(_))), "{again:?}");

    tokio::task::spawn_blocking(move || drop(guard)).await.expect("drop flushes");
    let exports = collector.received(Duration::from_secs(5)).await;
    let mut names: Vec<String> = exports
        .iter()
        .flat_map(|e| e.spans())
        .map(|(service, span)| {
            assert_eq!(service.as_deref(), Some("init-test"));
            span.name
        })
        .collect();
    names.sort();
    assert_eq!(names, ["chat demo-model", "execute_tool fs.read", "invoke_agent triage"]);
}
