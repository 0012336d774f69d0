//! Input schemas of MCP tools, made acceptable to every model provider.
//!
//! Servers send whatever their SDK produced: `{}` for a tool without arguments, no
//! `properties`, a `$schema` key, a `type` list, `required` naming nothing, sometimes no
//! object at all. Providers refuse several of these, and the catalog requires a root
//! `"type": "object"`, so [`normalize_input_schema`] rewrites the root (only the root:
//! nested schemas are the server's business and pass through unchanged).

use serde_json::{Map, Value};

/// Keys at the root that some providers reject and that say nothing about the arguments.
const DROPPED_ROOT_KEYS: [&str; 3] = ["$schema", "$id", "title"];

/// `schema` as an arguments-object schema every provider accepts:
///
/// - anything that is not a JSON object becomes `{"type": "object", "properties": {}}`;
/// - a missing `type`, or a `type` list holding `"object"`, becomes `"object"`; a root of
///   another type cannot describe named arguments and is replaced by an open object schema
///   (the server still validates what it gets);
/// - missing or malformed `properties` become `{}`;
/// - `required` keeps only strings, and goes when it is empty or not a list;
/// - `$schema`, `$id` and `title` go.
///
/// ```
/// use serde_json::json;
/// use troupe_mcp::normalize_input_schema;
///
/// assert_eq!(normalize_input_schema(json!({})), json!({"type": "object", "properties": {}}));
/// let schema = normalize_input_schema(json!({
///     "$schema": "http://json-schema.org/draft-07/schema#",
///     "properties": {"message": {"type": "string"}},
///     "required": ["message"],
/// }));
/// assert_eq!(
///     schema,
///     json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
/// );
/// ```
pub fn normalize_input_schema(schema: Value) -> Value {
    let Value::Object(mut root) = schema else {
        return empty_object_schema();
    };
    match root.get("type") {
        None => {
            root.insert("type".into(), Value::from("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(types)) if types.iter().any(|t| t.as_str() == Some("object")) => {
            root.insert("type".into(), Value::from("object"));
        }
        Some(_) => {
            let mut open = Map::new();
            open.insert("type".into(), Value::from("object"));
            open.insert("properties".into(), Value::Object(Map::new()));
            open.insert("additionalProperties".into(), Value::Bool(true));
            if let Some(description) = root.get("description").filter(|d| d.is_string()) {
                open.insert("description".into(), description.clone());
            }
            return Value::Object(open);
        }
    }
    if !root.get("properties").is_some_and(Value::is_object) {
        root.insert("properties".into(), Value::Object(Map::new()));
    }
    let required: Option<Vec<Value>> = match root.get("required") {
        Some(Value::Array(names)) => Some(names.iter().filter(|n| n.is_string()).cloned().collect()),
        _ => None,
    };
    match required {
        Some(names) if !names.is_empty() => {
            root.insert("required".into(), Value::Array(names));
        }
        _ => {
            root.remove("required");
        }
    }
    for key in DROPPED_ROOT_KEYS {
        root.remove(key);
    }
    Value::Object(root)
}

fn empty_object_schema() -> Value {
    let mut root = Map::new();
    root.insert("type".into(), Value::from("object"));
    root.insert("properties".into(), Value::Object(Map::new()));
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_objects_become_an_empty_arguments_object() {
        for schema in [Value::Null, json!(true), json!("object"), json!([1, 2]), json!(42)] {
            assert_eq!(normalize_input_schema(schema), json!({"type": "object", "properties": {}}));
        }
    }

    #[test]
    fn the_root_type_becomes_object() {
        assert_eq!(normalize_input_schema(json!({"properties": {}}))["type"], "object");
        assert_eq!(normalize_input_schema(json!({"type": ["object", "null"], "properties": {}}))["type"], "object");
        let scalar = normalize_input_schema(json!({"type": "string", "description": "A query."}));
        assert_eq!(
            scalar,
            json!({"type": "object", "properties": {}, "additionalProperties": true, "description": "A query."})
        );
    }

    #[test]
    fn properties_and_required_are_repaired() {
        let schema = normalize_input_schema(json!({"type": "object", "properties": "oops", "required": "a"}));
        assert_eq!(schema, json!({"type": "object", "properties": {}}));
        let schema = normalize_input_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}},
            "required": ["a", 7, null],
        }));
        assert_eq!(schema["required"], json!(["a"]));
        assert!(normalize_input_schema(json!({"type": "object", "required": []})).get("required").is_none());
    }

    #[test]
    fn root_metadata_goes_and_nested_schemas_stay_as_sent() {
        let nested = json!({"type": ["string", "null"], "$schema": "kept: not the root", "format": "uri"});
        let schema = normalize_input_schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "title": "Args",
            "type": "object",
            "properties": {"link": nested.clone()},
            "additionalProperties": false,
        }));
        assert_eq!(schema, json!({"type": "object", "properties": {"link": nested}, "additionalProperties": false}));
    }
}
