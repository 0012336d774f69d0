//! Unit tests of the sans-IO run state: every rule of the loop, without any I/O.

use super::*;
use crate::approval::{ApprovalPolicy, ApprovalRule};
use crate::spec::AgentSpec;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use troupe_core::Budget;
use troupe_core::FailureCode;
use troupe_tools::ToolCatalog;
use troupe_tools::{Effect, Tool, ToolContext, ToolDeclaration, ToolError, ToolOutput};

struct Fake(ToolDeclaration);

impl Tool for Fake {
    fn declaration(&self) -> &ToolDeclaration {
        &self.0
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, _args: Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async { Ok(ToolOutput::text("ok")) }.boxed()
    }
}

fn catalog() -> ToolCatalog {
    let tool = |name: &str, effect| -> Arc<dyn Tool> {
        Arc::new(Fake(ToolDeclaration::new(name, "a tool", json!({"type": "object"}), effect)))
    };
    ToolCatalog::with_tools([tool("read", Effect::ReadOnly), tool("write", Effect::WriteState)]).expect("catalog")
}

fn spec() -> AgentSpec {
    AgentSpec::new("tester", "fake/model").instructions("Be brief.")
}

fn state() -> RunState {
    RunState::new(RunId::new("run_1"), "tester", "fake/model", "model").with_instruction("do it")
}

fn response(blocks: Vec<ContentBlock>, stop: StopReason) -> ModelResponse {
    ModelResponse {
        message: Message::new(Role::Assistant, blocks),
        stop_reason: stop,
        usage: Usage { input_tokens: 10, output_tokens: 5, ..Default::default() },
        model: None,
        id: None,
    }
}

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::tool_use(id, name, input)
}

fn text_response(text: &str, stop: StopReason) -> ModelResponse {
    response(vec![ContentBlock::text(text)], stop)
}

fn ok(content: &str) -> ToolResultOutcome {
    ToolResultOutcome::success(ToolOutput::text(content), Duration::ZERO)
}

fn expect_call_model(action: Action) -> ModelRequest {
    match action {
        Action::CallModel(request) => *request,
        other => panic!("expected a model call, got {other:?}"),
    }
}

fn expect_tools(action: Action) -> Vec<ToolCall> {
    match action {
        Action::RunTools(calls) => calls,
        other => panic!("expected tool calls, got {other:?}"),
    }
}

fn expect_approval(action: Action) -> Vec<ApprovalRequest> {
    match action {
        Action::AwaitApproval(requests) => requests,
        other => panic!("expected an approval wait, got {other:?}"),
    }
}

/// The tool results of the user message at `index`, as (id, content, is_error).
fn results_at(state: &RunState, index: usize) -> Vec<(String, String, bool)> {
    let message = &state.messages[index];
    assert_eq!(message.role, Role::User);
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                Some((tool_use_id.to_string(), content.clone(), *is_error))
            }
            _ => None,
        })
        .collect()
}

/// Every tool call in the conversation is answered by the very next message.
fn assert_paired(state: &RunState) {
    for (i, message) in state.messages.iter().enumerate() {
        let calls: Vec<String> = message.tool_uses().map(|(id, _, _)| id.to_string()).collect();
        if calls.is_empty() {
            continue;
        }
        let answered: Vec<String> = results_at(state, i + 1).into_iter().map(|(id, _, _)| id).collect();
        assert_eq!(answered, calls, "message {i}'s calls are answered in order by message {}", i + 1);
    }
}

#[test]
fn a_plain_answer_completes() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    let request = expect_call_model(state.next_action(&spec, &tools));
    assert_eq!(request.model, "model");
    assert_eq!(request.system.as_deref(), Some("Be brief."));
    assert_eq!(request.messages, vec![Message::user("do it")]);
    assert_eq!(request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["read", "write"]);
    state.apply_model_response(text_response("done", StopReason::EndTurn), 0.01);
    assert_eq!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::Completed { output: "done".into() }));
    assert_eq!(state.status, LoopStatus::Finished(RunOutcomeKind::Completed));
    assert_eq!((state.iteration, state.usage.input_tokens), (1, 10));
    assert!((state.cost_usd - 0.01).abs() < 1e-12);
    // Asking again changes nothing.
    assert!(matches!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::Completed { .. })));
    assert_eq!(state.iteration, 1);
}

#[test]
fn results_of_one_turn_go_back_together_in_call_order() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(
        response(
            vec![ContentBlock::text("reading"), call("a", "read", json!({"p": 1})), call("b", "read", json!({"p": 2}))],
            StopReason::ToolUse,
        ),
        0.0,
    );
    let calls = expect_tools(state.next_action(&spec, &tools));
    assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(calls[1].args, json!({"p": 2}));
    // Results arrive in any order; they are committed in call order.
    state.apply_tool_results(vec![(ToolCallId::new("b"), ok("B")), (ToolCallId::new("a"), ok("A"))]);
    let request = expect_call_model(state.next_action(&spec, &tools));
    assert_eq!(request.messages.len(), 3);
    assert_eq!(results_at(&state, 2), vec![("a".into(), "A".into(), false), ("b".into(), "B".into(), false)]);
    assert_eq!(state.tool_calls, 2);
    assert_paired(&state);
}

#[test]
fn side_effects_wait_for_approval_and_run_once_approved() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(
        response(vec![call("r", "read", json!({})), call("w", "write", json!({"x": 1}))], StopReason::ToolUse),
        0.0,
    );
    let requests = expect_approval(state.next_action(&spec, &tools));
    assert_eq!(requests.len(), 1, "only the write is asked about");
    assert_eq!((requests[0].call_id.as_str(), requests[0].tool.as_str()), ("w", "write"));
    assert!(requests[0].reason.contains("write state"), "{}", requests[0].reason);
    assert_eq!(state.status, LoopStatus::AwaitingApproval);
    assert_eq!(expect_approval(state.next_action(&spec, &tools)), requests, "still waiting");
    state.apply_signal(Signal::approval("w", ApprovalDecision::Approve)).expect("decision taken");
    let calls = expect_tools(state.next_action(&spec, &tools));
    assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["r", "w"], "the turn runs in order");
    assert_eq!(state.status, LoopStatus::Running);
}

#[test]
fn a_rejection_reaches_the_model_as_an_error_result() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("w", "write", json!({}))], StopReason::ToolUse), 0.0);
    expect_approval(state.next_action(&spec, &tools));
    let reject = ApprovalDecision::Reject { reason: Some("use a branch".into()) };
    state.apply_signal(Signal::approval("w", reject)).expect("decision taken");
    expect_call_model(state.next_action(&spec, &tools));
    let results = results_at(&state, 2);
    assert!(results[0].2, "an error");
    assert!(results[0].1.contains("rejected") && results[0].1.contains("use a branch"), "{}", results[0].1);
    assert_eq!(state.tool_errors, 1);
}

#[test]
fn modified_arguments_replace_the_models() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("w", "write", json!({"path": "a"}))], StopReason::ToolUse), 0.0);
    expect_approval(state.next_action(&spec, &tools));
    let modify = ApprovalDecision::Modify { arguments: json!({"path": "b"}) };
    state.apply_signal(Signal::approval("w", modify)).expect("decision taken");
    let calls = expect_tools(state.next_action(&spec, &tools));
    assert_eq!(calls[0].args, json!({"path": "b"}));
    state.apply_tool_results(vec![(ToolCallId::new("w"), ok("wrote b"))]);
    expect_call_model(state.next_action(&spec, &tools));
    let content = &results_at(&state, 2)[0].1;
    assert!(content.contains("{\"path\":\"b\"}") && content.ends_with("wrote b"), "{content}");
}

#[test]
fn always_allow_covers_later_calls_of_the_tool_in_this_turn_and_the_next() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(
        response(vec![call("w1", "write", json!({})), call("w2", "write", json!({}))], StopReason::ToolUse),
        0.0,
    );
    assert_eq!(expect_approval(state.next_action(&spec, &tools)).len(), 2);
    state.apply_signal(Signal::approval("w1", ApprovalDecision::AlwaysAllow)).expect("decision taken");
    let calls = expect_tools(state.next_action(&spec, &tools));
    assert_eq!(calls.len(), 2, "w2 needs no decision any more");
    state.apply_tool_results(vec![(ToolCallId::new("w1"), ok("1")), (ToolCallId::new("w2"), ok("2"))]);
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("w3", "write", json!({}))], StopReason::ToolUse), 0.0);
    assert_eq!(expect_tools(state.next_action(&spec, &tools)).len(), 1, "not asked again");
    assert!(state.always_allowed.contains("write"));
}

#[test]
fn policy_denials_are_answered_without_asking() {
    let mut spec = spec();
    spec.approval = ApprovalPolicy::default().rule(ApprovalRule::deny("write"));
    let (tools, mut state) = (catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("w", "write", json!({}))], StopReason::ToolUse), 0.0);
    expect_call_model(state.next_action(&spec, &tools));
    let results = results_at(&state, 2);
    assert!(results[0].2 && results[0].1.contains("denied"), "{results:?}");
}

#[test]
fn unknown_tools_are_left_to_the_catalog_to_answer() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("x", "nope", json!({}))], StopReason::ToolUse), 0.0);
    assert_eq!(expect_tools(state.next_action(&spec, &tools))[0].name, "nope");
}

#[test]
fn cancelling_at_approval_ends_the_run_with_every_call_answered() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(
        response(vec![call("r", "read", json!({})), call("w", "write", json!({}))], StopReason::ToolUse),
        0.0,
    );
    expect_approval(state.next_action(&spec, &tools));
    state.apply_signal(Signal::approval("w", ApprovalDecision::Cancel)).expect("decision taken");
    assert_eq!(state.status, LoopStatus::Cancelling);
    let Action::Finish(RunOutcome::Cancelled { reason }) = state.next_action(&spec, &tools) else {
        panic!("cancelled")
    };
    assert!(reason.is_some_and(|r| r.contains("write")));
    assert_eq!(results_at(&state, 2).len(), 2);
    assert!(results_at(&state, 2).iter().all(|(_, content, err)| *err && content.contains("not run")));
    assert_paired(&state);
    assert!(matches!(state.apply_signal(Signal::user_message("late")), Err(SignalError::RunFinished)));
}

#[test]
fn a_cancel_signal_keeps_results_already_in() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(
        response(vec![call("a", "read", json!({})), call("b", "read", json!({}))], StopReason::ToolUse),
        0.0,
    );
    expect_tools(state.next_action(&spec, &tools));
    state.apply_tool_results(vec![(ToolCallId::new("a"), ok("A"))]);
    state.apply_signal(Signal::Cancel { reason: Some("user pressed ctrl-c".into()) }).expect("taken");
    state.apply_signal(Signal::Cancel { reason: Some("second".into()) }).expect("taken");
    let outcome = state.next_action(&spec, &tools);
    assert_eq!(outcome, Action::Finish(RunOutcome::Cancelled { reason: Some("user pressed ctrl-c".into()) }));
    let results = results_at(&state, 2);
    assert_eq!(results[0], ("a".into(), "A".into(), false));
    assert!(results[1].2);
}

#[test]
fn output_limit_is_resumed_three_times_then_the_run_is_incomplete() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    for n in 0..4 {
        let request = expect_call_model(state.next_action(&spec, &tools));
        if n > 0 {
            assert_eq!(request.messages.last(), Some(&Message::user(RESUME_INSTRUCTION)));
        }
        state.apply_model_response(text_response(&format!("part{n} "), StopReason::MaxTokens), 0.0);
    }
    assert_eq!(
        state.next_action(&spec, &tools),
        Action::Finish(RunOutcome::Incomplete { partial: "part0 part1 part2 part3 ".into() })
    );
    assert_eq!(state.iteration, 4);
    let resumes = state.messages.iter().filter(|m| m.text() == RESUME_INSTRUCTION).count();
    assert_eq!(resumes, 3);
}

#[test]
fn a_resumed_answer_is_joined() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(text_response("Hello, ", StopReason::MaxTokens), 0.0);
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(text_response("world.", StopReason::EndTurn), 0.0);
    assert_eq!(
        state.next_action(&spec, &tools),
        Action::Finish(RunOutcome::Completed { output: "Hello, world.".into() })
    );
}

#[test]
fn the_iteration_limit_stops_before_the_next_call() {
    let mut spec = spec();
    spec.limits.max_iterations = 2;
    let (tools, mut state) = (catalog(), state());
    for n in 0..2 {
        expect_call_model(state.next_action(&spec, &tools));
        let id = format!("c{n}");
        state.apply_model_response(response(vec![call(&id, "read", json!({}))], StopReason::ToolUse), 0.0);
        expect_tools(state.next_action(&spec, &tools));
        state.apply_tool_results(vec![(ToolCallId::new(id), ok("x"))]);
    }
    assert_eq!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::MaxIterations { iterations: 2 }));
    assert_paired(&state);
}

#[test]
fn budgets_stop_before_the_next_call() {
    let mut spec = spec();
    spec.limits.max_usd = Some(0.25);
    let (tools, mut state) = (catalog(), state());
    for n in 0..3 {
        expect_call_model(state.next_action(&spec, &tools));
        let id = format!("c{n}");
        state.apply_model_response(response(vec![call(&id, "read", json!({}))], StopReason::ToolUse), 0.1);
        expect_tools(state.next_action(&spec, &tools));
        state.apply_tool_results(vec![(ToolCallId::new(id), ok("x"))]);
    }
    let outcome = state.next_action(&spec, &tools);
    assert_eq!(outcome, Action::Finish(RunOutcome::BudgetExceeded { budget: Budget::Usd }));
    assert_eq!(state.iteration, 3, "the fourth call was never made");

    let mut spec = self::spec();
    spec.limits.max_total_tokens = Some(15);
    let mut state = self::state();
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("c", "read", json!({}))], StopReason::ToolUse), 0.0);
    expect_tools(state.next_action(&spec, &tools));
    state.apply_tool_results(vec![(ToolCallId::new("c"), ok("x"))]);
    assert_eq!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::BudgetExceeded { budget: Budget::Tokens }));
}

#[test]
fn input_arriving_during_tools_follows_the_results() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("a", "read", json!({}))], StopReason::ToolUse), 0.0);
    expect_tools(state.next_action(&spec, &tools));
    state.apply_signal(Signal::steering("focus on tests")).expect("taken");
    state.apply_tool_results(vec![(ToolCallId::new("a"), ok("A"))]);
    let request = expect_call_model(state.next_action(&spec, &tools));
    let last = request.messages.last().expect("a message");
    assert!(matches!(last.content[0], ContentBlock::ToolResult { .. }), "results first");
    assert_eq!(last.text(), "focus on tests");
    assert_eq!(request.messages.len(), 3, "merged into the results message");
}

#[test]
fn a_message_after_the_answer_continues_the_run() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(text_response("first", StopReason::EndTurn), 0.0);
    state.apply_signal(Signal::user_message("and then?")).expect("taken");
    let request = expect_call_model(state.next_action(&spec, &tools));
    assert_eq!(request.messages.last(), Some(&Message::user("and then?")));
    state.apply_model_response(text_response("second", StopReason::EndTurn), 0.0);
    assert_eq!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::Completed { output: "second".into() }));
}

#[test]
fn external_events_and_hook_messages_reach_the_model() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    state.apply_signal(Signal::ExternalEvent { name: "ci".into(), payload: json!({"status": "red"}) }).expect("taken");
    state.inject([Message::user("from a hook")]);
    state.apply_signal(Signal::Resume).expect("taken");
    state.apply_signal(Signal::SchedulerWake).expect("taken");
    let request = expect_call_model(state.next_action(&spec, &tools));
    assert_eq!(request.messages.len(), 1);
    let text = request.messages[0].text();
    assert!(
        text.starts_with("do it") && text.contains("`ci`") && text.contains("red") && text.ends_with("from a hook")
    );
}

#[test]
fn approvals_for_calls_not_waiting_are_refused() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("r", "read", json!({}))], StopReason::ToolUse), 0.0);
    expect_tools(state.next_action(&spec, &tools));
    let err = state.apply_signal(Signal::approval("r", ApprovalDecision::Approve)).expect_err("not waiting");
    assert!(matches!(err, SignalError::UnknownCall { call_id } if call_id.as_str() == "r"));
}

#[test]
fn a_paused_state_serializes_and_resumes_identically() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("w", "write", json!({"k": "v"}))], StopReason::ToolUse), 0.02);
    let pending = expect_approval(state.next_action(&spec, &tools));
    let outcome = state.finish(RunOutcome::Paused { pending: pending.clone() });
    assert_eq!(outcome.kind(), RunOutcomeKind::Paused);
    assert_eq!(state.pending_calls.len(), 1, "a pause keeps the call pending");

    let text = serde_json::to_string(&state).expect("serializes");
    let mut restored: RunState = serde_json::from_str(&text).expect("parses");
    assert_eq!(restored, state);
    restored.apply_signal(Signal::approval("w", ApprovalDecision::Approve)).expect("reopens and decides");
    assert_eq!(restored.status, LoopStatus::AwaitingApproval);
    let calls = expect_tools(restored.next_action(&spec, &tools));
    assert_eq!(calls[0].args, json!({"k": "v"}));
    restored.apply_tool_results(vec![(ToolCallId::new("w"), ok("done"))]);
    expect_call_model(restored.next_action(&spec, &tools));
    assert_paired(&restored);
}

#[test]
fn fields_at_their_default_are_left_out_and_read_back_as_it() {
    // Each field left out at its default, with that default as earlier builds wrote it.
    let defaults = [
        ("messages", json!([])),
        ("iteration", json!(0)),
        ("recoveries", json!(0)),
        ("always_allowed", json!([])),
        ("pending_calls", json!([])),
        ("pending_input", json!([])),
        ("continuation", json!("")),
        ("answer", json!("")),
        ("tool_calls", json!(0)),
        ("tool_errors", json!(0)),
        ("signal_cursor", json!(0)),
    ];
    let fresh = RunState::new(RunId::new("run_1"), "tester", "fake/model", "model");
    let text = serde_json::to_value(&fresh).expect("serializes");
    for (left_out, _) in &defaults {
        assert!(text.get(left_out).is_none(), "`{left_out}` at its default is not written: {text}");
    }
    assert_eq!(serde_json::from_value::<RunState>(text).expect("parses"), fresh);

    // A state as earlier builds wrote it, every field present, reads back the same.
    let mut every_field = serde_json::to_value(&fresh).expect("serializes");
    let object = every_field.as_object_mut().expect("an object");
    for (field, default) in defaults {
        object.insert(field.to_owned(), default);
    }
    assert_eq!(serde_json::from_value::<RunState>(every_field).expect("parses"), fresh);

    // A usage keeps only its counts that are not zero, and reads back whole.
    let mut used = fresh.clone();
    used.usage = Usage { input_tokens: 10, reasoning_tokens: 3, ..Usage::default() };
    used.last_usage = Some(Usage { cache_read_tokens: 7, ..Usage::default() });
    let text = serde_json::to_value(&used).expect("serializes");
    assert_eq!(text["usage"], json!({"input_tokens": 10, "reasoning_tokens": 3}));
    assert_eq!(text["last_usage"], json!({"cache_read_tokens": 7}));
    assert_eq!(serde_json::from_value::<RunState>(text).expect("parses"), used);
    let every_count = json!({"input_tokens": 10, "output_tokens": 0, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "cache_write_long_tokens": 0, "reasoning_tokens": 3});
    let mut written_whole = serde_json::to_value(&used).expect("serializes");
    written_whole["usage"] = every_count;
    assert_eq!(serde_json::from_value::<RunState>(written_whole).expect("parses"), used);

    // Values away from their default are written and read back.
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![call("r", "read", json!({}))], StopReason::ToolUse), 0.0);
    expect_tools(state.next_action(&spec, &tools));
    let text = serde_json::to_value(&state).expect("serializes");
    assert_eq!(text["iteration"], json!(1));
    assert_eq!(text["pending_calls"].as_array().map(Vec::len), Some(1));
    assert_eq!(serde_json::from_value::<RunState>(text).expect("parses"), state);
}

#[test]
fn refusals_and_context_overflow_fail_with_a_code() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(text_response("I can't help with that", StopReason::Refusal), 0.0);
    let Action::Finish(RunOutcome::Failed { error, code }) = state.next_action(&spec, &tools) else { panic!("failed") };
    assert!(error.contains("can't help"));
    assert_eq!(code, Some(FailureCode::Refusal));
    let mut state = self::state();
    expect_call_model(state.next_action(&spec, &tools));
    state.apply_model_response(response(vec![], StopReason::ContextWindowExceeded), 0.0);
    assert!(matches!(state.next_action(&spec, &tools), Action::Finish(RunOutcome::Failed { .. })));
    assert_eq!(state.messages.len(), 1, "an empty response is not added to the history");
}

#[test]
fn the_task_joins_a_history_ending_with_a_user_turn() {
    let state = RunState::new(RunId::new("r"), "a", "m", "m")
        .with_history(vec![Message::assistant("hi"), Message::user("context")])
        .with_instruction("task");
    assert_eq!(state.messages.len(), 2);
    assert_eq!(state.messages[1].text(), "contexttask");
    let empty = RunState::new(RunId::new("r"), "a", "m", "m").with_instruction("");
    assert!(empty.messages.is_empty());
}

#[test]
fn the_first_outcome_wins() {
    let (spec, tools, mut state) = (spec(), catalog(), state());
    expect_call_model(state.next_action(&spec, &tools));
    state.finish(RunOutcome::BudgetExceeded { budget: Budget::Time });
    let again = state.finish(RunOutcome::Cancelled { reason: None });
    assert_eq!(again, RunOutcome::BudgetExceeded { budget: Budget::Time });
    state.request_cancel(Some("late".into()));
    assert_eq!(state.status, LoopStatus::Finished(RunOutcomeKind::BudgetExceeded));
}

#[test]
fn the_specs_temperature_and_output_limit_reach_the_request() {
    let mut spec = spec();
    spec.temperature = Some(0.2);
    spec.limits.max_output_tokens = Some(512);
    let request = state().request(&spec, &catalog());
    assert_eq!(request.temperature, Some(0.2));
    assert_eq!(request.max_tokens, Some(512));
    assert_eq!(state().request(&self::spec(), &catalog()).temperature, None, "unset: the provider's default");
}

fn client_tool() -> ToolSpec {
    ToolSpec::new("pick_color", "Asks the user for a color.", json!({"type": "object"}))
}

#[test]
fn a_client_tools_call_waits_for_the_clients_result_whatever_the_policy() {
    let spec = AgentSpec { approval: ApprovalPolicy::auto().rule(ApprovalRule::allow("*")), ..spec() };
    let tools = catalog();
    let mut state = state().with_client_tools(vec![client_tool()]);
    let request = expect_call_model(state.next_action(&spec, &tools));
    let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["read", "write", "pick_color"], "offered beside the agent's own");
    state.apply_model_response(
        response(vec![call("c1", "pick_color", json!({"for": "wall"}))], StopReason::ToolUse),
        0.0,
    );
    let waiting = expect_approval(state.next_action(&spec, &tools));
    assert_eq!(waiting[0].reason, crate::CLIENT_TOOL_REASON);
    assert!(crate::is_client_tool_wait(&waiting[0].clone().into_pause_reason(false)));

    // Approving it is refused: nothing here can run it. A result for another call too.
    assert_eq!(
        state.apply_signal(Signal::approval("c1", ApprovalDecision::Approve)),
        Err(SignalError::ClientRunsCall { call_id: "c1".into() })
    );
    let stray = Signal::ToolResult { call_id: "c9".into(), content: "x".into(), is_error: false };
    assert_eq!(state.apply_signal(stray), Err(SignalError::NoClientCall { call_id: "c9".into() }));

    let answer = Signal::ToolResult { call_id: "c1".into(), content: "teal".into(), is_error: false };
    state.apply_signal(answer.clone()).expect("taken");
    assert_eq!(state.apply_signal(answer), Err(SignalError::NoClientCall { call_id: "c1".into() }), "once");
    let request = expect_call_model(state.next_action(&spec, &tools));
    let last = request.messages.last().expect("messages");
    assert_eq!(last.content, [ContentBlock::tool_result("c1", "teal")]);
}

#[test]
fn a_rejected_client_call_is_an_error_result_and_client_tools_survive_a_save() {
    let tools = catalog();
    let state = state().with_client_tools(vec![client_tool()]);
    let mut state: RunState = serde_json::from_value(serde_json::to_value(&state).expect("saves")).expect("loads");
    assert_eq!(state.client_tools(), [client_tool()]);
    state.next_action(&spec(), &tools);
    state.apply_model_response(response(vec![call("c1", "pick_color", json!({}))], StopReason::ToolUse), 0.0);
    expect_approval(state.next_action(&spec(), &tools));
    let reject = ApprovalDecision::Reject { reason: Some("the client cancelled it".into()) };
    state.apply_signal(Signal::approval("c1", reject)).expect("taken");
    let request = expect_call_model(state.next_action(&spec(), &tools));
    let Some(ContentBlock::ToolResult { content, is_error, .. }) =
        request.messages.last().and_then(|m| m.content.first())
    else {
        panic!("a result")
    };
    assert!(*is_error && content.contains("did not run") && content.contains("cancelled it"), "{content}");
}

#[test]
fn state_update_patches_the_shared_state_and_a_bad_patch_changes_nothing() {
    let tools = catalog();
    let mut state = state().with_shared_state(Some(json!({"items": ["milk"]})));
    let request = expect_call_model(state.next_action(&spec(), &tools));
    assert!(request.tools.iter().any(|t| t.name == crate::STATE_UPDATE_TOOL), "offered when a state is shared");
    let add = json!({"patch": [{"op": "add", "path": "/items/-", "value": "eggs"}]});
    let bad = json!({"patch": [{"op": "remove", "path": "/nothing"}]});
    state.apply_model_response(
        response(
            vec![call("c1", crate::STATE_UPDATE_TOOL, add), call("c2", crate::STATE_UPDATE_TOOL, bad)],
            StopReason::ToolUse,
        ),
        0.0,
    );
    let request = expect_call_model(state.next_action(&spec(), &tools));
    assert_eq!(state.shared_state(), Some(&json!({"items": ["milk", "eggs"]})));
    let results: Vec<(String, bool)> = request
        .messages
        .last()
        .expect("results")
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert!(!results[0].1 && results[0].0.contains("\"eggs\""), "{results:?}");
    assert!(results[1].1 && results[1].0.contains("not applied"), "{results:?}");
    let saved: RunState = serde_json::from_value(serde_json::to_value(&state).expect("saves")).expect("loads");
    assert_eq!(
        saved.shared_state(),
        Some(&json!({"items": ["milk", "eggs"]})),
        "the state is part of the run's record"
    );
    let plain = state_without_sharing(&tools);
    assert!(!plain.iter().any(|t| t == crate::STATE_UPDATE_TOOL));
}

fn state_without_sharing(tools: &ToolCatalog) -> Vec<String> {
    let mut state = state();
    expect_call_model(state.next_action(&spec(), tools)).tools.into_iter().map(|t| t.name).collect()
}

#[test]
fn attachments_are_read_back_only_from_their_own_labels() {
    let image = |url: &str| ContentBlock::Image { source: troupe_core::ImageSource::Url { url: url.into() } };
    let result =
        |id: &str| ContentBlock::ToolResult { tool_use_id: ToolCallId::new(id), content: "ok".into(), is_error: false };
    let message = Message {
        role: Role::User,
        content: vec![
            result("a"),
            result("b"),
            ContentBlock::text(attachment_label("shot", &ToolCallId::new("a"), 2)),
            image("1"),
            image("2"),
            // Reads like a label, but for a call this message does not answer.
            ContentBlock::text("The result of `shot` (call z) has an attachment:"),
            image("3"),
            // Names two, but one follows.
            ContentBlock::text(attachment_label("shot", &ToolCallId::new("b"), 2)),
            image("4"),
        ],
    };
    let found = tool_result_attachments(&message);
    assert_eq!(found, vec![(ToolCallId::new("a"), vec![image("1"), image("2")])]);
    let results = tool_results(std::slice::from_ref(&message));
    assert_eq!(results["a"].attachments.len(), 2);
    assert!(results["b"].attachments.is_empty());
    // Without tool results, a message's text never attaches anything.
    let person = Message { role: Role::User, content: message.content[2..5].to_vec() };
    assert!(tool_result_attachments(&person).is_empty());
    // A stored label naming more attachments than any message holds attaches nothing.
    let corrupt = Message {
        role: Role::User,
        content: vec![
            result("a"),
            image("0"),
            ContentBlock::text(format!("The result of `shot` (call a) has {} attachments:", usize::MAX)),
            image("1"),
        ],
    };
    assert!(tool_result_attachments(&corrupt).is_empty());
}

#[test]
fn a_save_writes_the_conversation_from_its_first_change() {
    let (spec, tools) = (spec(), catalog());
    use crate::machine::{Context, Input};
    let ctx = Context { spec: &spec, tools: &tools, recording: true, authorizing: false };
    let mut state = state();
    assert_eq!(state.messages_changed_from(), 0, "a new state has every message to save");
    state.messages_saved();
    assert_eq!(state.messages_changed_from(), 1);
    // An added message is written alone.
    state.append(Message::assistant("Looking."));
    assert_eq!(state.messages_changed_from(), 1);
    state.messages_saved();
    // A user message merged into the last one changes that one.
    state.append(Message::user("first"));
    state.messages_saved();
    state.append(Message::user("and second"));
    assert_eq!(state.messages_changed_from(), 2, "{:?}", state.messages());
    state.messages_saved();
    // Compaction that changed nothing keeps what was saved; one that did rewrites it all.
    let taken = state.take_messages();
    state.handle(Input::Uncompacted(taken), &ctx);
    assert_eq!(state.messages_changed_from(), 3);
    let mut taken = state.take_messages();
    taken.remove(0);
    state.handle(Input::Compacted(taken), &ctx);
    assert_eq!(state.messages_changed_from(), 0);
    // The bookkeeping is not the run's: not stored, no part of its equality.
    let read_back: RunState = serde_json::from_str(&serde_json::to_string(&state).expect("encodes")).expect("reads");
    assert_eq!(read_back, state);
    // Encoded without the conversation, and given it back.
    let without = state.without_messages(|s| serde_json::to_value(s).expect("encodes"));
    assert!(without.get("messages").is_none(), "no conversation in {without}");
    assert_eq!(state.messages().len(), 2);
}
