//! `/v1/runs` and `/v1/agents`.

use super::sse;
use crate::error::ApiError;
use crate::hub::{Asked, HubRun};
use crate::ids::checked_id;
use crate::launcher::{LaunchError, Target};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use troupe_core::{ConversationId, OutputSchema, RunId};
use troupe_runtime::durable::child_run_id;
use troupe_runtime::{OutputSpec, RunInput, Signal};

/// The body of `POST /v1/runs`: what to run, on what.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// The agent to run (give this or `team`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The team to run (give this or `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The task.
    pub instruction: String,
    /// The conversation the run continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// A model for this run instead of the agent's (`provider/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the response is the run's event stream (the default) or just its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// A typed answer for this run (an agent's): the run ends with a JSON document matching
    /// the schema, or fails `output_invalid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputRequest>,
}

/// `output` of a run request: the answer's JSON schema (an object schema) and its name.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRequest {
    /// The answer's name (`[a-zA-Z0-9_-]`, at most 64; default `Output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The JSON schema.
    pub schema: serde_json::Value,
}

impl StartRun {
    /// The target's name, checked: exactly one of `agent` and `team`.
    pub fn target(&self) -> Result<&str, ApiError> {
        let name = match (&self.agent, &self.team) {
            (Some(name), None) | (None, Some(name)) => name,
            _ => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_body",
                    "give exactly one of `agent` and `team`",
                ));
            }
        };
        checked_id("agent", name)
    }

    /// What it asks, as a run that it starts keeps it.
    pub fn asked(&self) -> Asked {
        Asked {
            instruction: self.instruction.clone(),
            conversation_id: self.conversation_id.clone(),
            model: self.model.clone(),
        }
    }

    /// The run's input.
    pub fn input(&self) -> Result<RunInput, ApiError> {
        let mut input = RunInput::new(self.instruction.clone());
        if let Some(conversation) = &self.conversation_id {
            input = input.conversation(ConversationId::new(checked_id("conversation", conversation)?));
        }
        if let Some(model) = &self.model {
            if model.trim().is_empty() {
                return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", "`model` is empty"));
            }
            input = input.model(model.clone());
        }
        if let Some(output) = &self.output {
            if self.team.is_some() {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_body",
                    "`output` is for agents: a team's answer is its leader's text",
                ));
            }
            let name = output.name.clone().unwrap_or_else(|| "Output".to_owned());
            let spec = OutputSpec::new(OutputSchema::new(name, output.schema.clone()))
                .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_output_schema", e.to_string()))?;
            input = input.output(spec);
        }
        Ok(input)
    }
}

/// What `POST /v1/runs/{id}/signals` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalAccepted {
    /// The run.
    pub run_id: RunId,
    /// Always true: a refused signal is an error instead.
    pub accepted: bool,
}

/// Starts `request` and holds the run in the hub.
pub fn launch(state: &AppState, request: &StartRun) -> Result<Arc<HubRun>, ApiError> {
    launch_as(state, request, None)
}

/// [`launch`], the run under `run_id` when given (else a new id).
fn launch_as(state: &AppState, request: &StartRun, run_id: Option<RunId>) -> Result<Arc<HubRun>, ApiError> {
    let target = request.target()?;
    let mut input = request.input()?;
    if let Some(run_id) = run_id {
        input = input.run_id(run_id);
    }
    let launched = state.launcher.launch(target, input).map_err(|error| match error {
        LaunchError::UnknownTarget(name) => ApiError::unknown_agent(&name),
        LaunchError::Refused(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "launch_refused", why),
    })?;
    let run = state.hub.insert(target, launched);
    run.set_asked(request.asked());
    if let Some(output) = &request.output {
        run.set_output_schema(output.schema.clone());
    }
    Ok(run)
}

/// The request header naming a start, so that the same start sent again (a client that
/// lost the answer) gets the run the first one started.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The answer's header saying that the run is the one an earlier request with the same
/// [`IDEMPOTENCY_KEY`] started.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The longest [`IDEMPOTENCY_KEY`] taken.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

pub(super) async fn start(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let key = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(error) => return error.into_response(),
    };
    let request: StartRun = match state.parse(body) {
        Ok(request) => request,
        Err(error) => return error.into_response(),
    };
    let (run, replayed) = match start_once(&state, &request, key).await {
        Ok(started) => started,
        Err(error) => return error.into_response(),
    };
    let id = HeaderValue::from_str(run.run_id().as_str()).ok();
    let streamed = request.stream.unwrap_or(true);
    let mut response = if let (true, Err(elsewhere)) = (streamed, held_or_ended(&state, &run)) {
        // Found under its key, held by another process sharing the store.
        elsewhere.into_response()
    } else if streamed {
        sse::stream(&run, 0, state.closing.clone(), state.config.keep_alive).into_response()
    } else {
        let body = serde_json::json!({
            "run_id": run.run_id(),
            "events": format!("/v1/runs/{}/events", run.run_id()),
        });
        (StatusCode::CREATED, Json(body)).into_response()
    };
    if let Some(id) = id {
        response.headers_mut().insert("x-troupe-run-id", id);
    }
    if replayed {
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// The request's [`IDEMPOTENCY_KEY`], when it has one: 1 to [`MAX_IDEMPOTENCY_KEY_LEN`]
/// visible ASCII characters, else `400 invalid_idempotency_key`.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    checked_idempotency_key(value.to_str().unwrap_or_default()).map(Some)
}

/// `key` when it is 1 to [`MAX_IDEMPOTENCY_KEY_LEN`] visible ASCII characters, else
/// `400 invalid_idempotency_key`.
pub(super) fn checked_idempotency_key(key: &str) -> Result<&str, ApiError> {
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::bad_request(
            "invalid_idempotency_key",
            format!("an idempotency key is 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"),
        ));
    }
    Ok(key)
}

/// Starts `request`, or, when `key` names a start already made for its target, finds the
/// run that start made: the run, and whether it was found.
pub(super) async fn start_once(
    state: &AppState,
    request: &StartRun,
    key: Option<&str>,
) -> Result<(Arc<HubRun>, bool), ApiError> {
    match key {
        Some(key) => {
            let run_id = child_run_id(&RunId::new("idempotency-key"), &format!("{}\0{key}", request.target()?));
            let (run, found) = start_as(state, request, run_id).await?;
            if found && run.asked().is_some_and(|asked| *asked != request.asked()) {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    format!(
                        "the idempotency key `{key}` named another start of `{}` (another instruction, conversation \
                         or model): a key names one start",
                        request.target()?
                    ),
                ));
            }
            Ok((run, found))
        }
        None => Ok((launch(state, request)?, false)),
    }
}

/// Starts `request` as run `run_id`, unless a run of that id exists, held here or in the
/// store: then that run. The run, and whether it was found. Starts under a named id are
/// made one at a time, so two requests naming one id at once start it once.
pub(crate) async fn start_as(
    state: &AppState,
    request: &StartRun,
    run_id: RunId,
) -> Result<(Arc<HubRun>, bool), ApiError> {
    let _starting = state.starts.lock().await;
    if let Some(run) = state.find_run(run_id.as_str()).await? {
        return Ok((run, true));
    }
    Ok((launch_as(state, request, Some(run_id))?, false))
}

/// How many of the store's runs a page of the list takes by default (besides the held
/// ones, on the first page).
pub const LISTED_STORED_RUNS: u32 = 100;

/// The most a page of the list may take.
pub const MAX_LISTED_RUNS: u32 = 1000;

/// The query of `GET /v1/runs`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    offset: Option<u32>,
    limit: Option<u32>,
    /// Only runs in this status (a store status: `completed`, `paused`, …).
    status: Option<String>,
    /// Only runs of this agent or team.
    agent: Option<String>,
    /// Only runs whose id begins with this.
    id: Option<String>,
    /// Only runs this finds: part of a name or a model, or an id's start.
    q: Option<String>,
}

pub(super) async fn list(State(state): State<AppState>, query: Result<Query<ListQuery>, QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return ApiError::bad_request("invalid_query", "`offset` and `limit` are whole numbers").into_response();
    };
    let limit = query.limit.unwrap_or(LISTED_STORED_RUNS).clamp(1, MAX_LISTED_RUNS);
    let status = match query.status.as_deref() {
        None => None,
        Some(name) => match troupe_store::RunStatus::parse(name) {
            Some(status) => Some(status),
            None => {
                let known: Vec<&str> = troupe_store::RunStatus::ALL.iter().map(|s| s.as_str()).collect();
                return ApiError::bad_request(
                    "invalid_query",
                    format!("`status` is one of {}, not `{name}`", known.join(", ")),
                )
                .into_response();
            }
        },
    };
    let nonempty = |text: Option<String>| text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let (agent, id_prefix, search) = (nonempty(query.agent), nonempty(query.id), nonempty(query.q));
    // No agent's name, model or run's id holds a control character or runs that long: such
    // a filter matches nothing, and is not sent to the store.
    if [&agent, &id_prefix, &search].into_iter().flatten().any(|v| v.chars().any(char::is_control) || v.len() > 256) {
        return Json(serde_json::json!({ "runs": [], "next_offset": null })).into_response();
    }
    let filter = crate::state::ListFilter { status, agent, id_prefix, search };
    match state.runs_page(query.offset.unwrap_or(0), limit, &filter).await {
        Ok((runs, next)) => {
            let views: Vec<_> = runs.iter().map(|run| run.view()).collect();
            Json(serde_json::json!({ "runs": views, "next_offset": next })).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// `GET /v1/runs/changes`: a `runs` event at once, then one at each change to what the
/// list of runs shows, until the server closes: a change to the runs held here (its data
/// the hub's count of changes), or, with a store, a run of another process sharing it
/// that appeared among the store's newest or was checkpointed (found within
/// [`STORE_LOOK_EVERY`]). A list page asks for the runs again at each, instead of polling
/// for them.
pub(super) async fn changes(State(state): State<AppState>) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let (listed, closing) = (state.hub.listed(), state.closing.clone());
    let store = state.stored.as_ref().map(|stored| StoreWatch::new(stored.clone(), Arc::clone(&state.hub)));
    let events =
        futures::stream::unfold((listed, closing, store, true), |(mut listed, closing, mut store, first)| async move {
            if first {
                // What the store shows now, before the list is read: a change after it is announced.
                if let Some(store) = &mut store {
                    store.seen = store.look().await;
                }
            } else {
                let store_changed = async {
                    match &mut store {
                        Some(store) => store.changed().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    changed = listed.changed() => if changed.is_err() { return None },
                    () = store_changed => {}
                    () = closing.cancelled() => return None,
                }
            }
            let count = *listed.borrow_and_update();
            let event = Event::default().id(count.to_string()).event("runs").data(count.to_string());
            Some((Ok::<_, std::convert::Infallible>(event), (listed, closing, store, false)))
        });
    Sse::new(events).keep_alive(KeepAlive::new().interval(state.config.keep_alive)).into_response()
}

/// How often a stream of `/v1/runs/changes` looks at the store for the runs of other
/// processes: one indexed read of [`STORE_LOOKED_AT`] summaries, no state, shared by every
/// stream that looks within half of this of it (so the store is read about once in this,
/// however many streams are open).
pub const STORE_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How many of the store's newest runs it looks at: a list's first page.
pub const STORE_LOOKED_AT: u32 = 100;

/// The store's newest runs, as an announcement stream follows them: the top-level runs of
/// the list's first page that the hub does not hold (it announces its own), which other
/// processes sharing the store run, by id, status and last change.
struct StoreWatch {
    stored: crate::stored::StoredRuns,
    hub: Arc<crate::hub::RunHub>,
    /// What the last look saw (`None`: the store could not be read).
    seen: Option<u64>,
    every: tokio::time::Interval,
}

impl StoreWatch {
    fn new(stored: crate::stored::StoredRuns, hub: Arc<crate::hub::RunHub>) -> Self {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + STORE_LOOK_EVERY, STORE_LOOK_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        StoreWatch { stored, hub, seen: None, every }
    }

    /// The ids, statuses and last changes of the store's newest top-level runs that no hub
    /// here holds, hashed: each checkpoint of such a run changes what the runs list shows
    /// of it (its events, its tokens, its end). `None` when the store cannot be read (a
    /// store that fails announces nothing). Every stream shares a look younger than half
    /// of [`STORE_LOOK_EVERY`]: they all follow the same store and the same hub.
    async fn look(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let (store, hub) = (self.stored.store(), &self.hub);
        self.stored
            .newest()
            .get(STORE_LOOK_EVERY / 2, || async move {
                let filter = troupe_store::RunFilter { limit: STORE_LOOKED_AT, ..troupe_store::RunFilter::default() };
                let runs = store.list_runs(&filter).await.ok()?;
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                for run in runs.iter().filter(|run| run.parent_run_id.is_none() && hub.get(&run.id).is_none()) {
                    (run.id.as_str(), run.status.as_str(), run.updated_at).hash(&mut hasher);
                }
                Some(hasher.finish())
            })
            .await
    }

    /// Returns once a look sees the store's runs changed since the last.
    async fn changed(&mut self) {
        loop {
            self.every.tick().await;
            let now = self.look().await;
            if now.is_some() && now != self.seen {
                self.seen = now;
                return;
            }
        }
    }
}

pub(super) async fn agents(State(state): State<AppState>) -> Json<serde_json::Value> {
    let targets: Vec<Target> = state.launcher.targets();
    Json(serde_json::json!({ "agents": targets }))
}

/// The run `id`, held here or read from the store.
async fn found(state: &AppState, id: &str) -> Result<Arc<HubRun>, ApiError> {
    let id = checked_id("run", id)?;
    state.find_run(id).await?.ok_or_else(|| ApiError::unknown_run(id))
}

/// Run `id` when its events can be followed here: held here, or ended (its events read
/// from the store). A run another process holds is `409 run_elsewhere`.
pub(super) async fn followable(state: &AppState, id: &str) -> Result<Arc<HubRun>, ApiError> {
    let run = found(state, id).await?;
    held_or_ended(state, &run)?;
    Ok(run)
}

/// Whether `run`'s events can be followed here: it is held here, or it has ended. A run
/// read from the store that another process holds is `409 run_elsewhere`: its events,
/// past what its record tells, stream there.
pub(super) fn held_or_ended(state: &AppState, run: &HubRun) -> Result<(), ApiError> {
    if run.is_ended() || state.hub.get(run.run_id().as_str()).is_some() {
        return Ok(());
    }
    Err(ApiError::conflict(
        "run_elsewhere",
        format!("run `{}` is held by another process: its events stream there", run.run_id()),
    ))
}

pub(super) async fn show(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match found(&state, &id).await {
        Ok(run) => Json(run.view()).into_response(),
        Err(error) => error.into_response(),
    }
}

pub(super) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let run = match followable(&state, &id).await {
        Ok(run) => run,
        Err(error) => return error.into_response(),
    };
    match sse::resume_position(&headers, query.get("after").map(String::as_str)) {
        Ok(from) => sse::stream(&run, from, state.closing.clone(), state.config.keep_alive).into_response(),
        Err(error) => error.into_response(),
    }
}

pub(super) async fn signal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let run = match found(&state, &id).await {
        Ok(run) => run,
        Err(error) => return error.into_response(),
    };
    let signal: Signal = match state.parse(body) {
        Ok(signal) => signal,
        Err(error) => return error.into_response(),
    };
    match run.signal(signal).await {
        Ok(()) => (StatusCode::ACCEPTED, Json(SignalAccepted { run_id: run.run_id().clone(), accepted: true }))
            .into_response(),
        Err(error) => error.into_response(),
    }
}
