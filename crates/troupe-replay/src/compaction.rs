//! The compaction of a replay: at each step where the recorded run compacted its
//! conversation, the conversation it left is put in place; the compaction itself (a
//! summary's model call, say) is not run again, and nowhere else is anything compacted.

use crate::session::Session;
use futures::future::BoxFuture;
use std::sync::Arc;
use troupe_core::Message;
use troupe_runtime::{CompactionContext, Compactor, RuntimeError};

/// Puts the recorded run's compactions back where they were.
pub(crate) struct RecordedCompaction {
    pub(crate) session: Arc<Session>,
}

impl Compactor for RecordedCompaction {
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        _context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>> {
        Box::pin(async move {
            // Called before the model call of the next step.
            let next = self.session.progress().step + 1;
            let recorded = self.session.recording.compactions.iter().find(|c| c.step == next);
            let Some(recorded) = recorded else { return Ok(false) };
            messages.clone_from(&recorded.messages);
            Ok(true)
        })
    }
}
