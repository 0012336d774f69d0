//! [`AgentSpec`]: an agent is a declaration, never a loop.
//!
//! Everything that makes one agent differ from another (its instructions, its model, the
//! tools it may call, its limits and approval policy, the signals it takes) is data here.
//! The runtime's `Runner` owns the loop for every agent alike.

use crate::applied::AppliedSpec;
use crate::approval::ApprovalPolicy;
use crate::compaction::CompactionPolicy;
use crate::hooks::SignalHooks;
use crate::limits::Limits;
use crate::output::OutputSpec;
use crate::signal::SignalKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What an agent is: its name, instructions, model, tools, limits, approval policy and the
/// signals it accepts.
///
/// A spec is plain data (it serializes, e.g. from a TOML agent file), except its
/// [`signal_hooks`](AgentSpec::signal_hooks), which are code and are skipped.
///
/// ```
/// use troupe_run::{AgentSpec, ApprovalMode};
///
/// let spec: AgentSpec = serde_json::from_value(serde_json::json!({
///     "name": "reviewer",
///     "instructions": "Review the diff.",
///     "model": "anthropic/claude-sonnet-4-5",
///     "tools": ["fs.read", "git.diff"],
///     "limits": {"max_iterations": 10, "max_usd": 0.25},
///     "approval": {"mode": "always"}
/// }))?;
/// assert_eq!(spec.limits.max_iterations, 10);
/// assert_eq!(spec.limits.max_tokens_recoveries, 3, "unset fields keep their defaults");
/// assert_eq!(spec.approval.mode, ApprovalMode::Always);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSpec {
    /// The agent's name: its id in events and metrics.
    pub name: String,
    /// The system instructions.
    pub instructions: String,
    /// The model: a `provider/model` id, or `demo`; resolved by the runner's
    /// runtime's `ModelResolver`.
    pub model: String,
    /// The sampling temperature of every model request; `None` leaves it to the provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The catalog names of the tools the agent may call; `None` for every tool of the
    /// runner's catalog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Where the run stops.
    pub limits: Limits,
    /// Which tool calls need a person's approval.
    pub approval: ApprovalPolicy,
    /// The kinds of signal the agent takes. Cancellation, approval decisions and client
    /// tools' results are always taken, whatever this says, because the runtime itself
    /// relies on them.
    pub accepted_signals: BTreeSet<SignalKind>,
    /// How the conversation is compacted before model calls; `None` leaves it to the
    /// runner's compactor, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionPolicy>,
    /// The typed answer the run must end with; `None` for a text answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSpec>,
    /// Whether, and for how long, each request's stable prefix is marked for the vendor's
    /// prompt cache; `None` asks for no caching. On by default (the short TTL).
    pub prompt_cache: Option<troupe_core::CacheTtl>,
    /// Code run when a signal arrives; not serialized.
    #[serde(skip)]
    pub signal_hooks: SignalHooks,
}

impl Default for AgentSpec {
    fn default() -> Self {
        AgentSpec {
            name: "agent".to_owned(),
            instructions: String::new(),
            model: "demo".to_owned(),
            temperature: None,
            tools: None,
            limits: Limits::default(),
            approval: ApprovalPolicy::default(),
            accepted_signals: SignalKind::ALL.into_iter().collect(),
            compaction: None,
            output: None,
            prompt_cache: Some(troupe_core::CacheTtl::Short),
            signal_hooks: SignalHooks::default(),
        }
    }
}

impl AgentSpec {
    /// A spec named `name` using `model`, with default limits, the default approval
    /// policy and every signal accepted.
    pub fn new(name: impl Into<String>, model: impl Into<String>) -> Self {
        AgentSpec { name: name.into(), model: model.into(), ..AgentSpec::default() }
    }

    /// Sets the system instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Ends every run with a typed answer of this shape.
    pub fn output(mut self, output: OutputSpec) -> Self {
        self.output = Some(output);
        self
    }

    /// Whether the agent takes signals of `kind`.
    pub fn accepts(&self, kind: SignalKind) -> bool {
        matches!(kind, SignalKind::Cancel | SignalKind::Approval | SignalKind::ToolResult)
            || self.accepted_signals.contains(&kind)
    }
}

impl AppliedSpec {
    /// What `spec` is as revision `revision` of the live spec `source`.
    pub fn of(source: &str, revision: u64, spec: &AgentSpec) -> Self {
        AppliedSpec {
            source: source.to_owned(),
            revision,
            instructions: spec.instructions.clone(),
            model: spec.model.clone(),
            limits: spec.limits.clone(),
        }
    }

    /// `spec` with what was applied in place of its live parts.
    pub fn apply_to(&self, spec: &AgentSpec) -> AgentSpec {
        let mut next = spec.clone();
        next.instructions.clone_from(&self.instructions);
        next.model.clone_from(&self.model);
        next.limits = self.limits.clone();
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn limits_round_trip_with_a_millisecond_timeout() {
        let limits = Limits { timeout: Some(Duration::from_millis(1500)), max_usd: Some(0.5), ..Limits::default() };
        let value = serde_json::to_value(&limits).expect("serializes");
        assert_eq!(value["timeout_ms"], json!(1500));
        assert!(value.get("max_total_tokens").is_none());
        let back: Limits = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, limits);
        let empty: Limits = serde_json::from_value(json!({})).expect("all defaults");
        assert_eq!(empty, Limits::default());
        assert_eq!(empty.max_iterations, 50);
    }

    #[test]
    fn cancel_and_approval_are_always_accepted() {
        let mut spec = AgentSpec::new("a", "demo");
        spec.accepted_signals.clear();
        assert!(spec.accepts(SignalKind::Cancel));
        assert!(spec.accepts(SignalKind::Approval));
        assert!(!spec.accepts(SignalKind::UserMessage));
        assert!(AgentSpec::default().accepts(SignalKind::ExternalEvent));
    }

    #[test]
    fn spec_round_trips_without_its_hooks() {
        let spec = AgentSpec::new("coder", "demo").instructions("Be brief.");
        let text = serde_json::to_string(&spec).expect("serializes");
        let back: AgentSpec = serde_json::from_str(&text).expect("parses");
        assert_eq!((back.name.as_str(), back.instructions.as_str()), ("coder", "Be brief."));
        assert_eq!(back.accepted_signals, spec.accepted_signals);
        assert_eq!(back.limits, spec.limits);
    }
}
