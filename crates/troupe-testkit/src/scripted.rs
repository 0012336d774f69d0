//! [`ScriptedModel`]: an in-process [`LlmProvider`] replaying scripted turns.

use crate::script::MockTurn;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use troupe_core::ModelRequest;
use troupe_model::{Error, EventStream, LlmProvider, Result};

/// Replays [`MockTurn`]s in order without any network, recording each request.
///
/// Faults of the turns are not simulated here (they are HTTP-level); use the
/// [`MockLlmServer`](crate::MockLlmServer) for those.
#[derive(Clone, Default)]
pub struct ScriptedModel {
    name: String,
    turns: Arc<Mutex<VecDeque<MockTurn>>>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl ScriptedModel {
    /// A model that will answer with `turns`, in order.
    pub fn new(turns: impl IntoIterator<Item = MockTurn>) -> Self {
        ScriptedModel {
            name: "scripted".into(),
            turns: Arc::new(Mutex::new(turns.into_iter().collect())),
            requests: Arc::default(),
        }
    }

    /// Queues another turn.
    pub fn push(&self, turn: MockTurn) {
        self.turns.lock().unwrap_or_else(|p| p.into_inner()).push_back(turn);
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl LlmProvider for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        async move {
            self.requests.lock().unwrap_or_else(|p| p.into_inner()).push(request.clone());
            let turn = self.turns.lock().unwrap_or_else(|p| p.into_inner()).pop_front().ok_or_else(|| {
                Error::InvalidRequest {
                    provider: self.name.clone(),
                    status: 500,
                    message: "no scripted turn left".into(),
                }
            })?;
            let delay = turn.event_delay;
            let events = turn.stream_events();
            let stream = futures::stream::unfold(
                (events.into_iter(), cancel, delay),
                |(mut events, cancel, delay)| async move {
                    if cancel.is_cancelled() {
                        return None;
                    }
                    let event = events.next()?;
                    if let Some(delay) = delay {
                        tokio::select! {
                            _ = cancel.cancelled() => return Some((Err(Error::Cancelled), (events, cancel, None))),
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                    Some((Ok(event), (events, cancel, delay)))
                },
            );
            Ok(stream.boxed())
        }
        .boxed()
    }
}
