//! The interface of Python code, read by indentation: `def`/`class` headers (decorators
//! and docstrings kept, public names only), class-level annotated fields and module
//! constants; bodies become `...`.

use super::interface::{strip_words, trim_line_ends};

/// The indentation of `line`, in columns (a tab counts 4).
fn indent_of(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// `line` with `#` comments removed and string contents blanked.
fn mask_python(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut string: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    for c in line.chars() {
        if comment {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            continue;
        }
        match string {
            Some(quote) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == quote {
                    string = None;
                    out.push(c);
                    continue;
                }
                out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            }
            None if c == '#' => {
                comment = true;
                out.push(' ');
            }
            None => {
                if c == '"' || c == '\'' {
                    string = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// The `:` ending a `def` or `class` header, outside brackets; its byte offset.
fn python_header_colon(code: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in code.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ':' if depth <= 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn python_private(name: &str) -> bool {
    name.starts_with('_') && !(name.starts_with("__") && name.ends_with("__"))
}

/// Python: `def` and `class` headers (decorators and docstrings kept, public names only),
/// class-level annotated fields and module constants; bodies become `...`.
pub(super) fn interface(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut decorators: Vec<String> = Vec::new();
    // Indentations of the classes whose bodies are being read.
    let mut classes: Vec<usize> = Vec::new();
    let mut skip_deeper_than: Option<usize> = None;
    // A blank line seen while skipping a body, to keep items apart.
    let mut skipped_blank = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        let indent = indent_of(line);
        i += 1;
        if let Some(limit) = skip_deeper_than {
            if trimmed.is_empty() || indent > limit {
                skipped_blank |= trimmed.is_empty();
                continue;
            }
            skip_deeper_than = None;
            if std::mem::take(&mut skipped_blank) && out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
        }
        if trimmed.is_empty() {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        while classes.last().is_some_and(|c| indent <= *c) {
            classes.pop();
        }
        let in_class = classes.last().is_some();
        if trimmed.starts_with('@') {
            decorators.push(line.trim_end().to_owned());
            continue;
        }
        let header = strip_words(trimmed, &["async "]);
        let is_def = header.starts_with("def ");
        let is_class = header.starts_with("class ");
        if is_def || is_class {
            let word = if is_def { "def " } else { "class " };
            let name: String = header[word.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            // The header may run over several lines, up to its `:`.
            // Untrimmed, as `masked` is: an offset found in `masked` is the same in `text`.
            let mut text = line.to_owned();
            let mut masked = mask_python(line);
            while python_header_colon(&masked).is_none() && i < lines.len() {
                text.push('\n');
                text.push_str(lines[i]);
                masked.push('\n');
                masked.push_str(&mask_python(lines[i]));
                i += 1;
            }
            let keep = !python_private(&name);
            let decorated = std::mem::take(&mut decorators);
            if !keep {
                skip_deeper_than = Some(indent);
                continue;
            }
            out.extend(decorated);
            let colon = python_header_colon(&masked).unwrap_or(text.len().saturating_sub(1));
            out.push(trim_line_ends(&text[..=colon.min(text.len().saturating_sub(1))]));
            let body_indent = lines[i..]
                .iter()
                .find(|l| !l.trim().is_empty())
                .map(|l| indent_of(l))
                .filter(|b| *b > indent)
                .unwrap_or(indent + 4);
            i = python_docstring(&lines, i, &mut out);
            if is_def {
                out.push(format!("{}...", " ".repeat(body_indent)));
                skip_deeper_than = Some(indent);
            } else {
                classes.push(indent);
            }
            continue;
        }
        decorators.clear();
        let masked = mask_python(trimmed);
        let opens_block = masked.trim_end().ends_with(':');
        if in_class && !opens_block {
            // `name: Type` or `name: Type = default`, a dataclass field.
            let name_len = trimmed.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(0);
            let name = &trimmed[..name_len];
            if name_len > 0 && trimmed[name_len..].trim_start().starts_with(':') && !python_private(name) {
                out.push(line.trim_end().to_owned());
            }
            continue;
        }
        if !in_class && indent == 0 && !opens_block {
            // Module constants (`MAX_RETRIES = 3`) and `__all__`.
            let name_len = trimmed.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(0);
            let name = &trimmed[..name_len];
            let constant = name_len > 0
                && (name == "__all__"
                    || name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                && trimmed[name_len..].trim_start().starts_with(['=', ':']);
            if constant {
                out.push(line.trim_end().to_owned());
            }
            continue;
        }
        if opens_block {
            // `if __name__ == "__main__":`, `try:`, ...: implementation.
            skip_deeper_than = Some(indent);
        }
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out.join("\n")
}

/// Copies the docstring that starts the body at `lines[i..]`, if any; returns the index of
/// the first line after it.
fn python_docstring(lines: &[&str], mut i: usize, out: &mut Vec<String>) -> usize {
    let Some(first) = (i..lines.len()).find(|&n| !lines[n].trim().is_empty()) else { return i };
    let trimmed = lines[first].trim_start();
    let body = trimmed.trim_start_matches(['r', 'R', 'u', 'U']);
    let Some(quote) = ["\"\"\"", "'''"].into_iter().find(|q| body.starts_with(q)) else {
        if body.starts_with('"') || body.starts_with('\'') {
            out.push(lines[first].trim_end().to_owned());
            return first + 1;
        }
        return i;
    };
    out.push(lines[first].trim_end().to_owned());
    i = first + 1;
    if body[3..].contains(quote) {
        return i;
    }
    while i < lines.len() {
        out.push(lines[i].trim_end().to_owned());
        i += 1;
        if lines[i - 1].contains(quote) {
            break;
        }
    }
    i
}
