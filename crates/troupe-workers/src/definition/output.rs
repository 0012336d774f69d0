//! `[output]`: the typed answer an agent's runs end with.
//!
//! ```toml
//! [output]
//! name = "Verdict"                      # optional; default "Output"
//! schema_file = "schemas/verdict.json"  # a JSON schema, relative to the agent file
//! max_corrections = 2                   # optional; mismatched answers sent back
//! ```
//!
//! or the schema written in place, as TOML:
//!
//! ```toml
//! [output.schema]
//! type = "object"
//! required = ["approved", "reasons"]
//! additionalProperties = false
//! properties.approved.type = "boolean"
//! properties.reasons = { type = "array", items = { type = "string" } }
//! ```

use super::error::{DefinitionError, value_location};
use serde::{Deserialize, Serialize};
use std::path::Path;
use troupe_core::OutputSchema;
use troupe_runtime::OutputSpec;

/// `[output]`: the answer's JSON schema, in place or in a file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSection {
    /// The answer's name, sent to the model with the schema (default `Output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The JSON schema, written as TOML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// A file holding the JSON schema, relative to the agent file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_file: Option<String>,
    /// How many mismatched answers are sent back for correction before the run fails
    /// `output_invalid` (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_corrections: Option<u32>,
}

impl OutputSection {
    /// Whether the file has no `[output]`.
    pub fn is_empty(&self) -> bool {
        self == &OutputSection::default()
    }

    /// The output spec the section describes (`None` without `[output]`), its schema read
    /// (from `schema_file`, next to `agent_file`) and checked; errors point into `text`.
    pub(crate) fn spec(&self, agent_file: &Path, text: &str) -> Result<Option<OutputSpec>, DefinitionError> {
        if self.is_empty() {
            return Ok(None);
        }
        let at = |key: &str| value_location(text, &["output", key]).or_else(|| value_location(text, &["output"]));
        let fail = |key: &str, message: String| DefinitionError::at(agent_file, at(key), message);
        let schema = match (&self.schema, &self.schema_file) {
            (Some(_), Some(_)) => {
                return Err(fail("schema_file", "[output] takes `schema` or `schema_file`, not both".to_owned()));
            }
            (None, None) => {
                return Err(fail(
                    "name",
                    "[output] needs `schema` (in place) or `schema_file` (a JSON file)".to_owned(),
                ));
            }
            (Some(schema), None) => schema.clone(),
            (None, Some(file)) => {
                let path = agent_file.parent().unwrap_or(Path::new("")).join(file);
                let content = std::fs::read_to_string(&path)
                    .map_err(|e| fail("schema_file", format!("cannot read the schema file {}: {e}", path.display())))?;
                serde_json::from_str(&content)
                    .map_err(|e| fail("schema_file", format!("the schema file {} is not JSON: {e}", path.display())))?
            }
        };
        let key = if self.schema.is_some() { "schema" } else { "schema_file" };
        let name = self.name.clone().unwrap_or_else(|| "Output".to_owned());
        let spec = OutputSpec::new(OutputSchema::new(name, schema)).map_err(|e| fail(key, e.to_string()))?;
        Ok(Some(match self.max_corrections {
            Some(max) => spec.max_corrections(max),
            None => spec,
        }))
    }
}
