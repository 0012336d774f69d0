//! What can go wrong on the wire ([`IpcError`]) and with a streamed payload ([`PayloadError`]).

use std::path::PathBuf;

/// A byte stream that is not a valid sequence of frames, or that could not be read or
/// written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IpcError {
    /// A header announced more bytes than a frame may hold; rejected before any allocation.
    #[error("a frame header announces {len} bytes, more than the {max}-byte maximum")]
    FrameTooLarge {
        /// The announced payload length.
        len: u64,
        /// The largest payload a frame may have.
        max: usize,
    },
    /// The stream ended inside a frame.
    #[error("the stream ended inside a frame: {got} of its {expected} bytes arrived")]
    Truncated {
        /// The bytes the frame needed (its header, or its header and payload).
        expected: usize,
        /// The bytes that arrived.
        got: usize,
    },
    /// A header named a frame type this protocol does not have.
    #[error("unknown frame type 0x{code:02x}")]
    UnknownFrameType {
        /// The type byte.
        code: u8,
    },
    /// A frame's payload is not what its type requires (bad JSON, bad UTF-8, a short
    /// chunk header, a heartbeat with a payload).
    #[error("malformed {frame} frame: {reason} (payload starts {excerpt:?})")]
    Malformed {
        /// The frame type's name.
        frame: &'static str,
        /// What is wrong.
        reason: String,
        /// The payload's first bytes, lossily decoded, never the whole payload.
        excerpt: String,
    },
    /// A frame could not be encoded.
    #[error("cannot encode a {frame} frame: {reason}")]
    Encode {
        /// The frame type's name.
        frame: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The other side closed its end while frames were still to be written.
    #[error("the other side closed the channel")]
    Closed,
    /// Reading or writing the stream failed.
    #[error("i/o error on the frame stream: {0}")]
    Io(#[from] std::io::Error),
}

/// How many payload bytes a [`IpcError::Malformed`] quotes.
pub(crate) const EXCERPT_BYTES: usize = 48;

impl IpcError {
    /// A malformed-frame error quoting the start of `payload`.
    pub(crate) fn malformed(frame: &'static str, reason: impl Into<String>, payload: &[u8]) -> Self {
        let end = payload.len().min(EXCERPT_BYTES);
        let mut excerpt = String::from_utf8_lossy(&payload[..end]).into_owned();
        if payload.len() > end {
            excerpt.push('…');
        }
        IpcError::Malformed { frame, reason: reason.into(), excerpt }
    }
}

/// A streamed payload that could not be sent or received whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// A payload's file could not be read or written.
    #[error("payload `{name}`: cannot {action} `{}`: {source}", path.display())]
    File {
        /// The payload's name.
        name: String,
        /// `read`, `create` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A payload name that is not a plain file name.
    #[error("payload name {name:?} is not a plain file name")]
    BadName {
        /// The name given.
        name: String,
    },
    /// More or fewer bytes arrived than announced.
    #[error("payload `{name}` announced {expected} bytes but {got} arrived")]
    LengthMismatch {
        /// The payload's name.
        name: String,
        /// The announced length.
        expected: u64,
        /// The bytes that arrived.
        got: u64,
    },
    /// The bytes that arrived do not have the announced SHA-256.
    #[error("payload `{name}` has SHA-256 {got}, not the announced {expected}")]
    ChecksumMismatch {
        /// The payload's name.
        name: String,
        /// The announced digest.
        expected: String,
        /// The digest of what arrived.
        got: String,
    },
    /// The start frame announced a checksum the end frame does not carry.
    #[error("payload `{name}` announced a SHA-256 but its end frame carries none")]
    ChecksumMissing {
        /// The payload's name.
        name: String,
    },
    /// A chunk or end for a stream that was never started (or already ended).
    #[error("payload stream {stream_id} was not started")]
    UnknownStream {
        /// The stream id.
        stream_id: u32,
    },
    /// A stream id used twice.
    #[error("payload stream {stream_id} was started twice")]
    DuplicateStream {
        /// The stream id.
        stream_id: u32,
    },
    /// The channel the chunks go to was closed.
    #[error("the frame channel closed while payload `{name}` was being sent")]
    ChannelClosed {
        /// The payload's name.
        name: String,
    },
    /// A blocking file task failed to complete.
    #[error("payload `{name}`: the file task failed: {reason}")]
    Task {
        /// The payload's name.
        name: String,
        /// Why.
        reason: String,
    },
}
