//! A run that does not complete cannot pass for one: `into_result` and readable errors.

use super::engine;
use troupe::prelude::*;
use troupe_testkit::{MockLlmServer, MockTurn};

#[tokio::test]
async fn a_failed_run_is_an_error_once_asked_for_its_result() {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    // A request the vendor refuses: not retried, the run fails.
    server.push(MockTurn::status(400, "bad request: the model does not exist"));
    let agent = engine(&server).agent("helper").model("openai/gpt-4o").build().expect("builds");
    let output = agent.run("Hello").await.expect("the run ran");
    assert!(!output.is_completed());

    let error = output.into_result().expect_err("a failed run is an error");
    let RuntimeError::NotCompleted(kept) = &error else { panic!("not NotCompleted: {error}") };
    assert!(matches!(kept.output.outcome, RunOutcome::Failed { .. }), "{kept:?}");
    assert!(format!("{kept:?}").len() < 400, "the Debug is short: {kept:?}");
    let sentence = error.to_string();
    assert!(sentence.starts_with("the run failed"), "{sentence}");
    // What `?` out of `main` prints: the sentence, not the variants.
    let debug = format!("{:?}", troupe::Error::from(error));
    assert!(debug.starts_with("the run failed"), "{debug}");
    assert!(!debug.contains("NotCompleted"), "{debug}");
}

#[tokio::test]
async fn a_completed_run_is_its_output() {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::text("hi"));
    let agent = engine(&server).agent("helper").model("openai/gpt-4o").build().expect("builds");
    let output = agent.run("Hello").await.expect("the run ran").into_result().expect("completes");
    assert_eq!(output.text, "hi");
}
