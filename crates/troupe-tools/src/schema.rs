//! Argument schemas generated from Rust types, and strict argument decoding against them.
//!
//! Schemas are never written by hand: [`schema_for`] derives them with `schemars` and tidies
//! them for providers (every subschema inlined, no `$schema` or root `title`/`description`, optional
//! fields as their plain type instead of a `null` union, no integer `format`s that some
//! vendors reject). [`decode_arguments`] checks a model's arguments before a tool runs and
//! words every mismatch so the model can correct it.

use crate::error::ToolError;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The provider-friendly JSON schema of the arguments type `A`.
pub fn schema_for<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(root) = &mut schema {
        root.remove("$schema");
        // The type's name and doc comment repeat what the tool's own description says.
        root.remove("title");
        root.remove("description");
        // Some providers reject an object schema without `properties`, even an empty one.
        if root.get("type").and_then(Value::as_str) == Some("object") {
            root.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        }
    }
    tidy(&mut schema);
    schema
}

/// Whether `schema` describes an arguments object, as providers require of a tool's root.
pub fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Keys whose values are data, not subschemas: never rewritten.
const DATA_KEYS: [&str; 4] = ["default", "examples", "const", "enum"];

fn tidy(node: &mut Value) {
    let Value::Object(map) = node else {
        if let Value::Array(items) = node {
            items.iter_mut().for_each(tidy);
        }
        return;
    };
    collapse_nullable(map);
    if map.get("default").is_some_and(Value::is_null) {
        map.remove("default");
    }
    let integer_format = map.get("type").and_then(Value::as_str) == Some("integer")
        && map.get("format").and_then(Value::as_str).is_some_and(|f| f.starts_with("int") || f.starts_with("uint"));
    if integer_format {
        map.remove("format");
    }
    for (key, value) in map.iter_mut() {
        if !DATA_KEYS.contains(&key.as_str()) {
            tidy(value);
        }
    }
}

/// `{"type": ["string", "null"]}` becomes `{"type": "string"}`, and
/// `{"anyOf": [X, {"type": "null"}]}` becomes `X` (keeping the node's description): an
/// optional argument is simply not required, which every provider understands.
fn collapse_nullable(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
        if non_null.len() == 1 && non_null.len() < types.len() {
            map.insert("type".into(), non_null.into_iter().next().unwrap_or(Value::Null));
        }
    }
    let collapsible = match map.get("anyOf") {
        Some(Value::Array(branches)) => {
            branches.len() == 2 && branches.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("null"))
        }
        _ => false,
    };
    if collapsible && let Some(Value::Array(branches)) = map.remove("anyOf") {
        for branch in branches {
            if branch.get("type").and_then(Value::as_str) == Some("null") {
                continue;
            }
            if let Value::Object(inner) = branch {
                for (key, value) in inner {
                    map.entry(key).or_insert(value);
                }
            }
        }
    }
}

/// Decodes a model's `args` into `A`, checking them against `schema` first.
///
/// A string is taken as arguments the model sent as unparsable JSON (the stream
/// accumulator keeps those verbatim) and is refused with the parse error, unless it does
/// parse to an object; `null` counts as `{}`. Missing required and (where the schema
/// forbids them) unknown arguments are reported together, by name and expected type;
/// ill-typed ones by serde with the argument's path.
pub fn decode_arguments<A: DeserializeOwned>(schema: &Value, args: Value) -> Result<A, ToolError> {
    let args = normalize(args)?;
    precheck(schema, &args)?;
    serde_path_to_error::deserialize(args).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.inner().to_string();
        let message = if path == "." || path.is_empty() {
            inner
        } else {
            let top = path.split(['.', '[']).next().unwrap_or_default();
            match property(schema, top).map(describe_type) {
                Some(expected) if !expected.is_empty() => {
                    format!("argument `{path}`: {inner} (the schema expects {expected})")
                }
                _ => format!("argument `{path}`: {inner}"),
            }
        };
        ToolError::invalid_arguments(message)
    })
}

fn normalize(args: Value) -> Result<Value, ToolError> {
    match args {
        Value::Object(_) => Ok(args),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(parsed @ Value::Object(_)) => Ok(parsed),
            Ok(other) => Err(ToolError::invalid_arguments(format!(
                "arguments must be a JSON object, got a string holding {}",
                kind(&other)
            ))),
            Err(error) => Err(ToolError::invalid_arguments(format!(
                "arguments are not valid JSON: {error}; send a single JSON object"
            ))),
        },
        other => Err(ToolError::invalid_arguments(format!("arguments must be a JSON object, got {}", kind(&other)))),
    }
}

fn precheck(schema: &Value, args: &Value) -> Result<(), ToolError> {
    let Some(given) = args.as_object() else { return Ok(()) };
    let mut problems = Vec::new();
    let missing: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !given.contains_key(*name))
        .map(|name| match property(schema, name).map(describe_type) {
            Some(expected) if !expected.is_empty() => format!("`{name}` ({expected})"),
            _ => format!("`{name}`"),
        })
        .collect();
    match missing.len() {
        0 => {}
        1 => problems.push(format!("missing required argument {}", missing[0])),
        _ => problems.push(format!("missing required arguments {}", missing.join(", "))),
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let properties = schema.get("properties").and_then(Value::as_object);
    if closed {
        let unknown: Vec<String> = given
            .keys()
            .filter(|key| !properties.is_some_and(|p| p.contains_key(*key)))
            .map(|key| format!("`{key}`"))
            .collect();
        if !unknown.is_empty() {
            let accepted: Vec<String> =
                properties.into_iter().flat_map(|p| p.keys()).map(|key| format!("`{key}`")).collect();
            let noun = if unknown.len() == 1 { "argument" } else { "arguments" };
            let accepted = if accepted.is_empty() { "none".to_owned() } else { accepted.join(", ") };
            problems.push(format!("unknown {noun} {}; accepted arguments: {accepted}", unknown.join(", ")));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(ToolError::invalid_arguments(problems.join("; "))) }
}

fn property<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    schema.get("properties")?.get(name)
}

/// A short description of what a subschema accepts: `string`, `integer`, `array of string`,
/// `one of "a", "b"`.
fn describe_type(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("one of {}", values.join(", "));
    }
    let base = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => return String::new(),
    };
    match schema.get("items") {
        Some(items) if base == "array" => {
            let inner = describe_type(items);
            if inner.is_empty() { base } else { format!("array of {inner}") }
        }
        _ => base,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Arguments of a test tool.
    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// The file.
        path: String,
        /// The first line.
        offset: Option<u64>,
        /// Tags.
        #[serde(default)]
        tags: Vec<String>,
        /// Nested.
        inner: Option<Inner>,
    }

    /// A nested object.
    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    struct Inner {
        /// A flag.
        flag: bool,
    }

    #[test]
    fn schemas_are_inlined_object_schemas_without_null_unions() {
        let schema = schema_for::<Args>();
        assert!(is_object_schema(&schema));
        assert!(schema.get("$schema").is_none() && schema.get("$defs").is_none() && schema.get("title").is_none());
        assert_eq!(schema["required"], json!(["path"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["offset"]["type"], "integer");
        assert!(schema["properties"]["offset"].get("format").is_none());
        assert_eq!(schema["properties"]["inner"]["type"], "object");
        assert_eq!(schema["properties"]["inner"]["properties"]["flag"]["type"], "boolean");
        assert_eq!(schema["properties"]["path"]["description"], "The file.");
        assert!(!schema.to_string().contains("$ref"), "{schema}");
    }

    fn decode(args: Value) -> Result<Args, ToolError> {
        decode_arguments::<Args>(&schema_for::<Args>(), args)
    }

    fn message(result: Result<Args, ToolError>) -> String {
        match result {
            Err(ToolError::InvalidArguments { message }) => message,
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }

    #[test]
    fn good_arguments_decode() {
        let args = decode(json!({"path": "a", "offset": 3, "inner": {"flag": true}})).expect("valid");
        assert_eq!(args.offset, Some(3));
        assert_eq!(args.inner, Some(Inner { flag: true }));
    }

    #[test]
    fn mismatches_name_the_argument_and_the_expected_type() {
        assert_eq!(message(decode(json!({}))), "missing required argument `path` (string)");
        let unknown = message(decode(json!({"path": "a", "pth": 1})));
        assert!(unknown.starts_with("unknown argument `pth`; accepted arguments: "), "{unknown}");
        assert!(unknown.contains("`offset`"), "{unknown}");
        let ill = message(decode(json!({"path": "a", "offset": "ten"})));
        assert!(ill.starts_with("argument `offset`: invalid type: string \"ten\""), "{ill}");
        assert!(ill.ends_with("(the schema expects integer)"), "{ill}");
        let nested = message(decode(json!({"path": "a", "inner": {"flag": "yes"}})));
        assert!(nested.starts_with("argument `inner.flag`: invalid type: string"), "{nested}");
    }

    #[test]
    fn string_and_non_object_arguments_are_refused() {
        let broken = message(decode(Value::String("{\"path\": \"a\"".into())));
        assert!(broken.starts_with("arguments are not valid JSON: "), "{broken}");
        assert_eq!(decode(Value::String("{\"path\": \"a\"}".into())).expect("parses").path, "a");
        assert_eq!(message(decode(json!([1]))), "arguments must be a JSON object, got an array");
        assert_eq!(message(decode(Value::Null)), "missing required argument `path` (string)");
    }
}
