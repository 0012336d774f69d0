//! Runs this server does not hold, read from the store: a run another process started,
//! or one that ended before this server started. The store is the truth about every run,
//! so a lookup that misses the hub looks there, and a signal to such a run is stored for
//! whichever process holds it (a paused run goes back to the queue, for a server to adopt).

use crate::error::ApiError;
use crate::hub::HubRun;
use crate::launcher::{RunEnd, RunSignals};
use std::sync::Arc;
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, ConversationId, RunId, Usage};
use troupe_runtime::durable::state_from_value;
use troupe_runtime::{RunOutcome, RunState};
use troupe_store::{RunFilter, RunRecord, RunStatus, Store, StoreError};

/// The store's runs, as the server shows them.
#[derive(Clone)]
pub struct StoredRuns {
    store: Arc<dyn Store>,
    /// The last look at its newest runs, shared by the server's announcement streams.
    newest: Arc<crate::native::shared_look::SharedLook>,
}

impl std::fmt::Debug for StoredRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredRuns").field("store", &self.store.info()).finish()
    }
}

impl StoredRuns {
    /// The runs of `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        StoredRuns { store, newest: Arc::default() }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The last look at the store's newest runs, shared by every stream that follows them.
    pub(crate) fn newest(&self) -> &crate::native::shared_look::SharedLook {
        &self.newest
    }

    /// The stored run `run_id`, as a run no hub holds; `None` when the store has none.
    pub async fn find(&self, run_id: &str) -> Result<Option<Arc<HubRun>>, ApiError> {
        let record = self.store.load_run(run_id).await.map_err(unavailable)?;
        Ok(record.map(|record| {
            let asked = asked_of(&record);
            let run = self.detached(record);
            run.set_asked(asked);
            run
        }))
    }

    /// The newest top-level runs of the store (`limit` at most), as runs no hub holds.
    pub async fn list(&self, limit: u32) -> Result<Vec<Arc<HubRun>>, ApiError> {
        let filter = RunFilter { limit, ..RunFilter::default() };
        let records = self.store.list_run_records(&filter).await.map_err(unavailable)?;
        Ok(records.into_iter().filter(|r| r.parent_run_id.is_none()).map(|r| self.detached(r)).collect())
    }

    /// A page of the store's newest top-level runs: of the store's runs newest first
    /// (members included), the `limit` from `offset` on, the top-level ones of them; and
    /// the offset of the next page, when there are more. One read of the store: the
    /// records, without their conversations, which a list does not show.
    pub async fn page(
        &self,
        offset: u32,
        limit: u32,
        filter: &crate::state::ListFilter,
    ) -> Result<(Vec<Arc<HubRun>>, Option<u32>), ApiError> {
        let filter = RunFilter { limit: limit.saturating_add(1), offset, ..filter.store_filter() };
        let mut records = self.store.list_run_records(&filter).await.map_err(unavailable)?;
        let more = records.len() > limit as usize;
        records.truncate(limit as usize);
        let runs = records.into_iter().filter(|r| r.parent_run_id.is_none()).map(|r| self.detached(r)).collect();
        Ok((runs, more.then(|| offset.saturating_add(limit))))
    }

    fn detached(&self, record: RunRecord) -> Arc<HubRun> {
        let run_id = RunId::new(record.id.clone());
        let started_ms = u64::try_from(record.created_at).unwrap_or(0);
        let state = state_from_value(&record.id, record.state.clone()).ok();
        let (events, end) = known_of(&record, state.as_ref(), started_ms);
        let signals = (!record.status.is_terminal())
            .then(|| RunSignals::Store { store: Arc::clone(&self.store), run_id: record.id.clone() });
        let ended_ms = u64::try_from(record.updated_at).unwrap_or(started_ms);
        let run = HubRun::detached(run_id, &record.agent, started_ms, events, end.map(|end| (end, ended_ms)), signals);
        if let Some(spec) = state.as_ref().and_then(RunState::output_spec) {
            run.set_output_schema(spec.schema.schema.clone());
        }
        run
    }
}

/// What a run was asked, as its record keeps its input.
fn asked_of(record: &RunRecord) -> crate::hub::Asked {
    let text = |key: &str| record.input.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    crate::hub::Asked {
        instruction: text("instruction").unwrap_or_default(),
        conversation_id: record.conversation_id.clone(),
        model: text("model"),
    }
}

/// What the record tells of a run, as the events a client would have seen (its start, the
/// decisions it waits for) and its end.
fn known_of(record: &RunRecord, state: Option<&RunState>, started_ms: u64) -> (Vec<AgentEvent>, Option<RunEnd>) {
    let conversation = record.conversation_id.clone().map(ConversationId::new);
    let event = |seq: u64, kind: AgentEventKind| {
        let mut attribution = Attribution::now(AgentId::new(record.agent.clone()), RunId::new(record.id.clone()), seq);
        attribution.conversation_id.clone_from(&conversation);
        attribution.parent_run_id = record.parent_run_id.clone().map(RunId::new);
        attribution.timestamp_ms = started_ms;
        AgentEvent::new(attribution, kind)
    };
    let instruction = record.input.get("instruction").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let model = state.map(|s| s.model().to_owned()).unwrap_or_default();
    let mut events = vec![event(0, AgentEventKind::RunStarted { instruction, model })];
    if record.status == RunStatus::Paused || record.status == RunStatus::Running {
        for (seq, request) in (1..).zip(state.map(RunState::awaiting_approval).unwrap_or_default()) {
            let uncertain =
                state.is_some_and(|s| s.pending_calls().iter().any(|c| c.call_id == request.call_id && c.uncertain));
            events.push(event(seq, AgentEventKind::RunPaused { reason: request.into_pause_reason(uncertain) }));
        }
    }
    let end = record.status.is_terminal().then(|| ended(record.status, state));
    (events, end)
}

/// How a stored run that ended, ended: by its state's outcome, else by its status.
fn ended(status: RunStatus, state: Option<&RunState>) -> RunEnd {
    let (usage, cost_usd) = state.map(|s| (s.usage(), s.cost_usd())).unwrap_or((Usage::default(), 0.0));
    match state.and_then(RunState::outcome) {
        Some(outcome) => RunEnd {
            outcome: outcome.kind(),
            output: outcome.text().filter(|t| !t.is_empty()).map(str::to_owned),
            error: match outcome {
                RunOutcome::Failed { error, .. } => Some(error.clone()),
                _ => None,
            },
            usage,
            cost_usd,
        },
        None => RunEnd {
            outcome: match status {
                RunStatus::Completed => troupe_core::RunOutcomeKind::Completed,
                RunStatus::Cancelled => troupe_core::RunOutcomeKind::Cancelled,
                _ => troupe_core::RunOutcomeKind::Failed,
            },
            output: None,
            error: None,
            usage,
            cost_usd,
        },
    }
}

/// A store that cannot answer, as the error a client sees (503: try again).
pub(crate) fn unavailable(error: StoreError) -> ApiError {
    tracing::warn!(%error, "the store did not answer a lookup");
    ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "the run store cannot answer now")
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::OutputSchema;
    use troupe_runtime::OutputSpec;

    /// A stored run given a typed answer's schema shows it, found alone or listed.
    #[tokio::test]
    async fn a_stored_runs_view_says_what_its_answers_schema_is() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = troupe_store::open(&format!("sqlite://{}", dir.path().join("runs.db").display()))
            .await
            .expect("the store opens");
        let schema =
            serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        let spec = OutputSpec::new(OutputSchema::new("Verdict", schema.clone())).expect("an object schema");
        let typed = RunState::new(RunId::new("run_typed"), "coder", "mock/model", "model").with_output(Some(spec));
        let plain = RunState::new(RunId::new("run_plain"), "coder", "mock/model", "model");
        for (id, state) in [("run_typed", &typed), ("run_plain", &plain)] {
            let run = troupe_store::NewRun {
                id: id.to_owned(),
                agent: "coder".to_owned(),
                status: RunStatus::Running,
                conversation_id: None,
                parent_run_id: None,
                input: serde_json::json!({"instruction": "review"}).into(),
                state: serde_json::to_value(state).expect("a state encodes").into(),
                spend: None,
            };
            store.create_run(run, troupe_store::now_millis()).await.expect("the run is created");
        }
        let runs = StoredRuns::new(store);
        let found = runs.find("run_typed").await.expect("reads").expect("stored");
        assert_eq!(found.view().output_schema, Some(schema.clone()));
        let plain = runs.find("run_plain").await.expect("reads").expect("stored");
        assert_eq!(plain.view().output_schema, None, "a text answer has no schema");
        let listed = runs.list(10).await.expect("lists");
        let typed = listed.iter().find(|run| run.run_id().as_str() == "run_typed").expect("listed");
        assert_eq!(typed.view().output_schema, Some(schema));
    }
}
