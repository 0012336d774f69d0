//! Typed answers: a run asked for a `T` ends with a `T`.
//!
//! [`output_spec_for`] makes the [`OutputSpec`] of a Rust type (its JSON schema, generated
//! with `schemars`, every object closed so that vendors' strict modes take it);
//! [`Agent::run_typed`](crate::Agent::run_typed) runs with it and decodes the answer.

use crate::error::RuntimeError;
use crate::outcome::RunOutput;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use troupe_core::OutputSchema;
use troupe_run::OutputSpec;

/// A completed run's answer decoded as a `T`, and the run it came from.
#[derive(Debug)]
pub struct TypedOutput<T> {
    /// The answer.
    pub value: T,
    /// The run: its usage, cost, conversation and events.
    pub run: RunOutput,
}

/// The output spec asking for a `T`: its schema, named by the type.
pub fn output_spec_for<T: JsonSchema>() -> OutputSpec {
    let mut schema = troupe_tools::schema_for::<T>();
    close_objects(&mut schema);
    let name = OutputSchema::name_from(&T::schema_name());
    OutputSpec { schema: OutputSchema::new(name, schema), max_corrections: troupe_run::DEFAULT_MAX_CORRECTIONS }
}

/// Decodes a completed run's answer as a `T`.
pub(crate) fn decode<T: DeserializeOwned>(run: RunOutput) -> Result<TypedOutput<T>, RuntimeError> {
    let run = run.into_result()?;
    let mut reader = serde_json::Deserializer::from_str(&run.text);
    match serde_path_to_error::deserialize(&mut reader) {
        Ok(value) => Ok(TypedOutput { value, run }),
        Err(error) => Err(RuntimeError::OutputType(format!("at `{}`: {}", error.path(), error.inner()))),
    }
}

/// Every object schema with properties gets `additionalProperties: false` unless it says
/// otherwise: serde ignores unknown fields anyway, and it is what strict modes require.
fn close_objects(node: &mut Value) {
    match node {
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        Value::Object(map) => {
            if map.contains_key("properties") {
                map.entry("additionalProperties").or_insert(Value::Bool(false));
            }
            for (key, value) in map.iter_mut() {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    close_objects(value);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Weather {
        city: String,
        celsius: f64,
        wind: Wind,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Wind {
        knots: u32,
    }

    #[test]
    fn a_types_spec_is_strict_and_named_by_the_type() {
        let spec = output_spec_for::<Weather>();
        assert_eq!(spec.schema.name, "Weather");
        assert!(spec.schema.is_strict(), "{}", spec.schema.schema);
        assert_eq!(spec.schema.schema["properties"]["wind"]["additionalProperties"], json!(false));
        assert!(OutputSpec::new(spec.schema.clone()).is_ok(), "a valid output schema");
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Note {
        text: String,
        tag: Option<String>,
    }

    #[test]
    fn optional_fields_are_not_strict() {
        assert!(!output_spec_for::<Note>().schema.is_strict());
    }
}
