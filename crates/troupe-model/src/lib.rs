//! LLM providers for troupe.
//!
//! One trait, [`LlmProvider`], over every vendor: Anthropic Messages, OpenAI Chat
//! Completions and Responses, Google Gemini, and any OpenAI-compatible server. Each
//! provider is a pure request transformer plus an incremental stream parser (a state
//! machine over bytes) plus error mapping, wired to HTTP by [`HttpProvider`]. Around them:
//! the [`StreamAccumulator`] that folds a stream into the final message, retry with
//! backoff, fallback chains, and a model registry with context windows and prices.
//!
//! Parsing needs no network: an [`EventParser`] turns bytes into [`StreamEvent`]s.
//!
//! ```
//! use troupe_model::{EventParser, StreamAccumulator, anthropic::AnthropicParser};
//!
//! let bytes = concat!(
//!     "event: message_start\n",
//!     "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
//!     "event: content_block_start\n",
//!     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
//!     "event: content_block_delta\n",
//!     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
//!     "event: content_block_stop\n",
//!     "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
//!     "event: message_delta\n",
//!     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
//!     "event: message_stop\n",
//!     "data: {\"type\":\"message_stop\"}\n\n",
//! );
//! let events = EventParser::new("anthropic", AnthropicParser::new("anthropic")).parse_all(bytes.as_bytes())?;
//! let mut accumulator = StreamAccumulator::new();
//! for event in &events {
//!     accumulator.push(event)?;
//! }
//! let response = accumulator.finish()?;
//! assert_eq!(response.message.text(), "Hello");
//! assert_eq!(response.usage.output_tokens, 2);
//! # Ok::<(), troupe_model::Error>(())
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod accumulator;
pub mod answer_tool;
mod api_key;
mod config;
mod demo;
mod error;
mod fallback;
mod http;
mod output_dialect;
mod prompt_cache;
mod provider;
mod provider_cache;
mod providers;
mod registry;
mod retry;
pub mod sse;
mod tool_names;
mod wire;

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;

pub use accumulator::{ModelResponse, StreamAccumulator};
pub use api_key::ApiKey;
pub use config::{ModelConfig, ModelOverride, ModelSection, ProviderSection, RetrySection};
pub use demo::{DEMO_FILE, DemoBlock, DemoProvider, DemoReply, demo_reply};
pub use error::{Error, Result, RetryHint};
pub use fallback::{FallbackProvider, FallbackRoute};
pub use http::{HttpConfig, HttpProvider, Timeouts, retry_hint};
pub use provider::{EventStream, LlmProvider};
pub use providers::{Env, ProcessEnv, ProviderConfig, ProviderKind, Providers, ResolvedModel};
pub use registry::{ModelInfo, ModelRegistry, Pricing, split_id};
pub use retry::{RetryPolicy, RetryingProvider, watching_retries};
pub use tool_names::{ToolNameCodec, wire_name};
pub use wire::{EncodedRequest, EventParser, StreamParser, WireFormat, WireRequest};

pub use troupe_core::{StopReason, StreamEvent, Usage};
