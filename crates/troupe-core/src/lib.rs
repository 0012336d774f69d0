//! The shared vocabulary of troupe.
//!
//! Every other troupe crate speaks in these types: the [`Message`]s of a conversation and
//! their [`ContentBlock`]s, the [`ToolSpec`]s offered to a model, the provider-neutral
//! [`ModelRequest`], the [`StreamEvent`]s a provider streams back with their [`StopReason`]
//! and [`Usage`], and the [`AgentEvent`] taxonomy a run emits for every adapter (CLI, SSE,
//! AG-UI, A2A, worker IPC) to project. No vendor wire format appears here.
//!
//! ```
//! use troupe_core::{Message, ModelRequest, ToolSpec};
//!
//! let request = ModelRequest::new("claude-sonnet-4-5")
//!     .system("You are terse.")
//!     .message(Message::user("What is the weather in Paris?"))
//!     .tool(ToolSpec::new(
//!         "get_weather",
//!         "Current weather for a city",
//!         serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
//!     ))
//!     .max_tokens(512);
//! assert_eq!(request.messages.len(), 1);
//! assert_eq!(request.tools[0].name, "get_weather");
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod attachment;
mod budget;
pub mod duration_ms;
mod error;
mod event;
mod failure;
mod ids;
mod message;
mod position;
mod request;
mod stream;
mod usage;

pub use budget::Budget;
pub use error::{Error, Result};
pub use event::{AgentEvent, AgentEventKind, Attribution, PauseReason, RunOutcomeKind, now_ms};
pub use failure::FailureCode;
pub use ids::{AgentId, ConversationId, RunId, ToolCallId};
pub use message::{ContentBlock, ImageSource, Message, Role};
pub use position::line_column;
pub use request::{CacheTtl, ModelRequest, OutputSchema, ReasoningConfig, ToolChoice, ToolSpec};
pub use stream::{StopReason, StreamEvent};
pub use usage::Usage;
