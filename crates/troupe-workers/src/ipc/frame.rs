//! [`Frame`]s and their wire layout.
//!
//! ```text
//! +----------------+------+---------------------------+
//! | length: u32 BE | type | payload: `length` bytes   |
//! +----------------+------+---------------------------+
//! ```
//!
//! `length` counts the payload only (not the 5-byte header) and is at most the codec's
//! maximum ([`MAX_FRAME_LEN`] by default). Payloads by type:
//!
//! | type | code | payload |
//! |---|---|---|
//! | `task` | `0x01` | JSON [`AgentTask`] |
//! | `event` | `0x02` | JSON [`AgentEvent`] |
//! | `result` | `0x03` | JSON [`AgentResult`] |
//! | `heartbeat` | `0x04` | empty |
//! | `cancel` | `0x05` | UTF-8 reason, possibly empty |
//! | `payload_start` | `0x10` | JSON [`PayloadStart`] |
//! | `payload_chunk` | `0x11` | stream id (u32 BE), then raw bytes |
//! | `payload_end` | `0x12` | JSON [`PayloadEnd`] |
//! | `store_call` | `0x20` | JSON [`StoreCall`] |
//! | `store_reply` | `0x21` | JSON [`StoreReply`] |
//! | `model_call` | `0x30` | JSON [`ModelCall`] |
//! | `model_reply` | `0x31` | JSON [`ModelReply`] |
//! | `model_cancel` | `0x32` | JSON [`ModelCancel`] |

use super::model::{ModelCall, ModelCancel, ModelReply};
use super::{AgentResult, AgentTask, StoreCall, StoreReply};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use troupe_core::AgentEvent;

/// The bytes of a frame header: the payload length (u32, big-endian) and the type byte.
pub const HEADER_LEN: usize = 5;
/// The default largest payload of one frame: 16 MiB.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;
/// The bytes of a payload chunk frame's data as senders cut them: 1 MiB.
pub const CHUNK_LEN: usize = 1024 * 1024;
/// The stream-id prefix of a chunk frame's payload.
pub const CHUNK_PREFIX_LEN: usize = 4;

/// A frame type and its code on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// A task, coordinator to worker.
    Task,
    /// An agent event, worker to coordinator.
    Event,
    /// The task's result, worker to coordinator.
    Result,
    /// A sign of life, both ways.
    Heartbeat,
    /// A request to stop, coordinator to worker.
    Cancel,
    /// A payload stream begins.
    PayloadStart,
    /// Bytes of a payload stream.
    PayloadChunk,
    /// A payload stream ends.
    PayloadEnd,
    /// A store call for the task's recorded run, worker to coordinator.
    StoreCall,
    /// The answer to a store call, coordinator to worker.
    StoreReply,
    /// A model call, worker to coordinator.
    ModelCall,
    /// An answer to a model call, coordinator to worker.
    ModelReply,
    /// A model call no longer wanted, worker to coordinator.
    ModelCancel,
}

impl FrameType {
    /// Every frame type.
    pub const ALL: [FrameType; 13] = [
        FrameType::Task,
        FrameType::Event,
        FrameType::Result,
        FrameType::Heartbeat,
        FrameType::Cancel,
        FrameType::PayloadStart,
        FrameType::PayloadChunk,
        FrameType::PayloadEnd,
        FrameType::StoreCall,
        FrameType::StoreReply,
        FrameType::ModelCall,
        FrameType::ModelReply,
        FrameType::ModelCancel,
    ];

    /// The type byte.
    pub fn code(self) -> u8 {
        match self {
            FrameType::Task => 0x01,
            FrameType::Event => 0x02,
            FrameType::Result => 0x03,
            FrameType::Heartbeat => 0x04,
            FrameType::Cancel => 0x05,
            FrameType::PayloadStart => 0x10,
            FrameType::PayloadChunk => 0x11,
            FrameType::PayloadEnd => 0x12,
            FrameType::StoreCall => 0x20,
            FrameType::StoreReply => 0x21,
            FrameType::ModelCall => 0x30,
            FrameType::ModelReply => 0x31,
            FrameType::ModelCancel => 0x32,
        }
    }

    /// The type of type byte `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        FrameType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The type's name, as errors quote it.
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Task => "task",
            FrameType::Event => "event",
            FrameType::Result => "result",
            FrameType::Heartbeat => "heartbeat",
            FrameType::Cancel => "cancel",
            FrameType::PayloadStart => "payload_start",
            FrameType::PayloadChunk => "payload_chunk",
            FrameType::PayloadEnd => "payload_end",
            FrameType::StoreCall => "store_call",
            FrameType::StoreReply => "store_reply",
            FrameType::ModelCall => "model_call",
            FrameType::ModelReply => "model_reply",
            FrameType::ModelCancel => "model_cancel",
        }
    }
}

/// The first frame of a payload stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadStart {
    /// The stream's id, unique in its direction of one connection.
    pub stream_id: u32,
    /// A plain file name.
    pub name: String,
    /// The payload's length, when known in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_len: Option<u64>,
    /// Whether the end frame carries the stream's SHA-256 (so the receiver hashes what
    /// arrives).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checksum: bool,
}

/// The last frame of a payload stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayloadEnd {
    /// The stream's id.
    pub stream_id: u32,
    /// The SHA-256 of every byte of the stream, hex, for the receiver to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// One message of the protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// A task for the worker.
    Task(Box<AgentTask>),
    /// An event of the worker's run.
    Event(Box<AgentEvent>),
    /// The worker's result.
    Result(Box<AgentResult>),
    /// A sign of life.
    Heartbeat,
    /// Stop the task.
    Cancel {
        /// Why, when the canceller said.
        reason: Option<String>,
    },
    /// A payload stream begins.
    PayloadStart(PayloadStart),
    /// Bytes of a payload stream (raw, not JSON).
    PayloadChunk {
        /// The stream.
        stream_id: u32,
        /// The bytes.
        bytes: Bytes,
    },
    /// A payload stream ends.
    PayloadEnd(PayloadEnd),
    /// A store call for the task's recorded run.
    StoreCall(Box<StoreCall>),
    /// The answer to a store call.
    StoreReply(Box<StoreReply>),
    /// A model call of the worker's agent.
    ModelCall(Box<ModelCall>),
    /// An answer to a model call.
    ModelReply(Box<ModelReply>),
    /// A model call whose response is no longer wanted.
    ModelCancel(ModelCancel),
}

impl Frame {
    /// The frame's type.
    pub fn frame_type(&self) -> FrameType {
        match self {
            Frame::Task(_) => FrameType::Task,
            Frame::Event(_) => FrameType::Event,
            Frame::Result(_) => FrameType::Result,
            Frame::Heartbeat => FrameType::Heartbeat,
            Frame::Cancel { .. } => FrameType::Cancel,
            Frame::PayloadStart(_) => FrameType::PayloadStart,
            Frame::PayloadChunk { .. } => FrameType::PayloadChunk,
            Frame::PayloadEnd(_) => FrameType::PayloadEnd,
            Frame::StoreCall(_) => FrameType::StoreCall,
            Frame::StoreReply(_) => FrameType::StoreReply,
            Frame::ModelCall(_) => FrameType::ModelCall,
            Frame::ModelReply(_) => FrameType::ModelReply,
            Frame::ModelCancel(_) => FrameType::ModelCancel,
        }
    }

    /// A task frame.
    pub fn task(task: AgentTask) -> Self {
        Frame::Task(Box::new(task))
    }

    /// An event frame.
    pub fn event(event: AgentEvent) -> Self {
        Frame::Event(Box::new(event))
    }

    /// A result frame.
    pub fn result(result: AgentResult) -> Self {
        Frame::Result(Box::new(result))
    }
}
