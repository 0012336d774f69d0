//! The names a definition may use: tool names and agent ids.

/// The built-in tools of `troupe-tools` (`coding_tools()` and `web_tools()`).
pub const BUILTIN_TOOLS: [&str; 11] = [
    "fs.read",
    "fs.write",
    "fs.edit",
    "fs.list",
    "fs.glob",
    "grep",
    "shell",
    "git.status",
    "git.diff",
    "web.fetch",
    "web.search",
];

/// Tools the coordinator gives workers: shared memory and delegation.
pub const COORDINATOR_TOOLS: [&str; 3] = ["memory.save", "memory.search", "delegate"];

/// The two tools that stand for the tools of MCP servers offered lazily (`tools = "lazy"`):
/// a search among them, and a call of one found.
pub const LAZY_MCP_TOOLS: [&str; 2] = [troupe_mcp::SEARCH_TOOL, troupe_mcp::CALL_TOOL];

/// Whether `name` may be listed in `[[tools]]`: a built-in or coordinator tool, an MCP
/// tool written `server/tool`, or one of the lazy MCP tools (`mcp_search_tools`,
/// `mcp_call_tool`).
pub fn is_known_tool(name: &str) -> bool {
    BUILTIN_TOOLS.contains(&name)
        || COORDINATOR_TOOLS.contains(&name)
        || LAZY_MCP_TOOLS.contains(&name)
        || name.split_once('/').is_some_and(|(server, tool)| !server.is_empty() && !tool.is_empty())
}

pub(crate) fn check_tool_name(name: &str) -> Result<(), String> {
    if is_known_tool(name) {
        return Ok(());
    }
    let known: Vec<&str> = BUILTIN_TOOLS.iter().chain(&COORDINATOR_TOOLS).chain(&LAZY_MCP_TOOLS).copied().collect();
    Err(format!("unknown tool `{name}`; known tools are {}, or an MCP tool written `server/tool`", known.join(", ")))
}

/// The longest agent id.
pub const MAX_ID_LEN: usize = 64;

/// Checks an agent id: it names files, processes and events, so it is kept to ASCII
/// letters, digits, `-` and `_`, starting with a letter or digit.
pub(crate) fn check_agent_id(id: &str) -> Result<(), String> {
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{id}` is not an agent id; use 1 to {MAX_ID_LEN} ASCII letters, digits, `-` or `_`, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_list_matches_troupe_tools() {
        let mut names: Vec<String> =
            troupe_tools::coding_tools().iter().map(|t| t.declaration().name.clone()).collect();
        let backend = troupe_tools::SearchBackend::searxng("http://localhost:8080");
        names.extend(troupe_tools::web_tools(Some(backend)).iter().map(|t| t.declaration().name.clone()));
        for name in &names {
            assert!(BUILTIN_TOOLS.contains(&name.as_str()), "`{name}` is missing from BUILTIN_TOOLS");
        }
        assert_eq!(names.len(), BUILTIN_TOOLS.len(), "{names:?}");
    }

    #[test]
    fn tool_names() {
        assert!(is_known_tool("git.diff") && is_known_tool("delegate") && is_known_tool("github/create_issue"));
        assert!(!is_known_tool("fs.raed") && !is_known_tool("/x") && !is_known_tool("x/"));
        let error = check_tool_name("fs.raed").expect_err("unknown");
        assert!(error.contains("fs.read, fs.write") && error.contains("memory.save"), "{error}");
    }

    #[test]
    fn agent_ids() {
        assert!(check_agent_id("code-reviewer_2").is_ok());
        for bad in ["", "-x", "a b", "a/b", "é", &"x".repeat(65)] {
            assert!(check_agent_id(bad).is_err(), "{bad:?}");
        }
    }
}
