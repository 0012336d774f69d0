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
        Arc::new(Session { recording, progress: Mutex::default(), stop: CancellationToken::new() })
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

    /// The recorded call id of this replay's `call_id`.
    pub(crate) fn recorded_id(&self, call_id: &str) -> Option<String> {
        self.progress().ids.get(call_id).cloned()
    }
}
