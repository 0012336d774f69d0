//! `{placeholder}`s in `[agent.execution]` strings.
//!
//! `{name}` (letters, digits, `_`, `-`, `.`) is a placeholder and must be one of
//! [`PLACEHOLDERS`]; `{{` and `}}` are literal braces. A brace that does not open such a
//! name (`{"a": 1}`) is kept as written, so JSON arguments need no escaping.

/// The placeholders `command`, `args`, `working_dir` and `[agent.execution.env]` values may
/// use: the agent's id, the workspace, the config directory the file was found in, and the
/// agent file itself.
pub const PLACEHOLDERS: [&str; 4] = ["agent_id", "workspace", "config_dir", "agent_file"];

/// A piece of a templated string.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['{', '}']) {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push(Piece::Text(&tail[..1]));
            rest = &tail[2..];
            continue;
        }
        if let Some(inner) = tail.strip_prefix('{') {
            let len = inner.find(|c: char| !is_name_char(c)).unwrap_or(inner.len());
            if len > 0 && inner[len..].starts_with('}') {
                out.push(Piece::Placeholder(&inner[..len]));
                rest = &inner[len + 1..];
                continue;
            }
        }
        out.push(Piece::Text(&tail[..1]));
        rest = &tail[1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// Checks that every placeholder of `text` is known.
pub(crate) fn check(text: &str) -> Result<(), String> {
    for piece in pieces(text) {
        if let Piece::Placeholder(name) = piece
            && !PLACEHOLDERS.contains(&name)
        {
            let known: Vec<String> = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect();
            return Err(format!(
                "unknown placeholder `{{{name}}}`; the placeholders are {} (write `{{{{` and `}}}}` for literal braces)",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// `text` with each placeholder replaced by `value(name)`; unknown ones (refused at load)
/// are kept as written.
pub(crate) fn render(text: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Placeholder(name) => match value(name) {
                Some(v) => out.push_str(&v),
                None => {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(name: &str) -> Option<String> {
        match name {
            "agent_id" => Some("coder".to_owned()),
            "workspace" => Some("/w".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn placeholders_are_replaced_and_braces_escaped() {
        assert_eq!(render("{workspace}/out/{agent_id}.log", &values), "/w/out/coder.log");
        assert_eq!(render("{{agent_id}} is {agent_id}", &values), "{agent_id} is coder");
        assert_eq!(render(r#"{"a": 1}"#, &values), r#"{"a": 1}"#, "JSON is kept");
        assert_eq!(render("a}b{", &values), "a}b{");
        assert_eq!(render("{", &values), "{");
    }

    #[test]
    fn unknown_placeholders_are_refused() {
        assert!(check("{agent_id} {workspace} {config_dir} {agent_file} {{x}}").is_ok());
        let error = check("--model={model}").expect_err("unknown");
        assert!(error.contains("unknown placeholder `{model}`"), "{error}");
        assert!(error.contains("{agent_id}, {workspace}, {config_dir}, {agent_file}"), "{error}");
        assert!(check(r#"{"json": true}"#).is_ok());
    }
}
