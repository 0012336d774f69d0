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
//!
//! - `team` (`troupe-team`, feature `team`): many agents — pipeline, parallel and orchestrated groups,
//!   delegation as a tool, the context firewall, a message bus, a work queue, shared
//!   memory, consensus and a supervisor with budgets.
//!
//! - `telemetry` (`troupe-telemetry`, feature `telemetry`): run metrics fed by the event stream, rendered as
//!   Prometheus text or JSON, and `tracing` spans on the OpenTelemetry GenAI conventions,
//!   exported over OTLP with feature `otlp`.
//!
//! - `server` (`troupe-server`, feature `server`): agents and teams served over HTTP, SSE,
//!   WebSocket, AG-UI and A2A, and the A2A client for remote agents.
//!
//! - `workers` (`troupe-workers`, feature `workers`): agents and teams defined as files
//!   (`agents/*.toml`, `team.toml`), built and run from code
//!   ([`workers::team_run`]), and worker processes.
//!
//! - `mcp` (`troupe-mcp`, feature `mcp`): MCP servers' tools as an agent's tools (stdio
//!   and streamable HTTP), and agents served as MCP tools.
//!
//! The features `team`, `server`, `telemetry`, `workers` and `mcp` are on by default;
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
pub use troupe_core as core;
#[cfg(feature = "mcp")]
pub use troupe_mcp as mcp;
pub use troupe_model as model;
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
