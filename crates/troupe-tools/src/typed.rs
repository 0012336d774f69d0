//! Tools built from plain async functions over typed arguments.

use crate::declaration::{Access, ApprovalRequirement, Effect, EvidenceCapture, Idempotency, ToolDeclaration};
use crate::error::ToolError;
use crate::schema::{decode_arguments, schema_for};
use crate::tool::{Tool, ToolContext, ToolOutput};
use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

type Handler = dyn Fn(ToolContext, serde_json::Value, &serde_json::Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
    + Send
    + Sync;

/// A [`Tool`] made by [`typed_tool`]: a declaration whose schema is generated from the
/// arguments type, and a function that only ever sees arguments that decoded.
#[derive(Clone)]
pub struct TypedTool {
    declaration: ToolDeclaration,
    handler: Arc<Handler>,
}

/// Builds a tool from an async function taking typed arguments.
///
/// The input schema is generated from `A` (see [`schema_for`]); the model's arguments are
/// checked and decoded before `f` runs, so `f` never sees a missing, unknown (where `A`
/// denies unknown fields) or ill-typed argument. Defaults follow from `effect` (see
/// [`ToolDeclaration::new`]); the builder methods override them.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use troupe_tools::{typed_tool, Effect, ToolOutput};
///
/// /// Arguments of `math.add`.
/// #[derive(Deserialize, JsonSchema)]
/// #[serde(deny_unknown_fields)]
/// struct Add {
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// }
///
/// let tool = typed_tool("math.add", "Adds two integers.", Effect::ReadOnly, |_ctx, args: Add| async move {
///     Ok(ToolOutput::text((args.a + args.b).to_string()))
/// });
/// # use troupe_tools::Tool;
/// assert_eq!(tool.declaration().input_schema["required"], serde_json::json!(["a", "b"]));
/// ```
pub fn typed_tool<A, F, Fut>(name: impl Into<String>, description: impl Into<String>, effect: Effect, f: F) -> TypedTool
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    let declaration = ToolDeclaration::new(name, description, schema_for::<A>(), effect);
    let handler = move |ctx: ToolContext, args: serde_json::Value, schema: &serde_json::Value| match decode_arguments::<A>(
        schema, args,
    ) {
        Ok(args) => f(ctx, args).boxed(),
        Err(error) => futures::future::ready(Err(error)).boxed(),
    };
    TypedTool { declaration, handler: Arc::new(handler) }
}

impl TypedTool {
    /// Declares whether repeating a call is safe.
    pub fn idempotency(mut self, idempotency: Idempotency) -> Self {
        self.declaration.idempotency = idempotency;
        self
    }

    /// Declares how results are kept as evidence.
    pub fn evidence(mut self, evidence: EvidenceCapture) -> Self {
        self.declaration.evidence = evidence;
        self
    }

    /// Declares whether calls need approval.
    pub fn approval(mut self, approval: ApprovalRequirement) -> Self {
        self.declaration.approval = approval;
        self
    }

    /// Limits how long a call may run; the catalog stops it after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.declaration.timeout = Some(timeout);
        self
    }

    /// Declares what calls need access to, for capability checks (see [`Access`]).
    pub fn access(mut self, access: Vec<Access>) -> Self {
        self.declaration.access = access;
        self
    }

    /// Replaces the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.declaration.description = description.into();
        self
    }

    /// This tool behind an [`Arc`], as the catalog stores tools.
    pub fn into_arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for TypedTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (self.handler)(ctx.clone(), args, &self.declaration.input_schema)
    }
}

impl fmt::Debug for TypedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool").field("declaration", &self.declaration).finish_non_exhaustive()
    }
}

/// What a typed tool's function may return: a result whose value becomes the call's
/// output and whose error its failure (read by the model), or an output alone. The
/// `#[tool]` attribute returns through it.
pub trait IntoToolResult {
    /// The call's result.
    fn into_tool_result(self) -> Result<ToolOutput, ToolError>;
}

impl<T: Into<ToolOutput>, E: Into<ToolError>> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> Result<ToolOutput, ToolError> {
        self.map(Into::into).map_err(Into::into)
    }
}

impl IntoToolResult for ToolOutput {
    fn into_tool_result(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self))
    }
}

impl IntoToolResult for &str {
    fn into_tool_result(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self))
    }
}

/// Anything an agent builder's `.tool(…)` takes: a tool by value (a `#[tool]` unit
/// struct, a [`TypedTool`]), or one already shared in an `Arc`.
pub trait IntoTool {
    /// The tool, shared.
    fn into_tool(self) -> Arc<dyn Tool>;
}

impl<T: Tool + 'static> IntoTool for T {
    fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl<T: Tool + 'static> IntoTool for Arc<T> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}

impl IntoTool for Arc<dyn Tool> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}
