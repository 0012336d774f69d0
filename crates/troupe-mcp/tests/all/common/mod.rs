//! The MCP reference server (`@modelcontextprotocol/server-everything`, installed by
//! `scripts/install-test-deps`) as a test peer.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use troupe_mcp::McpServerConfig;
use troupe_testkit::test_deps;

/// The npm package of the reference server.
pub const PACKAGE: &str = "@modelcontextprotocol/server-everything";

/// The server's entry script, or `None` (after printing why) when node or the package is
/// missing.
pub fn everything_script(test: &str) -> Option<PathBuf> {
    match test_deps::node_modules(PACKAGE) {
        Some(modules) => Some(modules.join(PACKAGE).join("dist/index.js")),
        None => {
            test_deps::skip(test, &format!("node or {PACKAGE} is not installed"));
            None
        }
    }
}

/// The reference server over stdio, named `everything`.
pub fn everything(test: &str) -> Option<McpServerConfig> {
    let script = everything_script(test)?;
    Some(McpServerConfig::stdio("everything", "node", vec![script.to_string_lossy().into_owned(), "stdio".into()]))
}
