//! One line per evidence entry, for `troupe runs events`.

use crate::render::{first_line, shorten};
use crate::store::rfc3339;
use serde_json::Value;
use troupe::runtime::durable::{ActionCompleted, ActionStarted, ModelTurn};
use troupe::store::{EvidenceEntry, EvidenceKind};

/// `   3  2025-01-01T00:00:00.000Z  action_started    toolu_1  fs.write (non_idempotent)`.
pub(crate) fn line(entry: &EvidenceEntry) -> String {
    format!(
        "{:>4}  {}  {:<16}  {:<10}  {}",
        entry.seq,
        rfc3339(entry.recorded_at),
        entry.kind.as_str(),
        entry.call_id.as_deref().unwrap_or("-"),
        summary(entry.kind, &entry.payload)
    )
}

/// What an entry of `kind` says, in a few words.
pub(crate) fn summary(kind: EvidenceKind, payload: &Value) -> String {
    let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let known = match kind {
        EvidenceKind::RunStarted => {
            Some(format!("{} on {}: {}", text("agent"), text("model"), shorten(&text("instruction"), 80)))
        }
        EvidenceKind::ModelTurn => {
            serde_json::from_value::<ModelTurn>(payload.clone()).ok().map(|turn| model_turn(&turn))
        }
        EvidenceKind::ActionStarted => serde_json::from_value::<ActionStarted>(payload.clone()).ok().map(|started| {
            let idempotency = serde_json::to_value(started.idempotency)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{} ({idempotency})", started.tool)
        }),
        EvidenceKind::ActionCompleted => {
            serde_json::from_value::<ActionCompleted>(payload.clone()).ok().map(|done| action_completed(&done))
        }
        EvidenceKind::ApprovalWait => Some(format!("{}: {}", text("tool"), first_line(&text("reason"), 100))),
        EvidenceKind::SignalApplied => {
            let applied = payload.get("applied").and_then(Value::as_bool).unwrap_or(true);
            let seq = payload.get("seq").and_then(Value::as_i64).unwrap_or_default();
            let why = match (applied, payload.get("refused").and_then(Value::as_str)) {
                (true, _) => String::new(),
                (false, Some(why)) => format!(": refused, {}", first_line(why, 100)),
                (false, None) => ": unreadable, skipped".to_owned(),
            };
            Some(format!("signal {seq} ({}){why}", text("kind")))
        }
        EvidenceKind::ResumePlanned => payload.get("calls").and_then(Value::as_array).map(|calls| {
            let plans: Vec<String> = calls
                .iter()
                .map(|c| {
                    let field = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or("?").to_owned();
                    let action = c.get("resume").and_then(|r| r.get("action")).and_then(Value::as_str).unwrap_or("?");
                    format!("{} {} → {action}", field("call_id"), field("tool"))
                })
                .collect();
            format!("by {}: {}", text("owner"), plans.join(", "))
        }),
        EvidenceKind::RunFinished => payload.get("outcome").map(|outcome| {
            let kind = outcome.get("type").and_then(Value::as_str).unwrap_or("?");
            let cost = payload.get("cost_usd").and_then(Value::as_f64).unwrap_or_default();
            format!("{kind} (${cost:.4})")
        }),
        _ => None,
    };
    known.unwrap_or_else(|| shorten(&payload.to_string(), 100))
}

fn model_turn(turn: &ModelTurn) -> String {
    let calls: Vec<&str> = turn.message.tool_uses().map(|(_, name, _)| name).collect();
    let said = match (calls.is_empty(), first_line(&turn.message.text(), 60)) {
        (false, _) => format!("calls {}", calls.join(", ")),
        (true, text) if text.is_empty() => "no text".to_owned(),
        (true, text) => format!("“{text}”"),
    };
    format!(
        "#{} {}: {said} (in {} · out {} tokens)",
        turn.iteration,
        turn.model,
        turn.usage.total_input(),
        turn.usage.output_tokens
    )
}

fn action_completed(done: &ActionCompleted) -> String {
    let verdict = if done.is_error { "error" } else { "ok" };
    match &done.content {
        Some(content) => format!("{} {verdict}: {}", done.tool, first_line(content, 80)),
        None => format!("{} {verdict} ({} chars, not kept)", done.tool, done.content_chars),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_are_summarised_by_kind() {
        let started = json!({"agent": "troupe", "model": "demo", "instruction": "Summarise"});
        assert_eq!(summary(EvidenceKind::RunStarted, &started), "troupe on demo: Summarise");
        let wait = json!({"tool": "fs.write", "reason": "`fs.write` may have an effect"});
        assert_eq!(summary(EvidenceKind::ApprovalWait, &wait), "fs.write: `fs.write` may have an effect");
        let signal = json!({"seq": 2, "kind": "approval", "applied": true});
        assert_eq!(summary(EvidenceKind::SignalApplied, &signal), "signal 2 (approval)");
        let done = json!({"tool": "fs.write", "is_error": false, "capture": "structured", "content": "Created `a` (2 bytes).", "content_chars": 22});
        assert_eq!(summary(EvidenceKind::ActionCompleted, &done), "fs.write ok: Created `a` (2 bytes).");
        let finished = json!({"outcome": {"type": "completed", "output": "done"}, "cost_usd": 0.5});
        assert_eq!(summary(EvidenceKind::RunFinished, &finished), "completed ($0.5000)");
        assert_eq!(summary(EvidenceKind::Correction, &json!({"x": 1})), r#"{"x":1}"#);
    }
}
