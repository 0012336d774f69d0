//! A session's `/undo`: before each file write or edit runs, the file as it was is kept
//! (once per file per turn), so the last turn's file changes can be put back. Changes a
//! command made (`shell`) are not seen, and `/undo` says so.

use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use troupe::runtime::{Middleware, MiddlewareError, ToolCallContext};
use troupe::tools::Workspace;

/// The tools whose calls change a file named by their `path` argument.
const FILE_TOOLS: [&str; 2] = ["fs.write", "fs.edit"];

/// Each file the current turn changed, as it was before (`None`: it did not exist).
type Turn = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// The journal: a middleware on the session's runs, and the turns it kept.
#[derive(Clone)]
pub(crate) struct UndoJournal {
    workspace: Arc<Workspace>,
    turns: Arc<Mutex<Vec<Turn>>>,
}

impl UndoJournal {
    /// A journal of the files in `workspace`.
    pub(crate) fn new(workspace: Workspace) -> Self {
        UndoJournal { workspace: Arc::new(workspace), turns: Arc::new(Mutex::new(Vec::new())) }
    }

    /// A new turn begins.
    pub(crate) fn begin_turn(&self) {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner).push(Turn::new());
    }

    /// Puts back the files the last turn that changed any changed; what was restored,
    /// for the person (workspace-relative paths), or why nothing was.
    pub(crate) fn undo(&self) -> Result<Vec<String>, String> {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        while turns.last().is_some_and(BTreeMap::is_empty) {
            turns.pop();
        }
        let Some(turn) = turns.pop() else {
            return Err("no file change to undo (changes made by commands are not tracked)".to_owned());
        };
        let mut restored = Vec::new();
        for (path, before) in turn {
            let shown = self.workspace.relative(&path);
            let done = match &before {
                Some(content) => std::fs::write(&path, content),
                None => std::fs::remove_file(&path).or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                }),
            };
            match done {
                Ok(()) if before.is_some() => restored.push(format!("{shown} restored")),
                Ok(()) => restored.push(format!("{shown} removed (it did not exist before)")),
                Err(error) => restored.push(format!("{shown}: cannot put it back: {error}")),
            }
        }
        Ok(restored)
    }
}

impl Middleware for UndoJournal {
    fn name(&self) -> &str {
        "undo"
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        arguments: &'a mut serde_json::Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        if FILE_TOOLS.contains(&ctx.tool.as_str())
            && let Some(path) = arguments.get("path").and_then(serde_json::Value::as_str)
            // A path outside the workspace is refused by the tool itself: nothing to keep.
            && let Ok(path) = self.workspace.resolve(path)
        {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(turn) = turns.last_mut()
                && !turn.contains_key(&path)
            {
                let before = std::fs::read(&path).ok();
                turn.insert(path, before);
            }
        }
        async { Ok(()) }.boxed()
    }
}
