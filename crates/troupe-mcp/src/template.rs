//! `${VARIABLE}` references in configuration values (header values, a server's environment).
//!
//! A reference is `${NAME}` with `NAME` made of ASCII letters, digits and `_`, not starting
//! with a digit; `$$` is a literal `$`; any other `$` is kept as written. References are
//! checked when the configuration is read and filled in from the environment when a server
//! is connected, so the configuration (and everything that prints it) holds the reference,
//! never the secret.

/// One piece of a templated value.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Variable(&'a str),
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push(Piece::Text("$"));
            rest = after;
        } else if let Some(inner) = tail.strip_prefix("${") {
            let Some(end) = inner.find('}') else {
                return Err(format!(
                    "`{}` opens a variable reference that is never closed; write `${{NAME}}`",
                    shown(tail)
                ));
            };
            let name = &inner[..end];
            if !is_name(name) {
                return Err(format!(
                    "`${{{}}}` is not a variable reference; a variable name is ASCII letters, digits and `_` (write `$$` for a literal `$`)",
                    shown(name)
                ));
            }
            out.push(Piece::Variable(name));
            rest = &inner[end + 1..];
        } else {
            out.push(Piece::Text("$"));
            rest = &tail[1..];
        }
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// A bounded excerpt of a value for an error message (values may be long).
fn shown(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    }
}

/// Checks the references of `text`; `Err` says what is wrong (without the value's secrets:
/// only the malformed reference is quoted).
pub(crate) fn check(text: &str) -> Result<(), String> {
    pieces(text).map(|_| ())
}

/// The variables `text` refers to, in order.
pub(crate) fn variables(text: &str) -> Vec<String> {
    pieces(text)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Variable(name) => Some(name.to_owned()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// `text` with every reference filled in by `lookup`; `Err(name)` names the first variable
/// that `lookup` does not know.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    // Checked when the configuration was read; a value built in code is checked here.
    for piece in pieces(text)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Variable(name) => match lookup(name) {
                Some(value) => out.push_str(&value),
                None => return Err(name.to_owned()),
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_are_filled_in_and_dollars_escaped() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).as_deref(), Ok("Bearer s3cret"));
        assert_eq!(expand("$${TOKEN} costs $5", &env).as_deref(), Ok("${TOKEN} costs $5"));
        assert_eq!(expand("${EMPTY}x", &env).as_deref(), Ok("x"));
        assert_eq!(expand("plain", &env).as_deref(), Ok("plain"));
        assert_eq!(expand("${MISSING}", &env), Err("MISSING".to_owned()));
        assert_eq!(variables("a ${A} b ${B_2} $${C}"), ["A", "B_2"]);
    }

    #[test]
    fn malformed_references_are_refused() {
        assert!(check("${TOKEN").expect_err("unclosed").contains("never closed"));
        assert!(check("${1X}").expect_err("digit").contains("not a variable reference"));
        assert!(check("${A-B}").is_err());
        assert!(check("${}").is_err());
        assert!(check("$HOME and $ alone").is_ok(), "a bare `$` is literal");
    }
}
