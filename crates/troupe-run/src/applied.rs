//! [`AppliedSpec`]: what a run applied of a live spec while it was going.

use crate::limits::Limits;
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
