//! Resuming a stored run by its id: this process takes the run's lease, then the runner
//! goes on with it from its last checkpoint.

use crate::lease::take_lease;
use std::future::Future;
use troupe_runtime::{Agent, Durability, RunHandle, Runner, RuntimeError};
use troupe_store::Lease;

/// Continues a stored run in this process, by its id.
///
/// The run's lease is taken first: at once when nobody holds it or its holder was a
/// process of this machine that died; while another process holds it, the resume is
/// refused with [`RuntimeError::RunLeased`], naming the holder. Then the run goes on from
/// its last checkpoint ([`Runner::resume_leased`]): a call its process died during is put
/// to a person, a completed side effect is never repeated.
///
/// ```
/// # async fn example(runner: troupe_runtime::Runner) -> Result<(), troupe_runtime::RuntimeError> {
/// use troupe_durable::ResumeRun;
///
/// let output = runner.resume_run("0193…").await?.output().await?;
/// # Ok(())
/// # }
/// ```
pub trait ResumeRun {
    /// Takes the lease on the stored run `run_id` and continues it.
    fn resume_run(&self, run_id: &str) -> impl Future<Output = Result<RunHandle, RuntimeError>> + Send;
}

impl ResumeRun for Runner {
    /// Continues the run with the definition it was stored with (the configuration it
    /// applied while it was going stays in force).
    async fn resume_run(&self, run_id: &str) -> Result<RunHandle, RuntimeError> {
        let lease = lease_for(self.durability(), run_id).await?;
        self.resume_leased(lease, None).await
    }
}

impl ResumeRun for Agent {
    /// Continues the run with this agent's definition, following its later revisions.
    async fn resume_run(&self, run_id: &str) -> Result<RunHandle, RuntimeError> {
        let lease = lease_for(self.runner().durability(), run_id).await?;
        self.resume_leased(lease).await
    }
}

/// The lease on `run_id`, taken for this process.
async fn lease_for(durability: Option<&Durability>, run_id: &str) -> Result<Lease, RuntimeError> {
    let durability = durability.ok_or(RuntimeError::NoStore)?;
    let (store, owner, ttl) = (durability.store(), durability.owner(), durability.lease_ttl());
    take_lease(store.as_ref(), run_id, owner, ttl)
        .await?
        .map_err(|holder| RuntimeError::RunLeased { run_id: run_id.to_owned(), owner: holder })
}
