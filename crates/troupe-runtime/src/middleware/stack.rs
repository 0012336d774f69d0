//! [`MiddlewareStack`]: middlewares in order, run around each call.

use super::context::{ModelCallContext, ToolCallContext};
use super::error::MiddlewareError;
use super::hooks::Middleware;
use std::sync::Arc;
use troupe_core::ModelRequest;
use troupe_model::ModelResponse;
use troupe_tools::ToolResultOutcome;

/// Middlewares in the order they were added; cheap to clone.
///
/// Before a call the hooks run first to last, after it last to first; the first hook to
/// refuse stops the others. An empty stack costs the runner nothing.
///
/// ```
/// use std::sync::Arc;
/// use troupe_runtime::{Logging, MiddlewareStack, RateLimit};
///
/// let stack = MiddlewareStack::new()
///     .with(Arc::new(Logging::new()))
///     .with(Arc::new(RateLimit::new().model_calls(10, std::time::Duration::from_secs(60))));
/// assert_eq!(stack.names(), ["logging", "rate_limit"]);
/// ```
#[derive(Clone, Default)]
pub struct MiddlewareStack {
    layers: Arc<Vec<Arc<dyn Middleware>>>,
}

impl std::fmt::Debug for MiddlewareStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl MiddlewareStack {
    /// An empty stack.
    pub fn new() -> Self {
        MiddlewareStack::default()
    }

    /// Adds `middleware` after the others.
    pub fn push(&mut self, middleware: Arc<dyn Middleware>) {
        Arc::make_mut(&mut self.layers).push(middleware);
    }

    /// The stack with `middleware` added after the others.
    pub fn with(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.push(middleware);
        self
    }

    /// Adds every middleware of `other` after these.
    pub fn extend(&mut self, other: impl IntoIterator<Item = Arc<dyn Middleware>>) {
        Arc::make_mut(&mut self.layers).extend(other);
    }

    /// How many middlewares the stack holds.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether the stack holds none.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The middlewares, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Middleware>> {
        self.layers.iter()
    }

    /// The middlewares' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.layers.iter().map(|m| m.name()).collect()
    }

    /// Runs every `before_model` hook, first to last.
    pub async fn before_model(
        &self,
        ctx: &ModelCallContext,
        request: &mut ModelRequest,
    ) -> Result<(), MiddlewareError> {
        for layer in self.layers.iter() {
            layer.before_model(ctx, request).await?;
        }
        Ok(())
    }

    /// Runs every `after_model` hook, last to first. The response's usage is the
    /// provider's whatever a hook does to it.
    pub async fn after_model(
        &self,
        ctx: &ModelCallContext,
        response: &mut ModelResponse,
    ) -> Result<(), MiddlewareError> {
        let usage = response.usage;
        let result = async {
            for layer in self.layers.iter().rev() {
                layer.after_model(ctx, response).await?;
            }
            Ok(())
        }
        .await;
        response.usage = usage;
        result
    }

    /// Runs every `before_tool` hook, first to last.
    pub async fn before_tool(
        &self,
        ctx: &ToolCallContext,
        arguments: &mut serde_json::Value,
    ) -> Result<(), MiddlewareError> {
        for layer in self.layers.iter() {
            layer.before_tool(ctx, arguments).await?;
        }
        Ok(())
    }

    /// Runs every `after_tool` hook, last to first.
    pub async fn after_tool(
        &self,
        ctx: &ToolCallContext,
        result: &mut ToolResultOutcome,
    ) -> Result<(), MiddlewareError> {
        for layer in self.layers.iter().rev() {
            layer.after_tool(ctx, result).await?;
        }
        Ok(())
    }
}

impl FromIterator<Arc<dyn Middleware>> for MiddlewareStack {
    fn from_iter<I: IntoIterator<Item = Arc<dyn Middleware>>>(iter: I) -> Self {
        MiddlewareStack { layers: Arc::new(iter.into_iter().collect()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use futures::future::BoxFuture;
    use std::sync::Mutex;
    use std::time::Duration;
    use troupe_core::{Message, RunId, StopReason, Usage};

    /// Writes `<name>:<hook>` to a shared journal; refuses where told.
    struct Recorder {
        name: &'static str,
        journal: Arc<Mutex<Vec<String>>>,
        refuse_before_tool: bool,
    }

    impl Recorder {
        fn note(&self, hook: &str) {
            self.journal.lock().expect("journal").push(format!("{}:{hook}", self.name));
        }
    }

    impl Middleware for Recorder {
        fn name(&self) -> &str {
            self.name
        }

        fn before_model<'a>(
            &'a self,
            _ctx: &'a ModelCallContext,
            request: &'a mut ModelRequest,
        ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
            self.note("before_model");
            request.messages.push(Message::user(self.name));
            async { Ok(()) }.boxed()
        }

        fn after_model<'a>(
            &'a self,
            _ctx: &'a ModelCallContext,
            response: &'a mut ModelResponse,
        ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
            self.note("after_model");
            response.usage.output_tokens += 1000;
            async { Ok(()) }.boxed()
        }

        fn before_tool<'a>(
            &'a self,
            _ctx: &'a ToolCallContext,
            arguments: &'a mut serde_json::Value,
        ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
            self.note("before_tool");
            arguments["seen"] = serde_json::json!(self.name);
            let refuse = self.refuse_before_tool;
            async move { if refuse { Err(MiddlewareError::refused("b", "not today")) } else { Ok(()) } }.boxed()
        }

        fn after_tool<'a>(
            &'a self,
            _ctx: &'a ToolCallContext,
            result: &'a mut ToolResultOutcome,
        ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
            self.note("after_tool");
            result.content.push_str(self.name);
            async { Ok(()) }.boxed()
        }
    }

    fn stack(refuse_in_b: bool) -> (MiddlewareStack, Arc<Mutex<Vec<String>>>) {
        let journal = Arc::new(Mutex::new(Vec::new()));
        let stack = ["a", "b", "c"]
            .into_iter()
            .map(|name| {
                Arc::new(Recorder {
                    name,
                    journal: Arc::clone(&journal),
                    refuse_before_tool: refuse_in_b && name == "b",
                }) as Arc<dyn Middleware>
            })
            .collect();
        (stack, journal)
    }

    fn taken(journal: &Mutex<Vec<String>>) -> Vec<String> {
        std::mem::take(&mut *journal.lock().expect("journal"))
    }

    #[tokio::test]
    async fn before_hooks_run_first_to_last_and_after_hooks_last_to_first() {
        let (stack, journal) = stack(false);
        let ctx = ModelCallContext::new("agent", RunId::new("r"), 1, "demo", "demo");
        let mut request = ModelRequest::new("m");
        stack.before_model(&ctx, &mut request).await.expect("no refusal");
        assert_eq!(request.messages.iter().map(Message::text).collect::<Vec<_>>(), ["a", "b", "c"]);
        let usage = Usage { input_tokens: 3, output_tokens: 4, ..Usage::default() };
        let mut response = ModelResponse {
            message: Message::assistant("hi"),
            stop_reason: StopReason::EndTurn,
            usage,
            model: None,
            id: None,
        };
        stack.after_model(&ctx, &mut response).await.expect("no refusal");
        assert_eq!(response.usage, usage, "usage stays the provider's");
        assert_eq!(
            taken(&journal),
            ["a:before_model", "b:before_model", "c:before_model", "c:after_model", "b:after_model", "a:after_model"]
        );

        let tool_ctx = ToolCallContext::new("agent", RunId::new("r"), 1, "fs.read", "call_1");
        let mut result = ToolResultOutcome::success("out:".into(), Duration::ZERO);
        stack.after_tool(&tool_ctx, &mut result).await.expect("no refusal");
        assert_eq!(result.content, "out:cba");
    }

    #[tokio::test]
    async fn the_first_refusal_stops_the_rest() {
        let (stack, journal) = stack(true);
        let ctx = ToolCallContext::new("agent", RunId::new("r"), 1, "fs.read", "call_1");
        let mut args = serde_json::json!({});
        let error = stack.before_tool(&ctx, &mut args).await.expect_err("b refuses");
        assert_eq!(error, MiddlewareError::refused("b", "not today"));
        assert_eq!(error.code(), "middleware_refused");
        assert_eq!(taken(&journal), ["a:before_tool", "b:before_tool"], "c never ran");
        assert_eq!(args["seen"], "b");
    }

    #[test]
    fn an_empty_stack_is_empty_and_clones_share_nothing_mutable() {
        let (stack, _) = stack(false);
        let mut other = stack.clone();
        other.push(Arc::new(crate::Logging::new()));
        assert_eq!((stack.len(), other.len()), (3, 4));
        assert!(MiddlewareStack::new().is_empty());
        assert_eq!(format!("{stack:?}"), r#"["a", "b", "c"]"#);
    }
}
