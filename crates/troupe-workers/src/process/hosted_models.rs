//! [`HostedModels`]: the models a worker's agent calls through its coordinator, as a
//! [`ModelResolver`] whose providers send [`ModelCall`] frames. The worker holds no
//! provider key and opens no connection to a vendor: the coordinator makes each call,
//! under the team's budget, and streams the response back.

use crate::ipc::{Frame, FrameSender, HostedModel, ModelAnswer, ModelCall, ModelCancel, ModelReply};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender, WeakSender};
use tokio_util::sync::CancellationToken;
use troupe_core::ModelRequest;
use troupe_model::{Error as ModelError, EventStream, LlmProvider, ResolvedModel};
use troupe_runtime::ModelResolver;

/// The calls waiting for answers, by number; `None` once the coordinator is gone.
type Waiting = Arc<Mutex<Option<HashMap<u64, UnboundedSender<ModelAnswer>>>>>;

/// Where answers to the worker's model calls are delivered: the worker's frame reader
/// hands each [`ModelReply`] here.
#[derive(Clone)]
pub(crate) struct ModelRoute {
    waiting: Waiting,
}

impl ModelRoute {
    /// Delivers `reply` to the call it answers (an answer to a call nobody waits for any
    /// more is dropped).
    pub(crate) fn deliver(&self, reply: ModelReply) {
        let sender = self.waiting.lock().ok().and_then(|w| w.as_ref().and_then(|w| w.get(&reply.id).cloned()));
        if let Some(sender) = sender {
            let _ = sender.send(reply.answer);
        }
    }

    /// The coordinator is gone: every waiting call, and every later one, fails.
    pub(crate) fn close(&self) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.take();
        }
    }
}

/// The link to the coordinator the providers share.
struct Link {
    /// Weak: a provider must not keep the worker's output open after its task ends.
    frames: WeakSender<Frame>,
    next: AtomicU64,
    waiting: Waiting,
}

impl Link {
    /// Registers a new call: its number and where its answers arrive.
    fn open(&self) -> Result<(u64, UnboundedReceiver<ModelAnswer>), ModelError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut waiting = self.waiting.lock().map_err(|_| gone())?;
        waiting.as_mut().ok_or_else(gone)?.insert(id, tx);
        Ok((id, rx))
    }

    fn forget(&self, id: u64) {
        if let Ok(mut waiting) = self.waiting.lock()
            && let Some(waiting) = waiting.as_mut()
        {
            waiting.remove(&id);
        }
    }
}

/// The models the coordinator serves this worker.
pub(crate) struct HostedModels {
    models: Vec<HostedModel>,
    link: Arc<Link>,
}

impl HostedModels {
    /// The resolver of `models`, sending its calls through `frames`, and the route for
    /// their answers.
    pub(crate) fn new(models: Vec<HostedModel>, frames: &FrameSender) -> (Self, ModelRoute) {
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let route = ModelRoute { waiting: Arc::clone(&waiting) };
        let link = Arc::new(Link { frames: frames.downgrade(), next: AtomicU64::new(1), waiting });
        (HostedModels { models, link }, route)
    }
}

impl ModelResolver for HostedModels {
    fn resolve(&self, model: &str) -> troupe_model::Result<ResolvedModel> {
        let wanted = model.trim();
        let Some(hosted) = self.models.iter().find(|m| m.name == wanted || m.id == wanted) else {
            let served: Vec<&str> = self.models.iter().map(|m| m.name.as_str()).collect();
            return Err(ModelError::UnknownModel {
                id: wanted.to_owned(),
                reason: format!("this worker's coordinator serves only {}", served.join(", ")),
            });
        };
        let provider = hosted.id.split_once('/').map_or(hosted.id.as_str(), |(provider, _)| provider).to_owned();
        let provider = HostedProvider { provider, model: hosted.name.clone(), link: Arc::clone(&self.link) };
        Ok(ResolvedModel {
            id: hosted.id.clone(),
            model: hosted.model.clone(),
            provider: Arc::new(provider),
            info: hosted.info.clone(),
        })
    }
}

/// One hosted model, as a provider whose calls the coordinator makes.
struct HostedProvider {
    provider: String,
    /// The model as the task names it, which the coordinator serves.
    model: String,
    link: Arc<Link>,
}

impl LlmProvider for HostedProvider {
    fn name(&self) -> &str {
        &self.provider
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, troupe_model::Result<EventStream>> {
        async move {
            let (id, mut answers) = self.link.open()?;
            let mut call = Pending { id, link: Arc::clone(&self.link), open: true };
            let frames = self.link.frames.upgrade().ok_or_else(gone)?;
            let frame =
                Frame::ModelCall(Box::new(ModelCall { id, model: self.model.clone(), request: request.clone() }));
            frames.send(frame).await.map_err(|_| gone())?;
            drop(frames);
            let first = tokio::select! {
                answer = answers.recv() => answer,
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            match first {
                Some(ModelAnswer::Accepted) => {}
                Some(ModelAnswer::Failed(error)) => {
                    call.open = false;
                    return Err(error.into());
                }
                Some(other) => return Err(out_of_order(&self.provider, &other)),
                None => return Err(gone()),
            }
            let provider = self.provider.clone();
            let events = futures::stream::unfold(Some((answers, call, cancel)), move |state| {
                let provider = provider.clone();
                async move {
                    let (mut answers, mut call, cancel) = state?;
                    let answer = tokio::select! {
                        answer = answers.recv() => answer,
                        () = cancel.cancelled() => return Some((Err(ModelError::Cancelled), None)),
                    };
                    match answer {
                        Some(ModelAnswer::Event(event)) => Some((Ok(event), Some((answers, call, cancel)))),
                        Some(ModelAnswer::End) => {
                            call.open = false;
                            None
                        }
                        Some(ModelAnswer::Failed(error)) => {
                            call.open = false;
                            Some((Err(error.into()), None))
                        }
                        Some(other @ ModelAnswer::Accepted) => Some((Err(out_of_order(&provider, &other)), None)),
                        None => Some((Err(gone()), None)),
                    }
                }
            });
            Ok(events.boxed())
        }
        .boxed()
    }
}

/// A call under way: when it is dropped before its answer ended (the run was cancelled,
/// the stream dropped), the coordinator is told to stop it.
struct Pending {
    id: u64,
    link: Arc<Link>,
    open: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.link.forget(self.id);
        if self.open
            && let Some(frames) = self.link.frames.upgrade()
        {
            // Best effort: a full queue or a gone coordinator leaves nothing to stop.
            let _ = frames.try_send(Frame::ModelCancel(ModelCancel { id: self.id }));
        }
    }
}

fn gone() -> ModelError {
    ModelError::Config("the coordinator is gone: the model cannot be called".to_owned())
}

fn out_of_order(provider: &str, answer: &ModelAnswer) -> ModelError {
    let what = match answer {
        ModelAnswer::Accepted => "accepted the call twice",
        _ => "answered before it accepted the call",
    };
    ModelError::decode(provider, format!("the coordinator {what}"))
}
