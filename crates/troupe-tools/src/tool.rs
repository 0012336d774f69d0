//! The [`Tool`] trait and what a call receives and returns.

use crate::declaration::ToolDeclaration;
use crate::error::ToolError;
use crate::workspace::Workspace;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, RunId, ToolCallId};

/// A capability a model may call by its catalog name.
///
/// Implement it directly for tools that need their own state, or build one from a plain
/// async function with [`typed_tool`](crate::typed_tool). A tool does not validate its
/// caller's authority, approval or timeout: the [`ToolCatalog`](crate::ToolCatalog) and the
/// runner do that from the [`ToolDeclaration`].
pub trait Tool: Send + Sync {
    /// What the tool is and what its calls may do.
    fn declaration(&self) -> &ToolDeclaration;

    /// Runs one call with the model's `args` (normally a JSON object). The future must
    /// be `Send`; dropping it must stop the work (the catalog drops it on timeout and
    /// cancellation).
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;

    /// Whether a call with `args` may be run again without repeating its effect, when
    /// that depends on the arguments (a `delegate` to a teammate whose runs are recorded
    /// may be, one to a worker process may not). Recorded as the call starts, it decides
    /// what a resume does with the call if it never completed. By default the
    /// declaration's.
    fn idempotency(&self, args: &serde_json::Value) -> crate::Idempotency {
        let _ = args;
        self.declaration().idempotency
    }
}

/// What a call may use: the confined workspace, the run's cancellation, its own id.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The directory the call is confined to.
    pub workspace: Arc<Workspace>,
    /// Cancelled when the run is; long-running tools should watch it.
    pub cancel: CancellationToken,
    /// The model's id for this call.
    pub call_id: ToolCallId,
    /// The run making the call, when a runner makes it (a delegated run's parent).
    pub run_id: Option<RunId>,
    /// The agent making the call, when a runner makes it.
    pub agent: Option<String>,
}

impl ToolContext {
    /// A context for a call in `workspace`, with a fresh cancellation token and a generated
    /// call id.
    pub fn new(workspace: Arc<Workspace>) -> Self {
        ToolContext {
            workspace,
            cancel: CancellationToken::new(),
            call_id: ToolCallId::generate(),
            run_id: None,
            agent: None,
        }
    }

    /// The same context for another call.
    pub fn with_call_id(&self, call_id: impl Into<ToolCallId>) -> Self {
        ToolContext { call_id: call_id.into(), ..self.clone() }
    }

    /// The same context for calls of `agent` in run `run_id`.
    pub fn for_run(mut self, run_id: RunId, agent: impl Into<String>) -> Self {
        self.run_id = Some(run_id);
        self.agent = Some(agent.into());
        self
    }

    /// The same context watching `cancel`.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// A successful call's result.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// A machine-readable form of the result, for evidence and programs; never sent to
    /// the model.
    pub structured: Option<serde_json::Value>,
    /// Images and PDFs the result carries ([`ContentBlock::Image`],
    /// [`ContentBlock::Document`], as [`troupe_core::attachment`] makes them): the model
    /// sees them after the call's text, on the vendors that take them (others refuse the
    /// request with a clear error).
    pub attachments: Vec<ContentBlock>,
}

impl ToolOutput {
    /// A text-only result.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), structured: None, attachments: Vec::new() }
    }

    /// Attaches an image or a PDF (an [`ContentBlock::Image`] or [`ContentBlock::Document`]
    /// block) for the model to see with the result.
    pub fn with_attachment(mut self, attachment: ContentBlock) -> Self {
        self.attachments.push(attachment);
        self
    }

    /// Attaches a structured form of the result.
    pub fn with_structured(mut self, structured: serde_json::Value) -> Self {
        self.structured = Some(structured);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        ToolOutput::text(content)
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        ToolOutput::text(content)
    }
}
