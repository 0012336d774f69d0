//! Middleware: hooks that run around every model call and tool call of a run.
//!
//! A [`Middleware`] implements any of four hooks (`before_model`, `after_model`,
//! `before_tool`, `after_tool`); a [`MiddlewareStack`] runs them in order. The runner
//! calls the stack at fixed points of its loop:
//!
//! - `before_model` after compaction, just before the provider is called, on the request
//!   only (the conversation the run keeps is not touched);
//! - `after_model` once the response is complete, before the run keeps it, prices it,
//!   records it or acts on its tool calls;
//! - `before_tool` after the call was authorized and approved, before its `action started`
//!   evidence, so the record holds the arguments the tool runs with;
//! - `after_tool` when the tool returned, before its `action completed` evidence and
//!   before the model sees the result.
//!
//! Shipped middlewares: [`RateLimit`] (token buckets that make calls wait),
//! [`Logging`] (`tracing` events without content) and [`ContentFilter`] (redaction or
//! blocking of e-mail addresses, phone and card numbers, API keys and your own patterns).

mod content_filter;
mod context;
mod error;
mod hooks;
mod logging;
mod patterns;
mod rate_limit;
mod stack;

pub use content_filter::{ContentFilter, FilterMode, LABEL_PLACEHOLDER, PatternError};
pub use context::{ModelCallContext, ToolCallContext};
pub use error::MiddlewareError;
pub use hooks::Middleware;
pub use logging::Logging;
pub use patterns::SensitiveData;
pub use rate_limit::{RateLimit, RateQuota, RateQuotas, RateScope};
pub use stack::MiddlewareStack;
