//! The work every contender does: a question whose answer takes three calls of `lookup`,
//! scripted by the mock server (OpenAI Chat wire) in the child process.

use std::time::Duration;
use troupe_testkit::{MockTurn, RecordedRequest};

/// The task each run is given.
pub const TASK: &str = "What are k0, k1 and k2?";

/// The final answer the scripted model gives.
pub const ANSWER: &str = "k0, k1 and k2 are all 42.";

/// Tool calls per run.
pub const TOOL_CALLS: u32 = 3;

/// The model whose every response starts after [`LATENCY`].
pub const SLOW_MODEL: &str = "gpt-4o-mini";

/// The model that answers at once.
pub const FAST_MODEL: &str = "gpt-4o";

/// A model's time to first token in the in-flight memory pass.
pub const LATENCY: Duration = Duration::from_millis(200);

/// The model whose every response starts after [`PACE`]: runs that wait on their model,
/// as runs against a vendor do, for the throughput passes given for reference.
pub const PACED_MODEL: &str = "gpt-4.1";

/// [`PACED_MODEL`]'s time to first token: a fast vendor's, short enough for a pass of
/// 2 s to finish ten runs in a row.
pub const PACE: Duration = Duration::from_millis(50);

/// What `lookup` answers.
pub fn lookup_answer(key: &str) -> String {
    format!("{key} = 42")
}

/// The scripted model: `lookup` of `k0`, `k1`, `k2` in turn, then the answer.
pub fn responder(request: &RecordedRequest) -> MockTurn {
    let messages = request.body["messages"].as_array();
    let answered = messages.map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let turn = if answered < TOOL_CALLS as usize {
        let key = format!("k{answered}");
        MockTurn::tool_call(format!("call_{answered}"), "lookup", serde_json::json!({ "key": key }))
    } else {
        MockTurn::text(ANSWER)
    };
    match request.body["model"].as_str() {
        Some(SLOW_MODEL) => turn.with_latency(LATENCY),
        Some(PACED_MODEL) => turn.with_latency(PACE),
        _ => turn,
    }
}
