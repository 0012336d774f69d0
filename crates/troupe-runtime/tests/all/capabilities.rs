//! Capabilities are checked before approval is asked, and every decision is audited.

use crate::common;

use common::{Harness, Wire, check_events};
use serde_json::json;
use std::sync::Arc;
use troupe_core::AgentEventKind;
use troupe_runtime::{ApprovalMode, RunOutcome};
use troupe_testkit::MockTurn;
use troupe_tools::{AuditKind, CapabilitySet, MemoryAuditLog};

async fn denied_before_approval(wire: Wire) {
    let h = Harness::new(wire).await;
    std::fs::create_dir(h.dir.path().join("notes")).expect("notes dir");
    h.write("notes/todo.txt", "buy milk");
    h.push([
        h.call("c1", "fs.read", json!({"path": "notes/todo.txt"})),
        h.call("c2", "fs.write", json!({"path": "secret.txt", "content": "x"})),
        MockTurn::text("I could read the notes but was not allowed to write."),
    ]);
    let audit = Arc::new(MemoryAuditLog::new());
    let agent = h
        .engine()
        .agent("reader")
        .workspace(h.dir.path())
        .coding_tools()
        // Every call would need approval: a capability denial must come first.
        .approval_mode(ApprovalMode::Always)
        .capabilities(CapabilitySet::none().allow_read("notes"))
        .audit_log(audit.clone())
        .build()
        .expect("agent builds");
    let mut handle = agent.start("Read the notes, then write a secret.");
    // Approve the read when asked; the write must never be asked about.
    let mut seen = Vec::new();
    while let Some(event) = futures::StreamExt::next(&mut handle.events).await {
        if let AgentEventKind::RunPaused { reason: troupe_core::PauseReason::Approval { call_id, tool, .. } } =
            &event.kind
        {
            assert_eq!(tool, "fs.read", "only the permitted call is put to a person");
            handle
                .signals
                .send(troupe_runtime::Signal::Approval {
                    call_id: call_id.clone(),
                    decision: troupe_runtime::ApprovalDecision::Approve,
                })
                .await
                .expect("the run takes signals");
        }
        seen.push(event);
    }
    let output = handle.result.await.expect("the run ends");
    check_events(&output.events);
    assert!(matches!(output.outcome, RunOutcome::Completed { .. }), "{:?}", output.outcome);
    assert_eq!(h.read("secret.txt"), None, "the denied write never ran");
    let write_result = output
        .events
        .iter()
        .find_map(|e| match &e.kind {
            AgentEventKind::ToolCallResult { call_id, content, is_error } if call_id.as_str() == "c2" => {
                Some((content.clone(), *is_error))
            }
            _ => None,
        })
        .expect("the denied call has a result");
    assert!(write_result.1, "a denial is an error result");
    assert!(write_result.0.contains("capability policy"), "{}", write_result.0);

    let entries = audit.entries();
    let checks: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == AuditKind::CapabilityCheck)
        .map(|e| (e.tool.clone().unwrap_or_default(), e.is_allowed()))
        .collect();
    assert_eq!(checks, [("fs.read".to_owned(), true), ("fs.write".to_owned(), false)]);
    let approvals: Vec<_> = entries.iter().filter(|e| e.kind == AuditKind::Approval).collect();
    assert_eq!(approvals.len(), 1, "the person's approval of the read is audited");
    assert!(approvals[0].is_allowed());
    assert!(entries.iter().all(|e| e.run_id.as_deref() == Some(output.run_id.as_str())));
}

#[tokio::test]
async fn scripted_denied_before_approval() {
    denied_before_approval(Wire::Scripted).await;
}

#[tokio::test]
async fn anthropic_denied_before_approval() {
    denied_before_approval(Wire::Anthropic).await;
}

#[tokio::test]
async fn gemini_denied_before_approval() {
    denied_before_approval(Wire::Gemini).await;
}

/// A call an approval rule denies is refused without asking anyone, and the refusal is on
/// the audit log as a denial, with the rule's reason, the call and its arguments' digest.
async fn denied_by_policy_is_audited(wire: Wire) {
    let h = Harness::new(wire).await;
    h.write("notes.txt", "buy milk");
    h.push([h.call("c1", "fs.read", json!({"path": "notes.txt"})), MockTurn::text("I was not allowed to read.")]);
    let audit = Arc::new(MemoryAuditLog::new());
    let agent = h
        .engine()
        .agent("reader")
        .workspace(h.dir.path())
        .readonly_tools()
        .approval_rule(troupe_runtime::ApprovalRule::deny("fs.read"))
        .audit_log(audit.clone())
        .build()
        .expect("agent builds");
    let output = agent.run("Read the notes.").await.expect("the run ends");
    check_events(&output.events);
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert!(!output.events.iter().any(|e| matches!(e.kind, AgentEventKind::RunPaused { .. })), "nobody is asked");

    let entries = audit.entries();
    let denials: Vec<_> = entries.iter().filter(|e| e.kind == AuditKind::Denial).collect();
    assert_eq!(denials.len(), 1, "{entries:?}");
    let denial = denials[0];
    assert!(!denial.is_allowed());
    assert_eq!(denial.agent, "reader");
    assert_eq!(denial.tool.as_deref(), Some("fs.read"));
    assert_eq!(denial.call_id.as_deref(), Some("c1"));
    assert_eq!(denial.run_id.as_deref(), Some(output.run_id.as_str()));
    assert!(denial.reason.contains("fs.read"), "the rule is named: {}", denial.reason);
    assert_eq!(
        denial.arguments_digest.as_deref(),
        Some(troupe_tools::arguments_digest(&json!({"path": "notes.txt"})).as_str())
    );
}

#[tokio::test]
async fn scripted_denied_by_policy_is_audited() {
    denied_by_policy_is_audited(Wire::Scripted).await;
}

#[tokio::test]
async fn openai_chat_denied_by_policy_is_audited() {
    denied_by_policy_is_audited(Wire::OpenAiChat).await;
}

/// A person's decision on a command is audited with the sandbox the command runs in; a
/// decision on a tool that runs no command names none.
#[tokio::test]
async fn an_approved_command_is_audited_with_its_sandbox() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("notes.txt", "buy milk");
    h.push([
        h.call("c1", "fs.read", json!({"path": "notes.txt"})),
        h.call("c2", "shell", json!({"command": "echo confined"})),
        MockTurn::text("Done."),
    ]);
    let audit = Arc::new(MemoryAuditLog::new());
    let agent = h
        .engine()
        .agent("runner")
        .workspace(h.dir.path())
        .coding_tools()
        .approval_mode(ApprovalMode::Always)
        .audit_log(audit.clone())
        .build()
        .expect("agent builds");
    let mut handle = agent.start("Read the notes, then run a command.");
    while let Some(event) = futures::StreamExt::next(&mut handle.events).await {
        if let AgentEventKind::RunPaused { reason: troupe_core::PauseReason::Approval { call_id, .. } } = &event.kind {
            let approve = troupe_runtime::ApprovalDecision::Approve;
            let signal = troupe_runtime::Signal::Approval { call_id: call_id.clone(), decision: approve };
            handle.signals.send(signal).await.expect("the run takes signals");
        }
    }
    let output = handle.result.await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let approvals: Vec<(String, Option<String>)> = audit
        .entries()
        .into_iter()
        .filter(|e| e.kind == AuditKind::Approval)
        .map(|e| (e.tool.unwrap_or_default(), e.sandbox))
        .collect();
    assert_eq!(
        approvals,
        [("fs.read".to_owned(), None), ("shell".to_owned(), Some("workspace-write".to_owned()))],
        "the command's decision names its sandbox"
    );
}
