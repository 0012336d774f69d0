//! `GET /v1/runs/{id}/evidence`: a recorded run's evidence log verified — its hash chain
//! intact and reaching the head its record holds — and so each run under it (a team's
//! members, their delegations), as `troupe runs verify` does.

use crate::error::ApiError;
use crate::ids::checked_id;
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use troupe_store::{RunFilter, Store, StoreError, verify_log};

/// How many runs of a tree one answer verifies at most.
pub const MAX_VERIFIED_RUNS: usize = 1000;

/// What `GET /v1/runs/{id}/evidence` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceReport {
    /// The run asked about.
    pub run_id: String,
    /// Whether every run's log verifies.
    pub verified: bool,
    /// The run, then each run under it, breadth first.
    pub runs: Vec<RunEvidence>,
}

/// One run's evidence, verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvidence {
    /// The run.
    pub run_id: String,
    /// Its agent or team.
    pub agent: String,
    /// The run that started it, for a run under another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// How many entries its log holds.
    pub entries: usize,
    /// Where the log is broken (changed or cut after it was written), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

pub(super) async fn evidence(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let id = match checked_id("run", &id) {
        Ok(id) => id,
        Err(error) => return error.into_response(),
    };
    let Some(stored) = &state.stored else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "not_recorded",
            "this server records no runs: there is no evidence",
        )
        .into_response();
    };
    match verify_tree(stored.store().as_ref(), id).await {
        Ok(Some(report)) => Json(report).into_response(),
        Ok(None) => ApiError::unknown_run(id).into_response(),
        Err(error) => {
            tracing::warn!(%error, "the store did not answer an evidence check");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the run store cannot answer now")
                .into_response()
        }
    }
}

/// The evidence of `run_id` and every run under it; `None` when the store has no such run.
pub async fn verify_tree(store: &dyn Store, run_id: &str) -> Result<Option<EvidenceReport>, StoreError> {
    let Some(root) = store.load_run(run_id).await? else { return Ok(None) };
    let mut runs = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(record) = queue.pop_front() {
        let entries = store.evidence(&record.id, 0).await?;
        let problem = verify_log(&entries, &record.evidence_head, &record.id).err().map(|broken| broken.to_string());
        if runs.len() + queue.len() < MAX_VERIFIED_RUNS {
            let filter = RunFilter { parent_run_id: Some(record.id.clone()), ..RunFilter::default() };
            for child in store.list_runs(&filter).await? {
                if let Some(child) = store.load_run(&child.id).await? {
                    queue.push_back(child);
                }
            }
        }
        runs.push(RunEvidence {
            run_id: record.id,
            agent: record.agent,
            parent_run_id: record.parent_run_id,
            entries: entries.len(),
            problem,
        });
    }
    let verified = runs.iter().all(|run| run.problem.is_none());
    Ok(Some(EvidenceReport { run_id: run_id.to_owned(), verified, runs }))
}
