//! An answer that breaks off mid-stream is asked for again from the start, on every wire
//! over real HTTP: the run completes with the whole answer once, the broken-off part is
//! closed on the live stream, and the record keeps one model turn.

use crate::common::{Harness, Wire, check_events};
use troupe_core::{AgentEventKind, FailureCode};
use troupe_runtime::{RunOutcome, STREAM_RESTARTS};
use troupe_store::EvidenceKind;
use troupe_testkit::{Fault, MockTurn};

const ANSWER: &str = "The whole answer, streamed in many small pieces.";

fn answer() -> MockTurn {
    MockTurn::text(ANSWER).with_delta_chars(4)
}

fn retries(events: &[troupe_core::AgentEvent]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::Retrying { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

async fn a_broken_off_answer_is_asked_for_again(wire: Wire) {
    let h = Harness::new(wire).await;
    h.push([answer().with_fault(Fault::Truncate { after_events: 6 }), answer()]);
    let (engine, store, _dir) = h.recorded_engine().await;
    let agent = engine.agent("patient").build().expect("the agent builds");
    let output = agent.run("Answer").await.expect("the run ends");

    assert_eq!(output.outcome, RunOutcome::Completed { output: ANSWER.into() }, "the whole answer, once");
    assert_eq!(retries(&output.events), [1]);
    assert_eq!(h.bodies().len(), 2, "the model was asked twice");
    let messages: Vec<&str> = output
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::MessageStart { message_id, .. } => Some(message_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 2, "the broken-off part was shown, and ended: {messages:?}");
    assert!(messages[1].ends_with(".1") && messages[0] != messages[1], "the new answer is a new message");
    check_events(&output.events);

    let evidence = store.evidence(output.run_id.as_str(), 0).await.expect("the evidence");
    let turns = evidence.iter().filter(|e| e.kind == EvidenceKind::ModelTurn).count();
    assert_eq!(turns, 1, "the broken-off part is not on record");
    assert!(!evidence.iter().any(|e| e.payload.to_string().contains("broke off")));
}

async fn an_answer_that_keeps_breaking_off_fails_the_run(wire: Wire) {
    let h = Harness::new(wire).await;
    let restarts = usize::try_from(STREAM_RESTARTS).expect("small");
    h.push((0..=restarts).map(|_| answer().with_fault(Fault::Truncate { after_events: 6 })));
    let agent = h.engine().agent("patient").build().expect("the agent builds");
    let output = agent.run("Answer").await.expect("the run ends");
    match &output.outcome {
        RunOutcome::Failed { code, .. } => assert_eq!(code, &Some(FailureCode::Truncated)),
        other => panic!("the run fails: {other:?}"),
    }
    assert_eq!(retries(&output.events), (1..=STREAM_RESTARTS).collect::<Vec<_>>());
    assert_eq!(h.bodies().len(), restarts + 1);
    check_events(&output.events);
}

macro_rules! over_http {
    ($($scenario:ident),* $(,)?) => {
        over_http!(@wire anthropic, Wire::Anthropic, $($scenario),*);
        over_http!(@wire openai_chat, Wire::OpenAiChat, $($scenario),*);
        over_http!(@wire openai_responses, Wire::OpenAiResponses, $($scenario),*);
        over_http!(@wire gemini, Wire::Gemini, $($scenario),*);
    };
    (@wire $module:ident, $wire:expr, $($scenario:ident),*) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($wire).await
                }
            )*
        }
    };
}

over_http!(a_broken_off_answer_is_asked_for_again, an_answer_that_keeps_breaking_off_fails_the_run);
