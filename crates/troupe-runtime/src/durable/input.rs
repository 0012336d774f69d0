//! [`StoredInput`]: what a stored run was started with, enough for any worker to run it.

use crate::error::RuntimeError;
use crate::handle::RunInput;
use serde::{Deserialize, Serialize};
use troupe_core::{ConversationId, Message, RunId, ToolSpec};
use troupe_run::RunState;
use troupe_run::{AgentSpec, OutputSpec};
use troupe_store::{NewRun, RunSpend, RunStatus, StoredJson};

/// A run's input as stored: the agent's definition and the task.
///
/// The spec is stored without its signal hooks (code cannot be stored); a process that
/// resumes the run may pass the live spec instead.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredInput {
    /// The agent.
    pub spec: AgentSpec,
    /// The task.
    pub instruction: String,
    /// The conversation the run was given inline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// The model for this run only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The typed answer asked of this run only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSpec>,
    /// The conversation the run continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    /// The run that delegated this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// The workspace the run was started in, so a process resuming it elsewhere can say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The tools the run's client runs itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<ToolSpec>,
    /// The state shared with the run's client, as the run started with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_state: Option<serde_json::Value>,
    /// The recorded run this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<crate::ForkOrigin>,
    /// The images and documents given with the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<troupe_core::ContentBlock>,
}

impl StoredInput {
    /// The stored form of starting `spec` with `input`.
    pub fn new(spec: &AgentSpec, input: &RunInput) -> Self {
        StoredInput {
            spec: spec.clone(),
            instruction: input.instruction.clone(),
            history: input.history.clone(),
            model: input.model.clone(),
            output: input.output.clone(),
            conversation_id: input.conversation_id.clone(),
            parent_run_id: input.parent_run_id.clone(),
            workspace: None,
            client_tools: input.client_tools.clone(),
            shared_state: input.shared_state.clone(),
            forked_from: input.forked_from.clone(),
            attachments: input.attachments.clone(),
        }
    }

    /// The same input, started in `workspace`.
    pub fn in_workspace(mut self, workspace: &std::path::Path) -> Self {
        self.workspace = Some(workspace.display().to_string());
        self
    }

    /// Reads the input of a stored run.
    pub fn from_value(value: serde_json::Value) -> Result<Self, RuntimeError> {
        serde_json::from_value(value).map_err(|e| RuntimeError::Store(troupe_store::StoreError::decode("run input", e)))
    }

    /// The run's first state.
    pub fn initial_state(&self, run_id: RunId) -> RunState {
        let model = self.model.clone().unwrap_or_else(|| self.spec.model.clone());
        RunState::new(run_id, self.spec.name.clone(), model, String::new())
            .with_history(self.history.clone())
            .with_instruction(&self.instruction)
            .with_attachments(self.attachments.clone())
            .with_conversation(self.conversation_id.clone())
            .with_parent(self.parent_run_id.clone())
            .with_output(self.output.clone().or_else(|| self.spec.output.clone()))
            .with_client_tools(self.client_tools.clone())
            .with_shared_state(self.shared_state.clone())
    }

    /// The record that creates run `run_id` with this input, in `status`.
    pub fn new_run(&self, run_id: &RunId, status: RunStatus) -> NewRun {
        self.new_run_at(&self.initial_state(run_id.clone()), status)
    }

    /// The record that creates the run whose first state is `state` (one this input
    /// made, its history perhaps added to), in `status`.
    pub(crate) fn new_run_at(&self, state: &RunState, status: RunStatus) -> NewRun {
        NewRun {
            id: state.run_id().to_string(),
            agent: self.spec.name.clone(),
            status,
            conversation_id: self.conversation_id.as_ref().map(ToString::to_string),
            parent_run_id: self.parent_run_id.as_ref().map(ToString::to_string),
            // Written straight to the text the store writes: no `Value` of either is built.
            input: StoredJson::encode(self).unwrap_or_default(),
            state: StoredJson::encode(state).unwrap_or_default(),
            spend: Some(spend_of(state)),
        }
    }
}

/// What the run in `state` has spent, as its store keeps it beside the state.
pub(crate) fn spend_of(state: &RunState) -> RunSpend {
    let model = state.model();
    RunSpend {
        model: (!model.is_empty()).then(|| model.to_owned()),
        tokens: state.usage().total(),
        cost_usd: state.cost_usd(),
        rollup: false,
    }
}

/// The `kind` of a team's run in its stored state (an agent's run state has none).
pub const TEAM_RUN_KIND: &str = "team";

/// Reads a stored run state; a team's run is refused ([`RuntimeError::TeamRun`]).
pub fn state_from_value(run_id: &str, value: serde_json::Value) -> Result<RunState, RuntimeError> {
    if value.get("kind").and_then(serde_json::Value::as_str) == Some(TEAM_RUN_KIND) {
        let team = value.get("team").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
        return Err(RuntimeError::TeamRun { run_id: run_id.to_owned(), team });
    }
    serde_json::from_value(value)
        .map_err(|e| RuntimeError::Store(troupe_store::StoreError::decode(format!("state of run `{run_id}`"), e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_run::{ApprovalPolicy, Limits, SignalKind};

    /// A spec's defaults are policy a later release may change (a limit's default, a new
    /// kind of signal): the stored input spells them out, so a run resumed from it goes on
    /// with the spec it was started with.
    #[test]
    fn a_new_runs_input_spells_out_its_specs_defaults() {
        let spec = AgentSpec::new("reviewer", "openai/gpt-4o");
        let stored = StoredInput::new(&spec, &RunInput::new("Review the diff."));
        let record = stored.new_run(&RunId::generate(), RunStatus::Running);
        let written: serde_json::Value = serde_json::from_str(record.input.text()).expect("the input is JSON");

        let defaults = &written["spec"];
        assert_eq!(defaults["limits"]["max_iterations"], serde_json::json!(Limits::default().max_iterations));
        assert_eq!(
            defaults["limits"]["max_tokens_recoveries"],
            serde_json::json!(Limits::default().max_tokens_recoveries)
        );
        assert_eq!(defaults["approval"], serde_json::to_value(ApprovalPolicy::default()).expect("a policy encodes"));
        let kinds = defaults["accepted_signals"].as_array().expect("every accepted kind is listed");
        assert_eq!(kinds.len(), SignalKind::ALL.len());
        assert!(defaults.get("prompt_cache").is_some(), "the prompt cache's default is written: {defaults}");

        let read = StoredInput::from_value(written).expect("the input reads back");
        assert_eq!(read.spec.limits, spec.limits);
        assert_eq!(read.spec.accepted_signals, spec.accepted_signals);
        assert_eq!(read.spec.approval, spec.approval);
        assert_eq!(read.spec.prompt_cache, spec.prompt_cache);
        assert_eq!(read.instruction, "Review the diff.");
    }
}
