//! [`RateLimit`]: token buckets that make calls wait for their turn.

use super::context::{ModelCallContext, ToolCallContext};
use super::error::MiddlewareError;
use super::hooks::Middleware;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_core::ModelRequest;

/// Whose calls share a bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateScope {
    /// Each agent (by name) has its own buckets.
    #[default]
    PerAgent,
    /// Every agent of the runners sharing this middleware draws from the same buckets.
    Global,
}

/// How many calls a bucket lets through per period: `calls` per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateQuota {
    /// Calls per period (at least 1 is used).
    pub calls: u32,
    /// The period (at least 1 ms is used).
    pub per: Duration,
}

impl RateQuota {
    /// `calls` calls per `per`.
    pub fn new(calls: u32, per: Duration) -> Self {
        RateQuota { calls, per }
    }

    /// `calls` calls per minute.
    pub fn per_minute(calls: u32) -> Self {
        RateQuota::new(calls, Duration::from_secs(60))
    }

    /// The bucket's capacity, at least 1: a bucket that never refills would hold calls forever.
    fn capacity(&self) -> f64 {
        f64::from(self.calls.max(1))
    }

    /// Tokens regained per second.
    fn rate(&self) -> f64 {
        self.capacity() / self.per.max(Duration::from_millis(1)).as_secs_f64()
    }
}

/// The quotas of a [`RateLimit`]: model calls and tool calls; `None` limits nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateQuotas {
    /// Model calls.
    pub model: Option<RateQuota>,
    /// Tool calls.
    pub tool: Option<RateQuota>,
}

impl RateQuotas {
    /// Whether these quotas limit nothing.
    pub fn is_unlimited(&self) -> bool {
        self.model.is_none() && self.tool.is_none()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Model,
    Tool,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// The quotas and the buckets, under one lock so that a change of quota and a take
/// never interleave.
#[derive(Debug, Default)]
struct Buckets {
    quotas: RateQuotas,
    buckets: HashMap<(Kind, String), Bucket>,
}

/// Limits model calls (and, optionally, tool calls) to N per period: a token bucket
/// that starts full, so bursts of up to N go at once, and then lets calls through at
/// N per period. A call over the limit **waits** for its turn rather than failing; the
/// wait ends early, and the call is not made, when the run is cancelled.
///
/// The quotas can change while runs are going ([`set_quotas`](RateLimit::set_quotas)):
/// the limiter is shared, so the next call of every run sharing it goes by the new quota,
/// and a call already waiting for its turn looks again at once. A bucket keeps the tokens
/// it has, up to the new capacity.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use troupe_runtime::{Engine, RateLimit, RateQuota, RateQuotas};
///
/// let limit = Arc::new(
///     RateLimit::new()
///         .model_calls(50, Duration::from_secs(60))
///         .tool_calls(200, Duration::from_secs(60))
///         .global(),
/// );
/// let engine = Engine::builder().middleware(limit.clone()).build();
/// // Later, say after an edit of the configuration:
/// limit.set_quotas(RateQuotas { model: Some(RateQuota::per_minute(20)), tool: None });
/// assert_eq!(limit.quotas().model, Some(RateQuota::per_minute(20)));
/// # let _ = engine;
/// ```
#[derive(Debug, Default)]
pub struct RateLimit {
    scope: RateScope,
    state: Mutex<Buckets>,
    /// Wakes waiting calls when the quotas change.
    changed: Notify,
}

impl RateLimit {
    /// A rate limit that limits nothing yet.
    pub fn new() -> Self {
        RateLimit::default()
    }

    /// At most `calls` model calls per `per` (at least 1 call per at least 1 ms).
    pub fn model_calls(mut self, calls: u32, per: Duration) -> Self {
        self.lock_mut().quotas.model = Some(RateQuota::new(calls, per));
        self
    }

    /// At most `calls` tool calls per `per` (at least 1 call per at least 1 ms).
    pub fn tool_calls(mut self, calls: u32, per: Duration) -> Self {
        self.lock_mut().quotas.tool = Some(RateQuota::new(calls, per));
        self
    }

    /// Sets whose calls share a bucket.
    pub fn scope(mut self, scope: RateScope) -> Self {
        self.scope = scope;
        self
    }

    /// One bucket for every agent ([`RateScope::Global`]).
    pub fn global(self) -> Self {
        self.scope(RateScope::Global)
    }

    /// One bucket per agent ([`RateScope::PerAgent`], the default).
    pub fn per_agent(self) -> Self {
        self.scope(RateScope::PerAgent)
    }

    /// The quotas in force.
    pub fn quotas(&self) -> RateQuotas {
        self.lock().quotas
    }

    /// Replaces both quotas, at once for every run sharing the limiter; `None` lifts one.
    pub fn set_quotas(&self, quotas: RateQuotas) {
        self.lock().quotas = quotas;
        self.changed.notify_waiters();
    }

    /// Replaces the model call quota; `None` lifts it.
    pub fn set_model_quota(&self, quota: Option<RateQuota>) {
        self.lock().quotas.model = quota;
        self.changed.notify_waiters();
    }

    /// Replaces the tool call quota; `None` lifts it.
    pub fn set_tool_quota(&self, quota: Option<RateQuota>) {
        self.lock().quotas.tool = quota;
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_mut(&mut self) -> &mut Buckets {
        self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a token from the bucket of `kind` for `agent` (nothing to take without a
    /// quota), or says how long until one is there.
    fn try_take(&self, kind: Kind, agent: &str) -> Result<(), Duration> {
        let mut state = self.lock();
        let quota = match kind {
            Kind::Model => state.quotas.model,
            Kind::Tool => state.quotas.tool,
        };
        let Some(quota) = quota else { return Ok(()) };
        let key = match self.scope {
            RateScope::PerAgent => agent.to_owned(),
            RateScope::Global => String::new(),
        };
        let now = Instant::now();
        let capacity = quota.capacity();
        let bucket = state.buckets.entry((kind, key)).or_insert(Bucket { tokens: capacity, refilled: now });
        let regained = now.saturating_duration_since(bucket.refilled).as_secs_f64() * quota.rate();
        bucket.tokens = (bucket.tokens + regained).min(capacity);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / quota.rate());
        Err(wait.max(Duration::from_millis(1)))
    }

    /// Waits until the bucket lets the call through, or the run is cancelled.
    async fn acquire(&self, kind: Kind, agent: &str, cancel: &CancellationToken) -> Result<(), MiddlewareError> {
        loop {
            // Registered before looking, so a change made after the look is not missed.
            let changed = self.changed.notified();
            match self.try_take(kind, agent) {
                Ok(()) => return Ok(()),
                Err(wait) => {
                    tracing::debug!(agent, ?kind, wait_ms = wait.as_millis() as u64, "rate limit: the call waits");
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Err(MiddlewareError::cancelled(self.name())),
                        () = changed => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }
}

impl Middleware for RateLimit {
    fn name(&self) -> &str {
        "rate_limit"
    }

    fn before_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        _request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        self.acquire(Kind::Model, &ctx.agent, &ctx.cancel).boxed()
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        _arguments: &'a mut serde_json::Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        self.acquire(Kind::Tool, &ctx.agent, &ctx.cancel).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::RunId;

    /// Paused time advances to timer deadlines, which are kept in whole milliseconds.
    fn assert_near(elapsed: Duration, expected: Duration) {
        assert!(elapsed >= expected && elapsed < expected + Duration::from_millis(5), "{elapsed:?}, not {expected:?}");
    }

    fn model_ctx(agent: &str) -> ModelCallContext {
        ModelCallContext::new(agent, RunId::new("r"), 1, "demo", "demo")
    }

    async fn model_call(limit: &RateLimit, agent: &str) -> Result<(), MiddlewareError> {
        limit.before_model(&model_ctx(agent), &mut ModelRequest::new("m")).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_calls_wait_for_tokens() {
        let limit = RateLimit::new().model_calls(2, Duration::from_secs(1));
        let start = Instant::now();
        model_call(&limit, "a").await.expect("first");
        model_call(&limit, "a").await.expect("second");
        assert_eq!(start.elapsed(), Duration::ZERO, "the bucket starts full");
        model_call(&limit, "a").await.expect("third");
        assert_near(start.elapsed(), Duration::from_millis(500));
        model_call(&limit, "a").await.expect("fourth");
        assert_near(start.elapsed(), Duration::from_millis(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn agents_have_their_own_buckets_unless_global() {
        let per_agent = RateLimit::new().model_calls(1, Duration::from_secs(10));
        let start = Instant::now();
        model_call(&per_agent, "a").await.expect("a");
        model_call(&per_agent, "b").await.expect("b");
        assert_eq!(start.elapsed(), Duration::ZERO, "b does not wait for a");

        let global = RateLimit::new().model_calls(1, Duration::from_secs(10)).global();
        model_call(&global, "a").await.expect("a");
        model_call(&global, "b").await.expect("b");
        assert_near(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_when_the_run_is_cancelled() {
        let limit = RateLimit::new().model_calls(1, Duration::from_secs(3600));
        model_call(&limit, "a").await.expect("first");
        let ctx = model_ctx("a");
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            cancel.cancel();
        });
        let start = Instant::now();
        let error = limit.before_model(&ctx, &mut ModelRequest::new("m")).await.expect_err("cancelled");
        assert_eq!(error, MiddlewareError::cancelled("rate_limit"));
        assert_near(start.elapsed(), Duration::from_secs(1));
        // The cancelled call took no token: the next one after a refill goes at once.
        tokio::time::advance(Duration::from_secs(3600)).await;
        let again = Instant::now();
        model_call(&limit, "a").await.expect("refilled");
        assert_eq!(again.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_quota_applies_to_the_next_call_and_to_a_waiting_one() {
        let limit = std::sync::Arc::new(RateLimit::new().model_calls(1, Duration::from_secs(3600)));
        model_call(&limit, "a").await.expect("first");
        let waiting = {
            let limit = std::sync::Arc::clone(&limit);
            tokio::spawn(async move {
                let start = Instant::now();
                model_call(&limit, "a").await.expect("second");
                start.elapsed()
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        // 3600 calls an hour: the waiting call looks again at once and goes within a second.
        limit.set_model_quota(Some(RateQuota::new(3600, Duration::from_secs(3600))));
        let waited = waiting.await.expect("joins");
        assert!(waited < Duration::from_secs(3), "{waited:?}: the raised quota freed the waiting call");
        assert_eq!(limit.quotas().model, Some(RateQuota::new(3600, Duration::from_secs(3600))));

        // Lowered, the bucket keeps no more than the new capacity.
        limit.set_quotas(RateQuotas { model: Some(RateQuota::new(1, Duration::from_secs(10))), tool: None });
        tokio::time::advance(Duration::from_secs(10)).await;
        let start = Instant::now();
        model_call(&limit, "a").await.expect("one token");
        model_call(&limit, "a").await.expect("waits for the refill");
        assert_near(start.elapsed(), Duration::from_secs(10));

        // Lifted, nothing waits.
        limit.set_model_quota(None);
        assert!(limit.quotas().is_unlimited());
        let start = Instant::now();
        for _ in 0..5 {
            model_call(&limit, "a").await.expect("unlimited");
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn tool_calls_are_limited_only_when_asked() {
        let ctx = ToolCallContext::new("a", RunId::new("r"), 1, "fs.read", "c1");
        let unlimited = RateLimit::new().model_calls(1, Duration::from_secs(60));
        let start = Instant::now();
        for _ in 0..5 {
            unlimited.before_tool(&ctx, &mut serde_json::json!({})).await.expect("unlimited");
        }
        assert_eq!(start.elapsed(), Duration::ZERO);

        let limited = RateLimit::new().tool_calls(3, Duration::from_secs(3));
        for _ in 0..4 {
            limited.before_tool(&ctx, &mut serde_json::json!({})).await.expect("waits, never fails");
        }
        assert_near(start.elapsed(), Duration::from_secs(1));
        // Model calls are not limited by a tool quota.
        let before = Instant::now();
        limited.before_model(&model_ctx("a"), &mut ModelRequest::new("m")).await.expect("model call");
        assert_eq!(before.elapsed(), Duration::ZERO);
    }
}
