//! OpenAI-compatible routes: `/v1/models`, `/v1/chat/completions` and `/v1/responses`,
//! where the `model` is the name of an agent or team this server runs. The `openai` SDKs,
//! LangChain and the OpenAI-compatible chat UIs talk to a troupe agent as to a model.
//!
//! A request starts a run of that target (it is a run like any other: `x-troupe-run-id`
//! names it, the native API shows and signals it). The conversation's last user message
//! is the task, the earlier user and assistant messages its history, and system (or
//! developer) messages and the Responses `instructions` come before the task. The answer
//! is the run's final text, streamed as the agent writes it when `stream` is true.
//!
//! A run that waits for a person (a tool call to approve) ends the response with a note
//! naming the calls, `finish_reason: "stop"`, and a `troupe` field (`run_id`, `pending`):
//! the decision goes to `POST /v1/runs/{id}/signals`. A run that fails is an error in
//! OpenAI's shape (`{"error": {"message", "type", "code"}}`).

mod chat;
mod error;
mod input;
mod models;
mod progress;
mod responses;

use crate::state::AppState;
use axum::Router;
use axum::routing::{get, post};

/// The OpenAI-compatible routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models::list))
        .route("/v1/models/{id}", get(models::show))
        .route("/v1/chat/completions", post(chat::complete))
        .route("/v1/responses", post(responses::create))
}
