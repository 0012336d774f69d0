//! Fallback chains: when a model is overloaded, the next model of the chain takes the
//! request.

use crate::error::{Error, Result};
use crate::provider::{EventStream, LlmProvider};
use crate::retry::{first_event, prefixed};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::borrow::Cow;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{ModelRequest, StreamEvent};

/// One model of a fallback chain: the provider serving it and its name on the wire.
#[derive(Clone)]
pub struct FallbackRoute {
    /// The model's `provider/model` id (`anthropic/claude-sonnet-4-5`), as reported in
    /// [`StreamEvent::ModelFallback`].
    pub id: String,
    /// The provider serving it, usually a [`RetryingProvider`](crate::RetryingProvider).
    pub provider: Arc<dyn LlmProvider>,
    /// The model name sent to the provider (`claude-sonnet-4-5`).
    pub model: String,
}

impl FallbackRoute {
    /// A route to `model` (wire name) on `provider`, known as `id`.
    pub fn new(id: impl Into<String>, provider: Arc<dyn LlmProvider>, model: impl Into<String>) -> Self {
        FallbackRoute { id: id.into(), provider, model: model.into() }
    }
}

impl std::fmt::Debug for FallbackRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackRoute")
            .field("id", &self.id)
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .finish()
    }
}

/// An [`LlmProvider`] over a chain of models: the first route serves each request, and
/// while a route is overloaded ([`Error::is_overloaded`]) the next one takes over.
///
/// Each request is sent with its `model` replaced by the route's. An overload counts when
/// the call fails or when the stream's first item is the error (a 200 answer followed at
/// once by an overload event); once a route has sent an event, its errors are the
/// caller's. Any other error is returned as it is, without trying further routes, and when
/// every route is overloaded the last route's error is returned. The returned stream
/// begins with one [`StreamEvent::ModelFallback`] per switch.
///
/// The chain does not retry: the intended stack is a `FallbackProvider` over one
/// [`RetryingProvider`](crate::RetryingProvider) per route, so that each model gets its
/// retries and the chain moves on only after they are exhausted.
///
/// ```
/// use std::sync::Arc;
/// use tokio_util::sync::CancellationToken;
/// use troupe_core::{Message, ModelRequest};
/// use troupe_model::{FallbackProvider, FallbackRoute, LlmProvider, RetryPolicy, RetryingProvider};
/// use troupe_testkit::{MockTurn, ScriptedModel};
///
/// let primary = RetryingProvider::new(ScriptedModel::new([MockTurn::text("hi")]), RetryPolicy::default());
/// let backup = RetryingProvider::new(ScriptedModel::new([]), RetryPolicy::default());
/// let chain = FallbackProvider::new(vec![
///     FallbackRoute::new("scripted/big", Arc::new(primary), "big"),
///     FallbackRoute::new("scripted/small", Arc::new(backup), "small"),
/// ])?;
/// let request = ModelRequest::new("big").message(Message::user("hello"));
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| troupe_model::Error::Config(e.to_string()))?;
/// let response = runtime.block_on(chain.complete(&request, CancellationToken::new()))?;
/// assert_eq!(response.message.text(), "hi");
/// # Ok::<(), troupe_model::Error>(())
/// ```
#[derive(Debug)]
pub struct FallbackProvider {
    routes: Vec<FallbackRoute>,
}

impl FallbackProvider {
    /// A chain trying `routes` in order; fails with [`Error::Config`] when there is none.
    pub fn new(routes: Vec<FallbackRoute>) -> Result<Self> {
        if routes.is_empty() {
            return Err(Error::Config("a fallback chain needs at least one model".into()));
        }
        Ok(FallbackProvider { routes })
    }

    /// The routes, in the order they are tried.
    pub fn routes(&self) -> &[FallbackRoute] {
        &self.routes
    }

    async fn open(&self, request: &ModelRequest, cancel: CancellationToken) -> Result<EventStream> {
        let mut switches = Vec::new();
        let mut routes = self.routes.iter().peekable();
        while let Some(route) = routes.next() {
            let routed = if route.model == request.model {
                Cow::Borrowed(request)
            } else {
                let mut routed = request.clone();
                routed.model.clone_from(&route.model);
                Cow::Owned(routed)
            };
            let error = match route.provider.stream(&routed, cancel.clone()).await {
                Ok(stream) => match first_event(stream, &cancel).await {
                    Ok(stream) => return Ok(prefixed(switches, stream)),
                    Err(error) => error,
                },
                Err(error) => error,
            };
            let next = match routes.peek() {
                Some(next) if error.is_overloaded() => next,
                _ => return Err(error),
            };
            tracing::warn!(from = route.id.as_str(), to = next.id.as_str(), error = %error, "model overloaded; falling back");
            switches.push(StreamEvent::ModelFallback {
                from: route.id.clone(),
                to: next.id.clone(),
                reason: error.to_string(),
            });
        }
        // `new` refuses an empty chain, and the loop returns on its last route.
        Err(Error::Config("a fallback chain needs at least one model".into()))
    }
}

impl LlmProvider for FallbackProvider {
    /// The name of the primary route's provider: the chain stands in for it.
    fn name(&self) -> &str {
        self.routes.first().map_or("fallback", |route| route.provider.name())
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        self.open(request, cancel).boxed()
    }
}
