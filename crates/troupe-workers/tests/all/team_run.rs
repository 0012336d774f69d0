//! A team file run from code (`troupe_workers::team_run`), as an SDK user runs one: the
//! shipped example team on the offline demo model, its members in this process.

use std::path::{Path, PathBuf};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::AgentEventKind;
use troupe_workers::team_run::{TeamFiles, TeamRun};

/// The repository's example team (`examples/team`) with `edit` applied to its team file,
/// every member local, and its agents next to it.
fn example_team(edit: impl Fn(&str) -> String) -> TempDir {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = std::fs::read_to_string(example.join("team.toml")).expect("reads the example");
    let local = team.replace(r#"isolation = "process""#, r#"isolation = "local""#);
    assert_ne!(local, team, "the example has a process member to make local");
    std::fs::write(dir.path().join("team.toml"), edit(&local)).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("creates agents/");
    for entry in std::fs::read_dir(example.join("agents")).expect("lists the example's agents") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, dir.path().join("agents").join(path.file_name().expect("a name"))).expect("copies");
    }
    dir
}

/// A workspace with a README.
fn workspace() -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("README.md"), "# Gadget\n\nA gadget for tests.\n").expect("writes");
    dir
}

fn files(dir: &TempDir) -> TeamFiles {
    let agents: Vec<PathBuf> = vec![dir.path().to_owned()];
    TeamFiles::load(&dir.path().join("team.toml"), &agents).expect("the team and its agents load")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_file_runs_from_code_with_every_member_and_their_events() {
    let (dir, workspace) = (example_team(str::to_owned), workspace());
    let files = files(&dir);
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("the members build");
    let names: Vec<&str> = team.rows().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["lead", "researcher", "reviewer", "writer"]);
    let (events, mut received) = mpsc::channel::<troupe_core::AgentEvent>(1024);
    let watcher = tokio::spawn(async move {
        let mut finished = Vec::new();
        while let Some(event) = received.recv().await {
            if let AgentEventKind::RunFinished { .. } = event.kind {
                finished.push(event.attribution.agent_id.to_string());
            }
        }
        finished
    });
    let report = team.run("Describe this repository", Some(events), CancellationToken::new()).await;
    assert_eq!(report.failure(), None, "{report:?}");
    assert!(report.output.starts_with("The team worked on “Describe this repository”"), "{}", report.output);
    for teammate in ["researcher", "reviewer", "writer"] {
        let line = report.output.lines().find(|l| l.starts_with(&format!("- {teammate}: "))).unwrap_or_default();
        assert!(line.contains("“Gadget”"), "{teammate}'s finding reached the leader: {}", report.output);
    }
    assert_eq!(report.records.len(), 4, "three delegated calls and the leader's: {:?}", report.records);
    assert!(report.records.iter().all(|r| r.success), "{:?}", report.records);
    assert_eq!(report.firewall.passed, 3, "every report passed the firewall");
    let mut finished = watcher.await.expect("the watcher ends with the team");
    finished.sort();
    assert_eq!(finished, ["lead", "researcher", "reviewer", "writer"], "every member's events were passed on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_budget_counts_every_member_and_stops_the_team() {
    let dir = example_team(|team| team.replace("max_total_tokens = 200000", "max_total_tokens = 1"));
    let workspace = workspace();
    let files = files(&dir);
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("the members build");
    let report = team.run("Describe this repository", None, CancellationToken::new()).await;
    assert_eq!(report.exceeded.as_deref(), Some("tokens (max_total_tokens = 1)"), "{report:?}");
    assert!(report.tokens >= 1, "the spend was counted from the members' events");
    let failure = report.failure().expect("a team over its budget did not complete");
    assert!(failure.contains("its tokens (max_total_tokens = 1) budget ran out"), "{failure}");
}

#[test]
fn a_team_naming_an_agent_that_is_not_there_is_refused_with_where_it_looked() {
    let dir = example_team(|team| team.replace(r#"agent = "reviewer""#, r#"agent = "critic""#));
    let agents: Vec<PathBuf> = vec![dir.path().to_owned()];
    let error = TeamFiles::load(&dir.path().join("team.toml"), &agents).expect_err("an unknown agent is refused");
    let message = error.to_string();
    assert!(message.contains("critic") && message.contains(&dir.path().display().to_string()), "{message}");
    assert!(error.is_usage());
}

/// A served team: one service, many runs, each with members of its own, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_team_service_runs_the_team_many_times_at_once() {
    let (dir, workspace) = (example_team(str::to_owned), workspace());
    let files = files(&dir);
    let service = TeamRun::new(&files, workspace.path()).memory(None).service().await.expect("the service opens");
    assert_eq!(service.team().name(), files.team().name());
    let runs = ["Describe this repository", "List this repository's files"].map(|task| {
        let team = service.prepare().expect("the members build for each run");
        tokio::spawn(async move { (task, team.run(task, None, CancellationToken::new()).await) })
    });
    for run in runs {
        let (task, report) = run.await.expect("the run's task ends");
        assert_eq!(report.failure(), None, "{report:?}");
        assert!(report.output.contains(task), "each run answers its own task: {}", report.output);
        assert_eq!(report.records.len(), 4, "each run has members of its own: {:?}", report.records);
        assert_eq!(report.usage.total(), report.tokens, "usage and tokens agree");
    }
}

/// With a store, a team run is recorded as a run of its own, and its members' runs as
/// its children: the leader's run under the team's, each delegated member's run under
/// the leader's. A team's run is never taken for an agent's run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_run_with_a_store_is_recorded_as_a_tree_of_runs() {
    use troupe_runtime::Durability;
    use troupe_runtime::durable::state_from_value;
    use troupe_store::{RunFilter, RunStatus};
    let (dir, workspace) = (example_team(str::to_owned), workspace());
    let files = files(&dir);
    let store = troupe_store::open(&format!("sqlite://{}", workspace.path().join("runs.db").display()))
        .await
        .expect("the store opens");
    let team = TeamRun::new(&files, workspace.path())
        .store(Durability::new(store.clone()))
        .prepare()
        .await
        .expect("the members build");
    let report = team.run("Describe this repository", None, CancellationToken::new()).await;
    assert_eq!(report.failure(), None, "{report:?}");
    let root = report.run_id.clone().expect("the team's run is recorded").to_string();

    let record = store.load_run(&root).await.expect("load_run").expect("the team's run is stored");
    assert_eq!(
        (record.agent.as_str(), record.status, record.parent_run_id),
        (files.team().name(), RunStatus::Completed, None)
    );
    assert_eq!(record.state["output"], report.output.as_str(), "what the team answered is its run's state");
    assert_eq!(record.state["members"].as_array().map(Vec::len), Some(4));
    let refused = state_from_value(&root, record.state.clone()).expect_err("a team run is not an agent's run");
    assert!(refused.to_string().contains("is the run of team"), "{refused}");

    let runs = store.list_runs(&RunFilter::default()).await.expect("list_runs");
    let children = |parent: &str| -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = runs
            .iter()
            .filter(|r| r.parent_run_id.as_deref() == Some(parent))
            .map(|r| (r.agent.clone(), r.id.clone()))
            .collect();
        found.sort();
        found
    };
    let under_team = children(&root);
    assert_eq!(under_team.iter().map(|(agent, _)| agent.as_str()).collect::<Vec<_>>(), ["lead"], "{runs:?}");
    let under_lead: Vec<String> = children(&under_team[0].1).into_iter().map(|(agent, _)| agent).collect();
    assert_eq!(under_lead, ["researcher", "reviewer", "writer"], "{runs:?}");
    assert!(runs.iter().all(|r| r.status == RunStatus::Completed), "every run of the tree ended: {runs:?}");
    assert_eq!(runs.len(), 5, "the team's run and its four members' runs: {runs:?}");
    store.close().await.expect("the store closes");
}

/// `future`'s output, or a failed test when it takes longer than `seconds`: a team that
/// waits for a decision nobody gives would wait forever.
async fn within<T>(seconds: u64, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(seconds), future).await.expect("the team ended in time")
}

/// The example team (every member local) without its writer, whose reviewer may write:
/// the demo model then writes its summary, the one call that needs approval.
fn writing_team() -> TempDir {
    let dir = example_team(|team| {
        team.replace("[[team.members]]\nagent = \"writer\"\nisolation = \"local\"\n", "")
            .replace(r#", "writer -> lead""#, "")
    });
    let team = std::fs::read_to_string(dir.path().join("team.toml")).expect("reads");
    assert!(!team.contains(r#"agent = "writer""#) && !team.contains("writer -> lead"), "{team}");
    let reviewer = dir.path().join("agents/reviewer.toml");
    let text = std::fs::read_to_string(&reviewer).expect("reads the reviewer");
    let writing = text.replace(
        "[[tools.deny]]\nname = \"fs.write\"\nreason = \"reviewers comment, they do not edit\"\n",
        "[[tools]]\nname = \"fs.write\"\n",
    );
    assert_ne!(writing, text, "the reviewer's file denies fs.write");
    std::fs::write(&reviewer, writing).expect("writes the reviewer");
    dir
}

async fn sqlite(workspace: &TempDir) -> std::sync::Arc<dyn troupe_store::Store> {
    troupe_store::open(&format!("sqlite://{}", workspace.path().join("runs.db").display()))
        .await
        .expect("the store opens")
}

/// The writing team recorded in `store`, run with nobody to ask until it pauses: its
/// service (to resume it) and the paused run's report.
async fn paused_team(
    files: &TeamFiles,
    workspace: &TempDir,
    store: &std::sync::Arc<dyn troupe_store::Store>,
) -> (troupe_workers::team_run::TeamService, troupe_workers::team_run::TeamReport) {
    let service = TeamRun::new(files, workspace.path())
        .approvals(troupe_workers::build::Approvals::Approver)
        .store(troupe_runtime::Durability::new(store.clone()))
        .service()
        .await
        .expect("the service opens");
    let team = service.prepare().expect("the members build");
    team.control().defer_approvals();
    let report = within(120, team.run("Describe this repository", None, CancellationToken::new())).await;
    (service, report)
}

/// From code, with nobody to ask: the member's call pauses the team (its run recorded
/// paused, with the waiting call), a decision stored for the member's run is applied when
/// the same service resumes the team by id, and the team completes — the members that
/// had finished are not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_paused_for_a_person_resumes_by_id_once_decided() {
    use troupe_durable::send_signal;
    use troupe_runtime::{ApprovalDecision, Signal};
    use troupe_store::{RunFilter, RunStatus};
    let (dir, workspace) = (writing_team(), workspace());
    let files = files(&dir);
    let store = sqlite(&workspace).await;
    let (service, report) = paused_team(&files, &workspace, &store).await;
    let root = report.run_id.clone().expect("recorded").to_string();
    assert_eq!(report.paused.len(), 1, "{report:?}");
    let paused = &report.paused[0];
    assert_eq!((paused.member.as_str(), paused.pending.len()), ("reviewer", 1));
    assert_eq!(paused.pending[0].tool, "fs.write");
    assert!(report.failure().is_some_and(|f| f.contains("1 call of reviewer waits for a person")));
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "nothing was written before the decision");
    let record = store.load_run(&root).await.expect("load_run").expect("stored");
    assert_eq!(record.status, RunStatus::Paused);
    assert_eq!(record.state["paused"][0]["calls"][0]["tool"], "fs.write", "{}", record.state);
    let before = store.list_runs(&RunFilter::default()).await.expect("list_runs");

    let approve = Signal::approval(paused.pending[0].call_id.clone(), ApprovalDecision::Approve);
    send_signal(store.as_ref(), paused.run_id.as_str(), &approve).await.expect("the decision is stored");
    let resumed = service.resume(&root, false).await.expect("the team resumes");
    assert_eq!(resumed.resumed_task(), Some("Describe this repository"));
    let report = within(120, resumed.resume(None, CancellationToken::new())).await;
    assert_eq!(report.failure(), None, "{report:?}");
    assert_eq!(report.run_id.as_ref().map(ToString::to_string).as_deref(), Some(root.as_str()));
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write ran");
    let after = store.list_runs(&RunFilter::default()).await.expect("list_runs");
    let ids = |runs: &[troupe_store::RunSummary]| {
        let mut ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&after), ids(&before), "the same runs, none started again: {after:?}");
    assert!(after.iter().all(|r| r.status == RunStatus::Completed), "{after:?}");

    // A finished team run takes nothing more.
    let finished = service.resume(&root, false).await.err().expect("a finished run is refused");
    assert!(finished.to_string().contains("has finished (completed)"), "{finished}");
    store.close().await.expect("the store closes");
}

/// From code, with a person watching: the member's `RunPaused` event names its run, and
/// the decision sent through the team's control reaches it; the team never pauses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_call_is_decided_live_through_the_teams_control() {
    use troupe_runtime::ApprovalDecision;
    use troupe_workers::build::Approvals;
    let (dir, workspace) = (writing_team(), workspace());
    let files = files(&dir);
    let team = TeamRun::new(&files, workspace.path())
        .approvals(Approvals::Approver)
        .prepare()
        .await
        .expect("the members build");
    let control = team.control();
    let (events, mut received) = mpsc::channel::<troupe_core::AgentEvent>(1024);
    let person = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(event) = received.recv().await {
            if let AgentEventKind::RunPaused { reason: troupe_core::PauseReason::Approval { call_id, tool, .. } } =
                event.kind
            {
                asked.push((event.attribution.agent_id.to_string(), tool));
                let member = control.member_of(&event.attribution.run_id);
                assert_eq!(member.as_deref(), Some("reviewer"));
                control.decide(&event.attribution.run_id, call_id, ApprovalDecision::Approve).await.expect("decides");
            }
        }
        asked
    });
    let report = within(120, team.run("Describe this repository", Some(events), CancellationToken::new())).await;
    assert_eq!(report.failure(), None, "{report:?}");
    assert!(report.paused.is_empty());
    assert_eq!(person.await.expect("the person"), [("reviewer".to_owned(), "fs.write".to_owned())]);
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write ran");
}

/// Bad input to a resume: an unknown id, an agent's run, files changed since the start
/// (refused, naming the file, unless forced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_refuses_what_it_cannot_honestly_resume() {
    use troupe_runtime::Durability;
    use troupe_store::RunFilter;
    use troupe_workers::build::Approvals;
    use troupe_workers::team_record::TeamResumeError;
    let (dir, workspace) = (writing_team(), workspace());
    let files = files(&dir);
    let store = sqlite(&workspace).await;
    let (service, report) = paused_team(&files, &workspace, &store).await;
    let root = report.run_id.clone().expect("recorded").to_string();
    assert_eq!(report.paused.len(), 1, "{report:?}");

    let unknown = service.resume("run_nope", false).await.err().expect("an unknown run");
    assert!(matches!(unknown, TeamResumeError::UnknownRun(_)), "{unknown}");
    let runs = store.list_runs(&RunFilter::default()).await.expect("list_runs");
    let lead = runs.iter().find(|r| r.agent == "lead").expect("the leader's run");
    let agent = service.resume(&lead.id, false).await.err().expect("an agent's run");
    assert!(agent.to_string().contains("is a run of agent `lead`, not a team's run"), "{agent}");

    let lead_file = dir.path().join("agents/lead.toml");
    let text = std::fs::read_to_string(&lead_file).expect("reads the leader");
    std::fs::write(&lead_file, format!("{text}\n# edited\n")).expect("edits the leader");
    // The service was built from the files as they were; a new one reads them as they are.
    let files = self::files(&dir);
    let service = TeamRun::new(&files, workspace.path())
        .approvals(Approvals::Approver)
        .store(Durability::new(store.clone()))
        .service()
        .await
        .expect("the service opens");
    let changed = service.resume(&root, false).await.err().expect("changed files are refused");
    let message = changed.to_string();
    assert!(message.contains(&format!("{} changed", lead_file.display())), "{message}");
    assert!(message.contains("force"), "it says how to go on anyway: {message}");
    assert!(service.resume(&root, true).await.is_ok(), "forced, it resumes");
    store.close().await.expect("the store closes");
}

/// The repository's typed-reports team (`examples/team/reports.toml`), every member local.
fn reports_team() -> TempDir {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    let dir = example_team(str::to_owned);
    let team = std::fs::read_to_string(example.join("reports.toml")).expect("reads the example");
    let local = team.replace(r#"isolation = "process""#, r#"isolation = "local""#);
    assert_ne!(local, team, "the example has a process member to make local");
    std::fs::write(dir.path().join("team.toml"), local).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("schemas")).expect("creates schemas/");
    std::fs::copy(example.join("schemas/review.json"), dir.path().join("schemas/review.json")).expect("copies");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_reports_reach_the_leader_as_data_through_the_firewalls_fields() {
    use troupe_store::EvidenceKind;
    let (dir, workspace) = (reports_team(), workspace());
    let files = files(&dir);
    let store = sqlite(&workspace).await;
    let team = TeamRun::new(&files, workspace.path())
        .store(troupe_runtime::Durability::new(store.clone()))
        .prepare()
        .await
        .expect("the members build");
    let (events, mut received) = mpsc::channel::<troupe_core::AgentEvent>(1024);
    let watcher = tokio::spawn(async move {
        let (mut withheld, mut delegated) = (Vec::new(), Vec::new());
        while let Some(event) = received.recv().await {
            match event.kind {
                AgentEventKind::Custom { name, value } if name == troupe_team::firewall::FIREWALL_DROP_EVENT => {
                    withheld.push(value)
                }
                // The leader's only calls are its delegations.
                AgentEventKind::ToolCallResult { content, .. } if event.attribution.agent_id.as_str() == "lead" => {
                    delegated.push(content)
                }
                _ => {}
            }
        }
        (withheld, delegated)
    });
    let report = team.run("Describe this repository", Some(events), CancellationToken::new()).await;
    assert_eq!(report.failure(), None, "{report:?}");
    let (withheld, delegated) = watcher.await.expect("the watcher ends with the team");
    let root = report.run_id.clone().expect("the team's run is recorded").to_string();
    let evidence = store.evidence(&root, 0).await.expect("reads the team's evidence");
    let reports: Vec<&serde_json::Value> =
        evidence.iter().filter(|e| e.kind == EvidenceKind::ReportReceived).map(|e| e.payload.value()).collect();

    // The researcher's structured report passed without the field its channel does not carry.
    let researcher = reports.iter().find(|r| r["member"] == "researcher").expect("the researcher reported");
    let structured = researcher["structured"].as_object().expect("a typed report");
    let mut keys: Vec<&str> = structured.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["blockers", "decisions", "summary"], "{researcher}");
    assert!(structured["summary"].as_str().is_some_and(|s| s.contains("Gadget")), "{researcher}");
    assert_eq!(researcher["withheld_fields"], serde_json::json!(["artifacts"]));
    assert_eq!(withheld.len(), 1, "{withheld:?}");
    assert_eq!(
        (withheld[0]["field"].as_str(), withheld[0]["reason"].as_str()),
        (Some("artifacts"), Some("field_withheld"))
    );
    assert_eq!(report.firewall.fields_withheld, 1);

    // The reviewer's verdict, of its own schema, passed whole.
    let reviewer = reports.iter().find(|r| r["member"] == "reviewer").expect("the reviewer reported");
    assert!(reviewer["structured"]["approved"].is_boolean(), "{reviewer}");
    assert!(reviewer["structured"]["findings"].is_array(), "{reviewer}");

    // What the leader's model read is the filtered document, not the member's own answer.
    assert_eq!(delegated.len(), 2, "{delegated:?}");
    for text in &delegated {
        let read: serde_json::Value = serde_json::from_str(text).expect("the leader reads JSON");
        assert!(read.get("artifacts").is_none(), "withheld from the leader: {read}");
    }
    let line = report.output.lines().find(|l| l.starts_with("- researcher: ")).unwrap_or_default();
    assert!(line.contains("Gadget"), "the leader quoted the summary: {}", report.output);
    store.close().await.expect("the store closes");
}

/// What a person editing a member's waiting call fills in: the schema of each tool a
/// member may call, the local members' from their catalogs and a worker member's from the
/// built-in tools its worker has (here `shell`, given to the researcher, which runs in a
/// worker process; not `web.fetch`, which its worker lacks and which no one else has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_service_knows_the_arguments_of_every_members_tools() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = std::fs::read_to_string(example.join("team.toml")).expect("reads the example");
    assert!(team.contains(r#"isolation = "process""#), "the researcher runs in a worker");
    std::fs::write(dir.path().join("team.toml"), team).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("creates agents/");
    for entry in std::fs::read_dir(example.join("agents")).expect("lists the example's agents") {
        let path = entry.expect("an entry").path();
        let mut text = std::fs::read_to_string(&path).expect("reads an agent");
        if path.file_name().is_some_and(|n| n == "researcher.toml") {
            text.push_str("\n[[tools]]\nname = \"shell\"\n");
        }
        std::fs::write(dir.path().join("agents").join(path.file_name().expect("a name")), text).expect("writes");
    }
    let workspace = workspace();
    let service = TeamRun::new(&files(&dir), workspace.path()).memory(None).service().await.expect("the service");
    let inputs = service.tool_inputs().expect("the members build");
    for tool in ["delegate", "fs.write", "git.diff", "shell"] {
        assert!(inputs[tool]["properties"].is_object(), "{tool}: {inputs:?}");
    }
    assert!(inputs["shell"]["properties"]["command"]["description"].is_string(), "{:?}", inputs["shell"]);
    assert!(!inputs.contains_key("web.fetch"), "no member can call it: {:?}", inputs.keys());
}
