//! The catalog of tools an agent may call, and the contained execution of their calls.

use crate::declaration::ToolDeclaration;
use crate::error::ToolError;
use crate::schema::is_object_schema;
use crate::tool::{Tool, ToolContext, ToolOutput};
use futures::{FutureExt, StreamExt};
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use troupe_core::{ContentBlock, ToolCallId, ToolSpec};

/// Why a catalog could not be built as asked. These are configuration errors of the
/// program, found when the catalog is assembled rather than at the first call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two tools share a name.
    #[error("a tool named `{name}` is already registered")]
    DuplicateName {
        /// The shared name.
        name: String,
    },
    /// A tool's input schema is not an object schema, which providers require.
    #[error("tool `{name}` has an input schema that is not `{{\"type\": \"object\"}}`")]
    InvalidSchema {
        /// The tool's name.
        name: String,
    },
    /// A subset named a tool the catalog does not have.
    #[error("no tool named `{name}` in the catalog (known: {known})")]
    UnknownTool {
        /// The missing name.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
}

/// One tool call a model requested.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: ToolCallId,
    /// The catalog name called.
    pub name: String,
    /// The arguments, as the model sent them.
    pub args: serde_json::Value,
}

impl ToolCall {
    /// A tool call.
    pub fn new(id: impl Into<ToolCallId>, name: impl Into<String>, args: serde_json::Value) -> Self {
        ToolCall { id: id.into(), name: name.into(), args }
    }

    /// The call a [`ContentBlock::ToolUse`] block requests; `None` for other blocks.
    pub fn from_block(block: &ContentBlock) -> Option<Self> {
        match block {
            ContentBlock::ToolUse { id, name, input, .. } => {
                Some(ToolCall::new(id.clone(), name.clone(), input.clone()))
            }
            _ => None,
        }
    }
}

/// What one call came to, success or failure: always something the model can read.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultOutcome {
    /// What the model sees: the tool's output, or the error's message.
    pub content: String,
    /// Whether `content` describes a failure.
    pub is_error: bool,
    /// The tool's structured output, on success where it gave one.
    pub structured: Option<serde_json::Value>,
    /// The images and PDFs the result carries, on success (see
    /// [`ToolOutput::attachments`]).
    pub attachments: Vec<troupe_core::ContentBlock>,
    /// The failure, typed, for the runner's evidence and policy.
    pub error: Option<ToolError>,
    /// How long the call took.
    pub elapsed: Duration,
}

impl ToolResultOutcome {
    /// The outcome of a successful call.
    pub fn success(output: ToolOutput, elapsed: Duration) -> Self {
        ToolResultOutcome {
            content: output.content,
            is_error: false,
            structured: output.structured,
            attachments: output.attachments,
            error: None,
            elapsed,
        }
    }

    /// The outcome of a failed call.
    pub fn failure(error: ToolError, elapsed: Duration) -> Self {
        ToolResultOutcome {
            content: error.to_string(),
            is_error: true,
            structured: None,
            attachments: Vec::new(),
            error: Some(error),
            elapsed,
        }
    }

    /// The [`ContentBlock::ToolResult`] that answers `call_id`.
    pub fn to_block(&self, call_id: impl Into<ToolCallId>) -> ContentBlock {
        ContentBlock::ToolResult { tool_use_id: call_id.into(), content: self.content.clone(), is_error: self.is_error }
    }
}

/// The tools an agent may call, by name, in registration order.
#[derive(Clone, Default)]
pub struct ToolCatalog {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
}

impl ToolCatalog {
    /// An empty catalog.
    pub fn new() -> Self {
        ToolCatalog::default()
    }

    /// A catalog of `tools`.
    pub fn with_tools(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, CatalogError> {
        let mut catalog = ToolCatalog::new();
        catalog.register_all(tools)?;
        Ok(catalog)
    }

    /// Adds a tool; its name must be new and its input schema an object schema.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), CatalogError> {
        let declaration = tool.declaration();
        let name = declaration.name.clone();
        if self.index.contains_key(&name) {
            return Err(CatalogError::DuplicateName { name });
        }
        if !is_object_schema(&declaration.input_schema) {
            return Err(CatalogError::InvalidSchema { name });
        }
        self.index.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// Adds several tools, stopping at the first that cannot be added.
    pub fn register_all(&mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<(), CatalogError> {
        tools.into_iter().try_for_each(|tool| self.register(tool))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tools' names, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.declaration().name.as_str()).collect()
    }

    /// How many tools the catalog holds.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the catalog holds no tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as offered to a model, for [`ModelRequest::tools`](troupe_core::ModelRequest::tools).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.declaration().spec()).collect()
    }

    /// Every tool's declaration, in registration order.
    pub fn declarations(&self) -> Vec<&ToolDeclaration> {
        self.tools.iter().map(|t| t.declaration()).collect()
    }

    /// A catalog of only the named tools (in this catalog's order), to restrict what one
    /// agent may call. Naming a tool the catalog lacks is an error.
    pub fn subset<S: AsRef<str>>(&self, names: &[S]) -> Result<ToolCatalog, CatalogError> {
        let mut wanted = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            match self.index.get(name) {
                Some(&i) => wanted.push(i),
                None => {
                    return Err(CatalogError::UnknownTool { name: name.to_owned(), known: self.names().join(", ") });
                }
            }
        }
        wanted.sort_unstable();
        wanted.dedup();
        ToolCatalog::with_tools(wanted.into_iter().map(|i| Arc::clone(&self.tools[i])))
    }

    /// Runs one call and never fails the caller: an unknown name, invalid arguments, the
    /// tool's own error, a panic inside the tool, the declared timeout and cancellation of
    /// `ctx.cancel` all become an error outcome the model can read and correct.
    pub async fn invoke(&self, name: &str, args: serde_json::Value, ctx: &ToolContext) -> ToolResultOutcome {
        let started = Instant::now();
        let result = match self.get(name) {
            Some(tool) => run_contained(tool.as_ref(), args, ctx).await,
            None => Err(ToolError::UnknownTool {
                name: name.to_owned(),
                known: self.names().into_iter().map(str::to_owned).collect(),
            }),
        };
        match result {
            Ok(output) => ToolResultOutcome::success(output, started.elapsed()),
            Err(error) => ToolResultOutcome::failure(error, started.elapsed()),
        }
    }

    /// Runs the calls of one model turn and returns their outcomes in the calls' order.
    ///
    /// Consecutive read-only calls run concurrently, at most `max_concurrency` at a time
    /// (0 counts as 1); every other call runs alone, after the calls before it finished and
    /// before the calls after it start, so a read that follows a write sees the write.
    /// Each call gets `ctx` with its own call id.
    pub async fn run_batch(
        &self,
        calls: &[ToolCall],
        ctx: &ToolContext,
        max_concurrency: usize,
    ) -> Vec<ToolResultOutcome> {
        let limit = max_concurrency.max(1);
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut start = 0;
        while start < calls.len() {
            if !self.runs_concurrently(&calls[start]) {
                let call = &calls[start];
                outcomes.push(self.invoke(&call.name, call.args.clone(), &ctx.with_call_id(call.id.clone())).await);
                start += 1;
                continue;
            }
            let end = calls[start..]
                .iter()
                .position(|call| !self.runs_concurrently(call))
                .map_or(calls.len(), |offset| start + offset);
            // Collected first: a stream holding the mapping closure makes this future
            // impossible to prove `Send` inside a spawned task (a higher-ranked lifetime).
            let pending: Vec<_> = calls[start..end]
                .iter()
                .map(|call| {
                    let call_ctx = ctx.with_call_id(call.id.clone());
                    async move { self.invoke(&call.name, call.args.clone(), &call_ctx).await }
                })
                .collect();
            let group = futures::stream::iter(pending).buffered(limit).collect::<Vec<_>>().await;
            outcomes.extend(group);
            start = end;
        }
        outcomes
    }

    /// Read-only calls may overlap; so may calls of unknown tools, which fail at once.
    fn runs_concurrently(&self, call: &ToolCall) -> bool {
        self.get(&call.name).is_none_or(|tool| tool.declaration().is_read_only())
    }
}

/// Runs `tool` with its panics, timeout and cancellation turned into errors.
async fn run_contained(tool: &dyn Tool, args: serde_json::Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    // `call` itself may panic before it returns a future, as well as the future when polled.
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.call(ctx, args))) {
        Ok(future) => future,
        Err(payload) => return Err(ToolError::Panicked { message: panic_message(payload.as_ref()) }),
    };
    let contained = AssertUnwindSafe(future).catch_unwind().map(|result| {
        result.unwrap_or_else(|payload| Err(ToolError::Panicked { message: panic_message(payload.as_ref()) }))
    });
    let limited = async {
        match tool.declaration().timeout {
            Some(after) => tokio::time::timeout(after, contained).await.unwrap_or(Err(ToolError::Timeout { after })),
            None => contained.await,
        }
    };
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        result = limited => result,
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "no message".to_owned()
    }
}

impl fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCatalog").field("tools", &self.names()).finish()
    }
}
