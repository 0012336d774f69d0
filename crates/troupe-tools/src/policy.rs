//! [`ToolPolicy`]: which tools an agent may call, and why a tool is denied.
//!
//! One type wherever the question is asked: an agent file's `[[tools]]` section makes
//! one, a process worker receives it in its task and cuts its catalog down to it, and the
//! coordinator checks the worker's events against the same value.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The reason given for a tool denied without one.
pub const DEFAULT_DENIAL: &str = "the agent's policy denies it";

/// Which tools an agent may call: the allowed ones (or every tool), minus the denied ones,
/// each denied with a reason the model is told.
///
/// ```
/// use troupe_tools::ToolPolicy;
///
/// let policy = ToolPolicy::only(["fs.read", "shell"]).deny_because("shell", "reviewers run nothing");
/// assert!(policy.permits("fs.read"));
/// assert!(!policy.permits("shell"));
/// assert!(policy.check("shell").expect_err("denied").contains("reviewers run nothing"));
/// assert!(policy.check("fs.write").expect_err("not allowed").contains("not among this agent's tools"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolPolicy {
    /// The only tools that may be called; `None` for every tool not denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed: Option<BTreeSet<String>>,
    /// Tools that may never be called, whatever `allowed` says, with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "denied_tools")]
    denied: BTreeMap<String, String>,
}

impl ToolPolicy {
    /// Every tool allowed.
    pub fn allow_all() -> Self {
        ToolPolicy::default()
    }

    /// Only the named tools.
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        ToolPolicy::default().allowing(names)
    }

    /// The same policy with its allowed tools replaced by `names`.
    pub fn allowing<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.allowed = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The same policy, also denying `name` (for [`DEFAULT_DENIAL`]).
    pub fn deny(self, name: impl Into<String>) -> Self {
        self.deny_because(name, DEFAULT_DENIAL)
    }

    /// The same policy, also denying `name` for `reason`. A tool denied twice keeps its
    /// first reason.
    pub fn deny_because(mut self, name: impl Into<String>, reason: impl Into<String>) -> Self {
        self.denied.entry(name.into()).or_insert_with(|| reason.into());
        self
    }

    /// The allowed tools; `None` when every tool not denied is.
    pub fn allowed(&self) -> Option<&BTreeSet<String>> {
        self.allowed.as_ref()
    }

    /// The denied tools, each with why.
    pub fn denied(&self) -> &BTreeMap<String, String> {
        &self.denied
    }

    /// Whether `tool` may be called.
    pub fn permits(&self, tool: &str) -> bool {
        self.check(tool).is_ok()
    }

    /// Whether `tool` may be called; `Err` says why not, in words for the model.
    pub fn check(&self, tool: &str) -> Result<(), String> {
        if let Some(reason) = self.denied.get(tool) {
            return Err(format!("`{tool}` is denied: {reason}"));
        }
        match &self.allowed {
            Some(allowed) if !allowed.contains(tool) => {
                let list: Vec<&str> = allowed.iter().map(String::as_str).collect();
                let list = if list.is_empty() { "none".to_owned() } else { list.join(", ") };
                Err(format!("`{tool}` is not among this agent's tools ({list})"))
            }
            _ => Ok(()),
        }
    }

    /// What both policies permit: the allowed tools both allow, the tools either denies
    /// (with this policy's reason where both give one).
    pub fn and(&self, other: &ToolPolicy) -> ToolPolicy {
        let allowed = match (&self.allowed, &other.allowed) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
        };
        let mut denied = other.denied.clone();
        denied.extend(self.denied.iter().map(|(name, reason)| (name.clone(), reason.clone())));
        ToolPolicy { allowed, denied }
    }
}

/// The denied tools as a map of name to reason, or as a plain list of names (each denied
/// for [`DEFAULT_DENIAL`]), as tasks written before reasons were sent have them.
fn denied_tools<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Denied {
        WithReasons(BTreeMap<String, String>),
        Names(Vec<String>),
    }
    Ok(match Denied::deserialize(deserializer)? {
        Denied::WithReasons(map) => map,
        Denied::Names(names) => names.into_iter().map(|name| (name, DEFAULT_DENIAL.to_owned())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_denied_tool_is_refused_with_its_reason_even_when_allowed() {
        let policy = ToolPolicy::only(["fs.read", "shell"]).deny_because("shell", "no commands");
        assert_eq!(policy.check("fs.read"), Ok(()));
        assert_eq!(policy.check("shell"), Err("`shell` is denied: no commands".to_owned()));
        assert!(!policy.permits("fs.write"));
        assert!(ToolPolicy::allow_all().permits("anything"));
        assert!(ToolPolicy::only(Vec::<String>::new()).check("x").expect_err("none allowed").contains("(none)"));
    }

    #[test]
    fn two_policies_permit_only_what_both_permit() {
        let file = ToolPolicy::only(["fs.read", "grep", "shell"]).deny_because("shell", "from the file");
        let team = ToolPolicy::only(["fs.read", "shell"]).deny_because("shell", "from the team").deny("grep");
        let both = file.and(&team);
        assert_eq!(
            both.allowed().map(|a| a.iter().map(String::as_str).collect::<Vec<_>>()),
            Some(vec!["fs.read", "shell"])
        );
        assert_eq!(both.denied().get("shell").map(String::as_str), Some("from the file"));
        assert_eq!(both.denied().get("grep").map(String::as_str), Some(DEFAULT_DENIAL));
        assert_eq!(ToolPolicy::allow_all().and(&ToolPolicy::allow_all()), ToolPolicy::allow_all());
    }

    #[test]
    fn the_wire_form_keeps_reasons_and_reads_a_plain_list() {
        let policy = ToolPolicy::only(["fs.read"]).deny_because("shell", "no commands");
        let wire = serde_json::to_value(&policy).expect("serializes");
        assert_eq!(wire, json!({"allowed": ["fs.read"], "denied": {"shell": "no commands"}}));
        assert_eq!(serde_json::from_value::<ToolPolicy>(wire).expect("reads back"), policy);
        let listed: ToolPolicy = serde_json::from_value(json!({"denied": ["shell"]})).expect("a list reads");
        assert_eq!(listed, ToolPolicy::allow_all().deny("shell"));
        assert_eq!(serde_json::to_value(ToolPolicy::allow_all()).expect("serializes"), json!({}));
        assert!(serde_json::from_value::<ToolPolicy>(json!({"denied": 3})).is_err(), "bad input is an error");
    }
}
