//! Catalog names of MCP tools, and the check that they stay distinct on the wire.
//!
//! An MCP tool `create_issue` of the server `github` is the catalog tool
//! `github/create_issue`: the spelling agent files already use in `[[tools]]` and approval
//! rules (`github/*`). Providers only accept `^[a-zA-Z0-9_-]{1,64}$`, so the model layer
//! sends it as `github_create_issue` and maps the calls back; two catalog names that encode
//! to one wire name could not be told apart, so that is a configuration error found when the
//! tools are assembled ([`check_wire_names`]), not at the first model call.

use crate::error::McpError;
use std::collections::HashMap;
use troupe_model::wire_name;

/// The catalog name of the MCP tool `tool` of the server `server`: `server/tool`.
pub fn catalog_name(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

/// Checks that no two of `names` (catalog names: MCP tools, built-in tools, anything the
/// agent is offered) encode to the same wire name.
///
/// ```
/// use troupe_mcp::{McpError, check_wire_names};
///
/// assert!(check_wire_names(["fs.read", "github/create_issue", "github/get_issue"]).is_ok());
/// let clash = check_wire_names(["fs.read", "fs/read"]).unwrap_err();
/// assert!(matches!(clash, McpError::NameCollision { ref wire, .. } if wire == "fs_read"));
/// ```
pub fn check_wire_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), McpError> {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for name in names {
        let wire = wire_name(name).into_owned();
        match seen.get(&wire) {
            Some(first) if *first != name => {
                return Err(McpError::NameCollision { first: (*first).to_owned(), second: name.to_owned(), wire });
            }
            _ => {
                seen.insert(wire, name);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_join_server_and_tool() {
        assert_eq!(catalog_name("everything", "get-sum"), "everything/get-sum");
    }

    #[test]
    fn collisions_include_truncation() {
        let long = "x".repeat(70);
        let a = catalog_name("s", &format!("{long}a"));
        let b = catalog_name("s", &format!("{long}b"));
        assert!(matches!(check_wire_names([a.as_str(), b.as_str()]), Err(McpError::NameCollision { .. })));
        assert!(check_wire_names(["a/b", "a/b"]).is_ok(), "the same name twice is the catalog's business");
        let clash = check_wire_names(["a_b/c", "a/b_c"]).expect_err("both a_b_c");
        assert!(clash.to_string().contains("`a_b/c` and `a/b_c` both become `a_b_c`"), "{clash}");
    }
}
