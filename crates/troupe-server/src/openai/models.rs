//! `GET /v1/models`: the agents and teams, as models.

use super::error::OpenAiError;
use crate::launcher::Target;
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

fn model(target: &Target) -> serde_json::Value {
    serde_json::json!({"id": target.name, "object": "model", "created": 0, "owned_by": "troupe"})
}

pub(super) async fn list(State(state): State<AppState>) -> Json<serde_json::Value> {
    let data: Vec<serde_json::Value> = state.launcher.targets().iter().map(model).collect();
    Json(serde_json::json!({"object": "list", "data": data}))
}

pub(super) async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.launcher.targets().iter().find(|t| t.name == id) {
        Some(target) => Json(model(target)).into_response(),
        None => OpenAiError::unknown_model(&id).into_response(),
    }
}
