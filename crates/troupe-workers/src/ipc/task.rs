//! [`AgentTask`]: what a coordinator asks a worker to do, and the [`ToolPolicy`] the worker
//! runs under.

use serde::{Deserialize, Serialize};
use troupe_core::RunId;
use troupe_runtime::AgentSpec;
pub use troupe_tools::ToolPolicy;

/// A task for a worker: the first frame a coordinator sends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentTask {
    /// The task's id; the worker's [`AgentResult`](super::AgentResult) carries it back.
    pub task_id: String,
    /// Who gives the task (a member's name, or `user`).
    pub from: String,
    /// The member the task is for.
    pub to: String,
    /// What to do.
    pub prompt: String,
    /// Context beyond the agent's own instructions, appended to the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Structured data and the payloads streamed after this frame.
    #[serde(default)]
    pub input: TaskInput,
    /// When the task must be done, in milliseconds since the Unix epoch; the worker
    /// cancels its run then, and the coordinator kills it soon after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// The run of the member that delegates, so runs form a tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// The agent to run, as the JSON of an [`AgentSpec`], for a worker started without an
    /// agent file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<serde_json::Value>,
    /// The tools the agent may call; the worker builds its catalog without the others.
    #[serde(default)]
    pub tools: ToolPolicy,
    /// What the worker streams back besides its events and result.
    #[serde(default)]
    pub outputs: TaskOutputs,
    /// How often each side sends a heartbeat, in milliseconds; a side silent for
    /// [`AgentTask::missed_heartbeats`] intervals is taken for hung (0: the worker's default).
    #[serde(default)]
    pub heartbeat_ms: u64,
    /// How many heartbeat intervals of silence make a side hung (0: the worker's default).
    #[serde(default)]
    pub missed_heartbeats: u32,
    /// What the agent's calls that need approval do, as its team says (a worker cannot
    /// ask anyone itself); absent: they end the task paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<crate::build::Approvals>,
    /// How the commands the agent runs are confined, as its team chose them (its command
    /// line's choice over the agent file's `[sandbox]` over its `troupe.toml`'s); absent:
    /// the worker's own agent file and `troupe.toml` decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<troupe_sandbox::SandboxSettings>,
    /// The run the worker records its agent's run as, in the coordinator's store through
    /// [`store_call`](super::FrameType::StoreCall) frames; set when the coordinator keeps
    /// a store. A worker started again for the task resumes this run from its last
    /// checkpoint rather than starting over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_run: Option<RunId>,
    /// The run's calls that need a person wait for a decision stored for the recorded run
    /// ([`AgentTask::record_run`]), which the coordinator's caller gives, instead of
    /// ending the task paused. Without a recorded run it is ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub await_decisions: bool,
    /// The typed answer the agent's run must end with (a member's typed report), instead
    /// of the agent's own `[output]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<troupe_runtime::OutputSpec>,
    /// Streams payloads both ways without SHA-256 checksums (for unoptimized builds, where
    /// hashing costs more than the transfer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_checksums: bool,
    /// The models the coordinator serves the task's agent: when there are any, the worker
    /// calls its models only through model-call frames (and holds no provider key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosted_models: Vec<super::model::HostedModel>,
}

impl AgentTask {
    /// A task `prompt` with id `task_id`, from `from` to `to`.
    pub fn new(
        task_id: impl Into<String>,
        from: impl Into<String>,
        to: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        AgentTask {
            task_id: task_id.into(),
            from: from.into(),
            to: to.into(),
            prompt: prompt.into(),
            ..Self::default()
        }
    }

    /// The same task, running the agent `spec`.
    pub fn with_spec(mut self, spec: &AgentSpec) -> Result<Self, serde_json::Error> {
        self.spec = Some(serde_json::to_value(spec)?);
        Ok(self)
    }

    /// The agent spec the task carries, if any.
    pub fn agent_spec(&self) -> Result<Option<AgentSpec>, serde_json::Error> {
        self.spec.clone().map(serde_json::from_value).transpose()
    }

    /// The prompt with its context, as the agent reads it.
    pub fn full_prompt(&self) -> String {
        match &self.context {
            Some(context) if !context.is_empty() => format!("{}\n\n{context}", self.prompt),
            _ => self.prompt.clone(),
        }
    }
}

/// A task's input beyond its prompt.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskInput {
    /// Structured input, given to the agent as JSON after the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// The payloads the coordinator streams after the task, each by its stream id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payloads: Vec<PayloadRef>,
}

/// A payload streamed as chunk frames under `stream_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadRef {
    /// The stream's id, unique in its direction of one connection.
    pub stream_id: u32,
    /// A plain file name: the worker writes the payload to `.troupe-inputs/<name>` in its
    /// workspace.
    pub name: String,
    /// The payload's length, when known in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_len: Option<u64>,
}

/// What a worker sends back as artifacts (payload streams before its result).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOutputs {
    /// Workspace-relative files to stream back once the run ends (missing ones are listed
    /// in the result's `data.missing_outputs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Streams every input payload back unchanged under its own name: the protocol's echo,
    /// for checking a payload's round trip.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub echo_payloads: bool,
}
