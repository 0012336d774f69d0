//! Client tools: tools a run offers its model that the run's client (a chat frontend)
//! runs itself.
//!
//! The run holds their declarations ([`RunState::client_tools`](crate::RunState::client_tools)),
//! so a stored run offers the same ones when it is resumed. A call of one cannot run
//! here: it waits as a call waiting for approval does (stored, announced as
//! [`PauseReason::Approval`] with [`CLIENT_TOOL_REASON`]), and the client's result comes
//! back as a [`Signal::ToolResult`](crate::Signal::ToolResult) — or a rejection, which
//! the model sees as an error result. Approving such a call is refused: there is nothing
//! here to run.

use serde_json::Value;
use troupe_core::{PauseReason, ToolSpec};
use troupe_model::wire_name;

/// The reason a call of a client tool waits with: for its result, from the client.
pub const CLIENT_TOOL_REASON: &str = "the client runs this tool: the run waits for its result";

/// Whether `reason` is a wait for a client tool's result (rather than for a person's
/// approval).
pub fn is_client_tool_wait(reason: &PauseReason) -> bool {
    matches!(reason, PauseReason::Approval { reason, .. } if reason == CLIENT_TOOL_REASON)
}

/// The longest name a client tool may have.
const MAX_NAME: usize = 64;

/// Checks the client tools a run is to be offered: each has a name of letters, digits,
/// `_`, `-` and `.` (at most 64), given once, that none of `taken` (the agent's own tools)
/// has — nor one that reaches the model as the same name (`fs_read` is `fs.read` on the
/// wire) — and an arguments schema whose root is an object schema. Says what is wrong.
pub fn validate_client_tools<'a>(
    tools: &[ToolSpec],
    taken: impl IntoIterator<Item = &'a str> + Clone,
) -> Result<(), String> {
    for (n, tool) in tools.iter().enumerate() {
        let name = tool.name.as_str();
        let well_formed = !name.is_empty()
            && name.len() <= MAX_NAME
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !well_formed {
            return Err(format!(
                "client tool {n} is named `{name}`: a name is 1 to {MAX_NAME} letters, digits, `_`, `-` or `.`"
            ));
        }
        let wire = wire_name(name);
        if tools[..n].iter().any(|t| wire_name(&t.name) == wire) {
            return Err(format!("client tool `{name}` is given twice (or as another name the model sees alike)"));
        }
        if let Some(own) = taken.clone().into_iter().find(|t| wire_name(t) == wire) {
            return Err(format!(
                "client tool `{name}` has the name of one of the agent's own tools (`{own}`, as the model sees it); rename it"
            ));
        }
        check_schema(name, &tool.input_schema)?;
    }
    Ok(())
}

/// An arguments schema must be a JSON Schema object whose `type` is `object` and whose
/// `properties`, when given, is an object of schemas.
fn check_schema(name: &str, schema: &Value) -> Result<(), String> {
    let bad = |why: &str| Err(format!("the parameters of client tool `{name}` are not a usable JSON Schema: {why}"));
    let Some(root) = schema.as_object() else {
        return bad("it must be an object");
    };
    match root.get("type") {
        Some(Value::String(kind)) if kind == "object" => {}
        _ => return bad("its `type` must be \"object\" (a tool takes an object of arguments)"),
    }
    match root.get("properties") {
        None => {}
        Some(Value::Object(properties)) => {
            if let Some((property, _)) = properties.iter().find(|(_, s)| !(s.is_object() || s.is_boolean())) {
                return bad(&format!("property `{property}` is not a schema"));
            }
        }
        Some(_) => return bad("`properties` must be an object"),
    }
    match root.get("required") {
        None => Ok(()),
        Some(Value::Array(names)) if names.iter().all(Value::is_string) => Ok(()),
        Some(_) => bad("`required` must be a list of property names"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec::new(name, "", schema)
    }

    #[test]
    fn good_tools_pass_and_each_fault_is_named() {
        let object = json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
        let agent = ["fs.read", "shell"];
        assert_eq!(validate_client_tools(&[tool("set_color", object.clone())], agent), Ok(()));
        assert_eq!(validate_client_tools(&[], agent), Ok(()));
        let cases = [
            (vec![tool("shell", object.clone())], "agent's own tools"),
            (vec![tool("fs_read", object.clone())], "`fs.read`"),
            (vec![tool("a.b", object.clone()), tool("a_b", object.clone())], "given twice"),
            (vec![tool("a", object.clone()), tool("a", object.clone())], "given twice"),
            (vec![tool("", object.clone())], "a name is"),
            (vec![tool("a b", object.clone())], "a name is"),
            (vec![tool("a", json!("object"))], "must be an object"),
            (vec![tool("a", json!({"type": "string"}))], "`type` must be"),
            (vec![tool("a", json!({"properties": {}}))], "`type` must be"),
            (vec![tool("a", json!({"type": "object", "properties": []}))], "`properties` must be"),
            (vec![tool("a", json!({"type": "object", "properties": {"x": 3}}))], "property `x`"),
            (vec![tool("a", json!({"type": "object", "required": "x"}))], "`required`"),
        ];
        for (tools, expected) in cases {
            let error = validate_client_tools(&tools, agent).expect_err("refused");
            assert!(error.contains(expected), "{error} (wanted {expected})");
        }
    }

    #[test]
    fn only_the_client_tool_reason_marks_a_client_tool_wait() {
        let wait = |reason: &str| PauseReason::Approval {
            call_id: "c".into(),
            tool: "t".into(),
            arguments: json!({}),
            reason: reason.into(),
        };
        assert!(is_client_tool_wait(&wait(CLIENT_TOOL_REASON)));
        assert!(!is_client_tool_wait(&wait("`t` may have an effect")));
        assert!(!is_client_tool_wait(&PauseReason::Input { prompt: CLIENT_TOOL_REASON.into() }));
    }
}
