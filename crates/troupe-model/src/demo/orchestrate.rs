//! The demo model as the leader of an orchestrated team: shown its team's roster, it
//! hands each worker the task as that worker's part (as a JSON delegation); shown its
//! team's results, it answers with the first line of each.

use super::{DemoBlock, DemoReply, last_user_text, truncate};
use serde_json::json;
use troupe_core::{ModelRequest, StopReason};

/// How the orchestrated strategy opens its roster, and its results.
const ROSTER: &str = "## Your team\n\nYou lead this team.";
const RESULTS: &str = "## Your team's results";

/// The leader's reply, when the request asks it to delegate or to combine its team's
/// results; `None` otherwise.
pub(super) fn reply(request: &ModelRequest) -> Option<DemoReply> {
    let said = last_user_text(request);
    let text = if let Some((task, results)) = said.split_once(RESULTS) {
        combine(task.trim(), results)
    } else if let Some((task, roster)) = said.split_once(ROSTER) {
        delegate(task.trim(), roster)?
    } else {
        return None;
    };
    Some(DemoReply { blocks: vec![DemoBlock::Text(text)], stop_reason: StopReason::EndTurn })
}

/// A delegation giving every worker of the roster (`- 0: `name`: …` lines) its part.
fn delegate(task: &str, roster: &str) -> Option<String> {
    let workers: Vec<(u64, &str)> = roster
        .lines()
        .filter_map(|line| {
            let (index, rest) = line.strip_prefix("- ")?.split_once(": `")?;
            Some((index.parse().ok()?, rest.split_once('`')?.0))
        })
        .collect();
    if workers.is_empty() {
        return None;
    }
    let plan: Vec<_> = workers
        .iter()
        .map(|(worker, name)| {
            json!({"worker": worker, "task": format!("{task} (your part, as {name}: do what your role covers and report briefly)")})
        })
        .collect();
    let plan = serde_json::to_string_pretty(&plan).ok()?;
    Some(format!("Each of my {} workers takes a part.\n\n```json\n{plan}\n```\n", workers.len()))
}

/// The answer: the first line of each worker's result (`### `name` (worker 0): status`
/// sections), failures said as such.
fn combine(task: &str, results: &str) -> String {
    let task = task.lines().next().unwrap_or_default().trim();
    let mut answer = format!("The team worked on “{}”:\n", truncate(task, 120));
    for section in results.split("\n### `").skip(1) {
        let Some((name, rest)) = section.split_once('`') else { continue };
        let status = rest.lines().next().unwrap_or_default();
        // After the heading, the task line, then the result.
        let body = rest.split_once("\n\nTask: ").and_then(|(_, t)| t.split_once("\n\n")).map_or("", |(_, b)| b);
        let first = body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no result");
        let line = if status.ends_with("failed") { format!("failed: {first}") } else { first.to_owned() };
        answer.push_str(&format!("- {name}: {}\n", truncate(&line, 320)));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::Message;

    #[test]
    fn a_leader_delegates_a_part_to_each_worker_then_combines_their_first_lines() {
        let roster = "Describe it\n\n## Your team\n\nYou lead this team. Split the task…\n\n- 0: `researcher`: finds\n- 1: `writer`: writes\n\nReply with …";
        let planned = reply(&ModelRequest::new("demo").message(Message::user(roster))).expect("a delegation");
        let DemoBlock::Text(text) = &planned.blocks[0] else { panic!("text") };
        let plan = text.split("```json").nth(1).and_then(|t| t.split("```").next()).expect("a json block");
        let plan: serde_json::Value = serde_json::from_str(plan).expect("JSON");
        assert_eq!(plan[1]["worker"], 1);
        assert!(plan[1]["task"].as_str().is_some_and(|t| t.contains("as writer")), "{plan}");

        let results = "Describe it\n\n## Your team's results\n\n### `researcher` (worker 0): completed\n\nTask: x\n\n`README.md` is “Gadget”.\nmore\n\n### `writer` (worker 1): failed\n\nTask: y\n\nError: boom\n\nCombine these results…";
        let answered = reply(&ModelRequest::new("demo").message(Message::user(results))).expect("an answer");
        let DemoBlock::Text(text) = &answered.blocks[0] else { panic!("text") };
        assert!(text.starts_with("The team worked on “Describe it”"), "{text}");
        assert!(
            text.contains("- researcher: `README.md` is “Gadget”.") && text.contains("- writer: failed: Error: boom"),
            "{text}"
        );
    }
}
