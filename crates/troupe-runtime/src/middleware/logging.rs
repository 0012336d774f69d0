//! [`Logging`]: a `tracing` event for each model call and tool call, without content.

use super::context::{ModelCallContext, ToolCallContext};
use super::error::MiddlewareError;
use super::hooks::Middleware;
use futures::future::BoxFuture;
use tracing::Level;
use troupe_core::ModelRequest;
use troupe_model::ModelResponse;
use troupe_tools::ToolResultOutcome;

/// Emits an event at `$level`, a runtime value (the macros want a constant).
macro_rules! event_at {
    ($level:expr, $($rest:tt)+) => {{
        let level = $level;
        if level == Level::ERROR {
            tracing::error!($($rest)+)
        } else if level == Level::WARN {
            tracing::warn!($($rest)+)
        } else if level == Level::INFO {
            tracing::info!($($rest)+)
        } else if level == Level::DEBUG {
            tracing::debug!($($rest)+)
        } else {
            tracing::trace!($($rest)+)
        }
    }};
}

/// Logs every model call and tool call as `tracing` events: which agent, run and step,
/// the model and provider or the tool and call id, how long it took, the tokens used,
/// and how it ended. It never logs what was said: no prompt, response, argument or result
/// text, only their sizes.
///
/// A finished call is logged at `info` (see [`level`](Self::level)), its start one level
/// finer (`debug`). Failed model calls are on their `chat` span (`error.type`), which
/// this middleware does not see.
///
/// ```
/// use std::sync::Arc;
/// use troupe_runtime::{Engine, Logging};
///
/// let engine = Engine::builder().middleware(Arc::new(Logging::new())).build();
/// # let _ = engine;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Logging {
    done: Level,
    start: Level,
}

impl Default for Logging {
    fn default() -> Self {
        Logging::new()
    }
}

impl Logging {
    /// Finished calls at `info`, starts at `debug`.
    pub fn new() -> Self {
        Logging { done: Level::INFO, start: Level::DEBUG }
    }

    /// Logs finished calls at `level` and their starts one level finer.
    pub fn level(self, level: Level) -> Self {
        let start = if level == Level::ERROR {
            Level::WARN
        } else if level == Level::WARN {
            Level::INFO
        } else if level == Level::INFO {
            Level::DEBUG
        } else {
            Level::TRACE
        };
        Logging { done: level, start }
    }
}

fn ready<'a>() -> BoxFuture<'a, Result<(), MiddlewareError>> {
    Box::pin(std::future::ready(Ok(())))
}

impl Middleware for Logging {
    fn name(&self) -> &str {
        "logging"
    }

    fn before_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        event_at!(
            self.start,
            agent = %ctx.agent,
            run_id = %ctx.run_id,
            step = ctx.step,
            model = %ctx.model,
            provider = %ctx.provider,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "model call starts"
        );
        ready()
    }

    fn after_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        response: &'a mut ModelResponse,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let usage = &response.usage;
        let elapsed_ms = ctx.elapsed.map_or(0, |d| d.as_millis() as u64);
        let stop_reason = serde_json::to_value(&response.stop_reason).unwrap_or_default();
        event_at!(
            self.done,
            agent = %ctx.agent,
            run_id = %ctx.run_id,
            step = ctx.step,
            model = %ctx.model,
            provider = %ctx.provider,
            response_model = response.model.as_deref().unwrap_or_default(),
            elapsed_ms,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            cache_read_tokens = usage.cache_read_tokens,
            cache_write_tokens = usage.cache_write_tokens,
            reasoning_tokens = usage.reasoning_tokens,
            stop_reason = %stop_reason.as_str().unwrap_or("other"),
            tool_calls = response.message.tool_uses().count(),
            response_chars = response.message.text().chars().count(),
            "model call finished"
        );
        ready()
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        _arguments: &'a mut serde_json::Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        event_at!(
            self.start,
            agent = %ctx.agent,
            run_id = %ctx.run_id,
            step = ctx.step,
            tool = %ctx.tool,
            call_id = %ctx.call_id,
            "tool call starts"
        );
        ready()
    }

    fn after_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        result: &'a mut ToolResultOutcome,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        event_at!(
            self.done,
            agent = %ctx.agent,
            run_id = %ctx.run_id,
            step = ctx.step,
            tool = %ctx.tool,
            call_id = %ctx.call_id,
            elapsed_ms = result.elapsed.as_millis() as u64,
            is_error = result.is_error,
            result_chars = result.content.chars().count(),
            "tool call finished"
        );
        ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use troupe_core::{Message, RunId, StopReason, Usage};

    /// An event's level and fields, as text.
    type Logged = (Level, Vec<(String, String)>);

    /// Every event.
    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<Logged>>>);

    struct Fields(Vec<(String, String)>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push((field.name().to_owned(), format!("{value:?}")));
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().to_owned(), value.to_owned()));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
        fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
            let mut fields = Fields(Vec::new());
            event.record(&mut fields);
            self.0.lock().expect("events").push((*event.metadata().level(), fields.0));
        }
    }

    fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
        fields.iter().find(|(n, _)| n == name).map_or("", |(_, v)| v.as_str())
    }

    #[tokio::test]
    async fn calls_are_logged_with_sizes_and_tokens_but_no_content() {
        let events = Events::default();
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
        let logging = Logging::new();
        let mut ctx = ModelCallContext::new("coder", RunId::new("run-1"), 2, "anthropic/claude", "anthropic");
        let mut request = ModelRequest::new("claude").message(Message::user("my password is hunter2"));
        logging.before_model(&ctx, &mut request).await.expect("no refusal");
        ctx.elapsed = Some(Duration::from_millis(1234));
        let mut response = ModelResponse {
            message: Message::assistant("the secret answer"),
            stop_reason: StopReason::EndTurn,
            usage: Usage { input_tokens: 11, output_tokens: 7, cache_read_tokens: 3, ..Usage::default() },
            model: Some("claude-x".into()),
            id: None,
        };
        logging.after_model(&ctx, &mut response).await.expect("no refusal");
        let tool = ToolCallContext::new("coder", RunId::new("run-1"), 2, "fs.read", "call_9");
        let mut args = serde_json::json!({"path": "private.txt"});
        logging.before_tool(&tool, &mut args).await.expect("no refusal");
        let mut result = ToolResultOutcome::success("file body".into(), Duration::from_millis(40));
        logging.after_tool(&tool, &mut result).await.expect("no refusal");

        let events = events.0.lock().expect("events").clone();
        let levels: Vec<Level> = events.iter().map(|(level, _)| *level).collect();
        assert_eq!(levels, [Level::DEBUG, Level::INFO, Level::DEBUG, Level::INFO]);
        let model = &events[1].1;
        assert_eq!(field(model, "model"), "anthropic/claude");
        assert_eq!(field(model, "elapsed_ms"), "1234");
        assert_eq!(field(model, "input_tokens"), "11");
        assert_eq!(field(model, "output_tokens"), "7");
        assert_eq!(field(model, "cache_read_tokens"), "3");
        assert_eq!(field(model, "stop_reason"), "end_turn");
        assert_eq!(field(model, "step"), "2");
        let tool = &events[3].1;
        assert_eq!((field(tool, "tool"), field(tool, "call_id")), ("fs.read", "call_9"));
        assert_eq!((field(tool, "elapsed_ms"), field(tool, "result_chars")), ("40", "9"));
        let everything = format!("{events:?}");
        for secret in ["hunter2", "secret answer", "private.txt", "file body"] {
            assert!(!everything.contains(secret), "`{secret}` was logged: {everything}");
        }
    }

    #[tokio::test]
    async fn the_level_is_configurable() {
        let events = Events::default();
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
        let logging = Logging::new().level(Level::DEBUG);
        let tool = ToolCallContext::new("a", RunId::new("r"), 1, "t", "c");
        logging.before_tool(&tool, &mut serde_json::json!({})).await.expect("ok");
        let mut result = ToolResultOutcome::success("x".into(), Duration::ZERO);
        logging.after_tool(&tool, &mut result).await.expect("ok");
        let levels: Vec<Level> = events.0.lock().expect("events").iter().map(|(l, _)| *l).collect();
        assert_eq!(levels, [Level::TRACE, Level::DEBUG]);
    }
}
