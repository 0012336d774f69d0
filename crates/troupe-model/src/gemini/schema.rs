//! JSON Schema → Gemini's schema dialect for `FunctionDeclaration.parameters`.
//!
//! `parameters` takes an OpenAPI-3.0-style `Schema`, not JSON Schema: the API refuses any key it
//! does not know ("Invalid JSON payload received. Unknown name \"additionalProperties\" ...").
//! Tool catalogs (MCP servers, generated schemas) use JSON Schema freely, so each schema is
//! rewritten, keyword by keyword, structurally (a property *named* `additionalProperties` is kept):
//!
//! - kept: `type`, `title`, `description`, `nullable`, `default`, `example`, `properties`,
//!   `required` (only names that are properties), `items` (a single schema), `minItems`,
//!   `maxItems`, `minProperties`, `maxProperties`, `minLength`, `maxLength`, `pattern`,
//!   `minimum`, `maximum`, `propertyOrdering`, `anyOf`;
//! - rewritten: `$ref` into `#/$defs/…` or `#/definitions/…` is inlined (nested at most 8
//!   deep; a deeper or unresolvable reference becomes a bare object); `oneOf` becomes `anyOf`;
//!   `null` variants of `anyOf` and of a `type` array become `nullable: true` (a single other
//!   variant is folded into the schema); `const` (a string) becomes a one-value `enum`;
//!   `enum` is kept only when every value is a string (Gemini's enums are strings); `format`
//!   is kept only where Gemini supports it (`enum`, `date-time` for strings; `float`,
//!   `double` for numbers; `int32`, `int64` for integers); a missing `type` is inferred from
//!   `properties` (object), `items` (array) or `enum` (string);
//! - dropped: everything else, notably `$schema`, `$id`, `$comment`, `$defs`, `definitions`,
//!   `additionalProperties`, `patternProperties`, `unevaluatedProperties`, `allOf`, `not`,
//!   `if`/`then`/`else`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `uniqueItems`,
//!   `examples`, `prefixItems`, `contains`, `readOnly`, `writeOnly`, `deprecated`.
//!
//! An empty `properties` map is refused ("should be non-empty for OBJECT type"), so it is
//! removed; a tool whose arguments have no properties at all is declared without
//! `parameters`.

use serde_json::{Map, Value};

/// How many `$ref`s may be expanded inside one another before a recursive schema is cut.
const MAX_REF_DEPTH: usize = 8;

/// Keywords Gemini knows and that need no rewriting.
const KEPT: &[&str] = &[
    "title",
    "description",
    "default",
    "example",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "propertyOrdering",
];

/// The `parameters` of a function declaration for `schema`, or `None` when the tool takes no
/// declared arguments.
pub(crate) fn parameters(schema: &Value) -> Option<Value> {
    let mut converted = convert(schema, schema, 0);
    match converted.get("properties") {
        Some(Value::Object(properties)) if !properties.is_empty() => {}
        _ => return None,
    }
    converted.insert("type".to_owned(), Value::String("object".to_owned()));
    converted.remove("nullable");
    Some(Value::Object(converted))
}

/// The `generationConfig.responseSchema` of a typed answer: the same dialect as tool
/// parameters, at any root type.
pub(crate) fn response_schema(schema: &Value) -> Value {
    Value::Object(convert(schema, schema, 0))
}

fn convert(schema: &Value, root: &Value, depth: usize) -> Map<String, Value> {
    let Value::Object(map) = schema else {
        // `true` (anything) and malformed schemas carry no constraint Gemini can express.
        return Map::new();
    };
    if let Some(reference) = map.get("$ref") {
        let target = reference.as_str().and_then(|r| resolve(root, r)).filter(|_| depth < MAX_REF_DEPTH);
        let mut resolved = match target {
            Some(target) => convert(target, root, depth + 1),
            None => object_schema(),
        };
        // Keywords beside a `$ref` (a description, mostly) refine the referenced schema.
        for key in ["description", "title", "default"] {
            if let Some(value) = map.get(key) {
                resolved.insert(key.to_owned(), value.clone());
            }
        }
        return resolved;
    }

    let mut out = Map::new();
    let mut nullable = map.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    let mut variants = Vec::new();
    match map.get("type") {
        Some(Value::String(name)) if name != "null" => {
            out.insert("type".to_owned(), Value::String(name.clone()));
        }
        Some(Value::String(_)) => nullable = true,
        Some(Value::Array(names)) => {
            let mut others = Vec::new();
            for name in names.iter().filter_map(Value::as_str) {
                if name == "null" {
                    nullable = true;
                } else {
                    others.push(name);
                }
            }
            match others.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".to_owned(), Value::String((*one).to_owned()));
                }
                many => variants.extend(many.iter().map(|name| {
                    let mut variant = Map::new();
                    variant.insert("type".to_owned(), Value::String((*name).to_owned()));
                    variant
                })),
            }
        }
        _ => {}
    }
    for key in KEPT {
        if let Some(value) = map.get(*key) {
            out.insert((*key).to_owned(), value.clone());
        }
    }

    if let Some(Value::Array(values)) = map.get("enum") {
        if !values.is_empty() && values.iter().all(Value::is_string) {
            out.insert("enum".to_owned(), Value::Array(values.clone()));
        }
    } else if let Some(Value::String(value)) = map.get("const") {
        out.insert("enum".to_owned(), Value::Array(vec![Value::String(value.clone())]));
    }

    if let Some(Value::Object(properties)) = map.get("properties") {
        let converted: Map<String, Value> = properties
            .iter()
            .map(|(name, property)| (name.clone(), Value::Object(convert(property, root, depth))))
            .collect();
        if !converted.is_empty() {
            if let Some(Value::Array(required)) = map.get("required") {
                let required: Vec<Value> = required
                    .iter()
                    .filter(|name| name.as_str().is_some_and(|name| converted.contains_key(name)))
                    .cloned()
                    .collect();
                if !required.is_empty() {
                    out.insert("required".to_owned(), Value::Array(required));
                }
            }
            out.insert("properties".to_owned(), Value::Object(converted));
        }
    }
    if let Some(items @ Value::Object(_)) = map.get("items") {
        out.insert("items".to_owned(), Value::Object(convert(items, root, depth)));
    }

    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(schemas)) = map.get(key) {
            for variant in schemas {
                let variant = convert(variant, root, depth);
                if is_null_schema(&variant) {
                    nullable = true;
                } else {
                    variants.push(variant);
                }
            }
        }
    }
    match variants.len() {
        0 => {}
        1 if !out.contains_key("type") => {
            // `anyOf: [X, null]` (an optional X, as pydantic writes it) is X, nullable.
            for (key, value) in variants.remove(0) {
                out.entry(key).or_insert(value);
            }
        }
        _ => {
            out.insert("anyOf".to_owned(), Value::Array(variants.into_iter().map(Value::Object).collect()));
        }
    }

    if !out.contains_key("type") && !out.contains_key("anyOf") {
        let inferred = if out.contains_key("properties") {
            Some("object")
        } else if out.contains_key("items") {
            Some("array")
        } else if out.contains_key("enum") {
            Some("string")
        } else {
            None
        };
        if let Some(name) = inferred {
            out.insert("type".to_owned(), Value::String(name.to_owned()));
        }
    }
    if let Some(Value::String(format)) = map.get("format") {
        let supported = match out.get("type").and_then(Value::as_str) {
            Some("string") => matches!(format.as_str(), "enum" | "date-time"),
            Some("number") => matches!(format.as_str(), "float" | "double"),
            Some("integer") => matches!(format.as_str(), "int32" | "int64"),
            _ => false,
        };
        if supported {
            out.insert("format".to_owned(), Value::String(format.clone()));
        }
    }
    if nullable {
        out.insert("nullable".to_owned(), Value::Bool(true));
    }
    out
}

fn object_schema() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("type".to_owned(), Value::String("object".to_owned()));
    map
}

fn is_null_schema(schema: &Map<String, Value>) -> bool {
    // A converted `{"type": "null"}` is `{"nullable": true}` and nothing else.
    schema.len() == 1 && schema.get("nullable") == Some(&Value::Bool(true))
}

/// The schema a local reference (`#`, `#/$defs/Name`, `#/definitions/Name`, any JSON
/// pointer into the root) points at.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    let mut target = root;
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        target = match target {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unsupported_keywords_are_dropped_at_every_depth_but_property_names_are_kept() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "additionalProperties": {"type": "string", "format": "uri", "$comment": "a name, not a keyword"},
                "tags": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"},
                         "properties": {"k": {"type": "string", "exclusiveMinimum": 1}}}},
                "when": {"type": "string", "format": "date-time"}
            },
            "required": ["tags", "missing"]
        });
        assert_eq!(
            parameters(&schema),
            Some(json!({
                "type": "object",
                "properties": {
                    "additionalProperties": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                    "when": {"type": "string", "format": "date-time"}
                },
                "required": ["tags"]
            }))
        );
    }

    #[test]
    fn refs_are_inlined_and_recursion_is_cut() {
        let schema = json!({
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
            "properties": {"root": {"$ref": "#/$defs/Node", "description": "the tree"}}
        });
        let converted = parameters(&schema).expect("has properties");
        let mut node = &converted["properties"]["root"];
        assert_eq!(node["description"], json!("the tree"));
        for _ in 0..MAX_REF_DEPTH - 1 {
            node = &node["properties"]["child"];
            assert_eq!(node["type"], json!("object"));
        }
        assert_eq!(node["properties"]["child"], json!({"type": "object"}), "cut at the depth limit");
        assert!(!converted.to_string().contains("$ref"));
    }

    #[test]
    fn null_variants_become_nullable_and_const_becomes_enum() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "optional"},
                "b": {"type": ["string", "null"]},
                "c": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "d": {"const": "fixed"},
                "e": {"type": "integer", "enum": [1, 2]}
            }
        });
        let converted = parameters(&schema).expect("has properties");
        let p = &converted["properties"];
        assert_eq!(p["a"], json!({"type": "integer", "nullable": true, "description": "optional"}));
        assert_eq!(p["b"], json!({"type": "string", "nullable": true}));
        assert_eq!(p["c"], json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
        assert_eq!(p["d"], json!({"type": "string", "enum": ["fixed"]}));
        assert_eq!(p["e"], json!({"type": "integer"}), "non-string enums are not expressible");
    }

    #[test]
    fn tools_without_properties_have_no_parameters() {
        assert_eq!(parameters(&json!({"type": "object", "properties": {}})), None);
        assert_eq!(parameters(&json!({"type": "object"})), None);
        assert_eq!(parameters(&json!(true)), None);
        let nested = parameters(&json!({"properties": {"o": {"type": "object", "properties": {}}}}));
        assert_eq!(nested, Some(json!({"type": "object", "properties": {"o": {"type": "object"}}})));
    }
}
