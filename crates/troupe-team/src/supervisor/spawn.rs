//! What a child may be: how deep and how many ([`RecursiveSpawnGuard`]), and never more
//! than its parent (tools, limits, approval policy).

use super::budget::Spend;
use crate::TeamError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;
use troupe_runtime::{AgentSpec, ApprovalMode, ApprovalPolicy, ApprovalRule, Limits, RuleAction};

/// Bounds on agents spawning agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecursiveSpawnGuard {
    /// The deepest an agent may be: roots are at depth 0, their children at 1, ...
    pub max_depth: usize,
    /// The most children one agent may have at once (terminated ones do not count).
    pub max_children: usize,
}

impl Default for RecursiveSpawnGuard {
    /// Depth 3, 8 children.
    fn default() -> Self {
        RecursiveSpawnGuard { max_depth: 3, max_children: 8 }
    }
}

impl RecursiveSpawnGuard {
    /// A guard allowing `max_depth` levels below the roots and `max_children` per agent.
    pub fn new(max_depth: usize, max_children: usize) -> Self {
        RecursiveSpawnGuard { max_depth, max_children }
    }

    /// Whether `parent`, at `parent_depth` with `children` live children, may spawn `child`.
    pub fn check(&self, parent: &str, parent_depth: usize, children: usize, child: &str) -> Result<(), TeamError> {
        let depth = parent_depth + 1;
        if depth > self.max_depth {
            return Err(TeamError::SpawnRefused(format!(
                "`{parent}` may not spawn `{child}`: it would be at depth {depth}, and the limit is {}",
                self.max_depth
            )));
        }
        if children >= self.max_children {
            return Err(TeamError::SpawnRefused(format!(
                "`{parent}` may not spawn `{child}`: it has {children} children already, the most it may have",
            )));
        }
        Ok(())
    }
}

/// How strict a mode is, for comparing.
fn strictness(mode: ApprovalMode) -> u8 {
    match mode {
        ApprovalMode::Auto => 0,
        ApprovalMode::OnSideEffect => 1,
        ApprovalMode::Always => 2,
    }
}

/// A policy at least as strict as both `parent` and `child` for every call: what either
/// denies is denied, what either asks about is asked about, and a call runs unasked only
/// if both would let it.
///
/// Deny rules of both come first, then ask rules, then the allow rules that cannot let
/// through what the other side would stop: those both have, and those of one side when
/// the other side's mode is `auto` (it allows anything its rules do not stop). The mode
/// is the stricter of the two.
pub fn narrow_approval(parent: &ApprovalPolicy, child: &ApprovalPolicy) -> ApprovalPolicy {
    let of = |policy: &ApprovalPolicy, action: RuleAction| -> Vec<ApprovalRule> {
        policy.rules.iter().filter(|r| r.action == action).cloned().collect()
    };
    let mut rules = Vec::new();
    for action in [RuleAction::Deny, RuleAction::Ask] {
        for rule in of(parent, action).into_iter().chain(of(child, action)) {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    let allows = |policy: &ApprovalPolicy, other: &ApprovalPolicy| -> Vec<ApprovalRule> {
        of(policy, RuleAction::Allow)
            .into_iter()
            .filter(|rule| other.mode == ApprovalMode::Auto || other.rules.contains(rule))
            .collect()
    };
    for rule in allows(parent, child).into_iter().chain(allows(child, parent)) {
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    let mode = if strictness(child.mode) > strictness(parent.mode) { child.mode } else { parent.mode };
    ApprovalPolicy { mode, rules }
}

/// The smaller of two optional limits (`None` is no limit).
fn min_opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// `child`'s limits cut to what `parent` has left: its USD and token budgets minus what it
/// (and its descendants) spent, its time minus what its current run took, its iteration
/// and output limits. Fails when the parent has nothing left to give.
pub(crate) fn clamp_limits(
    child: &Limits,
    parent: &Limits,
    spent: Spend,
    elapsed: Option<Duration>,
) -> Result<Limits, String> {
    let usd_left = parent.max_usd.map(|max| max - spent.cost_usd);
    if usd_left.is_some_and(|left| left <= 0.0) {
        return Err("its parent's USD budget is spent".to_owned());
    }
    let tokens_left = parent.max_total_tokens.map(|max| max.saturating_sub(spent.usage.total()));
    if tokens_left == Some(0) {
        return Err("its parent's token budget is spent".to_owned());
    }
    let time_left = parent.timeout.map(|t| t.saturating_sub(elapsed.unwrap_or_default()));
    if time_left.is_some_and(|left| left.is_zero()) {
        return Err("its parent's time is up".to_owned());
    }
    Ok(Limits {
        max_iterations: child.max_iterations.min(parent.max_iterations),
        timeout: min_opt(child.timeout, time_left),
        max_total_tokens: min_opt(child.max_total_tokens, tokens_left),
        max_usd: min_opt(child.max_usd, usd_left),
        max_output_tokens: min_opt(child.max_output_tokens, parent.max_output_tokens),
        max_tokens_recoveries: child.max_tokens_recoveries.min(parent.max_tokens_recoveries),
    })
}

/// `child` narrowed to `parent`: tools a subset of `parent_tools` (all of them when the
/// child names none), limits clamped, approval never more permissive.
pub(crate) fn narrow_spec(
    mut child: AgentSpec,
    parent: &AgentSpec,
    parent_tools: &BTreeSet<String>,
    spent: Spend,
    elapsed: Option<Duration>,
) -> Result<AgentSpec, TeamError> {
    let refuse = |why: String| {
        TeamError::SpawnRefused(format!("`{}` may not be spawned by `{}`: {why}", child.name, parent.name))
    };
    match &child.tools {
        Some(tools) => {
            if let Some(extra) = tools.iter().find(|t| !parent_tools.contains(*t)) {
                return Err(refuse(format!("it asks for the tool `{extra}`, which its parent does not have")));
            }
        }
        None => child.tools = Some(parent_tools.iter().cloned().collect()),
    }
    child.limits = clamp_limits(&child.limits, &parent.limits, spent, elapsed).map_err(refuse)?;
    child.approval = narrow_approval(&parent.approval, &child.approval);
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_tools::{Effect, ToolDeclaration};

    #[test]
    fn the_narrowed_policy_is_never_laxer_than_either_side() {
        let shell = ToolDeclaration::new("shell", "Runs.", json!({"type": "object"}), Effect::ExternalSideEffect);
        let read = ToolDeclaration::new("fs.read", "Reads.", json!({"type": "object"}), Effect::ReadOnly);
        let policies = [
            ApprovalPolicy::auto(),
            ApprovalPolicy::default(),
            ApprovalPolicy::always(),
            ApprovalPolicy::auto().rule(ApprovalRule::deny("shell")),
            ApprovalPolicy::default().rule(ApprovalRule::allow("shell").when("command", "cargo test")),
            ApprovalPolicy::always().rule(ApprovalRule::allow("fs.*")),
            ApprovalPolicy::auto().rule(ApprovalRule::ask("fs.read")),
        ];
        let calls = [
            (&shell, json!({"command": "cargo test"})),
            (&shell, json!({"command": "rm -rf /"})),
            (&read, json!({"path": "a"})),
        ];
        let rank = |v: &troupe_runtime::Verdict| match v {
            troupe_runtime::Verdict::Allow => 0,
            troupe_runtime::Verdict::Ask { .. } => 1,
            troupe_runtime::Verdict::Deny { .. } => 2,
        };
        let none = BTreeSet::new();
        for parent in &policies {
            for child in &policies {
                let narrowed = narrow_approval(parent, child);
                for (decl, args) in &calls {
                    let n = rank(&narrowed.decide(decl, args, &none));
                    let p = rank(&parent.decide(decl, args, &none));
                    let c = rank(&child.decide(decl, args, &none));
                    assert!(n >= p.max(c), "{parent:?} + {child:?} on {} {args}: {n} < {p}/{c}", decl.name);
                }
            }
            assert_eq!(narrow_approval(parent, parent).mode, parent.mode);
        }
    }

    #[test]
    fn limits_are_clamped_to_what_the_parent_has_left() {
        let parent =
            Limits { max_usd: Some(1.0), max_total_tokens: Some(1000), max_iterations: 10, ..Limits::default() };
        let spent = Spend { cost_usd: 0.25, usage: troupe_core::Usage { input_tokens: 400, ..Default::default() } };
        let child = Limits { max_usd: Some(5.0), timeout: Some(Duration::from_secs(9)), ..Limits::default() };
        let clamped = clamp_limits(&child, &parent, spent, None).expect("budget left");
        assert_eq!(clamped.max_usd, Some(0.75));
        assert_eq!(clamped.max_total_tokens, Some(600));
        assert_eq!(clamped.max_iterations, 10);
        assert_eq!(clamped.timeout, Some(Duration::from_secs(9)));
        let broke = Spend { cost_usd: 1.0, ..Spend::default() };
        assert!(clamp_limits(&child, &parent, broke, None).is_err());
    }
}
