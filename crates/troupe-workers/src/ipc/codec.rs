//! [`FrameCodec`]: frames to bytes and back, for `tokio_util`'s `FramedRead` and
//! `FramedWrite`.

use super::error::IpcError;
use super::frame::{CHUNK_PREFIX_LEN, Frame, FrameType, HEADER_LEN, MAX_FRAME_LEN};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::codec::{Decoder, Encoder};

/// Encodes and decodes [`Frame`]s, refusing any frame whose payload is over its maximum.
///
/// The decoder reads a header as soon as its 5 bytes are there: a length over the maximum
/// or an unknown type byte fails at once, before a byte of the payload is buffered, so a
/// peer that writes garbage costs neither memory nor waiting.
#[derive(Clone, Copy, Debug)]
pub struct FrameCodec {
    max_frame_len: usize,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec { max_frame_len: MAX_FRAME_LEN }
    }
}

impl FrameCodec {
    /// A codec with the default maximum ([`MAX_FRAME_LEN`]).
    pub fn new() -> Self {
        FrameCodec::default()
    }

    /// A codec refusing payloads over `max_frame_len` bytes.
    pub fn with_max_frame_len(max_frame_len: usize) -> Self {
        FrameCodec { max_frame_len }
    }

    /// The largest payload a frame may have.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = IpcError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, IpcError> {
        if src.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = u32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if len as usize > self.max_frame_len {
            return Err(IpcError::FrameTooLarge { len: u64::from(len), max: self.max_frame_len });
        }
        let len = len as usize;
        let Some(kind) = FrameType::from_code(src[4]) else {
            return Err(IpcError::UnknownFrameType { code: src[4] });
        };
        let total = HEADER_LEN + len;
        if src.len() < total {
            // One allocation for the whole frame rather than doublings as it trickles in.
            src.reserve(total - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let payload = src.split_to(len).freeze();
        decode_payload(kind, payload).map(Some)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, IpcError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => {
                let expected = if src.len() < HEADER_LEN {
                    HEADER_LEN
                } else {
                    HEADER_LEN + u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize
                };
                Err(IpcError::Truncated { expected, got: src.len() })
            }
        }
    }
}

fn decode_payload(kind: FrameType, payload: Bytes) -> Result<Frame, IpcError> {
    Ok(match kind {
        FrameType::Task => Frame::Task(Box::new(json(kind, &payload)?)),
        FrameType::Event => Frame::Event(Box::new(json(kind, &payload)?)),
        FrameType::Result => Frame::Result(Box::new(json(kind, &payload)?)),
        FrameType::Heartbeat if payload.is_empty() => Frame::Heartbeat,
        FrameType::Heartbeat => return Err(IpcError::malformed(kind.name(), "a heartbeat has no payload", &payload)),
        FrameType::Cancel => {
            let reason = std::str::from_utf8(&payload)
                .map_err(|e| IpcError::malformed(kind.name(), format!("the reason is not UTF-8: {e}"), &payload))?;
            Frame::Cancel { reason: (!reason.is_empty()).then(|| reason.to_owned()) }
        }
        FrameType::PayloadStart => Frame::PayloadStart(json(kind, &payload)?),
        FrameType::PayloadChunk => {
            if payload.len() < CHUNK_PREFIX_LEN {
                return Err(IpcError::malformed(kind.name(), "shorter than its 4-byte stream id", &payload));
            }
            let stream_id = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            Frame::PayloadChunk { stream_id, bytes: payload.slice(CHUNK_PREFIX_LEN..) }
        }
        FrameType::PayloadEnd => Frame::PayloadEnd(json(kind, &payload)?),
        FrameType::StoreCall => Frame::StoreCall(Box::new(json(kind, &payload)?)),
        FrameType::StoreReply => Frame::StoreReply(Box::new(json(kind, &payload)?)),
        FrameType::ModelCall => Frame::ModelCall(Box::new(json(kind, &payload)?)),
        FrameType::ModelReply => Frame::ModelReply(Box::new(json(kind, &payload)?)),
        FrameType::ModelCancel => Frame::ModelCancel(json(kind, &payload)?),
    })
}

fn json<T: DeserializeOwned>(kind: FrameType, payload: &[u8]) -> Result<T, IpcError> {
    serde_json::from_slice(payload).map_err(|e| IpcError::malformed(kind.name(), e.to_string(), payload))
}

impl Encoder<Frame> for FrameCodec {
    type Error = IpcError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), IpcError> {
        let kind = frame.frame_type();
        let start = dst.len();
        let hint = match &frame {
            Frame::PayloadChunk { bytes, .. } => CHUNK_PREFIX_LEN + bytes.len(),
            _ => 256,
        };
        dst.reserve(HEADER_LEN + hint);
        dst.put_u32(0);
        dst.put_u8(kind.code());
        let written = match &frame {
            Frame::Task(task) => put_json(kind, task, dst),
            Frame::Event(event) => put_json(kind, event, dst),
            Frame::Result(result) => put_json(kind, result, dst),
            Frame::Heartbeat => Ok(()),
            Frame::Cancel { reason } => {
                dst.put_slice(reason.as_deref().unwrap_or_default().as_bytes());
                Ok(())
            }
            Frame::PayloadStart(start) => put_json(kind, start, dst),
            Frame::PayloadChunk { stream_id, bytes } => {
                dst.put_u32(*stream_id);
                dst.put_slice(bytes);
                Ok(())
            }
            Frame::PayloadEnd(end) => put_json(kind, end, dst),
            Frame::StoreCall(call) => put_json(kind, call, dst),
            Frame::StoreReply(reply) => put_json(kind, reply, dst),
            Frame::ModelCall(call) => put_json(kind, call, dst),
            Frame::ModelReply(reply) => put_json(kind, reply, dst),
            Frame::ModelCancel(cancel) => put_json(kind, cancel, dst),
        };
        let len = dst.len() - start - HEADER_LEN;
        if let Err(error) = written {
            dst.truncate(start);
            return Err(error);
        }
        if len > self.max_frame_len {
            dst.truncate(start);
            return Err(IpcError::FrameTooLarge { len: len as u64, max: self.max_frame_len });
        }
        // `len` fits: the maximum is checked above and no maximum beyond u32 makes sense.
        let header =
            u32::try_from(len).map_err(|_| IpcError::FrameTooLarge { len: len as u64, max: u32::MAX as usize })?;
        dst[start..start + 4].copy_from_slice(&header.to_be_bytes());
        Ok(())
    }
}

fn put_json<T: Serialize>(kind: FrameType, value: &T, dst: &mut BytesMut) -> Result<(), IpcError> {
    serde_json::to_writer(dst.writer(), value)
        .map_err(|e| IpcError::Encode { frame: kind.name(), reason: e.to_string() })
}
