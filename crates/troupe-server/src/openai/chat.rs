//! `POST /v1/chat/completions`: a run of the agent named as `model`, answered as a chat
//! completion, or streamed as `chat.completion.chunk`s ending with `data: [DONE]`.

use super::error::OpenAiError;
use super::input::{Said, content_text, run_input, target};
use super::progress::{Heard, collect, failure, finish_reason, heard, run_header, start, troupe_field, waiting_note};
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
use troupe_core::{Usage, now_ms};

/// The body of a chat completion request; what troupe does not use is left unread.
#[derive(Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens.saturating_add(usage.output_tokens),
    })
}

pub(super) async fn complete(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let request: ChatRequest = state.parse(body).map_err(|e| OpenAiError::invalid(e.message, None))?;
    let name = target(&state, &request.model)?;
    let said = request
        .messages
        .into_iter()
        .map(|m| Ok(Said { text: content_text(&m.content, "messages")?, role: m.role }))
        .collect::<Result<Vec<_>, OpenAiError>>()?;
    let input = run_input(said, None, "messages")?;
    let run = start(&state, &name, input)?;
    let id = format!("chatcmpl-{}", run.run_id());
    let created = now_ms() / 1000;
    let header = run_header(&run);
    let heard: std::pin::Pin<Box<dyn futures::Stream<Item = Heard> + Send>> =
        Box::pin(heard(&run, state.closing.child_token()));
    if !request.stream {
        let collected = collect(&run, heard).await?;
        let finish = collected.end.as_ref().map_or("stop", finish_reason);
        let used = collected.end.map(|end| end.usage).unwrap_or_default();
        let (text, extra) = (collected.text, collected.troupe);
        let mut body = json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": name,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "finish_reason": finish,
                "logprobs": null,
            }],
            "usage": usage(&used),
        });
        if let Some(extra) = extra {
            body["troupe"] = extra;
        }
        return Ok(([header], Json(body)).into_response());
    }
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        })
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), None);
    let frames = async_stream(first, heard, run, chunk, include_usage);
    Ok(([header], Sse::new(frames).keep_alive(KeepAlive::default())).into_response())
}

/// The chunks of a streamed completion, then `[DONE]`.
fn async_stream(
    first: Value,
    heard: std::pin::Pin<Box<dyn futures::Stream<Item = Heard> + Send>>,
    run: std::sync::Arc<crate::hub::HubRun>,
    chunk: impl Fn(Value, Option<&str>) -> Value + Send + 'static,
    include_usage: bool,
) -> impl futures::Stream<Item = Result<Event, Infallible>> + Send + 'static {
    let data = |value: &Value| Ok(Event::default().data(value.to_string()));
    let head = futures::stream::iter([data(&first)]);
    let body = heard.flat_map(move |piece| {
        let frames: Vec<Result<Event, Infallible>> = match piece {
            Heard::Text(delta) => vec![data(&chunk(json!({"content": delta}), None))],
            Heard::Waiting(pending) => {
                let mut last = chunk(json!({"content": waiting_note(&run, &pending)}), Some("stop"));
                last["troupe"] = troupe_field(&run, &pending);
                vec![data(&last)]
            }
            Heard::Ended(end) => match failure(&end) {
                Some(error) => vec![data(&error.body())],
                None => {
                    let mut frames = vec![data(&chunk(json!({}), Some(finish_reason(&end))))];
                    if include_usage {
                        let mut last = chunk(json!({}), None);
                        last["choices"] = json!([]);
                        last["usage"] = usage(&end.usage);
                        frames.push(data(&last));
                    }
                    frames
                }
            },
        };
        futures::stream::iter(frames)
    });
    head.chain(body).chain(futures::stream::iter([Ok(Event::default().data("[DONE]"))]))
}
