//! Lines of bounded length from a byte stream (a server's stderr), read in chunks: a writer
//! that never ends its line costs one line's cap of memory, not everything it writes.

use tokio::io::{AsyncRead, AsyncReadExt};

/// How much is read at a time.
const CHUNK: usize = 8 * 1024;

/// Reads `reader` until its end (or its first error), handing `on_line` each line without
/// its `\n` or `\r\n`, as text (invalid UTF-8 replaced). A line longer than `max_bytes` is
/// handed on, cut to them, as soon as it reaches them, and the rest of it is skipped.
pub(crate) async fn read_lines(mut reader: impl AsyncRead + Unpin, max_bytes: usize, mut on_line: impl FnMut(String)) {
    let mut chunk = vec![0; CHUNK];
    let mut line = Vec::new();
    // Set once the current line was handed on cut: what is left of it is skipped.
    let mut cut = false;
    loop {
        let read = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let mut rest = &chunk[..read];
        while !rest.is_empty() {
            let end = rest.iter().position(|byte| *byte == b'\n');
            let part = &rest[..end.unwrap_or(rest.len())];
            if !cut {
                line.extend_from_slice(&part[..part.len().min(max_bytes - line.len())]);
                if line.len() == max_bytes && end.is_none() {
                    on_line(String::from_utf8_lossy(&line).into_owned());
                    line.clear();
                    cut = true;
                }
            }
            let Some(end) = end else { break };
            if !cut {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                on_line(String::from_utf8_lossy(text).into_owned());
            }
            line.clear();
            cut = false;
            rest = &rest[end + 1..];
        }
    }
    if !line.is_empty() {
        on_line(String::from_utf8_lossy(&line).into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn lines(input: impl AsyncRead + Unpin, max_bytes: usize) -> Vec<String> {
        let mut lines = Vec::new();
        read_lines(input, max_bytes, |line| lines.push(line)).await;
        lines
    }

    #[tokio::test]
    async fn lines_end_at_newlines_whatever_the_chunks() {
        let input = b"one\r\ntwo\n\nth\xffree\nlast";
        assert_eq!(lines(&input[..], 100).await, ["one", "two", "", "th\u{fffd}ree", "last"]);
        // Chunk boundaries fall anywhere in a line longer than a chunk.
        let long = "x".repeat(CHUNK * 2 + 3);
        let input = format!("{long}\nshort\n");
        assert_eq!(lines(input.as_bytes(), CHUNK * 4).await, [long.as_str(), "short"]);
    }

    #[tokio::test]
    async fn a_long_line_is_cut_and_the_next_is_whole() {
        let input = tokio::io::AsyncReadExt::chain(tokio::io::repeat(b'a').take(10 * 1024 * 1024), &b"\nnext\n"[..]);
        assert_eq!(lines(input, 16).await, ["a".repeat(16), "next".to_owned()]);
        // At the cap exactly, a line is handed on once.
        assert_eq!(lines(&b"0123456789abcdef\nnext"[..], 16).await, ["0123456789abcdef", "next"]);
    }

    #[tokio::test]
    async fn a_line_without_end_is_handed_on_once_it_reaches_the_cap() {
        let (sender, mut received) = tokio::sync::mpsc::unbounded_channel();
        // Never a newline, never an end.
        let reader = tokio::spawn(read_lines(tokio::io::repeat(b'a'), 400, move |line| {
            let _ = sender.send(line);
        }));
        let first = tokio::time::timeout(Duration::from_secs(10), received.recv()).await;
        reader.abort();
        assert_eq!(first.expect("a line comes before the writer stops").as_deref(), Some("a".repeat(400).as_str()));
    }
}
