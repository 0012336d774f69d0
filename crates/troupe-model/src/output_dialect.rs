//! What each vendor's structured outputs take of a JSON schema.
//!
//! A typed answer's schema comes from `schemars` or a file, in full JSON Schema; each
//! vendor's structured-output mode takes a subset. Before anything is sent, the schema is
//! checked against the vendor's subset: what the vendor cannot express at all (a list at the
//! root where an object is needed, a recursive type, a map) is refused with
//! [`Error::UnsupportedOutputSchema`], naming the place and the reason; constraints the vendor
//! does not enforce (Anthropic's numeric and length bounds, formats outside a vendor's list)
//! are taken out of the schema sent and written into the field's description instead, as the
//! vendors' own SDKs do. They are not lost: the answer is still validated against the whole
//! schema when it comes back.

use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use troupe_core::OutputSchema;

/// The structured-output dialects troupe speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAI Chat's `response_format` and Responses' `text.format`.
    OpenAi,
    /// Anthropic's `output_config.format`.
    Anthropic,
    /// Gemini's `responseSchema` (an OpenAPI subset, rewritten by `gemini::schema`).
    Gemini,
    /// The forced `final_answer` tool: tool arguments must be an object.
    AnswerTool,
}

/// Formats OpenAI's strict mode knows; others are moved to the description.
const OPENAI_FORMATS: &[&str] = &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Formats Anthropic's structured outputs know.
const ANTHROPIC_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];

/// Constraint keywords Anthropic's structured outputs do not take.
const ANTHROPIC_UNSUPPORTED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "minProperties",
    "maxProperties",
    "uniqueItems",
];

/// Constraint keywords OpenAI's strict mode does not take.
const OPENAI_STRICT_UNSUPPORTED: &[&str] = &["minLength", "maxLength", "minProperties", "maxProperties", "uniqueItems"];

/// Keywords whose values are data, not schemas.
const DATA_KEYWORDS: &[&str] = &["enum", "const", "default", "examples", "example", "required"];

/// `output` as `dialect` takes it: `None` when it goes as it is, a rewritten schema when
/// constraints had to move into descriptions, an error when the vendor cannot take it.
pub(crate) fn adapt(dialect: Dialect, provider: &str, output: &OutputSchema) -> Result<Option<OutputSchema>> {
    let refuse = |reason: String| Error::UnsupportedOutputSchema {
        provider: provider.to_owned(),
        name: output.name.clone(),
        reason,
    };
    let schema = &output.schema;
    match dialect {
        Dialect::OpenAi | Dialect::AnswerTool if !object_root(schema) => {
            let what = if dialect == Dialect::OpenAi {
                "OpenAI's structured outputs take an object at the root"
            } else {
                "a typed answer asked for with the final-answer tool must be an object (tool arguments are objects)"
            };
            return Err(refuse(format!(
                "the root is {}; {what}: wrap the value in a struct with one field",
                describe_root(schema)
            )));
        }
        Dialect::Anthropic | Dialect::Gemini => {
            if let Some(reference) = recursion(schema) {
                // `#` is the root itself: the type asked for.
                let definition = match reference.rsplit_once('/') {
                    Some((_, name)) if reference != "#" => name.to_owned(),
                    _ => output.name.clone(),
                };
                let vendor = if dialect == Dialect::Anthropic { "Anthropic's" } else { "Gemini's" };
                return Err(refuse(format!(
                    "`{definition}` refers to itself, and {vendor} structured outputs take no recursive schema: \
                     bound the depth with distinct types, or ask for a flat list"
                )));
            }
        }
        _ => {}
    }
    let unsupported: &[&str] = match dialect {
        Dialect::Anthropic => ANTHROPIC_UNSUPPORTED,
        Dialect::OpenAi if output.is_strict() => OPENAI_STRICT_UNSUPPORTED,
        _ => return Ok(None),
    };
    let formats = if dialect == Dialect::Anthropic { ANTHROPIC_FORMATS } else { OPENAI_FORMATS };
    let mut rewritten = schema.clone();
    let mut changed = false;
    let mut path = String::new();
    rewrite(&mut rewritten, &mut path, unsupported, formats, dialect, &mut changed).map_err(refuse)?;
    Ok(changed.then(|| OutputSchema::new(output.name.clone(), rewritten)))
}

/// Whether the schema's root is an object schema (directly or through a `$ref`).
fn object_root(schema: &Value) -> bool {
    let resolved = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => resolve(schema, reference).unwrap_or(schema),
        None => schema,
    };
    match resolved.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(_) => false,
        None => resolved.get("properties").is_some() && resolved.get("anyOf").is_none(),
    }
}

/// The root's kind in words, for the error.
fn describe_root(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) => format!("of type `{kind}`"),
        Some(Value::Array(kinds)) => format!("one of the types {}", Value::Array(kinds.clone())),
        None if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => "a union (`anyOf`)".to_owned(),
        _ => "not an object".to_owned(),
    }
}

/// The definition a `#/...` reference points to.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    if reference == "#" {
        return Some(root);
    }
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// The reference (`#/$defs/Node`, or `#` for the root) of a definition reachable from the
/// root that refers to itself, directly or through others; `None` for a schema without
/// cycles.
fn recursion(root: &Value) -> Option<String> {
    fn refs(node: &Value, out: &mut BTreeSet<String>) {
        match node {
            Value::Array(items) => items.iter().for_each(|item| refs(item, out)),
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "$ref" {
                        if let Some(reference) = value.as_str() {
                            out.insert(reference.to_owned());
                        }
                    } else if !DATA_KEYWORDS.contains(&key.as_str()) && key != "$defs" && key != "definitions" {
                        refs(value, out);
                    }
                }
            }
            _ => {}
        }
    }
    fn visit(root: &Value, reference: &str, trail: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<String> {
        if trail.iter().any(|seen| seen == reference) {
            return Some(reference.to_owned());
        }
        if done.contains(reference) {
            return None;
        }
        let target = resolve(root, reference)?;
        let mut next = BTreeSet::new();
        refs(target, &mut next);
        trail.push(reference.to_owned());
        for reference in &next {
            if let Some(found) = visit(root, reference, trail, done) {
                return Some(found);
            }
        }
        trail.pop();
        done.insert(reference.to_owned());
        None
    }
    let mut start = BTreeSet::new();
    refs(root, &mut start);
    let mut done = BTreeSet::new();
    let mut trail = vec!["#".to_owned()];
    start.iter().find_map(|reference| visit(root, reference, &mut trail, &mut done))
}

/// Moves the constraints `unsupported` (and formats outside `formats`) of every subschema
/// into its description; refuses what cannot be expressed (an open map, for Anthropic).
fn rewrite(
    node: &mut Value,
    path: &mut String,
    unsupported: &[&str],
    formats: &[&str],
    dialect: Dialect,
    changed: &mut bool,
) -> std::result::Result<(), String> {
    let Value::Object(map) = node else {
        if let Value::Array(items) = node {
            for (index, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{index}"));
                rewrite(item, path, unsupported, formats, dialect, changed)?;
                path.truncate(len);
            }
        }
        return Ok(());
    };
    if dialect == Dialect::Anthropic && open_map(map) {
        let at = if path.is_empty() { "the root".to_owned() } else { format!("`{path}`") };
        return Err(format!(
            "{at} is a map (an object with free-form keys), and Anthropic's structured outputs need every object \
             closed (`additionalProperties: false`): use a list of key/value structs"
        ));
    }
    let mut moved = Vec::new();
    for keyword in unsupported {
        if let Some(value) = map.remove(*keyword) {
            moved.push(format!("{keyword} {value}"));
        }
    }
    if dialect == Dialect::Anthropic {
        // One or zero is all Anthropic takes of `minItems`.
        if let Some(min) = map.get("minItems").and_then(Value::as_u64).filter(|min| *min > 1) {
            map.remove("minItems");
            moved.push(format!("minItems {min}"));
        }
    }
    if let Some(Value::String(format)) = map.get("format")
        && !formats.contains(&format.as_str())
    {
        moved.push(format!("format {format}"));
        map.remove("format");
    }
    if !moved.is_empty() {
        *changed = true;
        let note = format!("Must satisfy: {}.", moved.join(", "));
        let description = match map.get("description").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => format!("{text} ({note})"),
            _ => note,
        };
        map.insert("description".to_owned(), Value::String(description));
    }
    for (key, value) in map.iter_mut() {
        if DATA_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let len = path.len();
        path.push('/');
        path.push_str(key);
        if matches!(key.as_str(), "properties" | "$defs" | "definitions" | "patternProperties") {
            // Keys of these maps are names; their values are schemas.
            if let Value::Object(children) = value {
                for (name, child) in children.iter_mut() {
                    let inner = path.len();
                    path.push('/');
                    path.push_str(name);
                    rewrite(child, path, unsupported, formats, dialect, changed)?;
                    path.truncate(inner);
                }
            }
        } else {
            rewrite(value, path, unsupported, formats, dialect, changed)?;
        }
        path.truncate(len);
    }
    Ok(())
}

/// Whether an object schema lets any key in: `additionalProperties` is a schema or `true`,
/// or the object lists no properties at all.
fn open_map(map: &Map<String, Value>) -> bool {
    let is_object = map.get("type").and_then(Value::as_str) == Some("object");
    match map.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(Value::Object(_) | Value::Bool(true)) => true,
        _ => is_object && !map.contains_key("properties"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn output(schema: Value) -> OutputSchema {
        OutputSchema::new("Shape", schema)
    }

    fn closed(properties: Value) -> Value {
        let required: Vec<String> = properties.as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    #[test]
    fn a_list_at_the_root_is_refused_where_an_object_is_needed() {
        let list = output(json!({"type": "array", "items": {"type": "string"}}));
        for dialect in [Dialect::OpenAi, Dialect::AnswerTool] {
            let error = adapt(dialect, "openai", &list).expect_err("refused");
            let text = error.to_string();
            assert!(text.contains("`Shape`") && text.contains("of type `array`"), "{text}");
            assert!(text.contains("wrap the value in a struct"), "{text}");
        }
        assert!(adapt(Dialect::Gemini, "gemini", &list).expect("Gemini takes any root").is_none());
        assert!(adapt(Dialect::Anthropic, "anthropic", &list).is_ok());
    }

    #[test]
    fn a_recursive_type_is_refused_by_anthropic_and_gemini_only() {
        let tree = output(json!({
            "$ref": "#/$defs/Tree",
            "$defs": {"Tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
                "required": ["children"], "additionalProperties": false}}
        }));
        for (dialect, vendor) in [(Dialect::Anthropic, "Anthropic"), (Dialect::Gemini, "Gemini")] {
            let text = adapt(dialect, "p", &tree).expect_err("refused").to_string();
            assert!(text.contains("`Tree` refers to itself") && text.contains(vendor), "{text}");
        }
        assert!(adapt(Dialect::OpenAi, "openai", &tree).is_ok(), "OpenAI takes recursive schemas");
        // A definition used twice is not a cycle.
        let mut twice = output(closed(json!({"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}})));
        twice.schema["$defs"] = json!({"P": closed(json!({"x": {"type": "string"}}))});
        assert!(adapt(Dialect::Anthropic, "anthropic", &twice).is_ok());
    }

    #[test]
    fn anthropic_gets_bounds_and_odd_formats_as_descriptions() {
        let shape = output(closed(json!({
            "count": {"type": "integer", "format": "uint32", "minimum": 0},
            "when": {"type": "string", "format": "date-time"},
            "name": {"type": "string", "description": "Who", "maxLength": 10}
        })));
        let sent = adapt(Dialect::Anthropic, "anthropic", &shape).expect("taken").expect("rewritten");
        let count = &sent.schema["properties"]["count"];
        assert_eq!(count, &json!({"type": "integer", "description": "Must satisfy: minimum 0, format uint32."}));
        assert_eq!(sent.schema["properties"]["when"], json!({"type": "string", "format": "date-time"}));
        assert_eq!(sent.schema["properties"]["name"]["description"], json!("Who (Must satisfy: maxLength 10.)"));
        // A property named like a keyword is a name, not a constraint.
        let named = output(closed(json!({"minimum": {"type": "number"}})));
        assert!(adapt(Dialect::Anthropic, "anthropic", &named).expect("taken").is_none());
    }

    #[test]
    fn anthropic_refuses_a_map_and_names_where() {
        let shape = output(closed(json!({"scores": {"type": "object", "additionalProperties": {"type": "integer"}}})));
        let text = adapt(Dialect::Anthropic, "anthropic", &shape).expect_err("refused").to_string();
        assert!(text.contains("`/properties/scores` is a map"), "{text}");
        assert!(adapt(Dialect::OpenAi, "openai", &shape).is_ok());
    }

    #[test]
    fn openai_strict_keeps_numeric_bounds_and_moves_unknown_formats() {
        let shape = output(closed(json!({"n": {"type": "number", "format": "double", "minimum": 1}})));
        let sent = adapt(Dialect::OpenAi, "openai", &shape).expect("taken").expect("rewritten");
        assert_eq!(
            sent.schema["properties"]["n"],
            json!({"type": "number", "minimum": 1, "description": "Must satisfy: format double."})
        );
        // A non-strict schema goes as it is: OpenAI reads it as a hint.
        let loose = output(json!({"type": "object", "properties": {"n": {"type": "number", "format": "double"}}}));
        assert!(adapt(Dialect::OpenAi, "openai", &loose).expect("taken").is_none());
    }
}
