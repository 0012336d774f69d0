//! Memories: saved by namespace, found by every word of a query, newest first.

use super::harness::{Backend, T0};
use std::sync::Arc;

/// Namespaces keep memories apart; a search needs every word; `%` is a character.
pub async fn memories_are_found_by_their_words_within_their_namespace(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let first = store.save_memory("agent:coder", "The build uses cargo nextest", T0).await.expect("saved");
    let second = store.save_memory("agent:coder", "Deploys go through CARGO release", T0 + 1).await.expect("saved");
    store.save_memory("agent:tester", "cargo is the build tool", T0 + 2).await.expect("saved");
    store.save_memory("shared:ops", "100% of deploys are tagged", T0 + 3).await.expect("saved");
    assert!(second > first);

    let found = store.search_memory("agent:coder", "cargo", 0).await.expect("search");
    assert_eq!(found.iter().map(|m| m.id).collect::<Vec<_>>(), [second, first], "newest first, own namespace only");
    assert_eq!(found[1].content, "The build uses cargo nextest");
    assert_eq!(found[1].saved_at, T0);
    let both = store.search_memory("agent:coder", "build CARGO", 0).await.expect("search");
    assert_eq!(both.len(), 1, "every word must match, in any case");
    assert_eq!(store.search_memory("agent:coder", "", 1).await.expect("search").len(), 1, "the limit holds");
    assert_eq!(store.search_memory("shared:ops", "100%", 0).await.expect("search").len(), 1);
    assert!(store.search_memory("shared:ops", "1_0", 0).await.expect("search").is_empty(), "`_` is no wildcard");
    assert!(store.search_memory("agent:nobody", "cargo", 0).await.expect("search").is_empty());
}
