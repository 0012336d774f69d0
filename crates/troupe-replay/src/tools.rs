//! The tools of a replay: each call is answered with the recorded result of the same call
//! and nothing runs, or (live) it runs for real.

use crate::divergence::DivergenceKind;
use crate::session::Session;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;
use troupe_tools::{CatalogError, Idempotency, Tool, ToolCatalog, ToolContext, ToolDeclaration, ToolError, ToolOutput};

/// `catalog` with every tool answering through the replay.
pub(crate) fn catalog(catalog: &ToolCatalog, session: &Arc<Session>, live: bool) -> Result<ToolCatalog, CatalogError> {
    let mut tools = ToolCatalog::new();
    for name in catalog.names() {
        let Some(inner) = catalog.get(name) else { continue };
        let tool: Arc<dyn Tool> = Arc::new(ReplayTool { inner: Arc::clone(inner), session: Arc::clone(session), live });
        tools.register(tool)?;
    }
    Ok(tools)
}

/// One substituted tool.
struct ReplayTool {
    inner: Arc<dyn Tool>,
    session: Arc<Session>,
    live: bool,
}

impl Tool for ReplayTool {
    fn declaration(&self) -> &ToolDeclaration {
        self.inner.declaration()
    }

    fn idempotency(&self, args: &serde_json::Value) -> Idempotency {
        self.inner.idempotency(args)
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async move {
            self.session.progress().tool_calls += 1;
            let recording = &self.session.recording;
            let recorded = self.session.recorded_id(ctx.call_id.as_str());
            if let Some(id) = &recorded
                && recording.asked.contains(id)
                && !self.session.progress().asked.contains(id)
            {
                self.session.diverge(
                    DivergenceKind::ApprovalVerdict,
                    format!(
                        "{} ({id}) now runs without asking; the recorded run asked a person first",
                        self.declaration().name
                    ),
                );
            }
            if self.live {
                return self.inner.call(ctx, args).await;
            }
            match recorded.as_ref().and_then(|id| recording.results.get(id)) {
                Some(result) if result.is_error => Err(ToolError::failed(result.content.clone())),
                Some(result) => {
                    let output = ToolOutput::text(result.content.clone());
                    Ok(result.attachments.iter().cloned().fold(output, ToolOutput::with_attachment))
                }
                None => {
                    self.session.diverge(
                        DivergenceKind::ToolCall,
                        format!("{} {args}: the recorded run has no result for this call", self.declaration().name),
                    );
                    Err(ToolError::failed("the replay has no recorded result for this call"))
                }
            }
        }
        .boxed()
    }
}
