//! A run that failed for a transient reason (the provider overloaded, the connection gone)
//! is resumed from its last checkpoint and completes, its record whole; one that failed
//! for a lasting reason (a refused key) is not.

use crate::common::{Harness, Wire};
use std::sync::Arc;
use troupe_core::FailureCode;
use troupe_runtime::durable::resumable_failure;
use troupe_runtime::{Engine, RunOutcome, RuntimeError};
use troupe_store::{EvidenceKind, RunStatus, Store};
use troupe_testkit::MockTurn;

async fn harness() -> (Harness, tempfile::TempDir, Arc<dyn Store>, Engine) {
    let h = Harness::new(Wire::Anthropic).await;
    let (engine, store, dir) = h.recorded_engine().await;
    (h, dir, store, engine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_failed_by_an_overloaded_provider_resumes_from_its_last_checkpoint() {
    let (h, _dir, store, engine) = harness().await;
    h.push([
        h.call("toolu_1", "fs.list", serde_json::json!({})),
        MockTurn::status(529, "overloaded"),
        MockTurn::text("Listed it."),
    ]);
    let agent = engine.agent("patient").tools(troupe_tools::coding_tools()).build().expect("the agent builds");
    let failed = agent.run("List the files").await.expect("the run ends");
    assert!(
        matches!(&failed.outcome, RunOutcome::Failed { code: Some(FailureCode::Overloaded), .. }),
        "{:?}",
        failed.outcome
    );
    let run_id = failed.run_id.to_string();
    let record = store.load_run(&run_id).await.expect("load").expect("recorded");
    assert_eq!(record.status, RunStatus::Failed);
    assert!(resumable_failure(&record).is_some_and(|why| why.contains("overloaded")), "resumable");

    let resumed = agent
        .runner()
        .resume_leased(crate::common::lease_of(agent.runner(), &run_id).await, None)
        .await
        .expect("a transient failure resumes");
    let output = resumed.result.await.expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "Listed it.".into() });
    assert_eq!(h.bodies().len(), 3, "the failed call is made again, and only it");
    assert!(h.bodies()[2].contains("tool_result"), "the tool's result from before the failure is kept");

    let record = store.load_run(&run_id).await.expect("load").expect("recorded");
    assert_eq!(record.status, RunStatus::Completed);
    let evidence = store.evidence(&run_id, 0).await.expect("the evidence");
    troupe_store::verify_log(&evidence, &record.evidence_head, &run_id).expect("the log is whole");
    let planned = evidence.iter().find(|e| e.kind == EvidenceKind::ResumePlanned).expect("the resume is on record");
    assert_eq!(planned.payload["after_failure"], "overloaded");
    let actions = evidence.iter().filter(|e| e.kind == EvidenceKind::ActionStarted).count();
    assert!(actions <= 1, "the tool ran once at most");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_failed_by_a_refused_key_is_not_resumed() {
    let (h, _dir, store, engine) = harness().await;
    h.push([MockTurn::status(401, "invalid x-api-key")]);
    let agent = engine.agent("patient").build().expect("the agent builds");
    let failed = agent.run("Hello").await.expect("the run ends");
    assert!(matches!(&failed.outcome, RunOutcome::Failed { code: Some(FailureCode::Authentication), .. }));
    let run_id = failed.run_id.to_string();
    let record = store.load_run(&run_id).await.expect("load").expect("recorded");
    assert_eq!(resumable_failure(&record), None);
    let refused = agent.runner().resume_leased(crate::common::lease_of(agent.runner(), &run_id).await, None).await;
    assert!(matches!(refused, Err(RuntimeError::RunFinished)), "{:?}", refused.err());
    let record = store.load_run(&run_id).await.expect("load").expect("recorded");
    assert_eq!(record.status, RunStatus::Failed, "nothing changed");
}
