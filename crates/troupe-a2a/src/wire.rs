//! The A2A 1.0 JSON shapes (the ProtoJSON form of the specification's messages): field
//! names in camelCase, enums as `TASK_STATE_…` / `ROLE_…` names, one-of fields as the one
//! key present. Reading is lenient where A2A 0.3 differs only in names (`input-required`,
//! `user`, a part's `kind`), so a 0.3 message parses too; writing is always 1.0 (a server
//! that answers 0.3 clients renders these shapes in 0.3's names itself).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Where a task stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    /// Received, not started.
    #[serde(rename = "TASK_STATE_SUBMITTED", alias = "submitted")]
    Submitted,
    /// Being worked on.
    #[serde(rename = "TASK_STATE_WORKING", alias = "working")]
    Working,
    /// Waiting for the client (an approval, an answer).
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED", alias = "input-required")]
    InputRequired,
    /// Waiting for authentication.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED", alias = "auth-required")]
    AuthRequired,
    /// Done.
    #[serde(rename = "TASK_STATE_COMPLETED", alias = "completed")]
    Completed,
    /// Cancelled.
    #[serde(rename = "TASK_STATE_CANCELED", alias = "canceled", alias = "cancelled")]
    Canceled,
    /// Failed.
    #[serde(rename = "TASK_STATE_FAILED", alias = "failed")]
    Failed,
    /// Refused by the agent.
    #[serde(rename = "TASK_STATE_REJECTED", alias = "rejected")]
    Rejected,
    /// Unknown (also what an unrecognised state reads as).
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED", alias = "unknown", other)]
    Unspecified,
}

impl TaskState {
    /// Whether the task can change no more (completed, cancelled, failed, rejected).
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Canceled | TaskState::Failed | TaskState::Rejected)
    }

    /// Whether the task waits for the client (input or authentication).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// The 1.0 name (`TASK_STATE_WORKING`).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// The 0.3 name (`working`, `input-required`).
    pub fn legacy_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unknown",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::AuthRequired => "auth-required",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
            TaskState::Rejected => "rejected",
        }
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// The client.
    #[serde(rename = "ROLE_USER", alias = "user")]
    User,
    /// The agent.
    #[serde(rename = "ROLE_AGENT", alias = "agent")]
    Agent,
    /// Unknown (also what an unrecognised role reads as).
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED", other)]
    Unspecified,
}

/// One piece of a message or artifact: text, structured data, a file by URL, or raw
/// bytes (base64), exactly one of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Structured data (any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// A file, by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A file's bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The content's MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part { text: Some(text.into()), ..Part::default() }
    }

    /// A data part.
    pub fn data(data: Value) -> Self {
        Part { data: Some(data), ..Part::default() }
    }
}

/// A message between the client and the agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The message's id, chosen by its sender.
    #[serde(default)]
    pub message_id: String,
    /// The context (conversation) it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who wrote it.
    #[serde(default)]
    pub role: Role,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Other tasks it refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// A message by `role` made of `parts`.
    pub fn new(message_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        Message { message_id: message_id.into(), role, parts, ..Message::default() }
    }

    /// The text of its text parts, joined by newlines.
    pub fn text(&self) -> String {
        parts_text(&self.parts)
    }
}

/// The text of `parts`' text parts, joined by newlines.
pub fn parts_text(parts: &[Part]) -> String {
    parts.iter().filter_map(|p| p.text.as_deref()).collect::<Vec<_>>().join("\n")
}

/// A task's state at one moment, with an optional message saying more.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says about it (the call waiting for approval, the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// Something a task produced (its answer, a file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Its id within the task.
    pub artifact_id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// A unit of work: here, one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id (the run's id).
    pub id: String,
    /// The context (conversation) it belongs to.
    #[serde(default)]
    pub context_id: String,
    /// Where it stands.
    #[serde(default)]
    pub status: TaskStatus,
    /// What it produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages exchanged, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A task's status changed (streamed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A task produced or extended an artifact (streamed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The artifact (or the chunk of it).
    pub artifact: Artifact,
    /// Whether this chunk extends an artifact sent before with the same id.
    #[serde(default)]
    pub append: bool,
    /// Whether this is the artifact's last chunk.
    #[serde(default)]
    pub last_chunk: bool,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One item of a stream: `{"task": …}`, `{"message": …}`, `{"statusUpdate": …}` or
/// `{"artifactUpdate": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// The task as it stands.
    Task(Task),
    /// A message (an answer without a task).
    Message(Message),
    /// A status change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// What `SendMessage` answers: `{"task": …}` or `{"message": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    /// The task the message started or continued.
    Task(Task),
    /// A direct answer.
    Message(Message),
}

/// What `ListTasks` answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    /// The tasks of this page, newest first.
    pub tasks: Vec<Task>,
    /// The token of the next page; empty on the last.
    #[serde(default)]
    pub next_page_token: String,
    /// The page size used.
    #[serde(default)]
    pub page_size: i32,
    /// How many tasks match, over all pages.
    #[serde(default)]
    pub total_size: i32,
}

/// How send requests are to be handled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// The MIME types the client accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// How many of the latest history messages the answer carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Answer at once with the task as it stands instead of waiting for it to end or
    /// to need input (1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_immediately: Option<bool>,
    /// Wait for the task to end or to need input (0.3; the opposite of
    /// `returnImmediately`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
}

/// The params of `SendMessage` / `SendStreamingMessage` (and 0.3's `message/send`,
/// `message/stream`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// The message.
    pub message: Message,
    /// How to handle it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Request metadata (here: `agent`, the skill to run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// The params of `GetTask` (0.3: `tasks/get`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// The task's id.
    pub id: String,
    /// How many of the latest history messages to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// The params of `CancelTask` and `SubscribeToTask` (0.3: `tasks/cancel`,
/// `tasks/resubscribe`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    /// The task's id.
    pub id: String,
}

/// The params of `ListTasks`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Only the tasks of this context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Only the tasks in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    /// At most this many tasks (1–100, 50 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    /// Where the page starts: a previous answer's `nextPageToken`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// How many of the latest history messages each task carries (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Only tasks whose status changed after this instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timestamp_after: Option<String>,
    /// Whether each task carries its artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

/// An endpoint of an agent: where, over which binding, which protocol version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    /// The endpoint's URL.
    pub url: String,
    /// `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub protocol_binding: String,
    /// The A2A version spoken there (`1.0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol_version: String,
}

/// What an agent can do beyond the basics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// Whether it streams (`SendStreamingMessage`, `SubscribeToTask`).
    #[serde(default)]
    pub streaming: bool,
    /// Whether it sends push notifications.
    #[serde(default)]
    pub push_notifications: bool,
    /// Whether an extended card is served to authenticated clients.
    #[serde(default)]
    pub extended_agent_card: bool,
    /// The protocol extensions it supports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
}

impl AgentCapabilities {
    /// Whether it declares the extension `uri`.
    pub fn has_extension(&self, uri: &str) -> bool {
        self.extensions.iter().any(|extension| extension.uri == uri)
    }
}

/// A protocol extension an agent supports, named by its URI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    /// The extension's URI, which names it (and where it is described).
    pub uri: String,
    /// How this agent uses it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Whether a client must use it to talk to this agent.
    #[serde(default)]
    pub required: bool,
    /// Its settings for this agent, as the extension defines them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// One thing an agent offers: here, one agent or team the server exposes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Its id: the agent's or team's name, as given in message metadata `agent`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Keywords.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// The agent card served at `/.well-known/agent-card.json`.
///
/// Besides the 1.0 fields it carries the 0.3 ones (`url`, `protocolVersion`,
/// `preferredTransport`, `security`) when built by this server, as the reference SDK
/// does, so clients of either version find the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// The agent's name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its endpoints, preferred first.
    #[serde(default)]
    pub supported_interfaces: Vec<AgentInterface>,
    /// Its version.
    #[serde(default)]
    pub version: String,
    /// What it can do.
    #[serde(default)]
    pub capabilities: AgentCapabilities,
    /// How clients authenticate, by scheme name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security_schemes: BTreeMap<String, Value>,
    /// Which schemes a client must satisfy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<Value>,
    /// The MIME types it reads.
    #[serde(default)]
    pub default_input_modes: Vec<String>,
    /// The MIME types it writes.
    #[serde(default)]
    pub default_output_modes: Vec<String>,
    /// What it offers.
    #[serde(default)]
    pub skills: Vec<AgentSkill>,
    /// 0.3: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// 0.3: the protocol version at `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// 0.3: the binding at `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// 0.3: the security requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Value>,
}

impl AgentCard {
    /// The JSON-RPC endpoint speaking A2A 1.x: from `supportedInterfaces`, or the 0.3
    /// `url` when its `protocolVersion` is 1.x.
    pub fn jsonrpc_url(&self) -> Option<&str> {
        let is_v1 = |version: &str| version == "1" || version.starts_with("1.");
        self.supported_interfaces
            .iter()
            .find(|i| i.protocol_binding.eq_ignore_ascii_case("JSONRPC") && is_v1(&i.protocol_version))
            .map(|i| i.url.as_str())
            .or_else(|| {
                let version = self.protocol_version.as_deref()?;
                let binding = self.preferred_transport.as_deref().unwrap_or("JSONRPC");
                (is_v1(version) && binding.eq_ignore_ascii_case("JSONRPC")).then_some(self.url.as_deref()).flatten()
            })
    }
}

/// `ms` (milliseconds since the Unix epoch) as an RFC 3339 timestamp in UTC.
pub fn timestamp(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An RFC 3339 timestamp as milliseconds since the Unix epoch.
pub fn parse_timestamp(text: &str) -> Option<u64> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    u64::try_from(parsed.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_and_roles_read_both_versions_and_write_1_0() {
        let state: TaskState = serde_json::from_value(json!("input-required")).expect("0.3 name");
        assert_eq!(state, TaskState::InputRequired);
        assert_eq!(serde_json::to_value(state).expect("serializes"), json!("TASK_STATE_INPUT_REQUIRED"));
        let odd: TaskState = serde_json::from_value(json!("TASK_STATE_SOMETHING_NEW")).expect("lenient");
        assert_eq!(odd, TaskState::Unspecified);
        let role: Role = serde_json::from_value(json!("user")).expect("0.3 role");
        assert_eq!(role, Role::User);
    }

    #[test]
    fn a_0_3_message_parses_and_stream_items_are_one_key_objects() {
        let message: Message = serde_json::from_value(json!({
            "kind": "message", "messageId": "m1", "role": "user",
            "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"approval": "approve"}}]
        }))
        .expect("parses");
        assert_eq!(message.text(), "hi");
        assert_eq!(message.parts[1].data, Some(json!({"approval": "approve"})));
        let item = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::Working, ..TaskStatus::default() },
            metadata: None,
        });
        let value = serde_json::to_value(&item).expect("serializes");
        assert_eq!(value["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING");
        assert_eq!(value["statusUpdate"]["taskId"], "t");
    }

    #[test]
    fn timestamps_are_rfc_3339_utc_and_round_trip() {
        assert_eq!(timestamp(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_timestamp("2023-11-14T22:13:20.123Z"), Some(1_700_000_000_123));
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn the_card_names_its_1_0_json_rpc_endpoint() {
        let card: AgentCard = serde_json::from_value(json!({
            "name": "x",
            "supportedInterfaces": [
                {"url": "http://h/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        }))
        .expect("parses");
        assert_eq!(card.jsonrpc_url(), Some("http://h/a2a"));
        let legacy: AgentCard =
            serde_json::from_value(json!({"name": "y", "url": "http://h/rpc", "protocolVersion": "0.3.0"}))
                .expect("parses");
        assert_eq!(legacy.jsonrpc_url(), None, "a 0.3-only agent has no 1.0 endpoint");
    }
}
