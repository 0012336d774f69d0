//! The writing half of a connection as a task fed by a bounded channel, and the reading
//! half as a stream of frames.

use super::codec::FrameCodec;
use super::error::IpcError;
use super::frame::Frame;
use futures::SinkExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

/// How many frames may wait for the writer: with 1 MiB chunks, the memory a sender can
/// tie up in the channel.
pub const WRITE_QUEUE: usize = 4;

/// The frames read from `io`.
pub type FrameReader<R> = FramedRead<R, FrameCodec>;

/// Reads frames from `io` with `codec`.
pub fn frame_reader<R: AsyncRead>(io: R, codec: FrameCodec) -> FrameReader<R> {
    FramedRead::with_capacity(io, codec, 64 * 1024)
}

/// Sends frames to the writer task.
pub type FrameSender = mpsc::Sender<Frame>;

/// Starts the task that writes every frame sent to the returned [`FrameSender`] to `io`,
/// in order. A sender waits while [`WRITE_QUEUE`] frames are queued (backpressure up to
/// the channel); the task flushes whenever the queue runs dry, and ends, flushed, once
/// every sender is gone, or at the first write error.
pub fn spawn_writer<W>(io: W, codec: FrameCodec) -> (FrameSender, JoinHandle<Result<(), IpcError>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Frame>(WRITE_QUEUE);
    let task = tokio::spawn(async move {
        let mut sink = FramedWrite::new(io, codec);
        while let Some(frame) = rx.recv().await {
            sink.feed(frame).await?;
            if rx.is_empty() {
                sink.flush().await?;
            }
        }
        sink.close().await
    });
    (tx, task)
}

/// The process's standard input and output as async pipes, for a worker.
///
/// Where they are pipes (as a coordinator starts a worker), they are read and written
/// without a blocking thread in between; otherwise through Tokio's stdio. Both must be
/// called inside a Tokio runtime.
pub mod stdio {
    use std::os::fd::AsFd;
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite};

    /// Standard input, for reading frames.
    pub fn input() -> Pin<Box<dyn AsyncRead + Send>> {
        let piped =
            std::io::stdin().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
        match piped {
            Ok(pipe) => Box::pin(pipe),
            Err(_) => Box::pin(tokio::io::stdin()),
        }
    }

    /// Standard output, for writing frames.
    pub fn output() -> Pin<Box<dyn AsyncWrite + Send>> {
        let piped =
            std::io::stdout().as_fd().try_clone_to_owned().and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
        match piped {
            Ok(pipe) => Box::pin(pipe),
            Err(_) => Box::pin(tokio::io::stdout()),
        }
    }
}
