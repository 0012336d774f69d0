//! The tool layer of troupe: what an agent's model may call, and how calls are run.
//!
//! A model calls tools by catalog name. The runner hands each call to a [`ToolCatalog`],
//! which finds the [`Tool`], validates the arguments against its generated schema, runs it
//! under its declared timeout and the run's cancellation, and turns *every* failure (an
//! unknown name, bad arguments, the tool's error, even a panic) into a
//! [`ToolResultOutcome`] the model reads and can correct. The catalog never fails its
//! caller.
//!
//! Each tool carries a [`ToolDeclaration`]: its [`Effect`] (read-only, write state,
//! external side effect, destructive), [`Idempotency`], [`EvidenceCapture`] and
//! [`ApprovalRequirement`]. The runner derives approval, resume and evidence from these
//! declarations, never from a tool's name. Read-only calls of one model turn run
//! concurrently ([`ToolCatalog::run_batch`]); the others run one at a time, in order.
//!
//! Tools are written as plain async functions over a typed arguments struct with
//! [`typed_tool`]: the input schema is generated from the struct (doc comments become
//! descriptions), never written by hand.
//!
//! The built-in workspace tools ([`coding_tools`], [`readonly_tools`]) are confined to a
//! [`Workspace`]: paths that escape it (absolute, `..`, symlinks leading out) are refused.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use std::sync::Arc;
//! use troupe_tools::{Effect, ToolCatalog, ToolContext, ToolOutput, Workspace, typed_tool};
//!
//! /// Arguments of `greet`.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let greet = typed_tool("greet", "Greets someone by name.", Effect::ReadOnly, |_ctx, args: Greet| async move {
//!     Ok(ToolOutput::text(format!("Hello, {}!", args.name)))
//! });
//! let mut catalog = ToolCatalog::new();
//! catalog.register(greet.into_arc())?;
//!
//! let dir = tempfile::tempdir()?;
//! let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path())?));
//!
//! let ok = catalog.invoke("greet", serde_json::json!({"name": "Ada"}), &ctx).await;
//! assert_eq!(ok.content, "Hello, Ada!");
//! assert!(!ok.is_error);
//!
//! // Mistakes come back as results the model can correct, never as a failure of the caller.
//! let bad = catalog.invoke("greet", serde_json::json!({"nmae": "Ada"}), &ctx).await;
//! assert!(bad.is_error);
//! assert!(bad.content.contains("missing required argument `name`"), "{}", bad.content);
//!
//! let block = ok.to_block("call_1"); // the ContentBlock::ToolResult for the next request
//! # let _ = block;
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod audit;
mod builtin;
mod capability;
mod catalog;
mod declaration;
mod error;
mod policy;
mod schema;
mod tool;
mod typed;
mod workspace;

pub use audit::{
    ALLOWED, AuditEntry, AuditKind, AuditLog, DENIED, FileAuditLog, MemoryAuditLog, NoAudit, arguments_digest,
};
pub use builtin::{
    EditArgs, GitDiffArgs, GitStatusArgs, GlobArgs, GrepArgs, ListArgs, ReadArgs, ShellArgs, ShellTool, WriteArgs,
    coding_tools, fs_edit, fs_glob, fs_list, fs_read, fs_write, git_diff, git_status, grep, readonly_tools,
};
pub use builtin::{SearchBackend, WebFetchArgs, WebFetchTool, WebSearchArgs, WebSearchTool, web_tools};
pub use capability::{AuthorizationDecision, Authorizer, CapabilityAuthorizer, CapabilitySet};
pub use catalog::{CatalogError, ToolCall, ToolCatalog, ToolResultOutcome};
pub use declaration::Access;
pub use declaration::{ApprovalRequirement, Effect, EvidenceCapture, Idempotency, ToolDeclaration};
pub use error::ToolError;
pub use policy::{DEFAULT_DENIAL, ToolPolicy};
pub use schema::{decode_arguments, is_object_schema, schema_for};
pub use tool::{Tool, ToolContext, ToolOutput};
pub use troupe_sandbox::{Sandbox, SandboxError, SandboxMode, SandboxReport, SandboxSettings, UnknownMode};
pub use typed::{IntoTool, IntoToolResult, TypedTool, typed_tool};

/// What the code `#[tool]` writes needs, under names a user's crate need not depend on.
#[doc(hidden)]
pub mod __private {
    pub use futures::future::BoxFuture;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
pub use workspace::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES, RESERVED_DIR, Workspace};
