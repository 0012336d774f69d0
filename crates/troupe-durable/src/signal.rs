//! Signals to stored runs, sent through the store.

use troupe_run::Signal;
use troupe_runtime::RuntimeError;
use troupe_store::{RunStatus, Store, StoreError, now_millis};

/// Sends `signal` to the stored run `run_id` and returns its sequence number: once this
/// returns, the signal is acknowledged and will be applied, in order, exactly once. A
/// paused run is put back in the queue so that a worker (or `troupe runs resume`) takes
/// it up.
pub async fn send_signal(store: &dyn Store, run_id: &str, signal: &Signal) -> Result<i64, RuntimeError> {
    let Some(run) = store.load_run(run_id).await? else {
        return Err(RuntimeError::Store(StoreError::UnknownRun { run_id: run_id.to_owned() }));
    };
    if run.status.is_terminal() {
        return Err(RuntimeError::RunFinished);
    }
    let payload = serde_json::to_value(signal).unwrap_or_default();
    let seq = store.send_signal(run_id, &signal.kind().to_string(), payload, now_millis()).await?;
    if run.status == RunStatus::Paused {
        store.enqueue(run_id, now_millis()).await?;
    }
    Ok(seq)
}
