//! One attempt: a worker process started, given its task and inputs, and watched until it
//! sends its result, exits, hangs, times out, breaks the protocol or the policy.

use super::child::{WorkerChild, describe_exit, kill_group, leader_exited};
use super::config::WorkerConfig;
use super::error::AttemptError;
use super::outcome::{AttemptReport, ReceivedArtifact};
use super::policy::ToolGuard;
use super::rss::peak_rss_kib;
use super::store_host::StoreHost;
use crate::ipc::{
    AgentResult, AgentTask, Frame, FrameCodec, FrameSender, PayloadEnd, PayloadError, PayloadReceiver, PayloadSource,
    PayloadStart, frame_reader, hex, send_payload, spawn_writer,
};
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_team::EventSink;

/// How long a worker that closed its output has to exit before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The most model calls one worker may have going at once. Its agent makes one at a time
/// (a compaction's summary, another): a worker that makes more is not an agent at work,
/// and is stopped before it spends the coordinator's key on them.
pub(crate) const MAX_MODEL_CALLS: usize = 4;

/// An input payload of a task, under the stream id the task names it by.
#[derive(Clone, Debug)]
pub(crate) struct StreamedInput {
    pub(crate) stream_id: u32,
    pub(crate) name: String,
    pub(crate) source: PayloadSource,
}

/// What one attempt needs.
pub(crate) struct Attempt<'a> {
    pub(crate) config: &'a WorkerConfig,
    pub(crate) task: &'a AgentTask,
    pub(crate) inputs: &'a [StreamedInput],
    pub(crate) events: Option<&'a EventSink>,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) number: u32,
    /// Answers the worker's store calls, when the task's run is recorded.
    pub(crate) store: Option<&'a StoreHost>,
}

/// A worker's result and the artifacts it streamed before it.
pub(crate) struct Finished {
    pub(crate) result: AgentResult,
    pub(crate) artifacts: Vec<ReceivedArtifact>,
}

/// How the reading of a worker's output ended.
enum ReadEnd {
    Finished(Finished),
    /// The output ended cleanly between frames, without a result.
    Eof,
    Failed(AttemptError),
}

/// Aborts a task when dropped, so no helper of an attempt outlives it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one attempt to its end; never panics, every problem an [`AttemptError`].
pub(crate) async fn run(attempt: Attempt<'_>) -> (AttemptReport, Result<Finished, AttemptError>) {
    let started = Instant::now();
    let mut report = AttemptReport { attempt: attempt.number, ..AttemptReport::default() };
    let (child, stdin, stdout) = match WorkerChild::spawn(attempt.config) {
        Ok(spawned) => spawned,
        Err(source) => {
            let error = AttemptError::Spawn { command: attempt.config.command.display().to_string(), source };
            report.error = Some(error.to_string());
            return (report, Err(error));
        }
    };
    let pid = child.pid();
    report.pid = Some(pid);
    tracing::debug!(pid, attempt = attempt.number, task = %attempt.task.task_id, "worker started");

    let codec = FrameCodec::new();
    let (frames_out, writer) = spawn_writer(stdin, codec);
    let _writer = AbortOnDrop(writer);
    // The task is the first frame, before any heartbeat.
    let _ = frames_out.send(Frame::task(attempt.task.clone())).await;
    let inputs = attempt.inputs.to_vec();
    let sender = AbortOnDrop(tokio::spawn(send_inputs(frames_out.clone(), inputs, !attempt.task.skip_checksums)));
    let _heartbeats = AbortOnDrop(tokio::spawn(heartbeats(frames_out.clone(), attempt.config.heartbeat_interval)));

    let mut reader = Reader {
        attempt: &attempt,
        frames_out: &frames_out,
        guard: ToolGuard::new(attempt.task.tools.clone()),
        artifacts: HashMap::new(),
        received: Vec::new(),
        events: 0,
        pid,
        peak_rss_kib: None,
        model_calls: HashMap::new(),
    };
    let end = reader.read(frame_reader(stdout, codec), sender, started).await;
    report.events = reader.events;
    let peak_rss_kib = reader.peak_rss_kib;
    drop(reader);
    drop(frames_out);
    let grace = match &end {
        ReadEnd::Failed(_) => Duration::ZERO,
        ReadEnd::Finished(_) | ReadEnd::Eof => EXIT_GRACE,
    };
    report.peak_rss_kib = peak_rss_kib;
    let (status, stderr) = child.finish(grace).await;
    let exit = describe_exit(status);
    report.exit = Some(exit.clone());
    report.duration = started.elapsed();
    let outcome = match end {
        ReadEnd::Finished(finished) => Ok(finished),
        ReadEnd::Eof => Err(AttemptError::Exited { exit, stderr }),
        ReadEnd::Failed(error) => Err(error),
    };
    if let Err(error) = &outcome {
        report.error = Some(error.to_string());
        tracing::debug!(pid, attempt = attempt.number, %error, "worker attempt failed");
    }
    (report, outcome)
}

/// Streams the task's inputs after it.
async fn send_inputs(frames: FrameSender, inputs: Vec<StreamedInput>, checksum: bool) -> Result<(), PayloadError> {
    for input in &inputs {
        send_payload(&frames, input.stream_id, &input.name, &input.source, checksum).await?;
    }
    Ok(())
}

/// Sends a heartbeat every `interval`, skipping one when frames are queued anyway.
async fn heartbeats(frames: FrameSender, interval: Duration) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if frames.is_closed() {
            return;
        }
        let _ = frames.try_send(Frame::Heartbeat);
    }
}

/// An artifact stream being received: into a file, or counted and dropped.
enum Incoming {
    File(PayloadReceiver),
    Dropped { name: String, len: u64, hasher: Option<Box<Sha256>> },
}

/// The coordinator's side of one worker's output.
struct Reader<'a, 'b> {
    attempt: &'a Attempt<'b>,
    frames_out: &'a FrameSender,
    guard: ToolGuard,
    artifacts: HashMap<u32, Incoming>,
    received: Vec<ReceivedArtifact>,
    events: u64,
    pid: u32,
    peak_rss_kib: Option<u64>,
    /// The worker's model calls being made, by number: ended with the attempt.
    model_calls: HashMap<u64, (AbortOnDrop<()>, CancellationToken)>,
}

impl Reader<'_, '_> {
    async fn read<R>(
        &mut self,
        mut frames: crate::ipc::FrameReader<R>,
        sender: AbortOnDrop<Result<(), PayloadError>>,
        started: Instant,
    ) -> ReadEnd
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        let config = self.attempt.config;
        let deadline = later(started, config.timeout);
        let silence = config.silence_limit();
        let mut last_frame = Instant::now();
        let mut cancelled_at: Option<Instant> = None;
        let mut sender = Some(sender);
        // A process the worker started may hold its stdout open after the worker died:
        // the worker's own exit, seen here, kills the group so the output ends.
        let mut leader_watch = tokio::time::interval(Duration::from_millis(50));
        leader_watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut leader_gone_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return ReadEnd::Failed(AttemptError::TimedOut { after: config.timeout });
            }
            // Once the worker is dead, only the end of its output is awaited, not a heartbeat.
            let hang_at = if leader_gone_at.is_some() { deadline } else { later(last_frame, silence) };
            let output_end_by = leader_gone_at.map(|at| at + EXIT_GRACE);
            let cancel_at = cancelled_at.map(|at| later(at, config.cancel_grace));
            tokio::select! {
                biased;
                () = self.attempt.cancel.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(Instant::now());
                    // Inputs still streaming are no longer needed; the cancel goes out
                    // behind the frames already queued.
                    sender = None;
                    let frames_out = self.frames_out.clone();
                    tokio::spawn(async move {
                        let reason = Some("cancelled by the coordinator".to_owned());
                        let _ = frames_out.send(Frame::Cancel { reason }).await;
                    });
                }
                () = sleep_until_some(cancel_at) => {
                    return ReadEnd::Failed(AttemptError::Cancelled {
                        reason: Some("the worker did not stop within its grace period".to_owned()),
                    });
                }
                joined = join_some(&mut sender) => {
                    sender = None;
                    match joined {
                        Ok(Ok(())) => {}
                        // A closed channel means the worker is gone: its output says why.
                        Ok(Err(PayloadError::ChannelClosed { .. })) => {}
                        Ok(Err(error)) => return ReadEnd::Failed(AttemptError::Input(error)),
                        Err(error) => {
                            return ReadEnd::Failed(AttemptError::Unexpected(format!("the input task failed: {error}")));
                        }
                    }
                }
                frame = frames.next() => {
                    match frame {
                        None => return ReadEnd::Eof,
                        Some(Err(error)) => return ReadEnd::Failed(AttemptError::Protocol(error)),
                        Some(Ok(frame)) => {
                            if let Some(end) = self.handle(frame).await {
                                return end;
                            }
                        }
                    }
                    // Time spent handing events to a slow consumer is not the worker's silence.
                    last_frame = Instant::now();
                }
                _ = leader_watch.tick(), if leader_gone_at.is_none() => {
                    self.sample_rss();
                    if leader_exited(self.pid) {
                        leader_gone_at = Some(Instant::now());
                        kill_group(self.pid);
                    }
                }
                () = sleep_until_some(output_end_by) => return ReadEnd::Eof,
                () = tokio::time::sleep_until(hang_at) => {
                    return ReadEnd::Failed(AttemptError::Hung { silent: silence, missed: config.missed_heartbeats });
                }
                () = tokio::time::sleep_until(deadline) => {
                    return ReadEnd::Failed(AttemptError::TimedOut { after: config.timeout });
                }
            }
        }
    }

    /// Handles one frame; `Some` when the attempt ends with it.
    async fn handle(&mut self, frame: Frame) -> Option<ReadEnd> {
        match frame {
            Frame::Heartbeat => None,
            Frame::Event(event) => {
                if let Err(tool) = self.guard.check(&event) {
                    return Some(ReadEnd::Failed(AttemptError::DeniedTool { tool }));
                }
                self.events += 1;
                if let Some(sink) = self.attempt.events {
                    // A closed sink means nobody watches: the task goes on.
                    let _ = sink.send(*event).await;
                }
                None
            }
            Frame::PayloadStart(start) => self.start_artifact(start).await.err().map(ReadEnd::Failed),
            Frame::PayloadChunk { stream_id, bytes } => {
                self.artifact_chunk(stream_id, bytes).await.err().map(ReadEnd::Failed)
            }
            Frame::PayloadEnd(end) => self.end_artifact(&end).await.err().map(ReadEnd::Failed),
            Frame::Result(result) => Some(self.finish(*result)),
            Frame::StoreCall(call) => {
                let Some(host) = self.attempt.store else {
                    return Some(ReadEnd::Failed(AttemptError::Unexpected(
                        "the worker made a store call, but its task records no run".to_owned(),
                    )));
                };
                // Answered in order, before the next frame: a run's writes are sequential.
                let reply = host.answer(*call).await;
                // A closed channel means the worker is gone: its output says why.
                let _ = self.frames_out.send(Frame::StoreReply(Box::new(reply))).await;
                None
            }
            Frame::ModelCall(call) => self.model_call(*call).err().map(ReadEnd::Failed),
            Frame::ModelCancel(cancel) => {
                // The call ends with what it spent counted; its answer goes unread.
                if let Some((_, stop)) = self.model_calls.get(&cancel.id) {
                    stop.cancel();
                }
                None
            }
            other @ (Frame::Task(_) | Frame::Cancel { .. } | Frame::StoreReply(_) | Frame::ModelReply(_)) => {
                Some(ReadEnd::Failed(AttemptError::Unexpected(format!(
                    "a worker never sends a {} frame",
                    other.frame_type().name()
                ))))
            }
        }
    }

    /// Starts making the worker's model call `call`: its answers go out as they come,
    /// while the worker's other frames are read.
    fn model_call(&mut self, call: crate::ipc::ModelCall) -> Result<(), AttemptError> {
        let Some(host) = &self.attempt.config.models else {
            return Err(AttemptError::Unexpected(
                "the worker made a model call, but its task hosts no model".to_owned(),
            ));
        };
        self.model_calls.retain(|_, (task, _)| !task.0.is_finished());
        if self.model_calls.contains_key(&call.id) {
            return Err(AttemptError::Unexpected(format!("the worker made model call {} twice", call.id)));
        }
        if self.model_calls.len() >= MAX_MODEL_CALLS {
            return Err(AttemptError::Unexpected(format!(
                "the worker made more than {MAX_MODEL_CALLS} model calls at once"
            )));
        }
        let (id, host, frames, stop) =
            (call.id, std::sync::Arc::clone(host), self.frames_out.clone(), CancellationToken::new());
        let cancel = stop.clone();
        let task = tokio::spawn(async move { host.answer(call, &frames, cancel).await });
        self.model_calls.insert(id, (AbortOnDrop(task), stop));
        Ok(())
    }

    async fn start_artifact(&mut self, start: PayloadStart) -> Result<(), AttemptError> {
        if self.artifacts.contains_key(&start.stream_id) {
            return Err(AttemptError::Artifact(PayloadError::DuplicateStream { stream_id: start.stream_id }));
        }
        let incoming = match &self.attempt.config.artifact_dir {
            Some(dir) => Incoming::File(PayloadReceiver::create(&start, dir).await.map_err(AttemptError::Artifact)?),
            None => Incoming::Dropped {
                name: start.name.clone(),
                len: 0,
                hasher: start.checksum.then(|| Box::new(Sha256::new())),
            },
        };
        self.artifacts.insert(start.stream_id, incoming);
        Ok(())
    }

    async fn artifact_chunk(&mut self, stream_id: u32, bytes: Bytes) -> Result<(), AttemptError> {
        match self.artifacts.get_mut(&stream_id) {
            None => Err(AttemptError::Artifact(PayloadError::UnknownStream { stream_id })),
            Some(Incoming::File(receiver)) => receiver.write(bytes).await.map_err(AttemptError::Artifact),
            Some(Incoming::Dropped { len, hasher, .. }) => {
                if let Some(hasher) = hasher {
                    hasher.update(&bytes);
                }
                *len += bytes.len() as u64;
                Ok(())
            }
        }
    }

    async fn end_artifact(&mut self, end: &PayloadEnd) -> Result<(), AttemptError> {
        let stream_id = end.stream_id;
        let artifact = match self.artifacts.remove(&stream_id) {
            None => return Err(AttemptError::Artifact(PayloadError::UnknownStream { stream_id })),
            Some(Incoming::File(receiver)) => {
                let summary = receiver.finish(end).await.map_err(AttemptError::Artifact)?;
                ReceivedArtifact { name: summary.name, len: summary.len, sha256: summary.sha256, path: summary.path }
            }
            Some(Incoming::Dropped { name, len, hasher }) => {
                tracing::warn!(artifact = %name, len, "no artifact directory is configured: the artifact was dropped");
                let sha256 = hasher.map(|h| hex(&h.finalize()));
                if let (Some(expected), Some(got)) = (&end.sha256, &sha256)
                    && !expected.eq_ignore_ascii_case(got)
                {
                    let error = PayloadError::ChecksumMismatch { name, expected: expected.clone(), got: got.clone() };
                    return Err(AttemptError::Artifact(error));
                }
                ReceivedArtifact { name, len, sha256, path: None }
            }
        };
        self.received.push(artifact);
        Ok(())
    }

    /// Keeps the worker's peak memory so far; read while it runs, since a process that
    /// has exited no longer reports it.
    fn sample_rss(&mut self) {
        if let Some(now) = peak_rss_kib(self.pid) {
            self.peak_rss_kib = Some(self.peak_rss_kib.map_or(now, |before| before.max(now)));
        }
    }

    fn finish(&mut self, result: AgentResult) -> ReadEnd {
        self.sample_rss();
        if result.task_id != self.attempt.task.task_id {
            return ReadEnd::Failed(AttemptError::Unexpected(format!(
                "the result is for task `{}`, not `{}`",
                result.task_id, self.attempt.task.task_id
            )));
        }
        if let Some(open) = self.artifacts.keys().next() {
            return ReadEnd::Failed(AttemptError::Unexpected(format!(
                "the result came before artifact stream {open} ended"
            )));
        }
        ReadEnd::Finished(Finished { result, artifacts: std::mem::take(&mut self.received) })
    }
}

/// Sleeps until `at`, or forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The task's output once it ends, or never when there is none.
async fn join_some<T>(task: &mut Option<AbortOnDrop<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(task) => (&mut task.0).await,
        None => std::future::pending().await,
    }
}

/// `at` + `by`; a time past what an `Instant` holds (a timeout read from a file can be any
/// number) is thirty years on, which no attempt outlives.
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by).unwrap_or_else(|| at + Duration::from_secs(30 * 365 * 86_400))
}
