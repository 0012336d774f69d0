//! A2A (Agent2Agent): the server's agents and teams offered to other agents, and remote
//! A2A agents as team members.
//!
//! **Serving.** `GET /.well-known/agent-card.json` is the [agent card](card::agent_card)
//! (public, as the protocol wants it): one skill per agent or team, the JSON-RPC endpoint
//! `POST /a2a`, the HTTP+JSON binding under [`REST_PATH`], streaming, push notifications,
//! and the bearer scheme when tokens are configured. The JSON-RPC endpoint speaks A2A 1.0
//! (`SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`,
//! `SubscribeToTask`, `Create`/`Get`/`List`/`DeleteTaskPushNotificationConfig`) and 0.3
//! (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`,
//! `tasks/pushNotificationConfig/…`): the method name picks the version's shapes; an
//! `A2A-Version` header, when sent, must name the same version. The [`rest`] binding
//! offers the same 1.0 methods as resources; both run the same method implementations.
//!
//! - A **task** is a run in the server's hub: the task id is the run id, the context id is
//!   the run's conversation id (the message's `contextId`, or a new `ctx-…` one), so with a
//!   store the tasks of one context share their history.
//! - A new task runs the agent named by metadata `agent` (the skill id; on the message or
//!   the request), by default the first the card lists. Its id is made from that skill and
//!   the message's `messageId`: the same message sent again is answered with the task it
//!   started, held here or ended in the store, not a second one; with a store the card
//!   says so ([`MESSAGE_SENT_AGAIN_EXTENSION`](troupe_a2a::MESSAGE_SENT_AGAIN_EXTENSION)).
//! - Its status is a [projection] of the run's events: `WORKING`, then
//!   `COMPLETED` with the answer as the artifact `answer` (or `CANCELED`, `FAILED`). A call
//!   that needs approval makes it `INPUT_REQUIRED`, with a status message naming the tool,
//!   arguments and call id (text, and a data part `{"pending": […]}`).
//! - A follow-up message with the task's id **decides**: a data part `{"approval":
//!   "approve" | "reject", "callId"?: …, "reason"?: …}` or the text `approve` / `reject`
//!   (see [`reply`]); the run goes on and the answer comes as for the first message. Other
//!   text for a running task reaches it as a user message.
//! - A blocking send answers when the task ends or needs input; a streaming one sends the
//!   task, then its status and artifact updates, and ends at the same points.
//! - A client may set webhooks for a task; its updates are POSTed to them as it works,
//!   needs input and ends (see [`push`]; kept in memory).
//! - Errors are JSON-RPC errors with the A2A codes: -32700, -32600, -32601, -32602,
//!   -32001 (no such task), -32002 (not cancelable), -32004 (not in this state), -32009
//!   (version); over HTTP+JSON, the same reasons with A2A's HTTP statuses.
//! - The extended card (`GetExtendedAgentCard`) adds each skill's tools' arguments'
//!   schemas to the public card
//!   ([`TOOL_INPUTS_EXTENSION`](troupe_a2a::TOOL_INPUTS_EXTENSION)).
//!
//! **Calling out.** [`RemoteAgent`] (from `troupe-a2a`, re-exported here with the
//! [`wire`] shapes) resolves another server's card and runs tasks there; it is a
//! [`Member`](troupe_team::Member), so a team can have remote members.
//!
//! ```
//! use std::sync::Arc;
//! use troupe_runtime::Engine;
//! use troupe_server::a2a::RemoteAgent;
//! use troupe_server::{AgentLauncher, Server, ServerConfig};
//! use troupe_team::{Member, MemberTask};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A server offering one agent over A2A…
//! let engine = Engine::builder().build();
//! let greeter = engine.agent("greeter").model("demo").build()?;
//! let server = Server::new(ServerConfig::default(), Arc::new(AgentLauncher::new().agent(greeter, "Says hello")));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let url = format!("http://{}", listener.local_addr()?);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let serving = tokio::spawn(server.serve(listener, shutdown.clone()));
//!
//! // …and that agent as a team member, found by its card.
//! let remote = RemoteAgent::resolve(&url).await?;
//! assert_eq!(remote.name(), "greeter");
//! let task = MemberTask::new("t1", "user", "hello");
//! let result = remote.run(task, None, tokio_util::sync::CancellationToken::new()).await;
//! assert!(result.success, "{result:?}");
//! assert!(!result.content.is_empty());
//!
//! shutdown.cancel();
//! serving.await??;
//! # Ok(())
//! # }
//! ```

mod card;
mod follow;
mod jsonrpc;
pub mod legacy;
mod methods;
pub mod projection;
pub mod push;
pub mod reply;
pub mod rest;
pub mod rpc;
/// The A2A 1.0 JSON shapes, shared with the client ([`troupe_a2a::wire`]).
pub use troupe_a2a::wire;

pub use card::{BEARER_SCHEME, RPC_PATH, agent_card, base_url};
pub use methods::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
pub use projection::{ANSWER_ARTIFACT, TaskProjection, Update};
pub use push::PushRegistry;
pub use rest::REST_PATH;
pub use troupe_a2a::{A2aClientError, CARD_PATH, RemoteAgent, RemoteOutcome};

use crate::state::AppState;
use axum::Router;
use axum::routing::{get, post};

/// The A2A routes: the card, the JSON-RPC endpoint and the HTTP+JSON binding.
pub fn routes() -> Router<AppState> {
    Router::new().route(CARD_PATH, get(card::serve)).route(RPC_PATH, post(jsonrpc::endpoint)).merge(rest::routes())
}
