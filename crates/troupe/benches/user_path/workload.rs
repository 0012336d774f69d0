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

/// The model that gives long runs: [`LONG_TOOL_CALLS`] calls of `lookup`, each turn with
/// about 2 KB of text before its call, so the conversation ends at about 60 KB.
pub const LONG_MODEL: &str = "gpt-4.1-mini";

/// Tool calls per run on [`LONG_MODEL`].
pub const LONG_TOOL_CALLS: u32 = 30;

/// The tool calls a run on `model` makes.
pub fn tool_calls(model: &str) -> u32 {
    if model == LONG_MODEL { LONG_TOOL_CALLS } else { TOOL_CALLS }
}

/// What `lookup` answers.
pub fn lookup_answer(key: &str) -> String {
    format!("{key} = 42")
}

/// The scripted model: `lookup` of `k0`, `k1`, `k2` in turn, then the answer.
pub fn responder(request: &RecordedRequest) -> MockTurn {
    let messages = request.body["messages"].as_array();
    let answered = messages.map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let model = request.body["model"].as_str().unwrap_or_default();
    let turn = if answered < tool_calls(model) as usize {
        let key = format!("k{answered}");
        let call = MockTurn::tool_call(format!("call_{answered}"), "lookup", serde_json::json!({ "key": key }));
        if model == LONG_MODEL { call.with_text(format!("Looking up {key}: {}", "then ".repeat(400))) } else { call }
    } else {
        MockTurn::text(ANSWER)
    };
    match model {
        SLOW_MODEL => turn.with_latency(LATENCY),
        PACED_MODEL => turn.with_latency(PACE),
        _ => turn,
    }
}
