//! [`DelegateTool`]: delegation as a tool the leader's model calls when it decides to.

use crate::error::TeamError;
use crate::firewall::ContextFirewall;
use crate::member::{Member, MemberResult, MemberTask};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use troupe_tools::{
    ApprovalRequirement, Effect, EvidenceCapture, Idempotency, Tool, ToolContext, ToolDeclaration, ToolError,
    ToolOutput, decode_arguments, schema_for,
};

/// The catalog name of the [`DelegateTool`].
pub const DELEGATE_TOOL: &str = "delegate";

/// The arguments of `delegate`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateArgs {
    /// The name of the teammate to hand the task to.
    pub to: String,
    /// The task for the teammate, self-contained: what to do, what done looks like and the
    /// context it needs. The teammate sees nothing else of this conversation.
    pub brief: String,
}

/// A `delegate(to, brief)` tool for a leader agent: one call runs the teammate `to` with
/// `brief` as its task and returns the teammate's answer.
///
/// A teammate whose report is typed ([`report`](crate::report)) answers with a JSON
/// document: the call's text is that document, and its structured result carries it as
/// `report`, next to the teammate's name, run, usage and cost.
///
/// The tool's schema lists the teammates' names as the only valid values of `to`, and its
/// description says what each teammate is good at, so the leader's model chooses itself
/// when and to whom to delegate. A teammate is any [`Member`]: a local agent, a worker
/// process, a remote agent.
///
/// The teammate runs on its own task (plain `tokio::spawn`), stopped when the leader's run
/// is cancelled, when the call's [`timeout`](DelegateTool::timeout) passes, or when the
/// call is dropped. A teammate that does not complete its task is an error result the
/// leader reads (with the partial answer, where there is one), never a failure of the
/// leader's run. Every teammate's result, with its usage and cost, is kept for the caller
/// ([`results`](DelegateTool::results)): the leader's own run does not count them. A call
/// dropped on cancellation returns at once, while its teammate is still stopping; its
/// result is kept once the teammate has stopped, which
/// [`delegations`](DelegateTool::delegations) lets the caller wait for.
///
/// ```
/// use std::sync::Arc;
/// use troupe_runtime::Engine;
/// use troupe_team::{AgentMember, DelegateTool, Member};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder().build();
/// let researcher: Arc<dyn Member> = AgentMember::new(engine.agent("researcher").build()?, "Finds facts.").shared();
/// let delegate = Arc::new(DelegateTool::new("lead", [researcher])?);
/// let lead = engine.agent("lead").tool(delegate.clone()).build()?;
/// # let _ = lead;
/// # Ok(())
/// # }
/// ```
pub struct DelegateTool {
    declaration: ToolDeclaration,
    caller: String,
    teammates: Vec<Arc<dyn Member>>,
    results: Arc<Mutex<Vec<MemberResult>>>,
    firewall: Option<Arc<ContextFirewall>>,
    running: Delegations,
}

/// The teammates' tasks a [`DelegateTool`] started that have not ended yet.
///
/// A leader's run that is cancelled (or a call that times out) drops its `delegate` call
/// without waiting: the teammate is told to stop and stops on its own task. Whoever ends
/// the team waits for [`settled`](Delegations::settled) first, so that no teammate's run
/// outlives its team and every teammate's result (its spending with it) is counted.
#[derive(Clone, Debug)]
pub struct Delegations {
    running: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Default for Delegations {
    fn default() -> Self {
        Delegations { running: Arc::new(tokio::sync::watch::Sender::new(0)) }
    }
}

impl Delegations {
    /// How many teammates' tasks are still running.
    pub fn running(&self) -> usize {
        *self.running.borrow()
    }

    /// Waits until every teammate's task started so far has ended, its result kept.
    pub async fn settled(&self) {
        let mut running = self.running.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Counts a teammate's task from now until the returned guard is dropped (its task
    /// ended, panicked or was aborted).
    fn start(&self) -> Running {
        self.running.send_modify(|n| *n += 1);
        Running { running: Arc::clone(&self.running) }
    }
}

/// One teammate's task, counted while it runs.
struct Running {
    running: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl DelegateTool {
    /// A `delegate` tool for the agent `caller` (named as the tasks' giver) over
    /// `teammates`. Fails when there are no teammates, or two share a name.
    pub fn new(
        caller: impl Into<String>,
        teammates: impl IntoIterator<Item = Arc<dyn Member>>,
    ) -> Result<Self, TeamError> {
        let caller = caller.into();
        let teammates: Vec<Arc<dyn Member>> = teammates.into_iter().collect();
        if teammates.is_empty() {
            return Err(TeamError::Invalid(format!("`{caller}` has no teammate to delegate to")));
        }
        let mut seen = BTreeSet::new();
        for teammate in &teammates {
            if teammate.name().is_empty() || !seen.insert(teammate.name()) {
                return Err(TeamError::Invalid(format!(
                    "teammates of `{caller}` need unique, non-empty names (`{}` is not)",
                    teammate.name()
                )));
            }
        }
        let mut description = String::from(
            "Hands a task to a teammate and returns the teammate's answer. The teammate sees only your brief, \
             not this conversation: make it self-contained. Teammates:",
        );
        for teammate in &teammates {
            description.push_str(&format!("\n- `{}`: {}", teammate.name(), teammate.description()));
        }
        let mut schema = schema_for::<DelegateArgs>();
        let names: Vec<Value> = teammates.iter().map(|t| Value::String(t.name().to_owned())).collect();
        if let Some(to) = schema.pointer_mut("/properties/to").and_then(Value::as_object_mut) {
            to.insert("enum".to_owned(), Value::Array(names));
        }
        // The call itself neither reads nor writes the leader's workspace, but it starts a
        // teammate's run, which may do anything its own tools allow: that reaches outside
        // the leader's run, so it is an external side effect (which also keeps several
        // delegations of one turn in order rather than concurrent). Approval is not asked
        // for the delegation itself, because each teammate's own side effects pass its own
        // approval policy; asking twice would only train people to click through. Running
        // a teammate twice may apply its effects twice: non-idempotent, so an interrupted
        // delegation is put to a person on resume rather than retried blindly — unless
        // every teammate is resumable: then the call's id names the teammate's run, and
        // calling again finds that run (its answer, or where it stopped) instead.
        let mut declaration = ToolDeclaration::new(DELEGATE_TOOL, description, schema, Effect::ExternalSideEffect);
        declaration.approval = ApprovalRequirement::NotRequired;
        declaration.idempotency = match teammates.iter().all(|t| t.resumable()) {
            true => Idempotency::Idempotent,
            false => Idempotency::NonIdempotent,
        };
        declaration.evidence = EvidenceCapture::Summary;
        Ok(DelegateTool {
            declaration,
            caller,
            teammates,
            results: Arc::new(Mutex::new(Vec::new())),
            firewall: None,
            running: Delegations::default(),
        })
    }

    /// Passes every teammate's answer to the caller through `firewall`
    /// ([`ContextFirewall::filter_result`]): its channels, the fields of typed reports each
    /// carries, its sanitisers, the redaction of secrets. A withheld answer is an error
    /// result the leader reads, naming the reason. (A team assembled from a file passes its
    /// members' answers through its firewall already.)
    pub fn firewall(mut self, firewall: Arc<ContextFirewall>) -> Self {
        self.firewall = Some(firewall);
        self
    }

    /// Stops a teammate that has not answered within `timeout` (the call then fails with
    /// a timeout the leader reads).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.declaration.timeout = Some(timeout);
        self
    }

    /// The teammates, in the order given.
    pub fn teammates(&self) -> &[Arc<dyn Member>] {
        &self.teammates
    }

    /// The result of every delegation that finished so far, in the order they finished.
    pub fn results(&self) -> Vec<MemberResult> {
        lock(&self.results).clone()
    }

    /// The teammates' tasks this tool started that have not ended yet: a handle to wait
    /// on after the leader's run ended, kept apart from the tool (which its catalog holds).
    pub fn delegations(&self) -> Delegations {
        self.running.clone()
    }

    /// This tool behind an [`Arc`], as a catalog holds tools.
    pub fn into_arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }

    fn teammate(&self, name: &str) -> Result<&Arc<dyn Member>, ToolError> {
        self.teammates.iter().find(|t| t.name() == name).ok_or_else(|| {
            let names: Vec<&str> = self.teammates.iter().map(|t| t.name()).collect();
            ToolError::invalid_arguments(format!(
                "no teammate is named `{name}`; `to` must be one of: {}",
                names.join(", ")
            ))
        })
    }

    async fn delegate(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: DelegateArgs = decode_arguments(&self.declaration.input_schema, args)?;
        let teammate = Arc::clone(self.teammate(&args.to)?);
        let brief = args.brief.trim();
        if brief.is_empty() {
            return Err(ToolError::invalid_arguments("`brief` is empty; say what the teammate must do"));
        }
        let caller = ctx.agent.as_deref().unwrap_or(&self.caller);
        // The model's call id is recorded with the call: a delegation retried on resume
        // gives the same task, which a resumable teammate finds again.
        let mut task = MemberTask::new(format!("{caller}/delegate/{}", ctx.call_id), caller, brief);
        // The teammate's run hangs under the delegating run.
        task.parent_run_id.clone_from(&ctx.run_id);
        // The catalog drops this future on timeout or cancellation; the guard turns that
        // drop into a cancellation the teammate's own task sees, so its run stops too.
        let stop = ctx.cancel.child_token();
        let _stop_on_drop = stop.clone().drop_guard();
        let task_id = task.task_id.clone();
        // The teammate's result is filtered and kept on its own task: a call dropped on
        // cancellation still keeps what its teammate came to, once it has stopped.
        let (results, firewall, running) = (Arc::clone(&self.results), self.firewall.clone(), self.running.start());
        let (to, caller) = (args.to.clone(), caller.to_owned());
        let run = tokio::spawn(async move {
            let _running = running;
            let mut result = teammate.run(task, None, stop).await;
            let passed = firewall.as_ref().map(|firewall| firewall.filter_result(&mut result, &caller));
            lock(&results).push(result.clone());
            (result, passed)
        });
        let (result, passed) = match run.await {
            Ok(ran) => ran,
            Err(error) => {
                let result = MemberResult::failed(&to, task_id, format!("the teammate's task crashed: {error}"));
                lock(&self.results).push(result.clone());
                (result, None)
            }
        };
        if let Some(Err(drop)) = passed {
            return Err(ToolError::failed(format!(
                "the answer of teammate `{}` was withheld: {}",
                args.to, drop.reason
            )));
        }
        if result.success {
            let mut structured = json!({
                "member": result.name,
                "task_id": result.task_id,
                "run_id": result.run_id,
                "usage": result.usage,
                "cost_usd": result.cost_usd,
            });
            // A typed report is returned as data: the leader's model reads its JSON, and
            // whoever reads the call's result gets the document itself.
            if let Some(report) = result.report {
                structured["report"] = report;
            }
            return Ok(ToolOutput::text(result.content).with_structured(structured));
        }
        let error = result.error.as_deref().unwrap_or("it did not complete the task");
        let mut message = format!("teammate `{}` did not complete the task: {error}", args.to);
        if !result.content.trim().is_empty() {
            message.push_str(&format!(". Its partial answer:\n{}", result.content));
        }
        Err(ToolError::failed(message))
    }
}

impl Tool for DelegateTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(&'a self, ctx: &'a ToolContext, args: Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.delegate(ctx, args))
    }

    /// A delegation to a resumable teammate may be made again: the call's id names the
    /// teammate's run, which is found rather than started twice.
    fn idempotency(&self, args: &Value) -> Idempotency {
        let to = args.get("to").and_then(Value::as_str);
        match to.and_then(|to| self.teammates.iter().find(|t| t.name() == to)) {
            Some(teammate) if teammate.resumable() => Idempotency::Idempotent,
            _ => Idempotency::NonIdempotent,
        }
    }
}

impl fmt::Debug for DelegateTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.teammates.iter().map(|t| t.name()).collect();
        f.debug_struct("DelegateTool").field("caller", &self.caller).field("teammates", &names).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The results are plain data: a panic elsewhere leaves them usable.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio_util::sync::CancellationToken;
    use troupe_tools::{ToolCatalog, Workspace};

    /// Answers with its task, or waits for cancellation when the task says `wait`.
    struct Echo {
        name: &'static str,
        stopped: Arc<tokio::sync::Notify>,
    }

    impl Member for Echo {
        fn name(&self) -> &str {
            self.name
        }

        fn description(&self) -> &str {
            "echoes"
        }

        fn run(
            &self,
            task: MemberTask,
            _events: Option<crate::EventSink>,
            cancel: CancellationToken,
        ) -> BoxFuture<'_, MemberResult> {
            async move {
                if task.prompt == "wait" || task.prompt == "linger" {
                    cancel.cancelled().await;
                    if task.prompt == "linger" {
                        // A run that stops at its next boundary, after a checkpoint.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    self.stopped.notify_one();
                    return MemberResult::failed(self.name, task.task_id, "cancelled");
                }
                if task.prompt == "fail" {
                    return MemberResult {
                        content: "half".into(),
                        ..MemberResult::failed(self.name, task.task_id, "boom")
                    };
                }
                MemberResult {
                    name: self.name.into(),
                    content: format!("{} from {}", task.prompt, task.from),
                    success: true,
                    task_id: task.task_id,
                    ..MemberResult::default()
                }
            }
            .boxed()
        }
    }

    fn echo(name: &'static str) -> (Arc<dyn Member>, Arc<tokio::sync::Notify>) {
        let stopped = Arc::new(tokio::sync::Notify::new());
        (Arc::new(Echo { name, stopped: Arc::clone(&stopped) }), stopped)
    }

    fn catalog(tool: DelegateTool) -> (ToolCatalog, ToolContext, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
        (ToolCatalog::with_tools([tool.into_arc()]).expect("catalog"), ctx, dir)
    }

    #[test]
    fn the_declaration_lists_the_teammates() {
        let tool = DelegateTool::new("lead", [echo("a").0, echo("b").0]).expect("tool");
        let decl = tool.declaration();
        assert_eq!(decl.input_schema["properties"]["to"]["enum"], json!(["a", "b"]));
        assert_eq!(decl.input_schema["required"], json!(["to", "brief"]));
        assert!(decl.description.contains("- `a`: echoes"), "{}", decl.description);
        assert!(!decl.requires_approval());
        assert_eq!((decl.effect, decl.idempotency), (Effect::ExternalSideEffect, Idempotency::NonIdempotent));
    }

    #[test]
    fn no_teammates_or_duplicate_names_are_refused() {
        assert!(matches!(DelegateTool::new("lead", []), Err(TeamError::Invalid(_))));
        assert!(matches!(DelegateTool::new("lead", [echo("a").0, echo("a").0]), Err(TeamError::Invalid(_))));
    }

    #[tokio::test]
    async fn a_call_runs_the_teammate_and_returns_its_answer() {
        let (catalog, ctx, _dir) = catalog(DelegateTool::new("lead", [echo("a").0, echo("b").0]).expect("tool"));
        let ok = catalog.invoke(DELEGATE_TOOL, json!({"to": "b", "brief": "sum it"}), &ctx).await;
        assert!(!ok.is_error, "{}", ok.content);
        assert_eq!(ok.content, "sum it from lead");
        let unknown = catalog.invoke(DELEGATE_TOOL, json!({"to": "zed", "brief": "x"}), &ctx).await;
        assert!(unknown.is_error && unknown.content.contains("one of: a, b"), "{}", unknown.content);
        let failed = catalog.invoke(DELEGATE_TOOL, json!({"to": "a", "brief": "fail"}), &ctx).await;
        assert!(
            failed.is_error && failed.content.contains("boom") && failed.content.contains("half"),
            "{}",
            failed.content
        );
        let empty = catalog.invoke(DELEGATE_TOOL, json!({"to": "a", "brief": " "}), &ctx).await;
        assert!(empty.is_error, "{}", empty.content);
    }

    #[tokio::test]
    async fn a_timeout_stops_the_teammate() {
        let (member, stopped) = echo("slow");
        let tool = Arc::new(DelegateTool::new("lead", [member]).expect("tool").timeout(Duration::from_millis(20)));
        let catalog = ToolCatalog::with_tools([tool.clone() as Arc<dyn Tool>]).expect("catalog");
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
        let outcome = catalog.invoke(DELEGATE_TOOL, json!({"to": "slow", "brief": "wait"}), &ctx).await;
        assert!(matches!(outcome.error, Some(ToolError::Timeout { .. })), "{outcome:?}");
        tokio::time::timeout(Duration::from_secs(5), stopped.notified()).await.expect("the teammate saw the stop");
    }

    #[tokio::test]
    async fn cancelling_the_leader_stops_the_teammate() {
        let (member, stopped) = echo("slow");
        let (catalog, ctx, _dir) = catalog(DelegateTool::new("lead", [member]).expect("tool"));
        let cancel = ctx.cancel.clone();
        let call = catalog.invoke(DELEGATE_TOOL, json!({"to": "slow", "brief": "wait"}), &ctx);
        let (outcome, ()) = tokio::join!(call, async {
            tokio::task::yield_now().await;
            cancel.cancel();
        });
        assert!(matches!(outcome.error, Some(ToolError::Cancelled)), "{outcome:?}");
        tokio::time::timeout(Duration::from_secs(5), stopped.notified()).await.expect("the teammate saw the stop");
    }

    #[tokio::test]
    async fn a_cancelled_call_keeps_its_teammates_result_once_it_stopped() {
        let (member, _stopped) = echo("slow");
        let tool = Arc::new(DelegateTool::new("lead", [member]).expect("tool"));
        let delegations = tool.delegations();
        let catalog = ToolCatalog::with_tools([tool.clone() as Arc<dyn Tool>]).expect("catalog");
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
        let cancel = ctx.cancel.clone();
        let call = catalog.invoke(DELEGATE_TOOL, json!({"to": "slow", "brief": "linger"}), &ctx);
        let (outcome, ()) = tokio::join!(call, async {
            tokio::task::yield_now().await;
            cancel.cancel();
        });
        assert!(matches!(outcome.error, Some(ToolError::Cancelled)), "{outcome:?}");
        // The call returned at once; the teammate is still stopping.
        assert_eq!((delegations.running(), tool.results().len()), (1, 0));
        tokio::time::timeout(Duration::from_secs(5), delegations.settled()).await.expect("the teammate stopped");
        assert_eq!(delegations.running(), 0);
        let results = tool.results();
        assert_eq!(results.len(), 1, "{results:?}");
        assert_eq!((results[0].name.as_str(), results[0].error.as_deref()), ("slow", Some("cancelled")));
        // Nothing running: settled at once.
        tokio::time::timeout(Duration::from_millis(50), delegations.settled()).await.expect("nothing to wait for");
    }
}
