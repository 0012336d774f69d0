//! What every handler shares.

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::hub::{HubRun, RunHub};
use crate::launcher::Launcher;
use crate::stored::StoredRuns;
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
    /// The store's runs, for the lookups the hub cannot answer (none without a store).
    pub stored: Option<StoredRuns>,
    /// The A2A tasks' push-notification webhooks.
    pub push: Arc<crate::a2a::PushRegistry>,
    /// Held while a run starts under an id its request names (an A2A message's, an
    /// idempotency key's): a request sent twice at once finds the run the first started,
    /// not a second one.
    pub(crate) starts: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config", &self.config).finish_non_exhaustive()
    }
}

impl AppState {
    /// The run `id`: held by this server, or else read from the store.
    pub async fn find_run(&self, id: &str) -> Result<Option<Arc<HubRun>>, ApiError> {
        if let Some(run) = self.hub.get(id) {
            return Ok(Some(run));
        }
        match &self.stored {
            Some(stored) => stored.find(id).await,
            None => Ok(None),
        }
    }

    /// Every run to list, newest first: those this server holds, then the store's others
    /// (`limit` of them at most).
    pub async fn all_runs(&self, limit: u32) -> Result<Vec<Arc<HubRun>>, ApiError> {
        let mut runs: Vec<Arc<HubRun>> =
            self.hub.list().iter().filter_map(|view| self.hub.get(view.run_id.as_str())).collect();
        if let Some(stored) = &self.stored {
            for run in stored.list(limit).await? {
                if self.hub.get(run.run_id().as_str()).is_none() {
                    runs.push(run);
                }
            }
        }
        runs.sort_by(|a, b| {
            let (a, b) = (a.view(), b.view());
            b.started_ms.cmp(&a.started_ms).then_with(|| b.run_id.as_str().cmp(a.run_id.as_str()))
        });
        Ok(runs)
    }

    /// A page of runs to list, newest first: at `offset` 0 those this server holds, then
    /// the store's; each page takes `limit` of the store's runs from `offset` on (see
    /// [`StoredRuns::page`]); with the offset of the next page, when there are more.
    pub async fn runs_page(
        &self,
        offset: u32,
        limit: u32,
        filter: &ListFilter,
    ) -> Result<(Vec<Arc<HubRun>>, Option<u32>), ApiError> {
        let mut runs: Vec<Arc<HubRun>> = match offset {
            0 => self
                .hub
                .list()
                .iter()
                .filter(|view| filter.admits(view))
                .filter_map(|view| self.hub.get(view.run_id.as_str()))
                .collect(),
            _ => Vec::new(),
        };
        let mut next = None;
        if let Some(stored) = &self.stored {
            let (page, more) = stored.page(offset, limit, filter).await?;
            next = more;
            for run in page {
                if self.hub.get(run.run_id().as_str()).is_none() {
                    runs.push(run);
                }
            }
        }
        runs.sort_by(|a, b| {
            let (a, b) = (a.view(), b.view());
            b.started_ms.cmp(&a.started_ms).then_with(|| b.run_id.as_str().cmp(a.run_id.as_str()))
        });
        Ok((runs, next))
    }

    /// The body as `T`, with the error a client can act on when it is too large, not
    /// JSON, or not the expected shape.
    pub fn parse<T: DeserializeOwned>(&self, body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
        let bytes = body.map_err(|rejection| ApiError::unreadable_body(&rejection, self.config.body_limit))?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::from_json(&e))
    }
}

/// What `GET /v1/runs` lists: every run, or those of a status, an agent or team, an id
/// prefix (each given narrows it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only runs in this status.
    pub status: Option<troupe_store::RunStatus>,
    /// Only runs of this agent or team.
    pub agent: Option<String>,
    /// Only runs whose id begins with this.
    pub id_prefix: Option<String>,
    /// Only runs this text finds: part of the agent's or team's name or of the model,
    /// letters in either case, or the start of the id ([`troupe_store::RunFilter::search`]).
    pub search: Option<String>,
}

impl ListFilter {
    /// Whether a run this server holds, as `view` shows it, is listed.
    pub fn admits(&self, view: &crate::hub::RunView) -> bool {
        use crate::hub::RunPhase;
        let status_ok = self.status.is_none_or(|wanted| {
            let now = match (&view.phase, &view.end) {
                (RunPhase::Running, _) => "running".to_owned(),
                (RunPhase::Waiting, _) => "paused".to_owned(),
                (RunPhase::Ended, Some(end)) => serde_json::to_value(end.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                (RunPhase::Ended, None) => String::new(),
            };
            now == wanted.as_str()
        });
        status_ok
            && self.agent.as_deref().is_none_or(|agent| view.target == agent)
            && self.id_prefix.as_deref().is_none_or(|prefix| view.run_id.as_str().starts_with(prefix))
            && self.search.as_deref().is_none_or(|text| finds(view, text))
    }

    /// The store's filter for the same runs.
    pub fn store_filter(&self) -> troupe_store::RunFilter {
        troupe_store::RunFilter {
            status: self.status,
            agent: self.agent.clone(),
            id_prefix: self.id_prefix.clone(),
            search: self.search.clone(),
            ..troupe_store::RunFilter::default()
        }
    }
}

/// Whether a search for `text` finds the run `view` shows, as the store's search does: part
/// of its agent's or team's name or of its model, letters in either case, or its id's start.
fn finds(view: &crate::hub::RunView, text: &str) -> bool {
    let lowered = text.to_lowercase();
    let holds = |field: &str| field.to_lowercase().contains(&lowered);
    view.run_id.as_str().starts_with(text) || holds(&view.target) || view.model.as_deref().is_some_and(holds)
}
