//! Retrying transient failures: [`RetryPolicy`] says how long to wait, [`RetryingProvider`]
//! wraps any [`LlmProvider`] and makes the retries.
//!
//! Only failures that happen before the response's first event are retried: once a model
//! has started answering, repeating the request would show its output twice, so a
//! mid-stream error reaches the caller as it is.

use crate::error::{Error, Result};
use crate::provider::{EventStream, LlmProvider};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use rand::Rng;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{ModelRequest, StreamEvent};

/// A server-given delay longer than this is ignored in favour of the policy's backoff, as
/// the vendors' SDKs do: a client should not sit silent for minutes on one hint.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);

tokio::task_local! {
    /// Where the retries of the model calls made in [`watching_retries`] are announced.
    static RETRY_WATCH: tokio::sync::mpsc::UnboundedSender<StreamEvent>;
}

/// Runs `future` with each retry of the model calls it makes announced on `watch` as it
/// happens (a [`StreamEvent::Retrying`]), instead of at the head of the stream once one
/// opens: a caller waiting on a failing provider hears of each retry at once, and of
/// every retry even when no attempt succeeds.
pub async fn watching_retries<F: Future>(
    watch: tokio::sync::mpsc::UnboundedSender<StreamEvent>,
    future: F,
) -> F::Output {
    RETRY_WATCH.scope(watch, future).await
}

/// How often and how patiently a failed model call is retried.
///
/// The wait before retry `n` (0 for the first retry) is
/// `initial_delay × multiplier^n`, capped at `max_delay` ([`backoff`](RetryPolicy::backoff)),
/// then multiplied by a random factor drawn uniformly from `[1 − jitter, 1]`, so
/// concurrent clients that failed together do not retry together, and no wait is ever
/// longer than the backoff. A delay the server asked for (`retry-after-ms`, `retry-after`)
/// is used as it is instead, without jitter ([`delay`](RetryPolicy::delay)).
///
/// The default makes 4 retries after 1, 2, 4 and 8 s (before jitter of 0.25).
///
/// ```
/// use std::time::Duration;
/// use troupe_model::RetryPolicy;
///
/// let policy = RetryPolicy::default();
/// let delays: Vec<_> = (0..4).map(|retry| policy.backoff(retry)).collect();
/// assert_eq!(delays, [1, 2, 4, 8].map(Duration::from_secs));
/// // The cap holds for every later retry.
/// assert_eq!(policy.backoff(10), Duration::from_secs(8));
///
/// let patient = RetryPolicy::default().max_retries(6).initial_delay(Duration::from_millis(500)).jitter(0.0);
/// assert_eq!(patient.backoff(1), Duration::from_secs(1));
/// assert_eq!(RetryPolicy::none().max_retries, 0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// How many times a failed call is retried (so at most `max_retries + 1` attempts).
    pub max_retries: u32,
    /// The wait before the first retry.
    pub initial_delay: Duration,
    /// The factor by which each wait grows.
    pub multiplier: f64,
    /// The longest computed wait.
    pub max_delay: Duration,
    /// The fraction, in `[0, 1]`, by which a computed wait may be shortened at random: the
    /// wait lies in `[backoff × (1 − jitter), backoff]`. 0 makes waits deterministic.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_delay: Duration::from_secs(1),
            multiplier: 2.0,
            max_delay: Duration::from_secs(8),
            jitter: 0.25,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy { max_retries: 0, ..Self::default() }
    }

    /// Sets how many times a call is retried.
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the wait before the first retry.
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = delay;
        self
    }

    /// Sets the growth factor of the waits.
    pub fn multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// Sets the longest computed wait.
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// Sets the jitter fraction (clamped to `[0, 1]` when used).
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// The wait before retry `retry` (0 for the first retry), without jitter:
    /// `initial_delay × multiplier^retry`, at most `max_delay`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponent = i32::try_from(retry).unwrap_or(i32::MAX);
        let seconds = self.initial_delay.as_secs_f64() * self.multiplier.powi(exponent);
        // A huge exponent overflows to infinity, a nonsensical multiplier gives NaN or a
        // negative number: the cap and zero bound them instead of a panic.
        if seconds.is_nan() || seconds <= 0.0 {
            return Duration::ZERO;
        }
        match Duration::try_from_secs_f64(seconds) {
            Ok(delay) => delay.min(self.max_delay),
            Err(_) => self.max_delay,
        }
    }

    /// The wait before retry `retry` after `error`: the server's requested delay when it
    /// gave one of at most 60 s, otherwise [`backoff`](RetryPolicy::backoff) shortened by a
    /// random factor in `[1 − jitter, 1]`.
    pub fn delay(&self, retry: u32, error: &Error) -> Duration {
        if let Some(after) = error.retry_after().filter(|after| *after <= MAX_SERVER_DELAY) {
            return after;
        }
        let backoff = self.backoff(retry);
        let jitter = if self.jitter.is_nan() { 0.0 } else { self.jitter.clamp(0.0, 1.0) };
        if jitter == 0.0 {
            return backoff;
        }
        backoff.mul_f64(rand::rng().random_range(1.0 - jitter..=1.0))
    }
}

/// An [`LlmProvider`] that retries its inner provider's transient failures.
///
/// A call is retried when it fails with an error whose
/// [`is_retryable`](Error::is_retryable) holds (rate limits, overloads, server errors,
/// timeouts, broken connections, unless the server said `x-should-retry: false`), at most
/// [`RetryPolicy::max_retries`] times, waiting [`RetryPolicy::delay`] before each retry.
/// Cancelling the token during a wait ends the call at once with [`Error::Cancelled`].
///
/// A stream whose first item is an error (Anthropic, for one, may answer 200 and then
/// send an `overloaded_error` event straight away) counts as a failed call: such an error
/// is retried like a failed request, and if it is not retried it is returned from the
/// future, not from the stream. Errors after the first event pass through untouched.
///
/// Each retry made shows in the returned stream: it begins with one
/// [`StreamEvent::Retrying`] per retry, before the response's own events. When every
/// attempt fails, the last error is returned; the retries are then only in the log
/// (`tracing` warnings).
///
/// Wrapped in a [`FallbackProvider`](crate::FallbackProvider), one `RetryingProvider` per
/// route makes retries happen per model and the fallback only once they are exhausted.
#[derive(Debug)]
pub struct RetryingProvider<P> {
    inner: P,
    policy: RetryPolicy,
}

impl<P: LlmProvider> RetryingProvider<P> {
    /// Wraps `inner`, retrying by `policy`.
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        RetryingProvider { inner, policy }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    async fn open(&self, request: &ModelRequest, cancel: CancellationToken) -> Result<EventStream> {
        let mut retries = Vec::new();
        let mut retry = 0;
        loop {
            let error = match self.inner.stream(request, cancel.clone()).await {
                Ok(stream) => match first_event(stream, &cancel).await {
                    Ok(stream) => return Ok(prefixed(retries, stream)),
                    Err(error) => error,
                },
                Err(error) => error,
            };
            if retry >= self.policy.max_retries || !error.is_retryable() {
                return Err(error);
            }
            let delay = self.policy.delay(retry, &error);
            retry += 1;
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let event = StreamEvent::Retrying { attempt: retry, delay_ms, reason: error.to_string() };
            // Announced as it happens to whoever watches (a run, which shows it), else at
            // the head of the stream once one opens, and in the log.
            let announced = RETRY_WATCH.try_with(|watch| watch.send(event.clone()).is_ok()).unwrap_or(false);
            if announced {
                tracing::debug!(provider = self.inner.name(), model = request.model.as_str(), attempt = retry, delay_ms, error = %error, "model call failed; retrying");
            } else {
                tracing::warn!(provider = self.inner.name(), model = request.model.as_str(), attempt = retry, delay_ms, error = %error, "model call failed; retrying");
                retries.push(event);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

impl<P: LlmProvider> LlmProvider for RetryingProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        self.open(request, cancel).boxed()
    }
}

/// Waits for the stream's first item, so that a failure before any output is an error of
/// the call (which a retry or a fallback can act on) rather than of the stream. The
/// returned stream yields the peeked event again, then the rest.
pub(crate) async fn first_event(mut stream: EventStream, cancel: &CancellationToken) -> Result<EventStream> {
    // The inner stream should honour the token itself; selecting here as well keeps a
    // provider that does not from holding the call open after a cancel.
    let first = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Error::Cancelled),
        first = stream.next() => first,
    };
    match first {
        None => Ok(stream),
        Some(Err(error)) => Err(error),
        Some(Ok(event)) => Ok(futures::stream::once(futures::future::ready(Ok(event))).chain(stream).boxed()),
    }
}

/// `stream` preceded by `events` (the retries or fallbacks made before it began).
pub(crate) fn prefixed(events: Vec<StreamEvent>, stream: EventStream) -> EventStream {
    if events.is_empty() {
        return stream;
    }
    futures::stream::iter(events.into_iter().map(Ok)).chain(stream).boxed()
}
