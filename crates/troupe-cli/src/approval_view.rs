//! What a person deciding on a call sees: the change a file write or edit would make, as
//! a unified diff; the command a `shell` call would run and where; otherwise the
//! arguments, one per line. Escaped JSON on one line is for programs, not people.

use crate::render::shorten;
use serde_json::Value;
use std::path::Path;
use troupe::tools::Workspace;

/// The most lines of a diff shown; the rest is counted.
const DIFF_LINES: usize = 60;

/// The view of a call of `tool` with `arguments`, each line indented by two spaces;
/// files are read in `workspace` (the file as it is now, against what the call would
/// make of it).
pub(crate) fn describe(tool: &str, arguments: &Value, workspace: Option<&Path>) -> String {
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    let view = match tool {
        "fs.write" => text("path").zip(text("content")).map(|(path, content)| {
            let before = current(workspace, path);
            diff(path, before.as_deref(), content)
        }),
        "fs.edit" => match (text("path"), text("old_string"), text("new_string")) {
            (Some(path), Some(old), Some(new)) => {
                let all = arguments.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
                Some(match current(workspace, path) {
                    Some(before) if before.contains(old) => {
                        let after = if all { before.replace(old, new) } else { before.replacen(old, new, 1) };
                        diff(path, Some(&before), &after)
                    }
                    // The file is not there (or the text is not in it): the edit itself.
                    _ => diff(path, Some(old), new),
                })
            }
            _ => None,
        },
        "shell" => text("command").map(|command| {
            let place = workspace.map_or_else(|| "the workspace".to_owned(), |w| w.display().to_string());
            format!("$ {command}\nin {place}")
        }),
        _ => None,
    };
    let view = view.unwrap_or_else(|| fields(arguments));
    view.lines().map(|line| format!("  {line}\n")).collect()
}

/// The file at `path` in the workspace as it is now; `None` when it does not exist, is
/// not text, or lies outside the workspace (nothing outside it is read).
fn current(workspace: Option<&Path>, path: &str) -> Option<String> {
    let workspace = Workspace::new(workspace?).ok()?;
    std::fs::read_to_string(workspace.resolve(path).ok()?).ok()
}

/// A unified diff of `path` from `before` (`None`: a new file) to `after`.
fn diff(path: &str, before: Option<&str>, after: &str) -> String {
    let old = before.unwrap_or_default();
    let header = if before.is_none() { "/dev/null".to_owned() } else { format!("a/{path}") };
    let unified = similar::TextDiff::from_lines(old, after)
        .unified_diff()
        .context_radius(3)
        .header(&header, &format!("b/{path}"))
        .to_string();
    if unified.is_empty() {
        return format!("{path}: no change");
    }
    let lines: Vec<&str> = unified.lines().collect();
    let mut shown = lines.iter().take(DIFF_LINES).copied().collect::<Vec<_>>().join("\n");
    if lines.len() > DIFF_LINES {
        shown.push_str(&format!("\n… {} more lines", lines.len() - DIFF_LINES));
    }
    shown
}

/// The arguments one per line: `key: value`, strings as they are.
fn fields(arguments: &Value) -> String {
    match arguments {
        Value::Object(map) if !map.is_empty() => map
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut value = shorten(&value, 400);
                if value.contains('\n') {
                    value = format!("\n{}", value.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n"));
                }
                format!("{key}: {value}")
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(_) => "(no arguments)".to_owned(),
        other => shorten(&other.to_string(), 400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_write_is_shown_as_the_diff_it_would_make() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("notes.md"), "one\ntwo\nthree\n").expect("written");
        let shown = describe("fs.write", &json!({"path": "notes.md", "content": "one\n2\nthree\n"}), Some(dir.path()));
        assert!(shown.contains("  --- a/notes.md\n  +++ b/notes.md\n"), "{shown}");
        assert!(shown.contains("  -two\n  +2\n"), "{shown}");
        let new = describe("fs.write", &json!({"path": "new.md", "content": "hello\n"}), Some(dir.path()));
        assert!(new.contains("--- /dev/null") && new.contains("+hello"), "{new}");
    }

    #[test]
    fn an_edit_is_shown_in_its_file_and_nothing_outside_the_workspace_is_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("lib.rs"), "fn a() {}\nfn b() {}\n").expect("written");
        let edit = json!({"path": "lib.rs", "old_string": "fn b() {}", "new_string": "fn b() -> u8 { 1 }"});
        let shown = describe("fs.edit", &edit, Some(dir.path()));
        assert!(shown.contains("   fn a() {}\n  -fn b() {}\n  +fn b() -> u8 { 1 }\n"), "{shown}");
        let outside = describe("fs.write", &json!({"path": "/etc/hostname", "content": "x\n"}), Some(dir.path()));
        assert!(outside.contains("--- /dev/null"), "the file outside is not read: {outside}");
    }

    #[test]
    fn a_command_is_shown_with_where_it_runs_and_other_calls_by_their_fields() {
        let shown = describe("shell", &json!({"command": "cargo test"}), Some(Path::new("/work/app")));
        assert_eq!(shown, "  $ cargo test\n  in /work/app\n");
        let other = describe("web.fetch", &json!({"url": "https://example.com", "max_bytes": 100}), None);
        assert_eq!(other, "  max_bytes: 100\n  url: https://example.com\n");
    }
}
