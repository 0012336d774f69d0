//! Test support for troupe.
//!
//! - [`MockLlmServer`]: a real HTTP server on `127.0.0.1` that speaks Anthropic Messages,
//!   OpenAI Chat Completions, OpenAI Responses and Gemini with SSE streaming, driven by
//!   scripted [`MockTurn`]s, with fault injection ([`Fault`]): error statuses with
//!   `retry-after`, mid-stream overload, truncation, invalid JSON, stalls.
//! - [`ScriptedModel`]: the same scripts replayed in-process, for unit tests.
//! - [`encode`]: the vendors' wire formats written from a script, for parser tests and
//!   benchmarks.
//!
//! ```
//! use troupe_testkit::{MockTurn, encode::{Vendor, encode_bytes}};
//!
//! let turn = MockTurn::text("Hello, world").with_delta_chars(4);
//! let bytes = encode_bytes(Vendor::OpenAiChat, &turn);
//! assert!(bytes.ends_with(b"data: [DONE]\n\n"));
//! ```

pub mod encode;
mod script;
mod scripted;
mod server;
pub mod strategies;
pub mod test_deps;

pub use script::{Fault, MockBlock, MockTurn, pieces};
pub use scripted::ScriptedModel;
pub use server::{MockLlmServer, RecordedRequest, Responder};
