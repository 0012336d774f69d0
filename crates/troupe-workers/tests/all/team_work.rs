//! How a team's work ends: not before the members it started have stopped.

use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_team::{DELEGATE_TOOL, DelegateTool, EventSink, Member, MemberResult, MemberTask};
use troupe_tools::{Tool, ToolCatalog, ToolContext, Workspace};
use troupe_workers::team::Work;

/// A member that, told to stop, takes a while to (a run finishing its checkpoint).
struct Slow {
    stopped: Arc<AtomicBool>,
}

impl Member for Slow {
    fn name(&self) -> &str {
        "slow"
    }

    fn description(&self) -> &str {
        "stops slowly"
    }

    fn run(&self, task: MemberTask, _: Option<EventSink>, cancel: CancellationToken) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            cancel.cancelled().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.stopped.store(true, Ordering::SeqCst);
            MemberResult::failed("slow", task.task_id, "cancelled")
        })
    }
}

/// A leader that delegates to `slow` and is stopped with the team.
struct Leader {
    catalog: ToolCatalog,
    workspace: tempfile::TempDir,
}

impl Member for Leader {
    fn name(&self) -> &str {
        "lead"
    }

    fn description(&self) -> &str {
        "delegates"
    }

    fn run(&self, task: MemberTask, _: Option<EventSink>, cancel: CancellationToken) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let workspace = Arc::new(Workspace::new(self.workspace.path()).expect("a workspace"));
            let ctx = ToolContext::new(workspace).with_cancel(cancel);
            let outcome = self.catalog.invoke(DELEGATE_TOOL, json!({"to": "slow", "brief": "work"}), &ctx).await;
            MemberResult::failed("lead", task.task_id, outcome.content)
        })
    }
}

/// A leader cancelled mid-delegation returns at once; the team's work returns only once
/// the member it was waiting for has stopped too.
#[tokio::test]
async fn a_delegating_team_ends_after_the_member_it_stopped() {
    let stopped = Arc::new(AtomicBool::new(false));
    let slow: Arc<dyn Member> = Arc::new(Slow { stopped: Arc::clone(&stopped) });
    let tool = DelegateTool::new("lead", [slow]).expect("a tool");
    let delegations = tool.delegations();
    let catalog = ToolCatalog::with_tools([Arc::new(tool) as Arc<dyn Tool>]).expect("a catalog");
    let leader = Arc::new(Leader { catalog, workspace: tempfile::tempdir().expect("a directory") });
    let work = Work::Delegate { leader, delegations: delegations.clone() };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
    });
    let result = tokio::time::timeout(Duration::from_secs(10), work.run("t".into(), "go".into(), cancel))
        .await
        .expect("the team ends");
    assert!(result.error.is_some(), "a cancelled team did not complete");
    assert!(stopped.load(Ordering::SeqCst), "the team ended before its member stopped");
    assert_eq!(delegations.running(), 0);
}
