//! [`OutputSpec`]: the typed answer a run must end with, and the check of an answer
//! against it.
//!
//! The schema goes to the model with every request ([`troupe_core::OutputSchema`]); the
//! answer comes back as the text of the last turn. [`OutputSpec::check`] reads that text
//! as JSON and validates it against the schema. A mismatch is sent back to the model with
//! what was wrong, at most [`OutputSpec::max_corrections`] times; then the run fails with
//! the code `output_invalid`, its last answer kept in the conversation.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use troupe_core::OutputSchema;

/// How many times by default a run sends an answer that does not match back to the model.
pub const DEFAULT_MAX_CORRECTIONS: u32 = 2;

/// The most validation errors one correction lists: enough to fix, short enough to read.
const ERRORS_SHOWN: usize = 8;

/// The typed answer a run must end with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// The answer's name and JSON schema, as sent to the model.
    pub schema: OutputSchema,
    /// How many answers that do not match are sent back for correction before the run
    /// fails.
    #[serde(default = "default_max_corrections")]
    pub max_corrections: u32,
}

fn default_max_corrections() -> u32 {
    DEFAULT_MAX_CORRECTIONS
}

/// Why a schema cannot be an output schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the output schema `{name}` {problem}")]
pub struct OutputSchemaError {
    /// The schema's name.
    pub name: String,
    /// What is wrong with it.
    pub problem: String,
}

impl OutputSpec {
    /// An output spec for `schema`, checked: an object schema (what every vendor's strict
    /// mode takes at the root), a valid JSON schema, and a name vendors accept
    /// (`[a-zA-Z0-9_-]`, 1 to 64 characters).
    pub fn new(schema: OutputSchema) -> Result<Self, OutputSchemaError> {
        let problem = |problem: String| OutputSchemaError { name: schema.name.clone(), problem };
        let name_ok = (1..=64).contains(&schema.name.len())
            && schema.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(problem("has a name vendors refuse: use 1 to 64 of a-z, A-Z, 0-9, `_` and `-`".to_owned()));
        }
        if schema.schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(problem("must describe a JSON object (`\"type\": \"object\"` at its root)".to_owned()));
        }
        jsonschema::validator_for(&schema.schema).map_err(|e| problem(format!("is not a valid JSON schema: {e}")))?;
        Ok(OutputSpec { schema, max_corrections: DEFAULT_MAX_CORRECTIONS })
    }

    /// Sets how many answers that do not match are sent back for correction.
    pub fn max_corrections(mut self, max_corrections: u32) -> Self {
        self.max_corrections = max_corrections;
        self
    }

    /// `answer` as the JSON document it must be, or what is wrong with it, worded for the
    /// model to correct. A Markdown code fence around the document is tolerated.
    pub fn check(&self, answer: &str) -> Result<Value, String> {
        let document = unfenced(answer);
        let value: Value =
            serde_json::from_str(document).map_err(|e| format!("the answer is not a JSON document ({e})"))?;
        let validator = jsonschema::validator_for(&self.schema.schema)
            .map_err(|e| format!("the output schema cannot be used: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .take(ERRORS_SHOWN)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() { format!("- {error}") } else { format!("- at `{at}`: {error}") }
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(format!("the answer does not match the schema `{}`:\n{}", self.schema.name, errors.join("\n")))
        }
    }

    /// The message that sends a mismatched answer back to the model.
    pub fn correction(&self, problem: &str) -> String {
        format!(
            "Your answer cannot be used: {problem}\nAnswer again with only a JSON document that matches the schema `{}`.",
            self.schema.name
        )
    }
}

/// The text inside one Markdown code fence (```` ```json … ``` ````), or `text` trimmed.
fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return trimmed;
    };
    // The info string (`json`) runs to the end of the first line.
    body.split_once('\n').map_or(body, |(_, inside)| inside).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place() -> OutputSpec {
        OutputSpec::new(OutputSchema::new(
            "Place",
            json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
                "required": ["city", "population"],
                "additionalProperties": false,
            }),
        ))
        .expect("ok")
    }

    #[test]
    fn a_matching_answer_is_its_json() {
        assert_eq!(
            place().check(r#"{"city": "Oslo", "population": 709000}"#),
            Ok(json!({"city": "Oslo", "population": 709000}))
        );
        assert_eq!(
            place().check("```json\n{\"city\": \"Oslo\", \"population\": 1}\n```"),
            Ok(json!({"city": "Oslo", "population": 1}))
        );
    }

    #[test]
    fn a_mismatch_says_where_and_what() {
        let problem = place().check(r#"{"city": "Oslo", "population": -3, "mayor": "x"}"#).expect_err("an error");
        assert!(problem.contains("`/population`"), "{problem}");
        assert!(problem.contains("mayor"), "{problem}");
        let problem = place().check("Oslo, about 700 000 people").expect_err("an error");
        assert!(problem.starts_with("the answer is not a JSON document"), "{problem}");
    }

    #[test]
    fn schemas_vendors_refuse_are_refused() {
        let not_object = OutputSpec::new(OutputSchema::new("N", json!({"type": "string"}))).expect_err("an error");
        assert!(not_object.problem.contains("JSON object"), "{not_object}");
        let bad_name = OutputSpec::new(OutputSchema::new("a place", json!({"type": "object"}))).expect_err("an error");
        assert!(bad_name.problem.contains("name"), "{bad_name}");
        let invalid = OutputSpec::new(OutputSchema::new("P", json!({"type": "object", "minProperties": "two"})));
        assert!(invalid.expect_err("an error").problem.contains("not a valid JSON schema"));
    }
}
