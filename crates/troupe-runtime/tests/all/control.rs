//! Controlling a run from outside, through the scripted model and over HTTP for each wire:
//! cancellation mid-stream and mid-tool, and approvals (approve, reject, modify, always).

use crate::common;

use common::{Harness, Wire, check_events, drain, until_event};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::time::{Duration, Instant};
use troupe_core::Budget;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason, ToolCallId};
use troupe_model::Pricing;
use troupe_runtime::{Agent, ApprovalDecision, RunHandle, RunOutcome, RunOutput};
use troupe_testkit::MockTurn;
use troupe_tools::{Effect, ToolOutput, typed_tool};

/// Cancellation must end a run within this of the cancel, whatever the pace of the model
/// or the tool (200 ms between events, a 30 s tool).
const PROMPT: Duration = Duration::from_millis(1500);

/// Arguments of the slow tool: none.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Nap {}

fn writer(h: &Harness) -> Agent {
    h.engine().agent("writer").workspace(h.dir.path()).coding_tools().build().expect("agent builds")
}

async fn finish(handle: RunHandle, mut seen: Vec<AgentEvent>) -> RunOutput {
    let RunHandle { mut events, result, signals, .. } = handle;
    drop(signals);
    drain(&mut events, &mut seen).await;
    let output = result.await.expect("the run task ends");
    assert_eq!(seen, output.events, "the live stream is the recorded one");
    check_events(&output.events);
    output
}

/// Waits for the next approval request and returns its call id.
async fn paused(handle: &mut RunHandle, seen: &mut Vec<AgentEvent>) -> (ToolCallId, String) {
    let event = until_event(&mut handle.events, seen, |k| matches!(k, AgentEventKind::RunPaused { .. })).await;
    let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, reason, .. } } = event.kind else {
        panic!("an approval request: {event:?}")
    };
    assert!(reason.contains("write state"), "{reason}");
    (call_id, tool)
}

async fn cancel_mid_stream(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([MockTurn::text("one two three four five six seven eight nine ten ".repeat(4))
        .with_delta_chars(4)
        .with_event_delay(Duration::from_millis(200))]);
    let agent = writer(&h);
    let mut handle = agent.start("Count slowly.");
    let mut seen = Vec::new();
    until_event(&mut handle.events, &mut seen, |k| matches!(k, AgentEventKind::MessageDelta { .. })).await;
    let cancelled_at = Instant::now();
    handle.cancel.cancel();
    let output = finish(handle, seen).await;
    assert!(cancelled_at.elapsed() < PROMPT, "took {:?}", cancelled_at.elapsed());
    assert_eq!(output.outcome, RunOutcome::Cancelled { reason: None });
    assert_eq!(h.bodies().len(), 1);
    assert_eq!(output.messages.len(), 1, "the abandoned response is not kept");
    assert_eq!(agent.metrics().runs_cancelled, 1);
}

async fn cancel_mid_tool(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([MockTurn::tool_call("call_nap", "nap", json!({})), MockTurn::text("never")]);
    let nap = typed_tool("nap", "Sleeps a long time.", Effect::ReadOnly, |_ctx, _args: Nap| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(ToolOutput::text("woke up"))
    });
    let agent = h.engine().agent("sleeper").workspace(h.dir.path()).tool(nap.into_arc()).build().expect("builds");
    let mut handle = agent.start("Take a nap.");
    let mut seen = Vec::new();
    until_event(&mut handle.events, &mut seen, |k| matches!(k, AgentEventKind::ToolCallEnd { .. })).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled_at = Instant::now();
    handle.signals.cancel("enough sleep").await.expect("delivered");
    let output = finish(handle, seen).await;
    assert!(cancelled_at.elapsed() < PROMPT, "took {:?}", cancelled_at.elapsed());
    assert_eq!(output.outcome, RunOutcome::Cancelled { reason: Some("enough sleep".into()) });
    assert_eq!(h.bodies().len(), 1, "no model call after the cancel");
    let result = output.events.iter().find_map(|e| match &e.kind {
        AgentEventKind::ToolCallResult { content, is_error, .. } => Some((content.clone(), *is_error)),
        _ => None,
    });
    let (content, is_error) = result.expect("the cancelled call is answered");
    assert!(is_error && content.contains("cancelled"), "{content}");
    assert_eq!(output.messages.len(), 3, "the call and its (cancelled) result stay paired");
}

async fn approve(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([h.call("call_w", "fs.write", json!({"path": "out.txt", "content": "hello"})), MockTurn::text("written")]);
    let mut handle = writer(&h).start("Write hello.");
    let mut seen = Vec::new();
    let (call_id, tool) = paused(&mut handle, &mut seen).await;
    assert_eq!((call_id.as_str(), tool.as_str()), ("call_w", "fs.write"));
    assert_eq!(h.read("out.txt"), None, "nothing runs before the decision");
    handle.signals.approve(call_id).await.expect("delivered");
    let output = finish(handle, seen).await;
    assert_eq!(output.outcome, RunOutcome::Completed { output: "written".into() });
    assert_eq!(h.read("out.txt").as_deref(), Some("hello"));
}

async fn reject(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([
        h.call("call_w", "fs.write", json!({"path": "out.txt", "content": "hello"})),
        MockTurn::text("ok, not writing"),
    ]);
    let mut handle = writer(&h).start("Write hello.");
    let mut seen = Vec::new();
    let (call_id, _) = paused(&mut handle, &mut seen).await;
    handle.signals.reject(call_id, "write to notes/ instead").await.expect("delivered");
    let output = finish(handle, seen).await;
    assert!(output.is_completed());
    assert_eq!(h.read("out.txt"), None, "a rejected call never runs");
    let second = &h.bodies()[1];
    assert!(second.contains("write to notes/ instead"), "the reason reached the model: {second}");
    let rejected = output.events.iter().any(|e| {
        matches!(&e.kind, AgentEventKind::ToolCallResult { is_error: true, content, .. } if content.contains("rejected"))
    });
    assert!(rejected, "the rejection is an error result");
}

async fn modify(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([h.call("call_w", "fs.write", json!({"path": "out.txt", "content": "hello"})), MockTurn::text("done")]);
    let mut handle = writer(&h).start("Write hello.");
    let mut seen = Vec::new();
    let (call_id, _) = paused(&mut handle, &mut seen).await;
    let arguments = json!({"path": "edited.txt", "content": "changed by a person"});
    handle.signals.decide(call_id, ApprovalDecision::Modify { arguments }).await.expect("delivered");
    let output = finish(handle, seen).await;
    assert!(output.is_completed());
    assert_eq!(h.read("out.txt"), None, "the model's arguments were not used");
    assert_eq!(h.read("edited.txt").as_deref(), Some("changed by a person"));
    assert!(h.bodies()[1].contains("changed this call's arguments"), "the model is told");
}

async fn always_allow(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([
        h.call("call_1", "fs.write", json!({"path": "a.txt", "content": "a"})),
        h.call("call_2", "fs.write", json!({"path": "b.txt", "content": "b"})),
        MockTurn::text("both written"),
    ]);
    let mut handle = writer(&h).start("Write two files.");
    let mut seen = Vec::new();
    let (call_id, _) = paused(&mut handle, &mut seen).await;
    handle.signals.decide(call_id, ApprovalDecision::AlwaysAllow).await.expect("delivered");
    let output = finish(handle, seen).await;
    assert!(output.is_completed(), "{:?}", output.outcome);
    let pauses = output.events.iter().filter(|e| matches!(e.kind, AgentEventKind::RunPaused { .. })).count();
    assert_eq!(pauses, 1, "the second call of the tool was not asked about");
    assert_eq!((h.read("a.txt").as_deref(), h.read("b.txt").as_deref()), (Some("a"), Some("b")));
    assert!(output.state.always_allowed().contains("fs.write"));
}

async fn budget_in_usd_counts_priced_tool_turns(wire: Wire) {
    // The same check as the tool-loop budget test, but with approvals in the way: a
    // paused-and-approved turn is priced like any other.
    let h = Harness::new(wire).await;
    h.push([
        h.call("call_1", "fs.write", json!({"path": "a.txt", "content": "a"})),
        h.call("call_2", "fs.list", json!({})),
    ]);
    let pricing = Pricing { input: 100_000.0, output: 0.0, cache_read: 0.0, cache_write: 0.0 };
    let agent =
        h.priced_engine(pricing).agent("w").workspace(h.dir.path()).coding_tools().budget_usd(1.5).build().expect("ok");
    let mut handle = agent.start("Write.");
    let mut seen = Vec::new();
    let (call_id, _) = paused(&mut handle, &mut seen).await;
    handle.signals.approve(call_id).await.expect("delivered");
    let output = finish(handle, seen).await;
    assert_eq!(output.outcome, RunOutcome::BudgetExceeded { budget: Budget::Usd });
    assert_eq!(h.bodies().len(), 2);
}

per_wire!(
    cancel_mid_stream,
    cancel_mid_tool,
    approve,
    reject,
    modify,
    always_allow,
    budget_in_usd_counts_priced_tool_turns
);
