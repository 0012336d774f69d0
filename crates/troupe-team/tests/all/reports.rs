//! Typed reports: a member ends with a document (the structured report, or another
//! schema); the `delegate` tool returns it as data; the firewall filters it field by
//! field, sanitising and redacting every text left.

use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::mpsc;
use troupe_core::AgentEventKind;
use troupe_model::DemoProvider;
use troupe_runtime::{Engine, FixedModel};
use troupe_team::firewall::{ContextFirewall, DropReason, FIREWALL_DROP_EVENT, InterfaceOnly, REDACTED};
use troupe_team::message::AgentMessage;
use troupe_team::report::{Report, ReportFormat, report_spec};
use troupe_team::{AgentMember, DELEGATE_TOOL, DelegateTool, Member, MemberTask};
use troupe_testkit::MockTurn;
use troupe_tools::{ToolCatalog, ToolContext, Workspace};

use crate::common::{Mock, Wire};

const KEY: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-0123456789";

fn structured() -> Value {
    json!({
        "summary": format!("Cache done; tested with {KEY}."),
        "artifacts": [{
            "name": "cache.rs",
            "media_type": "text/x-rust",
            "content": "pub fn hit_rate() -> f64 {\n    let secret_sauce = 0.93;\n    secret_sauce\n}\n",
        }],
        "decisions": ["Evict the oldest entry first."],
        "blockers": [],
    })
}

#[test]
fn a_structured_report_is_sanitised_as_a_payload_and_its_secrets_redacted() {
    let firewall = ContextFirewall::new().channel("coder", "tester").sanitiser_for("tester", Arc::new(InterfaceOnly));
    let passed = firewall
        .filter_report(&AgentMessage::response("coder", "tester", "").task("t1"), &structured())
        .expect("the channel is declared");
    assert!(passed.withheld.is_empty(), "{passed:?}");
    let report: Report = serde_json::from_value(passed.report.clone()).expect("still a report");
    assert_eq!(report.summary, format!("Cache done; tested with {REDACTED}."));
    let code = &report.artifacts[0].content;
    assert!(code.contains("pub fn hit_rate() -> f64"), "the interface passes: {code}");
    assert!(!code.contains("secret_sauce"), "the implementation does not: {code}");
    assert_eq!(report.decisions, ["Evict the oldest entry first."]);
    assert_eq!(passed.report["blockers"], json!([]), "an empty list stays a list");
    assert_eq!(firewall.stats().secrets_redacted, 1);
    assert_eq!(firewall.stats().passed, 1);
}

#[test]
fn a_report_of_another_schema_has_every_text_redacted_and_its_other_values_kept() {
    let firewall = ContextFirewall::new().channel("reviewer", "lead");
    let verdict =
        json!({"approved": false, "score": 0.4, "findings": [{"file": "a.rs", "why": format!("leaks {KEY}")}]});
    let passed = firewall.filter_report(&AgentMessage::response("reviewer", "lead", ""), &verdict).expect("passes");
    assert_eq!(
        passed.report,
        json!({"approved": false, "score": 0.4, "findings": [{"file": "a.rs", "why": format!("leaks {REDACTED}")}]})
    );
}

#[tokio::test]
async fn fields_a_channel_does_not_carry_are_withheld_each_with_its_event() {
    let (sink, mut events) = mpsc::channel(16);
    let firewall = ContextFirewall::new()
        .channel("researcher", "lead")
        .report_fields("researcher", "lead", ["summary", "blockers"])
        .events(sink);
    let message = AgentMessage::response("researcher", "lead", "").task("t9");
    let passed = firewall.filter_report(&message, &structured()).expect("the channel is declared");
    assert_eq!(passed.withheld, ["artifacts", "decisions"]);
    assert_eq!(passed.report, json!({"summary": format!("Cache done; tested with {REDACTED}."), "blockers": []}));
    let stats = firewall.stats();
    assert_eq!((stats.fields_withheld, stats.dropped(), stats.passed), (2, 0, 1), "{stats:?}");
    assert_eq!(stats.count(DropReason::FieldWithheld), 2);
    let mut fields = Vec::new();
    while let Ok(event) = events.try_recv() {
        let AgentEventKind::Custom { name, value } = event.kind else { panic!("a custom event") };
        assert_eq!(name, FIREWALL_DROP_EVENT);
        assert_eq!((value["reason"].as_str(), value["task_id"].as_str()), (Some("field_withheld"), Some("t9")));
        assert!(!value.to_string().contains("secret_sauce"), "an event never holds the content: {value}");
        fields.push(value["field"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(fields, ["artifacts", "decisions"]);

    // Other channels carry whole reports; an undeclared one carries nothing.
    let whole = ContextFirewall::new().channel("researcher", "lead").channel("researcher", "writer");
    let to_writer = whole.filter_report(&AgentMessage::response("researcher", "writer", ""), &structured());
    assert_eq!(to_writer.expect("declared").withheld, Vec::<String>::new());
    let drop = whole
        .filter_report(&AgentMessage::response("researcher", "tester", ""), &structured())
        .expect_err("undeclared");
    assert_eq!(drop.reason, DropReason::UndeclaredChannel);
}

/// The demo model over no network, and an engine on it.
fn demo_engine() -> Engine {
    let demo = FixedModel::new(Arc::new(DemoProvider::new().with_delay(std::time::Duration::ZERO)), "demo");
    Engine::builder().resolver(Arc::new(demo)).build()
}

#[tokio::test]
async fn a_member_with_a_typed_report_answers_the_delegate_tool_with_data() {
    let engine = demo_engine();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("README.md"), "# Gadget\n\nA gadget.\n").expect("writes");
    let researcher = engine.agent("researcher").workspace(dir.path()).build().expect("builds");
    let member = AgentMember::new(researcher, "Finds facts.").report(ReportFormat::Structured).shared();

    // Run directly: the result carries the report, decoded as a `Report`.
    let result = member.run(MemberTask::new("t1", "lead", "Describe this repository"), None, Default::default()).await;
    assert!(result.success, "{result:?}");
    let report = result.report_as::<Report>().expect("a typed report").expect("a Report");
    assert!(!report.summary.is_empty(), "{report:?}");
    assert_eq!(serde_json::from_str::<Value>(&result.content).ok(), result.report, "the answer is the document");

    // Through `delegate`: the text is the document, the structured result carries it.
    let catalog =
        ToolCatalog::with_tools([DelegateTool::new("lead", [member]).expect("tool").into_arc()]).expect("catalog");
    let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
    let called = catalog.invoke(DELEGATE_TOOL, json!({"to": "researcher", "brief": "Describe it"}), &ctx).await;
    assert!(!called.is_error, "{}", called.content);
    let structured = called.structured.expect("a structured result");
    assert_eq!(structured["member"], "researcher");
    let report: Report = serde_json::from_value(structured["report"].clone()).expect("the report is data");
    assert!(report_spec().check(&called.content).is_ok(), "the text is the document: {}", called.content);
    assert!(!report.summary.is_empty());
}

/// An answer that is not of its report's schema (a remote server that ignored the schema,
/// say) stays the member's text: the task still succeeded, with no typed report.
#[test]
fn an_answer_not_of_the_report_schema_reaches_its_recipient_as_text() {
    let mut result = troupe_team::MemberResult::failed("auditor", "t1", "");
    (result.success, result.error, result.content) = (true, None, "Looks fine to me.".to_owned());
    result.read_report(Some(&report_spec()));
    assert!(result.success && result.report.is_none(), "{result:?}");
    assert_eq!(result.content, "Looks fine to me.");
    result.content = json!({"summary": "fine", "artifacts": [], "decisions": [], "blockers": []}).to_string();
    result.read_report(Some(&report_spec()));
    assert!(result.report.is_some(), "a document of the schema is read as the report");
}

#[tokio::test]
async fn a_member_with_a_text_report_has_no_typed_report() {
    let engine = demo_engine();
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = engine.agent("writer").workspace(dir.path()).build().expect("builds");
    let member = AgentMember::new(agent, "Writes.");
    let result = member.run(MemberTask::new("t1", "lead", "Say hello"), None, Default::default()).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.report, None);
    assert!(result.report_as::<Report>().is_none());
}

per_wire!(a_structured_report_goes_to_the_vendor_as_a_schema_and_a_mismatch_is_corrected);

/// Over real HTTP: the report's schema rides in the vendor's own structured-output field,
/// an answer that lacks fields is sent back once, and the corrected one is the report.
async fn a_structured_report_goes_to_the_vendor_as_a_schema_and_a_mismatch_is_corrected(wire: Wire) {
    let mock = Mock::with(
        wire,
        [
            MockTurn::text(r#"{"summary": "Found it."}"#),
            MockTurn::text(r#"{"summary": "Found it.", "artifacts": [], "decisions": ["Use v2."], "blockers": []}"#),
        ],
    )
    .await;
    let member = AgentMember::new(mock.agent("researcher"), "Finds facts.").report(ReportFormat::Structured);
    let result = member.run(MemberTask::new("t1", "lead", "Look into it"), None, Default::default()).await;
    assert!(result.success, "{result:?}");
    let report = result.report_as::<Report>().expect("a typed report").expect("a Report");
    assert_eq!((report.summary.as_str(), report.decisions.as_slice()), ("Found it.", &["Use v2.".to_owned()][..]));
    let body: Value = serde_json::from_str(&mock.body(0)).expect("JSON");
    let schema = match wire {
        Wire::Anthropic => &body["output_config"]["format"]["schema"],
        Wire::OpenAiChat => &body["response_format"]["json_schema"]["schema"],
    };
    assert_eq!(schema["required"], json!(["summary", "artifacts", "decisions", "blockers"]), "{body}");
    assert!(mock.body(1).contains("artifacts"), "the correction names what is missing: {}", mock.body(1));
}
