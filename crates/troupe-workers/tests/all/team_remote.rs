//! Remote members of a team file (`remote = "http://…"`), run from code through
//! `TeamRun` against a real troupe A2A server on a loopback port, whose agent runs on the
//! testkit's mock model; the team's leader is a local agent file on the demo model, which
//! delegates to every teammate and answers with the first line of each report.

use futures::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, PauseReason};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{ApprovalDecision, Engine, FixedModel};
use troupe_server::{AgentLauncher, RunHub, Server, ServerConfig};
use troupe_testkit::{MockLlmServer, MockTurn};
use troupe_workers::Isolation;
use troupe_workers::build::Approvals;
use troupe_workers::team_run::{TeamFiles, TeamRun};

/// A troupe server offering one agent, `reviewer` (the coding tools in a workspace of its
/// own), whose model is the mock answering `turns` in order.
struct Remote {
    url: String,
    mock: MockLlmServer,
    workspace: TempDir,
    hub: Arc<RunHub>,
    shutdown: CancellationToken,
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn remote(config: ServerConfig, turns: impl IntoIterator<Item = MockTurn>) -> Remote {
    let mock = MockLlmServer::start().await.expect("the mock model starts");
    mock.push_all(turns);
    let provider: Arc<dyn LlmProvider> = Arc::new(
        HttpProvider::new(
            HttpConfig::new("anthropic", mock.url(), Some(ApiKey::new("test-key"))),
            AnthropicWire::default(),
        )
        .expect("a provider"),
    );
    let workspace = tempfile::tempdir().expect("a workspace");
    let engine = Engine::builder().resolver(Arc::new(FixedModel::new(provider, "mock-model"))).build();
    let agent = engine
        .agent("reviewer")
        .model("mock-model")
        .workspace(workspace.path())
        .coding_tools()
        .max_iterations(6)
        .build()
        .expect("the agent builds");
    let server = Server::new(config, Arc::new(AgentLauncher::new().agent(agent, "Reviews changes")));
    let hub = Arc::clone(server.hub());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let shutdown = CancellationToken::new();
    tokio::spawn(server.serve(listener, shutdown.clone()));
    Remote { url, mock, workspace, hub, shutdown }
}

/// A team directory: `team.toml` (a delegate team led by `lead`, then `members`) and the
/// example team's leader on the demo model.
fn team_dir(members: &str) -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = format!("[team]\nname = \"audit\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n{members}");
    std::fs::write(dir.path().join("team.toml"), team).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("creates agents/");
    let lead = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/agents/lead.toml");
    std::fs::copy(lead, dir.path().join("agents/lead.toml")).expect("copies the leader");
    dir
}

fn team_files(dir: &TempDir) -> TeamFiles {
    let agents: Vec<PathBuf> = vec![dir.path().to_owned()];
    TeamFiles::load(&dir.path().join("team.toml"), &agents).expect("the team and its agents load")
}

/// Every event the remote server's run `id` had, once it has ended.
async fn remote_events(hub: &Arc<RunHub>, id: &str) -> Vec<AgentEvent> {
    let run = hub.get(id).expect("the remote server holds the task's run");
    let events = run.subscribe(0, CancellationToken::new()).map(|(_, e)| e).collect::<Vec<_>>();
    tokio::time::timeout(Duration::from_secs(10), events).await.expect("the remote run ends")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_delegates_to_a_remote_member_and_reads_its_answer_through_the_firewall() {
    let server = remote(ServerConfig::default(), [MockTurn::text("Reviewed: the change is sound.")]).await;
    let dir = team_dir(&format!(
        "[[team.members]]\nremote = \"{}\"\n\n[firewall]\nchannels = [\"reviewer -> lead\"]\n",
        server.url
    ));
    let files = team_files(&dir);
    let workspace = tempfile::tempdir().expect("a workspace");
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("the team assembles");
    let rows: Vec<(&str, Isolation)> = team.rows().iter().map(|r| (r.name.as_str(), r.isolation)).collect();
    assert_eq!(rows, [("lead", Isolation::Local), ("reviewer", Isolation::Remote)], "named by its card");
    let report = team.run("Review the change", None, CancellationToken::new()).await;
    assert_eq!(report.failure(), None, "{report:?}");
    assert!(report.output.contains("- reviewer: Reviewed: the change is sound."), "{}", report.output);
    assert_eq!(report.firewall.passed, 1, "the remote report passed the firewall");
    let requests = server.mock.requests();
    assert_eq!(requests.len(), 1, "one remote task, one model call");
    assert!(requests[0].body.to_string().contains("Review the change"), "the brief reached the remote agent");
    assert_eq!(server.hub.list().len(), 1, "the task was sent once");

    // Without a channel from it, its report is withheld like any member's.
    let server = remote(ServerConfig::default(), [MockTurn::text("Reviewed: secret plans.")]).await;
    let dir = team_dir(&format!(
        "[[team.members]]\nremote = \"{}\"\nname = \"auditor\"\n\n[firewall]\nchannels = []\n",
        server.url
    ));
    let files = team_files(&dir);
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("the team assembles");
    assert_eq!(team.rows()[1].name, "auditor", "`name` names it in the team");
    let report = team.run("Review the change", None, CancellationToken::new()).await;
    assert!(!report.output.contains("secret plans"), "{}", report.output);
    assert!(report.output.contains("[firewall] the report of `auditor` to `lead` was withheld"), "{}", report.output);
    assert_eq!(report.firewall.dropped(), 1);
}

/// A remote member's typed report is asked of its server as the task's typed answer: the
/// schema reaches the remote agent's model, and the answer reaches the leader as data,
/// through the firewall field by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_members_typed_report_is_asked_of_its_server_and_read_as_data() {
    let answer = serde_json::json!({
        "summary": "The change is sound.",
        "artifacts": [{"name": "notes.md", "media_type": "text/markdown", "content": "private scratch notes"}],
        "decisions": ["kept the public API"],
        "blockers": []
    });
    let server = remote(ServerConfig::default(), [MockTurn::text(answer.to_string())]).await;
    let dir = team_dir(&format!(
        "[[team.members]]\nremote = \"{}\"\nreport = \"structured\"\n\n[firewall]\nchannels = [\"reviewer -> lead\"]\n\n\
         [firewall.fields]\n\"reviewer -> lead\" = [\"summary\", \"decisions\", \"blockers\"]\n",
        server.url
    ));
    let files = team_files(&dir);
    let workspace = tempfile::tempdir().expect("a workspace");
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("the team assembles");
    let report = team.run("Review the change", None, CancellationToken::new()).await;
    assert_eq!(report.failure(), None, "{report:?}");
    let requests = server.mock.requests();
    assert_eq!(requests.len(), 1, "one remote task, one model call");
    let asked = requests[0].body.to_string();
    assert!(
        asked.contains("blockers") && asked.contains("media_type"),
        "the report's schema reached the remote model: {asked}"
    );
    assert!(report.output.contains("The change is sound."), "{}", report.output);
    // Read as a typed report: the one field its channel does not carry was withheld.
    assert_eq!(report.firewall.fields_withheld, 1, "{:?}", report.firewall);
    assert!(!report.output.contains("private scratch notes"), "the artifacts were withheld: {}", report.output);
}

/// A remote member's call that needs approval is put to the team's caller like a local
/// member's: a `RunPaused` of the member (its run being the remote task), decided through
/// the team's control. The remote server applies the decision once; the team's approval
/// mode decides it when it is not a person's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_members_call_is_decided_by_the_teams_caller_or_its_approval_mode() {
    let asked = |decision| (Approvals::Approver, Some(decision));
    let cases = [
        asked(ApprovalDecision::Approve),
        asked(ApprovalDecision::Reject { reason: Some("not now".into()) }),
        (Approvals::Auto, None),
        (Approvals::Refuse, None),
    ];
    for (approvals, decision) in cases {
        let turns = [
            MockTurn::tool_call("call_w", "fs.write", serde_json::json!({"path": "notes.md", "content": "ok\n"})),
            MockTurn::text("Done."),
        ];
        let server = remote(ServerConfig::default(), turns).await;
        let dir = team_dir(&format!("[[team.members]]\nremote = \"{}\"\n", server.url));
        let files = team_files(&dir);
        let workspace = tempfile::tempdir().expect("a workspace");
        let team = TeamRun::new(&files, workspace.path()).approvals(approvals).prepare().await.expect("assembles");
        let control = team.control();
        let deciding = decision.clone();
        let (events, mut received) = mpsc::channel::<AgentEvent>(1024);
        let caller = tokio::spawn(async move {
            let mut asked = Vec::new();
            while let Some(event) = received.recv().await {
                if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, .. } } = &event.kind {
                    asked.push((
                        event.attribution.agent_id.to_string(),
                        tool.clone(),
                        event.attribution.run_id.clone(),
                    ));
                    if let Some(decision) = &deciding {
                        control
                            .decide(&event.attribution.run_id, call_id.clone(), decision.clone())
                            .await
                            .expect("relayed");
                    }
                }
            }
            asked
        });
        let running = team.run("Write the notes", Some(events), CancellationToken::new());
        let report = tokio::time::timeout(Duration::from_secs(60), running).await.expect("the team ends");
        let asked = caller.await.expect("the caller ends with the team");
        let case = format!("{approvals:?} {decision:?}");
        assert_eq!(report.failure(), None, "{case}: {report:?}");
        assert!(report.output.contains("- reviewer: Done."), "{case}: {}", report.output);
        let approved = matches!((approvals, &decision), (Approvals::Auto, _) | (_, Some(ApprovalDecision::Approve)));
        assert_eq!(server.workspace.path().join("notes.md").exists(), approved, "{case}");
        let runs = server.hub.list();
        assert_eq!(runs.len(), 1, "{case}: the task was sent once");
        if approvals == Approvals::Approver {
            assert_eq!(asked.len(), 1, "{case}: asked once: {asked:?}");
            assert_eq!((asked[0].0.as_str(), asked[0].1.as_str()), ("reviewer", "fs.write"), "{case}");
            assert_eq!(asked[0].2, runs[0].run_id, "{case}: the paused run is the remote task");
        } else {
            assert!(asked.is_empty(), "{case}: nobody is asked: {asked:?}");
        }
        let remote = remote_events(&server.hub, runs[0].run_id.as_str()).await;
        let results = remote.iter().filter(
            |e| matches!(&e.kind, AgentEventKind::ToolCallResult { call_id, .. } if call_id.as_str() == "call_w"),
        );
        assert_eq!(results.count(), 1, "{case}: the remote run took one decision about the call");
        assert_eq!(server.mock.requests().len(), 2, "{case}: no model call twice");
    }
}

/// A remote member whose task takes longer than its `timeout_seconds` fails, and its
/// remote task is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_member_past_its_timeout_fails_and_its_task_is_cancelled() {
    let slow = MockTurn::text("a slow answer, one character at a time, that takes seconds")
        .with_delta_chars(1)
        .with_event_delay(Duration::from_millis(100));
    let server = remote(ServerConfig::default(), [slow]).await;
    let dir = team_dir(&format!("[[team.members]]\nremote = \"{}\"\ntimeout_seconds = 1\n", server.url));
    let files = team_files(&dir);
    let workspace = tempfile::tempdir().expect("a workspace");
    let team = TeamRun::new(&files, workspace.path()).prepare().await.expect("assembles");
    let report = team.run("Answer slowly", None, CancellationToken::new()).await;
    let failed = report.records.iter().find(|r| r.name == "reviewer").expect("the reviewer's record");
    assert!(!failed.success);
    assert_eq!(failed.error.as_deref(), Some("the remote task did not end within 1 s; it was cancelled"));
    let runs = server.hub.list();
    let events = remote_events(&server.hub, runs[0].run_id.as_str()).await;
    let ended = events.iter().find_map(|e| match &e.kind {
        AgentEventKind::RunFinished { outcome, .. } => Some(*outcome),
        _ => None,
    });
    assert_eq!(ended, Some(troupe_core::RunOutcomeKind::Cancelled), "the remote task was cancelled");
}

/// What cannot be assembled is told at its place in the file: a token variable that is
/// not set (named, nothing sent), a server that is not there, a skill the card does not
/// offer, a card name that clashes with the team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_members_that_cannot_be_assembled_are_errors_at_their_place() {
    let server = remote(ServerConfig::default(), []).await;
    let error = |members: String| {
        let dir = team_dir(&members);
        let files = team_files(&dir);
        let workspace = tempfile::tempdir().expect("a workspace");
        async move {
            let prepared = TeamRun::new(&files, workspace.path()).prepare().await;
            let error = prepared.err().expect("refused");
            (error.is_usage(), error.to_string().replace(&dir.path().display().to_string(), "DIR"))
        }
    };
    let variable = "TROUPE_TEST_REMOTE_TOKEN_NOT_SET";
    let (usage, unset) =
        error(format!("[[team.members]]\nremote = \"{}\"\nbearer_env = \"{variable}\"\n", server.url)).await;
    assert!(usage);
    assert_eq!(
        unset,
        format!(
            "DIR/team.toml:8:14: {variable} is not set; export it with the bearer token of the remote agent at {}",
            server.url
        )
    );
    assert!(server.hub.list().is_empty() && server.mock.requests().is_empty(), "nothing was sent");

    let (_, skill) = error(format!("[[team.members]]\nremote = \"{}\"\nskill = \"nobody\"\n", server.url)).await;
    assert!(
        skill.starts_with("DIR/team.toml:8:9: the remote agent at ")
            && skill.contains("offers no skill `nobody`; it offers reviewer"),
        "{skill}"
    );

    let (_, twice) =
        error(format!("[[team.members]]\nremote = \"{0}\"\n\n[[team.members]]\nremote = \"{0}\"\n", server.url)).await;
    assert!(
        twice.starts_with("DIR/team.toml:10:10: `reviewer` is listed twice") && twice.contains("`name = \"ID\"`"),
        "{twice}"
    );

    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let address = listener.local_addr().expect("an address");
        drop(listener);
        format!("http://{address}")
    };
    let (usage, unreachable) = error(format!("[[team.members]]\nremote = \"{gone}\"\n")).await;
    assert!(usage);
    assert!(unreachable.starts_with("DIR/team.toml:7:10: cannot use the remote agent: cannot reach"), "{unreachable}");
}
