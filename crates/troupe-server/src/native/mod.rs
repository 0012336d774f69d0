//! The native API: runs started and followed over SSE, signals, agents, a recorded run's
//! evidence verified, and a WebSocket carrying the same in both directions.

mod costs;
mod evidence;
mod runs;
pub(crate) mod shared_look;
mod sse;
mod ws;

pub use costs::{CostTotal, Costs, DEFAULT_COST_DAYS, MAX_COST_DAYS};
pub use evidence::{EvidenceReport, MAX_VERIFIED_RUNS, RunEvidence, verify_tree};
pub(crate) use runs::start_as;
pub use runs::{
    IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, MAX_IDEMPOTENCY_KEY_LEN, OutputRequest, STORE_LOOK_EVERY, STORE_LOOKED_AT,
    SignalAccepted, StartRun, launch,
};
pub use sse::{event_type, resume_position};
pub use ws::{ClientMessage, ServerMessage, WsStart};

use crate::state::AppState;
use axum::Router;
use axum::routing::{get, post};

/// The native routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(runs::agents))
        .route("/v1/costs", get(costs::costs))
        .route("/v1/runs", post(runs::start).get(runs::list))
        .route("/v1/runs/changes", get(runs::changes))
        .route("/v1/runs/{id}", get(runs::show))
        .route("/v1/runs/{id}/events", get(runs::events))
        .route("/v1/runs/{id}/signals", post(runs::signal))
        .route("/v1/runs/{id}/evidence", get(evidence::evidence))
        .route("/v1/ws", get(ws::upgrade))
}
