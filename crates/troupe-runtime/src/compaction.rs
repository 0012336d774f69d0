//! The compaction hook: shrinking the conversation before a model call.
//!
//! The runner calls its [`Compactor`] before every model call, inside the tool loop too,
//! at a point where every tool call already has its result in the conversation. The
//! policies and strategies (keep recent turns, trim old tool results, summarize) live
//! behind this trait; the run state itself never compacts.

use crate::error::RuntimeError;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, Usage};
use troupe_model::ResolvedModel;

/// What a compactor may look at.
#[derive(Clone, Copy, Debug)]
pub struct CompactionContext<'a> {
    /// The model about to be called (its context window is in `model.info`).
    pub model: &'a ResolvedModel,
    /// The usage the provider reported for the previous call, if any: its input size is
    /// the real measure of the conversation.
    pub last_usage: Option<Usage>,
    /// The model calls made so far in this run.
    pub iteration: u32,
    /// The run's cancellation; a compactor calling a model should pass it on.
    pub cancel: &'a CancellationToken,
}

/// Shrinks a conversation in place.
///
/// An implementation must never separate a tool call from its result: a
/// [`ToolUse`](troupe_core::ContentBlock::ToolUse) block is kept or removed together with
/// the [`ToolResult`](troupe_core::ContentBlock::ToolResult) answering it.
pub trait Compactor: Send + Sync {
    /// Compacts `messages` if needed; returns whether it changed them.
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>>;
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
