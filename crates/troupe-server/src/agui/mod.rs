//! AG-UI: `POST /agui/{agent}` takes a `RunAgentInput` and answers with AG-UI events.

use crate::state::AppState;
use axum::Router;

/// The AG-UI routes.
pub fn routes() -> Router<AppState> {
    Router::new()
}
