//! Shared set-up of the integration tests: a workspace inside a temporary directory, with a
//! sibling directory outside it holding a secret.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use troupe_tools::{ToolCatalog, ToolContext, ToolError, ToolResultOutcome, Workspace, coding_tools};

/// The text of the file outside the workspace; no tool may ever return it.
pub const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-WORKSPACE";

/// A temporary directory holding `ws/` (the workspace) and `outside/secret.txt`.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
    pub catalog: ToolCatalog,
    pub ctx: ToolContext,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).expect("create ws");
        std::fs::create_dir_all(&outside).expect("create outside");
        std::fs::write(outside.join("secret.txt"), SECRET).expect("write secret");
        let workspace = Arc::new(Workspace::new(&root).expect("workspace"));
        let catalog = ToolCatalog::with_tools(coding_tools()).expect("catalog");
        Fixture { _dir: dir, root, outside, catalog, ctx: ToolContext::new(workspace) }
    }

    /// Writes `content` to `rel` under the workspace, creating parents.
    pub fn write(&self, rel: impl AsRef<Path>, content: impl AsRef<[u8]>) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("create parents");
        std::fs::write(path, content).expect("write file");
    }

    /// Creates a symlink `ws/rel` pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<Path>, rel: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, self.root.join(rel)).expect("symlink");
    }

    pub async fn call(&self, name: &str, args: Value) -> ToolResultOutcome {
        self.catalog.invoke(name, args, &self.ctx).await
    }
}

/// The outcome's content, asserting it succeeded.
pub fn ok(outcome: &ToolResultOutcome) -> &str {
    assert!(!outcome.is_error, "expected success, got error: {}", outcome.content);
    &outcome.content
}

/// The outcome's error, asserting it failed.
pub fn err(outcome: &ToolResultOutcome) -> &ToolError {
    assert!(outcome.is_error, "expected an error, got: {}", outcome.content);
    outcome.error.as_ref().expect("an error outcome carries its error")
}

/// Asserts the outcome is a refusal for leaving the workspace, which does not leak the secret.
pub fn assert_outside(outcome: &ToolResultOutcome) {
    assert!(
        matches!(err(outcome), ToolError::PathOutsideWorkspace { .. }),
        "expected PathOutsideWorkspace, got {:?}",
        outcome.error
    );
    assert!(!outcome.content.contains(SECRET), "the secret leaked: {}", outcome.content);
}
