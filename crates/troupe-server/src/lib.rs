//! HTTP serving for troupe: every run's one neutral event stream, projected onto the
//! protocols clients speak.
//!
//! - **Native API**: `POST /v1/runs` starts a run of an agent or team and streams its
//!   [`AgentEvent`](troupe_core::AgentEvent)s as Server-Sent Events; `GET /v1/runs/{id}/events`
//!   replays from a position (`Last-Event-ID`) and follows live, so a dropped client
//!   loses nothing; `POST /v1/runs/{id}/signals` takes approvals, messages, steering and
//!   cancellation; `/v1/ws` carries the same over a WebSocket.
//! - **AG-UI**: `POST /agui/{agent}` for chat frontends.
//! - **A2A**: the agent card at `/.well-known/agent-card.json` and JSON-RPC at `POST /a2a`
//!   (A2A 1.0 and 0.3), so other agents can hand tasks to these; and
//!   [`RemoteAgent`](a2a::RemoteAgent), a remote A2A agent as a team member.
//! - **Console**: a web console at `/` (runs, live timelines, approvals, starting a
//!   run), embedded in the binary; its data comes from the native API like any client's.
//! - Bearer-token auth (constant-time; with no token only loopback is served, to loopback
//!   names and origins: [`loopback`]), body
//!   limits, CORS, JSON errors, `/healthz` and `/openapi.json`.
//!
//! What runs is up to a [`Launcher`]; [`AgentLauncher`] serves local agents:
//!
//! ```
//! use std::sync::Arc;
//! use troupe_runtime::Engine;
//! use troupe_server::{AgentLauncher, Server, ServerConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::builder().build();
//! let greeter = engine.agent("greeter").model("demo").build()?;
//! let launcher = AgentLauncher::new().agent(greeter, "Says hello");
//! let server = Server::new(ServerConfig::default(), Arc::new(launcher));
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let serving = tokio::spawn(server.serve(listener, shutdown.clone()));
//!
//! // A plain HTTP/1.1 request: the run's events come back as SSE.
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let mut socket = tokio::net::TcpStream::connect(addr).await?;
//! let body = r#"{"agent": "greeter", "instruction": "hello"}"#;
//! let request = format!(
//!     "POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
//!     body.len()
//! );
//! socket.write_all(request.as_bytes()).await?;
//! let mut response = String::new();
//! socket.read_to_string(&mut response).await?;
//! assert!(response.contains("event: run_started"));
//! assert!(response.contains("event: run_finished"));
//!
//! shutdown.cancel();
//! serving.await??;
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod a2a;
pub mod agui;
mod auth;
mod config;
mod connections;
pub mod console;
mod error;
mod hub;
mod ids;
mod launcher;
pub mod loopback;
mod media;
pub mod native;
mod openai;
pub mod openapi;
mod server;
mod state;
mod stored;

pub use auth::{Auth, PUBLIC_PATHS};
pub use config::{
    DEFAULT_ADDR, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    ServerConfig, TOKEN_ENV, Token,
};
pub use connections::serve_router;
pub use error::{ApiError, ServerError};
pub use hub::{Asked, DEFAULT_RETAINED_RUNS, HubRun, RunHub, RunPhase, RunView};
pub use ids::{MAX_ID_LEN, checked_id};
pub use launcher::{AgentLauncher, LaunchError, LaunchedRun, Launcher, RunEnd, RunSignals, Target, TargetKind};
pub use server::{LISTEN_BACKLOG, Server, bind};
pub use state::AppState;
pub use stored::StoredRuns;
