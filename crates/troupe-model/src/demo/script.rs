//! The demo model's tool-using script: list the workspace, read a file, write a summary,
//! answer.
//!
//! The model keeps no state between calls: every step is decided afresh from the
//! conversation since the task (the last user message with text), so a resumed or
//! replayed run takes the same steps, and whatever the tools answered (an empty
//! workspace, a rejected write) shapes what comes next.

use super::findings::{Findings, TeamRole};
use super::{DemoBlock, DemoReply, truncate};
use serde_json::{Value, json};
use troupe_core::{ContentBlock, Message, ModelRequest, Role, StopReason, ToolChoice};

/// The tool the script starts with; without it, the demo model only chats.
pub(super) const LIST: &str = "fs.list";
const READ: &str = "fs.read";
const WRITE: &str = "fs.write";

/// The file the demo model writes its summary to.
pub const DEMO_FILE: &str = "TROUPE_DEMO.md";

/// Names shown in the summary, at most.
const SHOWN_ENTRIES: usize = 12;

/// One call of the script's, and what came back.
struct Step<'a> {
    input: &'a Value,
    /// The result's content and whether it is an error; `None` if no result came back.
    result: Option<(&'a str, bool)>,
}

impl Step<'_> {
    /// The successful result's content.
    fn output(&self) -> Option<&str> {
        match self.result {
            Some((content, false)) => Some(content),
            _ => None,
        }
    }

    /// Why the call did not succeed, in one line.
    fn failure(&self) -> Option<String> {
        match self.result {
            Some((_, false)) => None,
            // The runtime's advice to the model ("Do not repeat it ...") is not news to the user.
            Some((content, true)) => {
                let line = first_line(content);
                Some(match line.split_once(". Do not ") {
                    Some((why, _)) => format!("{why}."),
                    None => line,
                })
            }
            None => Some("no result came back".to_owned()),
        }
    }
}

/// What the run has done so far.
struct Progress<'a> {
    task: String,
    list: Option<Step<'a>>,
    read: Option<Step<'a>>,
    write: Option<Step<'a>>,
    /// Tool calls in the whole conversation, to number new ones uniquely.
    calls: usize,
}

/// The workspace as `fs.list` showed it.
#[derive(Debug, Default, PartialEq)]
struct Listing {
    files: Vec<String>,
    dirs: Vec<String>,
}

/// The script's next reply, or `None` when the request does not offer `fs.list` (or
/// forbids tool calls), so the demo model chats instead.
pub(super) fn reply(request: &ModelRequest) -> Option<DemoReply> {
    let offers = |name: &str| request.tools.iter().any(|t| t.name == name);
    if !offers(LIST) || request.tool_choice == Some(ToolChoice::None) {
        return None;
    }
    let progress = progress(&request.messages);
    let call = |name: &str, text: String, input: Value| DemoReply {
        blocks: vec![
            DemoBlock::Text(text),
            DemoBlock::ToolCall { id: format!("call_demo_{}", progress.calls + 1), name: name.to_owned(), input },
        ],
        stop_reason: StopReason::ToolUse,
    };
    let Some(list) = &progress.list else {
        return Some(call(
            LIST,
            "I'll start by looking at what is in the workspace.\n".to_owned(),
            json!({"path": "."}),
        ));
    };
    let listing = list.output().map(parse_listing).unwrap_or_default();
    if progress.read.is_none()
        && offers(READ)
        && let Some(file) = pick_file(&listing)
    {
        let text = format!("{}; I'll read `{file}` to see what it is about.\n", describe_listing(&listing));
        return Some(call(READ, text, json!({"path": file})));
    }
    if progress.write.is_none() && offers(WRITE) {
        let text = format!("Now I'll write a short summary to `{DEMO_FILE}`.\n");
        return Some(call(WRITE, text, json!({"path": DEMO_FILE, "content": summary(&progress, &listing)})));
    }
    let answer = match TeamRole::of(&progress.task, request.system.as_deref()) {
        Some(role) => format!("{}\n\n{}", report(role, &progress), final_answer(&progress, &listing)),
        None => final_answer(&progress, &listing),
    };
    Some(DemoReply { blocks: vec![DemoBlock::Text(answer)], stop_reason: StopReason::EndTurn })
}

/// A teammate's finding, by its role, from the file it read: the first line of its report.
fn report(role: TeamRole, progress: &Progress<'_>) -> String {
    let path = read_path(progress).unwrap_or("the workspace");
    let Some(content) = progress.read.as_ref().and_then(Step::output) else {
        return read_sentence(progress).unwrap_or_else(|| "There was no file to read.".to_owned());
    };
    let wrote = progress.write.as_ref().filter(|step| step.failure().is_none()).map(|step| {
        let bytes = step.input.get("content").and_then(Value::as_str).map_or(0, str::len);
        (DEMO_FILE, bytes)
    });
    Findings::of_read(content).report(role, path, wrote)
}

/// The task and the script's calls since it was given, with their results.
fn progress(messages: &[Message]) -> Progress<'_> {
    let start = messages.iter().rposition(|m| {
        m.role == Role::User && m.content.iter().any(|b| b.as_text().is_some_and(|t| !t.trim().is_empty()))
    });
    let task = start.map(|i| messages[i].text()).unwrap_or_default();
    let calls = messages.iter().flat_map(|m| m.tool_uses()).count();
    let since = &messages[start.map_or(0, |i| i + 1)..];
    let result_of = |id: &troupe_core::ToolCallId| {
        since.iter().flat_map(|m| &m.content).find_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, content, is_error } if tool_use_id == id => {
                Some((content.as_str(), *is_error))
            }
            _ => None,
        })
    };
    let mut progress = Progress { task, list: None, read: None, write: None, calls };
    for (id, name, input) in since.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| m.tool_uses()) {
        let slot = match name {
            LIST => &mut progress.list,
            READ => &mut progress.read,
            WRITE => &mut progress.write,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(Step { input, result: result_of(id) });
        }
    }
    progress
}

/// Reads `fs.list` output: one entry a line, `/` after directories, `@` after links,
/// notes in parentheses or brackets.
fn parse_listing(content: &str) -> Listing {
    let mut listing = Listing::default();
    for line in content.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if line.starts_with('(') || line.starts_with('[') {
            continue;
        }
        if let Some(dir) = line.strip_suffix('/') {
            listing.dirs.push(dir.to_owned());
        } else if !line.ends_with('@') {
            listing.files.push(line.to_owned());
        }
    }
    listing
}

/// The file most likely to say what the workspace is: a README, a `Cargo.toml`, else the
/// first file (never the demo's own summary).
fn pick_file(listing: &Listing) -> Option<&str> {
    let files: Vec<&str> = listing.files.iter().map(String::as_str).filter(|f| *f != DEMO_FILE).collect();
    files
        .iter()
        .find(|f| **f == "README.md")
        .or_else(|| files.iter().find(|f| f.to_ascii_lowercase().starts_with("readme")))
        .or_else(|| files.iter().find(|f| **f == "Cargo.toml"))
        .or_else(|| files.first())
        .copied()
}

/// `The workspace has 3 files (a, b, c) and 1 directory (src/)`.
fn describe_listing(listing: &Listing) -> String {
    if listing.files.is_empty() && listing.dirs.is_empty() {
        return "The workspace is empty".to_owned();
    }
    let mut parts = Vec::new();
    if !listing.files.is_empty() {
        parts.push(format!("{} ({})", count(listing.files.len(), "file"), names(&listing.files, "")));
    }
    if !listing.dirs.is_empty() {
        parts.push(format!("{} ({})", count(listing.dirs.len(), "directory"), names(&listing.dirs, "/")));
    }
    format!("The workspace has {}", parts.join(" and "))
}

fn count(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "directory") => format!("{n} directories"),
        _ => format!("{n} {noun}s"),
    }
}

fn names(items: &[String], suffix: &str) -> String {
    let mut shown: Vec<String> = items.iter().take(SHOWN_ENTRIES).map(|n| format!("{n}{suffix}")).collect();
    if items.len() > SHOWN_ENTRIES {
        shown.push(format!("and {} more", items.len() - SHOWN_ENTRIES));
    }
    shown.join(", ")
}

/// The path the script asked `fs.read` for.
fn read_path<'a>(progress: &'a Progress<'_>) -> Option<&'a str> {
    progress.read.as_ref().and_then(|step| step.input.get("path")).and_then(Value::as_str)
}

/// The first line of the file, from `fs.read` output (`     1\ttext` lines).
fn first_line_read(content: &str) -> String {
    let line = content.lines().next().unwrap_or_default();
    match line.split_once('\t') {
        Some((number, text)) if number.trim().parse::<u64>().is_ok() => truncate(text.trim(), 160),
        // `(`x` is empty)` and other notes.
        _ => "(the file is empty)".to_owned(),
    }
}

/// What the script learned by reading, as a sentence.
fn read_sentence(progress: &Progress<'_>) -> Option<String> {
    let step = progress.read.as_ref()?;
    let path = read_path(progress).unwrap_or("the file");
    Some(match (step.output(), step.failure()) {
        (Some(content), _) => {
            let lines =
                content.lines().filter(|l| l.split_once('\t').is_some_and(|(n, _)| n.trim().parse::<u64>().is_ok()));
            format!(
                "I read `{path}` ({}); its first line is: {}",
                count(lines.count(), "line"),
                first_line_read(content)
            )
        }
        (None, Some(why)) => format!("I could not read `{path}`: {why}"),
        (None, None) => format!("I could not read `{path}`"),
    })
}

/// The content of the summary file.
fn summary(progress: &Progress<'_>, listing: &Listing) -> String {
    let mut text = format!("# What the troupe demo found\n\nTask: {}\n\n", truncate(progress.task.trim(), 280));
    match progress.list.as_ref().and_then(Step::failure) {
        Some(why) => text.push_str(&format!("Listing the workspace failed: {why}.\n")),
        None => text.push_str(&format!("{}.\n", describe_listing(listing))),
    }
    if let Some(sentence) = read_sentence(progress) {
        text.push_str(&format!("{sentence}\n"));
    }
    if let (Some(path), Some(content)) = (read_path(progress), progress.read.as_ref().and_then(Step::output)) {
        let findings = Findings::of_read(content);
        text.push_str(&format!("\n## {}\n\n", findings.title));
        if let Some(sentence) = &findings.sentence {
            text.push_str(&format!("{sentence}\n\n"));
        }
        if !findings.sections.is_empty() {
            text.push_str(&format!("`{path}` covers: {}.\n", findings.sections.join(", ")));
        }
    }
    text.push_str(
        "\nWritten by troupe's offline demo model, which follows a fixed script \
         (list, read, write, answer); a real model decides its own steps.\n",
    );
    text
}

/// The last reply: what the run did, failures included.
fn final_answer(progress: &Progress<'_>, listing: &Listing) -> String {
    let mut text = String::from("Done. Here is what I did");
    let task = progress.task.trim();
    if !task.is_empty() {
        text.push_str(&format!(" for \u{201c}{}\u{201d}", truncate(task, 120)));
    }
    text.push_str(":\n\n");
    match progress.list.as_ref().and_then(Step::failure) {
        Some(why) => text.push_str(&format!("- I tried to list the workspace, but it failed: {why}\n")),
        None => text.push_str(&format!("- I listed the workspace. {}.\n", describe_listing(listing))),
    }
    match read_sentence(progress) {
        Some(sentence) => text.push_str(&format!("- {sentence}\n")),
        None if pick_file(listing).is_none() => text.push_str("- There was no file to read.\n"),
        None => text.push_str("- I had no tool to read files with.\n"),
    }
    match &progress.write {
        Some(step) => match step.failure() {
            // The runtime notes a person's edit of the arguments before the tool's output.
            None if step.output().is_some_and(|c| c.starts_with("(A person changed")) => text.push_str(&format!(
                "- I meant to write a summary to `{DEMO_FILE}`, but the user changed the call first; it reported: {}\n",
                step.output().map(|c| first_line(c.lines().last().unwrap_or_default())).unwrap_or_default()
            )),
            None => text.push_str(&format!("- I wrote a summary to `{DEMO_FILE}`.\n")),
            Some(why) => text.push_str(&format!("- I could not write `{DEMO_FILE}`: {why}\n")),
        },
        None => text.push_str(&format!("- I had no tool to write files with, so I did not write `{DEMO_FILE}`.\n")),
    }
    text.push_str(
        "\nI'm the offline demo model, so these steps were scripted; set ANTHROPIC_API_KEY, \
         OPENAI_API_KEY or GEMINI_API_KEY (or pass --model provider/model) for an agent that \
         works on your task.\n",
    );
    text
}

/// The first line of `text`, shortened.
fn first_line(text: &str) -> String {
    truncate(text.lines().next().unwrap_or_default().trim(), 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::ToolSpec;

    fn tool(name: &str) -> ToolSpec {
        ToolSpec::new(name, "", json!({"type": "object"}))
    }

    fn request(tools: &[&str], messages: Vec<Message>) -> ModelRequest {
        let mut request = ModelRequest::new("demo");
        request.tools = tools.iter().map(|t| tool(t)).collect();
        request.messages = messages;
        request
    }

    /// The reply's one tool call.
    fn call(reply: &DemoReply) -> (String, String, Value) {
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
        reply
            .blocks
            .iter()
            .find_map(|b| match b {
                DemoBlock::ToolCall { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
                DemoBlock::Text(_) => None,
            })
            .expect("a tool call")
    }

    fn text(reply: &DemoReply) -> String {
        reply
            .blocks
            .iter()
            .filter_map(|b| match b {
                DemoBlock::Text(t) => Some(t.as_str()),
                DemoBlock::ToolCall { .. } => None,
            })
            .collect()
    }

    /// Plays the script against `results`, answering each call with the result the
    /// closure gives, until it answers; returns the calls made and the answer.
    fn play(tools: &[&str], mut result: impl FnMut(&str, &Value) -> (String, bool)) -> (Vec<(String, Value)>, String) {
        let mut messages = vec![Message::user("Summarise this repository")];
        let mut calls = Vec::new();
        for _ in 0..10 {
            let reply = reply(&request(tools, messages.clone())).expect("the script runs");
            if reply.stop_reason == StopReason::EndTurn {
                return (calls, text(&reply));
            }
            let (id, name, input) = call(&reply);
            let (content, is_error) = result(&name, &input);
            messages.push(Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::text(text(&reply)),
                    ContentBlock::tool_use(id.as_str(), name.as_str(), input.clone()),
                ],
            ));
            let block =
                if is_error { ContentBlock::tool_error(id, content) } else { ContentBlock::tool_result(id, content) };
            messages.push(Message::new(Role::User, vec![block]));
            calls.push((name, input));
        }
        panic!("the script never answered: {calls:?}")
    }

    const ALL: &[&str] = &["fs.read", "fs.write", "fs.list", "shell"];

    #[test]
    fn lists_reads_the_readme_writes_a_summary_then_answers() {
        let (calls, answer) = play(ALL, |name, _| match name {
            "fs.list" => ("Cargo.toml\nREADME.md\nsrc/\nlink@\n".to_owned(), false),
            "fs.read" => ("     1\t# Widget\n     2\t\n     3\tA widget.\n".to_owned(), false),
            _ => ("Created `TROUPE_DEMO.md` (200 bytes).".to_owned(), false),
        });
        let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fs.list", "fs.read", "fs.write"]);
        assert_eq!(calls[0].1, json!({"path": "."}));
        assert_eq!(calls[1].1, json!({"path": "README.md"}), "the README is preferred to Cargo.toml");
        assert_eq!(calls[2].1["path"], DEMO_FILE);
        let content = calls[2].1["content"].as_str().expect("content is text");
        assert!(content.contains("Cargo.toml, README.md") && content.contains("src/"), "{content}");
        assert!(content.contains("`README.md` (3 lines)") && content.contains("# Widget"), "{content}");
        assert!(content.contains("Summarise this repository"), "{content}");
        assert!(!content.contains("link"), "symbolic links are not files: {content}");
        assert!(answer.contains("I wrote a summary to `TROUPE_DEMO.md`"), "{answer}");
        assert!(answer.contains("# Widget"), "{answer}");
    }

    #[test]
    fn picks_cargo_toml_then_the_first_file_and_never_its_own_summary() {
        let pick = |content: &str| pick_file(&parse_listing(content)).map(str::to_owned);
        assert_eq!(pick("a.txt\nCargo.toml\n").as_deref(), Some("Cargo.toml"));
        assert_eq!(pick("TROUPE_DEMO.md\nb.rs\na.rs\n").as_deref(), Some("b.rs"));
        assert_eq!(pick("readme.txt\nCargo.toml\n").as_deref(), Some("readme.txt"));
        assert_eq!(pick("src/\n(`.` is empty)\n"), None);
    }

    #[test]
    fn an_empty_workspace_skips_reading() {
        let (calls, answer) = play(ALL, |name, _| match name {
            "fs.list" => ("(`.` is empty)\n".to_owned(), false),
            _ => ("Created `TROUPE_DEMO.md` (99 bytes).".to_owned(), false),
        });
        let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fs.list", "fs.write"]);
        assert!(calls[1].1["content"].as_str().is_some_and(|c| c.contains("The workspace is empty")));
        assert!(answer.contains("There was no file to read"), "{answer}");
    }

    #[test]
    fn a_rejected_write_is_acknowledged_not_retried() {
        let (calls, answer) = play(ALL, |name, _| match name {
            "fs.list" => ("README.md\n".to_owned(), false),
            "fs.read" => ("     1\thello\n".to_owned(), false),
            _ => ("The user rejected this tool call: not today. Do not repeat it unchanged.\nMore.".to_owned(), true),
        });
        assert_eq!(calls.len(), 3);
        assert!(
            answer.contains("I could not write `TROUPE_DEMO.md`: The user rejected this tool call: not today."),
            "{answer}"
        );
        assert!(!answer.contains("More") && !answer.contains("Do not repeat"), "the gist of the error: {answer}");
        assert!(!answer.contains("I wrote a summary"), "{answer}");
    }

    #[test]
    fn a_write_a_person_changed_is_reported_as_such() {
        let (_, answer) = play(ALL, |name, _| match name {
            "fs.list" => ("README.md\n".to_owned(), false),
            "fs.read" => ("     1\thello\n".to_owned(), false),
            _ => (
                "(A person changed this call's arguments to {} before it ran.)\nCreated `x.md` (3 bytes).".into(),
                false,
            ),
        });
        assert!(answer.contains("the user changed the call first; it reported: Created `x.md` (3 bytes)."), "{answer}");
        assert!(!answer.contains("I wrote a summary"), "{answer}");
    }

    #[test]
    fn failed_list_and_read_are_reported() {
        let (calls, answer) = play(&["fs.list", "fs.read"], |name, _| match name {
            "fs.list" => ("README.md\n".to_owned(), false),
            _ => ("`README.md` looks like a binary file".to_owned(), true),
        });
        assert_eq!(calls.len(), 2, "no fs.write offered, so no write");
        assert!(answer.contains("I could not read `README.md`: `README.md` looks like a binary file"), "{answer}");
        assert!(answer.contains("I had no tool to write files with"), "{answer}");

        let (calls, answer) = play(ALL, |name, _| match name {
            "fs.list" => ("permission denied".to_owned(), true),
            _ => ("Created `TROUPE_DEMO.md` (9 bytes).".to_owned(), false),
        });
        assert_eq!(calls.len(), 2);
        assert!(answer.contains("it failed: permission denied"), "{answer}");
    }

    #[test]
    fn each_task_starts_the_script_again_with_fresh_call_ids() {
        let mut messages = vec![Message::user("first")];
        let first = reply(&request(ALL, messages.clone())).expect("runs");
        let (id, name, input) = call(&first);
        messages.push(Message::new(Role::Assistant, vec![ContentBlock::tool_use(id.as_str(), name, input)]));
        messages.push(Message::new(Role::User, vec![ContentBlock::tool_result(id.as_str(), "a.rs\n")]));
        messages.push(Message::assistant("Done."));
        messages.push(Message::user("second"));
        let again = reply(&request(ALL, messages)).expect("runs");
        let (next_id, next_name, _) = call(&again);
        assert_eq!(next_name, "fs.list", "a new task starts with a listing");
        assert_ne!(next_id, id, "call ids stay unique across the conversation");
    }

    #[test]
    fn without_fs_list_or_with_tools_forbidden_the_model_chats() {
        assert!(reply(&request(&["fs.read", "fs.write"], vec![Message::user("hi")])).is_none());
        let mut forbidden = request(ALL, vec![Message::user("hi")]);
        forbidden.tool_choice = Some(ToolChoice::None);
        assert!(reply(&forbidden).is_none());
    }
}
