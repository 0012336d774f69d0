//! Shared by the server benchmarks: an SSE reader that tells a stream's end from its
//! failure, and leaves `data:` unparsed so that a client parses only the frames it needs.

use futures::StreamExt;
use futures::stream::BoxStream;

/// One SSE frame.
#[derive(Debug)]
pub struct Frame {
    /// `id:`, the event's position in its run.
    pub id: Option<u64>,
    /// `event:`, the event's type.
    pub event: String,
    /// `data:`, the event as JSON text.
    pub data: String,
}

/// Frames from an SSE response, as they arrive.
pub struct SseReader {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl SseReader {
    /// Reads `response`'s body.
    pub fn new(response: reqwest::Response) -> Self {
        SseReader { body: response.bytes_stream().boxed(), buffer: Vec::new() }
    }

    /// The next frame; `Ok(None)` once the stream has ended cleanly, an error if it broke
    /// or ended inside a frame.
    pub async fn next(&mut self) -> Result<Option<Frame>, String> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = std::str::from_utf8(&block).map_err(|e| format!("a frame is not UTF-8: {e}"))?;
                let mut frame = Frame { id: None, event: String::new(), data: String::new() };
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        frame.id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        v.trim().clone_into(&mut frame.event);
                    } else if let Some(v) = line.strip_prefix("data:") {
                        frame.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if frame.data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Ok(Some(frame));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(error)) => return Err(format!("stream error: {error}")),
                None if self.buffer.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => return Err(format!("stream ended inside a frame ({} bytes)", self.buffer.len())),
            }
        }
    }
}
