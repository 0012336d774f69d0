//! The summarize strategy: an auxiliary model call condenses old units into a summary the
//! task's message carries.
//!
//! The old units are rendered as a plain-text transcript (tool calls and results
//! included, each cut to a bounded size), so the summary request declares no tools and
//! cannot itself break a provider's pairing rules. The summary replaces any earlier one,
//! which is part of what gets summarized.

use super::CompactionContext;
use super::policy::AuxiliaryUsage;
use super::strategies::{Layout, parse_removed_note};
use std::fmt::Write as _;
use troupe_core::{ContentBlock, Message, ModelRequest, Role};
use troupe_model::ResolvedModel;

/// What the summary text block starts with, in the task's message.
pub const SUMMARY_PREFIX: &str = "Summary of earlier conversation: ";

/// The system instruction of the summary call.
pub const SUMMARY_INSTRUCTION: &str = "You condense the earlier part of an AI agent's conversation so the agent \
can continue its task without it. Keep what the agent will need: decisions made, facts learned (file names, paths, \
identifiers, numbers, commands, errors and how they were fixed), what was tried and failed, the state of the work \
and what remains to do. Be concise and factual, invent nothing, and answer with the summary only.";

/// The most characters of one tool call's arguments or result in the transcript: a
/// summary needs what an output said, not all of it.
const BLOCK_CHARS: usize = 2_000;

/// The window assumed for a summary model whose window is unknown.
const FALLBACK_WINDOW: usize = 128_000;

/// What one summary attempt came to.
#[derive(Debug, Default)]
pub(crate) struct Summarized {
    /// Whether `messages` changed.
    pub(crate) changed: bool,
    /// The call made, if one was.
    pub(crate) call: Option<AuxiliaryUsage>,
    /// Why no summary was applied, if one should have been.
    pub(crate) failure: Option<String>,
    /// The run was cancelled during the call.
    pub(crate) cancelled: bool,
}

/// Replaces the units before the last `keep_recent` (at least one) by a summary written by
/// `model` (the context's model when `None`), in at most `max_tokens` tokens.
pub(crate) async fn summarize(
    messages: &mut Vec<Message>,
    context: &CompactionContext<'_>,
    model: Option<&str>,
    max_tokens: u32,
    keep_recent: usize,
) -> Summarized {
    let Some(layout) = Layout::of(messages) else { return Summarized::default() };
    let Some((cut, _)) = layout.cut(keep_recent) else { return Summarized::default() };
    let resolved = match model {
        None => context.model.clone(),
        Some(id) => match context.resolver.resolve(id) {
            Ok(resolved) => resolved,
            Err(error) => {
                return Summarized { failure: Some(format!("summary model `{id}`: {error}")), ..Summarized::default() };
            }
        },
    };
    let window = resolved.info.as_ref().map_or(FALLBACK_WINDOW, |i| i.context_window as usize);
    // Half the summary model's window, at four bytes a token, leaves room for its answer.
    let transcript = transcript(&messages[layout.head - 1], &messages[layout.head..cut], window.saturating_mul(2));
    let request = ModelRequest {
        model: resolved.model.clone(),
        system: Some(SUMMARY_INSTRUCTION.to_owned()),
        messages: vec![Message::user(transcript)],
        max_tokens: Some(max_tokens.max(1)),
        ..ModelRequest::default()
    };
    let response = resolved.provider.complete(&request, context.cancel.child_token()).await;
    if context.cancel.is_cancelled() || matches!(response, Err(troupe_model::Error::Cancelled)) {
        return Summarized { cancelled: true, ..Summarized::default() };
    }
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            return Summarized { failure: Some(format!("summary call failed: {error}")), ..Summarized::default() };
        }
    };
    let call = Some(auxiliary(&resolved, response.usage));
    let summary = response.message.text();
    let summary = summary.trim();
    if summary.is_empty() {
        return Summarized {
            call,
            failure: Some("the summary model answered no text".to_owned()),
            ..Summarized::default()
        };
    }
    messages.drain(layout.head..cut);
    let task = &mut messages[layout.head - 1];
    task.content.retain(|b| !b.as_text().is_some_and(|t| t.starts_with(SUMMARY_PREFIX)));
    // The summary goes before a removed-turns note, so the note stays last and the
    // message reads in order: task, what happened, what was lost.
    let at = task.content.iter().position(|b| b.as_text().and_then(parse_removed_note).is_some());
    let block = ContentBlock::text(format!("{SUMMARY_PREFIX}{summary}"));
    match at {
        Some(at) => task.content.insert(at, block),
        None => task.content.push(block),
    }
    Summarized { changed: true, call, ..Summarized::default() }
}

fn auxiliary(model: &ResolvedModel, usage: troupe_core::Usage) -> AuxiliaryUsage {
    AuxiliaryUsage { model: model.id.clone(), usage, cost_usd: model.cost(&usage) }
}

/// The summary request's text: the task and any earlier summary for context, then the
/// old units, newest kept when they exceed `budget` bytes.
fn transcript(task: &Message, old: &[Message], budget: usize) -> String {
    let mut context = String::from("The agent's task:\n");
    let mut earlier = None;
    for block in &task.content {
        match block.as_text() {
            Some(text) if text.starts_with(SUMMARY_PREFIX) => earlier = Some(&text[SUMMARY_PREFIX.len()..]),
            Some(text) if parse_removed_note(text).is_some() => {}
            Some(text) => push_capped(&mut context, text, BLOCK_CHARS * 2),
            None => {}
        }
    }
    if let Some(earlier) = earlier {
        context.push_str("\n\nSummary of what came before the turns below:\n");
        context.push_str(earlier);
    }
    let mut turns: Vec<String> = old.iter().map(render).collect();
    let mut size: usize = context.len() + turns.iter().map(String::len).sum::<usize>();
    let mut omitted = 0;
    while size > budget && turns.len() > 1 {
        size -= turns.remove(0).len();
        omitted += 1;
    }
    let mut out = context;
    out.push_str("\n\nThe turns to summarize:\n");
    if omitted > 0 {
        let _ = writeln!(out, "({omitted} older messages omitted for length)");
    }
    for turn in &turns {
        out.push_str(turn);
    }
    out.push_str("\nWrite the summary now.");
    out
}

/// One message as transcript lines.
fn render(message: &Message) -> String {
    let who = match message.role {
        Role::User => "User",
        Role::Assistant => "Assistant",
    };
    let mut out = String::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => {
                let _ = write!(out, "\n[{who}] ");
                push_capped(&mut out, text, BLOCK_CHARS * 2);
            }
            ContentBlock::ToolUse { id, name, input, .. } => {
                let _ = write!(out, "\n[{who} called `{name}` ({id})] ");
                push_capped(&mut out, &input.to_string(), BLOCK_CHARS);
            }
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                let status = if *is_error { "error" } else { "result" };
                let _ = write!(out, "\n[Tool {status} for {tool_use_id}] ");
                push_capped(&mut out, content, BLOCK_CHARS);
            }
            ContentBlock::Image { .. } => {
                let _ = write!(out, "\n[{who} sent an image]");
            }
            ContentBlock::Document { name, .. } => {
                let _ = write!(out, "\n[{who} sent a document: {}]", name.as_deref().unwrap_or("a PDF"));
            }
            // Reasoning is the model's scratch work; its conclusions are in the text.
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
        }
    }
    out
}

/// Appends `text`, cut to `max` characters with a mark.
fn push_capped(out: &mut String, text: &str, max: usize) {
    match text.char_indices().nth(max) {
        None => out.push_str(text),
        Some((at, _)) => {
            out.push_str(&text[..at]);
            let _ = write!(out, " …[{} more chars]", text[at..].chars().count());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::strategies::removed_note;
    use crate::compaction::strategies::tests::{check_kept, conversation, pairing_errors};
    use crate::compaction::test_support::{Fixture, tool_loop};
    use proptest::prelude::*;
    use troupe_core::Usage;
    use troupe_testkit::MockTurn;

    fn summary_turn(text: &str) -> MockTurn {
        MockTurn::text(text).with_usage(Usage { input_tokens: 700, output_tokens: 30, ..Usage::default() })
    }

    #[tokio::test]
    async fn old_units_become_one_summary_in_the_task_message() {
        let fixture = Fixture::new(10_000);
        fixture.scripted.push(summary_turn("probed four times; all fine"));
        let mut messages = tool_loop(4, 50);
        let kept = messages[5..].to_vec();
        let done = summarize(&mut messages, &fixture.context(), None, 300, 2).await;
        assert!(done.changed && done.failure.is_none() && !done.cancelled, "{done:?}");
        assert_eq!(messages.len(), 1 + 4);
        assert_eq!(messages[1..], kept[..], "the recent units are kept verbatim");
        assert_eq!(messages[0].content[0].as_text(), Some("the task"));
        assert_eq!(
            messages[0].content[1].as_text(),
            Some("Summary of earlier conversation: probed four times; all fine")
        );
        let call = done.call.expect("the call is reported");
        assert_eq!((call.model.as_str(), call.usage.input_tokens), ("scripted/small", 700));
        assert!(call.cost_usd.is_some_and(|c| c > 0.0), "priced by the model's entry");
        let requests = fixture.scripted.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.system.as_deref(), Some(SUMMARY_INSTRUCTION));
        assert_eq!((request.model.as_str(), request.max_tokens, request.tools.len()), ("small", Some(300), 0));
        let text = request.messages[0].text();
        assert!(text.contains("the task") && text.contains("called `probe` (c0)") && text.contains("(c1)"), "{text}");
        assert!(!text.contains("(c2)"), "kept units are not summarized: {text}");
    }

    #[tokio::test]
    async fn a_second_summary_folds_in_the_first_and_keeps_the_note_last() {
        let fixture = Fixture::new(10_000);
        fixture.scripted.push(summary_turn("first summary"));
        fixture.scripted.push(summary_turn("second summary"));
        let mut messages = tool_loop(3, 10);
        messages[0].content.push(ContentBlock::text(removed_note(7)));
        assert!(summarize(&mut messages, &fixture.context(), None, 100, 1).await.changed);
        messages.extend(tool_loop(2, 10).into_iter().skip(1));
        assert!(summarize(&mut messages, &fixture.context(), None, 100, 1).await.changed);
        let texts: Vec<_> = messages[0].content.iter().filter_map(ContentBlock::as_text).collect();
        assert_eq!(texts, ["the task", "Summary of earlier conversation: second summary", &removed_note(7)]);
        let second = fixture.scripted.requests()[1].messages[0].text();
        assert!(second.contains("first summary"), "{second}");
        assert_eq!(pairing_errors(&messages), Vec::<String>::new());
    }

    #[tokio::test]
    async fn failures_leave_the_conversation_alone() {
        let fixture = Fixture::new(10_000);
        let mut messages = tool_loop(4, 10);
        let before = messages.clone();
        // No scripted turn left: the provider fails.
        let failed = summarize(&mut messages, &fixture.context(), None, 100, 1).await;
        assert!(!failed.changed && failed.failure.is_some() && failed.call.is_none());
        fixture.scripted.push(summary_turn("   "));
        let empty = summarize(&mut messages, &fixture.context(), None, 100, 1).await;
        assert!(!empty.changed && empty.call.is_some(), "an empty answer still cost tokens");
        fixture.cancel.cancel();
        fixture.scripted.push(summary_turn("late"));
        let cancelled = summarize(&mut messages, &fixture.context(), None, 100, 1).await;
        assert!(cancelled.cancelled && !cancelled.changed);
        assert_eq!(messages, before);
        assert_eq!(summarize(&mut messages, &fixture.context(), None, 100, 9).await.call, None, "nothing old");
    }

    #[test]
    fn the_transcript_keeps_the_newest_turns_within_its_budget() {
        let messages = tool_loop(20, 500);
        let text = transcript(&messages[0], &messages[1..], 4_000);
        assert!(text.len() < 4_000 + 1_200, "{}", text.len());
        assert!(text.contains("older messages omitted"));
        assert!(text.contains("(c19)") && !text.contains("(c0)"));
        let long = tool_loop(1, 10_000);
        let capped = transcript(&long[0], &long[1..], 100_000);
        assert!(capped.contains("…[8000 more chars]"), "results are cut");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn summarizing_keeps_pairs_and_the_task(messages in conversation(), keep in 0usize..4) {
            let fixture = Fixture::new(10_000);
            fixture.scripted.push(summary_turn("a summary"));
            let mut after = messages.clone();
            let done = futures::executor::block_on(summarize(&mut after, &fixture.context(), None, 100, keep));
            check_kept(&messages, &after, keep)?;
            let units = Layout::of(&messages).map_or(0, |l| l.units.len());
            prop_assert_eq!(done.changed, units > keep.max(1));
        }
    }
}
