//! Payloads larger than memory: sent as chunk frames read from a file (or a buffer), and
//! received into a file, a chunk at a time, so neither side holds more than a few chunks.

use super::error::PayloadError;
use super::frame::{CHUNK_LEN, Frame, PayloadEnd, PayloadStart};
use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

/// Where a payload's bytes come from; read again from the start on every attempt.
#[derive(Clone, Debug)]
pub enum PayloadSource {
    /// Bytes in memory.
    Bytes(Bytes),
    /// A file, read a chunk at a time.
    File(PathBuf),
}

impl PayloadSource {
    /// The payload's length.
    pub fn len(&self, name: &str) -> Result<u64, PayloadError> {
        match self {
            PayloadSource::Bytes(bytes) => Ok(bytes.len() as u64),
            PayloadSource::File(path) => {
                std::fs::metadata(path).map(|m| m.len()).map_err(|source| file_error(name, "read", path, source))
            }
        }
    }
}

/// What was sent or received: a payload's name, length and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadSummary {
    /// The payload's name.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// Its SHA-256, hex, when it was checksummed.
    pub sha256: Option<String>,
    /// Where it was written, for a received payload kept in a file.
    pub path: Option<PathBuf>,
}

/// Whether `name` is a plain file name (not empty, no `/`, not `.` or `..`, no NUL).
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Streams `source` as stream `stream_id` into `frames`: a start frame, chunks of
/// [`CHUNK_LEN`] bytes, and an end frame (with the SHA-256 of every byte when `checksum`).
/// Each chunk waits for room in the channel, so memory stays at the channel's capacity in
/// chunks.
pub async fn send_payload(
    frames: &mpsc::Sender<Frame>,
    stream_id: u32,
    name: &str,
    source: &PayloadSource,
    checksum: bool,
) -> Result<PayloadSummary, PayloadError> {
    let closed = || PayloadError::ChannelClosed { name: name.to_owned() };
    let total_len = source.len(name)?;
    let start = PayloadStart { stream_id, name: name.to_owned(), total_len: Some(total_len), checksum };
    frames.send(Frame::PayloadStart(start)).await.map_err(|_| closed())?;
    let mut hasher = checksum.then(Sha256::new);
    let mut len = 0u64;
    match source {
        PayloadSource::Bytes(bytes) => {
            let mut offset = 0;
            while offset < bytes.len() {
                let end = (offset + CHUNK_LEN).min(bytes.len());
                let chunk = bytes.slice(offset..end);
                if let Some(hasher) = &mut hasher {
                    hasher.update(&chunk);
                }
                len += chunk.len() as u64;
                frames.send(Frame::PayloadChunk { stream_id, bytes: chunk }).await.map_err(|_| closed())?;
                offset = end;
            }
        }
        PayloadSource::File(path) => {
            let mut file = std::fs::File::open(path).map_err(|source| file_error(name, "read", path, source))?;
            loop {
                let (file_now, hasher_now, chunk) = read_chunk(name, path, file, hasher).await?;
                (file, hasher) = (file_now, hasher_now);
                if chunk.is_empty() {
                    break;
                }
                len += chunk.len() as u64;
                frames.send(Frame::PayloadChunk { stream_id, bytes: chunk }).await.map_err(|_| closed())?;
            }
        }
    }
    if len != total_len {
        return Err(PayloadError::LengthMismatch { name: name.to_owned(), expected: total_len, got: len });
    }
    let sha256 = hasher.map(|h| hex(&h.finalize()));
    let end = PayloadEnd { stream_id, sha256: sha256.clone() };
    frames.send(Frame::PayloadEnd(end)).await.map_err(|_| closed())?;
    Ok(PayloadSummary { name: name.to_owned(), len, sha256, path: None })
}

/// Reads (and hashes) the next chunk off the async threads; an empty chunk at the end.
async fn read_chunk(
    name: &str,
    path: &Path,
    mut file: std::fs::File,
    mut hasher: Option<Sha256>,
) -> Result<(std::fs::File, Option<Sha256>, Bytes), PayloadError> {
    let (name_owned, path_owned) = (name.to_owned(), path.to_path_buf());
    let joined = tokio::task::spawn_blocking(move || {
        let mut buf = BytesMut::zeroed(CHUNK_LEN);
        let mut filled = 0;
        while filled < CHUNK_LEN {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(file_error(&name_owned, "read", &path_owned, source)),
            }
        }
        buf.truncate(filled);
        if let Some(hasher) = &mut hasher {
            hasher.update(&buf);
        }
        Ok((file, hasher, buf.freeze()))
    })
    .await;
    joined.map_err(|e| PayloadError::Task { name: name.to_owned(), reason: e.to_string() })?
}

/// One payload being received into a file.
#[derive(Debug)]
pub struct PayloadReceiver {
    name: String,
    path: PathBuf,
    file: Option<std::fs::File>,
    hasher: Option<Sha256>,
    len: u64,
    total_len: Option<u64>,
}

impl PayloadReceiver {
    /// Starts receiving `start` into `dir/<name>` (creating `dir`, replacing the file).
    pub async fn create(start: &PayloadStart, dir: &Path) -> Result<Self, PayloadError> {
        if !is_plain_file_name(&start.name) {
            return Err(PayloadError::BadName { name: start.name.clone() });
        }
        let path = dir.join(&start.name);
        let (name, dir_owned, path_owned) = (start.name.clone(), dir.to_path_buf(), path.clone());
        let file = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir_owned).map_err(|source| file_error(&name, "create", &dir_owned, source))?;
            std::fs::File::create(&path_owned).map_err(|source| file_error(&name, "create", &path_owned, source))
        })
        .await
        .map_err(|e| PayloadError::Task { name: start.name.clone(), reason: e.to_string() })??;
        Ok(PayloadReceiver {
            name: start.name.clone(),
            path,
            file: Some(file),
            hasher: start.checksum.then(Sha256::new),
            len: 0,
            total_len: start.total_len,
        })
    }

    /// The payload's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file it is written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes (and hashes) the next chunk off the async threads; more bytes than announced
    /// are refused.
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), PayloadError> {
        let got = self.len + bytes.len() as u64;
        if let Some(expected) = self.total_len.filter(|&expected| got > expected) {
            return Err(PayloadError::LengthMismatch { name: self.name.clone(), expected, got });
        }
        let Some(mut file) = self.file.take() else {
            return Err(PayloadError::Task { name: self.name.clone(), reason: "an earlier write failed".to_owned() });
        };
        let mut hasher = self.hasher.take();
        let (name, path) = (self.name.clone(), self.path.clone());
        let (file, hasher) = tokio::task::spawn_blocking(move || {
            if let Some(hasher) = &mut hasher {
                hasher.update(&bytes);
            }
            file.write_all(&bytes).map_err(|source| file_error(&name, "write", &path, source))?;
            Ok::<_, PayloadError>((file, hasher))
        })
        .await
        .map_err(|e| PayloadError::Task { name: self.name.clone(), reason: e.to_string() })??;
        self.file = Some(file);
        self.hasher = hasher;
        self.len = got;
        Ok(())
    }

    /// Ends the payload: its length and SHA-256 must be the announced ones.
    pub async fn finish(mut self, end: &PayloadEnd) -> Result<PayloadSummary, PayloadError> {
        if let Some(expected) = self.total_len.filter(|&expected| expected != self.len) {
            return Err(PayloadError::LengthMismatch { name: self.name, expected, got: self.len });
        }
        if self.file.is_none() {
            return Err(PayloadError::Task { name: self.name, reason: "an earlier write failed".to_owned() });
        }
        // Closed here; the bytes are in the page cache for whoever reads the file next.
        drop(self.file.take());
        let sha256 = self.hasher.take().map(|h| hex(&h.finalize()));
        match (&end.sha256, &sha256) {
            (Some(expected), Some(got)) if !expected.eq_ignore_ascii_case(got) => {
                return Err(PayloadError::ChecksumMismatch {
                    name: self.name,
                    expected: expected.clone(),
                    got: got.clone(),
                });
            }
            (Some(expected), None) => {
                let got = "none (the start frame announced no checksum)".to_owned();
                return Err(PayloadError::ChecksumMismatch { name: self.name, expected: expected.clone(), got });
            }
            (None, Some(_)) => return Err(PayloadError::ChecksumMissing { name: self.name }),
            _ => {}
        }
        Ok(PayloadSummary { name: self.name, len: self.len, sha256, path: Some(self.path) })
    }
}

fn file_error(name: &str, action: &'static str, path: &Path, source: std::io::Error) -> PayloadError {
    PayloadError::File { name: name.to_owned(), action, path: path.to_path_buf(), source }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
