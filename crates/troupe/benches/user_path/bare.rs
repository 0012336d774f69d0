//! The baseline: what the same work costs written by hand with `reqwest` and
//! `serde_json` alone — one shared client, the OpenAI Chat request built as JSON, the SSE
//! body split into frames and each frame parsed, tool calls assembled and answered, the
//! conversation carried from call to call. No retries, no events, no budgets, no record.

use crate::workload::{TASK, lookup_answer};
use futures::StreamExt;
use serde_json::{Value, json};

/// One hand-written agent over one client.
pub struct BareLoop {
    client: reqwest::Client,
    url: String,
    model: String,
    tools: Value,
    /// With a floor: each run recorded as a power-loss-safe record at least must be.
    floor: Option<(crate::floor::Floor, std::sync::atomic::AtomicI64)>,
}

/// A tool call being assembled from its streamed fragments.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

impl BareLoop {
    pub fn new(base_url: &str, model: &str, parameters: Value) -> Self {
        let tools = json!([{
            "type": "function",
            "function": {"name": "lookup", "description": "Looks up the value of a key.", "parameters": parameters},
        }]);
        BareLoop {
            client: reqwest::Client::new(),
            url: format!("{base_url}/v1/chat/completions"),
            model: model.to_owned(),
            tools,
            floor: None,
        }
    }

    /// The same loop, recording each run in `floor`.
    pub fn recorded(mut self, floor: crate::floor::Floor) -> Self {
        self.floor = Some((floor, std::sync::atomic::AtomicI64::new(0)));
        self
    }

    /// One run: model calls until the model answers; returns the answer and the number
    /// of tool calls.
    pub async fn run(&self) -> Result<(String, u32), String> {
        let mut messages = vec![
            json!({"role": "system", "content": "Look the keys up, then answer."}),
            json!({"role": "user", "content": TASK}),
        ];
        // One model call per tool call, and the one that answers, with room to spare.
        let model_calls = crate::workload::tool_calls(&self.model) + 8;
        let mut tool_calls = 0;
        let record =
            self.floor.as_ref().map(|(floor, ids)| (floor, ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        if let Some((floor, id)) = record {
            floor.create(id, &messages).await?;
        }
        for _ in 0..model_calls {
            let body = json!({
                "model": self.model,
                "messages": messages,
                "tools": self.tools,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            let response = self
                .client
                .post(&self.url)
                .bearer_auth("sk-bench")
                .json(&body)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !response.status().is_success() {
                return Err(format!("HTTP {}", response.status()));
            }
            let (text, calls) = read_stream(response).await?;
            if calls.is_empty() {
                if let Some((floor, id)) = record {
                    messages.push(json!({"role": "assistant", "content": text}));
                    floor.save(id, &messages, "completed").await?;
                }
                return Ok((text, tool_calls));
            }
            let wire_calls: Vec<Value> = calls
                .iter()
                .map(
                    |c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}),
                )
                .collect();
            // The turn's text, when it has any, is part of the conversation the next call sends.
            let content = if text.is_empty() { Value::Null } else { Value::String(text) };
            messages.push(json!({"role": "assistant", "content": content, "tool_calls": wire_calls}));
            if let Some((floor, id)) = record {
                floor.save(id, &messages, "running").await?;
            }
            for call in calls {
                let arguments: Value = serde_json::from_str(&call.arguments).map_err(|e| e.to_string())?;
                let key = arguments["key"].as_str().ok_or("no key")?;
                messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": lookup_answer(key)}));
                tool_calls += 1;
            }
        }
        Err(format!("no answer after {} model calls", model_calls))
    }
}

/// Reads an OpenAI Chat SSE body: the text and the tool calls.
async fn read_stream(response: reqwest::Response) -> Result<(String, Vec<Call>), String> {
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut text = String::new();
    let mut calls: Vec<Call> = Vec::new();
    while let Some(chunk) = body.next().await {
        buffer.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..end + 2).collect();
            for line in frame.split(|b| *b == b'\n') {
                let Some(data) = line.strip_prefix(b"data: ") else { continue };
                if data == b"[DONE]" {
                    return Ok((text, calls));
                }
                let event: Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
                let delta = &event["choices"][0]["delta"];
                if let Some(piece) = delta["content"].as_str() {
                    text.push_str(piece);
                }
                for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = fragment["index"].as_u64().unwrap_or(0) as usize;
                    if calls.len() <= index {
                        calls.resize_with(index + 1, Call::default);
                    }
                    let call = &mut calls[index];
                    if let Some(id) = fragment["id"].as_str() {
                        id.clone_into(&mut call.id);
                    }
                    if let Some(name) = fragment["function"]["name"].as_str() {
                        name.clone_into(&mut call.name);
                    }
                    if let Some(arguments) = fragment["function"]["arguments"].as_str() {
                        call.arguments.push_str(arguments);
                    }
                }
            }
        }
    }
    Ok((text, calls))
}
