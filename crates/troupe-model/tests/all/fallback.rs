//! Fallback chains over real HTTP: two routes to the same mock server, told apart by the
//! model name each request carries.

use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StreamEvent};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{
    ApiKey, Error, FallbackProvider, FallbackRoute, HttpConfig, HttpProvider, LlmProvider, Result, RetryPolicy,
    RetryingProvider,
};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

const PRIMARY: &str = "claude-primary";
const BACKUP: &str = "claude-backup";

fn quick(retries: u32) -> RetryPolicy {
    RetryPolicy::default().max_retries(retries).initial_delay(Duration::from_millis(5)).jitter(0.0)
}

/// A chain primary → backup, each route retrying by its own policy, both on `server`.
fn chain(server: &MockLlmServer, primary: RetryPolicy, backup: RetryPolicy) -> FallbackProvider {
    let config = HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key")));
    let http = Arc::new(HttpProvider::new(config, AnthropicWire::default()).expect("client builds"));
    FallbackProvider::new(vec![
        FallbackRoute::new(
            format!("anthropic/{PRIMARY}"),
            Arc::new(RetryingProvider::new(Arc::clone(&http), primary)),
            PRIMARY,
        ),
        FallbackRoute::new(format!("anthropic/{BACKUP}"), Arc::new(RetryingProvider::new(http, backup)), BACKUP),
    ])
    .expect("two routes")
}

async fn run(provider: &impl LlmProvider) -> Result<Vec<Result<StreamEvent>>> {
    let request = ModelRequest::new(PRIMARY).message(Message::user("hi")).max_tokens(64);
    let stream = provider.stream(&request, CancellationToken::new()).await?;
    Ok(stream.collect().await)
}

fn models(server: &MockLlmServer) -> Vec<String> {
    server.requests().iter().map(|r| r.body["model"].as_str().unwrap_or("<none>").to_owned()).collect()
}

fn text_of(events: &[Result<StreamEvent>]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn assert_fallback(event: &Result<StreamEvent>) {
    match event {
        Ok(StreamEvent::ModelFallback { from, to, reason }) => {
            assert_eq!(from, &format!("anthropic/{PRIMARY}"));
            assert_eq!(to, &format!("anthropic/{BACKUP}"));
            assert!(reason.contains("overloaded"), "{reason}");
        }
        other => panic!("expected a ModelFallback event, got {other:?}"),
    }
}

#[tokio::test]
async fn an_overloaded_model_falls_back_to_the_next() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::status(529, "Overloaded"));
    server.push(MockTurn::text("from the backup"));
    let provider = chain(&server, RetryPolicy::none(), RetryPolicy::none());
    let events = run(&provider).await.expect("the backup answers");
    assert_fallback(&events[0]);
    assert!(matches!(&events[1], Ok(StreamEvent::MessageStart { .. })), "{:?}", events[1]);
    assert_eq!(text_of(&events), "from the backup");
    assert_eq!(models(&server), [PRIMARY, BACKUP]);
}

#[tokio::test]
async fn each_route_exhausts_its_retries_before_the_chain_moves_on() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::status(529, "Overloaded"));
    server.push(MockTurn::status(529, "Overloaded"));
    server.push(MockTurn::fault(Fault::Status {
        status: 429,
        headers: vec![("retry-after-ms".into(), "5".into())],
        message: "rate limited".into(),
    }));
    server.push(MockTurn::text("eventually"));
    let provider = chain(&server, quick(1), quick(1));
    let events = run(&provider).await.expect("the backup's retry answers");
    assert_eq!(models(&server), [PRIMARY, PRIMARY, BACKUP, BACKUP]);
    assert_fallback(&events[0]);
    // The backup's own retry follows the switch, then the answer.
    assert!(matches!(&events[1], Ok(StreamEvent::Retrying { attempt: 1, delay_ms: 5, .. })), "{:?}", events[1]);
    assert_eq!(text_of(&events), "eventually");
}

#[tokio::test]
async fn an_overload_as_the_first_event_falls_back() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("never seen").with_fault(Fault::OverloadedMidStream { after_events: 0 }));
    server.push(MockTurn::text("backup text"));
    let provider = chain(&server, RetryPolicy::none(), RetryPolicy::none());
    let events = run(&provider).await.expect("the backup answers");
    assert_fallback(&events[0]);
    assert_eq!(text_of(&events), "backup text");
    assert_eq!(models(&server), [PRIMARY, BACKUP]);
}

#[tokio::test]
async fn an_overload_after_output_does_not_fall_back() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("half an answer").with_fault(Fault::OverloadedMidStream { after_events: 3 }));
    server.push(MockTurn::text("must not be requested"));
    let provider = chain(&server, RetryPolicy::none(), RetryPolicy::none());
    let events = run(&provider).await.expect("the call itself succeeds");
    assert!(events.iter().all(|e| !matches!(e, Ok(StreamEvent::ModelFallback { .. }))));
    assert!(matches!(events.last(), Some(Err(Error::Overloaded { .. }))), "{:?}", events.last());
    assert_eq!(models(&server), [PRIMARY]);
}

#[tokio::test]
async fn other_errors_do_not_fall_back() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::status(401, "invalid x-api-key"));
    server.push(MockTurn::text("must not be requested"));
    let provider = chain(&server, quick(2), quick(2));
    let error = run(&provider).await.expect_err("a bad key is final");
    assert!(matches!(error, Error::Authentication { status: 401, .. }), "{error:?}");
    assert_eq!(models(&server), [PRIMARY]);
}

#[tokio::test]
async fn when_every_route_is_overloaded_the_last_error_is_returned() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::status(529, "primary is overloaded"));
    server.push(MockTurn::status(529, "backup is overloaded"));
    let provider = chain(&server, RetryPolicy::none(), RetryPolicy::none());
    let error = run(&provider).await.expect_err("no route left");
    assert!(matches!(&error, Error::Overloaded { message, .. } if message.contains("backup")), "{error:?}");
    assert_eq!(models(&server), [PRIMARY, BACKUP]);
}

#[test]
fn an_empty_chain_is_a_configuration_error() {
    let error = FallbackProvider::new(Vec::new()).expect_err("no routes");
    assert!(matches!(error, Error::Config(_)), "{error:?}");
}
