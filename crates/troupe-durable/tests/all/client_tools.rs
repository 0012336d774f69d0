//! A run that waits for a client tool's result, on a real SQLite store: it pauses
//! recorded, the result is a stored signal applied once, and the run a worker resumes
//! offers the same client tools and goes on with the shared state it had.

use crate::durable::{World, process, spec};
use serde_json::json;
use troupe_core::{ContentBlock, ToolSpec};
use troupe_durable::{QueueWorker, send_signal};
use troupe_runtime::{ApprovalPolicy, RunInput, RunOutcome, STATE_UPDATE_TOOL, Signal};
use troupe_store::{EvidenceKind, RunStatus};
use troupe_testkit::MockTurn;

#[test]
fn a_client_tools_result_stored_for_a_paused_run_is_applied_once_by_the_worker_that_resumes_it() {
    let patch = json!({"patch": [{"op": "replace", "path": "/color", "value": "teal"}]});
    let world = World::new([
        MockTurn::tool_call("s1", STATE_UPDATE_TOOL, patch).with_tool_call("c1", "pick_color", json!({"for": "wall"})),
        MockTurn::text("done"),
    ]);
    let pick = ToolSpec::new("pick_color", "Asks the user.", json!({"type": "object"}));
    process().block_on(async {
        let runner = world.runner("server").await;
        let input = RunInput::new("paint").client_tools(vec![pick.clone()]).shared_state(json!({"color": "white"}));
        // Nobody answers in this process: the run pauses, recorded, waiting for the client.
        let output = runner.start(spec(ApprovalPolicy::auto()), input).output().await.expect("ends");
        assert!(matches!(output.outcome, RunOutcome::Paused { .. }), "{:?}", output.outcome);
        let store = world.store().await;
        let run_id = output.run_id.to_string();
        assert_eq!(store.load_run(&run_id).await.expect("loads").expect("stored").status, RunStatus::Paused);

        let result = Signal::ToolResult { call_id: "c1".into(), content: "teal".into(), is_error: false };
        send_signal(store.as_ref(), &run_id, &result).await.expect("stored");
        let again = Signal::ToolResult { call_id: "c1".into(), content: "red".into(), is_error: false };
        send_signal(store.as_ref(), &run_id, &again).await.expect("stored");
        let worker = QueueWorker::new(world.runner("worker").await).expect("a worker");
        let output = worker.run_one().await.expect("works").expect("the answered run was queued");
        assert!(output.is_completed(), "{:?}", output.outcome);
        assert_eq!(output.state.shared_state(), Some(&json!({"color": "teal"})), "the state it had, patched");

        let requests = world.model.requests();
        assert_eq!(requests.len(), 2);
        let offered: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
        assert!(offered.contains(&"pick_color") && offered.contains(&STATE_UPDATE_TOOL), "{offered:?}");
        let results: Vec<&ContentBlock> = requests[1].messages.iter().flat_map(|m| &m.content).collect();
        assert!(results.contains(&&ContentBlock::tool_result("c1", "teal")), "{results:?}");
        let log = store.evidence(&run_id, 0).await.expect("evidence");
        let taken: Vec<&serde_json::Value> =
            log.iter().filter(|e| e.kind == EvidenceKind::SignalApplied).map(|e| e.payload.value()).collect();
        assert_eq!(taken.len(), 2, "{taken:?}");
        assert_eq!((taken[0]["applied"].clone(), taken[1]["applied"].clone()), (json!(true), json!(false)));
    });
}
