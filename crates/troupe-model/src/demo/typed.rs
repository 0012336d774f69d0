//! The demo model's typed answers: asked for a JSON document of a schema, it answers with
//! one that matches, its text fields holding what it would have said.

use serde_json::{Map, Value};

/// How deep a schema is followed before an object is left empty.
const MAX_DEPTH: usize = 16;

/// How many characters of what it would have said a text field holds.
const MAX_TEXT: usize = 100;

/// A document of `schema`, its strings saying the first line of `said` (a field is a
/// field, not a page).
pub(super) fn document(schema: &Value, said: &str) -> Value {
    let line = said.lines().find(|line| !line.trim().is_empty()).unwrap_or(said).trim();
    let text: String = line.chars().take(MAX_TEXT).collect();
    instance(schema, &text, 0)
}

fn instance(schema: &Value, said: &str, depth: usize) -> Value {
    let Value::Object(schema) = schema else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Object(Map::new());
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(Value::Array(values)) = schema.get("enum")
        && let Some(first) = values.first()
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(variants)) = schema.get(key) {
            let chosen = variants.iter().find(|v| v.get("type").and_then(Value::as_str) != Some("null"));
            return chosen.map_or(Value::Null, |v| instance(v, said, depth + 1));
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).find(|k| *k != "null").unwrap_or("null"),
        _ if schema.contains_key("properties") => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut object = Map::new();
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (name, property) in properties {
                    object.insert(name.clone(), instance(property, said, depth + 1));
                }
            }
            Value::Object(object)
        }
        "array" => {
            let items = schema.get("items").map_or(Value::Null, |items| instance(items, said, depth + 1));
            let count = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1).max(1);
            Value::Array((0..count).map(|_| items.clone()).collect())
        }
        "integer" => schema.get("minimum").and_then(Value::as_i64).map_or(Value::from(1), Value::from),
        "number" => schema.get("minimum").cloned().unwrap_or(Value::from(1.0)),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => Value::String(said.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_document_has_every_property_of_its_kind() {
        let schema = json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "points": {"type": "array", "items": {"type": "string"}},
                "score": {"type": "integer", "minimum": 3},
                "mood": {"enum": ["calm", "busy"]},
                "note": {"type": ["string", "null"]},
            },
        });
        assert_eq!(
            document(&schema, "hi"),
            json!({"title": "hi", "points": ["hi"], "score": 3, "mood": "calm", "note": "hi"})
        );
        let long = format!("\n{}\nsecond line", "a".repeat(300));
        assert_eq!(document(&json!({"type": "string"}), &long), json!("a".repeat(MAX_TEXT)));
    }
}
