//! The generated input schemas of the built-in tools.

use serde_json::Value;
use troupe_tools::{Tool, coding_tools, fs_edit};

#[test]
fn fs_edit_schema_is_an_object_with_the_expected_required_fields() {
    let tool = fs_edit();
    let schema = &tool.declaration().input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], serde_json::json!(["path", "old_string", "new_string"]));
    assert_eq!(schema["properties"]["replace_all"]["type"], "boolean");
    insta::assert_json_snapshot!("fs_edit_schema", schema);
}

/// Walks every subschema of `schema`.
fn each_property(schema: &Value, visit: &mut dyn FnMut(&str, &Value)) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            visit(name, property);
            each_property(property, visit);
        }
    }
}

#[test]
fn every_builtin_schema_is_provider_friendly_and_documented() {
    for tool in coding_tools() {
        let declaration = tool.declaration();
        let schema = &declaration.input_schema;
        let name = &declaration.name;
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}: built-in arguments are strict");
        let text = schema.to_string();
        for banned in ["$schema", "$ref", "$defs", "\"null\"", "uint"] {
            assert!(!text.contains(banned), "{name}: schema contains {banned}: {text}");
        }
        assert!(schema.get("title").is_none(), "{name}");
        assert!(schema["properties"].is_object(), "{name}: providers want `properties`, even empty");
        each_property(schema, &mut |field, property| {
            let described = property.get("description").and_then(Value::as_str).is_some_and(|d| !d.is_empty());
            assert!(described, "{name}.{field} has no description");
            assert!(property.get("type").and_then(Value::as_str).is_some(), "{name}.{field} has one plain type");
        });
        assert!(!declaration.description.is_empty(), "{name}");
    }
}
