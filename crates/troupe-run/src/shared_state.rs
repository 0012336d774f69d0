//! Shared state: a JSON document a run shares with its client (a chat frontend's view of
//! the app), which the agent changes with the [`STATE_UPDATE_TOOL`] by JSON Patch
//! (RFC 6902).
//!
//! The run holds the document ([`RunState::shared_state`](crate::RunState::shared_state)),
//! so a stored run goes on with the state it had. The tool is the run's own: its calls are
//! answered where the run decides its calls, never by the catalog, and a patch that does
//! not apply is an error result the model sees, the state left as it was.

use serde_json::{Value, json};
use troupe_core::ToolSpec;

/// The name of the tool that changes the shared state.
pub const STATE_UPDATE_TOOL: &str = "state.update";

/// The declaration of [`STATE_UPDATE_TOOL`] offered to the model.
pub fn state_update_spec() -> ToolSpec {
    ToolSpec::new(
        STATE_UPDATE_TOOL,
        "Changes the state you share with the user's app (given as context) by a JSON Patch \
         (RFC 6902): a list of operations `add`, `replace`, `remove` or `test`, each with a JSON \
         Pointer `path` (`/items/0/done`, `/items/-` to append) and, but for `remove`, a `value`. \
         The patch applies whole or not at all; the result shows the state after it.",
        json!({
            "type": "object",
            "properties": {
                "patch": {
                    "type": "array",
                    "description": "The operations, applied in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "op": {"type": "string", "enum": ["add", "replace", "remove", "test"]},
                            "path": {"type": "string"},
                            "value": {}
                        },
                        "required": ["op", "path"]
                    }
                }
            },
            "required": ["patch"]
        }),
    )
}

/// What a call of [`STATE_UPDATE_TOOL`] with `arguments` does to `state`: the patch it
/// carries applied (whole, or not at all), or why it cannot be.
pub fn apply_update(state: &Value, arguments: &Value) -> Result<Value, String> {
    let patch = arguments.get("patch").ok_or("the arguments have no `patch` (a list of JSON Patch operations)")?;
    apply_patch(state, patch)
}

/// `patch` (an RFC 6902 JSON Patch of `add`, `replace`, `remove` and `test` operations)
/// applied to `document`: the patched copy, or why an operation failed (nothing applied).
///
/// ```
/// use serde_json::json;
/// use troupe_run::apply_patch;
///
/// let state = json!({"items": ["milk"]});
/// let patch = json!([{"op": "add", "path": "/items/-", "value": "eggs"}, {"op": "replace", "path": "/items/0", "value": "oat milk"}]);
/// assert_eq!(apply_patch(&state, &patch), Ok(json!({"items": ["oat milk", "eggs"]})));
/// assert!(apply_patch(&state, &json!([{"op": "remove", "path": "/nothing"}])).is_err());
/// ```
pub fn apply_patch(document: &Value, patch: &Value) -> Result<Value, String> {
    let operations = patch.as_array().ok_or("a JSON Patch is a list of operations")?;
    let mut out = document.clone();
    for (n, operation) in operations.iter().enumerate() {
        apply_operation(&mut out, operation).map_err(|why| format!("operation {n} ({operation}): {why}"))?;
    }
    Ok(out)
}

fn apply_operation(document: &mut Value, operation: &Value) -> Result<(), String> {
    let op = operation.get("op").and_then(Value::as_str).ok_or("it has no `op`")?;
    let path = operation.get("path").and_then(Value::as_str).ok_or("it has no `path` string")?;
    let tokens = pointer(path)?;
    let value = || operation.get("value").cloned().ok_or_else(|| format!("`{op}` needs a `value`"));
    match op {
        "add" => add(document, &tokens, value()?),
        "replace" => {
            let target = locate(document, &tokens)?;
            *target = value()?;
            Ok(())
        }
        "remove" => remove(document, &tokens).map(drop),
        "test" => {
            let expected = value()?;
            if *locate(document, &tokens)? == expected {
                Ok(())
            } else {
                Err(format!("the value at `{path}` is not {expected}"))
            }
        }
        "move" | "copy" => Err(format!("`{op}` is not supported; use `remove` and `add`")),
        other => Err(format!("`{other}` is not a JSON Patch operation")),
    }
}

/// The reference tokens of a JSON Pointer (RFC 6901), unescaped.
fn pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path.strip_prefix('/').ok_or_else(|| format!("the path `{path}` does not start with `/`"))?;
    rest.split('/')
        .map(|token| {
            if token.replace("~0", "").replace("~1", "").contains('~') {
                return Err(format!("the path `{path}` has a `~` that is not `~0` or `~1`"));
            }
            Ok(token.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

/// An array index token: digits without a leading zero.
fn index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

/// The value `tokens` lead to, which must exist.
fn locate<'a>(document: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, String> {
    let mut at = document;
    for token in tokens {
        at = match at {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => index(token).and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("nothing is at `/{}`", tokens.join("/")))?;
    }
    Ok(at)
}

fn add(document: &mut Value, tokens: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = tokens.split_last() else {
        *document = value;
        return Ok(());
    };
    match locate(document, parent)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) if last == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => match index(last) {
            Some(i) if i <= items.len() => {
                items.insert(i, value);
                Ok(())
            }
            _ => Err(format!("`{last}` is not an index of a list of {} items", items.len())),
        },
        _ => Err("the parent of the path is neither an object nor a list".to_owned()),
    }
}

fn remove(document: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let (last, parent) = tokens.split_last().ok_or("the whole document cannot be removed")?;
    let missing = || format!("nothing is at `/{}`", tokens.join("/"));
    match locate(document, parent)? {
        Value::Object(map) => map.remove(last).ok_or_else(missing),
        Value::Array(items) => match index(last) {
            Some(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operations_follow_rfc_6902() {
        let doc = json!({"a": {"b": [1, 2]}, "c~d": 1, "e/f": 2});
        let cases = [
            (json!([{"op": "add", "path": "/a/b/1", "value": 9}]), json!({"a": {"b": [1, 9, 2]}, "c~d": 1, "e/f": 2})),
            (json!([{"op": "add", "path": "/a/b/-", "value": 3}]), json!({"a": {"b": [1, 2, 3]}, "c~d": 1, "e/f": 2})),
            (
                json!([{"op": "add", "path": "/a/x", "value": null}]),
                json!({"a": {"b": [1, 2], "x": null}, "c~d": 1, "e/f": 2}),
            ),
            (json!([{"op": "replace", "path": "/c~0d", "value": 5}]), json!({"a": {"b": [1, 2]}, "c~d": 5, "e/f": 2})),
            (json!([{"op": "remove", "path": "/e~1f"}]), json!({"a": {"b": [1, 2]}, "c~d": 1})),
            (json!([{"op": "remove", "path": "/a/b/0"}]), json!({"a": {"b": [2]}, "c~d": 1, "e/f": 2})),
            (json!([{"op": "test", "path": "/a/b/1", "value": 2}]), doc.clone()),
            (json!([{"op": "add", "path": "", "value": [1]}]), json!([1])),
            (json!([]), doc.clone()),
        ];
        for (patch, expected) in cases {
            assert_eq!(apply_patch(&doc, &patch), Ok(expected), "{patch}");
        }
    }

    #[test]
    fn a_failing_operation_applies_nothing_and_says_which() {
        let doc = json!({"a": [1], "n": 1});
        let failing = [
            json!([{"op": "replace", "path": "/n", "value": 2}, {"op": "test", "path": "/n", "value": 1}]),
            json!([{"op": "remove", "path": "/missing"}]),
            json!([{"op": "replace", "path": "/missing", "value": 1}]),
            json!([{"op": "add", "path": "/a/5", "value": 1}]),
            json!([{"op": "add", "path": "/a/01", "value": 1}]),
            json!([{"op": "add", "path": "/x/y", "value": 1}]),
            json!([{"op": "add", "path": "/n"}]),
            json!([{"op": "add", "path": "n", "value": 1}]),
            json!([{"op": "add", "path": "/~2", "value": 1}]),
            json!([{"op": "move", "from": "/n", "path": "/m"}]),
            json!([{"op": "frobnicate", "path": "/n"}]),
            json!([{"path": "/n"}]),
            json!([{"op": "remove", "path": ""}]),
            json!({"op": "remove", "path": "/n"}),
        ];
        for patch in failing {
            let error = apply_patch(&doc, &patch).expect_err("refused");
            assert!(!error.is_empty(), "{patch}");
        }
        let error =
            apply_patch(&doc, &json!([{"op": "test", "path": "/n", "value": 1}, {"op": "remove", "path": "/zz"}]))
                .expect_err("refused");
        assert!(error.starts_with("operation 1"), "{error}");
    }

    #[test]
    fn an_update_takes_its_patch_from_the_arguments() {
        let state = json!({"n": 1});
        assert_eq!(
            apply_update(&state, &json!({"patch": [{"op": "replace", "path": "/n", "value": 2}]})),
            Ok(json!({"n": 2}))
        );
        assert!(apply_update(&state, &json!({})).expect_err("no patch").contains("`patch`"));
        assert_eq!(state_update_spec().name, STATE_UPDATE_TOOL);
    }
}
