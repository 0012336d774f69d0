//! [`DefinitionError`]: what is wrong with an agent file, and where.
//!
//! toml reports a byte span and serde's terse wording (`unknown field`, `expected one of
//! `a`, `b``). The span is turned into a 1-based line and column, and the wording into
//! one that names the key, the table it is in, and what is accepted instead.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A place in a file: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters, from 1.
    pub column: usize,
}

impl Location {
    /// The location of byte `offset` of `text`.
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let (line, column) = troupe_core::line_column(text, offset);
        Location { line, column }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// An agent file that cannot be read or is not a valid definition.
///
/// Displays as `path:line:column: message` (or `path: message` when the problem is not
/// at one place, e.g. the file cannot be read).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct DefinitionError {
    /// The file, as it was given.
    pub path: PathBuf,
    /// Where in the file, when the problem is at one place.
    pub location: Option<Location>,
    /// What is wrong, and what is accepted instead.
    pub message: String,
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some(at) => write!(f, "{}:{at}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl DefinitionError {
    /// A problem with the file as a whole.
    pub fn new(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        DefinitionError { path: path.into(), location: None, message: message.into() }
    }

    /// A problem at `location`.
    pub fn at(path: impl Into<PathBuf>, location: Option<Location>, message: impl Into<String>) -> Self {
        DefinitionError { path: path.into(), location, message: message.into() }
    }

    /// The line of the problem, from 1.
    pub fn line(&self) -> Option<usize> {
        self.location.map(|l| l.line)
    }

    /// The column of the problem, from 1.
    pub fn column(&self) -> Option<usize> {
        self.location.map(|l| l.column)
    }

    /// Rewords a toml error of `text` (the contents of `path`).
    pub(crate) fn from_toml(path: &Path, text: &str, error: &toml::de::Error) -> Self {
        let span = error.span();
        let location =
            span.clone().map(|s| Location::of_offset(text, narrow_to_placeholder(text, s, error.message()).start));
        let raw = error.message().trim().replace('\n', "; ");
        let node = span.and_then(|s| find_node(text, &s));
        let message = match node {
            Some(node) => explain(&raw, &node),
            // An empty file has no node to point at; what it misses is at the top level.
            None if raw.starts_with("missing field") => explain(&raw, &Node { path: Vec::new(), on_key: false }),
            None => raw,
        };
        DefinitionError { path: path.to_owned(), location, message }
    }
}

/// The placeholder an "unknown placeholder" error is about, inside `span`: toml gives an
/// element of an inline array the span of the whole array.
fn narrow_to_placeholder(text: &str, span: Range<usize>, message: &str) -> Range<usize> {
    let Some(rest) = message.split_once("unknown placeholder `").map(|(_, rest)| rest) else {
        return span;
    };
    let Some((placeholder, _)) = rest.split_once('`') else {
        return span;
    };
    match text.get(span.clone()).and_then(|within| within.find(placeholder)) {
        Some(at) => span.start + at..span.start + at + placeholder.len(),
        None => span,
    }
}

/// One step of a path into a TOML document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A key of a table.
    Key(String),
    /// An element of an array.
    Index(usize),
}

/// The node an error points at.
#[derive(Debug)]
struct Node {
    /// The path from the document's root to the key or value.
    path: Vec<Segment>,
    /// Whether the error points at the key itself (an unknown key) rather than its value.
    on_key: bool,
}

/// The key or value of `text` that `span` points at; keys first, then the deepest value.
fn find_node(text: &str, span: &Range<usize>) -> Option<Node> {
    let root = DeTable::parse(text).ok()?;
    let mut best: Option<(u8, usize, Node)> = None;
    let mut path = Vec::new();
    let mut visit = |path: &[Segment], key_span: Option<Range<usize>>, value_span: Range<usize>| {
        let score = if key_span.is_some_and(|k| k.start == span.start) {
            3
        } else if value_span == *span {
            2
        } else if value_span.start == span.start {
            1
        } else {
            return;
        };
        let candidate = (score, path.len());
        if best.as_ref().is_none_or(|(s, depth, _)| candidate > (*s, *depth)) {
            best = Some((score, path.len(), Node { path: path.to_vec(), on_key: score == 3 }));
        }
    };
    // The root is a candidate too: a key missing at the top level points at the document.
    visit(&[], None, root.span());
    walk_table(root.get_ref(), &mut path, &mut visit);
    best.map(|(_, _, node)| node)
}

type Visit<'a> = dyn FnMut(&[Segment], Option<Range<usize>>, Range<usize>) + 'a;

fn walk_table(table: &DeTable<'_>, path: &mut Vec<Segment>, visit: &mut Visit<'_>) {
    for (key, value) in table {
        path.push(Segment::Key(key.get_ref().to_string()));
        visit(path, Some(key.span()), value.span());
        walk_value(value, path, visit);
        path.pop();
    }
}

fn walk_value(value: &Spanned<DeValue<'_>>, path: &mut Vec<Segment>, visit: &mut Visit<'_>) {
    match value.get_ref() {
        DeValue::Table(table) => walk_table(table, path, visit),
        DeValue::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                path.push(Segment::Index(n));
                visit(path, None, item.span());
                walk_value(item, path, visit);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Every string value of a `key` inside the tables under `under`, with its span, in the
/// order they are written.
pub(crate) fn string_values_of(text: &str, under: &str, key: &str) -> Vec<(String, Range<usize>)> {
    let Ok(root) = DeTable::parse(text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    collect_strings(root.get_ref(), under, key, false, &mut found);
    found.sort_by_key(|(_, span)| span.start);
    found
}

fn collect_strings(table: &DeTable<'_>, under: &str, key: &str, inside: bool, found: &mut Vec<(String, Range<usize>)>) {
    for (k, value) in table {
        let inside = inside || k.get_ref() == under;
        collect_value_strings(k.get_ref(), value, under, key, inside, found);
    }
}

fn collect_value_strings(
    name: &str,
    value: &Spanned<DeValue<'_>>,
    under: &str,
    key: &str,
    inside: bool,
    found: &mut Vec<(String, Range<usize>)>,
) {
    match value.get_ref() {
        DeValue::String(s) if inside && name == key => found.push((s.to_string(), value.span())),
        DeValue::Table(table) => collect_strings(table, under, key, inside, found),
        DeValue::Array(items) => {
            for item in items.iter() {
                collect_value_strings(name, item, under, key, inside, found);
            }
        }
        _ => {}
    }
}

/// Where the value of the key at `keys` (table names, then the key) is written.
pub(crate) fn value_location(text: &str, keys: &[&str]) -> Option<Location> {
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let (last, tables) = keys.split_last()?;
    for name in tables {
        match table.get(*name)?.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return None,
        }
    }
    let value = table.get(*last)?;
    Some(Location::of_offset(text, value.span().start))
}

/// How the table holding a key is named in messages: `[provider]`, `[[tools]]`, or `the
/// top level`.
fn table_name(path: &[Segment]) -> String {
    let keys: Vec<&str> = path
        .iter()
        .filter_map(|s| match s {
            Segment::Key(k) => Some(k.as_str()),
            Segment::Index(_) => None,
        })
        .collect();
    match path.last() {
        None => "the top level".to_owned(),
        Some(Segment::Index(_)) => format!("[[{}]]", keys.join(".")),
        Some(Segment::Key(_)) => format!("[{}]", keys.join(".")),
    }
}

/// The key a value error is about, and the table it is in (`args` of `[agent.execution]`
/// for an element of that array).
fn key_and_table(path: &[Segment]) -> (Option<&str>, String) {
    let key_at = path.iter().rposition(|s| matches!(s, Segment::Key(_)));
    match key_at {
        Some(n) => {
            let key = match &path[n] {
                Segment::Key(k) => Some(k.as_str()),
                Segment::Index(_) => None,
            };
            // An array of tables is a table of its own; an inline array belongs to its key.
            (key, table_name(&path[..n]))
        }
        None => (None, table_name(&[])),
    }
}

/// serde's `expected ...` list as plain words: "`a`, `b` or `c`" → "a, b, c".
fn accepted(list: &str) -> String {
    let list = list.trim().trim_start_matches("one of ");
    list.replace(" or ", ", ").replace('`', "")
}

fn plural_expected(list: &str) -> String {
    let words = accepted(list);
    if words.contains(", ") { format!("expected one of {words}") } else { format!("expected {words}") }
}

/// Plainer words for serde's primitive type names.
fn plain_types(message: &str) -> String {
    [
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected f32", "expected a number"),
        ("expected a string", "expected a string"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
    ]
    .iter()
    .fold(message.to_owned(), |m, (from, to)| m.replace(from, to))
}

fn explain(raw: &str, node: &Node) -> String {
    if let Some(rest) = raw.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let table = table_name(node.path.split_last().map_or(&[][..], |(_, parent)| parent));
        let expected = expected.trim_start_matches(',').trim();
        let hint = match expected.strip_prefix("expected ") {
            Some(list) => plural_expected(list),
            None => "no keys are accepted there".to_owned(),
        };
        return format!("unknown key `{key}` in {table}; {hint}");
    }
    if let Some(rest) = raw.strip_prefix("missing field `") {
        let key = rest.split_once('`').map_or(rest, |(k, _)| k);
        if node.path.is_empty() {
            return format!("missing the [{key}] table");
        }
        let table = if node.on_key { key_and_table(&node.path).1 } else { table_name(&node.path) };
        return format!("missing key `{key}` in {table}");
    }
    let (key, table) = key_and_table(&node.path);
    let Some(key) = key else {
        return plain_types(raw);
    };
    if let Some(rest) = raw.strip_prefix("unknown variant `") {
        let (value, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = expected.trim_start_matches(',').trim();
        let hint = expected.strip_prefix("expected ").map(plural_expected).unwrap_or_default();
        return format!("`{key}` in {table} cannot be \"{value}\"; {hint}");
    }
    format!("`{key}` in {table}: {}", plain_types(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_character_columns() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(Location::of_offset(text, 0), Location { line: 1, column: 1 });
        assert_eq!(Location::of_offset(text, 6), Location { line: 2, column: 1 });
        assert_eq!(Location::of_offset(text, 10), Location { line: 2, column: 4 }, "é is one column");
        assert_eq!(Location::of_offset(text, 999).line, 3, "clamped to the end");
    }

    #[test]
    fn tables_are_named_as_written() {
        let key = |k: &str| Segment::Key(k.to_owned());
        assert_eq!(table_name(&[]), "the top level");
        assert_eq!(table_name(&[key("agent"), key("execution")]), "[agent.execution]");
        assert_eq!(table_name(&[key("tools"), Segment::Index(1), key("deny"), Segment::Index(0)]), "[[tools.deny]]");
        let args = [key("agent"), key("execution"), key("args"), Segment::Index(2)];
        let (k, table) = key_and_table(&args);
        assert_eq!((k, table.as_str()), (Some("args"), "[agent.execution]"));
    }

    #[test]
    fn serde_lists_become_plain_words() {
        assert_eq!(plural_expected("one of `json`, `markdown`, `both`"), "expected one of json, markdown, both");
        assert_eq!(plural_expected("`a` or `b`"), "expected one of a, b");
        assert_eq!(plural_expected("`ipc`"), "expected ipc");
    }

    #[test]
    fn string_values_are_found_in_document_order() {
        let text = "[[tools]]\nname = \"a\"\n[[tools]]\nname = \"b\"\n[[tools.deny]]\nname = \"a\"\n";
        let names: Vec<String> = string_values_of(text, "tools", "name").into_iter().map(|(s, _)| s).collect();
        assert_eq!(names, ["a", "b", "a"]);
        assert_eq!(value_location("[agent]\nid = \"x\"\n", &["agent", "id"]), Some(Location { line: 2, column: 6 }));
    }
}
