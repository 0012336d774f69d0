//! The A2A (Agent2Agent) protocol as troupe speaks it, without a server: the A2A 1.0 JSON
//! shapes ([`wire`]), the names both ends agree on ([`protocol`]), and [`RemoteAgent`], a
//! client that resolves a remote agent's card, runs tasks there (streamed or polled),
//! relays a remote task waiting for a decision through the team's
//! [`TeamControl`](troupe_team::TeamControl), and is a team
//! [`Member`](troupe_team::Member). `troupe-server` serves the same shapes; team files
//! (`troupe-workers`) name remote members with `remote = "https://…"`.
//!
//! ```
//! use troupe_a2a::wire::{AgentCard, TaskState};
//!
//! let card: AgentCard = serde_json::from_value(serde_json::json!({
//!     "name": "reviewer",
//!     "description": "Reviews changes",
//!     "version": "1.0.0",
//!     "supportedInterfaces": [
//!         {"url": "https://agents.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
//!     ],
//!     "capabilities": {"streaming": true},
//!     "defaultInputModes": ["text/plain"],
//!     "defaultOutputModes": ["text/plain"],
//!     "skills": []
//! }))?;
//! assert_eq!(card.jsonrpc_url(), Some("https://agents.example/a2a"));
//! assert!(TaskState::InputRequired.is_interrupted());
//! # Ok::<(), serde_json::Error>(())
//! ```

mod address;
mod client;
pub mod protocol;
mod token;
pub mod wire;

pub use address::{AgentUrlError, agent_url};
pub use client::{A2aClientError, RemoteAgent, RemoteOutcome};
pub use protocol::{
    AGENT_KEY, ANSWER_ARTIFACT, CARD_PATH, MESSAGE_SENT_AGAIN_EXTENSION, OUTPUT_KEY, TOOL_INPUTS_EXTENSION, codes,
};
pub use token::Token;
