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
    assert_eq!(names, ["lead", "researcher", "reviewer"]);
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
    for teammate in ["researcher", "reviewer"] {
        let line = report.output.lines().find(|l| l.starts_with(&format!("- {teammate}: "))).unwrap_or_default();
        assert!(line.contains(&format!("as {teammate}")), "{teammate}'s report reached the leader: {}", report.output);
    }
    assert_eq!(report.records.len(), 3, "two delegated calls and the leader's: {:?}", report.records);
    assert!(report.records.iter().all(|r| r.success), "{:?}", report.records);
    assert_eq!(report.firewall.passed, 2, "both reports passed the firewall");
    let mut finished = watcher.await.expect("the watcher ends with the team");
    finished.sort();
    assert_eq!(finished, ["lead", "researcher", "reviewer"], "every member's events were passed on");
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
        assert_eq!(report.records.len(), 3, "each run has members of its own: {:?}", report.records);
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
    assert_eq!(record.state["members"].as_array().map(Vec::len), Some(3));
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
    assert_eq!(under_lead, ["researcher", "reviewer"], "{runs:?}");
    assert!(runs.iter().all(|r| r.status == RunStatus::Completed), "every run of the tree ended: {runs:?}");
    assert_eq!(runs.len(), 4, "the team's run and its three members' runs: {runs:?}");
    store.close().await.expect("the store closes");
}
