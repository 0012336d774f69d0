//! proptest strategies for scripted turns and chunkings, shared by every parser's tests.

use crate::script::{MockBlock, MockTurn};
use proptest::prelude::*;
use troupe_core::{StopReason, Usage};

/// Which blocks a vendor's wire can carry.
#[derive(Clone, Copy, Debug)]
pub struct TurnShape {
    /// Whether reasoning blocks may appear.
    pub reasoning: bool,
    /// Whether several text blocks may appear (Anthropic); otherwise at most one text
    /// block, placed before the tool calls, as OpenAI-style wires stream it.
    pub many_text_blocks: bool,
}

fn text() -> impl Strategy<Value = String> {
    // Printable text with quotes, backslashes, newlines and non-ASCII, which the encoders
    // must escape and the parsers unescape.
    proptest::string::string_regex("[a-zA-Z0-9 .,!?\"\\\\\n\té€😀]{1,60}").expect("valid regex")
}

fn arguments() -> impl Strategy<Value = serde_json::Value> {
    (text(), any::<i32>(), any::<bool>()).prop_map(|(s, n, b)| serde_json::json!({"path": s, "line": n, "flag": b}))
}

fn usage() -> impl Strategy<Value = Usage> {
    (0u64..100_000, 0u64..10_000, 0u64..50_000).prop_map(|(input, output, cache_read)| Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        ..Default::default()
    })
}

/// Random turns: text, tool calls (with JSON arguments cut into random deltas), optional
/// reasoning, usage, and a stop reason consistent with the blocks.
pub fn turn(shape: TurnShape) -> impl Strategy<Value = MockTurn> {
    let reasoning = if shape.reasoning { proptest::option::of(text()).boxed() } else { Just(None).boxed() };
    let texts = if shape.many_text_blocks {
        proptest::collection::vec(text(), 0..3).boxed()
    } else {
        proptest::option::of(text()).prop_map(|t| t.into_iter().collect()).boxed()
    };
    let calls = proptest::collection::vec(("[a-z_]{1,12}", arguments()), 0..4);
    (reasoning, texts, calls, usage(), 1usize..24, any::<bool>()).prop_map(
        |(reasoning, texts, calls, usage, delta_chars, max_tokens)| {
            let mut blocks = Vec::new();
            blocks.extend(reasoning.map(MockBlock::Reasoning));
            blocks.extend(texts.into_iter().map(MockBlock::Text));
            let has_calls = !calls.is_empty();
            for (n, (name, args)) in calls.into_iter().enumerate() {
                blocks.push(MockBlock::ToolCall { id: format!("call_{n}"), name, arguments: args.to_string() });
            }
            if blocks.is_empty() {
                blocks.push(MockBlock::Text("ok".into()));
            }
            let stop = match (has_calls, max_tokens) {
                (true, _) => StopReason::ToolUse,
                (false, true) => StopReason::MaxTokens,
                (false, false) => StopReason::EndTurn,
            };
            MockTurn { blocks, stop, usage, delta_chars, ..Default::default() }
        },
    )
}

/// Sorted split points within `0..=len` (as a vector of up to 16 positions).
pub fn split_points(len: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..=len, 0..16).prop_map(|mut points| {
        points.sort_unstable();
        points
    })
}

/// `bytes` cut at `points`.
pub fn split_at_points<'a>(bytes: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for &p in points {
        let p = p.min(bytes.len());
        if p >= start {
            chunks.push(&bytes[start..p]);
            start = p;
        }
    }
    chunks.push(&bytes[start..]);
    chunks
}
