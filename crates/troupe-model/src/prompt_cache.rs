//! What OpenAI's wires send to keep a run's requests on one prompt cache.
//!
//! OpenAI caches prompt prefixes automatically and routes a request by a hash of its first
//! tokens and, when given, by `prompt_cache_key`: requests that share a key and a prefix
//! land where that prefix is cached. The key is made of what every request of an agent
//! shares — the model, the instructions and the tools' names — so that all its runs (and
//! every turn of each) share it, and different agents do not crowd one another's cache.

use troupe_core::{CacheTtl, ModelRequest};

/// `troupe-` and 16 hex digits (FNV-1a, 64 bits) of the model, instructions and tool names.
pub(crate) fn key(request: &ModelRequest) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes.iter().chain(std::iter::once(&0u8)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    feed(request.model.as_bytes());
    feed(request.system.as_deref().unwrap_or("").as_bytes());
    for tool in &request.tools {
        feed(tool.name.as_bytes());
    }
    format!("troupe-{hash:016x}")
}

/// OpenAI's `prompt_cache_retention` for `ttl`: `24h` for the long one, nothing (the
/// in-memory default) otherwise.
pub(crate) fn retention(ttl: CacheTtl) -> Option<&'static str> {
    match ttl {
        CacheTtl::Short => None,
        CacheTtl::Long => Some("24h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::{Message, ToolSpec};

    #[test]
    fn the_key_is_the_agents_not_the_turns() {
        let base =
            ModelRequest::new("gpt-5").system("Be brief.").tool(ToolSpec::new("fs.read", "", serde_json::json!({})));
        let later = base.clone().message(Message::user("more")).message(Message::assistant("reply"));
        assert_eq!(key(&base), key(&later), "the conversation is not in the key");
        assert!(key(&base).starts_with("troupe-") && key(&base).len() == 23);
        assert_ne!(key(&base), key(&base.clone().system("Be thorough.")));
        assert_ne!(key(&base), key(&base.clone().tool(ToolSpec::new("fs.write", "", serde_json::json!({})))));
    }
}
