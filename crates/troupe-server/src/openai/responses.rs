//! `POST /v1/responses`: a run of the agent named as `model`, answered as a Responses API
//! `response`, or streamed as its events (`response.created`, `response.output_text.delta`,
//! …, `response.completed`).

use super::error::OpenAiError;
use super::input::{Said, content_text, run_input, target};
use super::progress::{Heard, collect, failure, heard, run_header, start, troupe_field, waiting_note};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::pin::Pin;
use troupe_core::{RunOutcomeKind, Usage, now_ms};

/// The body of a Responses request; what troupe does not use is left unread.
#[derive(Deserialize)]
struct ResponsesRequest {
    model: String,
    input: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    stream: bool,
}

/// The conversation of `input`: a string (one user message) or a list of messages.
fn conversation(input: &Value) -> Result<Vec<Said>, OpenAiError> {
    match input {
        Value::String(text) => Ok(vec![Said { role: "user".to_owned(), text: text.clone() }]),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
                let role = item.get("role").and_then(Value::as_str);
                match (kind, role) {
                    ("message", Some(role)) => Ok(Said {
                        role: role.to_owned(),
                        text: content_text(item.get("content").unwrap_or(&Value::Null), "input")?,
                    }),
                    _ => Err(OpenAiError::invalid(
                        format!("an input item of type `{kind}` is not taken here: send messages"),
                        Some("input"),
                    )),
                }
            })
            .collect(),
        _ => Err(OpenAiError::invalid("`input` must be a string or a list of messages", Some("input"))),
    }
}

/// A response object in the state `status`, with `text` as its one message's text.
struct Shape {
    id: String,
    message_id: String,
    created_at: u64,
    model: String,
}

impl Shape {
    fn part(text: &str) -> Value {
        json!({"type": "output_text", "text": text, "annotations": []})
    }

    fn message(&self, text: &str, status: &str) -> Value {
        json!({
            "type": "message",
            "id": self.message_id,
            "status": status,
            "role": "assistant",
            "content": [Shape::part(text)],
        })
    }

    fn response(&self, status: &str, output: Vec<Value>, usage: Option<&Usage>) -> Value {
        let usage = usage.map(|u| {
            json!({
                "input_tokens": u.input_tokens,
                "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
                "total_tokens": u.input_tokens.saturating_add(u.output_tokens),
            })
        });
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
            "error": null,
            "incomplete_details": null,
            "instructions": null,
            "metadata": {},
            "parallel_tool_calls": false,
            "temperature": null,
            "tool_choice": "auto",
            "tools": [],
            "top_p": null,
        })
    }
}

pub(super) async fn create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let request: ResponsesRequest = state.parse(body).map_err(|e| OpenAiError::invalid(e.message, None))?;
    let name = target(&state, &request.model)?;
    let input = run_input(conversation(&request.input)?, request.instructions.as_deref(), "input")?;
    let run = start(&state, &name, input)?;
    let shape = Shape {
        id: format!("resp_{}", run.run_id()),
        message_id: format!("msg_{}", run.run_id()),
        created_at: now_ms() / 1000,
        model: name,
    };
    let header = run_header(&run);
    let heard: Pin<Box<dyn futures::Stream<Item = Heard> + Send>> = Box::pin(heard(&run, state.closing.child_token()));
    if !request.stream {
        let collected = collect(&run, heard).await?;
        let status = collected.end.as_ref().map_or("completed", |end| status_of(end.outcome));
        let used = collected.end.map(|end| end.usage).unwrap_or_default();
        let (text, extra) = (collected.text, collected.troupe);
        let mut body = shape.response(status, vec![shape.message(&text, "completed")], Some(&used));
        if let Some(extra) = extra {
            body["troupe"] = extra;
        }
        return Ok(([header], Json(body)).into_response());
    }
    let frames = events(shape, heard, run);
    Ok(([header], Sse::new(frames).keep_alive(KeepAlive::default())).into_response())
}

fn status_of(outcome: RunOutcomeKind) -> &'static str {
    match outcome {
        RunOutcomeKind::Incomplete | RunOutcomeKind::MaxIterations => "incomplete",
        _ => "completed",
    }
}

/// The events of a streamed response, each numbered.
fn events(
    shape: Shape,
    heard: Pin<Box<dyn futures::Stream<Item = Heard> + Send>>,
    run: std::sync::Arc<crate::hub::HubRun>,
) -> impl futures::Stream<Item = Result<Event, Infallible>> + Send + 'static {
    let shape = std::sync::Arc::new(shape);
    let sequence = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let frame = {
        let sequence = std::sync::Arc::clone(&sequence);
        move |kind: &str, mut data: Value| -> Result<Event, Infallible> {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(sequence.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            Ok(Event::default().event(kind).data(data.to_string()))
        }
    };
    let opening = {
        let item = shape.message("", "in_progress");
        let mut item = item;
        item["content"] = json!([]);
        vec![
            frame("response.created", json!({"response": shape.response("in_progress", vec![], None)})),
            frame("response.in_progress", json!({"response": shape.response("in_progress", vec![], None)})),
            frame("response.output_item.added", json!({"output_index": 0, "item": item})),
            frame(
                "response.content_part.added",
                json!({"item_id": shape.message_id, "output_index": 0, "content_index": 0, "part": Shape::part("")}),
            ),
        ]
    };
    let written = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let body = heard.flat_map(move |piece| {
        let place = |extra: Value| {
            let mut data = json!({"item_id": shape.message_id, "output_index": 0, "content_index": 0});
            if let (Some(data), Value::Object(extra)) = (data.as_object_mut(), extra) {
                data.extend(extra);
            }
            data
        };
        let text_so_far = || written.lock().map(|t| t.clone()).unwrap_or_default();
        let closing = |status: &str, used: Option<&Usage>, extra: Option<Value>| {
            let text = text_so_far();
            let mut done = shape.response(status, vec![shape.message(&text, "completed")], used);
            if let Some(extra) = extra {
                done["troupe"] = extra;
            }
            vec![
                frame("response.output_text.done", place(json!({"text": text, "logprobs": []}))),
                frame("response.content_part.done", place(json!({"part": Shape::part(&text)}))),
                frame(
                    "response.output_item.done",
                    json!({"output_index": 0, "item": shape.message(&text, "completed")}),
                ),
                frame("response.completed", json!({"response": done})),
            ]
        };
        let frames = match piece {
            Heard::Text(delta) => {
                if let Ok(mut text) = written.lock() {
                    text.push_str(&delta);
                }
                vec![frame("response.output_text.delta", place(json!({"delta": delta, "logprobs": []})))]
            }
            Heard::Waiting(pending) => {
                let note = waiting_note(&run, &pending);
                if let Ok(mut text) = written.lock() {
                    text.push_str(&note);
                }
                let mut frames =
                    vec![frame("response.output_text.delta", place(json!({"delta": note, "logprobs": []})))];
                frames.extend(closing("completed", None, Some(troupe_field(&run, &pending))));
                frames
            }
            Heard::Ended(end) => match failure(&end) {
                Some(error) => {
                    let body = error.body();
                    let mut failed = shape.response("failed", vec![], Some(&end.usage));
                    failed["error"] = json!({"code": body["error"]["code"], "message": body["error"]["message"]});
                    vec![frame("response.failed", json!({"response": failed}))]
                }
                None => closing(status_of(end.outcome), Some(&end.usage), None),
            },
        };
        futures::stream::iter(frames)
    });
    futures::stream::iter(opening).chain(body)
}
