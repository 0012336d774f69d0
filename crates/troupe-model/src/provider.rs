//! The [`LlmProvider`] trait: one interface over every vendor.

use crate::accumulator::{ModelResponse, StreamAccumulator};
use crate::error::Result;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;
use troupe_core::{ModelRequest, StreamEvent};

/// The events of one streamed model response.
pub type EventStream = BoxStream<'static, Result<StreamEvent>>;

/// A source of model responses.
///
/// The loop never sees a vendor format: every provider turns a [`ModelRequest`] into a
/// stream of [`StreamEvent`]s. The future and the stream are `Send + 'static`, so a call can
/// run inside any spawned task. Cancelling `cancel` ends the stream promptly with
/// [`Error::Cancelled`](crate::Error::Cancelled).
pub trait LlmProvider: Send + Sync {
    /// The provider's name, as used in `provider/model` ids and errors.
    fn name(&self) -> &str;

    /// Starts a streamed response to `request`.
    ///
    /// The returned future resolves once the provider accepted the request (errors before
    /// that are returned directly and are the ones retry policies act on); the stream then
    /// yields the response's events and ends after [`StreamEvent::MessageStop`] or an error.
    fn stream<'a>(&'a self, request: &'a ModelRequest, cancel: CancellationToken)
    -> BoxFuture<'a, Result<EventStream>>;

    /// The whole response at once: [`stream`](LlmProvider::stream) folded by a
    /// [`StreamAccumulator`].
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ModelResponse>> {
        async move {
            let mut stream = self.stream(request, cancel).await?;
            let mut accumulator = StreamAccumulator::new();
            while let Some(event) = stream.next().await {
                accumulator.push(&event?)?;
            }
            accumulator.finish()
        }
        .boxed()
    }
}

impl<P: LlmProvider + ?Sized> LlmProvider for std::sync::Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        (**self).stream(request, cancel)
    }
}
