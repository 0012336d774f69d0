use super::*;
use crate::launcher::RunEnd;
use serde_json::json;
use troupe_core::{AgentId, ConversationId, ToolCallId};

const ROOT: &str = "run_root";

pub(super) struct Script {
    seq: u64,
}

impl Script {
    pub(super) fn new() -> Self {
        Script { seq: 0 }
    }

    fn at(&mut self, run: &str, agent: &str, parent: Option<&str>) -> Attribution {
        self.seq += 1;
        let mut attribution = Attribution::now(AgentId::new(agent), RunId::new(run), self.seq);
        attribution.conversation_id = Some(ConversationId::new("thread"));
        attribution.parent_run_id = parent.map(RunId::new);
        attribution
    }

    pub(super) fn root(&mut self, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.at(ROOT, "coder", None), kind)
    }

    fn member(&mut self, run: &str, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.at(run, "reviewer", Some(ROOT)), kind)
    }
}

pub(super) fn projection() -> Projection {
    Projection::new("thread", "agui_run", RunId::new(ROOT))
}

/// Everything the projection says for `events`, `RUN_STARTED` first.
fn project(events: &[AgentEvent]) -> Vec<Event> {
    let mut projection = projection();
    let mut out = projection.start(&[]);
    for event in events {
        out.extend(projection.next(event));
    }
    out
}

pub(super) fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

pub(super) fn delta(message: &str, text: &str) -> AgentEventKind {
    AgentEventKind::MessageDelta { message_id: message.into(), delta: text.into() }
}

fn reasoning(message: &str, text: &str) -> AgentEventKind {
    AgentEventKind::ReasoningDelta { message_id: message.into(), delta: text.into() }
}

pub(super) fn finished(output: Option<&str>) -> AgentEventKind {
    AgentEventKind::RunFinished {
        outcome: RunOutcomeKind::Completed,
        output: output.map(str::to_owned),
        usage: Usage::default(),
        cost_usd: 0.0,
    }
}

fn approval(call: &str) -> AgentEventKind {
    AgentEventKind::RunPaused {
        reason: PauseReason::Approval {
            call_id: ToolCallId::new(call),
            tool: "fs.write".into(),
            arguments: json!({"path": "a.md"}),
            reason: "writes files".into(),
        },
    }
}

/// The ordering rules `@ag-ui/client`'s verifier enforces, so that every unit test
/// checks them too: `RUN_STARTED` first and once, nothing after the end, content only
/// inside its opener, nothing opened twice, nothing open at the end.
pub(super) fn verify(events: &[Event]) {
    use std::collections::HashSet;
    type Key = (Option<String>, String);
    let mut text: HashSet<Key> = HashSet::new();
    let mut spans: HashSet<Key> = HashSet::new();
    let mut reasoning: HashSet<Key> = HashSet::new();
    let mut tools: HashSet<Key> = HashSet::new();
    let mut steps: HashSet<Key> = HashSet::new();
    let mut subagents: HashSet<String> = HashSet::new();
    let mut seen_subagents: HashSet<String> = HashSet::new();
    let mut ended = false;
    let open = |set: &mut HashSet<Key>, key: Key, what: &str| {
        assert!(set.insert(key.clone()), "{what} {key:?} opened twice in {events:#?}")
    };
    let inside = |set: &HashSet<Key>, key: &Key, what: &str| {
        assert!(set.contains(key), "{what} {key:?} is not open in {events:#?}")
    };
    let close = |set: &mut HashSet<Key>, key: &Key, what: &str| {
        assert!(set.remove(key), "{what} {key:?} closed but not open in {events:#?}")
    };
    for (n, event) in events.iter().enumerate() {
        assert!(!ended, "event {n} ({}) follows the end: {events:#?}", event.kind());
        if n == 0 {
            assert_eq!(event.kind(), "RUN_STARTED", "the first event");
        } else {
            assert_ne!(event.kind(), "RUN_STARTED", "a second RUN_STARTED");
        }
        match event {
            Event::TextMessageStart { message_id, subagent_run_id, .. } => {
                open(&mut text, (subagent_run_id.clone(), message_id.clone()), "text");
            }
            Event::TextMessageContent { message_id, subagent_run_id, delta } => {
                assert!(!delta.is_empty());
                inside(&text, &(subagent_run_id.clone(), message_id.clone()), "text");
            }
            Event::TextMessageEnd { message_id, subagent_run_id } => {
                close(&mut text, &(subagent_run_id.clone(), message_id.clone()), "text");
            }
            Event::ReasoningStart { message_id, subagent_run_id } => {
                open(&mut spans, (subagent_run_id.clone(), message_id.clone()), "span");
            }
            Event::ReasoningEnd { message_id, subagent_run_id } => {
                close(&mut spans, &(subagent_run_id.clone(), message_id.clone()), "span");
            }
            Event::ReasoningMessageStart { message_id, subagent_run_id, .. } => {
                open(&mut reasoning, (subagent_run_id.clone(), message_id.clone()), "reasoning");
            }
            Event::ReasoningMessageContent { message_id, subagent_run_id, delta } => {
                assert!(!delta.is_empty());
                inside(&reasoning, &(subagent_run_id.clone(), message_id.clone()), "reasoning");
            }
            Event::ReasoningMessageEnd { message_id, subagent_run_id } => {
                close(&mut reasoning, &(subagent_run_id.clone(), message_id.clone()), "reasoning");
            }
            Event::ToolCallStart { tool_call_id, subagent_run_id, .. } => {
                open(&mut tools, (subagent_run_id.clone(), tool_call_id.clone()), "tool call");
            }
            Event::ToolCallArgs { tool_call_id, subagent_run_id, .. } => {
                inside(&tools, &(subagent_run_id.clone(), tool_call_id.clone()), "tool call");
            }
            Event::ToolCallEnd { tool_call_id, subagent_run_id } => {
                close(&mut tools, &(subagent_run_id.clone(), tool_call_id.clone()), "tool call");
            }
            Event::StepStarted { step_name, subagent_run_id } => {
                open(&mut steps, (subagent_run_id.clone(), step_name.clone()), "step");
            }
            Event::StepFinished { step_name, subagent_run_id } => {
                close(&mut steps, &(subagent_run_id.clone(), step_name.clone()), "step");
            }
            Event::SubagentStarted { subagent_run_id, parent_subagent_run_id, .. } => {
                assert!(seen_subagents.insert(subagent_run_id.clone()), "subagent started twice");
                if let Some(parent) = parent_subagent_run_id {
                    assert!(seen_subagents.contains(parent), "unknown parent subagent");
                }
                subagents.insert(subagent_run_id.clone());
            }
            Event::SubagentFinished { subagent_run_id, .. } | Event::SubagentError { subagent_run_id, .. } => {
                assert!(subagents.remove(subagent_run_id), "subagent {subagent_run_id} not active");
            }
            Event::RunFinished { .. } => {
                for (set, what) in
                    [(&text, "text"), (&spans, "span"), (&reasoning, "reasoning"), (&tools, "tool"), (&steps, "step")]
                {
                    assert!(set.is_empty(), "{what} still open at RUN_FINISHED: {set:?}");
                }
                assert!(subagents.is_empty(), "subagents still active at RUN_FINISHED");
                ended = true;
            }
            Event::RunError { .. } => ended = true,
            Event::MessagesSnapshot { messages } => verify_snapshot(messages),
            _ => {}
        }
    }
}

/// A messages snapshot names each message once, and a result never comes before the
/// assistant message holding its call.
fn verify_snapshot(messages: &[super::Message]) {
    use super::Message;
    let mut ids = std::collections::HashSet::new();
    for (at, message) in messages.iter().enumerate() {
        let id = match message {
            Message::Assistant(m) => m.id.clone(),
            Message::Tool(m) => m.id.clone(),
            Message::User(m) => m.id.clone(),
            Message::System(m) | Message::Developer(m) => m.id.clone(),
            Message::Activity(_) | Message::Reasoning(_) => continue,
        };
        assert!(ids.insert(id.clone()), "message {id} twice in {messages:#?}");
        if let Message::Tool(result) = message {
            let holder = messages.iter().position(
                |m| matches!(m, Message::Assistant(a) if a.tool_calls.iter().any(|c| c.id == result.tool_call_id)),
            );
            assert!(holder.is_none_or(|h| h < at), "result {id} before its call in {messages:#?}");
        }
    }
}

#[test]
fn a_text_answer_is_one_message_between_run_started_and_run_finished() {
    let mut s = Script::new();
    let events = project(&[
        s.root(AgentEventKind::RunStarted { instruction: "hi".into(), model: "anthropic/mock".into() }),
        s.root(AgentEventKind::StepStarted { step: 1 }),
        s.root(AgentEventKind::MessageStart { message_id: "m1".into(), role: Role::Assistant }),
        s.root(delta("m1", "Hel")),
        s.root(delta("m1", "")),
        s.root(delta("m1", "lo.")),
        s.root(AgentEventKind::MessageEnd { message_id: "m1".into() }),
        s.root(AgentEventKind::Usage {
            model: "anthropic/mock".into(),
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
            cost_usd: Some(0.25),
        }),
        s.root(AgentEventKind::StepFinished { step: 1 }),
        s.root(finished(Some("Hello."))),
        s.root(AgentEventKind::Custom { name: "late".into(), value: json!(1) }),
    ]);
    verify(&events);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "CUSTOM",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "CUSTOM",
            "STEP_FINISHED",
            "CUSTOM",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        serde_json::to_value(&events[0]).expect("json"),
        json!({"type": "RUN_STARTED", "threadId": "thread", "runId": "agui_run", "protocolVersion": "1.0"})
    );
    assert!(
        matches!(&events[1], Event::Custom { name, value, .. } if name == RUN_STARTED_EVENT && value["model"] == "anthropic/mock" && value["runId"] == ROOT)
    );
    assert!(matches!(&events[2], Event::StepStarted { step_name, .. } if step_name == "step 1"));
    assert!(
        matches!(&events[3], Event::TextMessageStart { message_id, role: Some(TextRole::Assistant), .. } if message_id == "m1")
    );
    assert!(
        matches!(&events[7], Event::Custom { name, value, .. } if name == USAGE_EVENT && value["costUsd"] == 0.25 && value["inputTokens"] == 10)
    );
    assert!(
        matches!(&events[9], Event::Custom { name, value, .. } if name == RUN_FINISHED_EVENT && value["outcome"] == "completed")
    );
    let Event::RunFinished { result, outcome, usage, .. } = &events[10] else { panic!("RUN_FINISHED last") };
    assert_eq!(result, &Some(json!("Hello.")));
    assert_eq!(outcome, &None, "success is the absent outcome");
    assert_eq!(usage.len(), 1);
    assert_eq!((usage[0].provider.as_deref(), usage[0].model.as_deref()), (Some("anthropic"), Some("mock")));
    assert_eq!(usage[0].total_tokens, 15);
}

#[test]
fn reasoning_and_text_never_overlap_and_reopen_as_they_alternate() {
    let mut s = Script::new();
    let events = project(&[
        s.root(AgentEventKind::MessageStart { message_id: "m1".into(), role: Role::Assistant }),
        s.root(reasoning("m1", "think")),
        s.root(reasoning("m1", "ing")),
        s.root(delta("m1", "Answer")),
        s.root(reasoning("m1", "more")),
        s.root(delta("m1", " goes on")),
        s.root(AgentEventKind::MessageEnd { message_id: "m1".into() }),
        s.root(AgentEventKind::MessageStart { message_id: "m2".into(), role: Role::Assistant }),
        s.root(reasoning("m2", "again")),
        s.root(AgentEventKind::MessageEnd { message_id: "m2".into() }),
        s.root(finished(None)),
    ]);
    verify(&events);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "CUSTOM",
            "RUN_FINISHED",
        ]
    );
    let reasoning_ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ReasoningMessageStart { message_id, .. } => Some(message_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning_ids, ["m1-reasoning", "m1-reasoning-2", "m2-reasoning"], "a fresh id for each span");
    let text_ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageStart { message_id, .. } => Some(message_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text_ids, ["m1", "m1"], "the message's text goes on under its own id");
    let Event::RunFinished { result, .. } = events.last().expect("events") else { panic!("ends finished") };
    assert_eq!(result, &None);
}

#[test]
fn tool_calls_close_open_text_and_results_follow_their_call() {
    let mut s = Script::new();
    let call = ToolCallId::new("c1");
    let events = project(&[
        s.root(AgentEventKind::StepStarted { step: 1 }),
        s.root(delta("m1", "Let me write it.")),
        s.root(AgentEventKind::ToolCallStart {
            call_id: call.clone(),
            tool: "fs.write".into(),
            parent_message_id: Some("m1".into()),
        }),
        s.root(AgentEventKind::ToolCallArgs { call_id: call.clone(), delta: "{\"path\":".into() }),
        s.root(AgentEventKind::ToolCallArgs { call_id: call.clone(), delta: String::new() }),
        s.root(AgentEventKind::ToolCallArgs { call_id: call.clone(), delta: "\"a.md\"}".into() }),
        s.root(AgentEventKind::ToolCallArgs { call_id: ToolCallId::new("never-started"), delta: "{}".into() }),
        s.root(AgentEventKind::ToolCallEnd { call_id: call.clone() }),
        s.root(AgentEventKind::ToolCallEnd { call_id: call.clone() }),
        s.root(AgentEventKind::MessageEnd { message_id: "m1".into() }),
        s.root(AgentEventKind::ToolCallResult { call_id: call.clone(), content: "wrote a.md".into(), is_error: false }),
        s.root(AgentEventKind::ToolCallResult {
            call_id: ToolCallId::new("c2"),
            content: "no such tool".into(),
            is_error: true,
        }),
        s.root(AgentEventKind::StepFinished { step: 1 }),
        s.root(finished(Some("done"))),
    ]);
    verify(&events);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TOOL_CALL_RESULT",
            "STEP_FINISHED",
            "CUSTOM",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        serde_json::to_value(&events[5]).expect("json"),
        json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "fs.write", "parentMessageId": "m1"})
    );
    assert_eq!(
        serde_json::to_value(&events[9]).expect("json"),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "c1-result", "toolCallId": "c1", "content": "wrote a.md", "role": "tool"})
    );
    assert!(matches!(&events[10], Event::ToolCallResult { metadata: Some(m), .. } if m["isError"] == true));
}

#[test]
fn an_approval_pause_ends_the_run_with_an_interrupt_after_closing_everything() {
    let mut s = Script::new();
    let call = ToolCallId::new("call_w");
    let mut projection = projection();
    let mut events = projection.start(&[]);
    for event in [
        s.root(AgentEventKind::StepStarted { step: 1 }),
        s.root(reasoning("m1", "should write")),
        s.root(AgentEventKind::ToolCallStart {
            call_id: call.clone(),
            tool: "fs.write".into(),
            parent_message_id: None,
        }),
        s.root(approval("call_w")),
        s.root(approval("call_x")),
        s.root(AgentEventKind::StepFinished { step: 1 }),
    ] {
        events.extend(projection.next(&event));
    }
    verify(&events);
    assert!(projection.is_finished());
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TOOL_CALL_START",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    let finished = serde_json::to_value(events.last().expect("events")).expect("json");
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(finished["outcome"]["type"], "interrupt");
    assert_eq!(finished["outcome"]["interrupts"].as_array().map(Vec::len), Some(1), "one interrupt per run");
    assert_eq!(interrupt["id"], "call_w");
    assert_eq!(interrupt["reason"], "approval");
    assert_eq!(interrupt["toolCallId"], "call_w");
    assert_eq!(interrupt["message"], "`fs.write`: writes files");
    assert_eq!(interrupt["metadata"], json!({"tool": "fs.write", "arguments": {"path": "a.md"}}));
    assert_eq!(interrupt["responseSchema"], approval_response_schema());
    assert!(finished.get("result").is_none());
    assert!(projection.end(None).is_empty(), "nothing after the end");
}

#[test]
fn a_resumed_run_reopens_the_open_step_and_skips_answered_pauses() {
    let mut s = Script::new();
    let history = vec![
        s.root(AgentEventKind::RunStarted { instruction: "write".into(), model: "m".into() }),
        s.root(AgentEventKind::StepStarted { step: 1 }),
        s.root(AgentEventKind::StepFinished { step: 1 }),
        s.root(AgentEventKind::StepStarted { step: 2 }),
        s.root(AgentEventKind::ToolCallStart {
            call_id: ToolCallId::new("a"),
            tool: "fs.write".into(),
            parent_message_id: None,
        }),
        s.root(AgentEventKind::ToolCallEnd { call_id: ToolCallId::new("a") }),
        s.root(approval("a")),
    ];
    let mut projection = projection().with_answered(["a".to_owned(), "b".to_owned()]);
    let mut events = projection.start(&history);
    for event in [
        s.root(approval("b")),
        s.root(AgentEventKind::ToolCallResult { call_id: ToolCallId::new("a"), content: "ok".into(), is_error: false }),
        s.root(AgentEventKind::StepFinished { step: 2 }),
        s.root(AgentEventKind::StepStarted { step: 3 }),
        s.root(delta("m3", "Done.")),
        s.root(AgentEventKind::MessageEnd { message_id: "m3".into() }),
        s.root(approval("c")),
    ] {
        events.extend(projection.next(&event));
    }
    verify(&events);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_RESULT",
            "STEP_FINISHED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert!(matches!(&events[1], Event::StepStarted { step_name, .. } if step_name == "step 2"));
    let Event::RunFinished { outcome: Some(RunOutcome::Interrupt { interrupts }), .. } = &events[9] else {
        panic!("ends with the next interrupt")
    };
    assert_eq!(interrupts[0].id, "c");
}

#[test]
fn a_step_finished_that_was_never_started_here_is_dropped() {
    let mut s = Script::new();
    let events = project(&[s.root(AgentEventKind::StepFinished { step: 4 }), s.root(finished(None))]);
    verify(&events);
    assert_eq!(kinds(&events), ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]);
}

#[test]
fn failures_and_cancellation_end_the_run_as_the_protocol_says() {
    let mut s = Script::new();
    let failed = project(&[
        s.root(delta("m1", "partial")),
        s.root(AgentEventKind::RunError { message: "the model refused".into(), code: Some("provider".into()) }),
        s.root(finished(None)),
    ]);
    verify(&failed);
    assert_eq!(
        kinds(&failed),
        ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_ERROR"]
    );
    assert_eq!(
        serde_json::to_value(failed.last().expect("events")).expect("json"),
        json!({"type": "RUN_ERROR", "message": "the model refused", "code": "provider"})
    );

    let uncoded = project(&[s.root(AgentEventKind::RunError { message: "boom".into(), code: None })]);
    assert!(matches!(uncoded.last(), Some(Event::RunError { code: Some(code), .. }) if code == "run_failed"));

    let cancelled = project(&[s.root(AgentEventKind::RunFinished {
        outcome: RunOutcomeKind::Cancelled,
        output: None,
        usage: Usage::default(),
        cost_usd: 0.0,
    })]);
    verify(&cancelled);
    assert!(matches!(cancelled.last(), Some(Event::RunFinished { outcome: Some(RunOutcome::Cancelled), .. })));
}

#[test]
fn a_stream_that_stops_early_ends_from_the_runs_end_or_with_an_error() {
    let mut s = Script::new();
    let open = [s.root(AgentEventKind::StepStarted { step: 1 }), s.root(delta("m1", "so"))];

    let mut projection = projection();
    let mut events = projection.start(&[]);
    for event in &open {
        events.extend(projection.next(event));
    }
    events.extend(projection.end(None));
    verify(&events);
    assert!(matches!(events.last(), Some(Event::RunError { code: Some(code), .. }) if code == "stream_closed"));

    for (end, expected) in [
        (RunEnd::failed("it broke"), "RUN_ERROR"),
        (
            RunEnd {
                outcome: RunOutcomeKind::Completed,
                output: Some("so".into()),
                error: None,
                usage: Usage::default(),
                cost_usd: 0.0,
            },
            "RUN_FINISHED",
        ),
    ] {
        let mut projection = super::Projection::new("thread", "agui_run", RunId::new(ROOT));
        let mut events = projection.start(&[]);
        for event in &open {
            events.extend(projection.next(event));
        }
        events.extend(projection.end(Some(&end)));
        verify(&events);
        assert_eq!(events.last().map(Event::kind), Some(expected));
    }
}

#[test]
fn state_usage_retries_fallbacks_artifacts_and_custom_events_are_translated() {
    let mut s = Script::new();
    let events = project(&[
        s.root(AgentEventKind::StateSnapshot { state: json!({"count": 1}) }),
        s.root(AgentEventKind::StateDelta { patch: json!([{"op": "replace", "path": "/count", "value": 2}]) }),
        s.root(AgentEventKind::Retrying { attempt: 1, delay_ms: 250, reason: "overloaded".into() }),
        s.root(AgentEventKind::ModelFallback { from: "a/x".into(), to: "b/y".into(), reason: "overloaded".into() }),
        s.root(AgentEventKind::Artifact {
            name: "report.md".into(),
            mime_type: "text/markdown".into(),
            content: "# R".into(),
        }),
        s.root(AgentEventKind::Custom { name: "compacted".into(), value: json!({"removed": 3}) }),
        s.root(AgentEventKind::Usage {
            model: "a/x".into(),
            usage: Usage { input_tokens: 1, ..Usage::default() },
            cost_usd: None,
        }),
        s.root(AgentEventKind::Usage {
            model: "a/x".into(),
            usage: Usage { input_tokens: 2, ..Usage::default() },
            cost_usd: None,
        }),
        s.root(AgentEventKind::Usage {
            model: "b/y".into(),
            usage: Usage { output_tokens: 4, ..Usage::default() },
            cost_usd: None,
        }),
        s.root(finished(None)),
    ]);
    verify(&events);
    let values: Vec<serde_json::Value> = events.iter().map(|e| serde_json::to_value(e).expect("json")).collect();
    assert_eq!(values[1], json!({"type": "STATE_SNAPSHOT", "snapshot": {"count": 1}}));
    assert_eq!(values[2], json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/count", "value": 2}]}));
    assert_eq!(
        values[3],
        json!({"type": "CUSTOM", "name": "troupe.retrying", "value": {"attempt": 1, "delayMs": 250, "reason": "overloaded"}})
    );
    assert_eq!(
        values[4],
        json!({"type": "CUSTOM", "name": "troupe.model_fallback", "value": {"from": "a/x", "to": "b/y", "reason": "overloaded"}})
    );
    assert_eq!(
        values[5],
        json!({"type": "CUSTOM", "name": "troupe.artifact", "value": {"name": "report.md", "mimeType": "text/markdown", "content": "# R"}})
    );
    assert_eq!(values[6], json!({"type": "CUSTOM", "name": "compacted", "value": {"removed": 3}}));
    let Event::RunFinished { usage, .. } = events.last().expect("events") else { panic!("finished") };
    assert_eq!(usage.len(), 2, "one entry per model");
    assert_eq!(usage[0].input_tokens, 3, "summed over the model's calls");
    assert_eq!(usage[1].output_tokens, 4);
}

#[test]
fn team_members_are_subagents_with_their_own_lanes() {
    let mut s = Script::new();
    let events = project(&[
        s.root(AgentEventKind::RunStarted { instruction: "review".into(), model: "team".into() }),
        s.member("run_a", AgentEventKind::RunStarted { instruction: "look".into(), model: "m".into() }),
        s.member("run_a", AgentEventKind::StepStarted { step: 1 }),
        s.member("run_b", AgentEventKind::StepStarted { step: 1 }),
        s.member("run_a", delta("run_a-m1", "A says")),
        s.member("run_b", delta("run_b-m1", "B says")),
        s.member("run_a", AgentEventKind::MessageEnd { message_id: "run_a-m1".into() }),
        s.member("run_a", AgentEventKind::StepFinished { step: 1 }),
        s.member("run_a", finished(Some("A done"))),
        s.member("run_b", AgentEventKind::RunError { message: "B broke".into(), code: None }),
        s.member("run_c", delta("run_c-m1", "C never finishes")),
        s.root(finished(Some("all done"))),
    ]);
    verify(&events);
    let starts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStarted { subagent_run_id, name, .. } if name == "reviewer" => {
                Some(subagent_run_id.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(starts, ["run_a", "run_b", "run_c"]);
    assert!(events.iter().any(|e| matches!(e, Event::SubagentFinished { subagent_run_id, result: Some(r), .. } if subagent_run_id == "run_a" && r == "A done")));
    assert!(events.iter().any(|e| matches!(e, Event::SubagentError { subagent_run_id, message, .. } if subagent_run_id == "run_b" && message == "B broke")));
    assert!(
        events.iter().any(|e| matches!(e, Event::TextMessageContent { subagent_run_id: Some(s), .. } if s == "run_b"))
    );
    assert_eq!(events.iter().filter(|e| e.kind() == "RUN_FINISHED").count(), 1, "a member's end is not the run's");
    assert!(matches!(events.last(), Some(Event::RunFinished { result: Some(r), .. }) if r == "all done"));
}

#[test]
fn a_member_waiting_for_approval_suspends_the_subagents() {
    let mut s = Script::new();
    let events = project(&[
        s.member("run_a", AgentEventKind::StepStarted { step: 1 }),
        s.member("run_b", delta("run_b-m1", "working")),
        s.member("run_a", approval("call_a")),
    ]);
    verify(&events);
    let suspended: Vec<(String, Vec<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentFinished {
                subagent_run_id,
                outcome: Some(SubagentOutcome::Suspended { interrupt_ids }),
                ..
            } => Some((subagent_run_id.clone(), interrupt_ids.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(suspended, [("run_a".to_owned(), vec!["call_a".to_owned()]), ("run_b".to_owned(), Vec::new())]);
    let Some(Event::RunFinished { outcome: Some(RunOutcome::Interrupt { interrupts }), .. }) = events.last() else {
        panic!("ends with the interrupt")
    };
    assert_eq!(interrupts[0].subagent_run_id.as_deref(), Some("run_a"));
}

#[test]
fn other_pauses_become_interrupts_too() {
    let mut s = Script::new();
    let uncertain = project(&[s.root(AgentEventKind::RunPaused {
        reason: PauseReason::UncertainAction {
            call_id: ToolCallId::new("c9"),
            tool: "shell".into(),
            arguments: json!({}),
        },
    })]);
    let Some(Event::RunFinished { outcome: Some(RunOutcome::Interrupt { interrupts }), .. }) = uncertain.last() else {
        panic!("an interrupt")
    };
    assert_eq!((interrupts[0].id.as_str(), interrupts[0].reason.as_str()), ("c9", "uncertain_action"));

    let input =
        project(&[s.root(AgentEventKind::RunPaused { reason: PauseReason::Input { prompt: "Which file?".into() } })]);
    let Some(Event::RunFinished { outcome: Some(RunOutcome::Interrupt { interrupts }), .. }) = input.last() else {
        panic!("an interrupt")
    };
    assert_eq!(interrupts[0].reason, "input");
    assert_eq!(interrupts[0].message.as_deref(), Some("Which file?"));
    assert!(interrupts[0].id.starts_with(ROOT));
}

/// A small deterministic generator: many random event sequences, each checked against
/// the client's ordering rules.
#[test]
fn any_sequence_of_troupe_events_projects_to_a_valid_ag_ui_stream() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..500 {
        let mut s = Script::new();
        let mut events = Vec::new();
        for _ in 0..next(30) {
            let run = ["run_root", "run_a", "run_b"][next(3) as usize];
            let message = ["m1", "m2"][next(2) as usize];
            let call = ToolCallId::new(["c1", "c2"][next(2) as usize]);
            let kind = match next(13) {
                0 => delta(message, "t"),
                1 => reasoning(message, "r"),
                2 => AgentEventKind::MessageEnd { message_id: message.into() },
                3 => AgentEventKind::ToolCallStart {
                    call_id: call,
                    tool: "t".into(),
                    parent_message_id: Some(message.into()),
                },
                4 => AgentEventKind::ToolCallArgs { call_id: call, delta: "{}".into() },
                5 => AgentEventKind::ToolCallEnd { call_id: call },
                6 => AgentEventKind::ToolCallResult { call_id: call, content: "x".into(), is_error: false },
                7 => AgentEventKind::StepStarted { step: next(3) as u32 },
                8 => AgentEventKind::StepFinished { step: next(3) as u32 },
                9 => AgentEventKind::MessageStart { message_id: message.into(), role: Role::Assistant },
                10 => finished(None),
                11 => AgentEventKind::RunError { message: "e".into(), code: None },
                _ => approval("c1"),
            };
            let event = if run == ROOT { s.root(kind) } else { s.member(run, kind) };
            events.push(event);
        }
        // Half the streams keep the thread for a messages snapshot, and some resume
        // after a part of the run already seen.
        let (mut projection, seen) = match next(4) {
            0 => (projection(), 0),
            1 => (projection().with_messages(Vec::new()), 0),
            _ => (projection().with_messages(Vec::new()), next(events.len() as u64 + 1) as usize),
        };
        let mut out = projection.start(&events[..seen]);
        for event in &events[seen..] {
            out.extend(projection.next(event));
        }
        out.extend(projection.end(None));
        verify(&out);
        assert!(out.last().is_some_and(Event::is_terminal), "every stream ends");
    }
}
