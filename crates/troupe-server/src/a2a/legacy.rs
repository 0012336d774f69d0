//! The A2A 0.3 rendering of the 1.0 shapes, for clients that call the 0.3 method names
//! (`message/send`, `tasks/get`, …).
//!
//! The two versions carry the same information; 0.3 differs in form: objects carry a
//! `kind` discriminator (`task`, `message`, `status-update`, `artifact-update`, and
//! `text` / `data` / `file` on parts), states and roles are lower-case (`input-required`,
//! `agent`), a file is a `file` object, results are the object itself rather than
//! `{"task": …}`, and a status update says whether it is the stream's `final` one.

use super::wire::{Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskStatus};
use serde_json::{Map, Value, json};

/// Inserts `key` when `value` is not null.
fn put(object: &mut Map<String, Value>, key: &str, value: Value) {
    if !value.is_null() {
        object.insert(key.to_owned(), value);
    }
}

fn role(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Agent | Role::Unspecified => "agent",
    }
}

/// A part: `{"kind": "text" | "data" | "file", …}`.
pub fn part(part: &Part) -> Value {
    let mut out = Map::new();
    if let Some(text) = &part.text {
        put(&mut out, "kind", json!("text"));
        put(&mut out, "text", json!(text));
    } else if let Some(data) = &part.data {
        put(&mut out, "kind", json!("data"));
        // 0.3 data is an object; anything else is wrapped.
        let data = if data.is_object() { data.clone() } else { json!({ "value": data }) };
        put(&mut out, "data", data);
    } else {
        let mut file = Map::new();
        if let Some(url) = &part.url {
            put(&mut file, "uri", json!(url));
        }
        if let Some(raw) = &part.raw {
            put(&mut file, "bytes", json!(raw));
        }
        put(&mut file, "mimeType", json!(part.media_type));
        put(&mut file, "name", json!(part.filename));
        put(&mut out, "kind", json!("file"));
        put(&mut out, "file", Value::Object(file));
    }
    put(&mut out, "metadata", json!(part.metadata));
    Value::Object(out)
}

fn parts(parts: &[Part]) -> Value {
    Value::Array(parts.iter().map(part).collect())
}

/// A message, `kind: "message"`.
pub fn message(message: &Message) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", json!("message"));
    put(&mut out, "messageId", json!(message.message_id));
    put(&mut out, "contextId", json!(message.context_id));
    put(&mut out, "taskId", json!(message.task_id));
    put(&mut out, "role", json!(role(message.role)));
    put(&mut out, "parts", parts(&message.parts));
    put(&mut out, "metadata", json!(message.metadata));
    if !message.extensions.is_empty() {
        put(&mut out, "extensions", json!(message.extensions));
    }
    if !message.reference_task_ids.is_empty() {
        put(&mut out, "referenceTaskIds", json!(message.reference_task_ids));
    }
    Value::Object(out)
}

/// A status, with the 0.3 state name.
pub fn status(status: &TaskStatus) -> Value {
    let mut out = Map::new();
    put(&mut out, "state", json!(status.state.legacy_name()));
    if let Some(said) = &status.message {
        put(&mut out, "message", message(said));
    }
    put(&mut out, "timestamp", json!(status.timestamp));
    Value::Object(out)
}

/// An artifact.
pub fn artifact(artifact: &Artifact) -> Value {
    let mut out = Map::new();
    put(&mut out, "artifactId", json!(artifact.artifact_id));
    put(&mut out, "name", json!(artifact.name));
    put(&mut out, "description", json!(artifact.description));
    put(&mut out, "parts", parts(&artifact.parts));
    put(&mut out, "metadata", json!(artifact.metadata));
    if !artifact.extensions.is_empty() {
        put(&mut out, "extensions", json!(artifact.extensions));
    }
    Value::Object(out)
}

/// A task, `kind: "task"`.
pub fn task(task: &Task) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", json!("task"));
    put(&mut out, "id", json!(task.id));
    put(&mut out, "contextId", json!(task.context_id));
    put(&mut out, "status", status(&task.status));
    if !task.artifacts.is_empty() {
        put(&mut out, "artifacts", Value::Array(task.artifacts.iter().map(artifact).collect()));
    }
    if !task.history.is_empty() {
        put(&mut out, "history", Value::Array(task.history.iter().map(message).collect()));
    }
    put(&mut out, "metadata", json!(task.metadata));
    Value::Object(out)
}

fn artifact_update(update: &TaskArtifactUpdateEvent) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", json!("artifact-update"));
    put(&mut out, "taskId", json!(update.task_id));
    put(&mut out, "contextId", json!(update.context_id));
    put(&mut out, "artifact", artifact(&update.artifact));
    put(&mut out, "append", json!(update.append));
    put(&mut out, "lastChunk", json!(update.last_chunk));
    put(&mut out, "metadata", json!(update.metadata));
    Value::Object(out)
}

/// One stream item, the object itself; `last` marks the stream's last status update
/// `final`.
pub fn stream_item(item: &StreamResponse, last: bool) -> Value {
    match item {
        StreamResponse::Task(t) => task(t),
        StreamResponse::Message(m) => message(m),
        StreamResponse::ArtifactUpdate(update) => artifact_update(update),
        StreamResponse::StatusUpdate(update) => {
            let mut out = Map::new();
            put(&mut out, "kind", json!("status-update"));
            put(&mut out, "taskId", json!(update.task_id));
            put(&mut out, "contextId", json!(update.context_id));
            put(&mut out, "status", status(&update.status));
            put(&mut out, "final", json!(last));
            put(&mut out, "metadata", json!(update.metadata));
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::wire::{TaskState, TaskStatusUpdateEvent};

    #[test]
    fn a_task_renders_with_kinds_and_lower_case_names() {
        let said = Message::new("m", Role::Agent, vec![Part::text("approve?"), Part::data(json!([1, 2]))]);
        let task = Task {
            id: "run_1".into(),
            context_id: "ctx".into(),
            status: TaskStatus { state: TaskState::InputRequired, message: Some(said), timestamp: None },
            ..Task::default()
        };
        let value = super::task(&task);
        assert_eq!(value["kind"], "task");
        assert_eq!(value["status"]["state"], "input-required");
        assert_eq!(value["status"]["message"]["role"], "agent");
        assert_eq!(value["status"]["message"]["parts"][0], json!({"kind": "text", "text": "approve?"}));
        assert_eq!(value["status"]["message"]["parts"][1]["data"], json!({"value": [1, 2]}));
        assert!(value.get("artifacts").is_none());
    }

    #[test]
    fn the_last_status_update_is_final() {
        let update = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::Completed, ..TaskStatus::default() },
            metadata: None,
        });
        let value = stream_item(&update, true);
        assert_eq!(value["kind"], "status-update");
        assert_eq!(value["final"], true);
        assert_eq!(value["status"]["state"], "completed");
    }
}
