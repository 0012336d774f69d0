//! [`AppliedSpec`]: what a run applied of a live spec while it was going.

use crate::spec::{AgentSpec, Limits};
use serde::{Deserialize, Serialize};

/// What a run applied of a live spec: part of its [`RunState`](crate::RunState), so that a
/// checkpoint holds it and a resumed run goes on with it rather than with the spec it was
/// started with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppliedSpec {
    /// The live spec the revision came from (an opaque id).
    pub source: String,
    /// The revision.
    pub revision: u64,
    /// The instructions in force.
    pub instructions: String,
    /// The agent's model in force (the run's own model is [`RunState::model`](crate::RunState::model)).
    pub model: String,
    /// The limits in force.
    pub limits: Limits,
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
