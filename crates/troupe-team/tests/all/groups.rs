//! Groups through the mock LLM server over real loopback HTTP: pipeline, parallel and
//! orchestrated strategies, failure policies, cancellation, shared context and briefs.
//!
//! Every member has a mock server of its own, so what each member was asked can be read
//! from its own requests whatever order the members ran in.

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Barrier, mpsc};
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, ModelRequest, RunId};
use troupe_model::{EventStream, LlmProvider};
use troupe_runtime::RuntimeError;
use troupe_team::{
    AgentGroup, AgentMember, FailurePolicy, JsonDelegationParser, SharedContext, Strategy, SubagentBrief, TeamError,
};
use troupe_testkit::{Fault, MockTurn};

use crate::common;
use common::{Mock, Watched, Wire, offered_tools};

per_wire!(
    pipeline_passes_each_answer_to_the_next,
    a_failed_pipeline_step_is_noted_for_the_next,
    parallel_members_run_at_once,
    a_concurrency_of_one_never_overlaps,
    a_failing_member_is_a_failed_entry_of_a_succeeding_group,
    fail_fast_fails_the_group,
    orchestrated_leader_delegates_then_synthesises,
    a_bad_delegation_is_shown_to_the_leader_and_corrected,
    a_delegation_that_stays_bad_fails_the_group,
    a_parser_naming_a_worker_the_team_lacks_fails_the_group,
    cancelling_the_group_stops_its_members,
    dropping_the_group_stops_its_members,
    shared_context_reaches_every_member,
    a_brief_becomes_the_instructions_and_restricts_the_tools,
    a_group_is_a_member_of_another_group,
);

/// A provider in front of another that records how many streams are open at once and,
/// with a barrier, holds every stream until `n` have started.
#[derive(Clone)]
struct Gauge {
    in_flight: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    barrier: Option<Arc<Barrier>>,
}

impl Gauge {
    fn new(barrier: Option<usize>) -> Self {
        Gauge { in_flight: Arc::default(), max: Arc::default(), barrier: barrier.map(|n| Arc::new(Barrier::new(n))) }
    }

    fn wrap(&self, inner: &Arc<dyn LlmProvider>) -> Arc<dyn LlmProvider> {
        Arc::new(Gauged { inner: Arc::clone(inner), gauge: self.clone() })
    }

    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

struct Gauged {
    inner: Arc<dyn LlmProvider>,
    gauge: Gauge,
}

/// Counts one open stream until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LlmProvider for Gauged {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, troupe_model::Result<EventStream>> {
        async move {
            let now = self.gauge.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            let open = Open(Arc::clone(&self.gauge.in_flight));
            self.gauge.max.fetch_max(now, Ordering::SeqCst);
            if let Some(barrier) = &self.gauge.barrier {
                // Sequential members would never all arrive: the wait is bounded so the
                // test fails on the count instead of hanging.
                let _ = tokio::time::timeout(Duration::from_secs(10), barrier.wait()).await;
            }
            let stream = self.inner.stream(request, cancel).await?;
            Ok(stream
                .map(move |event| {
                    let _ = &open;
                    event
                })
                .boxed())
        }
        .boxed()
    }
}

const TASK: &str = "Write a release note for version 2.";

async fn pipeline_passes_each_answer_to_the_next(wire: Wire) {
    let drafter = Mock::with(wire, [MockTurn::text("DRAFT: faster startup")]).await;
    let editor = Mock::with(wire, [MockTurn::text("FINAL: Version 2 starts faster.")]).await;
    let group = AgentGroup::builder("release")
        .pipeline()
        .member(drafter.member("drafter", "Drafts."))
        .member(editor.member("editor", "Edits."))
        .build()
        .expect("group builds");

    let out = group.run(TASK).await.expect("the pipeline runs");

    assert_eq!(out.output, "FINAL: Version 2 starts faster.");
    let editor_request = editor.body(0);
    assert!(editor_request.contains("DRAFT: faster startup"), "{editor_request}");
    assert!(editor_request.contains(TASK) && editor_request.contains("`drafter`"), "{editor_request}");
    assert!(!drafter.body(0).contains("previous step"), "the first step has no previous output");
    let names: Vec<&str> = out.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["drafter", "editor"]);
    assert!(out.all_succeeded());
    assert_eq!((out.usage.input_tokens, out.usage.output_tokens), (20, 10), "usage sums every member");
}

async fn a_failed_pipeline_step_is_noted_for_the_next(wire: Wire) {
    let drafter = Mock::with(wire, [MockTurn::status(400, "malformed request")]).await;
    let editor = Mock::with(wire, [MockTurn::text("edited from scratch")]).await;
    let group = AgentGroup::builder("release")
        .member(drafter.member("drafter", "Drafts."))
        .member(editor.member("editor", "Edits."))
        .build()
        .expect("group builds");

    let out = group.run(TASK).await.expect("Continue keeps the pipeline going");

    assert_eq!(out.output, "edited from scratch");
    assert!(!out.members[0].success && out.members[0].error.is_some(), "{:?}", out.members[0]);
    let editor_request = editor.body(0);
    assert!(editor_request.contains(TASK), "{editor_request}");
    assert!(editor_request.contains("The previous step (`drafter`) failed"), "{editor_request}");
}

async fn parallel_members_run_at_once(wire: Wire) {
    let gauge = Gauge::new(Some(3));
    let mut mocks = Vec::new();
    let mut members = Vec::new();
    for name in ["a", "b", "c"] {
        let mock = Mock::with(wire, [MockTurn::text(format!("answer of {name}"))]).await;
        let agent = Mock::engine_over(gauge.wrap(&mock.provider)).agent(name).build().expect("agent builds");
        members.push(AgentMember::new(agent, "answers").shared());
        mocks.push(mock);
    }
    let group =
        AgentGroup::builder("panel").strategy(Strategy::parallel(3)).members(members).build().expect("group builds");

    let out = group.run(TASK).await.expect("the group runs");

    assert_eq!(gauge.max(), 3, "all three model calls were open at once");
    let names: Vec<&str> = out.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"], "results in member order");
    assert!(out.all_succeeded());
    assert_eq!(out.output, "## a\n\nanswer of a\n\n## b\n\nanswer of b\n\n## c\n\nanswer of c");
    for mock in &mocks {
        assert!(mock.body(0).contains(TASK), "every member gets the same task");
    }
}

async fn a_concurrency_of_one_never_overlaps(wire: Wire) {
    let gauge = Gauge::new(None);
    let mut mocks = Vec::new();
    let mut members = Vec::new();
    for name in ["a", "b", "c"] {
        // Slow streams widen the window in which an overlap would be seen.
        let turn =
            MockTurn::text(format!("answer of {name}")).with_delta_chars(2).with_event_delay(Duration::from_millis(5));
        let mock = Mock::with(wire, [turn]).await;
        let agent = Mock::engine_over(gauge.wrap(&mock.provider)).agent(name).build().expect("agent builds");
        members.push(AgentMember::new(agent, "answers").shared());
        mocks.push(mock);
    }
    let group = AgentGroup::builder("queue").parallel(1).members(members).build().expect("group builds");

    let out = group.run(TASK).await.expect("the group runs");

    assert_eq!(gauge.max(), 1, "never two model calls at once");
    assert!(out.all_succeeded() && out.members.len() == 3);
    assert!(mocks.iter().all(|m| m.bodies().len() == 1));
}

async fn failing_panel(wire: Wire, policy: FailurePolicy) -> (Result<troupe_team::GroupOutput, TeamError>, Vec<Mock>) {
    let a = Mock::with(wire, [MockTurn::text("fine a")]).await;
    let b = Mock::with(wire, [MockTurn::status(400, "the request is malformed")]).await;
    let c = Mock::with(wire, [MockTurn::text("fine c")]).await;
    let group = AgentGroup::builder("panel")
        .parallel(3)
        .failure_policy(policy)
        .member(a.member("a", "answers"))
        .member(b.member("b", "answers"))
        .member(c.member("c", "answers"))
        .build()
        .expect("group builds");
    (group.run(TASK).await, vec![a, b, c])
}

async fn a_failing_member_is_a_failed_entry_of_a_succeeding_group(wire: Wire) {
    let (out, _mocks) = failing_panel(wire, FailurePolicy::Continue).await;
    let out = out.expect("a member's failure does not fail the group");

    let status: Vec<(&str, bool)> = out.members.iter().map(|m| (m.name.as_str(), m.success)).collect();
    assert_eq!(status, [("a", true), ("b", false), ("c", true)]);
    let error = out.members[1].error.as_deref().expect("the failure says why");
    assert!(!error.is_empty());
    assert!(out.output.contains("## b (failed)") && out.output.contains("fine c"), "{}", out.output);
    assert_eq!(out.failures().count(), 1);
}

async fn fail_fast_fails_the_group(wire: Wire) {
    let (out, _mocks) = failing_panel(wire, FailurePolicy::FailFast).await;
    match out {
        Err(TeamError::MemberFailed { member, .. }) => assert_eq!(member, "b"),
        other => panic!("FailFast fails the group: {other:?}"),
    }
}

fn delegation_answer() -> MockTurn {
    MockTurn::text(
        "I'll split this in two.\n```json\n[\n  {\"worker\": 0, \"task\": \"List the changes {performance}\"},\n  \
         {\"worker\": \"writer\", \"task\": \"Draft the upgrade notes\"}\n]\n```\nBoth can run at once.",
    )
}

async fn orchestrated_leader_delegates_then_synthesises(wire: Wire) {
    let lead =
        Mock::with(wire, [delegation_answer(), MockTurn::text("SYNTHESIS: two changes, one upgrade step")]).await;
    let researcher = Mock::with(wire, [MockTurn::text("RESEARCH: startup is 2x faster")]).await;
    let writer = Mock::with(wire, [MockTurn::text("NOTES: run the migration")]).await;
    let leader = lead.member("lead", "Leads.");
    let group = AgentGroup::builder("release")
        .orchestrated(leader)
        .member(researcher.member("researcher", "Finds what changed."))
        .member(writer.member("writer", "Writes upgrade notes."))
        .build()
        .expect("group builds");
    let (tx, mut rx) = mpsc::channel::<AgentEvent>(1024);

    let out = group.run_with(TASK, Some(tx), CancellationToken::new()).await.expect("the group runs");

    let first = lead.body(0);
    assert!(first.contains(TASK) && first.contains("0: `researcher`: Finds what changed."), "{first}");
    assert!(first.contains("0..=1 (0 = researcher, 1 = writer)"), "the leader is told the JSON shape: {first}");
    assert!(researcher.body(0).contains("List the changes {performance}"), "{}", researcher.body(0));
    assert!(writer.body(0).contains("Draft the upgrade notes"), "{}", writer.body(0));
    assert!(!writer.body(0).contains("I'll split this"), "a worker sees only its task");
    let synthesis = lead.body(1);
    assert!(synthesis.contains("RESEARCH: startup is 2x faster"), "{synthesis}");
    assert!(synthesis.contains("NOTES: run the migration"), "{synthesis}");
    assert_eq!(out.output, "SYNTHESIS: two changes, one upgrade step");

    let calls: Vec<(&str, &str)> = out.members.iter().map(|m| (m.name.as_str(), m.task_id.as_str())).collect();
    assert_eq!(
        calls,
        [
            ("lead", "release/delegation/0"),
            ("researcher", "release/worker/0"),
            ("writer", "release/worker/1"),
            ("lead", "release/synthesis"),
        ]
    );
    assert_eq!(out.usage.input_tokens, 40, "four model calls of 10 input tokens");

    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    let leader_run: &RunId = out.members[0].run_id.as_ref().expect("the leader ran");
    for worker in ["researcher", "writer"] {
        let theirs: Vec<&AgentEvent> = events.iter().filter(|e| e.attribution.agent_id.as_str() == worker).collect();
        assert!(!theirs.is_empty(), "{worker}'s events reach the sink");
        assert!(
            theirs.iter().all(|e| e.attribution.parent_run_id.as_ref() == Some(leader_run)),
            "{worker}'s run is a child of the leader's"
        );
    }
}

async fn a_bad_delegation_is_shown_to_the_leader_and_corrected(wire: Wire) {
    let lead = Mock::with(
        wire,
        [
            MockTurn::text("Plan: [{\"worker\": 7, \"task\": \"check the docs\"}]"),
            MockTurn::text("```json\n[{\"worker\": 1, \"task\": \"check the docs\"}]\n```"),
            MockTurn::text("done: docs checked"),
        ],
    )
    .await;
    let a = Mock::start(wire).await;
    let b = Mock::with(wire, [MockTurn::text("the docs are fine")]).await;
    let group = AgentGroup::builder("team")
        .orchestrated(lead.member("lead", "Leads."))
        .member(a.member("a", "Does A."))
        .member(b.member("b", "Does B."))
        .build()
        .expect("group builds");

    let out = group.run(TASK).await.expect("the corrected delegation works");

    let retry = lead.body(1);
    assert!(retry.contains("worker 7 is out of range"), "{retry}");
    assert!(retry.contains("0..=1"), "the valid range is named: {retry}");
    assert!(retry.contains("Plan: [{"), "the leader sees its previous answer: {retry}");
    assert!(a.bodies().is_empty(), "nobody delegated to a");
    assert!(b.body(0).contains("check the docs"));
    assert!(lead.body(2).contains("the docs are fine"));
    assert_eq!(out.output, "done: docs checked");
    let tasks: Vec<&str> = out.members.iter().map(|m| m.task_id.as_str()).collect();
    assert_eq!(tasks, ["team/delegation/0", "team/delegation/1", "team/worker/0", "team/synthesis"]);
}

async fn a_delegation_that_stays_bad_fails_the_group(wire: Wire) {
    let lead = Mock::with(wire, [MockTurn::text("I would rather not."), MockTurn::text("Still no.")]).await;
    let a = Mock::start(wire).await;
    let strategy = Strategy::Orchestrated {
        leader: lead.member("lead", "Leads."),
        parser: Arc::new(JsonDelegationParser),
        max_retries: 1,
        max_concurrency: 2,
    };
    let group =
        AgentGroup::builder("team").strategy(strategy).member(a.member("a", "Does A.")).build().expect("group builds");

    match group.run(TASK).await {
        Err(TeamError::Delegation(message)) => assert!(message.contains("no delegation found"), "{message}"),
        other => panic!("the group fails on the delegation: {other:?}"),
    }
    assert_eq!(lead.bodies().len(), 2, "one retry, then the group gives up");
    assert!(a.bodies().is_empty());
}

/// A parser of one's own that breaks its promise (a worker index past the team's).
struct OutOfRange;

impl troupe_team::DelegationParser for OutOfRange {
    fn parse(&self, _: &str, _: &[&str]) -> Result<Vec<troupe_team::Delegation>, troupe_team::DelegationError> {
        Ok(vec![troupe_team::Delegation::new(7, "anything")])
    }
}

async fn a_parser_naming_a_worker_the_team_lacks_fails_the_group(wire: Wire) {
    let lead = Mock::with(wire, [MockTurn::text("Worker 7, please.")]).await;
    let a = Mock::start(wire).await;
    let strategy = Strategy::Orchestrated {
        leader: lead.member("lead", "Leads."),
        parser: Arc::new(OutOfRange),
        max_retries: 0,
        max_concurrency: 2,
    };
    let group =
        AgentGroup::builder("team").strategy(strategy).member(a.member("a", "Does A.")).build().expect("group builds");
    match group.run(TASK).await {
        Err(TeamError::Delegation(message)) => {
            assert_eq!(message, "the delegation names worker 7, and the team has 1");
        }
        other => panic!("the group fails on the delegation: {other:?}"),
    }
    assert!(a.bodies().is_empty(), "no member ran");
}

async fn cancelling_the_group_stops_its_members(wire: Wire) {
    let stall = MockTurn::text("never finished")
        .with_fault(Fault::Stall { after_events: 1, duration: Duration::from_secs(60) });
    let slow = Mock::with(wire, [stall]).await;
    let group = AgentGroup::builder("panel").parallel(2).member(slow.member("slow", "Slow.")).build().expect("group");
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let server = &slow.server;
    let cancel_once_asked = async move {
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    };

    let (out, ()) = tokio::time::timeout(
        Duration::from_secs(20),
        futures::future::join(group.run_with(TASK, None, cancel), cancel_once_asked),
    )
    .await
    .expect("cancellation ends the group long before the stall does");

    assert!(matches!(out, Err(TeamError::Cancelled)), "{out:?}");
}

async fn dropping_the_group_stops_its_members(wire: Wire) {
    let stall = MockTurn::text("never finished")
        .with_fault(Fault::Stall { after_events: 1, duration: Duration::from_secs(60) });
    let slow = Mock::with(wire, [stall]).await;
    let (done, mut finished) = mpsc::unbounded_channel();
    let member = Arc::new(Watched { inner: slow.member("slow", "Slow."), done });
    let group = AgentGroup::builder("line").member(member).build().expect("group builds");
    let server = &slow.server;
    let asked = async {
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };

    tokio::select! {
        out = group.run(TASK) => panic!("the stalled member cannot finish first: {out:?}"),
        () = asked => {}
    }

    let result = tokio::time::timeout(Duration::from_secs(10), finished.recv())
        .await
        .expect("the member stops long before its stall ends")
        .expect("a result");
    assert!(!result.success && result.error.as_deref().is_some_and(|e| e.contains("cancelled")), "{result:?}");
}

async fn shared_context_reaches_every_member(wire: Wire) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("AGENTS.md"), "RULE-7: never push to main.").expect("write");
    std::fs::create_dir(dir.path().join("crates")).expect("mkdir");
    let shared = SharedContext::from_workspace(dir.path()).expect("reads the workspace").convention("CONVENTION-X");
    let a = Mock::with(wire, [MockTurn::text("a done")]).await;
    let b = Mock::with(wire, [MockTurn::text("b done")]).await;
    let group = AgentGroup::builder("panel")
        .parallel(2)
        .shared_context(shared)
        .member(a.member("a", "A."))
        .member(b.member("b", "B."))
        .build()
        .expect("group builds");

    group.run(TASK).await.expect("the group runs");

    for mock in [&a, &b] {
        let body = mock.body(0);
        assert!(body.contains("RULE-7: never push to main."), "{body}");
        assert!(body.contains("crates/") && body.contains("CONVENTION-X"), "{body}");
    }
}

async fn a_brief_becomes_the_instructions_and_restricts_the_tools(wire: Wire) {
    let mock = Mock::with(wire, [MockTurn::text("reviewed")]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let brief = SubagentBrief::new("reviewer", "Review the parser for panics.")
        .acceptance("every finding names a line")
        .relevant_file("src/parser.rs")
        .allow_tool("fs.read")
        .allow_tool("grep")
        .output_format("a markdown list");
    let agent = brief.apply(mock.builder("reviewer").workspace(dir.path()).readonly_tools()).build().expect("builds");

    agent.run("Go.").await.expect("runs");

    let body = mock.body(0);
    assert!(body.contains("You are the reviewer.") && body.contains("every finding names a line"), "{body}");
    assert!(body.contains("`src/parser.rs`") && body.contains("Format: a markdown list"), "{body}");
    let mut tools = offered_tools(&body);
    tools.sort();
    assert_eq!(tools, ["fs_read", "grep"], "only the allowed tools are offered");

    let unknown = SubagentBrief::new("reviewer", "Review.").allow_tool("fs.read").allow_tool("web.search");
    match unknown.apply(mock.builder("reviewer").workspace(dir.path()).readonly_tools()).build() {
        Err(RuntimeError::Catalog { agent, source }) => {
            assert_eq!(agent, "reviewer");
            assert!(source.to_string().contains("web.search"), "{source}");
        }
        other => panic!("an allowed tool the agent lacks fails the build: {other:?}"),
    }
}

async fn a_group_is_a_member_of_another_group(wire: Wire) {
    let a = Mock::with(wire, [MockTurn::text("view of a")]).await;
    let b = Mock::with(wire, [MockTurn::text("view of b")]).await;
    let judge = Mock::with(wire, [MockTurn::text("verdict")]).await;
    let panel = AgentGroup::builder("panel")
        .description("Two views.")
        .parallel(2)
        .member(a.member("a", "A."))
        .member(b.member("b", "B."))
        .build()
        .expect("panel builds");
    let group = AgentGroup::builder("review")
        .member(Arc::new(panel))
        .member(judge.member("judge", "Decides."))
        .build()
        .expect("group builds");

    let out = group.run(TASK).await.expect("runs");

    assert_eq!(out.output, "verdict");
    let judged = judge.body(0);
    assert!(judged.contains("view of a") && judged.contains("view of b"), "{judged}");
    assert_eq!(out.members[0].name, "panel");
    assert_eq!(out.usage.input_tokens, 30, "the panel's usage rolls up");
}
