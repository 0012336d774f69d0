//! The [`Middleware`] trait: four hooks around model calls and tool calls.

use super::context::{ModelCallContext, ToolCallContext};
use super::error::MiddlewareError;
use futures::future::BoxFuture;
use troupe_core::ModelRequest;
use troupe_model::ModelResponse;
use troupe_tools::ToolResultOutcome;

/// Code that runs around every model call and tool call of a run.
///
/// Every hook is a no-op by default: implement the ones you need. Hooks of a
/// [`MiddlewareStack`](crate::MiddlewareStack) run in order before a call (first to last)
/// and in reverse order after it (last to first), so the first middleware wraps all the
/// others.
///
/// - [`before_model`](Self::before_model) may change the request (what is sent, never
///   the conversation the run keeps) or refuse the call, which ends the run
///   [`Failed`](crate::RunOutcome::Failed) with code `middleware_refused`.
/// - [`after_model`](Self::after_model) sees the whole response and its usage and may
///   change the message the run keeps (its text, say, for redaction). The response has
///   already been streamed live as it arrived; what changes is the conversation, the
///   answer and the record. Usage is reported, not changed: the runner keeps the
///   provider's count. A tool call must not be removed (it was announced live).
/// - [`before_tool`](Self::before_tool) may change the arguments or refuse the call: the
///   model then reads the refusal as the call's error result, and the run goes on.
/// - [`after_tool`](Self::after_tool) may change the result the model sees, or withhold
///   it (an error result takes its place).
///
/// A hook that waits (a rate limit) should watch the context's `cancel` token; the
/// runner also drops a hook's future when the run is cancelled or runs out of time.
///
/// ```
/// use futures::{FutureExt, future::BoxFuture};
/// use troupe_runtime::{Middleware, MiddlewareError, ToolCallContext};
///
/// /// Keeps the agent out of `secrets/`.
/// struct NoSecrets;
///
/// impl Middleware for NoSecrets {
///     fn name(&self) -> &str {
///         "no_secrets"
///     }
///
///     fn before_tool<'a>(
///         &'a self,
///         _ctx: &'a ToolCallContext,
///         arguments: &'a mut serde_json::Value,
///     ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
///         let path = arguments["path"].as_str().unwrap_or_default();
///         let verdict = if path.starts_with("secrets/") {
///             Err(MiddlewareError::refused(self.name(), "files under secrets/ are off limits"))
///         } else {
///             Ok(())
///         };
///         async move { verdict }.boxed()
///     }
/// }
/// ```
pub trait Middleware: Send + Sync {
    /// A short name, for refusals and logs.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Runs before the model is called; may change `request` or refuse the call.
    fn before_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let _ = (ctx, request);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Runs after the model answered in full; may change the message the run keeps, or
    /// refuse it (the run then fails).
    fn after_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        response: &'a mut ModelResponse,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let _ = (ctx, response);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Runs before a tool is called; may change `arguments` or refuse the call.
    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        arguments: &'a mut serde_json::Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let _ = (ctx, arguments);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Runs after a tool call (failed ones included); may change the result or withhold
    /// it.
    fn after_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        result: &'a mut ToolResultOutcome,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let _ = (ctx, result);
        Box::pin(std::future::ready(Ok(())))
    }
}
