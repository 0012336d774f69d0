//! The context firewall: declared channels, intermediate results for the orchestrator
//! only, secrets always redacted, a tester's interface-only view, and drops counted and
//! emitted as events.

use serde_json::json;
use std::sync::Arc;
use tokio::sync::mpsc;
use troupe_core::AgentEventKind;
use troupe_team::bus::MessageBus;
use troupe_team::firewall::{ContextFirewall, DropReason, FIREWALL_DROP_EVENT, InterfaceOnly, REDACTED};
use troupe_team::message::{AgentMessage, Artifact, MessageKind};

/// A lead, a coder and a tester: coder -> tester and tester -> coder are declared, the
/// reviewer has no channel to anybody.
fn team() -> ContextFirewall {
    ContextFirewall::new()
        .orchestrator("lead")
        .duplex("coder", "tester")
        .sanitiser_for("tester", Arc::new(InterfaceOnly))
}

#[test]
fn an_undeclared_channel_is_blocked_and_a_declared_one_passes() {
    let firewall = team();
    let drop = firewall.filter(&AgentMessage::request("coder", "reviewer", "Review this.")).expect_err("no channel");
    assert_eq!(drop.reason, DropReason::UndeclaredChannel);
    assert_eq!((drop.from.as_str(), drop.to.as_str()), ("coder", "reviewer"));
    assert!(drop.to_string().contains("no channel"), "{drop}");
    // Channels are one way: declaring coder -> reviewer does not open reviewer -> coder.
    let one_way = ContextFirewall::new().channel("coder", "reviewer");
    assert!(one_way.filter(&AgentMessage::request("coder", "reviewer", "x")).is_ok());
    assert!(one_way.filter(&AgentMessage::request("reviewer", "coder", "x")).is_err());
    let passed = firewall.filter(&AgentMessage::notification("coder", "tester", "Ready.")).expect("declared");
    assert_eq!(passed.payload.summary, "Ready.");
    // The orchestrator reaches everybody and everybody reaches it.
    assert!(firewall.filter(&AgentMessage::request("lead", "reviewer", "Review.")).is_ok());
    assert!(firewall.filter(&AgentMessage::response("reviewer", "lead", "Done.")).is_ok());
}

#[test]
fn intermediate_results_reach_only_the_orchestrator() {
    let firewall = team();
    let to_tester = AgentMessage::intermediate("coder", "tester", "Half of the parser.");
    let drop = firewall.filter(&to_tester).expect_err("the tester is not the orchestrator");
    assert_eq!(drop.reason, DropReason::IntermediateToNonOrchestrator);
    assert_eq!(drop.kind, MessageKind::IntermediateResult);
    let to_lead = AgentMessage::intermediate("coder", "lead", "Half of the parser.");
    assert_eq!(firewall.filter(&to_lead).expect("to the orchestrator").payload.summary, "Half of the parser.");
    // Without an orchestrator, no intermediate result goes anywhere.
    let flat = ContextFirewall::new().duplex("coder", "tester");
    assert!(flat.filter(&AgentMessage::intermediate("coder", "tester", "wip")).is_err());
}

#[test]
fn secrets_are_redacted_in_every_field_for_every_recipient() {
    let anthropic = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-0123456789";
    let aws = concat!("AKIA", "ABCDEFGHIJKLMNOP");
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACD\n-----END OPENSSH PRIVATE KEY-----";
    let message = AgentMessage::response("coder", "lead", format!("Used {anthropic} to call the API."))
        .artifact(Artifact::new("deploy.env", "text/plain", format!("AWS_ACCESS_KEY_ID={aws}\nREGION=eu-west-1\n")))
        .artifact(Artifact::new("id_ed25519", "application/x-pem-file", format!("{pem}\n")))
        .decision(format!("Keep the key {aws} in the vault."))
        .blocker(format!("The deploy key leaked: {pem}"));
    let firewall = team();
    let seen = firewall.filter(&message).expect("coder -> lead");
    let texts: Vec<&str> = seen.payload.texts().collect();
    for text in &texts {
        for secret in [anthropic, aws, "b3BlbnNzaC1rZXktdjEAAAAA", "PRIVATE KEY"] {
            assert!(!text.contains(secret), "`{secret}` leaked in {text:?}");
        }
    }
    assert_eq!(seen.payload.summary, format!("Used {REDACTED} to call the API."));
    assert_eq!(seen.payload.artifacts[0].content, format!("AWS_ACCESS_KEY_ID={REDACTED}\nREGION=eu-west-1\n"));
    assert_eq!(seen.payload.artifacts[1].content, format!("{REDACTED}\n"));
    assert_eq!(seen.payload.decisions, [format!("Keep the key {REDACTED} in the vault.")]);
    assert_eq!(seen.payload.blockers, [format!("The deploy key leaked: {REDACTED}")]);
    assert_eq!(firewall.stats().secrets_redacted, 5);
    // The tester's sanitiser does not replace the redactor: secrets go there too.
    let to_tester = AgentMessage::notification("coder", "tester", format!("token {anthropic}"));
    assert_eq!(firewall.filter(&to_tester).expect("declared").payload.summary, format!("token {REDACTED}"));
    // The sender's message itself is left as it was.
    assert!(message.payload.summary.contains(anthropic));
}

#[test]
fn the_tester_sees_interfaces_not_implementations() {
    let implementation = r#"use std::collections::HashMap;

/// A cache of parsed files.
pub struct Cache {
    pub capacity: usize,
    entries: HashMap<String, String>,
}

impl Cache {
    /// An empty cache.
    pub fn new(capacity: usize) -> Self {
        Cache { capacity, entries: HashMap::new() }
    }

    /// The parsed file, parsing it on a miss.
    pub fn get(&mut self, path: &str) -> &str {
        let secret_sauce = path.len() * 31;
        self.entries.entry(path.to_owned()).or_insert_with(|| format!("{secret_sauce}"))
    }

    fn evict(&mut self) {
        self.entries.clear();
    }
}
"#;
    let python = "def parse(text: str) -> dict:\n    \"\"\"Parses.\"\"\"\n    return {\"magic\": 42}\n";
    let message = AgentMessage::notification(
        "coder",
        "tester",
        "Cache done:\n```rust\npub fn hit_rate() -> f64 {\n    0.93\n}\n```",
    )
    .artifact(Artifact::new("src/cache.rs", "text/x-rust", implementation))
    .artifact(Artifact::new("parse.py", "text/x-python", python))
    .artifact(Artifact::new("NOTES.md", "text/markdown", "Run `cargo test -p cache`."));
    let firewall = team();
    let seen = firewall.filter(&message).expect("coder -> tester");
    let rust = &seen.payload.artifacts[0].content;
    assert_eq!(
        rust,
        "/// A cache of parsed files.\npub struct Cache {\n    pub capacity: usize,\n}\n\nimpl Cache {\n    /// An empty cache.\n    pub fn new(capacity: usize) -> Self;\n\n    /// The parsed file, parsing it on a miss.\n    pub fn get(&mut self, path: &str) -> &str;\n}"
    );
    for hidden in ["secret_sauce", "entries", "evict", "HashMap::new"] {
        assert!(!rust.contains(hidden), "`{hidden}` is implementation: {rust}");
    }
    assert_eq!(seen.payload.artifacts[1].content, "def parse(text: str) -> dict:\n    \"\"\"Parses.\"\"\"\n    ...");
    assert_eq!(seen.payload.artifacts[2].content, "Run `cargo test -p cache`.", "prose is kept");
    assert_eq!(seen.payload.summary, "Cache done:\n```rust\npub fn hit_rate() -> f64;\n```");
    // The lead, without the sanitiser, sees the implementation.
    let mut to_lead = message.clone();
    to_lead.to = troupe_team::message::Recipient::Agent("lead".into());
    let full = firewall.filter(&to_lead).expect("to the orchestrator");
    assert!(full.payload.artifacts[0].content.contains("secret_sauce"));
}

#[tokio::test]
async fn drops_are_counted_by_reason_and_emitted_as_events() {
    let (tx, mut rx) = mpsc::channel(8);
    let firewall = team().events(tx);
    let _ = firewall.filter(&AgentMessage::request("coder", "reviewer", "x").with_id("m-1").task("t-9"));
    let _ = firewall.filter(&AgentMessage::intermediate("coder", "tester", "wip").with_id("m-2"));
    let _ = firewall.filter(&AgentMessage::request("tester", "reviewer", "y").with_id("m-3"));
    let _ = firewall.filter(&AgentMessage::broadcast("lead", "all hands").with_id("m-4"));
    assert!(firewall.filter(&AgentMessage::notification("coder", "tester", "ok")).is_ok());
    let stats = firewall.stats();
    assert_eq!(stats.count(DropReason::UndeclaredChannel), 2);
    assert_eq!(stats.count(DropReason::IntermediateToNonOrchestrator), 1);
    assert_eq!(stats.count(DropReason::UnaddressedBroadcast), 1);
    assert_eq!((stats.dropped(), stats.passed, stats.events_lost), (4, 1, 0));

    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(events.len(), 4, "one event per drop");
    let AgentEventKind::Custom { name, value } = &events[0].kind else { panic!("a custom event: {:?}", events[0]) };
    assert_eq!(name, FIREWALL_DROP_EVENT);
    assert_eq!(
        value,
        &json!({"message_id": "m-1", "from": "coder", "to": "reviewer", "kind": "request", "reason": "undeclared_channel", "task_id": "t-9"})
    );
    assert_eq!(events[0].attribution.agent_id.as_str(), "coder", "attributed to the sender");
    let seqs: Vec<u64> = events.iter().map(|e| e.attribution.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    let AgentEventKind::Custom { value, .. } = &events[1].kind else { panic!("custom") };
    assert_eq!(value["reason"], "intermediate_to_non_orchestrator");
}

#[tokio::test]
async fn a_full_event_sink_never_blocks_the_firewall() {
    let (tx, _rx) = mpsc::channel(1);
    let firewall = team().events(tx);
    for n in 0..5 {
        let _ = firewall.filter(&AgentMessage::request("coder", "reviewer", format!("{n}")));
    }
    let stats = firewall.stats();
    assert_eq!((stats.dropped(), stats.events_lost), (5, 4));
}

#[tokio::test]
async fn broadcasts_are_filtered_per_recipient_on_the_bus() {
    let firewall = Arc::new(team());
    let bus = MessageBus::with_firewall(8, Arc::clone(&firewall));
    let mut lead = bus.subscribe("lead").expect("subscribes");
    let mut tester = bus.subscribe("tester").expect("subscribes");
    let mut reviewer = bus.subscribe("reviewer").expect("subscribes");
    let _coder = bus.subscribe("coder").expect("subscribes");
    let code = "pub fn area(r: f64) -> f64 {\n    3.14 * r * r\n}\n";
    let delivery =
        bus.publish(
            AgentMessage::broadcast("coder", "area() is in, key sk-ant-abcdefghijklmnopqrstuv")
                .artifact(Artifact::new("area.rs", "text/x-rust", code)),
        );
    assert_eq!(delivery.delivered, ["lead", "tester"]);
    assert_eq!(delivery.blocked.len(), 1);
    assert_eq!(delivery.blocked[0].to, "reviewer");
    let for_lead = lead.recv().await.expect("the orchestrator gets it");
    assert_eq!(for_lead.payload.artifacts[0].content, code);
    assert!(for_lead.payload.summary.ends_with(REDACTED));
    let for_tester = tester.recv().await.expect("a declared channel");
    assert_eq!(for_tester.payload.artifacts[0].content, "pub fn area(r: f64) -> f64;");
    assert!(reviewer.try_recv().is_none(), "no channel from the coder to the reviewer");
    assert_eq!(bus.stats().blocked, 1);
    assert_eq!(firewall.stats().undeclared_channel, 1);
}

#[test]
fn every_drop_is_audited_as_a_denied_firewall_decision_without_the_content() {
    let audit = Arc::new(troupe_tools::MemoryAuditLog::new());
    let firewall = team().audit_log(audit.clone()).event_run_id(troupe_core::RunId::new("run_team"));
    let secret_plan = "the plan: rotate key sk-live-1234";
    assert!(firewall.filter(&AgentMessage::request("coder", "reviewer", secret_plan)).is_err());
    assert!(firewall.filter(&AgentMessage::request("coder", "tester", "Test this.")).is_ok());
    let entries = audit.entries();
    assert_eq!(entries.len(), 1, "only the drop is audited: {entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.kind, troupe_tools::AuditKind::FirewallDrop);
    assert!(!entry.is_allowed());
    assert_eq!(entry.agent, "coder");
    assert_eq!(entry.run_id.as_deref(), Some("run_team"));
    assert!(entry.reason.contains("coder -> reviewer") && entry.reason.contains("no channel"), "{}", entry.reason);
    assert!(!serde_json::to_string(entry).expect("json").contains("rotate"), "the message's content is not audited");
}

#[test]
fn a_leaders_brief_is_sanitised_for_its_recipient_without_a_declared_channel() {
    let firewall = team();
    let brief = AgentMessage::request(
        "lead",
        "tester",
        "Test this with key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789:\n```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```",
    );
    let read = firewall.sanitise_for(&brief, "tester");
    assert!(!read.payload.summary.contains("sk-ant-api03"), "{}", read.payload.summary);
    assert!(read.payload.summary.contains(REDACTED));
    assert!(!read.payload.summary.contains("a + b"), "the tester reads interfaces: {}", read.payload.summary);
    let stats = firewall.stats();
    assert_eq!((stats.passed, stats.dropped()), (0, 0), "a brief is not a report");
    assert!(stats.secrets_redacted >= 1);
}
