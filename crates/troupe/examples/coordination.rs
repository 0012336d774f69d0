//! The coordination pieces of a team, without a model: a work queue with priorities and
//! retries (in memory, and kept in a store), shared memory with compare-and-set, a
//! majority vote, and a message bus whose firewall drops undeclared channels and redacts
//! secrets.
//!
//! ```sh
//! cargo run -p troupe --example coordination
//! ```

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use troupe::team::coordination::{Ballot, NewWorkItem};
use troupe::team::{AgentMessage, Consensus, ContextFirewall, DurableWorkQueue, MessageBus, SharedMemory, WorkQueue};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A work queue: the most urgent item first; a failed item goes back for another try.
    let queue = WorkQueue::new();
    queue.enqueue(NewWorkItem::new(json!({"task": "write docs"})).priority(1))?;
    let urgent = queue.enqueue(NewWorkItem::new(json!({"task": "fix the build"})).priority(9).max_attempts(2))?;
    let item = queue.claim("coder", Duration::from_secs(60), |_| true)?.ok_or("an item")?;
    assert_eq!(item.id, urgent);
    queue.start(&item.id, "coder")?;
    let state = queue.fail(&item.id, "coder", "the linker crashed")?;
    println!("after a failure the urgent item is {state:?}; stats: {:?}", queue.stats());

    // The same queue kept in a store: it outlives the process, and every process opening
    // the store (every machine, on PostgreSQL) shares it, each item going to one worker.
    let dir = tempfile::tempdir()?;
    let store = troupe::store::open(dir.path().join("troupe.db").to_str().ok_or("a UTF-8 path")?).await?;
    let durable = DurableWorkQueue::new(store, "releases");
    durable.enqueue(NewWorkItem::new(json!({"task": "tag v1.0"})).tag("ci")).await?;
    let job = durable.claim("ci-runner", Duration::from_secs(60), &["ci"]).await?.ok_or("an item")?;
    durable.complete(&job.id, "ci-runner", json!("tagged")).await?;
    println!("the stored queue after one job: {:?}", durable.stats().await?);

    // Shared memory: a writer that read an old version loses the race, visibly.
    let memory = SharedMemory::new();
    let v1 = memory.put("project", "owner", json!("ada"));
    memory.compare_and_set("project", "owner", v1, json!("grace"))?;
    let stale = memory.compare_and_set("project", "owner", v1, json!("linus"));
    println!("a stale write is refused: {}", stale.is_err());

    // Consensus: two of three agree.
    let vote = Consensus::majority().decide([
        Ballot::new("a", "Ship on Friday"),
        Ballot::new("b", "ship on friday"),
        Ballot::new("c", "Wait a week"),
    ]);
    println!("decision: {:?} ({} of {} votes)", vote.decision, vote.votes, vote.ballots);

    // The firewall: only coder → tester is declared (the lead, as orchestrator, talks to
    // everyone); secrets never pass.
    let firewall = Arc::new(ContextFirewall::new().channel("coder", "tester").orchestrator("lead"));
    let bus = MessageBus::with_firewall(16, Arc::clone(&firewall));
    let mut tester = bus.subscribe("tester")?;
    let _coder = bus.subscribe("coder")?;
    bus.publish(AgentMessage::request(
        "coder",
        "tester",
        "Test the login; the key is sk-ant-api03-abcdefghijklmnopqrstuvwx",
    ));
    let blocked = bus.publish(AgentMessage::request("tester", "coder", "Skip the tests?"));
    let received = tester.try_recv().ok_or("a message for the tester")?;
    println!("the tester got: {}", received.payload.summary);
    println!("undeclared channel blocked: {}", !blocked.blocked.is_empty());
    Ok(())
}
