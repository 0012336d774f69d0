//! The `[mcp]` table of a workspace's `troupe.toml`: servers every file-defined agent of the
//! workspace gets (an agent file's own `[[mcp.servers]]` of the same name replace them).
//!
//! Only `[mcp]` is read; the file's other tables belong to other parts of troupe.

use crate::config::McpSection;
use crate::error::McpConfigError;
use serde::Deserialize;
use std::path::Path;
use troupe_core::line_column;

/// The part of `troupe.toml` read here.
#[derive(Deserialize)]
struct WorkspaceFile {
    #[serde(default)]
    mcp: McpSection,
}

/// The `[mcp]` servers of the `troupe.toml` text `text` read from `path` (used in errors).
///
/// ```
/// use troupe_mcp::parse_workspace_servers;
///
/// let text = "[model]\ndefault_model = \"demo\"\n\n[[mcp.servers]]\nname = \"files\"\ncommand = \"mcp-files\"\n";
/// let section = parse_workspace_servers(text, "troupe.toml")?;
/// assert_eq!(section.servers[0].name, "files");
///
/// let typo = parse_workspace_servers(&text.replace("command", "comand"), "troupe.toml").unwrap_err();
/// assert!(typo.to_string().starts_with("troupe.toml:6:1: unknown field `comand`"), "{typo}");
/// # Ok::<(), troupe_mcp::McpConfigError>(())
/// ```
pub fn parse_workspace_servers(text: &str, path: impl AsRef<Path>) -> Result<McpSection, McpConfigError> {
    let path = path.as_ref();
    let file: WorkspaceFile = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|span| line_column(text, span.start));
        McpConfigError {
            path: path.to_owned(),
            line: at.map(|(line, _)| line),
            column: at.map(|(_, column)| column),
            message: e.message().trim().replace('\n', "; "),
        }
    })?;
    if let Some((name, index)) = file.mcp.duplicate() {
        let at = nth_server_table(text, index).map(|offset| line_column(text, offset));
        return Err(McpConfigError {
            path: path.to_owned(),
            line: at.map(|(line, _)| line),
            column: at.map(|(_, column)| column),
            message: format!("the MCP server `{name}` is configured twice in [[mcp.servers]]; keep one entry"),
        });
    }
    Ok(file.mcp)
}

/// The `[mcp]` servers of the `troupe.toml` at `path`; none when the file does not exist.
pub fn load_workspace_servers(path: impl AsRef<Path>) -> Result<McpSection, McpConfigError> {
    let path = path.as_ref();
    match std::fs::read_to_string(path) {
        Ok(text) => parse_workspace_servers(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(McpSection::default()),
        Err(e) => Err(McpConfigError {
            path: path.to_owned(),
            line: None,
            column: None,
            message: format!("cannot read it: {e}"),
        }),
    }
}

/// Where the `index`th `[[mcp.servers]]` header is written (the array-of-tables spelling).
fn nth_server_table(text: &str, index: usize) -> Option<usize> {
    let mut offset = 0;
    let mut seen = 0;
    for line in text.split_inclusive('\n') {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.starts_with("[[mcp.servers]]") {
            if seen == index {
                return Some(offset);
            }
            seen += 1;
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_tables_are_left_alone_and_a_missing_mcp_table_is_empty() {
        let section = parse_workspace_servers("[model]\nx = 1\n[providers.acme]\nkind = 2\n", "troupe.toml")
            .expect("other tables are not ours");
        assert!(section.is_empty());
        let missing = load_workspace_servers("/surely/not/here/troupe.toml").expect("absent is empty");
        assert!(missing.is_empty());
    }

    #[test]
    fn errors_point_at_the_place() {
        let text = "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\n\n[[mcp.servers]]\nname = \"a\"\ncommand = \"y\"\n";
        let twice = parse_workspace_servers(text, "troupe.toml").expect_err("duplicate");
        assert_eq!((twice.line, twice.column), (Some(5), Some(1)));
        assert!(twice.to_string().contains("configured twice"), "{twice}");
        let bad =
            parse_workspace_servers("[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\ntimeout_seconds = 0\n", "t.toml")
                .expect_err("zero");
        assert!(bad.to_string().starts_with("t.toml:4:19: 0 seconds"), "{bad}");
    }
}
