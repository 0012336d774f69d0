//! [`ContextFirewall`]: what may pass between team members, and in what form.
//!
//! Every inter-agent message passes the firewall on its way:
//!
//! 1. **Channels**: only declared `sender -> recipient` channels pass. The orchestrator, if
//!    one is named, is connected both ways to everybody: it hands out the work and takes
//!    the results.
//! 2. **Intermediate results** reach only the orchestrator, whatever the channels say.
//! 3. **Sanitisers** of the recipient rewrite what passes (a tester gets interfaces, not
//!    implementations: [`InterfaceOnly`]).
//! 4. **Secrets** are always redacted, in every field, after the sanitisers
//!    ([`redact_secrets`]); this cannot be turned off.
//!
//! A typed report ([`report`](crate::report)) passes as data
//! ([`ContextFirewall::filter_report`]): the same channel checks, then only the fields its
//! channel carries ([`ContextFirewall::report_fields`]; each other field is withheld, with
//! its own drop), then the sanitisers and the redaction on every text it holds.
//!
//! Each drop is counted by reason ([`ContextFirewall::stats`]) and, when the firewall has
//! an event sink, emitted as an [`AgentEventKind::Custom`] event named `firewall_drop`.
//!
//! ```
//! use std::sync::Arc;
//! use troupe_team::firewall::{ContextFirewall, DropReason, InterfaceOnly};
//! use troupe_team::message::AgentMessage;
//!
//! let firewall = ContextFirewall::new()
//!     .orchestrator("lead")
//!     .channel("coder", "tester")
//!     .sanitiser_for("tester", Arc::new(InterfaceOnly));
//! assert!(firewall.filter(&AgentMessage::notification("coder", "tester", "ready")).is_ok());
//! let drop = firewall.filter(&AgentMessage::notification("tester", "coder", "hi")).expect_err("undeclared");
//! assert_eq!(drop.reason, DropReason::UndeclaredChannel);
//! assert_eq!(firewall.stats().dropped(), 1);
//! ```

mod interface;
mod python;
mod redact;

pub use interface::{CodeLanguage, InterfaceOnly, interface_of, interface_of_fences};
pub use redact::{REDACTED, SecretRedactor, redact_secrets};

use crate::member::{EventSink, MemberResult};
use crate::message::{AgentMessage, MessageKind, MessagePayload, Recipient};
use crate::report::REPORT_FIELDS;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId};
use troupe_tools::{AuditEntry, AuditKind, AuditLog};

/// The name of the event a drop emits.
pub const FIREWALL_DROP_EVENT: &str = "firewall_drop";

/// Rewrites the messages one recipient receives.
pub trait Sanitiser: Send + Sync {
    /// Its name, for logs.
    fn name(&self) -> &str;

    /// The message as the recipient may see it.
    fn sanitise(&self, message: AgentMessage) -> AgentMessage;
}

/// Why the firewall dropped a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DropReason {
    /// No channel from the sender to the recipient was declared.
    UndeclaredChannel,
    /// An intermediate result was sent to someone other than the orchestrator.
    IntermediateToNonOrchestrator,
    /// A broadcast was given to [`ContextFirewall::filter`], which needs a recipient:
    /// filter each copy with [`ContextFirewall::filter_for`] (the bus does).
    UnaddressedBroadcast,
    /// A field of a typed report that its channel does not carry
    /// ([`ContextFirewall::report_fields`]); the rest of the report passed.
    FieldWithheld,
}

impl DropReason {
    /// Every reason.
    pub const ALL: [DropReason; 4] = [
        DropReason::UndeclaredChannel,
        DropReason::IntermediateToNonOrchestrator,
        DropReason::UnaddressedBroadcast,
        DropReason::FieldWithheld,
    ];

    /// The reason's snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::UndeclaredChannel => "undeclared_channel",
            DropReason::IntermediateToNonOrchestrator => "intermediate_to_non_orchestrator",
            DropReason::UnaddressedBroadcast => "unaddressed_broadcast",
            DropReason::FieldWithheld => "field_withheld",
        }
    }

    fn index(self) -> usize {
        match self {
            DropReason::UndeclaredChannel => 0,
            DropReason::IntermediateToNonOrchestrator => 1,
            DropReason::UnaddressedBroadcast => 2,
            DropReason::FieldWithheld => 3,
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DropReason::UndeclaredChannel => "no channel is declared from the sender to the recipient",
            DropReason::IntermediateToNonOrchestrator => "intermediate results go to the orchestrator only",
            DropReason::UnaddressedBroadcast => "a broadcast must be filtered per recipient",
            DropReason::FieldWithheld => "the channel does not carry this field of the report",
        })
    }
}

/// A message the firewall did not let through.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("message `{message_id}` ({kind}) from `{from}` to `{to}` was dropped: {reason}")]
pub struct FirewallDrop {
    /// Why.
    pub reason: DropReason,
    /// The sender.
    pub from: String,
    /// The recipient (`*` for an unaddressed broadcast).
    pub to: String,
    /// The message's kind.
    pub kind: MessageKind,
    /// The message's id.
    pub message_id: String,
}

/// What the firewall has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirewallStats {
    /// Messages let through (one per recipient of a broadcast).
    pub passed: u64,
    /// Drops for an undeclared channel.
    pub undeclared_channel: u64,
    /// Drops of intermediate results sent past the orchestrator.
    pub intermediate_to_non_orchestrator: u64,
    /// Drops of broadcasts given without a recipient.
    pub unaddressed_broadcast: u64,
    /// Fields of typed reports withheld (the rest of each report passed).
    #[serde(default)]
    pub fields_withheld: u64,
    /// Secrets redacted from messages that passed.
    pub secrets_redacted: u64,
    /// Drop events that could not be sent (the sink was full or closed); the drops are
    /// counted all the same.
    pub events_lost: u64,
}

impl FirewallStats {
    /// Every message dropped, whatever the reason (a withheld field is not a dropped
    /// message: see [`fields_withheld`](Self::fields_withheld)).
    pub fn dropped(&self) -> u64 {
        self.undeclared_channel + self.intermediate_to_non_orchestrator + self.unaddressed_broadcast
    }

    /// The drops for `reason`.
    pub fn count(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::UndeclaredChannel => self.undeclared_channel,
            DropReason::IntermediateToNonOrchestrator => self.intermediate_to_non_orchestrator,
            DropReason::UnaddressedBroadcast => self.unaddressed_broadcast,
            DropReason::FieldWithheld => self.fields_withheld,
        }
    }
}

/// A typed report as its recipient may read it ([`ContextFirewall::filter_report`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PassedReport {
    /// The report: the fields its channel carries, every text sanitised and redacted.
    pub report: Value,
    /// The fields withheld, in the order the report's keys are held (by name).
    pub withheld: Vec<String>,
}

/// The filter every inter-agent message passes (see the [module](self) docs).
///
/// Shared by reference (`Arc<ContextFirewall>`): its counters are atomics.
pub struct ContextFirewall {
    channels: HashSet<(String, String)>,
    orchestrator: Option<String>,
    sanitisers: HashMap<String, Vec<Arc<dyn Sanitiser>>>,
    fields: HashMap<(String, String), Vec<String>>,
    events: Option<EventSink>,
    audit: Option<Arc<dyn AuditLog>>,
    run_id: RunId,
    event_seq: AtomicU64,
    passed: AtomicU64,
    dropped: [AtomicU64; DropReason::ALL.len()],
    redacted: AtomicU64,
    events_lost: AtomicU64,
}

impl Default for ContextFirewall {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ContextFirewall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sanitisers: HashMap<&str, Vec<&str>> = self
            .sanitisers
            .iter()
            .map(|(recipient, list)| (recipient.as_str(), list.iter().map(|s| s.name()).collect()))
            .collect();
        f.debug_struct("ContextFirewall")
            .field("channels", &self.channels)
            .field("orchestrator", &self.orchestrator)
            .field("sanitisers", &sanitisers)
            .field("report_fields", &self.fields)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ContextFirewall {
    /// A firewall that lets nothing through until channels are declared.
    pub fn new() -> Self {
        ContextFirewall {
            channels: HashSet::new(),
            orchestrator: None,
            sanitisers: HashMap::new(),
            fields: HashMap::new(),
            events: None,
            audit: None,
            run_id: RunId::new("firewall"),
            event_seq: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            dropped: Default::default(),
            redacted: AtomicU64::new(0),
            events_lost: AtomicU64::new(0),
        }
    }

    /// Declares the channel `from -> to` (one way).
    pub fn channel(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.channels.insert((from.into(), to.into()));
        self
    }

    /// Declares the channels `a -> b` and `b -> a`.
    pub fn duplex(self, a: impl Into<String>, b: impl Into<String>) -> Self {
        let (a, b) = (a.into(), b.into());
        self.channel(a.clone(), b.clone()).channel(b, a)
    }

    /// Names the orchestrator: connected both ways to everybody, the only recipient of
    /// intermediate results.
    pub fn orchestrator(mut self, name: impl Into<String>) -> Self {
        self.orchestrator = Some(name.into());
        self
    }

    /// Adds `sanitiser` to what `recipient` receives (after those added before it).
    pub fn sanitiser_for(mut self, recipient: impl Into<String>, sanitiser: Arc<dyn Sanitiser>) -> Self {
        self.sanitisers.entry(recipient.into()).or_default().push(sanitiser);
        self
    }

    /// The fields of a typed report that the channel `from -> to` carries (top-level keys;
    /// every other field is withheld). Without it, a channel carries whole reports.
    pub fn report_fields(
        mut self,
        from: impl Into<String>,
        to: impl Into<String>,
        fields: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.fields.insert((from.into(), to.into()), fields.into_iter().map(Into::into).collect());
        self
    }

    /// Emits every drop to `sink` as a `firewall_drop` event. The firewall never waits: a
    /// drop whose event does not fit is counted in [`FirewallStats::events_lost`].
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// Records every drop in `audit` as a denied [`AuditKind::FirewallDrop`] entry about the
    /// sender (the recipient and the reason in its `reason`; never the message's content).
    pub fn audit_log(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// The run the drop events are attributed to (default `firewall`): the team's run, say.
    pub fn event_run_id(mut self, run_id: RunId) -> Self {
        self.run_id = run_id;
        self
    }

    /// The orchestrator, if one is named.
    pub fn orchestrator_name(&self) -> Option<&str> {
        self.orchestrator.as_deref()
    }

    /// Whether `from` may send to `to` at all (a declared channel, or the orchestrator at
    /// either end).
    pub fn allows(&self, from: &str, to: &str) -> bool {
        let orchestrator = self.orchestrator.as_deref();
        orchestrator == Some(from)
            || orchestrator == Some(to)
            || self.channels.contains(&(from.to_owned(), to.to_owned()))
    }

    /// The top-level fields of typed reports the channel `from -> to` carries, when
    /// [`report_fields`](Self::report_fields) names them (`None`: whole reports).
    pub fn carried_fields(&self, from: &str, to: &str) -> Option<&[String]> {
        self.fields.get(&(from.to_owned(), to.to_owned())).map(Vec::as_slice)
    }

    /// Filters a direct message for its recipient: the message as the recipient may see it,
    /// or why it was dropped. A broadcast is dropped ([`DropReason::UnaddressedBroadcast`]):
    /// filter it for each recipient with [`filter_for`](Self::filter_for).
    pub fn filter(&self, message: &AgentMessage) -> Result<AgentMessage, FirewallDrop> {
        match &message.to {
            Recipient::Agent(name) => self.filter_for(message, name),
            Recipient::Broadcast => Err(self.drop(message, "*", DropReason::UnaddressedBroadcast, None)),
        }
    }

    /// Filters `message` for `recipient` (one copy of a broadcast, or a direct message).
    pub fn filter_for(&self, message: &AgentMessage, recipient: &str) -> Result<AgentMessage, FirewallDrop> {
        self.admit(message, recipient)?;
        let passed = self.sanitise_for(message, recipient);
        self.passed.fetch_add(1, Ordering::Relaxed);
        Ok(passed)
    }

    /// Filters the typed report `report` that `message` (a response whose summary is left
    /// aside) carries to its recipient: the channel checks of [`filter`](Self::filter), then
    /// only the fields the channel carries ([`report_fields`](Self::report_fields): each
    /// other field withheld, a [`DropReason::FieldWithheld`] drop), then the recipient's
    /// sanitisers and the redaction of secrets on every text left. A structured
    /// [`Report`](crate::report::Report) is sanitised as a message's payload (its artifacts
    /// as artifacts); any other document text by text.
    ///
    /// ```
    /// use serde_json::json;
    /// use troupe_team::firewall::ContextFirewall;
    /// use troupe_team::message::AgentMessage;
    ///
    /// let firewall = ContextFirewall::new()
    ///     .channel("researcher", "lead")
    ///     .report_fields("researcher", "lead", ["summary", "decisions"]);
    /// let report = json!({"summary": "Found it.", "artifacts": [], "decisions": ["Use v2."], "blockers": []});
    /// let passed = firewall.filter_report(&AgentMessage::response("researcher", "lead", ""), &report)?;
    /// assert_eq!(passed.report, json!({"summary": "Found it.", "decisions": ["Use v2."]}));
    /// assert_eq!(passed.withheld, ["artifacts", "blockers"]);
    /// assert_eq!(firewall.stats().fields_withheld, 2);
    /// # Ok::<(), troupe_team::firewall::FirewallDrop>(())
    /// ```
    pub fn filter_report(&self, message: &AgentMessage, report: &Value) -> Result<PassedReport, FirewallDrop> {
        let recipient = match &message.to {
            Recipient::Agent(name) => name.as_str(),
            Recipient::Broadcast => return Err(self.drop(message, "*", DropReason::UnaddressedBroadcast, None)),
        };
        self.admit(message, recipient)?;
        let mut report = report.clone();
        let mut withheld = Vec::new();
        if let (Some(carried), Value::Object(fields)) =
            (self.fields.get(&(message.from.clone(), recipient.to_owned())), &mut report)
        {
            fields.retain(|field, _| {
                let keep = carried.iter().any(|c| c == field);
                if !keep {
                    withheld.push(field.clone());
                }
                keep
            });
            for field in &withheld {
                self.drop(message, recipient, DropReason::FieldWithheld, Some(field));
            }
        }
        let report = self.sanitise_report(message, recipient, report);
        self.passed.fetch_add(1, Ordering::Relaxed);
        Ok(PassedReport { report, withheld })
    }

    /// Passes a member's `result` to `recipient` through the firewall, in place: a typed
    /// report by [`filter_report`](Self::filter_report) (the answer becomes the filtered
    /// document's JSON), a text answer by [`filter`](Self::filter); secrets are redacted
    /// from its error too. Gives the fields withheld, or the drop (the result is then left
    /// as it was: whoever passes it says what the recipient reads instead).
    pub fn filter_result(&self, result: &mut MemberResult, recipient: &str) -> Result<Vec<String>, FirewallDrop> {
        let mut message = AgentMessage::response(result.name.clone(), recipient.to_owned(), result.content.clone())
            .task(result.task_id.clone());
        let withheld = match &result.report {
            Some(report) => {
                message.payload.summary.clear();
                let passed = self.filter_report(&message, report)?;
                result.content = serde_json::to_string_pretty(&passed.report).unwrap_or_default();
                result.report = Some(passed.report);
                passed.withheld
            }
            None => {
                result.content = self.filter(&message)?.payload.summary;
                Vec::new()
            }
        };
        result.error = result.error.take().map(|e| redact_secrets(&e).0.into_owned());
        Ok(withheld)
    }

    /// The channel checks: intermediate results to the orchestrator only, then a declared
    /// channel (or the orchestrator at one end).
    fn admit(&self, message: &AgentMessage, recipient: &str) -> Result<(), FirewallDrop> {
        if message.kind == MessageKind::IntermediateResult && self.orchestrator.as_deref() != Some(recipient) {
            return Err(self.drop(message, recipient, DropReason::IntermediateToNonOrchestrator, None));
        }
        if !self.allows(&message.from, recipient) {
            return Err(self.drop(message, recipient, DropReason::UndeclaredChannel, None));
        }
        Ok(())
    }

    /// Every text of a typed report as `recipient` may read it.
    fn sanitise_report(&self, message: &AgentMessage, recipient: &str, report: Value) -> Value {
        let structured = match &report {
            Value::Object(fields) if fields.keys().all(|k| REPORT_FIELDS.contains(&k.as_str())) => {
                serde_json::from_value::<MessagePayload>(report.clone()).ok()
            }
            _ => None,
        };
        if let (Some(payload), Value::Object(fields)) = (structured, &report) {
            let mut carrier = message.clone();
            carrier.payload = payload;
            let passed = serde_json::to_value(self.sanitise_for(&carrier, recipient).payload).unwrap_or(Value::Null);
            // The fields the report had (an empty list stays an empty list).
            return Value::Object(
                fields
                    .keys()
                    .map(|k| (k.clone(), passed.get(k).cloned().unwrap_or_else(|| Value::Array(Vec::new()))))
                    .collect(),
            );
        }
        self.sanitise_texts(message, recipient, report)
    }

    /// `value` with every string in it as `recipient` may read it.
    fn sanitise_texts(&self, message: &AgentMessage, recipient: &str, value: Value) -> Value {
        match value {
            Value::String(text) => {
                let mut carrier = message.clone();
                carrier.payload = MessagePayload::summary(text);
                Value::String(self.sanitise_for(&carrier, recipient).payload.summary)
            }
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.sanitise_texts(message, recipient, v)).collect())
            }
            Value::Object(fields) => Value::Object(
                fields.into_iter().map(|(k, v)| (k, self.sanitise_texts(message, recipient, v))).collect(),
            ),
            other => other,
        }
    }

    /// `message` as `recipient` may read it — its sanitisers applied, secrets redacted —
    /// without the channel check: for a message whose channel the team grants by its
    /// shape, such as the brief a leader gives the member it delegates to.
    pub fn sanitise_for(&self, message: &AgentMessage, recipient: &str) -> AgentMessage {
        let mut passed = message.clone();
        for sanitiser in self.sanitisers.get(recipient).into_iter().flatten() {
            passed = sanitiser.sanitise(passed);
        }
        let redacted = SecretRedactor::redact(&mut passed);
        self.redacted.fetch_add(redacted as u64, Ordering::Relaxed);
        passed
    }

    /// What the firewall has done so far.
    pub fn stats(&self) -> FirewallStats {
        let dropped = |reason: DropReason| self.dropped[reason.index()].load(Ordering::Relaxed);
        FirewallStats {
            passed: self.passed.load(Ordering::Relaxed),
            undeclared_channel: dropped(DropReason::UndeclaredChannel),
            intermediate_to_non_orchestrator: dropped(DropReason::IntermediateToNonOrchestrator),
            unaddressed_broadcast: dropped(DropReason::UnaddressedBroadcast),
            fields_withheld: dropped(DropReason::FieldWithheld),
            secrets_redacted: self.redacted.load(Ordering::Relaxed),
            events_lost: self.events_lost.load(Ordering::Relaxed),
        }
    }

    /// Counts a drop (of the whole message, or of one `field` of its report), emits its
    /// event, and describes it.
    fn drop(&self, message: &AgentMessage, to: &str, reason: DropReason, field: Option<&str>) -> FirewallDrop {
        self.dropped[reason.index()].fetch_add(1, Ordering::Relaxed);
        tracing::debug!(from = %message.from, to, kind = %message.kind, reason = reason.as_str(), field, "firewall drop");
        if let Some(audit) = &self.audit {
            let what = field.map(|f| format!(" field `{f}`")).unwrap_or_default();
            let why = format!("{} -> {to} ({}){what}: {}", message.from, message.kind, reason);
            audit.record(
                AuditEntry::new(AuditKind::FirewallDrop, message.from.clone(), false, why)
                    .with_run_id(self.run_id.as_str()),
            );
        }
        if let Some(sink) = &self.events {
            let seq = self.event_seq.fetch_add(1, Ordering::Relaxed);
            let mut value = serde_json::json!({
                "message_id": message.id,
                "from": message.from,
                "to": to,
                "kind": message.kind,
                "reason": reason,
                "task_id": message.task_id,
            });
            if let Some(field) = field {
                value["field"] = Value::String(field.to_owned());
            }
            // The dropped message's sender is the agent the event is about.
            let attribution = Attribution::now(AgentId::new(message.from.clone()), self.run_id.clone(), seq);
            let event =
                AgentEvent::new(attribution, AgentEventKind::Custom { name: FIREWALL_DROP_EVENT.to_owned(), value });
            if sink.try_send(event).is_err() {
                self.events_lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        FirewallDrop {
            reason,
            from: message.from.clone(),
            to: to.to_owned(),
            kind: message.kind,
            message_id: message.id.clone(),
        }
    }
}
