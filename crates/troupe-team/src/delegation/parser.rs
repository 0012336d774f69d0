//! [`JsonDelegationParser`]: delegations as JSON, found inside a leader's prose.

use super::{Delegation, DelegationError, DelegationParser, valid_workers};
use serde_json::{Map, Value};

/// Reads delegations written as JSON, wherever they sit in the leader's answer.
///
/// Where it looks, in order:
///
/// 1. the ```` ```json ```` fenced blocks (the last one that holds a delegation wins);
/// 2. otherwise every balanced JSON array or object in the text, found with a bracket
///    matcher that respects strings and escapes (so braces inside a task's text do not
///    confuse it); the last one that holds a delegation wins.
///
/// What it accepts as a delegation:
///
/// - an array of entries: `[{"worker": 0, "task": "..."}, ...]`;
/// - an object holding such an array under `delegations` or `tasks`;
/// - a single entry object.
///
/// An entry's `worker` (or `to`) is an index into the roster, a numeric string, or a
/// worker's name (exact, then ignoring case); its `task` (or `brief`) must not be empty.
/// Out-of-range indices, unknown names and empty tasks are errors whose message names the
/// valid workers, for the leader to correct.
///
/// ````
/// use troupe_team::delegation::{Delegation, DelegationParser, JsonDelegationParser};
///
/// let answer = r#"I'll split it.
/// ```json
/// [{"worker": 0, "task": "Find the {config} files"}, {"worker": "writer", "task": "Draft the notes"}]
/// ```
/// Done."#;
/// let plan = JsonDelegationParser.parse(answer, &["researcher", "writer"])?;
/// assert_eq!(plan, [Delegation::new(0, "Find the {config} files"), Delegation::new(1, "Draft the notes")]);
///
/// let error = JsonDelegationParser.parse(r#"[{"worker": 5, "task": "x"}]"#, &["researcher", "writer"]).expect_err("5 is out of range");
/// assert!(error.to_string().contains("0..=1"), "{error}");
/// # Ok::<(), troupe_team::delegation::DelegationError>(())
/// ````
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonDelegationParser;

impl DelegationParser for JsonDelegationParser {
    fn parse(&self, text: &str, workers: &[&str]) -> Result<Vec<Delegation>, DelegationError> {
        let fenced: Vec<Value> = fenced_json_blocks(text)
            .into_iter()
            .flat_map(|block| match serde_json::from_str::<Value>(block.trim()) {
                Ok(value) => vec![value],
                // A block with a stray comment or trailing prose may still hold a value.
                Err(_) => json_values(block),
            })
            .collect();
        let candidates = if fenced.iter().any(|v| entries_of(v).is_some()) { fenced } else { json_values(text) };
        let valid = valid_workers(workers);
        let shaped: Vec<Vec<&Value>> = candidates.iter().filter_map(entries_of).collect();
        // An empty list counts only when nothing else does: `[]` in passing is no plan.
        let Some(entries) = shaped.iter().rev().find(|entries| !entries.is_empty()) else {
            if !shaped.is_empty() {
                return Err(DelegationError::Empty { valid });
            }
            let detail = if candidates.is_empty() {
                "the answer holds no JSON".to_owned()
            } else {
                "the JSON in the answer is not a list of {\"worker\", \"task\"} entries".to_owned()
            };
            return Err(DelegationError::NotFound { detail, valid });
        };
        entries.iter().enumerate().map(|(entry, value)| delegation(entry, value, workers, &valid)).collect()
    }
}

/// The entries of a delegation-shaped value, or `None` when it has another shape.
fn entries_of(value: &Value) -> Option<Vec<&Value>> {
    match value {
        Value::Array(items) if items.iter().all(|item| item.as_object().is_some_and(is_entry)) => {
            Some(items.iter().collect())
        }
        Value::Object(map) => {
            let list = ["delegations", "tasks"].iter().find_map(|key| map.get(*key)).and_then(Value::as_array);
            match list {
                Some(items) if items.iter().all(Value::is_object) => Some(items.iter().collect()),
                _ if is_entry(map) => Some(vec![value]),
                _ => None,
            }
        }
        _ => None,
    }
}

fn is_entry(map: &Map<String, Value>) -> bool {
    worker_field(map).is_some() || task_field(map).is_some()
}

fn worker_field(map: &Map<String, Value>) -> Option<&Value> {
    map.get("worker").or_else(|| map.get("to"))
}

fn task_field(map: &Map<String, Value>) -> Option<&Value> {
    map.get("task").or_else(|| map.get("brief"))
}

fn delegation(entry: usize, value: &Value, workers: &[&str], valid: &str) -> Result<Delegation, DelegationError> {
    let malformed = |message: &str| DelegationError::Malformed { entry, message: message.to_owned() };
    let map = value.as_object().ok_or_else(|| malformed("it is not an object"))?;
    let worker = worker_field(map).ok_or_else(|| malformed("it names no `worker`"))?;
    let worker = worker_index(entry, worker, workers, valid)?;
    let task = match task_field(map) {
        Some(Value::String(task)) => task.trim(),
        Some(_) => return Err(malformed("its `task` is not a string")),
        None => return Err(malformed("it has no `task`")),
    };
    if task.is_empty() {
        return Err(DelegationError::EmptyTask { entry, worker });
    }
    Ok(Delegation::new(worker, task))
}

fn worker_index(entry: usize, worker: &Value, workers: &[&str], valid: &str) -> Result<usize, DelegationError> {
    let out_of_range =
        |written: String| DelegationError::OutOfRange { entry, worker: written, valid: valid.to_owned() };
    let index = match worker {
        Value::Number(number) => match number.as_u64() {
            Some(index) => index,
            // Negative or fractional: never a roster index.
            None => return Err(out_of_range(number.to_string())),
        },
        Value::String(name) => {
            let name = name.trim();
            if let Some(index) = workers.iter().position(|w| *w == name) {
                return Ok(index);
            }
            if let Some(index) = workers.iter().position(|w| w.eq_ignore_ascii_case(name)) {
                return Ok(index);
            }
            match name.parse::<u64>() {
                Ok(index) => index,
                Err(_) => {
                    return Err(DelegationError::UnknownWorker {
                        entry,
                        name: name.to_owned(),
                        valid: valid.to_owned(),
                    });
                }
            }
        }
        _ => {
            return Err(DelegationError::Malformed {
                entry,
                message: "its `worker` is neither an index nor a name".to_owned(),
            });
        }
    };
    usize::try_from(index).ok().filter(|&i| i < workers.len()).ok_or_else(|| out_of_range(index.to_string()))
}

/// The contents of every ```` ```json ```` block, in order; an unclosed last block runs to
/// the end of the text.
fn fenced_json_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let (info, body) = after.split_once('\n').unwrap_or((after, ""));
        if let Some(inline_close) = info.find("```") {
            // A one-line span (```like this```) is no block; skip past its closing fence.
            rest = &after[inline_close + 3..];
            continue;
        }
        let close = body.find("```");
        let content = &body[..close.unwrap_or(body.len())];
        if info.trim().eq_ignore_ascii_case("json") {
            blocks.push(content);
        }
        match close {
            Some(close) => rest = &body[close + 3..],
            None => break,
        }
    }
    blocks
}

/// The most bytes [`json_values`] scans for brackets in all, whatever the reply: each
/// bracket that opens no JSON is scanned from again to the reply's end, so a reply of many
/// (a model's output is nobody's to bound) would otherwise cost the square of its length.
const SCAN_BUDGET: usize = 8 * 1024 * 1024;

/// Every outermost balanced JSON array or object of `text` that parses, in order (those
/// found within [`SCAN_BUDGET`]).
fn json_values(text: &str) -> Vec<Value> {
    let bytes = text.as_bytes();
    let mut values = Vec::new();
    let mut start = 0;
    let mut budget = SCAN_BUDGET;
    while start < bytes.len() {
        if matches!(bytes[start], b'[' | b'{')
            && let Some(end) = balanced_end(bytes, start, &mut budget)
            && let Ok(value) = serde_json::from_str::<Value>(&text[start..end])
        {
            values.push(value);
            start = end;
            continue;
        }
        // A bracket that opens no valid JSON (`[see below]`) may still enclose some.
        start += 1;
    }
    values
}

/// The end (exclusive) of the bracketed span opening at `start`, respecting JSON strings
/// and their escapes; `None` when the brackets never balance or cross, or `budget` (bytes
/// still to scan) runs out.
///
/// Works on bytes: the brackets, quotes and backslash are ASCII, which never occurs inside
/// a multi-byte UTF-8 sequence, so every index found is a character boundary.
fn balanced_end(bytes: &[u8], start: usize, budget: &mut usize) -> Option<usize> {
    let mut open = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &byte) in bytes.iter().enumerate().skip(start) {
        *budget = budget.checked_sub(1)?;
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => open.push(byte),
            b']' | b'}' => {
                let expected = if byte == b']' { b'[' } else { b'{' };
                if open.pop() != Some(expected) {
                    return None;
                }
                if open.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEAM: [&str; 3] = ["researcher", "writer", "critic"];

    fn parse(text: &str) -> Result<Vec<Delegation>, DelegationError> {
        JsonDelegationParser.parse(text, &TEAM)
    }

    #[test]
    fn a_fenced_block_inside_prose_is_read() {
        let text = "Plan:\n```json\n[{\"worker\": 0, \"task\": \"look\"}, {\"worker\": 2, \"task\": \"judge\"}]\n```\nThat's all.";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(0, "look"), Delegation::new(2, "judge")]);
    }

    #[test]
    fn the_fenced_block_wins_over_json_in_the_prose() {
        let text =
            "Not this: [{\"worker\": 1, \"task\": \"prose\"}]\n```json\n{\"worker\": 0, \"task\": \"fenced\"}\n```\n";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(0, "fenced")]);
    }

    #[test]
    fn the_last_fenced_delegation_wins() {
        let text = "```json\n[{\"worker\": 0, \"task\": \"draft\"}]\n```\nBetter:\n```JSON\n[{\"worker\": 1, \"task\": \"final\"}]\n```";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(1, "final")]);
    }

    #[test]
    fn a_one_line_fence_does_not_swallow_the_next_block() {
        let text = "Use ```cargo test``` first.\n```json\n[{\"worker\": 2, \"task\": \"review\"}]\n```\n\
                    Not this one: [{\"worker\": 1, \"task\": \"prose\"}]";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(2, "review")]);
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end() {
        let text = "```json\n[{\"worker\": 1, \"task\": \"write\"}]";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(1, "write")]);
    }

    #[test]
    fn braces_and_brackets_inside_strings_do_not_confuse_the_matcher() {
        let text =
            r#"Here {roughly} is the split [see below]: [{"worker": 0, "task": "parse \"{a: [1}\" and ]]"}] ok {"#;
        assert_eq!(parse(text).expect("parses"), [Delegation::new(0, "parse \"{a: [1}\" and ]]")]);
    }

    #[test]
    fn the_last_delegation_in_prose_wins_over_other_json() {
        let text =
            r#"First [{"worker": 0, "task": "old"}], then [{"worker": 1, "task": "new"}], see note [1] and {"x": 2}."#;
        assert_eq!(parse(text).expect("parses"), [Delegation::new(1, "new")]);
    }

    #[test]
    fn names_map_to_indices_exactly_then_ignoring_case() {
        let text =
            r#"[{"worker": "critic", "task": "a"}, {"worker": "Writer", "task": "b"}, {"to": "1", "brief": "c"}]"#;
        assert_eq!(
            parse(text).expect("parses"),
            [Delegation::new(2, "a"), Delegation::new(1, "b"), Delegation::new(1, "c")]
        );
    }

    #[test]
    fn wrapper_objects_and_single_entries_are_accepted() {
        let wrapped = r#"{"delegations": [{"worker": 0, "task": "a"}], "note": {"nested": [1, 2]}}"#;
        assert_eq!(parse(wrapped).expect("parses"), [Delegation::new(0, "a")]);
        let tasks = r#"{"tasks": [{"worker": 2, "task": "b", "priority": "high"}]}"#;
        assert_eq!(parse(tasks).expect("parses"), [Delegation::new(2, "b")]);
        let single = r#"Just one: {"worker": 1, "task": "  c  "}"#;
        assert_eq!(parse(single).expect("parses"), [Delegation::new(1, "c")]);
    }

    #[test]
    fn out_of_range_indices_are_refused_naming_the_valid_range() {
        let error =
            parse(r#"[{"worker": 0, "task": "a"}, {"worker": 3, "task": "b"}]"#).expect_err("3 is out of range");
        assert!(matches!(&error, DelegationError::OutOfRange { entry: 1, worker, .. } if worker == "3"), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("0..=2") && message.contains("2 = critic"), "{message}");
        let negative = parse(r#"[{"worker": -1, "task": "a"}]"#).expect_err("negative");
        assert!(matches!(negative, DelegationError::OutOfRange { .. }), "{negative:?}");
    }

    #[test]
    fn unknown_names_and_empty_tasks_are_refused() {
        let unknown = parse(r#"[{"worker": "poet", "task": "a"}]"#).expect_err("no poet");
        assert!(unknown.to_string().contains("`poet`") && unknown.to_string().contains("0 = researcher"), "{unknown}");
        let empty = parse(r#"[{"worker": 1, "task": "   "}]"#).expect_err("empty task");
        assert_eq!(empty, DelegationError::EmptyTask { entry: 0, worker: 1 });
        let list = parse("```json\n[]\n```").expect_err("an empty list");
        assert!(matches!(list, DelegationError::Empty { .. }), "{list:?}");
    }

    #[test]
    fn malformed_entries_are_refused() {
        let no_task = parse(r#"[{"worker": 1}]"#).expect_err("no task");
        assert!(matches!(no_task, DelegationError::Malformed { entry: 0, .. }), "{no_task:?}");
        let bad_worker = parse(r#"[{"worker": true, "task": "a"}]"#).expect_err("bool worker");
        assert!(matches!(bad_worker, DelegationError::Malformed { .. }), "{bad_worker:?}");
        let bad_task = parse(r#"{"worker": 0, "task": 7}"#).expect_err("numeric task");
        assert!(matches!(bad_task, DelegationError::Malformed { .. }), "{bad_task:?}");
    }

    #[test]
    fn garbage_is_refused_with_the_expected_shape() {
        for text in ["", "I think we should just do it.", "[not json] {neither}", "[1, 2, 3]", r#"{"answer": 42}"#] {
            let error = parse(text).expect_err("no delegation");
            assert!(matches!(error, DelegationError::NotFound { .. }), "{text:?}: {error:?}");
            assert!(error.to_string().contains("\"worker\": <index>"), "{error}");
        }
        let none = JsonDelegationParser.parse(r#"[{"worker": 0, "task": "a"}]"#, &[]).expect_err("no workers");
        assert!(none.to_string().contains("none (the team has no workers)"), "{none}");
    }

    #[test]
    fn multibyte_text_around_the_json_is_fine() {
        let text = "Plan — « [{\"worker\": 0, \"task\": \"résumé ✓\"}] » fin";
        assert_eq!(parse(text).expect("parses"), [Delegation::new(0, "résumé ✓")]);
    }

    /// A reply of many brackets that open nothing costs a bounded scan, not the square of
    /// its length (here about 5 × 10^12 steps): what comes before them is found, what comes after
    /// the budget is spent is not looked for.
    #[test]
    fn a_reply_of_unbalanced_brackets_is_scanned_within_the_budget() {
        let reply = format!("{{\"to\": \"a\"}} {} {{\"to\": \"b\"}}", "[".repeat(3 * 1024 * 1024));
        assert_eq!(json_values(&reply), [serde_json::json!({"to": "a"})]);
        let short = format!("{{\"to\": \"a\"}} {} {{\"to\": \"b\"}}", "[".repeat(100));
        assert_eq!(json_values(&short).len(), 2, "a reply within the budget is read whole");
    }
}
