//! Test support for troupe.
//!
//! - [`MockLlmServer`]: a real HTTP server on `127.0.0.1` that speaks Anthropic Messages,
//!   OpenAI Chat Completions, OpenAI Responses and Gemini with SSE streaming, driven by
//!   scripted [`MockTurn`]s, with fault injection ([`Fault`]): error statuses with
//!   `retry-after`, mid-stream overload, truncation, invalid JSON, stalls.
//! - [`ScriptedModel`]: the same scripts replayed in-process, for unit tests.
//! - [`encode`]: the vendors' wire formats written from a script, for parser tests and
//!   benchmarks.
//! - For benchmarks: [`ChildMockServer`], the mock server in a child process so that its
//!   CPU and memory are not the benchmark's, and [`process`], this process's CPU time,
//!   RSS and peak RSS, and open-files limit from `/proc`.
//!
//! ```
//! use troupe_testkit::{MockTurn, encode::{Vendor, encode_bytes}};
//!
//! let turn = MockTurn::text("Hello, world").with_delta_chars(4);
//! let bytes = encode_bytes(Vendor::OpenAiChat, &turn);
//! assert!(bytes.ends_with(b"data: [DONE]\n\n"));
//! ```

mod child_server;
pub mod encode;
pub mod modules;
pub mod process;
mod script;
mod scripted;
mod server;
mod skip;
pub mod strategies;
pub mod terminal;
pub mod test_deps;

pub use child_server::{ChildMockServer, serve_if_child};
pub use script::{Fault, MockBlock, MockTurn, pieces};
pub use scripted::ScriptedModel;
pub use server::{MockLlmServer, RecordedRequest, Responder};
pub use skip::{skip, under_ci};
