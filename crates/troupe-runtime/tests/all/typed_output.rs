//! Typed answers end to end, through the scripted model and over HTTP for each wire: the
//! schema in every request, a matching answer decoded into a Rust type, a mismatch sent
//! back and corrected, one never corrected failing the run `output_invalid` with its last
//! answer kept, and the schema surviving a resume.

use crate::common;

use common::{Harness, Wire};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use troupe_core::{FailureCode, Role};
use troupe_model::answer_tool::ANSWER_TOOL;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{
    ApprovalDecision, Engine, FixedModel, RunInput, RunOutcome, RunState, RuntimeError, Signal, output_spec_for,
};
use troupe_testkit::{MockLlmServer, MockTurn};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Weather {
    city: String,
    celsius: f64,
}

/// The schema as the request to the model carries it on `wire`.
fn schema_sent(wire: Wire, body: &Value) -> Value {
    match wire {
        Wire::Scripted => body["output"]["schema"].clone(),
        Wire::Anthropic => body["output_config"]["format"]["schema"].clone(),
        Wire::OpenAiChat => body["response_format"]["json_schema"]["schema"].clone(),
        Wire::OpenAiResponses => body["text"]["format"]["schema"].clone(),
        Wire::Gemini => body["generationConfig"]["responseSchema"].clone(),
    }
}

fn bodies(h: &Harness) -> Vec<Value> {
    h.bodies().iter().map(|b| serde_json::from_str(b).expect("JSON")).collect()
}

async fn a_matching_answer_is_decoded(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([MockTurn::text(r#"{"city": "Oslo", "celsius": 4.5}"#)]);
    let agent = h.engine().agent("forecaster").build().expect("agent builds");
    let typed = agent.run_typed::<Weather>("Weather in Oslo?").await.expect("a typed answer");
    assert_eq!(typed.value, Weather { city: "Oslo".into(), celsius: 4.5 });
    assert_eq!(typed.run.outcome, RunOutcome::Completed { output: r#"{"celsius":4.5,"city":"Oslo"}"#.into() });

    let bodies = bodies(&h);
    assert_eq!(bodies.len(), 1);
    let sent = schema_sent(wire, &bodies[0]);
    assert_eq!(sent["required"], json!(["city", "celsius"]), "{}", bodies[0]);
    assert!(sent["properties"]["celsius"].is_object(), "{}", bodies[0]);
}

async fn a_mismatch_is_sent_back_and_corrected(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([
        MockTurn::text(r#"{"city": "Oslo", "celsius": "mild"}"#),
        MockTurn::text(r#"{"city": "Oslo", "celsius": 4.5}"#),
    ]);
    let agent = h.engine().agent("forecaster").build().expect("agent builds");
    let typed = agent.run_typed::<Weather>("Weather in Oslo?").await.expect("a typed answer");
    assert_eq!(typed.value.celsius, 4.5);

    let bodies = bodies(&h);
    assert_eq!(bodies.len(), 2, "one correction round");
    let second = bodies[1].to_string();
    assert!(second.contains("Your answer cannot be used"), "{second}");
    assert!(second.contains("/celsius"), "the correction says where: {second}");
    assert!(second.contains("mild"), "the wrong answer is in the history: {second}");
    assert!(!schema_sent(wire, &bodies[1]).is_null(), "the schema is sent again");
}

async fn an_answer_never_corrected_fails_the_run(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push((0..3).map(|i| MockTurn::text(format!("It is about {i} degrees.")).with_delta_chars(6)));
    let agent = h.engine().agent("forecaster").build().expect("agent builds");
    let error = agent.run_typed::<Weather>("Weather in Oslo?").await.expect_err("no typed answer");
    let RuntimeError::NotCompleted(not_completed) = error else { panic!("{error:?}") };
    let output = not_completed.output;
    let RunOutcome::Failed { error, code } = &output.outcome else { panic!("{:?}", output.outcome) };
    assert_eq!(code.as_ref(), Some(&FailureCode::OutputInvalid));
    assert!(error.contains("after 2 correction(s)") && error.contains("not a JSON document"), "{error}");
    assert_eq!(bodies(&h).len(), 3, "the first answer and two corrections");
    let last = output.messages.last().expect("messages");
    assert_eq!(
        (last.role, last.text()),
        (Role::Assistant, "It is about 2 degrees.".to_owned()),
        "the last answer is kept"
    );
}

crate::per_wire!(
    a_matching_answer_is_decoded,
    a_mismatch_is_sent_back_and_corrected,
    an_answer_never_corrected_fails_the_run
);

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Node {
    name: String,
    children: Vec<Node>,
}

/// A type the vendor cannot take fails the run before any request, with a code and a
/// sentence that say which type and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_the_vendor_cannot_take_fails_the_run_before_any_request() {
    for (wire, reason) in [
        (Wire::OpenAiChat, "`Array_of_string`: the root is of type `array`"),
        (Wire::Anthropic, "`Node` refers to itself"),
        (Wire::Gemini, "`Node` refers to itself"),
    ] {
        let h = Harness::new(wire).await;
        h.push([MockTurn::text("[]")]);
        let agent = h.engine().agent("typed").build().expect("agent builds");
        let error = if wire == Wire::OpenAiChat {
            agent.run_typed::<Vec<String>>("list").await.map(|_| ()).expect_err("refused")
        } else {
            agent.run_typed::<Node>("tree").await.map(|_| ()).expect_err("refused")
        };
        let RuntimeError::NotCompleted(not_completed) = error else { panic!("{error:?}") };
        let RunOutcome::Failed { error, code } = &not_completed.output.outcome else {
            panic!("{:?}", not_completed.output.outcome)
        };
        assert_eq!(code.as_ref(), Some(&FailureCode::UnsupportedOutputSchema), "{wire:?}: {error}");
        assert!(error.contains("cannot take the output schema") && error.contains(reason), "{wire:?}: {error}");
        assert!(bodies(&h).is_empty(), "{wire:?}: nothing is sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_response_formats_answers_through_the_answer_tool() {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push_all([
        MockTurn::tool_call("c1", ANSWER_TOOL, json!({"city": "Oslo"})),
        MockTurn::tool_call("c2", ANSWER_TOOL, json!({"city": "Oslo", "celsius": 4.5})).with_delta_chars(5),
    ]);
    let wire = OpenAiChatWire { answer_tool: true, ..OpenAiChatWire::default() };
    let config = HttpConfig::new("local", server.openai_url(), Some(ApiKey::new("k")));
    let provider: Arc<dyn LlmProvider> = Arc::new(HttpProvider::new(config, wire).expect("builds"));
    let engine = Engine::builder().resolver(Arc::new(FixedModel::new(provider, "local-model"))).build();
    let agent = engine.agent("forecaster").build().expect("agent builds");
    let typed = agent.run_typed::<Weather>("Weather in Oslo?").await.expect("a typed answer");
    assert_eq!(typed.value, Weather { city: "Oslo".into(), celsius: 4.5 });
    assert_eq!(typed.run.tool_calls, 0, "the answer tool is no tool call of the run");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body.to_string().contains("celsius"), "the correction names the missing field");
    assert_eq!(requests[1].body["tool_choice"], json!("required"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_schema_survives_a_resume() {
    let h = Harness::new(Wire::OpenAiChat).await;
    h.push([
        h.call("call_w", "fs.write", json!({"path": "out.txt", "content": "4.5"})),
        MockTurn::text("It is mild."),
        MockTurn::text(r#"{"city": "Oslo", "celsius": 4.5}"#),
    ]);
    let agent = h.engine().agent("forecaster").workspace(h.dir.path()).coding_tools().build().expect("agent builds");
    let input = RunInput::new("Weather in Oslo? Note it down.").output(output_spec_for::<Weather>());
    let paused = agent.run(input).await.expect("the run ends");
    let RunOutcome::Paused { pending } = &paused.outcome else { panic!("paused: {:?}", paused.outcome) };

    // Stored and read back, as a resume reads it: the schema is part of the state.
    let text = serde_json::to_string(&paused.state).expect("serializes");
    let mut state: RunState = serde_json::from_str(&text).expect("parses");
    state.apply_signal(Signal::approval(pending[0].call_id.clone(), ApprovalDecision::Approve)).expect("taken");
    let output = agent.resume(state).result.await.expect("the run task ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: r#"{"celsius":4.5,"city":"Oslo"}"#.into() });

    let bodies = bodies(&h);
    assert_eq!(bodies.len(), 3, "the call, the answer sent back, the corrected answer");
    for body in &bodies[1..] {
        assert_eq!(schema_sent(Wire::OpenAiChat, body)["required"], json!(["city", "celsius"]), "{body}");
    }
    assert!(bodies[2].to_string().contains("Your answer cannot be used"));
}
