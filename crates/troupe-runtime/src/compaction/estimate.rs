//! [`TokenEstimator`]: how many tokens a conversation takes, without a tokenizer.
//!
//! The heuristic counts UTF-8 bytes (about four to a token for English and code; CJK
//! text, three bytes a character, lands near its real count too) plus a small overhead per
//! message and per tool block. Tool arguments and results count as the JSON and text the
//! provider receives. The provider's own count of the previous request then corrects the
//! heuristic: the estimate is scaled by `reported / estimated` over the messages that
//! request sent, so the error of the heuristic on *this* conversation cancels out.

use super::CompactionContext;
use serde_json::Value;
use troupe_core::{ContentBlock, Message, ToolSpec, Usage};

/// The correction factor is kept within these bounds: a provider reporting nonsense (a
/// mock's constant, a proxy that counts nothing) cannot make the estimate absurd.
const MIN_SCALE: f64 = 0.5;
const MAX_SCALE: f64 = 3.0;

/// Estimates token counts with a bytes-per-token heuristic, optionally corrected by the
/// usage a provider reported.
///
/// ```
/// use troupe_core::Message;
/// use troupe_runtime::TokenEstimator;
///
/// let conversation = vec![Message::user("x".repeat(400))];
/// let raw = TokenEstimator::new().conversation(&conversation);
/// assert_eq!(raw, 104, "400 bytes are 100 tokens, plus the message overhead");
/// // The provider counted 208 tokens for the same messages: estimates double.
/// let corrected = TokenEstimator::new().calibrated(raw, 208);
/// assert_eq!(corrected.conversation(&conversation), 208);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenEstimator {
    /// UTF-8 bytes per token of the heuristic (default 4).
    pub bytes_per_token: f64,
    /// Tokens every message costs beyond its content: role markers, separators (default 4).
    pub message_overhead: u64,
    /// Tokens every tool call or result block costs beyond its text: ids, names, framing
    /// (default 8).
    pub tool_block_overhead: u64,
    /// Tokens of one image, whatever its size (default 1,600: a large image on most
    /// vendors).
    pub image_tokens: u64,
    /// Tokens outside the messages: the system prompt and tool specs (default 0).
    pub fixed_tokens: u64,
    scale: f64,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        TokenEstimator {
            bytes_per_token: 4.0,
            message_overhead: 4,
            tool_block_overhead: 8,
            image_tokens: 1_600,
            fixed_tokens: 0,
            scale: 1.0,
        }
    }
}

impl TokenEstimator {
    /// The plain heuristic, uncorrected, with nothing outside the messages.
    pub fn new() -> Self {
        Self::default()
    }

    /// The estimator for the request `context` is about to send with `messages`: the
    /// request's system prompt and tools count as [`fixed_tokens`](Self::fixed_tokens),
    /// and the previous call's reported usage corrects the heuristic when the context says
    /// which messages it measured.
    pub fn for_context(context: &CompactionContext<'_>, messages: &[Message]) -> Self {
        let mut estimator = TokenEstimator::new();
        estimator.fixed_tokens = estimator.request_overhead(context.request.system.as_deref(), &context.request.tools);
        if let (Some(usage), Some(sent)) = (context.last_usage, context.last_request_messages)
            && let Some(prefix) = messages.get(..sent)
        {
            let estimated = estimator.conversation(prefix);
            estimator = estimator.calibrated(estimated, reported_input(&usage));
        }
        estimator
    }

    /// Scales every later estimate by `reported / estimated` (within 0.5 to 3): the
    /// provider reported `reported` prompt tokens for what this estimator put at
    /// `estimated`. Either being 0 leaves the estimator uncorrected.
    pub fn calibrated(mut self, estimated: u64, reported: u64) -> Self {
        if estimated > 0 && reported > 0 {
            self.scale = (reported as f64 / estimated as f64).clamp(MIN_SCALE, MAX_SCALE);
        }
        self
    }

    /// The correction factor in force (1 when uncorrected).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The whole request: [`fixed_tokens`](Self::fixed_tokens) and `messages`, corrected.
    pub fn conversation(&self, messages: &[Message]) -> u64 {
        let raw = self.fixed_tokens + messages.iter().map(|m| self.message(m)).sum::<u64>();
        (raw as f64 * self.scale).ceil() as u64
    }

    /// One message, uncorrected.
    pub fn message(&self, message: &Message) -> u64 {
        self.message_overhead + message.content.iter().map(|b| self.block(b)).sum::<u64>()
    }

    /// One content block, uncorrected.
    pub fn block(&self, block: &ContentBlock) -> u64 {
        match block {
            ContentBlock::Text { text } => self.bytes(text.len()),
            ContentBlock::Image { .. } => self.image_tokens,
            // Vendors count a PDF's pages as text and images; a page's worth is the least it is.
            ContentBlock::Document { .. } => self.image_tokens,
            ContentBlock::ToolUse { id, name, input, .. } => {
                self.tool_block_overhead + self.bytes(id.as_str().len() + name.len() + json_len(input))
            }
            ContentBlock::ToolResult { tool_use_id, content, .. } => {
                self.tool_block_overhead + self.bytes(tool_use_id.as_str().len() + content.len())
            }
            ContentBlock::Thinking { text, .. } => self.bytes(text.len()),
            ContentBlock::RedactedThinking { data } => self.bytes(data.len()),
        }
    }

    /// The system prompt and tool specs, uncorrected.
    pub fn request_overhead(&self, system: Option<&str>, tools: &[ToolSpec]) -> u64 {
        let system = system.map_or(0, |s| self.bytes(s.len()));
        let tools: u64 = tools
            .iter()
            .map(|t| {
                self.tool_block_overhead + self.bytes(t.name.len() + t.description.len() + json_len(&t.input_schema))
            })
            .sum();
        system + tools
    }

    fn bytes(&self, bytes: usize) -> u64 {
        if self.bytes_per_token <= 0.0 || !self.bytes_per_token.is_finite() {
            return bytes as u64;
        }
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }
}

/// The prompt tokens of a call, cached or not.
fn reported_input(usage: &Usage) -> u64 {
    usage.total_input()
}

/// About the length of `value` serialized compactly, without serializing it.
fn json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        // Digits of a typical number; exactness does not matter at 4 bytes a token.
        Value::Number(_) => 6,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>(),
        Value::Object(map) => {
            2 + map.len().saturating_sub(1) + map.iter().map(|(k, v)| k.len() + 3 + json_len(v)).sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::test_support::Fixture;
    use serde_json::json;
    use troupe_core::Role;

    #[test]
    fn json_len_tracks_the_serialized_length() {
        for value in [
            json!({"path": "src/main.rs", "content": "fn main() {}\n", "lines": [1, 2, 3], "force": false}),
            json!([null, true, "x", {"a": {"b": "c"}}]),
            json!({}),
        ] {
            let exact = serde_json::to_string(&value).expect("serializes").len();
            let approx = json_len(&value);
            assert!(approx.abs_diff(exact) * 5 <= exact, "{approx} vs {exact} for {value}");
        }
    }

    #[test]
    fn tool_arguments_and_results_are_counted() {
        let estimator = TokenEstimator::new();
        let call = ContentBlock::tool_use("c1", "fs.write", json!({"content": "y".repeat(4_000)}));
        let result = ContentBlock::tool_result("c1", "z".repeat(2_000));
        assert!(estimator.block(&call) > 1_000, "the arguments' JSON counts");
        assert!(estimator.block(&result) > 500, "the result's text counts");
        let message = Message::new(Role::User, vec![result.clone(), ContentBlock::text("note")]);
        assert_eq!(estimator.message(&message), 4 + estimator.block(&result) + 1);
    }

    #[test]
    fn calibration_scales_by_the_reported_ratio_within_bounds() {
        let estimator = TokenEstimator::new();
        assert_eq!(estimator.calibrated(100, 150).scale(), 1.5);
        assert_eq!(estimator.calibrated(100, 1_000_000).scale(), MAX_SCALE, "nonsense is bounded");
        assert_eq!(estimator.calibrated(1_000, 1).scale(), MIN_SCALE);
        assert_eq!(estimator.calibrated(0, 100).scale(), 1.0, "nothing to compare with");
        assert_eq!(estimator.calibrated(100, 0).scale(), 1.0, "a provider that reports nothing");
    }

    #[test]
    fn the_context_corrects_by_the_messages_the_last_call_sent() {
        let mut fixture = Fixture::new(10_000);
        fixture.request.system = Some("s".repeat(400));
        let messages =
            vec![Message::user("a".repeat(396)), Message::assistant("b".repeat(396)), Message::user("c".repeat(396))];
        let plain = TokenEstimator::for_context(&fixture.context(), &messages);
        assert_eq!(plain.fixed_tokens, 100, "the system prompt counts");
        assert_eq!(plain.scale(), 1.0, "no usage reported yet");
        assert_eq!(plain.conversation(&messages), 100 + 3 * 103);
        // The last call sent the first message with the system prompt: 203 estimated
        // tokens, for which the provider counted 406 (half from its cache).
        let mut context = fixture.context();
        context.last_usage = Some(Usage { input_tokens: 203, cache_read_tokens: 203, ..Usage::default() });
        context.last_request_messages = Some(1);
        let corrected = TokenEstimator::for_context(&context, &messages);
        assert_eq!(corrected.scale(), 2.0);
        assert_eq!(corrected.conversation(&messages), 2 * (100 + 3 * 103));
        context.last_request_messages = Some(9);
        assert_eq!(TokenEstimator::for_context(&context, &messages).scale(), 1.0, "a count beyond the conversation");
    }

    #[test]
    fn images_cost_a_fixed_amount() {
        let image = ContentBlock::Image {
            source: troupe_core::ImageSource::Base64 { media_type: "image/png".into(), data: "A".repeat(1_000_000) },
        };
        assert_eq!(TokenEstimator::new().block(&image), 1_600);
    }
}
