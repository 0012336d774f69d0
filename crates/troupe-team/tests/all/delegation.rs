//! Delegation as a tool, through the mock LLM server over real loopback HTTP: a leader
//! agent calls `delegate(to, brief)`, the teammate runs on the brief alone, and the
//! leader reads the teammate's answer (or its failure) as the tool's result.

use std::sync::Arc;
use std::time::Duration;
use troupe_runtime::{Agent, RunOutcome};
use troupe_team::DelegateTool;
use troupe_testkit::{Fault, MockTurn};

use crate::common;
use common::{Mock, Wire, offered_tools, watched};

per_wire!(
    the_leader_delegates_and_reads_the_teammates_answer,
    a_failing_teammate_is_an_error_the_leader_reads,
    an_unknown_teammate_is_refused_for_the_leader_to_correct,
    cancelling_the_leader_stops_the_teammate,
    a_delegation_past_its_timeout_stops_the_teammate,
);

/// A leader agent of `mock` with the `delegate` tool.
fn leader(mock: &Mock, delegate: &Arc<DelegateTool>) -> Agent {
    mock.builder("lead").tool(delegate.clone()).build().expect("leader builds")
}

const QUESTION: &str = "What is the capital of France?";

fn delegate_call(to: &str, brief: &str) -> MockTurn {
    MockTurn::tool_call("call_1", "delegate", serde_json::json!({"to": to, "brief": brief}))
}

async fn the_leader_delegates_and_reads_the_teammates_answer(wire: Wire) {
    let brief = "BRIEF: name the capital of France, one word.";
    let lead =
        Mock::with(wire, [delegate_call("researcher", brief), MockTurn::text("Paris, says my researcher.")]).await;
    let researcher = Mock::with(wire, [MockTurn::text("PARIS-ANSWER")]).await;
    let writer = Mock::with(wire, []).await;
    let delegate = Arc::new(
        DelegateTool::new(
            "lead",
            [researcher.member("researcher", "Finds facts."), writer.member("writer", "Writes.")],
        )
        .expect("tool"),
    );

    let output = leader(&lead, &delegate).run(QUESTION).await.expect("the leader runs");

    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(output.text, "Paris, says my researcher.");
    let first = lead.body(0);
    assert_eq!(offered_tools(&first), ["delegate"]);
    assert!(first.contains("Finds facts.") && first.contains("\"writer\""), "the teammates are listed: {first}");
    let asked = researcher.body(0);
    assert!(asked.contains(brief), "{asked}");
    assert!(!asked.contains(QUESTION), "the teammate sees the brief, not the leader's conversation: {asked}");
    assert!(lead.body(1).contains("PARIS-ANSWER"), "{}", lead.body(1));
    assert!(writer.bodies().is_empty());
    let results = delegate.results();
    assert_eq!(results.len(), 1);
    assert!(results[0].success && results[0].name == "researcher" && results[0].task_id.starts_with("lead/delegate/"));
    assert_eq!(results[0].usage.input_tokens, 10, "the teammate's usage is kept for the caller");
}

async fn a_failing_teammate_is_an_error_the_leader_reads(wire: Wire) {
    let lead =
        Mock::with(wire, [delegate_call("researcher", "find it"), MockTurn::text("I could not find out.")]).await;
    let researcher = Mock::with(wire, [MockTurn::status(400, "the request is malformed")]).await;
    let delegate = Arc::new(DelegateTool::new("lead", [researcher.member("researcher", "Finds.")]).expect("tool"));

    let output = leader(&lead, &delegate).run(QUESTION).await.expect("the leader runs");

    assert!(output.is_completed(), "a teammate's failure does not fail the leader: {:?}", output.outcome);
    let retold = lead.body(1);
    assert!(retold.contains("teammate `researcher` did not complete the task"), "{retold}");
    assert!(!delegate.results()[0].success);
}

async fn an_unknown_teammate_is_refused_for_the_leader_to_correct(wire: Wire) {
    let lead = Mock::with(
        wire,
        [delegate_call("poet", "a poem"), delegate_call("researcher", "find it"), MockTurn::text("found")],
    )
    .await;
    let researcher = Mock::with(wire, [MockTurn::text("FOUND-IT")]).await;
    let delegate = Arc::new(DelegateTool::new("lead", [researcher.member("researcher", "Finds.")]).expect("tool"));

    let output = leader(&lead, &delegate).run(QUESTION).await.expect("the leader runs");

    assert_eq!(output.text, "found");
    let refused = lead.body(1);
    assert!(refused.contains("no teammate is named `poet`") && refused.contains("one of: researcher"), "{refused}");
    assert!(lead.body(2).contains("FOUND-IT"));
    assert_eq!(researcher.bodies().len(), 1, "only the corrected call ran the teammate");
}

fn stalling(wire: Wire) -> impl std::future::Future<Output = Mock> {
    let stall =
        MockTurn::text("too late").with_fault(Fault::Stall { after_events: 1, duration: Duration::from_secs(60) });
    Mock::with(wire, [stall])
}

async fn cancelling_the_leader_stops_the_teammate(wire: Wire) {
    let lead = Mock::with(wire, [delegate_call("slow", "take your time")]).await;
    let slow = stalling(wire).await;
    let (member, mut finished) = watched(slow.member("slow", "Slow."));
    let delegate = Arc::new(DelegateTool::new("lead", [member]).expect("tool"));
    let handle = leader(&lead, &delegate).start(QUESTION);

    slow.asked().await;
    handle.cancel.cancel();
    let output = handle.output().await.expect("the leader ends");

    assert!(matches!(output.outcome, RunOutcome::Cancelled { .. }), "{:?}", output.outcome);
    let teammate = tokio::time::timeout(Duration::from_secs(10), finished.recv())
        .await
        .expect("the teammate stops long before its stall ends")
        .expect("a result");
    assert!(!teammate.success, "{teammate:?}");
    assert!(teammate.error.as_deref().is_some_and(|e| e.contains("cancelled")), "{teammate:?}");
}

async fn a_delegation_past_its_timeout_stops_the_teammate(wire: Wire) {
    let lead = Mock::with(wire, [delegate_call("slow", "take your time"), MockTurn::text("gave up")]).await;
    let slow = stalling(wire).await;
    let (member, mut finished) = watched(slow.member("slow", "Slow."));
    let delegate = Arc::new(DelegateTool::new("lead", [member]).expect("tool").timeout(Duration::from_millis(300)));

    let output = leader(&lead, &delegate).run(QUESTION).await.expect("the leader runs");

    assert_eq!(output.text, "gave up");
    let told = lead.body(1);
    assert!(told.contains("did not finish within"), "{told}");
    let teammate = tokio::time::timeout(Duration::from_secs(10), finished.recv())
        .await
        .expect("the teammate stops long before its stall ends")
        .expect("a result");
    assert!(!teammate.success, "{teammate:?}");
}
