//! [`AgentMessage`]: what team members tell each other — results, not transcripts.
//!
//! A message carries a [`MessagePayload`]: a summary, named artifacts, the decisions made
//! and what blocks the work. Nobody's conversation crosses from one member to another;
//! every message passes the [`ContextFirewall`](crate::firewall::ContextFirewall) on its
//! way.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a message goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum Recipient {
    /// One member, by name.
    Agent(String),
    /// Every member but the sender (each copy is filtered for its recipient).
    Broadcast,
}

impl Recipient {
    /// The member's name, for a direct message.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Recipient::Agent(name) => Some(name),
            Recipient::Broadcast => None,
        }
    }
}

impl fmt::Display for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recipient::Agent(name) => f.write_str(name),
            Recipient::Broadcast => f.write_str("*"),
        }
    }
}

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Asks the recipient to do something.
    Request,
    /// Answers a request.
    Response,
    /// Tells the recipient something; no answer expected.
    Notification,
    /// Work in progress: only the orchestrator may see it.
    IntermediateResult,
}

impl MessageKind {
    /// The kind's snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Request => "request",
            MessageKind::Response => "response",
            MessageKind::Notification => "notification",
            MessageKind::IntermediateResult => "intermediate_result",
        }
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named piece of work a message carries: a file, a patch, a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Its name (a file name, say: its extension helps sanitisers tell code from prose).
    pub name: String,
    /// Its MIME type (`text/x-rust`, `text/markdown`, ...).
    pub media_type: String,
    /// Its content, inline.
    pub content: String,
}

impl Artifact {
    /// An artifact `name` of `media_type` holding `content`.
    pub fn new(name: impl Into<String>, media_type: impl Into<String>, content: impl Into<String>) -> Self {
        Artifact { name: name.into(), media_type: media_type.into(), content: content.into() }
    }

    /// A plain-text artifact.
    pub fn text(name: impl Into<String>, content: impl Into<String>) -> Self {
        Artifact::new(name, "text/plain", content)
    }
}

/// What a message says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MessagePayload {
    /// The result in a few sentences.
    pub summary: String,
    /// The work itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Decisions made, which the recipient should respect.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    /// What stops the work, if anything.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
}

impl MessagePayload {
    /// A payload of `summary` alone.
    pub fn summary(summary: impl Into<String>) -> Self {
        MessagePayload { summary: summary.into(), ..MessagePayload::default() }
    }

    /// Every text of the payload, in order: the summary, each artifact's name and content,
    /// the decisions, the blockers.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.summary.as_str())
            .chain(self.artifacts.iter().flat_map(|a| [a.name.as_str(), a.content.as_str()]))
            .chain(self.decisions.iter().map(String::as_str))
            .chain(self.blockers.iter().map(String::as_str))
    }

    /// Rewrites every text of the payload with `f` (artifact media types are left alone).
    pub fn map_texts(&mut self, mut f: impl FnMut(&str) -> String) {
        self.summary = f(&self.summary);
        for artifact in &mut self.artifacts {
            artifact.name = f(&artifact.name);
            artifact.content = f(&artifact.content);
        }
        for text in self.decisions.iter_mut().chain(self.blockers.iter_mut()) {
            *text = f(text);
        }
    }
}

/// A message between team members.
///
/// ```
/// use troupe_team::message::{AgentMessage, Artifact, MessageKind};
///
/// let message = AgentMessage::response("coder", "lead", "The parser handles empty input now.")
///     .task("task-7")
///     .artifact(Artifact::new("parser.rs", "text/x-rust", "pub fn parse(input: &str) -> Ast { parse_items(input) }"))
///     .decision("Empty input parses to an empty AST, not an error.");
/// assert_eq!(message.kind, MessageKind::Response);
/// assert_eq!(message.to.agent(), Some("lead"));
/// assert_eq!(message.payload.artifacts.len(), 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMessage {
    /// Unique within the process (`msg-<n>` by default).
    pub id: String,
    /// The sender's name.
    pub from: String,
    /// Where it goes.
    pub to: Recipient,
    /// What it is.
    pub kind: MessageKind,
    /// The task it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// What it says.
    pub payload: MessagePayload,
}

static NEXT_MESSAGE: AtomicU64 = AtomicU64::new(1);

impl AgentMessage {
    /// A message of `kind` from `from` to `to` with `summary`, with a fresh id.
    pub fn new(kind: MessageKind, from: impl Into<String>, to: Recipient, summary: impl Into<String>) -> Self {
        AgentMessage {
            id: format!("msg-{}", NEXT_MESSAGE.fetch_add(1, Ordering::Relaxed)),
            from: from.into(),
            to,
            kind,
            task_id: None,
            payload: MessagePayload::summary(summary),
        }
    }

    /// A request from `from` to `to`.
    pub fn request(from: impl Into<String>, to: impl Into<String>, summary: impl Into<String>) -> Self {
        Self::new(MessageKind::Request, from, Recipient::Agent(to.into()), summary)
    }

    /// A response from `from` to `to`.
    pub fn response(from: impl Into<String>, to: impl Into<String>, summary: impl Into<String>) -> Self {
        Self::new(MessageKind::Response, from, Recipient::Agent(to.into()), summary)
    }

    /// A notification from `from` to `to`.
    pub fn notification(from: impl Into<String>, to: impl Into<String>, summary: impl Into<String>) -> Self {
        Self::new(MessageKind::Notification, from, Recipient::Agent(to.into()), summary)
    }

    /// An intermediate result from `from` to `to` (only the orchestrator may receive one).
    pub fn intermediate(from: impl Into<String>, to: impl Into<String>, summary: impl Into<String>) -> Self {
        Self::new(MessageKind::IntermediateResult, from, Recipient::Agent(to.into()), summary)
    }

    /// A notification from `from` to every other member.
    pub fn broadcast(from: impl Into<String>, summary: impl Into<String>) -> Self {
        Self::new(MessageKind::Notification, from, Recipient::Broadcast, summary)
    }

    /// The same message with id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The same message of kind `kind`.
    pub fn with_kind(mut self, kind: MessageKind) -> Self {
        self.kind = kind;
        self
    }

    /// The same message about task `task_id`.
    pub fn task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }

    /// Adds an artifact.
    pub fn artifact(mut self, artifact: Artifact) -> Self {
        self.payload.artifacts.push(artifact);
        self
    }

    /// Adds a decision.
    pub fn decision(mut self, decision: impl Into<String>) -> Self {
        self.payload.decisions.push(decision.into());
        self
    }

    /// Adds a blocker.
    pub fn blocker(mut self, blocker: impl Into<String>) -> Self {
        self.payload.blockers.push(blocker.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_round_trip_through_json() {
        let message = AgentMessage::intermediate("coder", "lead", "half done")
            .with_id("m1")
            .task("t1")
            .artifact(Artifact::text("notes.txt", "so far"))
            .blocker("the API is down");
        let value = serde_json::to_value(&message).expect("serializes");
        assert_eq!(value["to"], json!({"type": "agent", "name": "lead"}));
        assert_eq!(value["kind"], json!("intermediate_result"));
        assert!(value["payload"].get("decisions").is_none(), "empty lists are left out");
        let back: AgentMessage = serde_json::from_value(value).expect("parses");
        assert_eq!(back, message);
        let broadcast = serde_json::to_value(AgentMessage::broadcast("lead", "hi")).expect("serializes");
        assert_eq!(broadcast["to"], json!({"type": "broadcast"}));
    }

    #[test]
    fn ids_are_fresh_and_texts_cover_every_field() {
        let a = AgentMessage::request("a", "b", "one");
        let b = AgentMessage::request("a", "b", "two");
        assert_ne!(a.id, b.id);
        let mut message = a.artifact(Artifact::text("n", "c")).decision("d").blocker("e");
        assert_eq!(message.payload.texts().collect::<Vec<_>>(), ["one", "n", "c", "d", "e"]);
        message.payload.map_texts(str::to_uppercase);
        assert_eq!(message.payload.texts().collect::<Vec<_>>(), ["ONE", "N", "C", "D", "E"]);
        assert_eq!(message.payload.artifacts[0].media_type, "text/plain");
    }
}
