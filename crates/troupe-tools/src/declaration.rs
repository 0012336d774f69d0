//! What a tool declares about itself: its effects, idempotency, evidence and approval needs.
//!
//! The runner never guesses what a tool does: approval, resume and evidence decisions are
//! all derived from these declarations (design principle 2, "side effects live behind
//! boundaries").

use serde::{Deserialize, Serialize};
use std::time::Duration;
use troupe_core::ToolSpec;

/// The strongest effect a call of the tool may have on the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Only observes: reading files, searching, listing. Safe to run concurrently and to
    /// repeat.
    ReadOnly,
    /// Changes state the agent owns and can inspect again (files in the workspace).
    WriteState,
    /// Reaches outside the run: runs processes, calls services, sends messages.
    ExternalSideEffect,
    /// May destroy data or state that cannot be recovered.
    Destructive,
}

/// Whether running a call twice has the same effect as running it once.
///
/// Resume uses this: an incomplete idempotent call is retried, an incomplete
/// non-idempotent one is put to a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Idempotency {
    /// Repeating the call with the same arguments changes nothing more.
    Idempotent,
    /// Repeating is harmless as long as nobody changed the state in between (writing the
    /// same content to a file).
    ConditionallyIdempotent,
    /// Repeating may apply the effect again (appending, running a command).
    NonIdempotent,
}

/// How a call's result is kept in the append-only evidence log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceCapture {
    /// The structured output (or the full content) is kept.
    Structured,
    /// A short summary of the output is kept.
    Summary,
    /// The fact of the call is kept, its arguments and output are redacted.
    Redacted,
    /// Nothing beyond the call's start and end is kept.
    None,
}

/// Whether a person must approve a call before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirement {
    /// Never asks.
    NotRequired,
    /// Always asks.
    Required,
    /// Asks unless the tool is [`Effect::ReadOnly`].
    #[default]
    Derived,
}

/// One kind of access a call needs, declared by the tool so a capability check can be made
/// from the declaration alone (never from the tool's name).
///
/// Fields that name an argument (`ReadPath("path")`) say which argument of the call holds
/// the path or URL; a path argument that is absent or `null` means the workspace root (`.`),
/// which is what the built-in tools do with an omitted `path`. A tool that declares no
/// access needs no capability.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Needs nothing; declared to say the tool was reviewed and touches nothing guarded.
    None,
    /// Reads the workspace-relative path in the named argument.
    ReadPath(String),
    /// Writes the workspace-relative path in the named argument.
    WritePath(String),
    /// Runs arbitrary commands.
    Shell,
    /// Contacts the host of the URL in the named argument.
    Network(String),
    /// Contacts this fixed host, whatever the arguments (a configured search backend).
    NetworkHost(String),
}

impl Access {
    /// [`Access::ReadPath`] of the argument `field`.
    pub fn read_path(field: impl Into<String>) -> Self {
        Access::ReadPath(field.into())
    }

    /// [`Access::WritePath`] of the argument `field`.
    pub fn write_path(field: impl Into<String>) -> Self {
        Access::WritePath(field.into())
    }

    /// [`Access::Network`] to the URL in the argument `field`.
    pub fn network(field: impl Into<String>) -> Self {
        Access::Network(field.into())
    }
}

/// Everything the catalog and the runner know about a tool without running it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    /// The catalog name the model calls (`fs.read`, `server/tool`).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON schema of the arguments object (root `"type": "object"`), shared with the
    /// [`ToolSpec`] offered to a model at each call.
    pub input_schema: std::sync::Arc<serde_json::Value>,
    /// The strongest effect a call may have.
    pub effect: Effect,
    /// Whether repeating a call is safe.
    pub idempotency: Idempotency,
    /// How results are kept as evidence.
    pub evidence: EvidenceCapture,
    /// Whether calls need a person's approval.
    #[serde(default)]
    pub approval: ApprovalRequirement,
    /// The longest a call may run before the catalog stops it; `None` for no limit.
    #[serde(
        default,
        with = "troupe_core::duration_ms",
        skip_serializing_if = "Option::is_none",
        rename = "timeout_ms"
    )]
    pub timeout: Option<Duration>,
    /// What a call needs access to, for capability checks; empty when it needs nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<Access>,
}

impl ToolDeclaration {
    /// A declaration with the defaults that follow from `effect`: read-only tools are
    /// idempotent, every other tool is taken as non-idempotent until it says otherwise;
    /// evidence is a summary; approval is derived; no timeout.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: impl Into<std::sync::Arc<serde_json::Value>>,
        effect: Effect,
    ) -> Self {
        let idempotency = if effect == Effect::ReadOnly { Idempotency::Idempotent } else { Idempotency::NonIdempotent };
        ToolDeclaration {
            name: name.into(),
            description: description.into(),
            input_schema: input_schema.into(),
            effect,
            idempotency,
            evidence: EvidenceCapture::Summary,
            approval: ApprovalRequirement::Derived,
            timeout: None,
            access: Vec::new(),
        }
    }

    /// The declaration with `access` as what its calls need (replacing any declared before).
    pub fn with_access(mut self, access: Vec<Access>) -> Self {
        self.access = access;
        self
    }

    /// The tool as offered to a model.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name.clone(), self.description.clone(), self.input_schema.clone())
    }

    /// Whether a call needs a person's approval before it runs.
    pub fn requires_approval(&self) -> bool {
        match self.approval {
            ApprovalRequirement::NotRequired => false,
            ApprovalRequirement::Required => true,
            ApprovalRequirement::Derived => !self.is_read_only(),
        }
    }

    /// Whether calls only observe; such calls may run concurrently.
    pub fn is_read_only(&self) -> bool {
        self.effect == Effect::ReadOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn derived_approval_follows_the_effect() {
        let read = ToolDeclaration::new("r", "", json!({"type": "object"}), Effect::ReadOnly);
        let write = ToolDeclaration::new("w", "", json!({"type": "object"}), Effect::WriteState);
        assert!(!read.requires_approval());
        assert!(write.requires_approval());
        let mut forced = read.clone();
        forced.approval = ApprovalRequirement::Required;
        assert!(forced.requires_approval());
        let mut waived = write.clone();
        waived.approval = ApprovalRequirement::NotRequired;
        assert!(!waived.requires_approval());
    }

    #[test]
    fn declarations_serialize_in_snake_case_with_millisecond_timeouts() {
        let mut decl = ToolDeclaration::new("shell", "runs", json!({"type": "object"}), Effect::ExternalSideEffect);
        decl.timeout = Some(Duration::from_millis(1500));
        let value = serde_json::to_value(&decl).expect("serializes");
        assert_eq!(value["effect"], "external_side_effect");
        assert_eq!(value["idempotency"], "non_idempotent");
        assert_eq!(value["approval"], "derived");
        assert_eq!(value["timeout_ms"], 1500);
        let back: ToolDeclaration = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, decl);
    }
}
