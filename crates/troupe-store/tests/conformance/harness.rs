//! What every conformance test is given, whatever the backend: the store under test, a way
//! to open a second store on the same database, and raw SQL through the backend's own pool
//! (to try what the store's API never does: changing evidence, forging rows).

use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use troupe_store::{Checkpoint, Millis, NewRun, RunStatus, Store};

/// A boxed future, as the backends' fixtures return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A fixed instant the tests move time from, so leases and ticks never depend on the clock.
pub const T0: Millis = 1_700_000_000_000;

/// A database under test, on one backend.
pub trait Backend: Send + Sync {
    /// `sqlite` or `postgres`.
    fn name(&self) -> &'static str;

    /// The store every test works on.
    fn store(&self) -> Arc<dyn Store>;

    /// Another store on the same database, as a second worker process would open it.
    fn open_another(&self) -> BoxFuture<'_, Arc<dyn Store>>;

    /// Runs one raw SQL statement (no parameters) through the backend's pool: the rows it
    /// changed, or the database's refusal.
    fn execute<'a>(&'a self, sql: &'a str) -> BoxFuture<'a, Result<u64, String>>;
}

/// A run of `agent` created with `status`, with a small input and an empty state.
pub fn new_run(id: &str, agent: &str, status: RunStatus) -> NewRun {
    NewRun {
        id: id.to_owned(),
        agent: agent.to_owned(),
        status,
        conversation_id: None,
        parent_run_id: None,
        input: json!({"instruction": format!("task of {id}")}).into(),
        state: json!({}).into(),
        spend: None,
    }
}

/// A checkpoint of `run_id` to `status` with `state`, without evidence, signals or fence.
pub fn checkpoint(run_id: &str, status: RunStatus, state: serde_json::Value) -> Checkpoint {
    Checkpoint::new(run_id, status, serde_json::value::to_raw_value(&state).expect("a JSON value encodes"))
}

/// Runs `body` on its own task, so a failing assertion still lets the caller clean up,
/// then re-raises its panic.
pub async fn run_isolated(body: BoxFuture<'static, ()>) -> Result<(), Box<dyn std::any::Any + Send>> {
    match tokio::spawn(body).await {
        Ok(()) => Ok(()),
        Err(error) if error.is_panic() => Err(error.into_panic()),
        Err(error) => Err(Box::new(format!("the test task was cancelled: {error}"))),
    }
}
