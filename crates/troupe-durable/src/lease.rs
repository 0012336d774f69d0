//! Taking a stored run's lease to go on with it here.

use std::time::Duration;
use troupe_runtime::durable::is_dead_local_owner;
use troupe_store::{Lease, Store, StoreError, now_millis};

/// Takes the lease on `run_id` for `owner`: at once when it is free; from a holder on this
/// machine that died ([`is_dead_local_owner`]) by releasing its lease first; otherwise
/// not, and the holder is named (`Err`, "another process" when the queue says nobody).
pub async fn take_lease(
    store: &dyn Store,
    run_id: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Result<Lease, String>, StoreError> {
    if let Some(lease) = store.acquire(run_id, owner, ttl, now_millis()).await? {
        return Ok(Ok(lease));
    }
    let entry = store.queue().await?.into_iter().find(|entry| entry.run_id == run_id);
    let holder = entry.as_ref().and_then(|e| e.owner.clone()).unwrap_or_else(|| "another process".to_owned());
    if let Some(entry) = entry.filter(|_| is_dead_local_owner(&holder)) {
        tracing::info!(run = run_id, %holder, "the run's holder is gone; taking its lease");
        let dead = Lease { run_id: run_id.to_owned(), owner: holder.clone(), epoch: entry.epoch, expires_at: 0 };
        store.release(&dead, Some(now_millis())).await?;
        if let Some(lease) = store.acquire(run_id, owner, ttl, now_millis()).await? {
            return Ok(Ok(lease));
        }
    }
    Ok(Err(holder))
}
