//! [`AgentHandle`]: one supervised agent and its lifecycle.

use super::budget::{Ledger, Spend, TeamAccount};
use super::factory::AgentFactory;
use crate::bus::lock;
use crate::member::describe;
use crate::{EventSink, Member, MemberResult, MemberTask, TeamError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_core::Budget;
use troupe_core::{AgentEventKind, ToolCallId, Usage};
use troupe_runtime::{
    Agent, AgentSpec, ApprovalDecision, ApprovalRequest, RunHandle, RunInput, RunOutcome, RunState, Signal,
    SignalSender,
};

/// Where a supervised agent stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Spawned, never started.
    Created,
    /// A run is going.
    Running,
    /// Its run stopped with its state kept, to be resumed: suspended by the supervisor, or
    /// paused waiting for approvals.
    Suspended,
    /// Its last run completed its task.
    Completed,
    /// Its last run ended without completing (failed, cancelled, out of budget).
    Failed,
    /// Stopped for good.
    Terminated,
}

impl AgentStatus {
    /// The status's snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Created => "created",
            AgentStatus::Running => "running",
            AgentStatus::Suspended => "suspended",
            AgentStatus::Completed => "completed",
            AgentStatus::Failed => "failed",
            AgentStatus::Terminated => "terminated",
        }
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the supervisor stopped a live run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Suspend,
    Terminate,
    Cancel,
}

/// The live run.
struct Live {
    signals: SignalSender,
    cancel: CancellationToken,
    started: Instant,
}

struct State {
    status: AgentStatus,
    spec: AgentSpec,
    agent: Agent,
    /// Set by a model switch: a resumed state takes the spec's model.
    model_switched: bool,
    live: Option<Live>,
    stop: Option<Stop>,
    snapshot: Option<RunState>,
    task: Option<MemberTask>,
    last: Option<MemberResult>,
    runs: u32,
}

pub(crate) struct HandleInner {
    name: String,
    description: String,
    depth: usize,
    parent: Option<String>,
    team: Arc<TeamAccount>,
    factory: Arc<dyn AgentFactory>,
    pub(crate) ledger: Arc<Ledger>,
    children: Mutex<Vec<AgentHandle>>,
    state: Mutex<State>,
    /// Bumped at every change of state, for [`AgentHandle::wait`].
    changes: watch::Sender<u64>,
}

/// A supervised agent; cheap to clone (clones share the agent).
///
/// Its lifecycle: **created** → [`start`](Self::start) → **running** → **completed** or
/// **failed** (and [`start`](Self::start) again), or [`suspend`](Self::suspend) →
/// **suspended** → [`resume`](Self::resume) → **running**; [`terminate`](Self::terminate)
/// from anywhere → **terminated**, for good.
///
/// Runs are unattended: a tool call that needs approval suspends the agent (its pending
/// calls are in [`pending_approvals`](Self::pending_approvals); [`decide`](Self::decide),
/// then resume).
#[derive(Clone)]
pub struct AgentHandle {
    pub(crate) inner: Arc<HandleInner>,
}

impl fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentHandle")
            .field("name", &self.inner.name)
            .field("depth", &self.inner.depth)
            .field("parent", &self.inner.parent)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// What a run is started from.
enum Launch {
    Fresh(MemberTask),
    Resume,
}

impl AgentHandle {
    pub(crate) fn new(
        spec: AgentSpec,
        agent: Agent,
        depth: usize,
        parent: Option<&AgentHandle>,
        team: Arc<TeamAccount>,
        factory: Arc<dyn AgentFactory>,
    ) -> Self {
        let state = State {
            status: AgentStatus::Created,
            spec,
            agent,
            model_switched: false,
            live: None,
            stop: None,
            snapshot: None,
            task: None,
            last: None,
            runs: 0,
        };
        AgentHandle {
            inner: Arc::new(HandleInner {
                name: state.spec.name.clone(),
                description: describe_spec(&state.spec),
                depth,
                parent: parent.map(|p| p.name().to_owned()),
                team,
                factory,
                ledger: Ledger::child_of(parent.map(|p| Arc::clone(&p.inner.ledger))),
                children: Mutex::new(Vec::new()),
                state: Mutex::new(state),
                changes: watch::Sender::new(0),
            }),
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its depth: 0 for an agent the supervisor spawned, its parent's plus one otherwise.
    pub fn depth(&self) -> usize {
        self.inner.depth
    }

    /// Its parent's name, for a child.
    pub fn parent(&self) -> Option<&str> {
        self.inner.parent.as_deref()
    }

    /// Where it stands.
    pub fn status(&self) -> AgentStatus {
        lock(&self.inner.state).status
    }

    /// Its spec as it stands (a child's narrowed to its parent).
    pub fn spec(&self) -> AgentSpec {
        lock(&self.inner.state).spec.clone()
    }

    /// The agent built from its spec.
    pub fn agent(&self) -> Agent {
        lock(&self.inner.state).agent.clone()
    }

    /// The result of its last run.
    pub fn result(&self) -> Option<MemberResult> {
        lock(&self.inner.state).last.clone()
    }

    /// How many runs it started (a resume counts as one).
    pub fn runs(&self) -> u32 {
        lock(&self.inner.state).runs
    }

    /// What it and all its descendants spent.
    pub fn spent(&self) -> Spend {
        self.inner.ledger.spend()
    }

    /// Its children, terminated ones included.
    pub fn children(&self) -> Vec<AgentHandle> {
        lock(&self.inner.children).clone()
    }

    /// Its children that are not terminated.
    pub fn live_children(&self) -> usize {
        lock(&self.inner.children).iter().filter(|c| c.status() != AgentStatus::Terminated).count()
    }

    pub(crate) fn adopt(&self, child: AgentHandle) {
        lock(&self.inner.children).push(child);
    }

    /// How long its current run has been going.
    pub fn elapsed(&self) -> Option<Duration> {
        lock(&self.inner.state).live.as_ref().map(|live| live.started.elapsed())
    }

    /// The calls a suspended run waits on approvals for.
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        lock(&self.inner.state).snapshot.as_ref().map(RunState::awaiting_approval).unwrap_or_default()
    }

    fn changed(&self) {
        self.inner.changes.send_modify(|n| *n += 1);
    }

    /// Starts a run of `task`. Must be called inside a Tokio runtime. Refused while it
    /// runs, once it is suspended (resume or terminate it) or terminated, and once the
    /// team's budget ran out.
    pub fn start(&self, task: MemberTask) -> Result<(), TeamError> {
        self.launch(Launch::Fresh(task), None)
    }

    /// [`start`](Self::start), sending the run's live events to `events`.
    pub fn start_with_events(&self, task: MemberTask, events: Option<EventSink>) -> Result<(), TeamError> {
        self.launch(Launch::Fresh(task), events)
    }

    /// Starts `task` and waits for its result.
    pub async fn run(&self, task: MemberTask) -> Result<MemberResult, TeamError> {
        self.start(task)?;
        self.wait().await;
        self.result().ok_or(TeamError::Cancelled)
    }

    /// Continues a suspended run from its kept state, with the spec as it stands now (a
    /// new model, new instructions).
    pub fn resume(&self) -> Result<(), TeamError> {
        self.launch(Launch::Resume, None)
    }

    /// [`resume`](Self::resume), sending the run's live events to `events`.
    pub fn resume_with_events(&self, events: Option<EventSink>) -> Result<(), TeamError> {
        self.launch(Launch::Resume, events)
    }

    fn launch(&self, launch: Launch, events: Option<EventSink>) -> Result<(), TeamError> {
        self.inner.team.check()?;
        let inner = &self.inner;
        let mut state = lock(&inner.state);
        let status = state.status;
        let refuse = |why: &str| Err(TeamError::Invalid(format!("`{}` is {status}: {why}", inner.name)));
        match (&launch, status) {
            (_, AgentStatus::Running) => return refuse("it can take one task at a time"),
            (_, AgentStatus::Terminated) => return refuse("it cannot run again"),
            (Launch::Fresh(_), AgentStatus::Suspended) => return refuse("resume or terminate it first"),
            (Launch::Resume, status) if status != AgentStatus::Suspended => {
                return refuse("only a suspended agent resumes");
            }
            _ => {}
        }
        let run = match launch {
            Launch::Fresh(task) => {
                let mut input = RunInput::new(task.full_prompt());
                input.parent_run_id.clone_from(&task.parent_run_id);
                state.task = Some(task);
                state.snapshot = None;
                state.agent.start(input)
            }
            Launch::Resume => {
                let Some(mut snapshot) = state.snapshot.take() else {
                    return refuse("it has no state to resume");
                };
                if state.model_switched {
                    snapshot.switch_model(state.spec.model.clone());
                }
                state.agent.resume(snapshot.reopened_after_cancel())
            }
        };
        // Nobody answers approvals live: a call that needs one suspends the agent.
        run.signals.defer_approvals();
        state.model_switched = false;
        state.live = Some(Live { signals: run.signals.clone(), cancel: run.cancel.clone(), started: Instant::now() });
        state.stop = None;
        state.runs += 1;
        state.status = AgentStatus::Running;
        let task = state.task.clone().unwrap_or_default();
        drop(state);
        self.changed();
        tokio::spawn(monitor(self.clone(), run, task, events));
        Ok(())
    }

    /// Waits until no run is going; returns the status then.
    pub async fn wait(&self) -> AgentStatus {
        let mut changes = self.inner.changes.subscribe();
        loop {
            changes.borrow_and_update();
            {
                let state = lock(&self.inner.state);
                if state.live.is_none() {
                    return state.status;
                }
            }
            if changes.changed().await.is_err() {
                return self.status();
            }
        }
    }

    /// Suspends the running agent at its run's next safe boundary, without cancelling it:
    /// the model response or tool call in flight finishes and is kept, then the run pauses
    /// with its state kept for [`resume`](Self::resume), which goes on from there.
    /// Returns the status after: `suspended`, or `completed`/`failed` when the run ended
    /// before it reached a boundary. Already suspended: nothing happens.
    pub async fn suspend(&self) -> Result<AgentStatus, TeamError> {
        {
            let mut state = lock(&self.inner.state);
            match state.status {
                AgentStatus::Suspended => return Ok(AgentStatus::Suspended),
                AgentStatus::Running => {
                    state.stop = Some(Stop::Suspend);
                    if let Some(live) = &state.live {
                        live.signals.suspend();
                    }
                }
                other => {
                    return Err(TeamError::Invalid(format!(
                        "`{}` is {other}: only a running agent can be suspended",
                        self.inner.name
                    )));
                }
            }
        }
        Ok(self.wait().await)
    }

    /// Decides a call a suspended run waits on; takes effect at [`resume`](Self::resume).
    pub fn decide(&self, call_id: impl Into<ToolCallId>, decision: ApprovalDecision) -> Result<(), TeamError> {
        let mut state = lock(&self.inner.state);
        let name = self.inner.name.clone();
        let snapshot = state
            .snapshot
            .as_mut()
            .ok_or_else(|| TeamError::Invalid(format!("`{name}` has no suspended run to decide for")))?;
        snapshot.apply_signal(Signal::approval(call_id, decision)).map_err(troupe_runtime::RuntimeError::from)?;
        Ok(())
    }

    /// Sends `signal` to the live run (a user message, steering); taken at its next safe
    /// boundary.
    pub fn signal(&self, signal: Signal) -> Result<(), TeamError> {
        let state = lock(&self.inner.state);
        let live =
            state.live.as_ref().ok_or_else(|| TeamError::Invalid(format!("`{}` has no live run", self.inner.name)))?;
        Ok(live.signals.try_send(signal)?)
    }

    /// Switches the agent to `model`, for its next run or resume (a live run keeps its
    /// model). Fails, changing nothing, when the model does not resolve.
    pub fn switch_model(&self, model: impl Into<String>) -> Result<(), TeamError> {
        let model = model.into();
        self.respec(|spec| spec.model = model)?;
        lock(&self.inner.state).model_switched = true;
        Ok(())
    }

    /// Replaces the agent's instructions, for its next run or resume (a resumed run sends
    /// them with its next model call).
    pub fn set_instructions(&self, instructions: impl Into<String>) -> Result<(), TeamError> {
        let instructions = instructions.into();
        self.respec(|spec| spec.instructions = instructions)
    }

    fn respec(&self, change: impl FnOnce(&mut AgentSpec)) -> Result<(), TeamError> {
        let mut state = lock(&self.inner.state);
        if state.status == AgentStatus::Terminated {
            return Err(TeamError::Invalid(format!("`{}` is terminated", self.inner.name)));
        }
        let mut spec = state.spec.clone();
        change(&mut spec);
        state.agent = self.inner.factory.build(spec.clone())?;
        state.spec = spec;
        Ok(())
    }

    /// Stops the agent and its descendants for good; a live run is cancelled.
    pub fn terminate(&self) {
        for child in self.children() {
            child.terminate();
        }
        let mut state = lock(&self.inner.state);
        if state.status == AgentStatus::Terminated {
            return;
        }
        state.status = AgentStatus::Terminated;
        state.snapshot = None;
        if let Some(live) = &state.live {
            live.cancel.cancel();
            state.stop = Some(Stop::Terminate);
        }
        drop(state);
        self.changed();
    }

    /// Cancels the live run, if any: it ends failed (cancelled), and the agent may take
    /// another task.
    pub fn cancel_run(&self) {
        let mut state = lock(&self.inner.state);
        if let Some(live) = &state.live {
            live.cancel.cancel();
            state.stop.get_or_insert(Stop::Cancel);
        }
    }
}

/// What an agent is good at, for a leader: the first line of its instructions.
fn describe_spec(spec: &AgentSpec) -> String {
    let line = spec.instructions.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None if line.is_empty() => format!("the agent `{}`", spec.name),
        None => line.to_owned(),
    }
}

/// `usage` minus `counted`, field by field (what the live events did not report).
fn remainder(usage: Usage, counted: Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens.saturating_sub(counted.input_tokens),
        output_tokens: usage.output_tokens.saturating_sub(counted.output_tokens),
        cache_read_tokens: usage.cache_read_tokens.saturating_sub(counted.cache_read_tokens),
        cache_write_tokens: usage.cache_write_tokens.saturating_sub(counted.cache_write_tokens),
        cache_write_long_tokens: usage.cache_write_long_tokens.saturating_sub(counted.cache_write_long_tokens),
        reasoning_tokens: usage.reasoning_tokens.saturating_sub(counted.reasoning_tokens),
    }
}

/// Pends until `deadline` (forever without one).
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Follows one run: counts its spending live (so a team budget stops the team mid-run),
/// forwards its events, stops it with the team, and records how it ended.
async fn monitor(handle: AgentHandle, run: RunHandle, task: MemberTask, events: Option<EventSink>) {
    let inner = &handle.inner;
    let RunHandle { run_id, events: mut stream, cancel, result, signals: _signals } = run;
    let mut counted = Spend::default();
    let team_cancel = inner.team.cancel.clone();
    let deadline = inner.team.deadline();
    loop {
        tokio::select! {
            event = stream.next_event() => {
                let Some(event) = event else { break };
                if let AgentEventKind::Usage { usage, cost_usd, .. } = &event.kind {
                    let cost = cost_usd.unwrap_or(0.0);
                    counted.usage += *usage;
                    counted.cost_usd += cost;
                    inner.ledger.add(*usage, cost);
                    inner.team.add(*usage, cost);
                }
                if let Some(sink) = &events {
                    // A closed sink means nobody watches: the run goes on.
                    let _ = sink.send(event).await;
                }
            }
            () = team_cancel.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
            () = until(deadline), if !cancel.is_cancelled() => {
                inner.team.exceed(Budget::Time);
                cancel.cancel();
            }
        }
    }
    let output = result.await;
    let name = inner.name.clone();
    let mut state = lock(&inner.state);
    let stop = state.stop.take();
    state.live = None;
    let (status, last) = match output {
        Err(error) => (AgentStatus::Failed, MemberResult::failed(name, task.task_id, error.to_string())),
        Ok(output) => {
            let extra = remainder(output.usage, counted.usage);
            let extra_cost = (output.cost_usd - counted.cost_usd).max(0.0);
            if !extra.is_empty() || extra_cost > 1e-12 {
                inner.ledger.add(extra, extra_cost);
                inner.team.add(extra, extra_cost);
            }
            let (status, error) = match (&output.outcome, stop) {
                (RunOutcome::Completed { .. }, _) => (AgentStatus::Completed, None),
                (RunOutcome::Paused { .. }, _) => {
                    state.snapshot = Some(output.state.clone());
                    (AgentStatus::Suspended, Some(describe(&output.outcome)))
                }
                (RunOutcome::Cancelled { .. }, Some(Stop::Suspend)) => {
                    state.snapshot = Some(output.state.clone());
                    (AgentStatus::Suspended, Some("suspended".to_owned()))
                }
                (outcome, _) => {
                    let error = match inner.team.exceeded() {
                        Some(budget) if matches!(outcome, RunOutcome::Cancelled { .. }) => {
                            format!("stopped: the team's {budget} budget ran out")
                        }
                        _ => describe(outcome),
                    };
                    (AgentStatus::Failed, Some(error))
                }
            };
            let result = MemberResult {
                name,
                task_id: task.task_id,
                content: output.text,
                success: status == AgentStatus::Completed,
                error,
                usage: output.usage,
                cost_usd: output.cost_usd,
                run_id: Some(run_id),
                report: None,
            };
            (status, result)
        }
    };
    if state.status != AgentStatus::Terminated {
        state.status = status;
    }
    state.last = Some(last);
    drop(state);
    handle.changed();
}

impl Member for AgentHandle {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let task_id = task.task_id.clone();
            if let Err(error) = self.start_with_events(task, events) {
                return MemberResult::failed(self.inner.name.clone(), task_id, error.to_string());
            }
            tokio::select! {
                _ = self.wait() => {}
                () = cancel.cancelled() => {
                    self.cancel_run();
                    self.wait().await;
                }
            }
            self.result().unwrap_or_else(|| MemberResult::failed(self.inner.name.clone(), task_id, "no result"))
        })
    }
}
