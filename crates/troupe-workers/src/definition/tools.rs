//! The tools an agent may call: `[[tools]]`, `[[tools.deny]]`, and the [`ToolPolicy`]
//! made of them.
//!
//! Two spellings are accepted. The issue's:
//!
//! ```toml
//! [[tools]]
//! name = "fs.read"
//!
//! [[tools]]
//! name = "shell"
//! enabled = false
//!
//! [[tools.deny]]          # TOML attaches this to the last [[tools]] entry ...
//! name = "fs.write"
//! reason = "reviewers do not edit"
//! ```
//!
//! TOML has no way to write a deny list next to an array of tables under the same key:
//! `[[tools.deny]]` after `[[tools]]` adds `deny` to the *last* `[[tools]]` entry. The
//! nesting is an accident of the syntax, so deny entries are read as one agent-wide list
//! wherever they sit. And the table spelling, which says the same without the accident:
//!
//! ```toml
//! [tools]
//! [[tools.allow]]
//! name = "fs.read"
//!
//! [[tools.deny]]
//! name = "fs.write"
//! reason = "reviewers do not edit"
//! ```
//!
//! (A `[[tools.deny]]` written before any `[[tools]]` makes `tools` a table, after which
//! `[[tools]]` is a TOML error; use `[[tools.allow]]` then.) Both read into the same
//! [`ToolsSection`], which writes itself back in the table spelling.

use super::names::check_tool_name;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use troupe_tools::ToolPolicy;

/// A tool the agent may call (`[[tools]]` or `[[tools.allow]]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// The tool's catalog name (`fs.read`, `memory.save`, `server/tool` for MCP tools).
    #[serde(deserialize_with = "tool_name")]
    pub name: String,
    /// Whether the entry counts (default true); `false` keeps a tool listed but off.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// A tool the agent may not call, and why (`[[tools.deny]]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenyEntry {
    /// The tool's catalog name.
    #[serde(deserialize_with = "tool_name")]
    pub name: String,
    /// Why, for the model when it calls the tool anyway.
    #[serde(default = "default_reason")]
    pub reason: String,
}

/// The `[[tools]]` / `[tools]` part of a definition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolsSection {
    /// The tools the agent may call, in the file's order. None at all means every tool of
    /// the runner's catalog (minus [`deny`](Self::deny)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<ToolEntry>,
    /// The tools the agent may not call, whatever `allow` says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<DenyEntry>,
}

fn yes() -> bool {
    true
}

fn default_reason() -> String {
    "this agent's definition denies it".to_owned()
}

fn tool_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let name = String::deserialize(deserializer)?;
    check_tool_name(&name).map_err(serde::de::Error::custom)?;
    Ok(name)
}

/// `[[tools]]` entry: a tool, and the `[[tools.deny]]` tables TOML hung on it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArrayEntry {
    #[serde(deserialize_with = "tool_name")]
    name: String,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    deny: Vec<DenyEntry>,
}

/// The `[tools]` table spelling.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableForm {
    #[serde(default)]
    allow: Vec<ToolEntry>,
    #[serde(default)]
    deny: Vec<DenyEntry>,
}

impl<'de> Deserialize<'de> for ToolsSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = ToolsSection;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("[[tools]] entries or a [tools] table with `allow` and `deny`")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ToolsSection, A::Error> {
                // Delegating keeps toml's spans on errors inside the entries.
                let entries = Vec::<ArrayEntry>::deserialize(SeqAccessDeserializer::new(seq))?;
                let mut section = ToolsSection::default();
                for entry in entries {
                    section.allow.push(ToolEntry { name: entry.name, enabled: entry.enabled });
                    section.deny.extend(entry.deny);
                }
                Ok(section)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ToolsSection, A::Error> {
                let table = TableForm::deserialize(MapAccessDeserializer::new(map))?;
                Ok(ToolsSection { allow: table.allow, deny: table.deny })
            }
        }
        deserializer.deserialize_any(Either)
    }
}

impl ToolsSection {
    /// Whether the section says nothing (every tool, none denied).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// The enabled, not denied tools in the file's order; `None` when no tool is listed.
    pub fn enabled(&self) -> Option<Vec<String>> {
        if self.allow.is_empty() {
            return None;
        }
        let denied: BTreeSet<&str> = self.deny.iter().map(|d| d.name.as_str()).collect();
        Some(
            self.allow
                .iter()
                .filter(|t| t.enabled && !denied.contains(t.name.as_str()))
                .map(|t| t.name.clone())
                .collect(),
        )
    }

    /// The policy these entries make.
    pub fn policy(&self) -> ToolPolicy {
        let policy = match self.enabled() {
            Some(names) => ToolPolicy::only(names),
            None => ToolPolicy::allow_all(),
        };
        self.deny.iter().fold(policy, |policy, d| policy.deny_because(d.name.clone(), d.reason.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        tools: ToolsSection,
    }

    fn tools(text: &str) -> ToolsSection {
        toml::from_str::<Doc>(text).expect("valid tools").tools
    }

    #[test]
    fn the_issue_spelling_gathers_nested_denies_into_one_list() {
        let section = tools(
            "[[tools]]\nname = \"fs.read\"\n[[tools]]\nname = \"shell\"\nenabled = false\n\
             [[tools.deny]]\nname = \"fs.write\"\nreason = \"no edits\"\n[[tools]]\nname = \"grep\"\n\
             [[tools.deny]]\nname = \"grep\"\n",
        );
        let names: Vec<&str> = section.allow.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fs.read", "shell", "grep"]);
        assert_eq!(section.deny.len(), 2);
        assert_eq!(section.enabled(), Some(vec!["fs.read".to_owned()]), "shell is off and grep denied");
        let policy = section.policy();
        assert_eq!(policy.check("fs.read"), Ok(()));
        let denied = policy.check("fs.write").expect_err("denied");
        assert!(denied.contains("no edits"), "{denied}");
        assert!(policy.check("grep").expect_err("denied").contains("denies it"), "default reason");
        assert!(policy.check("shell").expect_err("off").contains("not among"));
    }

    #[test]
    fn the_table_spelling_round_trips() {
        let section = tools("[[tools.allow]]\nname = \"fs.read\"\n[[tools.deny]]\nname = \"shell\"\nreason = \"r\"\n");
        assert_eq!(section.allow.len(), 1);
        assert_eq!(section.deny[0].reason, "r");
        #[derive(Serialize)]
        struct Out<'a> {
            tools: &'a ToolsSection,
        }
        let text = toml::to_string(&Out { tools: &section }).expect("serializes");
        assert_eq!(tools(&text), section, "{text}");
    }

    #[test]
    fn deny_only_denies_from_every_tool() {
        let policy = tools("[[tools.deny]]\nname = \"shell\"\n").policy();
        assert_eq!(policy.allowed(), None);
        assert!(policy.check("fs.write").is_ok());
        assert!(policy.check("shell").is_err());
        assert_eq!(ToolsSection::default().enabled(), None);
    }
}
