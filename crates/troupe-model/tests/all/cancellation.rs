//! Cancellation and the idle timeout over real HTTP, on the real clock: a cancelled call
//! must end within a fraction of the server's pace, never after it.

use futures::StreamExt;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StreamEvent};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{
    ApiKey, Error, EventStream, HttpConfig, HttpProvider, LlmProvider, Result, RetryPolicy, RetryingProvider, Timeouts,
};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

/// Generous: the work after a cancel is a select and a drop, well under a millisecond.
const PROMPT: Duration = Duration::from_millis(100);

fn http(server: &MockLlmServer, timeouts: Timeouts) -> HttpProvider<AnthropicWire> {
    let config = HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key"))).timeouts(timeouts);
    HttpProvider::new(config, AnthropicWire::default()).expect("client builds")
}

fn request() -> ModelRequest {
    ModelRequest::new("mock-model").message(Message::user("count to a hundred")).max_tokens(256)
}

/// Cancels `cancel` after `after`, returning when it did.
fn cancel_after(cancel: &CancellationToken, after: Duration) -> tokio::task::JoinHandle<Instant> {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let at = Instant::now();
        cancel.cancel();
        at
    })
}

fn slow_turn() -> MockTurn {
    MockTurn::text("one two three four five six seven eight nine ten ".repeat(5))
        .with_delta_chars(4)
        .with_event_delay(Duration::from_millis(200))
}

/// Reads up to the first text delta, cancels while the next is 200 ms away, and checks the
/// stream ends with `Cancelled` promptly.
async fn cancel_mid_stream(mut stream: EventStream, cancel: &CancellationToken) {
    loop {
        match stream.next().await {
            Some(Ok(StreamEvent::TextDelta { .. })) => break,
            Some(Ok(_)) => {}
            other => panic!("expected the stream's first events, got {other:?}"),
        }
    }
    let cancelled_at = cancel_after(cancel, Duration::from_millis(50));
    let next = stream.next().await;
    let ended_at = Instant::now();
    let cancelled_at = cancelled_at.await.expect("the canceller ran");
    assert!(matches!(next, Some(Err(Error::Cancelled))), "{next:?}");
    assert!(ended_at - cancelled_at < PROMPT, "took {:?} after the cancel", ended_at - cancelled_at);
    assert!(stream.next().await.is_none(), "nothing follows the cancellation");
}

#[tokio::test]
async fn cancelling_mid_stream_ends_it_promptly() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(slow_turn());
    let provider = http(&server, Timeouts::default());
    let cancel = CancellationToken::new();
    let stream = provider.stream(&request(), cancel.clone()).await.expect("the stream opens");
    cancel_mid_stream(stream, &cancel).await;
}

#[tokio::test]
async fn cancelling_mid_stream_through_the_retry_layer_ends_it_promptly() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(slow_turn());
    let provider = RetryingProvider::new(http(&server, Timeouts::default()), RetryPolicy::default());
    let cancel = CancellationToken::new();
    let stream = provider.stream(&request(), cancel.clone()).await.expect("the stream opens");
    cancel_mid_stream(stream, &cancel).await;
    assert_eq!(server.requests().len(), 1, "a cancellation is not retried");
}

#[tokio::test]
async fn cancelling_while_waiting_for_the_first_event_returns_promptly() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("late").with_fault(Fault::Stall { after_events: 0, duration: Duration::from_secs(10) }));
    let provider = http(&server, Timeouts::default());
    let cancel = CancellationToken::new();
    // The mock sends its headers at once, so the wait is for the body's first event.
    let mut stream = provider.stream(&request(), cancel.clone()).await.expect("the headers arrive");
    let cancelled_at = cancel_after(&cancel, Duration::from_millis(50));
    let next = stream.next().await;
    let ended_at = Instant::now();
    let cancelled_at = cancelled_at.await.expect("the canceller ran");
    assert!(matches!(next, Some(Err(Error::Cancelled))), "{next:?}");
    assert!(ended_at - cancelled_at < PROMPT, "took {:?} after the cancel", ended_at - cancelled_at);
}

#[tokio::test]
async fn cancelling_while_the_retry_layer_waits_for_the_first_event_returns_promptly() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("late").with_fault(Fault::Stall { after_events: 0, duration: Duration::from_secs(10) }));
    let provider = RetryingProvider::new(http(&server, Timeouts::default()), RetryPolicy::default());
    let cancel = CancellationToken::new();
    let cancelled_at = cancel_after(&cancel, Duration::from_millis(100));
    // The retry layer waits for the first event before it resolves, so the cancel lands
    // inside the call.
    let result: Result<EventStream> = provider.stream(&request(), cancel.clone()).await;
    let ended_at = Instant::now();
    let cancelled_at = cancelled_at.await.expect("the canceller ran");
    assert!(matches!(result, Err(Error::Cancelled)), "{:?}", result.map(|_| "a stream"));
    assert!(ended_at - cancelled_at < PROMPT, "took {:?} after the cancel", ended_at - cancelled_at);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cancelled_token_stops_the_call_before_it_is_sent() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("unused"));
    let provider = RetryingProvider::new(http(&server, Timeouts::default()), RetryPolicy::default());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = provider.stream(&request(), cancel).await;
    assert!(matches!(result, Err(Error::Cancelled)), "{:?}", result.map(|_| "a stream"));
    assert!(server.requests().is_empty(), "nothing was sent, nor retried");
}

/// An idle limit of `Duration::MAX` is no limit, event after event: no panic.
#[tokio::test]
async fn an_idle_limit_past_any_clock_is_no_limit() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("one two three four five six").with_delta_chars(3));
    let provider = http(&server, Timeouts { idle: Duration::MAX, ..Timeouts::default() });
    let stream = provider.stream(&request(), CancellationToken::new()).await.expect("the stream opens");
    let events: Vec<_> = stream.collect().await;
    assert!(events.iter().all(Result::is_ok), "{events:?}");
    assert!(events.len() > 3, "streamed in several events: {events:?}");
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("late").with_fault(Fault::Stall { after_events: 0, duration: Duration::from_secs(5) }));
    let idle = Duration::from_millis(200);
    let provider = http(&server, Timeouts { idle, ..Timeouts::default() });
    let mut stream = provider.stream(&request(), CancellationToken::new()).await.expect("the stream opens");
    let started = Instant::now();
    let next = stream.next().await;
    let waited = started.elapsed();
    assert!(
        matches!(&next, Some(Err(Error::Timeout { phase: "waiting for the next event", after, .. })) if *after == idle),
        "{next:?}"
    );
    assert!(waited >= idle && waited < Duration::from_secs(2), "waited {waited:?}");
    assert!(stream.next().await.is_none());
}
