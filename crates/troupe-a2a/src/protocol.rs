//! The names both ends of troupe's A2A agree on: where the card is, the JSON-RPC error
//! codes, the artifact holding an answer, the metadata key naming the agent to run.

/// Where an agent card is served, under the agent's base URL (the A2A well-known path).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The id of the artifact holding a task's final answer.
pub const ANSWER_ARTIFACT: &str = "answer";

/// The metadata key (on the message or the request) naming the agent, a skill id of the
/// card, a new task runs.
pub const AGENT_KEY: &str = "agent";

/// The metadata key (on the message or the request) asking a new task for a typed answer:
/// `{"schema": {…}, "name": "…"}`. A troupe server ends the task's run with a JSON
/// document of that schema (its answer artifact's text); another server may ignore it.
pub const OUTPUT_KEY: &str = "output";

/// The card extension (in `capabilities.extensions`) of a server that answers a message
/// sent again with the task its first sending started: a new task's message with a
/// `messageId` the server has seen for the same skill does not start a second task, even
/// after the server restarted (it keeps its tasks in a store). A troupe server with a store
/// declares it; a client may then send a task again without fear of running it twice.
pub const MESSAGE_SENT_AGAIN_EXTENSION: &str =
    "https://github.com/troupe-rs/troupe/blob/main/docs/SERVING.md#a-message-sent-again";

/// The extension (in `capabilities.extensions`) of a troupe server's extended card that
/// gives each skill's tools' arguments' JSON schemas: `params` is `{"skills": {SKILL:
/// {TOOL: SCHEMA}}}`. A team with such a server's agent as a member shows a person
/// deciding one of its calls the call's fields, as it does a local member's, and sends
/// the arguments the person edited as a data part `{"approval": "modify", "callId",
/// "arguments"}`, which such a server takes. Only the extended card carries it, which a
/// client reads with its token.
pub const TOOL_INPUTS_EXTENSION: &str = "https://github.com/troupe-rs/troupe/blob/main/docs/SERVING.md#tool-inputs";

/// The JSON-RPC 2.0 error codes, and those A2A adds.
pub mod codes {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC 2.0 request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params are not what the method takes.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// No such task.
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task has ended and cannot be cancelled.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// Push notifications are not offered.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// The operation is not offered (or not in the task's state).
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// The content type is not accepted.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// No extended card is configured.
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    /// The `A2A-Version` asked for is not spoken.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}
