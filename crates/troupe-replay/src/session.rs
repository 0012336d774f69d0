//! What one replay knows as it goes: how far it got, the call ids it maps, and the first
//! divergence, shared by the substituted model, the substituted tools and the driver.

use crate::divergence::{Divergence, DivergenceKind};
use crate::recording::Recording;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

/// The state of one replay.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) recording: Arc<Recording>,
    progress: Mutex<Progress>,
    /// Tripped at the first divergence: the replay stops there.
    pub(crate) stop: CancellationToken,
    /// The replayed run's signals, once it started: what the recorded inputs are sent by.
    pub(crate) signals: tokio::sync::watch::Sender<Option<troupe_runtime::SignalSender>>,
}

/// How far a replay got.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Model calls asked for so far (the current step).
    pub(crate) step: u32,
    /// Model calls that went to a live model.
    pub(crate) live_model_calls: u32,
    /// Tool calls answered (from the record or live).
    pub(crate) tool_calls: u32,
    /// This replay's call ids → the recorded run's.
    pub(crate) ids: HashMap<String, String>,
    /// Recorded call ids the replay asked a person about.
    pub(crate) asked: HashSet<String>,
    /// The first divergence.
    pub(crate) divergence: Option<Divergence>,
}

impl Session {
    pub(crate) fn new(recording: Arc<Recording>) -> Arc<Self> {
        Arc::new(Session {
            recording,
            progress: Mutex::default(),
            stop: CancellationToken::new(),
            signals: tokio::sync::watch::Sender::new(None),
        })
    }

    pub(crate) fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes a divergence (only the first counts) and stops the replay.
    pub(crate) fn diverge(&self, kind: DivergenceKind, detail: impl Into<String>) {
        let mut progress = self.progress();
        if progress.divergence.is_none() {
            let step = progress.step.max(1);
            progress.divergence = Some(Divergence { step, kind, detail: detail.into() });
        }
        drop(progress);
        self.stop.cancel();
    }

    pub(crate) fn diverged(&self) -> bool {
        self.progress().divergence.is_some()
    }

    /// Sends the run the inputs the recorded run got for model step `step`: sent while the
    /// step before is answered, they are taken at the same boundary as they were.
    pub(crate) async fn send_inputs(&self, step: u32) {
        let due: Vec<troupe_run::Signal> =
            self.recording.inputs.iter().filter(|i| i.step == step).map(|i| i.signal.clone()).collect();
        if due.is_empty() {
            return;
        }
        // The run may ask for its first model step before its starter has handed over its
        // signals: wait for them.
        let mut watching = self.signals.subscribe();
        let Ok(signals) = watching.wait_for(Option::is_some).await.map(|s| s.clone()) else { return };
        let Some(signals) = signals else { return };
        for signal in due {
            // A run that ended takes no more input: the comparison says what follows.
            let _ = signals.send(signal).await;
        }
    }

    /// The recorded call id of this replay's `call_id`.
    pub(crate) fn recorded_id(&self, call_id: &str) -> Option<String> {
        self.progress().ids.get(call_id).cloned()
    }
}
