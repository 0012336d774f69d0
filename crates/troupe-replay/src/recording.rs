//! A recorded run, read back from its store: what it was started with, each model turn
//! with the digests of the request that got it, each tool call's result, and what people
//! decided.

use crate::error::ReplayError;
use std::collections::{HashMap, HashSet};
use troupe_core::{ContentBlock, Message, RunId};
use troupe_run::{RecordedToolResult, RunOutcome, RunState, Signal};
use troupe_runtime::durable::{ModelTurn, StoredInput, TEAM_RUN_KIND, state_from_value};
use troupe_store::{EvidenceKind, RunStatus, Store};

/// What a compaction's evidence entry holds that a replay reads.
#[derive(serde::Deserialize)]
struct ContextDigest {
    step: u32,
    conversation: Vec<Message>,
    #[serde(default)]
    results: HashMap<String, RecordedToolResult>,
}

impl From<RecordedToolResult> for RecordedResult {
    fn from(result: RecordedToolResult) -> Self {
        RecordedResult { content: result.content, is_error: result.is_error, attachments: result.attachments }
    }
}

/// A tool call's result as the recorded run got it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedResult {
    /// The result's text.
    pub content: String,
    /// Whether it was an error.
    pub is_error: bool,
    /// The images and PDFs it carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<ContentBlock>,
}

/// A compaction of a recorded run's conversation: the conversation it left, before the
/// model step it came before. A replay puts that conversation in place at the same step
/// instead of compacting again.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedCompaction {
    /// The model step it came before (from 1).
    pub step: u32,
    /// The conversation after it.
    pub messages: Vec<Message>,
}

/// A message a person (or a program) sent a recorded run while it went.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedInput {
    /// The model step whose request first carried it (from 1).
    pub step: u32,
    /// The signal that brought it.
    pub signal: Signal,
}

impl RecordedInput {
    /// The message the signal puts in the conversation (what the run's state makes of it).
    pub fn message(&self) -> Option<Message> {
        input_text(&self.signal).map(Message::user)
    }
}

/// The text a message-bearing signal adds to the conversation.
fn input_text(signal: &Signal) -> Option<String> {
    match signal {
        Signal::UserMessage { text } | Signal::Steering { text } => Some(text.clone()),
        Signal::ExternalEvent { name, payload } => Some(format!("External event `{name}`: {payload}")),
        _ => None,
    }
}

/// Everything a replay needs of one recorded run (and what a [`Cassette`](crate::Cassette)
/// keeps of it).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Recording {
    /// The run's id.
    pub run_id: String,
    /// Where the run stands in its store.
    pub status: RunStatus,
    /// What it was started with: the agent as it was then, the task, the inline history.
    pub input: StoredInput,
    /// The messages it started with (its history, and the conversation it continued).
    pub history: Vec<Message>,
    /// Its model turns, in order.
    pub turns: Vec<ModelTurn>,
    /// Each tool call's result, by call id.
    pub results: HashMap<String, RecordedResult>,
    /// The calls it asked a person about.
    pub asked: HashSet<String>,
    /// The decisions people sent, by call id.
    pub decisions: HashMap<String, Signal>,
    /// What people sent the run while it went (messages, steering, external events), each
    /// with the model step whose request first carried it: a replay sends it again there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<RecordedInput>,
    /// Its compactions, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compactions: Vec<RecordedCompaction>,
    /// Its conversation at its last checkpoint.
    pub messages: Vec<Message>,
    /// How it ended, when it did.
    pub outcome: Option<RunOutcome>,
}

impl Recording {
    /// Reads run `run_id` from `store`.
    ///
    /// Fails, saying why, for an unknown run, a team's run, and a run whose record this
    /// version cannot replay: one recorded before request digests were kept, one whose
    /// conversation was compacted before compactions were recorded in full (the
    /// conversation each left, and the results it may have dropped).
    pub async fn load(store: &dyn Store, run_id: &str) -> Result<Recording, ReplayError> {
        let record = store.load_run(run_id).await?.ok_or_else(|| ReplayError::NotFound(run_id.to_owned()))?;
        if record.state.get("kind").and_then(serde_json::Value::as_str) == Some(TEAM_RUN_KIND) {
            return Err(ReplayError::TeamRun(run_id.to_owned()));
        }
        let input = StoredInput::from_value(record.input.clone()).map_err(|error| ReplayError::Unreadable {
            run_id: run_id.to_owned(),
            what: "input",
            reason: error.to_string(),
        })?;
        let state: RunState = state_from_value(run_id, record.state.clone()).map_err(|error| {
            ReplayError::Unreadable { run_id: run_id.to_owned(), what: "state", reason: error.to_string() }
        })?;
        let evidence = store.evidence(run_id, 0).await?;
        let mut turns = Vec::new();
        let mut asked = HashSet::new();
        let mut compactions = Vec::new();
        let mut results = HashMap::new();
        for entry in &evidence {
            match entry.kind {
                EvidenceKind::ModelTurn => {
                    let turn: ModelTurn = serde_json::from_value(entry.payload.value().clone()).map_err(|error| {
                        ReplayError::Unreadable {
                            run_id: run_id.to_owned(),
                            what: "model turn",
                            reason: format!("evidence entry {}: {error}", entry.seq),
                        }
                    })?;
                    if turn.request.is_none() {
                        return Err(ReplayError::NoRequestDigests { run_id: run_id.to_owned(), step: turns.len() + 1 });
                    }
                    turns.push(turn);
                }
                EvidenceKind::ApprovalWait => {
                    if let Some(call) = &entry.call_id {
                        asked.insert(call.clone());
                    }
                }
                EvidenceKind::ContextDigest => {
                    let Ok(digest) = serde_json::from_value::<ContextDigest>(entry.payload.value().clone()) else {
                        return Err(ReplayError::Compacted(run_id.to_owned()));
                    };
                    results.extend(digest.results.into_iter().map(|(id, result)| (id, result.into())));
                    compactions.push(RecordedCompaction { step: digest.step, messages: digest.conversation });
                }
                _ => {}
            }
        }
        // A conversation only grows from one request to the next, unless it was compacted.
        let counts: Vec<u32> = turns.iter().filter_map(|t| t.request.as_ref().map(|r| r.message_count)).collect();
        if compactions.is_empty() && counts.windows(2).any(|pair| pair[1] < pair[0]) {
            return Err(ReplayError::Compacted(run_id.to_owned()));
        }
        let mut decisions = HashMap::new();
        let mut sent = Vec::new();
        for signal in store.signals(run_id).await? {
            match serde_json::from_value::<Signal>(signal.payload) {
                Ok(signal @ Signal::Approval { .. }) => {
                    if let Signal::Approval { call_id, .. } = &signal {
                        decisions.entry(call_id.to_string()).or_insert_with(|| signal.clone());
                    }
                }
                Ok(signal @ (Signal::UserMessage { .. } | Signal::Steering { .. } | Signal::ExternalEvent { .. })) => {
                    sent.push(signal);
                }
                _ => {}
            }
        }
        let mut history = input.history.clone();
        if history.is_empty()
            && let Some(conversation) = &input.conversation_id
        {
            // The turns of the conversation's earlier runs: what this run started with.
            for turn in store.conversation(conversation.as_str()).await? {
                if turn.run_id == run_id || turn.recorded_at > record.created_at {
                    break;
                }
                let message: Message =
                    serde_json::from_value(turn.message).map_err(|error| ReplayError::Unreadable {
                        run_id: run_id.to_owned(),
                        what: "conversation",
                        reason: format!("turn {}: {error}", turn.seq),
                    })?;
                history.push(message);
            }
        }
        // From the task on (a message sent before the first model call joins the task's).
        let inputs = placed(sent, state.messages(), history.len(), &turns);
        // The calls' results: those a compaction dropped (above), and the conversation's.
        results.extend(troupe_run::tool_results(state.messages()).into_iter().map(|(id, r)| (id, r.into())));
        Ok(Recording {
            run_id: run_id.to_owned(),
            status: record.status,
            history,
            turns,
            results,
            asked,
            decisions,
            inputs,
            compactions,
            messages: state.messages().to_vec(),
            outcome: state.outcome().cloned(),
            input,
        })
    }

    /// The state the replay starts from: the recorded run's first state, under a new id.
    pub fn initial_state(&self, run_id: RunId) -> RunState {
        let mut input = self.input.clone();
        input.history = self.history.clone();
        input.initial_state(run_id)
    }
}

/// Each input sent to the run, with the model step whose request first carried it: the
/// first request whose messages reach the user message holding its text (the first such
/// message from `from` on, and after the previous input's). An input no request carried
/// (sent after the last model call) is left out.
fn placed(sent: Vec<Signal>, messages: &[Message], mut from: usize, turns: &[ModelTurn]) -> Vec<RecordedInput> {
    let mut inputs = Vec::new();
    for signal in sent {
        let Some(text) = input_text(&signal) else { continue };
        let holds = |m: &Message| {
            m.role == troupe_core::Role::User && m.content.iter().any(|b| b.as_text() == Some(text.as_str()))
        };
        let Some(at) = messages.iter().skip(from).position(holds).map(|i| i + from) else { continue };
        from = at;
        let carried = turns.iter().position(|t| t.request.as_ref().is_some_and(|r| r.message_count as usize > at));
        if let Some(turn) = carried {
            inputs.push(RecordedInput { step: u32::try_from(turn + 1).unwrap_or(u32::MAX), signal });
        }
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::Role;
    use troupe_runtime::durable::RequestDigest;

    fn turn(message_count: u32) -> ModelTurn {
        let mut request = troupe_core::ModelRequest::new("m");
        request.messages = (0..message_count).map(|_| Message::user("x")).collect();
        ModelTurn {
            iteration: 1,
            model: "m".into(),
            message: Message::new(Role::Assistant, vec![ContentBlock::text("ok")]),
            stop_reason: troupe_core::StopReason::EndTurn,
            usage: troupe_core::Usage::default(),
            cost_usd: 0.0,
            request: Some(RequestDigest::of(&request)),
        }
    }

    #[test]
    fn each_input_is_placed_at_the_first_request_that_carried_it() {
        let messages = vec![
            Message::user("the task"),
            Message::new(Role::Assistant, vec![ContentBlock::text("a")]),
            Message::new(Role::User, vec![ContentBlock::text("later")]),
            Message::new(Role::Assistant, vec![ContentBlock::text("b")]),
        ];
        // A message sent before the first call joins the task's message.
        let early = Signal::UserMessage { text: "early".into() };
        let with_early = vec![
            Message::new(Role::User, vec![ContentBlock::text("the task"), ContentBlock::text("early")]),
            Message::new(Role::Assistant, vec![ContentBlock::text("a")]),
            Message::new(Role::User, vec![ContentBlock::text("later")]),
        ];
        let later = Signal::UserMessage { text: "later".into() };
        let placed_late = placed(vec![later.clone()], &messages, 0, &[turn(1), turn(3)]);
        assert_eq!(placed_late, [RecordedInput { step: 2, signal: later.clone() }]);
        let both = placed(vec![early.clone(), later.clone()], &with_early, 0, &[turn(1), turn(3)]);
        assert_eq!(both, [RecordedInput { step: 1, signal: early }, RecordedInput { step: 2, signal: later }]);
        let never = placed(vec![Signal::UserMessage { text: "too late".into() }], &messages, 0, &[turn(1), turn(3)]);
        assert!(never.is_empty(), "a message no request carried is left out");
    }
}
