use super::*;
use crate::durable::evidence::{ActionCompleted, ActionStarted, ModelTurn};
use serde_json::json;
use troupe_core::{Message, RunId, StopReason, ToolCallId, Usage};
use troupe_run::{ApprovalDecision, Verdict};
use troupe_run::{PendingCall, Phase};
use troupe_store::{EvidenceChain, NewEvidence};
use troupe_tools::{Effect, ToolDeclaration};

fn declaration(name: &str, effect: Effect, idempotency: Idempotency) -> ToolDeclaration {
    let mut declaration = ToolDeclaration::new(name, "", json!({"type": "object"}), effect);
    declaration.idempotency = idempotency;
    declaration
}

fn call(id: &str, tool: &str) -> PendingCall {
    PendingCall {
        call_id: ToolCallId::new(id),
        tool: tool.to_owned(),
        arguments: json!({}),
        verdict: Some(Verdict::Allow),
        decision: None,
        result: None,
        uncertain: false,
    }
}

/// A stored state waiting on `calls`, read back as a resumed run reads its checkpoint.
fn stored_state(calls: Vec<PendingCall>, signal_cursor: i64) -> RunState {
    let mut value = serde_json::to_value(RunState::new(RunId::new("r"), "a", "demo", "demo")).expect("state");
    value["pending_calls"] = serde_json::to_value(calls).expect("calls");
    value["phase"] = serde_json::to_value(Phase::Tools).expect("phase");
    value["signal_cursor"] = json!(signal_cursor);
    serde_json::from_value(value).expect("a stored state")
}

fn state(calls: Vec<PendingCall>) -> RunState {
    stored_state(calls, 0)
}

fn log(entries: Vec<NewEvidence>) -> Vec<EvidenceEntry> {
    EvidenceChain::new("r").seal(entries, 1)
}

fn turn() -> NewEvidence {
    ModelTurn {
        iteration: 1,
        model: "demo".into(),
        message: Message::assistant("calling"),
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        cost_usd: 0.0,
        request: None,
    }
    .evidence()
}

#[test]
fn each_rule_of_the_plan() {
    let append = declaration("notes.append", Effect::WriteState, Idempotency::NonIdempotent);
    let put = declaration("kv.put", Effect::WriteState, Idempotency::Idempotent);
    let mut waiting = call("c5", "notes.append");
    waiting.verdict = Some(Verdict::Ask { reason: "writes".into() });
    let state = state(vec![
        call("c1", "notes.append"),
        call("c2", "notes.append"),
        call("c3", "kv.put"),
        call("c4", "notes.append"),
        waiting,
    ]);
    let evidence = log(vec![
        turn(),
        ActionStarted::evidence("c1", &append, &json!({})),
        ActionCompleted::evidence("c1", &append, "appended line 1", false),
        ActionStarted::evidence("c2", &append, &json!({})),
        ActionStarted::evidence("c3", &put, &json!({})),
    ]);
    let plan = plan_resume(&state, &evidence, &[]);
    let resumes: Vec<_> = plan.calls.iter().map(|c| c.resume.clone()).collect();
    assert_eq!(
        resumes,
        [
            CallResume::Replay {
                content: "(The call completed before an interruption; its result was kept in part.)\nappended line 1"
                    .into(),
                is_error: false,
                attachments: Vec::new(),
            },
            CallResume::AskPerson,
            CallResume::Retry,
            CallResume::NotStarted,
            CallResume::KeepWaiting,
        ]
    );
    assert!(plan.needs_person());

    let mut resumed = state.clone();
    plan.apply(&mut resumed);
    assert!(resumed.pending_calls()[0].result.is_some(), "a completed call is replayed, not run");
    assert!(resumed.pending_calls()[1].uncertain && resumed.pending_calls()[1].is_awaiting());
    assert!(resumed.pending_calls()[2].may_run(), "an idempotent call is retried");
    assert!(resumed.pending_calls()[3].may_run());
    assert!(resumed.pending_calls()[4].is_awaiting());
}

#[test]
fn a_completed_calls_attachments_are_kept_and_given_back_unless_its_evidence_is_not_kept() {
    let image = troupe_core::ContentBlock::Image {
        source: troupe_core::ImageSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
    };
    let outcome = troupe_tools::ToolResultOutcome::success(
        troupe_tools::ToolOutput::text("drew it").with_attachment(image.clone()),
        std::time::Duration::ZERO,
    );
    // The attachments a resume gives back for the completed call of a tool kept so.
    let resumed = |capture| {
        let mut draw = declaration("chart.draw", Effect::WriteState, Idempotency::NonIdempotent);
        draw.evidence = capture;
        let evidence = log(vec![
            turn(),
            ActionStarted::evidence("c1", &draw, &json!({})),
            ActionCompleted::of_outcome("c1", &draw, &outcome),
        ]);
        match plan_resume(&state(vec![call("c1", "chart.draw")]), &evidence, &[]).calls.remove(0).resume {
            CallResume::Replay { attachments, .. } => attachments,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(resumed(troupe_tools::EvidenceCapture::Summary), [image], "the model is shown what the call gave");
    assert!(
        resumed(troupe_tools::EvidenceCapture::Redacted).is_empty(),
        "a redacted tool's evidence keeps no attachment"
    );
}

#[test]
fn evidence_of_an_earlier_turn_does_not_count() {
    let append = declaration("notes.append", Effect::WriteState, Idempotency::NonIdempotent);
    // A provider that reuses call ids across turns: `c1` completed in the turn before.
    let evidence = log(vec![
        turn(),
        ActionStarted::evidence("c1", &append, &json!({})),
        ActionCompleted::evidence("c1", &append, "done", false),
        turn(),
    ]);
    let plan = plan_resume(&state(vec![call("c1", "notes.append")]), &evidence, &[]);
    assert_eq!(plan.calls[0].resume, CallResume::NotStarted);
}

#[test]
fn a_person_decides_an_uncertain_call() {
    let append = declaration("notes.append", Effect::WriteState, Idempotency::NonIdempotent);
    let evidence = log(vec![turn(), ActionStarted::evidence("c1", &append, &json!({}))]);
    let mut skipped = state(vec![call("c1", "notes.append")]);
    plan_resume(&skipped, &evidence, &[]).apply(&mut skipped);
    assert_eq!(skipped.awaiting_approval()[0].reason, UNCERTAIN_REASON);
    let mut retried = skipped.clone();

    skipped
        .apply_signal(crate::Signal::Approval {
            call_id: ToolCallId::new("c1"),
            decision: ApprovalDecision::Reject { reason: None },
        })
        .expect("a decision for the waiting call");
    let result = skipped.pending_calls()[0].result.clone().expect("skipped");
    assert!(result.is_error && result.content.contains("may or may not"));

    retried
        .apply_signal(crate::Signal::Approval { call_id: ToolCallId::new("c1"), decision: ApprovalDecision::Approve })
        .expect("a decision for the waiting call");
    assert!(retried.pending_calls()[0].may_run());
}

#[test]
fn signals_come_in_order_once_after_the_cursor() {
    let signal = |seq: i64| StoredSignal {
        run_id: "r".into(),
        seq,
        kind: "user_message".into(),
        payload: json!({"type": "user_message", "text": seq.to_string()}),
        sent_at: 0,
        consumed_at: None,
    };
    let state = stored_state(Vec::new(), 2);
    let plan = plan_resume(&state, &[], &[signal(4), signal(1), signal(3), signal(3), signal(2)]);
    assert_eq!(plan.signals.iter().map(|s| s.seq).collect::<Vec<_>>(), [3, 4]);
}
