//! The conversation's units, and the strategies that remove or trim whole units.
//!
//! A conversation is laid out as its *head* (everything through the first user message:
//! the task) and *units*: an assistant message with every user message after it, up to the
//! next assistant message. Tool results answer the calls of the message right before
//! them, so a unit holds each tool call together with its results, and removing whole
//! units from the front keeps the roles alternating and every call answered.

use std::ops::Range;
use troupe_core::{ContentBlock, Message, Role};

/// How a note about removed turns ends; it starts with `[` and their number.
pub const REMOVED_NOTE_SUFFIX: &str = " earlier turns were removed to fit the context window]";

/// What precedes the count of characters cut from a trimmed tool result.
pub const TRIMMED_NOTE_PREFIX: &str = "\n[trimmed ";

const TRIMMED_NOTE_SUFFIX: &str = " chars]";

/// The fewest bytes a trim must save: smaller cuts are not worth changing a result for
/// (and breaking a provider's prompt cache at it).
const MIN_TRIM_SAVING: usize = 64;

/// Where the head ends and each unit lies, as message index ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Messages `..head` are the head; `head - 1` is the first user message.
    pub(crate) head: usize,
    /// The units, in order, covering `head..` without gaps.
    pub(crate) units: Vec<Range<usize>>,
}

impl Layout {
    /// The layout of `messages`; `None` without a user message (nothing is safe to keep
    /// as the task).
    pub(crate) fn of(messages: &[Message]) -> Option<Layout> {
        let head = messages.iter().position(|m| m.role == Role::User)? + 1;
        let mut units = Vec::new();
        let mut start = head;
        for (i, message) in messages.iter().enumerate().skip(head + 1) {
            if message.role == Role::Assistant {
                units.push(start..i);
                start = i;
            }
        }
        if start < messages.len() {
            units.push(start..messages.len());
        }
        Some(Layout { head, units })
    }

    /// Where the last `keep` units (at least one) begin, and how many units come before;
    /// `None` when there is nothing before them.
    pub(crate) fn cut(&self, keep: usize) -> Option<(usize, usize)> {
        let keep = keep.max(1);
        let older = self.units.len().checked_sub(keep).filter(|n| *n > 0)?;
        Some((self.units[older].start, older))
    }
}

/// Keeps the task and the last `n` units (at least one); the task's message gets a note
/// counting the turns removed, this time and before.
pub(crate) fn keep_recent(messages: &mut Vec<Message>, n: usize) -> bool {
    let Some(layout) = Layout::of(messages) else { return false };
    let Some((cut, removed)) = layout.cut(n) else { return false };
    messages.drain(layout.head..cut);
    let task = &mut messages[layout.head - 1];
    let earlier = take_removed_note(task);
    task.content.push(ContentBlock::text(removed_note(earlier + removed)));
    true
}

/// Cuts every tool result outside the last `keep_recent` units (at least one) to
/// `keep_chars` characters, noting how many were cut.
pub(crate) fn trim_tool_results(messages: &mut [Message], keep_chars: usize, keep_recent: usize) -> bool {
    let Some(layout) = Layout::of(messages) else { return false };
    let Some((cut, _)) = layout.cut(keep_recent) else { return false };
    let mut changed = false;
    for message in &mut messages[layout.head..cut] {
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block {
                changed |= trim(content, keep_chars);
            }
        }
    }
    changed
}

/// The note for `n` removed turns.
pub(crate) fn removed_note(n: usize) -> String {
    format!("[{n}{REMOVED_NOTE_SUFFIX}")
}

/// The count of a removed-turns note.
pub(crate) fn parse_removed_note(text: &str) -> Option<usize> {
    text.strip_prefix('[')?.strip_suffix(REMOVED_NOTE_SUFFIX)?.parse().ok()
}

/// Removes the removed-turns note of `message`, returning its count (0 without one).
fn take_removed_note(message: &mut Message) -> usize {
    let mut count = 0;
    message.content.retain(|block| match block.as_text().and_then(parse_removed_note) {
        Some(n) => {
            count += n;
            false
        }
        None => true,
    });
    count
}

/// Cuts `content` to `keep_chars` characters plus a note; a result trimmed before keeps
/// counting what was cut. Leaves `content` alone unless that saves at least
/// [`MIN_TRIM_SAVING`] bytes.
fn trim(content: &mut String, keep_chars: usize) -> bool {
    let (body, cut_before) = split_trim_note(content);
    let Some((at, _)) = body.char_indices().nth(keep_chars) else { return false };
    let cut = body[at..].chars().count() + cut_before;
    let trimmed = format!("{}{TRIMMED_NOTE_PREFIX}{cut}{TRIMMED_NOTE_SUFFIX}", &body[..at]);
    if trimmed.len() + MIN_TRIM_SAVING > content.len() {
        return false;
    }
    *content = trimmed;
    true
}

/// A trimmed result's kept text and the count its note gives (0 when untrimmed).
fn split_trim_note(content: &str) -> (&str, usize) {
    let Some(at) = content.rfind(TRIMMED_NOTE_PREFIX) else { return (content, 0) };
    let count =
        content[at + TRIMMED_NOTE_PREFIX.len()..].strip_suffix(TRIMMED_NOTE_SUFFIX).and_then(|n| n.parse().ok());
    match count {
        Some(count) => (&content[..at], count),
        None => (content, 0),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::compaction::TokenEstimator;
    use crate::compaction::test_support::tool_loop;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// Every way `messages` breaks the pairing of tool calls and results: a call whose
    /// result is not in the next message, a result whose call is not in the previous one.
    pub(crate) fn pairing_errors(messages: &[Message]) -> Vec<String> {
        let uses = |m: &Message| -> BTreeSet<String> { m.tool_uses().map(|(id, _, _)| id.to_string()).collect() };
        let results = |m: &Message| -> BTreeSet<String> {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.to_string()),
                    _ => None,
                })
                .collect()
        };
        let mut errors = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let answered = messages.get(i + 1).map(results).unwrap_or_default();
            for id in uses(message).difference(&answered) {
                errors.push(format!("message {i}: call {id} has no result in the next message"));
            }
            let asked = i.checked_sub(1).map(|p| uses(&messages[p])).unwrap_or_default();
            for id in results(message).difference(&asked) {
                errors.push(format!("message {i}: result {id} has no call in the previous message"));
            }
        }
        errors
    }

    /// A random conversation: the task, then units of an assistant turn calling up to
    /// three tools (or answering) and the user message answering it.
    pub(crate) fn conversation() -> impl Strategy<Value = Vec<Message>> {
        let unit = (0usize..4, 0usize..600, any::<bool>(), any::<bool>());
        (prop::collection::vec(unit, 0..12), any::<bool>()).prop_map(|(units, open_tail)| {
            let mut messages = vec![Message::user("the task")];
            for (u, (calls, size, text, steer)) in units.iter().enumerate() {
                let mut asked = Vec::new();
                if *text || *calls == 0 {
                    asked.push(ContentBlock::text(format!("thinking about step {u}")));
                }
                let mut answers = Vec::new();
                for c in 0..*calls {
                    let id = format!("u{u}c{c}");
                    asked.push(ContentBlock::tool_use(id.clone(), "probe", json!({"q": "y".repeat(*size / 4)})));
                    answers.push(ContentBlock::tool_result(id, "r".repeat(*size)));
                }
                if *steer || *calls == 0 {
                    answers.push(ContentBlock::text(format!("user says {u}")));
                }
                messages.push(Message::new(Role::Assistant, asked));
                messages.push(Message::new(Role::User, answers));
            }
            if open_tail && messages.len() > 1 {
                messages.push(Message::assistant("an answer"));
            }
            messages
        })
    }

    /// What every strategy keeps: the pairing, the task (as a prefix of the first
    /// message), the alternation of roles, and the last `kept` units verbatim.
    pub(crate) fn check_kept(before: &[Message], after: &[Message], kept: usize) -> Result<(), TestCaseError> {
        prop_assert_eq!(pairing_errors(after), Vec::<String>::new());
        prop_assert!(after[0].content.starts_with(&before[0].content), "the task is kept");
        for pair in after.windows(2) {
            prop_assert_ne!(pair[0].role, pair[1].role, "roles alternate");
        }
        let (Some(old), Some(new)) = (Layout::of(before), Layout::of(after)) else {
            return Err(TestCaseError::fail("both have a task"));
        };
        let kept = kept.max(1).min(old.units.len());
        let tail = |m: &[Message], l: &Layout| {
            l.units.iter().rev().take(kept).map(|r| m[r.clone()].to_vec()).collect::<Vec<_>>()
        };
        prop_assert_eq!(tail(before, &old), tail(after, &new), "the recent units are kept verbatim");
        Ok(())
    }

    #[test]
    fn units_pair_each_call_with_its_results() {
        let mut messages = tool_loop(3, 10);
        messages.push(Message::assistant("done"));
        let layout = Layout::of(&messages).expect("has a task");
        assert_eq!(layout.head, 1);
        assert_eq!(layout.units, vec![1..3, 3..5, 5..7, 7..8]);
        assert_eq!(layout.cut(2), Some((5, 2)));
        assert_eq!(layout.cut(4), None, "nothing before the kept units");
        assert_eq!(layout.cut(0), Some((7, 3)), "the most recent unit is always kept");
        assert_eq!(Layout::of(&[Message::assistant("no task")]), None);
    }

    #[test]
    fn keep_recent_notes_the_count_across_compactions() {
        let mut messages = tool_loop(6, 10);
        assert!(keep_recent(&mut messages, 4));
        assert_eq!(messages.len(), 1 + 8);
        assert_eq!(messages[0].content[1].as_text(), Some("[2 earlier turns were removed to fit the context window]"));
        assert!(keep_recent(&mut messages, 1));
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].content.len(), 2, "one note, updated");
        assert_eq!(messages[0].content[1].as_text().and_then(parse_removed_note), Some(5));
        assert!(!keep_recent(&mut messages, 1), "nothing left to remove");
        assert_eq!(pairing_errors(&messages), Vec::<String>::new());
    }

    #[test]
    fn trimming_cuts_old_results_and_counts_across_trims() {
        let mut messages = tool_loop(3, 1_000);
        assert!(trim_tool_results(&mut messages, 100, 1));
        let result = |m: &Message| match &m.content[0] {
            ContentBlock::ToolResult { content, .. } => content.clone(),
            other => panic!("not a result: {other:?}"),
        };
        assert_eq!(result(&messages[2]), format!("{}\n[trimmed 900 chars]", "x".repeat(100)));
        assert_eq!(result(&messages[6]).len(), 1_000, "the last unit is kept");
        assert!(trim_tool_results(&mut messages, 20, 1));
        assert_eq!(result(&messages[4]), format!("{}\n[trimmed 980 chars]", "x".repeat(20)));
        assert!(!trim_tool_results(&mut messages, 20, 1), "already as short as asked");
        assert!(!trim_tool_results(&mut messages, 5, 1), "a cut saving a few bytes is not made");
    }

    #[test]
    fn trimming_respects_character_boundaries_and_never_grows() {
        let mut text = "é".repeat(100);
        assert!(trim(&mut text, 10));
        assert!(text.starts_with(&"é".repeat(10)));
        assert!(text.ends_with("\n[trimmed 90 chars]"));
        let mut short = "abcdef".to_owned();
        assert!(!trim(&mut short, 3), "the note would be longer than the cut");
        let mut slight = "s".repeat(200);
        assert!(!trim(&mut slight, 150), "saving 31 bytes is not worth it");
        assert_eq!(short, "abcdef");
        let mut fake = "output\n[trimmed many chars]".to_owned();
        assert_eq!(split_trim_note(&fake), (fake.as_str(), 0), "only a well-formed note counts");
        assert!(!trim(&mut fake, 100));
    }

    proptest! {
        #[test]
        fn keep_recent_keeps_pairs_and_the_task(messages in conversation(), n in 0usize..6) {
            let mut after = messages.clone();
            let changed = keep_recent(&mut after, n);
            check_kept(&messages, &after, n)?;
            let units = Layout::of(&messages).map_or(0, |l| l.units.len());
            prop_assert_eq!(changed, units > n.max(1));
            let estimator = TokenEstimator::new();
            if changed {
                prop_assert!(after.len() < messages.len());
                prop_assert!(estimator.conversation(&after) <= estimator.conversation(&messages) + 20);
            }
        }

        #[test]
        fn trimming_keeps_pairs_and_never_grows(messages in conversation(), keep_chars in 0usize..300, k in 0usize..4) {
            let mut after = messages.clone();
            let changed = trim_tool_results(&mut after, keep_chars, k);
            check_kept(&messages, &after, k)?;
            prop_assert_eq!(after.len(), messages.len(), "no message is removed");
            prop_assert_eq!(after[0].clone(), messages[0].clone());
            let estimator = TokenEstimator::new();
            if changed {
                prop_assert!(estimator.conversation(&after) < estimator.conversation(&messages));
            } else {
                prop_assert_eq!(after, messages);
            }
        }
    }
}
