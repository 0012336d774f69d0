//! An incremental Server-Sent Events decoder over raw bytes.
//!
//! The decoder keeps only an unfinished line between calls, so any split of the same bytes
//! into chunks yields the same frames. Lines may end in `\n`, `\r\n` or `\r` (even when the
//! `\r\n` pair is split across chunks). Frames are handed to a callback as borrowed
//! [`SseFrame`]s, so decoding allocates nothing per event once the buffers have grown.

/// One dispatched event: its `event:` name, if any, and its `data:` lines joined by `\n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseFrame<'a> {
    /// The `event:` field, if the event had one.
    pub event: Option<&'a str>,
    /// The `data:` lines joined by `\n`.
    pub data: &'a str,
}

/// Why bytes could not be decoded as SSE.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A single line, or one event's `data` lines together, exceeded the decoder's limit:
    /// the peer is not speaking SSE.
    #[error("an SSE line or event's data exceeds {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// A line was not valid UTF-8.
    #[error("an SSE line is not valid UTF-8")]
    InvalidUtf8,
}

/// The default cap on one line, and on one event's data (its `data:` lines joined): 16 MiB.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// Decodes a byte stream into [`SseFrame`]s.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    event: String,
    has_event: bool,
    data: String,
    has_data: bool,
    skip_lf: bool,
    max_line: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default line limit.
    pub fn new() -> Self {
        Self::with_max_line(DEFAULT_MAX_LINE)
    }

    /// A decoder that refuses lines longer than `max_line` bytes, and events whose data
    /// would be.
    pub fn with_max_line(max_line: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            event: String::new(),
            has_event: false,
            data: String::new(),
            has_data: false,
            skip_lf: false,
            max_line,
        }
    }

    /// Feeds the next chunk, calling `on_frame` for every event it completes.
    pub fn feed<E, F>(&mut self, mut chunk: &[u8], mut on_frame: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseFrame<'_>) -> Result<(), E>,
    {
        if self.skip_lf {
            if let [b'\n', rest @ ..] = chunk {
                chunk = rest;
            }
            if !chunk.is_empty() {
                self.skip_lf = false;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', chunk) {
            let terminator = chunk[pos];
            let (head, tail) = (&chunk[..pos], &chunk[pos + 1..]);
            if self.line.is_empty() {
                self.check_len(head.len())?;
                self.process_line(head, &mut on_frame)?;
            } else {
                self.check_len(self.line.len() + head.len())?;
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                let result = self.process_line(&line, &mut on_frame);
                line.clear();
                self.line = line;
                result?;
            }
            chunk = tail;
            if terminator == b'\r' {
                match chunk {
                    [b'\n', rest @ ..] => chunk = rest,
                    [] => self.skip_lf = true,
                    _ => {}
                }
            }
        }
        if !chunk.is_empty() {
            self.check_len(self.line.len() + chunk.len())?;
            self.line.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Ends the stream: an unterminated last line and a pending event are dispatched
    /// (servers that omit the final blank line are common).
    pub fn finish<E, F>(&mut self, mut on_frame: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseFrame<'_>) -> Result<(), E>,
    {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut on_frame)?;
        }
        self.dispatch(&mut on_frame)
    }

    fn check_len(&self, len: usize) -> Result<(), SseError> {
        if len > self.max_line { Err(SseError::LineTooLong { limit: self.max_line }) } else { Ok(()) }
    }

    fn process_line<E, F>(&mut self, line: &[u8], on_frame: &mut F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseFrame<'_>) -> Result<(), E>,
    {
        if line.is_empty() {
            return self.dispatch(on_frame);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let value = std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8)?;
                // Lines within the limit add up until a blank line: the event is capped too.
                let joined = self.data.len() + usize::from(self.has_data) + value.len();
                self.check_len(joined)?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            b"event" => {
                let value = std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8)?;
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch<E, F>(&mut self, on_frame: &mut F) -> Result<(), E>
    where
        F: FnMut(SseFrame<'_>) -> Result<(), E>,
    {
        let result = if self.has_data {
            on_frame(SseFrame { event: self.has_event.then_some(self.event.as_str()), data: &self.data })
        } else {
            Ok(())
        };
        self.data.clear();
        self.has_data = false;
        self.event.clear();
        self.has_event = false;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(chunks: &[&[u8]]) -> Vec<(Option<String>, String)> {
        let mut decoder = SseDecoder::new();
        let mut frames = Vec::new();
        let mut push = |f: SseFrame<'_>| -> Result<(), SseError> {
            frames.push((f.event.map(str::to_owned), f.data.to_owned()));
            Ok(())
        };
        for chunk in chunks {
            decoder.feed(chunk, &mut push).expect("decodes");
        }
        decoder.finish(&mut push).expect("finishes");
        frames
    }

    #[test]
    fn decodes_events_comments_and_multiline_data() {
        let input = b": keep-alive\nevent: ping\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\n\nid: 3\nretry: 10\n\n";
        let frames = decode_chunks(&[input]);
        assert_eq!(
            frames,
            vec![(Some("ping".into()), "{\"a\":1}".into()), (None, "line1\nline2".into())],
            "an event without data is not dispatched"
        );
    }

    #[test]
    fn every_split_point_and_line_ending_gives_the_same_frames() {
        for input in [
            &b"event: a\r\ndata: x\r\n\r\ndata:y\r\n\r\n"[..],
            &b"event: a\ndata: x\n\ndata:y\n\n"[..],
            &b"event: a\rdata: x\r\rdata:y\r\r"[..],
        ] {
            let whole = decode_chunks(&[input]);
            assert_eq!(whole, vec![(Some("a".into()), "x".into()), (None, "y".into())]);
            for i in 0..input.len() {
                for j in i..input.len() {
                    assert_eq!(decode_chunks(&[&input[..i], &input[i..j], &input[j..]]), whole, "split at {i},{j}");
                }
            }
        }
    }

    #[test]
    fn unterminated_last_event_is_dispatched_at_finish() {
        assert_eq!(decode_chunks(&[b"data: tail"]), vec![(None, "tail".into())]);
    }

    #[test]
    fn oversized_lines_and_invalid_utf8_are_errors() {
        let mut decoder = SseDecoder::with_max_line(8);
        let err = decoder.feed(b"data: 0123456789", |_| Ok::<(), SseError>(())).expect_err("too long");
        assert_eq!(err, SseError::LineTooLong { limit: 8 });
        let mut decoder = SseDecoder::new();
        let err = decoder.feed(b"data: \xff\xfe\n", |_| Ok::<(), SseError>(())).expect_err("not utf-8");
        assert_eq!(err, SseError::InvalidUtf8);
    }

    #[test]
    fn an_events_data_is_capped_like_a_line() {
        let mut decoder = SseDecoder::with_max_line(16);
        let mut frames = 0;
        let mut count = |_: SseFrame<'_>| -> Result<(), SseError> {
            frames += 1;
            Ok(())
        };
        // 3 bytes joined by `\n`: 5 lines are 19 bytes of data, each line well within 16.
        let err = decoder.feed(b"data: abc\ndata: abc\ndata: abc\ndata: abc\ndata: abc\n", &mut count);
        assert_eq!(err, Err(SseError::LineTooLong { limit: 16 }));
        // Exactly at the limit is fine: 4 lines are 15 bytes.
        let mut decoder = SseDecoder::with_max_line(15);
        decoder.feed(b"data: abc\ndata: abc\ndata: abc\ndata: abc\n\n", &mut count).expect("within the limit");
        assert_eq!(frames, 1);
    }

    #[test]
    fn data_without_a_blank_line_does_not_grow_past_the_default_cap() {
        // One MiB lines, never a blank line: refused once the event passes 16 MiB.
        let line = [b"data: ".as_slice(), &vec![b'x'; 1024 * 1024], b"\n"].concat();
        let mut decoder = SseDecoder::new();
        let fed = (0..32).try_for_each(|_| decoder.feed(&line, |_| Ok::<(), SseError>(())));
        assert_eq!(fed, Err(SseError::LineTooLong { limit: DEFAULT_MAX_LINE }));
        assert!(decoder.data.len() <= DEFAULT_MAX_LINE);
    }
}
