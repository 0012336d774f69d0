//! troupe: build teams of LLM agents that are isolated, safe, durable and observable.
//!
//! This is the facade crate: depend on it and `use troupe::prelude::*`. It re-exports the
//! focused crates underneath:
//!
//! - [`core`] (`troupe-core`): the vocabulary — messages, content blocks, tool specs, model
//!   requests, stream events and the neutral agent events.
//! - [`model`] (`troupe-model`): LLM providers behind one [`LlmProvider`](model::LlmProvider)
//!   trait, streaming over SSE, with retry, fallback and a priced model registry.
//! - [`tools`] (`troupe-tools`): the `Tool` trait, the catalog, typed tools with generated
//!   schemas, and the built-in workspace tools confined to their workspace.
//! - [`runtime`] (`troupe-runtime`): agents as declarations ([`AgentSpec`](runtime::AgentSpec)),
//!   the [`Engine`](runtime::Engine) and its builder, and the runner that owns every agent's
//!   loop: live events, approvals, signals, budgets, cancellation, metrics and cost;
//!   [`Middleware`](runtime::Middleware)s around every model and tool call (rate limits,
//!   logging, redaction), [`Plugin`](runtime::Plugin)s that bring tools and middlewares,
//!   and spans on the OpenTelemetry GenAI conventions.
//! - [`store`] (`troupe-store`): durable runs — state checkpoints, signals, the hash-chained
//!   evidence log, the run queue with leases, and schedules — on SQLite (feature `sqlite`,
//!   the default) or PostgreSQL (feature `postgres`).
//! - [`replay`] (`troupe-replay`): a recorded run replayed through the current code and
//!   configuration with its model responses and tool results substituted, reporting the
//!   first point where it now decides differently.
//!
//! - `team` (`troupe-team`, feature `team`): many agents — pipeline, parallel and orchestrated groups,
//!   delegation as a tool, the context firewall, a message bus, a work queue, shared
//!   memory, consensus and a supervisor with budgets.
//!
//! - `telemetry` (`troupe-telemetry`, feature `telemetry`): run metrics fed by the event stream, rendered as
//!   Prometheus text or JSON, and `tracing` spans on the OpenTelemetry GenAI conventions,
//!   exported over OTLP with feature `otlp`.
//!
//! - `a2a` (`troupe-a2a`, feature `a2a`): the A2A protocol's shapes and its client: a
//!   remote A2A agent as a team member.
//!
//! - `server` (`troupe-server`, feature `server`): agents and teams served over HTTP, SSE,
//!   WebSocket, AG-UI and A2A (the A2A client re-exported as `server::a2a`).
//!
//! - `workers` (`troupe-workers`, feature `workers`): agents and teams defined as files
//!   (`agents/*.toml`, `team.toml`), built and run from code
//!   ([`workers::team_run`]), and worker processes.
//!
//! - `mcp` (`troupe-mcp`, feature `mcp`): MCP servers' tools as an agent's tools (stdio
//!   and streamable HTTP), and agents served as MCP tools.
//!
//! The features `team`, `a2a`, `server`, `telemetry`, `workers` and `mcp` are on by default;
//! without them the facade is the runtime, the store, the models and the tools alone.
//!
//! Errors from every layer convert into one [`Error`], so applications handle a single
//! [`Result`] type while keeping the typed variants underneath.
//!
//! ```
//! use troupe::prelude::*;
//!
//! # async fn demo() -> troupe::Result<()> {
//! let request = ModelRequest::new("demo").message(Message::user("hello"));
//! let response = troupe::model::DemoProvider::new().complete(&request, CancellationToken::new()).await?;
//! assert!(!response.message.text().is_empty());
//! # Ok(())
//! # }
//! # tokio::runtime::Runtime::new().expect("runtime").block_on(demo()).expect("demo runs");
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod error;
pub mod prelude;

pub use error::{Error, Result};
#[cfg(feature = "a2a")]
pub use troupe_a2a as a2a;
pub use troupe_core as core;
pub use troupe_durable as durable;
/// Turns an async function into a tool an agent can call.
///
/// The function stays as it is (callable from your own code and tests). Beside it comes
/// a unit struct named after it in `PascalCase` (`fn lookup_word` → `LookupWord`) that
/// implements `troupe::tools::Tool`, so `.tool(LookupWord)` gives it to an agent:
///
/// - the tool's **name** is the function's (or `name = "geo.capital"`);
/// - its **description** is the function's doc comment, which the model reads;
/// - its **input schema** has one property per parameter, each described by the
///   parameter's doc comment; a parameter of type `ToolContext` is not an argument but
///   the call's context (its workspace, its cancellation);
/// - its **effect** is declared, never guessed: `read_only`, `write_state`, `external`
///   (a side effect outside the run) or `destructive`. Approval, retries on resume and
///   concurrency follow from it.
///
/// The function returns `Result<T, E>` with `T` a `ToolOutput`, `String` or `&str` and
/// `E` a `ToolError`, `String` or `&str` (an error goes back to the model as the call's
/// failure), or a `ToolOutput`/`String` alone.
///
/// ```
/// use troupe::prelude::*;
///
/// /// Tells the capital of a country.
/// #[tool(read_only)]
/// async fn capital(
///     /// The country's English name.
///     country: String,
/// ) -> Result<String, String> {
///     match country.as_str() {
///         "France" => Ok("Paris".into()),
///         other => Err(format!("I do not know the capital of {other}")),
///     }
/// }
///
/// let schema = &Capital.declaration().input_schema;
/// assert_eq!(Capital.declaration().name, "capital");
/// assert_eq!(Capital.declaration().description, "Tells the capital of a country.");
/// assert_eq!(schema["properties"]["country"]["description"], "The country's English name.");
/// assert_eq!(schema["required"], serde_json::json!(["country"]));
/// ```
///
/// A tool without its effect does not compile:
///
/// ```compile_fail
/// use troupe::prelude::*;
///
/// /// Deletes everything.
/// #[tool]
/// async fn wipe() -> Result<String, String> { Ok("gone".into()) }
/// ```
pub use troupe_macros::tool;
#[cfg(feature = "mcp")]
pub use troupe_mcp as mcp;
pub use troupe_model as model;
pub use troupe_replay as replay;

/// Recorded runs as tests: a [`Cassette`](testing::Cassette) (written by `troupe runs export
/// RUN --cassette FILE`, or by [`Cassette::new`](testing::Cassette::new) from a recording)
/// replays in `cargo test` with no store, no network and no key, and reports the first
/// point where the agent as declared now decides differently.
pub mod testing {
    pub use troupe_replay::{CASSETTE_VERSION, Cassette, CassetteError, Divergence, DivergenceKind, ReplayReport};
}
pub use troupe_runtime as runtime;
#[cfg(feature = "server")]
pub use troupe_server as server;
pub use troupe_store as store;
#[cfg(feature = "team")]
pub use troupe_team as team;
#[cfg(feature = "telemetry")]
pub use troupe_telemetry as telemetry;
pub use troupe_tools as tools;
#[cfg(feature = "workers")]
pub use troupe_workers as workers;

/// The README's Rust examples, compiled and run as doc tests so the front door stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The SDK guide's Rust examples (`docs/SDK.md`), compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/SDK.md")]
pub struct SdkGuideDoctests;

/// The serving guide's Rust examples (`docs/SERVING.md`), compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/SERVING.md")]
pub struct ServingDoctests;
