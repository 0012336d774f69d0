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
//!
//! Inlining copies a definition at every use, so a small schema whose definitions each use
//! the next many times over expands geometrically. The schemas of one request are converted
//! against one [`Budget`]: at most [`MAX_SCHEMAS`] converted schemas and [`MAX_COPIED_BYTES`]
//! of text copied; past it the conversion stops with [`TooLarge`] and nothing is sent.

use serde_json::{Map, Value};

/// How many `$ref`s may be expanded inside one another before a recursive schema is cut.
const MAX_REF_DEPTH: usize = 8;

/// The most schemas (the root and every subschema, each inlined copy counted) one request's
/// converted schemas may hold: far beyond any real tool catalog, far below what would
/// exhaust memory.
pub(crate) const MAX_SCHEMAS: usize = 100_000;

/// The most bytes of text (names, descriptions, enums, defaults) one request's converted
/// schemas may copy from the originals.
pub(crate) const MAX_COPIED_BYTES: usize = 16 * 1024 * 1024;

/// What the schemas of one request may still grow by as they are converted.
#[derive(Debug)]
pub(crate) struct Budget {
    schemas: usize,
    bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { schemas: MAX_SCHEMAS, bytes: MAX_COPIED_BYTES }
    }
}

impl Budget {
    /// Counts one more converted schema.
    fn schema(&mut self) -> Result<(), TooLarge> {
        self.schemas = self.schemas.checked_sub(1).ok_or(TooLarge)?;
        Ok(())
    }

    /// `text`, copied, counted.
    fn text(&mut self, text: &str) -> Result<String, TooLarge> {
        self.bytes = self.bytes.checked_sub(text.len()).ok_or(TooLarge)?;
        Ok(text.to_owned())
    }

    /// `value`, copied, counted by its size (weighed only as far as what is left).
    fn value(&mut self, value: &Value) -> Result<Value, TooLarge> {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            // Every value costs a word besides its text, so a long list of numbers counts too.
            let mut size = std::mem::size_of::<usize>();
            match value {
                Value::String(text) => size += text.len(),
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    for (key, item) in map {
                        size += key.len();
                        stack.push(item);
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
            self.bytes = self.bytes.checked_sub(size).ok_or(TooLarge)?;
        }
        Ok(value.clone())
    }
}

/// The converted schemas would exceed their [`Budget`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "with every `$ref` inlined (Gemini takes no references) the request's schemas grow past {MAX_SCHEMAS} \
     subschemas or {} MiB of text: define fewer nested uses of shared types, or flatten the schema",
    MAX_COPIED_BYTES / (1024 * 1024)
)]
pub(crate) struct TooLarge;

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
/// declared arguments; [`TooLarge`] when `budget` runs out.
pub(crate) fn parameters(schema: &Value, budget: &mut Budget) -> Result<Option<Value>, TooLarge> {
    let mut converted = convert(schema, schema, 0, budget)?;
    match converted.get("properties") {
        Some(Value::Object(properties)) if !properties.is_empty() => {}
        _ => return Ok(None),
    }
    converted.insert("type".to_owned(), Value::String("object".to_owned()));
    converted.remove("nullable");
    Ok(Some(Value::Object(converted)))
}

/// The `generationConfig.responseSchema` of a typed answer: the same dialect as tool
/// parameters, at any root type; [`TooLarge`] when `budget` runs out.
pub(crate) fn response_schema(schema: &Value, budget: &mut Budget) -> Result<Value, TooLarge> {
    Ok(Value::Object(convert(schema, schema, 0, budget)?))
}

fn convert(schema: &Value, root: &Value, depth: usize, budget: &mut Budget) -> Result<Map<String, Value>, TooLarge> {
    budget.schema()?;
    let Value::Object(map) = schema else {
        // `true` (anything) and malformed schemas carry no constraint Gemini can express.
        return Ok(Map::new());
    };
    if let Some(reference) = map.get("$ref") {
        let target = reference.as_str().and_then(|r| resolve(root, r)).filter(|_| depth < MAX_REF_DEPTH);
        let mut resolved = match target {
            Some(target) => convert(target, root, depth + 1, budget)?,
            None => object_schema(),
        };
        // Keywords beside a `$ref` (a description, mostly) refine the referenced schema.
        for key in ["description", "title", "default"] {
            if let Some(value) = map.get(key) {
                resolved.insert(key.to_owned(), budget.value(value)?);
            }
        }
        return Ok(resolved);
    }

    let mut out = Map::new();
    let mut nullable = map.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    let mut variants = Vec::new();
    match map.get("type") {
        Some(Value::String(name)) if name != "null" => {
            out.insert("type".to_owned(), Value::String(budget.text(name)?));
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
                    out.insert("type".to_owned(), Value::String(budget.text(one)?));
                }
                many => {
                    for name in many {
                        budget.schema()?;
                        let mut variant = Map::new();
                        variant.insert("type".to_owned(), Value::String(budget.text(name)?));
                        variants.push(variant);
                    }
                }
            }
        }
        _ => {}
    }
    for key in KEPT {
        if let Some(value) = map.get(*key) {
            out.insert((*key).to_owned(), budget.value(value)?);
        }
    }

    if let Some(listed @ Value::Array(values)) = map.get("enum") {
        if !values.is_empty() && values.iter().all(Value::is_string) {
            out.insert("enum".to_owned(), budget.value(listed)?);
        }
    } else if let Some(Value::String(value)) = map.get("const") {
        out.insert("enum".to_owned(), Value::Array(vec![Value::String(budget.text(value)?)]));
    }

    if let Some(Value::Object(properties)) = map.get("properties") {
        let mut converted = Map::new();
        for (name, property) in properties {
            let property = convert(property, root, depth, budget)?;
            converted.insert(budget.text(name)?, Value::Object(property));
        }
        if !converted.is_empty() {
            if let Some(Value::Array(required)) = map.get("required") {
                let mut kept = Vec::new();
                for name in required.iter().filter_map(Value::as_str).filter(|name| converted.contains_key(*name)) {
                    kept.push(Value::String(budget.text(name)?));
                }
                if !kept.is_empty() {
                    out.insert("required".to_owned(), Value::Array(kept));
                }
            }
            out.insert("properties".to_owned(), Value::Object(converted));
        }
    }
    if let Some(items @ Value::Object(_)) = map.get("items") {
        out.insert("items".to_owned(), Value::Object(convert(items, root, depth, budget)?));
    }

    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(schemas)) = map.get(key) {
            for variant in schemas {
                let variant = convert(variant, root, depth, budget)?;
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
    Ok(out)
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

/// A schema of `levels` definitions, each with `width` properties that all use the next one,
/// the last being `leaf`: small, but `width^levels` leaves once inlined.
#[cfg(test)]
pub(super) fn ladder(levels: usize, width: usize, leaf: Value) -> Value {
    let mut defs = Map::new();
    for level in 0..levels {
        let properties: Map<String, Value> = (0..width)
            .map(|i| (format!("p{i}"), serde_json::json!({"$ref": format!("#/$defs/L{}", level + 1)})))
            .collect();
        defs.insert(format!("L{level}"), serde_json::json!({"type": "object", "properties": properties}));
    }
    defs.insert(format!("L{levels}"), leaf);
    serde_json::json!({"$defs": defs, "$ref": "#/$defs/L0"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(schema: &Value) -> Option<Value> {
        parameters(schema, &mut Budget::default()).expect("within the budget")
    }

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
            params(&schema),
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
        let converted = params(&schema).expect("has properties");
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
        let converted = params(&schema).expect("has properties");
        let p = &converted["properties"];
        assert_eq!(p["a"], json!({"type": "integer", "nullable": true, "description": "optional"}));
        assert_eq!(p["b"], json!({"type": "string", "nullable": true}));
        assert_eq!(p["c"], json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
        assert_eq!(p["d"], json!({"type": "string", "enum": ["fixed"]}));
        assert_eq!(p["e"], json!({"type": "integer"}), "non-string enums are not expressible");
    }

    #[test]
    fn tools_without_properties_have_no_parameters() {
        assert_eq!(params(&json!({"type": "object", "properties": {}})), None);
        assert_eq!(params(&json!({"type": "object"})), None);
        assert_eq!(params(&json!(true)), None);
        let nested = params(&json!({"properties": {"o": {"type": "object", "properties": {}}}}));
        assert_eq!(nested, Some(json!({"type": "object", "properties": {"o": {"type": "object"}}})));
    }

    #[test]
    fn a_schema_that_expands_geometrically_is_refused() {
        // 8 levels of 16 uses each: 16^8 copies of the last definition if nothing stopped it.
        let schema = ladder(8, 16, json!({"type": "string"}));
        assert_eq!(parameters(&schema, &mut Budget::default()), Err(TooLarge));
        assert_eq!(response_schema(&schema, &mut Budget::default()), Err(TooLarge));
    }

    #[test]
    fn copied_text_counts_against_the_budget() {
        // 16^3 copies are few schemas, but 4096 copies of an 8 KiB description are 32 MiB.
        let schema = ladder(3, 16, json!({"type": "string", "description": "d".repeat(8 * 1024)}));
        assert_eq!(response_schema(&schema, &mut Budget::default()), Err(TooLarge));
        let small = ladder(3, 16, json!({"type": "string", "description": "a leaf"}));
        assert!(response_schema(&small, &mut Budget::default()).is_ok(), "the same shape with little text converts");
    }

    #[test]
    fn one_budget_covers_every_schema_of_a_request() {
        // Each half the size of the budget: the first converts, the second does not.
        let schema = ladder(2, 16, json!({"type": "string", "description": "d".repeat(MAX_COPIED_BYTES / 2 / 256)}));
        let mut budget = Budget::default();
        assert!(parameters(&schema, &mut budget).is_ok());
        assert_eq!(parameters(&schema, &mut budget), Err(TooLarge));
    }

    #[test]
    fn shared_definitions_are_inlined_at_every_use() {
        let schema = json!({
            "type": "object",
            "$defs": {"Address": {"type": "object", "description": "where",
                                  "properties": {"city": {"type": "string"}}, "required": ["city"]}},
            "properties": {
                "home": {"$ref": "#/$defs/Address"},
                "work": {"$ref": "#/$defs/Address", "description": "the office"},
                "past": {"type": "array", "items": {"$ref": "#/$defs/Address"}}
            }
        });
        let address = json!({"type": "object", "description": "where",
                             "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let mut office = address.clone();
        office["description"] = json!("the office");
        assert_eq!(
            params(&schema),
            Some(json!({
                "type": "object",
                "properties": {"home": address, "work": office, "past": {"type": "array", "items": address}}
            }))
        );
    }
}
