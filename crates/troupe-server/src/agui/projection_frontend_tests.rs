//! The projection's part in what a CopilotKit-style frontend needs: client tools'
//! interrupts, the shared state on a resumed run, and the messages snapshot.

use super::tests::{Script, delta, finished, kinds, projection, verify};
use super::*;
use serde_json::json;
use troupe_core::ToolCallId;

fn client_call(call: &str) -> AgentEventKind {
    AgentEventKind::RunPaused {
        reason: PauseReason::Approval {
            call_id: ToolCallId::new(call),
            tool: "pick_color".into(),
            arguments: json!({"for": "wall"}),
            reason: troupe_runtime::CLIENT_TOOL_REASON.into(),
        },
    }
}

fn call_events(script: &mut Script, call: &str) -> Vec<AgentEvent> {
    vec![
        script.root(AgentEventKind::ToolCallStart {
            call_id: ToolCallId::new(call),
            tool: "pick_color".into(),
            parent_message_id: Some("m1".into()),
        }),
        script
            .root(AgentEventKind::ToolCallArgs { call_id: ToolCallId::new(call), delta: "{\"for\":\"wall\"}".into() }),
        script.root(AgentEventKind::ToolCallEnd { call_id: ToolCallId::new(call) }),
    ]
}

fn user(text: &str) -> Vec<Message> {
    serde_json::from_value(json!([{"id": "u1", "role": "user", "content": text}])).expect("messages")
}

#[test]
fn a_client_tools_call_ends_the_run_with_a_client_tool_interrupt() {
    let mut script = Script::new();
    let mut events = vec![script.root(delta("m1", "Which color?"))];
    events.extend(call_events(&mut script, "c1"));
    events.push(script.root(client_call("c1")));
    let mut projection = projection();
    let mut out = projection.start(&[]);
    for event in &events {
        out.extend(projection.next(event));
    }
    verify(&out);
    let Some(Event::RunFinished { outcome: Some(RunOutcome::Interrupt { interrupts }), .. }) = out.last() else {
        panic!("an interrupt: {out:#?}")
    };
    let value = serde_json::to_value(&interrupts[0]).expect("json");
    assert_eq!(value["reason"], CLIENT_TOOL_INTERRUPT);
    assert_eq!((value["id"].as_str(), value["toolCallId"].as_str()), (Some("c1"), Some("c1")));
    assert_eq!(value["metadata"], json!({"tool": "pick_color", "arguments": {"for": "wall"}}));
    assert!(value.get("responseSchema").is_none(), "the payload is the tool's result, whatever it is");
    assert!(!kinds(&out).contains(&"MESSAGES_SNAPSHOT"), "none unless asked for");
}

#[test]
fn the_messages_snapshot_before_the_end_holds_the_clients_messages_and_what_the_run_added() {
    let mut script = Script::new();
    let mut events = vec![script.root(delta("m1", "Which color?"))];
    events.extend(call_events(&mut script, "c1"));
    events.push(script.root(AgentEventKind::ToolCallResult {
        call_id: ToolCallId::new("c1"),
        content: "teal".into(),
        is_error: false,
    }));
    events.push(script.root(delta("m2", "Teal it is.")));
    events.push(script.root(finished(Some("Teal it is."))));
    let mut projection = projection().with_messages(user("paint it"));
    let mut out = projection.start(&[]);
    for event in &events {
        out.extend(projection.next(event));
    }
    verify(&out);
    let kinds = kinds(&out);
    assert_eq!(&kinds[kinds.len() - 2..], ["MESSAGES_SNAPSHOT", "RUN_FINISHED"], "{kinds:?}");
    let Event::MessagesSnapshot { messages } = &out[out.len() - 2] else { panic!("a snapshot") };
    assert_eq!(
        serde_json::to_value(messages).expect("json"),
        json!([
            {"id": "u1", "role": "user", "content": "paint it"},
            {"id": "m1", "role": "assistant", "content": "Which color?", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "pick_color", "arguments": "{\"for\":\"wall\"}"}}]},
            {"id": "c1-result", "role": "tool", "content": "teal", "toolCallId": "c1"},
            {"id": "m2", "role": "assistant", "content": "Teal it is."}
        ])
    );
}

#[test]
fn a_resumed_run_starts_with_the_runs_state_and_thread_and_skips_results_the_client_sent() {
    let mut script = Script::new();
    let mut history = vec![
        script.root(AgentEventKind::StateSnapshot { state: json!({"items": ["milk"]}) }),
        script.root(AgentEventKind::StateDelta { patch: json!([{"op": "add", "path": "/items/-", "value": "eggs"}]) }),
        script.root(delta("m1", "Which color?")),
    ];
    history.extend(call_events(&mut script, "c1"));
    history.push(script.root(client_call("c1")));
    // The client answered with a tool message of its own.
    let mut sent = user("paint it");
    sent.extend(
        serde_json::from_value::<Vec<Message>>(
            json!([{"id": "t1", "role": "tool", "toolCallId": "c1", "content": "teal"}]),
        )
        .expect("messages"),
    );
    let mut projection = projection().with_messages(sent).with_answered(["c1".to_owned()]);
    let mut out = projection.start(&history);
    let kinds_at_start = kinds(&out);
    assert_eq!(kinds_at_start, ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]);
    let Event::StateSnapshot { snapshot, .. } = &out[1] else { panic!("a state snapshot") };
    assert_eq!(snapshot, &json!({"items": ["milk", "eggs"]}), "the state as the run has it");
    let Event::MessagesSnapshot { messages } = &out[2] else { panic!("a messages snapshot") };
    let ids: Vec<String> = serde_json::to_value(messages)
        .expect("json")
        .as_array()
        .expect("list")
        .iter()
        .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ids, ["u1", "m1", "t1"], "the call the run made, before the client's answer to it");

    let result = script.root(AgentEventKind::ToolCallResult {
        call_id: ToolCallId::new("c1"),
        content: "teal".into(),
        is_error: false,
    });
    let announced = projection.next(&result);
    assert!(!kinds(&announced).contains(&"TOOL_CALL_RESULT"), "the client has it: {announced:?}");
    out.extend(announced);
    out.extend(projection.next(&script.root(finished(Some("done")))));
    verify(&out);
}
