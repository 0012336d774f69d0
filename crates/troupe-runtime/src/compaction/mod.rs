//! The compaction hook: shrinking the conversation before a model call.
//!
//! The runner calls its [`Compactor`] before every model call, inside the tool loop too,
//! at a point where every tool call already has its result in the conversation. The run
//! state itself never compacts.
//!
//! [`PolicyCompactor`] is the compactor configured by data: a [`CompactionPolicy`] says
//! when to compact (a share of the model's context window, by a [`TokenEstimator`]
//! corrected with the provider's reported usage) and which [`Strategy`]s to try, in order:
//! keep only recent turns, trim old tool results, summarize old turns with a model, or
//! leave it to the provider. Every strategy works on *units*: an assistant message with
//! the user message(s) answering it, so a tool call and its result are kept or removed
//! together; the first user message (the task) and the most recent unit are never removed.
//!
//! ```
//! use troupe_runtime::{CompactionPolicy, Strategy};
//!
//! let policy: CompactionPolicy = serde_json::from_value(serde_json::json!({
//!     "trigger_ratio": 0.75,
//!     "strategies": [
//!         {"type": "trim_tool_results", "keep_chars": 500},
//!         {"type": "keep_recent", "n": 4}
//!     ]
//! }))?;
//! assert_eq!(policy.max_attempts, 3, "unset fields keep their defaults");
//! assert_eq!(policy.strategies[1], Strategy::KeepRecent { n: 4 });
//! # Ok::<(), serde_json::Error>(())
//! ```

mod estimate;
mod policy;
mod strategies;
mod summarize;

pub use estimate::TokenEstimator;
pub use policy::{AuxiliaryUsage, CompactionReport, PolicyCompactor};
pub use strategies::{REMOVED_NOTE_SUFFIX, TRIMMED_NOTE_PREFIX};
pub use summarize::{SUMMARY_INSTRUCTION, SUMMARY_PREFIX};

use crate::error::RuntimeError;
use crate::resolver::ModelResolver;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, Usage};
use troupe_model::ResolvedModel;

/// What a compactor may look at.
#[derive(Clone, Copy)]
pub struct CompactionContext<'a> {
    /// The model about to be called (its context window is in `model.info`).
    pub model: &'a ResolvedModel,
    /// The usage the provider reported for the previous call, if any: its input size is
    /// the real measure of the conversation.
    pub last_usage: Option<Usage>,
    /// How many leading messages of the conversation the previous call sent, so that
    /// `last_usage` measured them; `None` when unknown (the run's first call).
    pub last_request_messages: Option<usize>,
    /// The model calls made so far in this run.
    pub iteration: u32,
    /// The run's cancellation; a compactor calling a model should pass it on.
    pub cancel: &'a CancellationToken,
    /// The request about to be sent, as built before compaction: its system prompt and
    /// tool specs take room in the context window too. Its messages are replaced by the
    /// compacted conversation afterwards.
    pub request: &'a ModelRequest,
    /// The runner's model resolver, for a compactor that calls another model (a cheaper
    /// summarizer, say).
    pub resolver: &'a dyn ModelResolver,
}

impl std::fmt::Debug for CompactionContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionContext")
            .field("model", &self.model.id)
            .field("last_usage", &self.last_usage)
            .field("last_request_messages", &self.last_request_messages)
            .field("iteration", &self.iteration)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// Shrinks a conversation in place.
///
/// An implementation must never separate a tool call from its result: a
/// [`ToolUse`](troupe_core::ContentBlock::ToolUse) block is kept or removed together with
/// the [`ToolResult`](troupe_core::ContentBlock::ToolResult) answering it.
pub trait Compactor: Send + Sync {
    /// Compacts `messages` if needed; returns whether it changed them. A recorded run
    /// writes the conversation again only when this says it changed: a change it does
    /// not report is not on record.
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>>;

    /// Compacts like [`compact`](Compactor::compact) and says what it did: `Some` report
    /// exactly when the conversation changed. The runner calls this one.
    ///
    /// The default wraps `compact` and measures the conversation before and after with a
    /// [`TokenEstimator`]; its report names the strategy `custom`.
    fn compact_with_report<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<Option<CompactionReport>, RuntimeError>> {
        Box::pin(async move {
            let estimator = TokenEstimator::for_context(&context, messages);
            let before_messages = messages.len();
            let before_tokens = estimator.conversation(messages);
            if !self.compact(messages, context).await? {
                return Ok(None);
            }
            let after_tokens = estimator.conversation(messages);
            Ok(Some(CompactionReport {
                strategy: "custom".to_owned(),
                applied: vec!["custom".to_owned()],
                attempts: 1,
                before_tokens,
                after_tokens,
                removed_messages: before_messages.saturating_sub(messages.len()),
                ..CompactionReport::default()
            }))
        })
    }
}

/// Never compacts.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCompaction;

impl Compactor for NoCompaction {
    fn compact<'a>(
        &'a self,
        _messages: &'a mut Vec<Message>,
        _context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>> {
        Box::pin(std::future::ready(Ok(false)))
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Contexts and conversations for the compaction unit tests.

    use super::CompactionContext;
    use crate::resolver::FixedModel;
    use serde_json::json;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;
    use troupe_core::{ContentBlock, Message, ModelRequest, Role};
    use troupe_model::{ModelInfo, Pricing, ResolvedModel};
    use troupe_testkit::ScriptedModel;

    /// Everything a [`CompactionContext`] borrows.
    pub(crate) struct Fixture {
        pub(crate) model: ResolvedModel,
        pub(crate) resolver: FixedModel,
        pub(crate) request: ModelRequest,
        pub(crate) cancel: CancellationToken,
        pub(crate) scripted: ScriptedModel,
    }

    impl Fixture {
        /// A scripted model with a `window`-token context window.
        pub(crate) fn new(window: u32) -> Self {
            let scripted = ScriptedModel::new([]);
            let info = ModelInfo::new("scripted/small", window, 1_000, Pricing::flat(1.0, 2.0)).expect("valid id");
            let resolver = FixedModel::new(Arc::new(scripted.clone()), "small").with_info(info);
            let model = crate::resolver::ModelResolver::resolve(&resolver, "any").expect("fixed model resolves");
            Fixture { model, resolver, request: ModelRequest::default(), cancel: CancellationToken::new(), scripted }
        }

        pub(crate) fn context(&self) -> CompactionContext<'_> {
            CompactionContext {
                model: &self.model,
                last_usage: None,
                last_request_messages: None,
                iteration: 1,
                cancel: &self.cancel,
                request: &self.request,
                resolver: &self.resolver,
            }
        }
    }

    /// The task, then `units` tool turns whose results are `result_chars` long, then an
    /// answer-less tail (the last unit is a tool turn too).
    pub(crate) fn tool_loop(units: usize, result_chars: usize) -> Vec<Message> {
        let mut messages = vec![Message::user("the task")];
        for i in 0..units {
            messages.push(Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::text(format!("step {i}")),
                    ContentBlock::tool_use(format!("c{i}"), "probe", json!({"i": i})),
                ],
            ));
            messages.push(Message::new(
                Role::User,
                vec![ContentBlock::tool_result(format!("c{i}"), "x".repeat(result_chars))],
            ));
        }
        messages
    }
}
