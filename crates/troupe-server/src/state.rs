//! What every handler shares.

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::hub::RunHub;
use crate::launcher::Launcher;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The state behind every route: the runs, what can be run, the configuration, and the
/// token that tells streams the server is closing.
#[derive(Clone)]
pub struct AppState {
    /// The runs.
    pub hub: Arc<RunHub>,
    /// What can be run.
    pub launcher: Arc<dyn Launcher>,
    /// The configuration.
    pub config: Arc<ServerConfig>,
    /// Cancelled when the server begins to shut down: open streams end.
    pub closing: CancellationToken,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config", &self.config).finish_non_exhaustive()
    }
}

impl AppState {
    /// The body as `T`, with the error a client can act on when it is too large, not
    /// JSON, or not the expected shape.
    pub fn parse<T: DeserializeOwned>(&self, body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
        let bytes = body.map_err(|rejection| ApiError::unreadable_body(&rejection, self.config.body_limit))?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::from_json(&e))
    }
}
