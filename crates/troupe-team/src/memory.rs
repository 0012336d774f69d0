//! Agents' memory: `memory.save` and `memory.search`, persisted in the store.
//!
//! A [`MemoryScope`] says whose memory the tools reach: an agent's own (`isolated`), or a
//! memory shared by every agent of a category (`shared`). Memories live in the store,
//! so they outlast the run and, on PostgreSQL, are shared across machines.

use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;
use troupe_store::{Store, now_millis};
use troupe_tools::{ApprovalRequirement, Effect, Idempotency, Tool, ToolError, ToolOutput, typed_tool};

/// The most memories a search returns by default.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;

/// The longest memory saved, in characters; longer content is refused, not cut.
pub const MAX_MEMORY_CHARS: usize = 8_000;

/// Whose memory the tools reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryScope {
    /// The agent's own memory.
    Isolated {
        /// The agent's id.
        agent: String,
    },
    /// A memory shared by the agents of a category.
    Shared {
        /// The category (`project`, `research`, ...).
        category: String,
    },
}

impl MemoryScope {
    /// The store namespace: `agent:<id>` or `shared:<category>`.
    pub fn namespace(&self) -> String {
        match self {
            MemoryScope::Isolated { agent } => format!("agent:{agent}"),
            MemoryScope::Shared { category } => format!("shared:{category}"),
        }
    }
}

/// Arguments of `memory.save`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Save {
    /// What to remember: a fact, a decision, a preference, in one or a few sentences.
    content: String,
}

/// Arguments of `memory.search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Search {
    /// Words the memories must all contain (any case); empty for the most recent ones.
    query: String,
    /// How many memories to return at most (default 10).
    #[serde(default)]
    limit: Option<u32>,
}

/// The two memory tools for `scope`, on `store`.
pub fn memory_tools(store: Arc<dyn Store>, scope: &MemoryScope) -> Vec<Arc<dyn Tool>> {
    let namespace = Arc::new(scope.namespace());
    let (save_store, save_namespace) = (Arc::clone(&store), Arc::clone(&namespace));
    let save = typed_tool(
        "memory.save",
        "Saves something worth remembering across runs (a fact, a decision, a preference).",
        Effect::WriteState,
        move |_ctx, args: Save| {
            let (store, namespace) = (Arc::clone(&save_store), Arc::clone(&save_namespace));
            async move {
                let content = args.content.trim();
                if content.is_empty() {
                    return Err(ToolError::Failed { message: "there is nothing to save: `content` is empty".into() });
                }
                if content.chars().count() > MAX_MEMORY_CHARS {
                    return Err(ToolError::Failed {
                        message: format!("a memory holds at most {MAX_MEMORY_CHARS} characters; save a summary"),
                    });
                }
                let id = store
                    .save_memory(&namespace, content, now_millis())
                    .await
                    .map_err(|e| ToolError::Failed { message: format!("the memory could not be saved: {e}") })?;
                Ok(ToolOutput::text(format!("Saved as memory {id}.")))
            }
        },
    )
    // Saving twice keeps two copies; an agent's own memory needs no person's approval.
    .idempotency(Idempotency::NonIdempotent)
    .approval(ApprovalRequirement::NotRequired)
    .into_arc();
    let search = typed_tool(
        "memory.search",
        "Finds saved memories containing every given word, newest first.",
        Effect::ReadOnly,
        move |_ctx, args: Search| {
            let (store, namespace) = (Arc::clone(&store), Arc::clone(&namespace));
            async move {
                let limit = args.limit.unwrap_or(DEFAULT_SEARCH_LIMIT).clamp(1, 100);
                let found = store
                    .search_memory(&namespace, &args.query, limit)
                    .await
                    .map_err(|e| ToolError::Failed { message: format!("the memory could not be searched: {e}") })?;
                if found.is_empty() {
                    return Ok(ToolOutput::text("No memory matches."));
                }
                let lines: Vec<String> = found.iter().map(|m| format!("- [{}] {}", m.id, m.content)).collect();
                Ok(ToolOutput::text(lines.join("\n")))
            }
        },
    )
    .into_arc();
    vec![save, search]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_tools::{ToolCatalog, ToolContext, Workspace};

    #[tokio::test]
    async fn isolated_and_shared_memories_are_kept_apart_and_persist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = dir.path().join("troupe.db");
        let store = troupe_store::open(url.to_str().expect("utf-8")).await.expect("opens");
        let coder =
            ToolCatalog::with_tools(memory_tools(Arc::clone(&store), &MemoryScope::Isolated { agent: "coder".into() }))
                .expect("a catalog");
        let team = ToolCatalog::with_tools(memory_tools(
            Arc::clone(&store),
            &MemoryScope::Shared { category: "project".into() },
        ))
        .expect("a catalog");
        let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
        let saved = coder.invoke("memory.save", json!({"content": "The API uses port 8787"}), &ctx).await;
        assert!(!saved.is_error && saved.content.starts_with("Saved as memory"), "{saved:?}");
        let empty = coder.invoke("memory.save", json!({"content": "  "}), &ctx).await;
        assert!(empty.is_error);

        let found = coder.invoke("memory.search", json!({"query": "port API"}), &ctx).await;
        assert!(found.content.contains("8787"), "{found:?}");
        let elsewhere = team.invoke("memory.search", json!({"query": "port"}), &ctx).await;
        assert_eq!(elsewhere.content, "No memory matches.", "an isolated memory is not shared");

        // A new store handle (a new process) finds it again.
        drop(store);
        let reopened = troupe_store::open(url.to_str().expect("utf-8")).await.expect("reopens");
        let again = ToolCatalog::with_tools(memory_tools(reopened, &MemoryScope::Isolated { agent: "coder".into() }))
            .expect("a catalog");
        assert!(again.invoke("memory.search", json!({"query": "8787"}), &ctx).await.content.contains("port 8787"));
    }
}
