//! The protocol between a coordinator and a worker process, over the worker's stdin and
//! stdout: length-delimited [`Frame`]s.
//!
//! Each frame is a 4-byte big-endian payload length, a type byte and the payload (see
//! [`frame`] for the table). A header announcing more than the codec's maximum (16 MiB by
//! default) is refused at once ([`IpcError::FrameTooLarge`]), a stream ending inside a
//! frame is [`IpcError::Truncated`], and a payload that is not what its type requires is
//! [`IpcError::Malformed`], quoting only its first bytes.
//!
//! A session, coordinator (C) and worker (W):
//!
//! ```text
//! C → W  task                      the AgentTask, naming the payload streams that follow
//! C → W  payload_start/chunk…/end  each input payload, 1 MiB chunks, SHA-256 at the end
//! W → C  event…                    the run's AgentEvents (the first: the sandbox report)
//! W → C  payload_start/chunk…/end  each artifact
//! W → C  result                    the AgentResult; then the worker exits
//! both   heartbeat                 every interval; silence for N intervals means hung
//! C → W  cancel                    stop: the worker cancels its run and sends its result
//! W → C  store_call                when the task names a run to record: a call on the
//! C → W  store_reply                 coordinator's store for it, answered by its number
//! W → C  model_call                when the task names hosted models: a call of the
//! C → W  model_reply…                agent's model, made by the coordinator; its answers
//! W → C  model_cancel                (accepted, events, end or failed) by its number
//! ```
//!
//! Payload bytes travel raw (not JSON) and are written to files as they arrive, so a
//! payload of any size needs a few chunks of memory on each side.

pub mod channel;
mod codec;
mod error;
pub mod frame;
pub mod model;
mod payload;
mod result;
pub mod store;
mod task;

pub use channel::{FrameReader, FrameSender, WRITE_QUEUE, frame_reader, spawn_writer};
pub use codec::FrameCodec;
pub use error::{IpcError, PayloadError};
pub use frame::{CHUNK_LEN, Frame, FrameType, HEADER_LEN, MAX_FRAME_LEN, PayloadEnd, PayloadStart};
pub use model::{HostedModel, ModelAnswer, ModelCall, ModelCancel, ModelReply, WireModelError};
pub use payload::{PayloadReceiver, PayloadSource, PayloadSummary, is_plain_file_name, send_payload};
pub use result::{AgentResult, ArtifactRef, ResultMetrics};
pub use store::{StoreCall, StoreReply};
pub use task::{AgentTask, PayloadRef, TaskInput, TaskOutputs, ToolPolicy};

pub(crate) use payload::hex;
