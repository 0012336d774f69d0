//! Retry with backoff: the delays on a paused clock against an in-test provider, then a
//! retry over real HTTP against the mock server.

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StopReason, StreamEvent};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{
    ApiKey, Error, EventStream, HttpConfig, HttpProvider, LlmProvider, Result, RetryHint, RetryPolicy, RetryingProvider,
};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

/// What one attempt of the [`Flaky`] provider does.
enum Attempt {
    /// The call itself fails.
    Fail(Error),
    /// The call succeeds but the stream's first item is this error.
    FailFirst(Error),
    /// The response streams these events, then this error (if any).
    Stream(Vec<StreamEvent>, Option<Error>),
}

/// A provider playing a script of attempts, recording when each one was made.
struct Flaky {
    script: Mutex<VecDeque<Attempt>>,
    attempts: Mutex<Vec<Instant>>,
}

impl Flaky {
    fn new(script: impl IntoIterator<Item = Attempt>) -> Arc<Self> {
        Arc::new(Flaky { script: Mutex::new(script.into_iter().collect()), attempts: Mutex::default() })
    }

    fn attempts(&self) -> Vec<Instant> {
        self.attempts.lock().expect("lock").clone()
    }

    /// The waits between consecutive attempts.
    fn gaps(&self) -> Vec<Duration> {
        self.attempts().windows(2).map(|w| w[1] - w[0]).collect()
    }
}

impl LlmProvider for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }

    fn stream<'a>(
        &'a self,
        _request: &'a ModelRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        async move {
            self.attempts.lock().expect("lock").push(Instant::now());
            let attempt = self.script.lock().expect("lock").pop_front().expect("the script covers every attempt");
            match attempt {
                Attempt::Fail(error) => Err(error),
                Attempt::FailFirst(error) => Ok(futures::stream::iter([Err(error)]).boxed()),
                Attempt::Stream(events, error) => {
                    Ok(futures::stream::iter(events.into_iter().map(Ok).chain(error.map(Err))).boxed())
                }
            }
        }
        .boxed()
    }
}

fn hint(after: Option<Duration>, should_retry: Option<bool>) -> RetryHint {
    RetryHint { after, should_retry }
}

fn rate_limited(after: Option<Duration>) -> Error {
    Error::RateLimited { provider: "flaky".into(), message: "slow down".into(), hint: hint(after, None) }
}

fn server_error() -> Error {
    Error::Server { provider: "flaky".into(), status: 500, message: "boom".into(), hint: RetryHint::default() }
}

fn overloaded() -> Error {
    Error::Overloaded { provider: "flaky".into(), message: "Overloaded".into(), hint: RetryHint::default() }
}

fn text_events(text: &str) -> Vec<StreamEvent> {
    vec![
        StreamEvent::MessageStart { id: Some("msg_1".into()), model: None },
        StreamEvent::TextDelta { index: 0, text: text.into() },
        StreamEvent::MessageStop { stop_reason: StopReason::EndTurn },
    ]
}

fn ok() -> Attempt {
    Attempt::Stream(text_events("done"), None)
}

fn request() -> ModelRequest {
    ModelRequest::new("mock-model").message(Message::user("hi")).max_tokens(64)
}

fn no_jitter() -> RetryPolicy {
    RetryPolicy::default().jitter(0.0)
}

/// Opens the stream and collects it; an error of the call itself comes back as `Err`.
async fn run(provider: &impl LlmProvider, cancel: CancellationToken) -> Result<Vec<Result<StreamEvent>>> {
    let stream = provider.stream(&request(), cancel).await?;
    Ok(stream.collect().await)
}

fn secs(seconds: &[u64]) -> Vec<Duration> {
    seconds.iter().map(|s| Duration::from_secs(*s)).collect()
}

#[test]
fn backoff_doubles_to_the_cap_and_never_panics() {
    let policy = RetryPolicy::default();
    assert_eq!((0..6).map(|r| policy.backoff(r)).collect::<Vec<_>>(), secs(&[1, 2, 4, 8, 8, 8]));
    assert_eq!(policy.backoff(u32::MAX), Duration::from_secs(8));
    let odd = RetryPolicy::default().multiplier(f64::NAN);
    assert_eq!(odd.backoff(3), Duration::ZERO);
    let shrinking = RetryPolicy::default().multiplier(-2.0);
    assert_eq!(shrinking.backoff(1), Duration::ZERO);
    assert_eq!(RetryPolicy::none().max_retries, 0);
}

#[test]
fn jittered_delays_lie_between_three_quarters_and_the_whole_backoff() {
    let policy = RetryPolicy::default();
    let mut seen = Vec::new();
    for retry in 0..4 {
        let backoff = policy.backoff(retry);
        for _ in 0..50 {
            let delay = policy.delay(retry, &server_error());
            assert!(delay >= backoff.mul_f64(0.75) && delay <= backoff, "retry {retry}: {delay:?} vs {backoff:?}");
            seen.push(delay);
        }
    }
    seen.sort();
    seen.dedup();
    assert!(seen.len() > 100, "jitter should vary the delays, got {} distinct values", seen.len());
    // A server-given delay is used as it is, without jitter.
    assert_eq!(policy.delay(0, &rate_limited(Some(Duration::from_millis(1500)))), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn delays_are_one_two_four_eight_seconds_without_jitter() {
    let flaky = Flaky::new([
        Attempt::Fail(server_error()),
        Attempt::Fail(overloaded()),
        Attempt::Fail(rate_limited(None)),
        Attempt::Fail(Error::Timeout { provider: "flaky".into(), phase: "connecting", after: Duration::from_secs(1) }),
        ok(),
    ]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let events = run(&provider, CancellationToken::new()).await.expect("the fifth attempt succeeds");
    assert_eq!(flaky.gaps(), secs(&[1, 2, 4, 8]));
    assert_eq!(events.len(), 4 + 3);
}

#[tokio::test(start_paused = true)]
async fn the_servers_retry_after_is_obeyed() {
    let flaky = Flaky::new([
        Attempt::Fail(rate_limited(Some(Duration::from_secs(3)))),
        Attempt::Fail(rate_limited(None)),
        ok(),
    ]);
    // Jitter on: a server-given delay must still be exact.
    let provider = RetryingProvider::new(Arc::clone(&flaky), RetryPolicy::default());
    run(&provider, CancellationToken::new()).await.expect("succeeds");
    let gaps = flaky.gaps();
    assert_eq!(gaps[0], Duration::from_secs(3));
    // The second retry has no hint: backoff(1) = 2 s shortened by at most a quarter.
    assert!(gaps[1] >= Duration::from_millis(1500) && gaps[1] <= Duration::from_secs(2), "{:?}", gaps[1]);
}

#[tokio::test(start_paused = true)]
async fn jittered_waits_stay_in_the_documented_range() {
    let flaky =
        Flaky::new([Attempt::Fail(server_error()), Attempt::Fail(server_error()), Attempt::Fail(server_error()), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), RetryPolicy::default());
    let events = run(&provider, CancellationToken::new()).await.expect("succeeds");
    let gaps = flaky.gaps();
    for (retry, gap) in gaps.iter().enumerate() {
        let backoff = Duration::from_secs(1 << retry);
        assert!(*gap >= backoff.mul_f64(0.75) && *gap <= backoff, "retry {retry}: {gap:?}");
    }
    // The events report the delays waited; the timer wheel rounds a sleep up to the next
    // millisecond, the report rounds down.
    let reported: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::Retrying { delay_ms, .. }) => Some(*delay_ms),
            _ => None,
        })
        .collect();
    assert_eq!(reported.len(), gaps.len());
    for (reported, gap) in reported.iter().zip(&gaps) {
        let waited = gap.as_millis() as u64;
        assert!(waited == *reported || waited == reported + 1, "reported {reported} ms, waited {gap:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn errors_that_are_not_retryable_are_returned_at_once() {
    let auth = Error::Authentication { provider: "flaky".into(), status: 401, message: "bad key".into() };
    let flaky = Flaky::new([Attempt::Fail(auth), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let error = run(&provider, CancellationToken::new()).await.expect_err("401 is final");
    assert!(matches!(error, Error::Authentication { status: 401, .. }), "{error:?}");
    assert_eq!(flaky.attempts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn x_should_retry_false_stops_retrying() {
    let refused =
        Error::Server { provider: "flaky".into(), status: 500, message: "no".into(), hint: hint(None, Some(false)) };
    let flaky = Flaky::new([Attempt::Fail(server_error()), Attempt::Fail(refused), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let error = run(&provider, CancellationToken::new()).await.expect_err("the server said not to retry");
    assert!(matches!(&error, Error::Server { message, .. } if message == "no"), "{error:?}");
    assert_eq!(flaky.attempts().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn max_retries_is_respected() {
    let flaky = Flaky::new((0..6).map(|_| Attempt::Fail(server_error())));
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let error = run(&provider, CancellationToken::new()).await.expect_err("every attempt fails");
    assert!(matches!(error, Error::Server { status: 500, .. }), "{error:?}");
    assert_eq!(flaky.attempts().len(), 5, "one attempt and four retries");
    assert_eq!(flaky.gaps(), secs(&[1, 2, 4, 8]));

    let flaky = Flaky::new([Attempt::Fail(server_error()), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), RetryPolicy::none());
    run(&provider, CancellationToken::new()).await.expect_err("no retries allowed");
    assert_eq!(flaky.attempts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn retrying_events_precede_the_real_events() {
    let flaky = Flaky::new([Attempt::Fail(rate_limited(None)), Attempt::Fail(server_error()), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let events: Vec<StreamEvent> = run(&provider, CancellationToken::new())
        .await
        .expect("succeeds")
        .into_iter()
        .collect::<Result<_>>()
        .expect("no stream error");
    let mut expected = vec![
        StreamEvent::Retrying { attempt: 1, delay_ms: 1000, reason: rate_limited(None).to_string() },
        StreamEvent::Retrying { attempt: 2, delay_ms: 2000, reason: server_error().to_string() },
    ];
    expected.extend(text_events("done"));
    assert_eq!(events, expected);
}

#[tokio::test(start_paused = true)]
async fn an_error_as_the_first_item_is_retried() {
    let flaky = Flaky::new([Attempt::FailFirst(overloaded()), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let events = run(&provider, CancellationToken::new()).await.expect("the retry succeeds");
    assert_eq!(flaky.attempts().len(), 2);
    assert!(matches!(&events[0], Ok(StreamEvent::Retrying { attempt: 1, delay_ms: 1000, .. })), "{:?}", events[0]);
    assert!(events[1..].iter().all(Result::is_ok));
}

#[tokio::test(start_paused = true)]
async fn a_first_item_error_that_is_not_retryable_is_the_calls_error() {
    let flaky = Flaky::new([Attempt::FailFirst(Error::decode("flaky", "garbage")), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let error = run(&provider, CancellationToken::new()).await.expect_err("decode errors are final");
    assert!(matches!(error, Error::Decode { .. }), "{error:?}");
    assert_eq!(flaky.attempts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_mid_stream_error_is_not_retried() {
    let flaky = Flaky::new([Attempt::Stream(text_events("partial")[..2].to_vec(), Some(overloaded())), ok()]);
    let provider = RetryingProvider::new(Arc::clone(&flaky), no_jitter());
    let events = run(&provider, CancellationToken::new()).await.expect("the call itself succeeds");
    assert_eq!(flaky.attempts().len(), 1);
    assert_eq!(events.len(), 3);
    assert!(matches!(&events[0], Ok(StreamEvent::MessageStart { .. })));
    assert!(matches!(&events[1], Ok(StreamEvent::TextDelta { text, .. }) if text == "partial"));
    assert!(matches!(&events[2], Err(Error::Overloaded { .. })), "{:?}", events[2]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_backoff_returns_cancelled_without_waiting() {
    let flaky = Flaky::new([Attempt::Fail(server_error()), ok()]);
    let policy = no_jitter().initial_delay(Duration::from_secs(30)).max_delay(Duration::from_secs(30));
    let provider = RetryingProvider::new(Arc::clone(&flaky), policy);
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let error = run(&provider, cancel).await.expect_err("cancelled");
    assert!(matches!(error, Error::Cancelled), "{error:?}");
    assert_eq!(started.elapsed(), Duration::from_millis(100), "the 30 s backoff was cut short");
    assert_eq!(flaky.attempts().len(), 1);
}

// Over real HTTP, on the real clock, with delays of milliseconds.

fn anthropic(server: &MockLlmServer, policy: RetryPolicy) -> RetryingProvider<HttpProvider<AnthropicWire>> {
    let config = HttpConfig::new("anthropic", server.url(), Some(ApiKey::new("test-key")));
    let http = HttpProvider::new(config, AnthropicWire::default()).expect("client builds");
    RetryingProvider::new(http, policy)
}

fn quick() -> RetryPolicy {
    RetryPolicy::default().initial_delay(Duration::from_millis(10)).max_delay(Duration::from_millis(40)).jitter(0.0)
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

#[tokio::test]
async fn http_429_with_retry_after_ms_is_retried() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::fault(Fault::Status {
        status: 429,
        headers: vec![("retry-after-ms".into(), "20".into())],
        message: "Number of requests has exceeded your rate limit".into(),
    }));
    server.push(MockTurn::text("Hello after the wait"));
    // A long backoff: only the server's 20 ms hint keeps the test fast.
    let provider = anthropic(&server, RetryPolicy::default().initial_delay(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let events = run(&provider, CancellationToken::new()).await.expect("the retry succeeds");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
    assert!(
        matches!(&events[0], Ok(StreamEvent::Retrying { attempt: 1, delay_ms: 20, reason }) if reason.contains("rate limit")),
        "{:?}",
        events[0]
    );
    assert_eq!(text_of(&events), "Hello after the wait");
    assert!(matches!(events.last(), Some(Ok(StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }))));
}

#[tokio::test]
async fn http_overload_before_the_first_event_is_retried() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("ignored").with_fault(Fault::OverloadedMidStream { after_events: 0 }));
    server.push(MockTurn::text("second time lucky"));
    let provider = anthropic(&server, quick());
    let events = run(&provider, CancellationToken::new()).await.expect("the retry succeeds");
    assert_eq!(server.requests().len(), 2);
    assert!(matches!(&events[0], Ok(StreamEvent::Retrying { attempt: 1, delay_ms: 10, .. })), "{:?}", events[0]);
    assert_eq!(text_of(&events), "second time lucky");
}

#[tokio::test]
async fn http_overload_after_events_is_not_retried() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("a fairly long answer").with_fault(Fault::OverloadedMidStream { after_events: 3 }));
    server.push(MockTurn::text("must not be requested"));
    let provider = anthropic(&server, quick());
    let events = run(&provider, CancellationToken::new()).await.expect("the call itself succeeds");
    assert_eq!(server.requests().len(), 1);
    assert!(events.iter().all(|e| !matches!(e, Ok(StreamEvent::Retrying { .. }))));
    assert!(matches!(events.first(), Some(Ok(StreamEvent::MessageStart { .. }))), "{:?}", events.first());
    assert!(matches!(events.last(), Some(Err(Error::Overloaded { .. }))), "{:?}", events.last());
}

/// The hint read from `headers`.
fn hint_of(headers: &[(&'static str, &str)]) -> Option<Duration> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, value.parse().expect("a header value"));
    }
    troupe_model::retry_hint(&map).after
}

/// A delay no `Duration` can hold, negative or not a number is no hint (and no panic);
/// a sensible one is taken.
#[test]
fn a_retry_delay_out_of_any_range_is_ignored() {
    for huge in ["1e20", "1e300", "-1", "NaN", "inf"] {
        assert_eq!(hint_of(&[("retry-after", huge)]), None, "retry-after: {huge}");
        assert_eq!(hint_of(&[("retry-after-ms", huge)]), None, "retry-after-ms: {huge}");
    }
    assert_eq!(hint_of(&[("retry-after-ms", "1e23"), ("retry-after", "2.5")]), Some(Duration::from_millis(2500)));
    assert_eq!(hint_of(&[("retry-after-ms", "250")]), Some(Duration::from_millis(250)));
    assert_eq!(hint_of(&[("retry-after", "61")]), None, "over a minute, as the vendors' SDKs do");
}
