//! The worker side of the protocol: [`serve`] reads a task and its payloads, runs the
//! agent it builds under the task's tool policy, streams the run's events and artifacts,
//! and sends its result.

use super::error::WorkerError;
use super::hosted_models::{HostedModels, ModelRoute};
use super::remote_store::{RemoteStore, ReplyRoute};
use super::rss::own_peak_rss_kib;
use super::sandbox::SandboxReport;
use crate::ipc::{
    AgentResult, AgentTask, ArtifactRef, Frame, FrameCodec, FrameReader, FrameSender, PayloadReceiver, PayloadSource,
    PayloadSummary, ResultMetrics, ToolPolicy, frame_reader, send_payload, spawn_writer,
};
use futures::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, RunOutcomeKind};
use troupe_durable::ResumeRun;
use troupe_runtime::durable::{finished_output, resumable_failure};
use troupe_runtime::{Agent, Durability, ModelResolver, RunHandle, RunInput, RunOutcome, RunOutput};
use troupe_tools::Workspace;

/// Where a worker writes its input payloads, in its workspace.
pub const INPUTS_DIR: &str = ".troupe-inputs";
/// The heartbeat interval when the task names none.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// The missed heartbeats that make the coordinator gone, when the task names none.
const DEFAULT_MISSED: u32 = 5;
/// The name of the first event a worker sends: how it is sandboxed.
pub const SANDBOX_EVENT: &str = "worker.sandbox";

/// How a worker serves.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The agent's workspace: inputs go to its `.troupe-inputs/`, output files are read
    /// from it.
    pub workspace: PathBuf,
    /// How the process was sandboxed (see [`confine`](super::sandbox::confine)).
    pub sandbox: SandboxReport,
}

/// What a served task came to, for the worker's exit code.
#[derive(Clone, Debug)]
pub struct ServeSummary {
    /// The result that was sent.
    pub result: AgentResult,
}

/// Why the agent of a task could not be built (by the `build` function given to
/// [`serve`]), in words; the task's result carries it.
pub type BuildError = String;

/// Serves one task over `input` and `output` (the worker's stdin and stdout).
///
/// Reads the task and its input payloads (each written to `.troupe-inputs/<name>` in the
/// workspace as it arrives), builds the agent with `build` (given, when the task names
/// hosted models, the resolver that calls them through the coordinator: the agent's
/// runner uses it whatever `build` does), removes from its catalog
/// every tool the task's policy does not permit (so a call of one is answered as a call
/// of an unknown tool), runs it while streaming its events, answers cancel frames and a
/// silent coordinator by cancelling the run, streams the requested artifacts, and sends
/// the result. Heartbeats go out throughout.
///
/// Errors only when no result could be sent (no task arrived, the coordinator is gone).
pub async fn serve<R, W, F>(input: R, output: W, options: ServeOptions, build: F) -> Result<ServeSummary, WorkerError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    F: FnOnce(&AgentTask, Option<Arc<dyn ModelResolver>>) -> Result<Agent, BuildError>,
{
    let started = Instant::now();
    let codec = FrameCodec::new();
    let (frames_out, writer) = spawn_writer(output, codec);
    let mut frames = frame_reader(input, codec);
    let task = loop {
        match frames.next().await {
            Some(Ok(Frame::Task(task))) => break *task,
            Some(Ok(Frame::Heartbeat)) => {}
            Some(Ok(other)) => {
                return Err(WorkerError::NoTask { got: format!("a {} frame", other.frame_type().name()) });
            }
            Some(Err(error)) => return Err(error.into()),
            None => return Err(WorkerError::NoTask { got: "the end of input".to_owned() }),
        }
    };
    let interval = match task.heartbeat_ms {
        0 => DEFAULT_HEARTBEAT,
        ms => Duration::from_millis(ms),
    };
    let missed = match task.missed_heartbeats {
        0 => DEFAULT_MISSED,
        n => n,
    };
    let heartbeats = tokio::spawn(heartbeats(frames_out.clone(), interval));
    let mut session = Session { task: &task, options: &options, frames_out: &frames_out, started };
    let result = session.run(frames, interval.saturating_mul(missed), build).await;
    heartbeats.abort();
    let sent = frames_out.send(Frame::result(result.clone())).await;
    drop(frames_out);
    let written = writer.await;
    match (sent, written) {
        (Ok(()), Ok(Ok(()))) => Ok(ServeSummary { result }),
        (_, Ok(Err(error))) => Err(WorkerError::Write(error.to_string())),
        (_, Err(error)) => Err(WorkerError::Write(error.to_string())),
        (Err(_), Ok(Ok(()))) => Err(WorkerError::Write("the writer stopped before the result".to_owned())),
    }
}

async fn heartbeats(frames: FrameSender, interval: Duration) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if frames.is_closed() {
            return;
        }
        let _ = frames.try_send(Frame::Heartbeat);
    }
}

/// One task being served.
struct Session<'a> {
    task: &'a AgentTask,
    options: &'a ServeOptions,
    frames_out: &'a FrameSender,
    started: Instant,
}

/// How the coordinator's side went quiet, if it did.
#[derive(Clone, Debug)]
enum Stop {
    Cancelled(Option<String>),
    CoordinatorGone(String),
}

impl Session<'_> {
    async fn run<R, F>(&mut self, mut frames: FrameReader<R>, silence: Duration, build: F) -> AgentResult
    where
        R: AsyncRead + Unpin + Send + 'static,
        F: FnOnce(&AgentTask, Option<Arc<dyn ModelResolver>>) -> Result<Agent, BuildError>,
    {
        let task = self.task;
        self.send_sandbox_event().await;
        let mut result = match self.receive_inputs(&mut frames, silence).await {
            Ok(inputs) => {
                let stop = CancellationToken::new();
                let reason = Arc::new(std::sync::Mutex::new(None::<Stop>));
                // A recorded run's store calls go out as frames; the watcher routes their replies.
                let (record, store_route) = match &task.record_run {
                    Some(_) => {
                        let (store, route) = RemoteStore::new(self.frames_out.clone());
                        (Some(Arc::new(store)), Some(route))
                    }
                    None => (None, None),
                };
                // Hosted models are called as frames too; the watcher routes their answers.
                let (models, model_route) = if task.hosted_models.is_empty() {
                    (None, None)
                } else {
                    let (models, route) = HostedModels::new(task.hosted_models.clone(), self.frames_out);
                    (Some(Arc::new(models) as Arc<dyn ModelResolver>), Some(route))
                };
                let routes = Routes { store: store_route, models: model_route };
                let watcher =
                    tokio::spawn(watch_coordinator(frames, silence, stop.clone(), Arc::clone(&reason), routes));
                let setup = Setup { record, models };
                let mut result = self.run_agent(&inputs, build, setup, &stop, &reason).await;
                self.send_artifacts(&inputs, &mut result).await;
                watcher.abort();
                result
            }
            Err(stop) => stopped_result(task, &stop),
        };
        result.metrics.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        result.metrics.peak_rss_kib = own_peak_rss_kib();
        result.metrics.sandbox = self.options.sandbox.to_string();
        result
    }

    async fn send_sandbox_event(&self) {
        let value = serde_json::to_value(&self.options.sandbox).unwrap_or_default();
        let attribution = Attribution::now(
            AgentId::new(self.task.to.clone()),
            RunId::new(format!("worker-{}", self.task.task_id)),
            0,
        );
        let event = AgentEvent::new(attribution, AgentEventKind::Custom { name: SANDBOX_EVENT.to_owned(), value });
        let _ = self.frames_out.send(Frame::event(event)).await;
    }

    /// Receives every payload the task names into the inputs directory.
    async fn receive_inputs<R>(
        &self,
        frames: &mut FrameReader<R>,
        silence: Duration,
    ) -> Result<Vec<PayloadSummary>, Stop>
    where
        R: AsyncRead + Unpin,
    {
        let expected = &self.task.input.payloads;
        let dir = self.options.workspace.join(INPUTS_DIR);
        let mut open: HashMap<u32, PayloadReceiver> = HashMap::new();
        let mut done: Vec<PayloadSummary> = Vec::new();
        let broken = |reason: String| Stop::CoordinatorGone(reason);
        while done.len() < expected.len() {
            let frame = match tokio::time::timeout(silence, frames.next()).await {
                Err(_) => return Err(broken("the coordinator went silent while sending inputs".to_owned())),
                Ok(None) => return Err(broken("the coordinator closed the stream before the inputs ended".to_owned())),
                Ok(Some(Err(error))) => return Err(broken(format!("the input stream is broken: {error}"))),
                Ok(Some(Ok(frame))) => frame,
            };
            match frame {
                Frame::Heartbeat => {}
                Frame::Cancel { reason } => return Err(Stop::Cancelled(reason)),
                Frame::PayloadStart(start) => {
                    let Some(named) = expected.iter().find(|p| p.stream_id == start.stream_id) else {
                        return Err(broken(format!("payload stream {} is not one the task names", start.stream_id)));
                    };
                    if named.name != start.name || open.contains_key(&start.stream_id) {
                        return Err(broken(format!("payload stream {} does not match the task", start.stream_id)));
                    }
                    let receiver = PayloadReceiver::create(&start, &dir).await.map_err(|e| broken(e.to_string()))?;
                    open.insert(start.stream_id, receiver);
                }
                Frame::PayloadChunk { stream_id, bytes } => match open.get_mut(&stream_id) {
                    Some(receiver) => receiver.write(bytes).await.map_err(|e| broken(e.to_string()))?,
                    None => return Err(broken(format!("payload stream {stream_id} was not started"))),
                },
                Frame::PayloadEnd(end) => match open.remove(&end.stream_id) {
                    Some(receiver) => done.push(receiver.finish(&end).await.map_err(|e| broken(e.to_string()))?),
                    None => return Err(broken(format!("payload stream {} was not started", end.stream_id))),
                },
                other => {
                    return Err(broken(format!(
                        "a coordinator does not send a {} frame here",
                        other.frame_type().name()
                    )));
                }
            }
        }
        Ok(done)
    }

    async fn run_agent<F>(
        &self,
        inputs: &[PayloadSummary],
        build: F,
        setup: Setup,
        stop: &CancellationToken,
        reason: &std::sync::Mutex<Option<Stop>>,
    ) -> AgentResult
    where
        F: FnOnce(&AgentTask, Option<Arc<dyn ModelResolver>>) -> Result<Agent, BuildError>,
    {
        let task = self.task;
        let agent = match build(task, setup.models.clone()).and_then(|agent| restrict(agent, &task.tools, setup)) {
            Ok(agent) => agent,
            Err(error) => {
                return AgentResult::failed(&task.task_id, format!("the worker cannot build its agent: {error}"));
            }
        };
        let output = self.run_to_end(&agent, inputs, stop).await;
        let stopped = reason.lock().ok().and_then(|r| r.clone());
        let mut result = from_output(task, output, stopped);
        if result.status == RunOutcomeKind::Completed {
            result.error = None;
        }
        let received: Vec<serde_json::Value> =
            inputs.iter().map(|s| serde_json::json!({"name": s.name, "len": s.len, "sha256": s.sha256})).collect();
        if !received.is_empty() {
            result.data = Some(serde_json::json!({ "inputs": received }));
        }
        result
    }

    async fn run_to_end(
        &self,
        agent: &Agent,
        inputs: &[PayloadSummary],
        stop: &CancellationToken,
    ) -> Result<RunOutput, String> {
        let task = self.task;
        let mut instruction = task.full_prompt();
        if let Some(data) = &task.input.data {
            instruction.push_str(&format!("\n\nInput data (JSON):\n{data}"));
        }
        if !inputs.is_empty() {
            instruction.push_str("\n\nInput files:");
            for input in inputs {
                instruction.push_str(&format!("\n- {INPUTS_DIR}/{} ({} bytes)", input.name, input.len));
            }
        }
        let mut run_input = RunInput::new(instruction);
        run_input.parent_run_id.clone_from(&task.parent_run_id);
        run_input.output.clone_from(&task.output);
        let mut handle = match self.start_or_resume(agent, run_input).await? {
            Begun::Running(handle) => handle,
            Begun::Finished(output) => return Ok(*output),
        };
        // Nobody can answer an approval request from here: a call that needs one pauses
        // the run instead of waiting for ever, unless the coordinator's caller answers
        // through the recorded run's signals.
        if !(task.await_decisions && task.record_run.is_some()) {
            handle.signals.defer_approvals();
        }
        let cancel = handle.cancel.clone();
        let _cancel_on_drop = handle.cancel.clone().drop_guard();
        let deadline = task.deadline_ms.map(deadline_instant);
        loop {
            tokio::select! {
                event = handle.events.next_event() => match event {
                    Some(event) => {
                        if self.frames_out.send(Frame::event(event)).await.is_err() {
                            cancel.cancel();
                        }
                    }
                    None => break,
                },
                () = stop.cancelled() => cancel.cancel(),
                () = sleep_until_some(deadline) => cancel.cancel(),
            }
        }
        handle.output().await.map_err(|e| e.to_string())
    }

    /// Starts the task's run; a recorded run that a worker before this one began is
    /// resumed from its last checkpoint, and one that finished is read back.
    async fn start_or_resume(&self, agent: &Agent, mut input: RunInput) -> Result<Begun, String> {
        let (Some(run_id), Some(durability)) = (&self.task.record_run, agent.runner().durability()) else {
            return Ok(Begun::Running(Box::new(agent.start(input))));
        };
        let record = durability.store().load_run(run_id.as_str()).await.map_err(|e| e.to_string())?;
        match record {
            None => {
                input.run_id = Some(run_id.clone());
                Ok(Begun::Running(Box::new(agent.start(input))))
            }
            Some(record) if record.status.is_terminal() && resumable_failure(&record).is_none() => {
                // The worker before this one finished the run but died before its result.
                let output = finished_output(record).map_err(|e| e.to_string())?;
                output
                    .map(|o| Begun::Finished(Box::new(o)))
                    .ok_or_else(|| "the recorded run has not finished".to_owned())
            }
            Some(_) => {
                tracing::info!(run = %run_id, "resuming the task's recorded run");
                let handle = agent.resume_run(run_id.as_str()).await.map_err(|e| e.to_string())?;
                Ok(Begun::Running(Box::new(handle)))
            }
        }
    }

    /// Streams the requested artifacts and lists them in `result`.
    async fn send_artifacts(&self, inputs: &[PayloadSummary], result: &mut AgentResult) {
        let outputs = &self.task.outputs;
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        let mut missing: Vec<String> = Vec::new();
        if outputs.echo_payloads {
            files.extend(inputs.iter().filter_map(|s| s.path.clone().map(|p| (s.name.clone(), p))));
        }
        if !outputs.files.is_empty() {
            match Workspace::new(&self.options.workspace) {
                Ok(workspace) => {
                    for file in &outputs.files {
                        match workspace.resolve(file) {
                            Ok(path) if path.is_file() => files.push((artifact_name(file), path)),
                            Ok(_) => missing.push(format!("{file}: not a file")),
                            Err(error) => missing.push(format!("{file}: {error}")),
                        }
                    }
                }
                Err(error) => missing.extend(outputs.files.iter().map(|f| format!("{f}: {error}"))),
            }
        }
        for (stream_id, (name, path)) in (1u32..).zip(files) {
            let checksum = !self.task.skip_checksums;
            match send_payload(self.frames_out, stream_id, &name, &PayloadSource::File(path), checksum).await {
                Ok(sent) => result.artifacts.push(ArtifactRef { stream_id, name, len: sent.len, sha256: sent.sha256 }),
                Err(error) => {
                    // A stream cut mid-way cannot be taken back: the coordinator sees it
                    // unfinished and fails the attempt, which is what a broken artifact is.
                    missing.push(format!("{name}: {error}"));
                    break;
                }
            }
        }
        if !missing.is_empty() {
            let data = result.data.get_or_insert_with(|| serde_json::json!({}));
            if let Some(map) = data.as_object_mut() {
                map.insert("missing_outputs".to_owned(), serde_json::json!(missing));
            }
        }
    }
}

/// How a task's run began.
enum Begun {
    Running(Box<RunHandle>),
    /// It had finished under an earlier worker.
    Finished(Box<RunOutput>),
}

/// What the coordinator gives a task's agent beyond its tools.
struct Setup {
    /// The store its runs are recorded in, when the task names a run.
    record: Option<Arc<RemoteStore>>,
    /// The models it calls through the coordinator, when the task names hosted models.
    models: Option<Arc<dyn ModelResolver>>,
}

/// The agent with its catalog cut down to the tools `policy` permits, recording its runs
/// in the coordinator's store and calling its models through the coordinator when the
/// task says so.
fn restrict(agent: Agent, policy: &ToolPolicy, setup: Setup) -> Result<Agent, BuildError> {
    let catalog = agent.runner().agent_catalog(agent.spec()).map_err(|e| e.to_string())?;
    let permitted: Vec<String> = catalog.names().into_iter().filter(|n| policy.permits(n)).map(str::to_owned).collect();
    let mut spec = agent.spec().clone();
    spec.tools = Some(permitted);
    let mut runner = agent.runner().clone();
    if let Some(store) = setup.record {
        runner = runner.with_store(Durability::new(store));
    }
    if let Some(models) = setup.models {
        runner = runner.with_resolver(models);
    }
    Ok(Agent::new(runner, spec))
}

/// The result of a run's output.
fn from_output(task: &AgentTask, output: Result<RunOutput, String>, stopped: Option<Stop>) -> AgentResult {
    let output = match output {
        Ok(output) => output,
        Err(error) => return AgentResult::failed(&task.task_id, format!("the run failed: {error}")),
    };
    let error = match (&output.outcome, stopped) {
        (RunOutcome::Completed { .. }, _) => None,
        (RunOutcome::Cancelled { .. }, Some(Stop::Cancelled(reason))) => {
            Some(format!("cancelled{}", reason.map(|r| format!(": {r}")).unwrap_or_default()))
        }
        (RunOutcome::Cancelled { .. }, Some(Stop::CoordinatorGone(why))) => Some(format!("cancelled: {why}")),
        (RunOutcome::Cancelled { .. }, None) => Some("cancelled: the task's deadline passed".to_owned()),
        (RunOutcome::Paused { pending }, _) => {
            Some(format!("paused waiting for {} approval(s), which a worker cannot ask a person for", pending.len()))
        }
        (RunOutcome::BudgetExceeded { budget }, _) => Some(format!("its {budget} budget ran out")),
        (RunOutcome::MaxIterations { iterations }, _) => Some(format!("it reached its iteration limit ({iterations})")),
        (RunOutcome::Incomplete { .. }, _) => Some("its answer was cut at the output limit".to_owned()),
        (RunOutcome::Failed { error, .. }, _) => Some(error.clone()),
    };
    AgentResult {
        task_id: task.task_id.clone(),
        status: output.outcome.kind(),
        output: output.text,
        data: None,
        error,
        metrics: ResultMetrics {
            usage: output.usage,
            cost_usd: output.cost_usd,
            tool_calls: output.tool_calls,
            ..ResultMetrics::default()
        },
        artifacts: Vec::new(),
        run_id: Some(output.run_id),
    }
}

fn stopped_result(task: &AgentTask, stop: &Stop) -> AgentResult {
    match stop {
        Stop::Cancelled(reason) => AgentResult {
            status: RunOutcomeKind::Cancelled,
            ..AgentResult::failed(
                &task.task_id,
                format!("cancelled{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default()),
            )
        },
        Stop::CoordinatorGone(why) => AgentResult::failed(&task.task_id, why.clone()),
    }
}

/// Where the coordinator's answers to the worker's calls go.
struct Routes {
    store: Option<ReplyRoute>,
    models: Option<ModelRoute>,
}

impl Routes {
    /// No reply can come any more: the run's calls fail instead of waiting.
    fn close(&self) {
        if let Some(route) = &self.store {
            route.close();
        }
        if let Some(route) = &self.models {
            route.close();
        }
    }
}

/// Watches the coordinator's frames while the run goes: a cancel, the end of the stream,
/// a broken stream or a silence past `silence` stops the run. Store and model replies go
/// on to be routed after a cancel, so the cancelled run can still record how it ended.
async fn watch_coordinator<R>(
    mut frames: FrameReader<R>,
    silence: Duration,
    stop: CancellationToken,
    reason: Arc<std::sync::Mutex<Option<Stop>>>,
    routes: Routes,
) where
    R: AsyncRead + Unpin,
{
    let stop_for = |why: Stop| {
        if let Ok(mut slot) = reason.lock() {
            slot.get_or_insert(why);
        }
        stop.cancel();
    };
    let gone = loop {
        match tokio::time::timeout(silence, frames.next()).await {
            Err(_) => {
                break Stop::CoordinatorGone(format!("the coordinator went silent for {} ms", silence.as_millis()));
            }
            Ok(None) => break Stop::CoordinatorGone("the coordinator closed the stream".to_owned()),
            Ok(Some(Err(error))) => {
                break Stop::CoordinatorGone(format!("the coordinator's stream is broken: {error}"));
            }
            Ok(Some(Ok(Frame::Cancel { reason }))) => {
                stop_for(Stop::Cancelled(reason));
                if routes.store.is_none() && routes.models.is_none() {
                    return;
                }
            }
            Ok(Some(Ok(Frame::StoreReply(reply)))) => match &routes.store {
                Some(route) => route.deliver(*reply),
                None => break Stop::CoordinatorGone("the coordinator answered a store call never made".to_owned()),
            },
            Ok(Some(Ok(Frame::ModelReply(reply)))) => match &routes.models {
                Some(route) => route.deliver(*reply),
                None => break Stop::CoordinatorGone("the coordinator answered a model call never made".to_owned()),
            },
            Ok(Some(Ok(_))) => {}
        }
    };
    routes.close();
    stop_for(gone);
}

/// The name an output file is streamed under: its path with `/` as `__`.
fn artifact_name(file: &str) -> String {
    let trimmed = file.trim_start_matches("./").trim_matches('/');
    let name = trimmed.replace('/', "__");
    if crate::ipc::is_plain_file_name(&name) { name } else { "output".to_owned() }
}

fn deadline_instant(deadline_ms: u64) -> tokio::time::Instant {
    let left = deadline_ms.saturating_sub(troupe_core::now_ms());
    tokio::time::Instant::now() + Duration::from_millis(left)
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Where a worker in `workspace` writes the input payload `name`; `None` for a name that is
/// not a plain file name.
pub fn input_path(workspace: &Path, name: &str) -> Option<PathBuf> {
    crate::ipc::is_plain_file_name(name).then(|| workspace.join(INPUTS_DIR).join(name))
}
