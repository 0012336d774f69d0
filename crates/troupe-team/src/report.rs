//! Typed reports: what a member gives back as data rather than prose.
//!
//! A member whose report is typed ends its run with a JSON document of a schema (its
//! agent's [`OutputSpec`], checked and corrected by the runner like any typed answer). By
//! default that schema is the context-isolation design's structured report, [`Report`]:
//! a summary, the artifacts, the decisions made and what blocks the work. Any other object
//! schema may be declared instead ([`ReportFormat::Schema`]).
//!
//! The report travels as data: [`MemberResult::report`](crate::MemberResult::report) holds
//! it, the leader's `delegate` tool returns it as its structured result, and the
//! [`ContextFirewall`](crate::ContextFirewall) filters it field by field
//! ([`ContextFirewall::filter_report`](crate::ContextFirewall::filter_report)): fields a
//! channel does not carry are withheld, every text that passes is sanitised and redacted.
//!
//! ```
//! use troupe_team::report::{Report, report_spec};
//!
//! let spec = report_spec();
//! assert_eq!(spec.schema.name, "Report");
//! let value = spec.check(r#"{"summary": "Parser fixed.", "artifacts": [], "decisions": ["Empty input is valid."], "blockers": []}"#)?;
//! let report: Report = serde_json::from_value(value)?;
//! assert_eq!(report.decisions, ["Empty input is valid."]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::message::{Artifact, MessagePayload};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use troupe_runtime::{OutputSpec, output_spec_for};

/// The structured report of the context-isolation design: results, not transcripts.
///
/// A model must give every field ([`report_spec`] requires them all); a report read after
/// the firewall may lack those its channel does not carry, which then read as empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Report {
    /// The result in a few sentences.
    pub summary: String,
    /// The work itself: files, patches, notes, each named.
    pub artifacts: Vec<ReportArtifact>,
    /// Decisions made, which whoever reads the report should respect.
    pub decisions: Vec<String>,
    /// What stops the work, if anything.
    pub blockers: Vec<String>,
}

/// A named piece of work in a [`Report`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportArtifact {
    /// Its name (a file name, say: its extension tells code from prose).
    pub name: String,
    /// Its MIME type (`text/x-rust`, `text/markdown`, ...).
    pub media_type: String,
    /// Its content, inline.
    pub content: String,
}

/// The top-level fields of a [`Report`], in order.
pub const REPORT_FIELDS: [&str; 4] = ["summary", "artifacts", "decisions", "blockers"];

impl From<Report> for MessagePayload {
    fn from(report: Report) -> Self {
        MessagePayload {
            summary: report.summary,
            artifacts: report.artifacts.into_iter().map(|a| Artifact::new(a.name, a.media_type, a.content)).collect(),
            decisions: report.decisions,
            blockers: report.blockers,
        }
    }
}

impl From<MessagePayload> for Report {
    fn from(payload: MessagePayload) -> Self {
        Report {
            summary: payload.summary,
            artifacts: payload
                .artifacts
                .into_iter()
                .map(|a| ReportArtifact { name: a.name, media_type: a.media_type, content: a.content })
                .collect(),
            decisions: payload.decisions,
            blockers: payload.blockers,
        }
    }
}

/// The output spec of the structured [`Report`]: a member's runs end with one, every
/// field given (what vendors' strict modes require, and what the reader expects).
pub fn report_spec() -> OutputSpec {
    let mut spec = output_spec_for::<Report>();
    spec.schema.schema["required"] = serde_json::json!(REPORT_FIELDS);
    for field in REPORT_FIELDS {
        // `serde(default)` gives each field a default in the schema; a model is not to
        // lean on it.
        if let Some(property) = spec.schema.schema["properties"].get_mut(field).and_then(|p| p.as_object_mut()) {
            property.remove("default");
        }
    }
    spec
}

/// What a member reports: free text, the structured [`Report`], or a document of another
/// schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ReportFormat {
    /// Free text: whatever the member's run answers (unless its agent declares an output
    /// schema of its own).
    #[default]
    Text,
    /// The structured [`Report`].
    Structured,
    /// A JSON document of this schema.
    Schema(OutputSpec),
}

impl ReportFormat {
    /// The output spec the member's runs must end with (`None` for free text).
    pub fn spec(&self) -> Option<OutputSpec> {
        match self {
            ReportFormat::Text => None,
            ReportFormat::Structured => Some(report_spec()),
            ReportFormat::Schema(spec) => Some(spec.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_report_schema_requires_every_field_and_closes_objects() {
        let spec = report_spec();
        let schema = &spec.schema.schema;
        assert_eq!(schema["required"], json!(REPORT_FIELDS));
        assert_eq!(schema["additionalProperties"], json!(false));
        let missing = spec.check(r#"{"summary": "done"}"#).expect_err("fields are missing");
        assert!(missing.contains("artifacts"), "{missing}");
    }

    #[test]
    fn a_report_and_a_payload_convert_both_ways() {
        let report = Report {
            summary: "s".into(),
            artifacts: vec![ReportArtifact {
                name: "a.rs".into(),
                media_type: "text/x-rust".into(),
                content: "fn a() {}".into(),
            }],
            decisions: vec!["d".into()],
            blockers: vec![],
        };
        let payload = MessagePayload::from(report.clone());
        assert_eq!(payload.artifacts[0].name, "a.rs");
        assert_eq!(Report::from(payload), report);
        assert_eq!(ReportFormat::Text.spec(), None);
        assert_eq!(ReportFormat::Structured.spec().map(|s| s.schema.name), Some("Report".to_owned()));
    }
}
