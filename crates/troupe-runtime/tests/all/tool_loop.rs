//! The tool loop end to end, through the scripted model and over HTTP for each wire: a
//! multi-turn run to an answer, two calls in one turn, tool errors the model recovers
//! from, output-limit recovery, budgets, model errors.

use crate::common;

use common::{Harness, Wire, check_events, kind_name};
use serde_json::json;
use troupe_core::Budget;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ContentBlock, Role, RunOutcomeKind, StopReason, Usage};
use troupe_model::Pricing;
use troupe_runtime::{RESUME_INSTRUCTION, RunOutcome, RunOutput};
use troupe_testkit::MockTurn;

fn results(output: &RunOutput, index: usize) -> Vec<(String, String, bool)> {
    let message = &output.messages[index];
    assert_eq!(message.role, Role::User, "message {index} carries results");
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

async fn tool_loop_reaches_an_answer(wire: Wire) {
    let h = Harness::new(wire).await;
    h.write("notes.txt", "the answer is 42\n");
    h.push([
        h.call("call_read", "fs.read", json!({"path": "notes.txt"})).with_text("Let me look."),
        h.call("call_list", "fs.list", json!({"path": "."})),
        MockTurn::text("The answer is 42."),
    ]);
    let engine = h.engine();
    let agent = engine
        .agent("reader")
        .workspace(h.dir.path())
        .readonly_tools()
        .instructions("Answer from the files.")
        .build()
        .expect("agent builds");
    let output = agent.run("What is the answer?").await.expect("the run ends");

    assert_eq!(output.outcome, RunOutcome::Completed { output: "The answer is 42.".into() });
    assert_eq!(output.text, "The answer is 42.");
    assert_eq!(output.tool_calls, 2);
    assert_eq!(output.messages.len(), 6, "prompt, 2 × (call, results), answer");
    let read = results(&output, 2);
    assert_eq!(read.len(), 1);
    assert!(read[0].1.contains("the answer is 42") && !read[0].2, "{read:?}");
    assert!(results(&output, 4)[0].1.contains("notes.txt"), "fs.list shows the file");

    let bodies = h.bodies();
    assert_eq!(bodies.len(), 3);
    assert!(bodies[0].contains("Answer from the files.") && bodies[0].contains("What is the answer?"));
    assert!(bodies[1].contains("the answer is 42"), "the tool result reached the model: {}", bodies[1]);
    assert_eq!(output.usage.input_tokens, 30, "three calls of 10 input tokens");

    check_events(&output.events);
    let kinds: Vec<String> = output.events.iter().map(kind_name).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "step_started").count(), 3);
    assert_eq!(kinds.iter().filter(|k| *k == "usage").count(), 3);
    let deltas: String = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::MessageDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "Let me look.The answer is 42.", "text streamed live in deltas");
    let Some(AgentEventKind::RunFinished { outcome, output: final_text, usage, .. }) =
        output.events.last().map(|e| &e.kind)
    else {
        panic!("finished")
    };
    assert_eq!(
        (*outcome, final_text.as_deref(), usage.input_tokens),
        (RunOutcomeKind::Completed, Some("The answer is 42."), 30)
    );

    let metrics = agent.metrics();
    assert_eq!((metrics.runs_started, metrics.runs_completed, metrics.model_calls, metrics.tool_calls), (1, 1, 3, 2));
    assert_eq!(metrics.input_tokens, 30);
}

async fn two_calls_in_one_turn(wire: Wire) {
    let h = Harness::new(wire).await;
    h.write("a.txt", "alpha\n");
    h.write("b.txt", "beta\n");
    h.push([
        // Interleaved where the wire can carry it (OpenAI Chat): fragments of both calls
        // alternate, and each call must still get its own arguments.
        h.call("call_a", "fs.read", json!({"path": "a.txt"}))
            .with_tool_call("call_b", h.name("fs.read"), json!({"path": "b.txt"}))
            .with_delta_chars(3)
            .with_interleaved_tool_calls(),
        MockTurn::text("alpha and beta"),
    ]);
    let agent = h.engine().agent("reader").workspace(h.dir.path()).readonly_tools().build().expect("agent builds");
    let output = agent.run("Read both.").await.expect("the run ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let turn = results(&output, 2);
    assert_eq!(turn.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["call_a", "call_b"], "one message, call order");
    assert!(turn[0].1.contains("alpha") && turn[1].1.contains("beta"), "{turn:?}");
    let second = &h.bodies()[1];
    assert!(second.contains("alpha") && second.contains("beta"), "{second}");
    check_events(&output.events);
    let announced: Vec<&str> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::ToolCallResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(announced, ["call_a", "call_b"]);
}

async fn tool_errors_are_recovered_from(wire: Wire) {
    let h = Harness::new(wire).await;
    h.write("x.txt", "fine\n");
    h.push([
        MockTurn::tool_call("call_1", "nope", json!({})),
        h.call("call_2", "fs.read", json!({"pth": "x.txt"})),
        h.call("call_3", "fs.read", json!({"path": "x.txt"})),
        MockTurn::text("recovered"),
    ]);
    let agent = h.engine().agent("reader").workspace(h.dir.path()).readonly_tools().build().expect("agent builds");
    let output = agent.run("Read x.").await.expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "recovered".into() });
    let unknown = &results(&output, 2)[0];
    assert!(unknown.2 && unknown.1.contains("unknown tool `nope`"), "{unknown:?}");
    let bad = &results(&output, 4)[0];
    assert!(bad.2 && bad.1.contains("invalid arguments"), "{bad:?}");
    assert!(!results(&output, 6)[0].2);
    let bodies = h.bodies();
    assert!(bodies[1].contains("unknown tool"), "the model saw the error: {}", bodies[1]);
    assert!(bodies[2].contains("invalid arguments"));
    assert_eq!((output.state.tool_calls(), output.state.tool_errors()), (3, 2));
    assert_eq!(agent.metrics().tool_errors, 2);
    check_events(&output.events);
}

async fn output_limit_is_recovered_three_times_then_incomplete(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push((0..4).map(|n| MockTurn::text(format!("part{n} ")).with_stop(StopReason::MaxTokens)));
    let agent = h.engine().agent("writer").workspace(h.dir.path()).build().expect("agent builds");
    let output = agent.run("Write a long essay.").await.expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::Incomplete { partial: "part0 part1 part2 part3 ".into() });
    assert_eq!(output.text, "part0 part1 part2 part3 ");
    let bodies = h.bodies();
    assert_eq!(bodies.len(), 4, "one call and three resumes");
    assert!(!bodies[0].contains(RESUME_INSTRUCTION));
    for body in &bodies[1..] {
        assert!(body.contains(RESUME_INSTRUCTION), "the resume instruction reached the server: {body}");
    }
    assert!(bodies[3].contains("part2"), "the partial text is sent back");
    check_events(&output.events);
    assert!(matches!(
        output.events.last().map(|e| &e.kind),
        Some(AgentEventKind::RunFinished { outcome: RunOutcomeKind::Incomplete, .. })
    ));
}

async fn budget_stops_before_the_next_model_call(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push((0..6).map(|n| h.call(&format!("call_{n}"), "fs.list", json!({}))));
    // 10 input tokens a call at $100k per million: $1 a call.
    let pricing = Pricing { input: 100_000.0, output: 0.0, cache_read: 0.0, cache_write: 0.0 };
    let agent = h
        .priced_engine(pricing)
        .agent("spender")
        .workspace(h.dir.path())
        .readonly_tools()
        .budget_usd(2.5)
        .build()
        .expect("agent builds");
    let output = agent.run("List forever.").await.expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::BudgetExceeded { budget: Budget::Usd });
    assert_eq!(h.bodies().len(), 3, "the fourth call was never made");
    assert!((output.cost_usd - 3.0).abs() < 1e-9, "{}", output.cost_usd);
    let by_model = output.cost_by_model.values().next().expect("one model");
    assert_eq!((by_model.calls, by_model.priced), (3, true));
    let costs: Vec<Option<f64>> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Usage { cost_usd, usage, .. } => {
                assert_eq!(*usage, Usage { input_tokens: 10, output_tokens: 5, ..Default::default() });
                Some(*cost_usd)
            }
            _ => None,
        })
        .collect();
    assert_eq!(costs.len(), 3);
    assert!(costs.iter().all(|c| c.is_some_and(|c| (c - 1.0).abs() < 1e-9)), "{costs:?}");
    assert_eq!(output.tool_calls, 3, "the last turn's calls ran before the budget check");
    check_events(&output.events);
}

async fn model_errors_fail_with_their_code(wire: Wire) {
    let h = Harness::new(wire).await;
    if wire != Wire::Scripted {
        // The scripted model fails the same way once it has no turn left.
        h.push([MockTurn::status(400, "the request is malformed")]);
    }
    let agent = h.engine().agent("failing").workspace(h.dir.path()).build().expect("agent builds");
    let output = agent.run("Hello?").await.expect("the run ends");
    let RunOutcome::Failed { code, .. } = &output.outcome else { panic!("failed: {:?}", output.outcome) };
    assert_eq!(code, &Some(FailureCode::InvalidRequest));
    check_events(&output.events);
    let Some(AgentEventKind::RunError { code, .. }) = output.events.last().map(|e| &e.kind) else {
        panic!("RunError last")
    };
    assert_eq!(code.as_deref(), Some("invalid_request"));
    assert_eq!(agent.metrics().runs_failed, 1);
}

per_wire!(
    tool_loop_reaches_an_answer,
    two_calls_in_one_turn,
    tool_errors_are_recovered_from,
    output_limit_is_recovered_three_times_then_incomplete,
    budget_stops_before_the_next_model_call,
    model_errors_fail_with_their_code,
);
