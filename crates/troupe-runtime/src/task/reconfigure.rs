//! A run taking its agent's changed configuration at a safe boundary.
//!
//! Only the boundary calls [`Run::take_revision`]: before a model call, between tool
//! batches, and when a wait for approval is woken by a new revision. Never inside a model
//! response (whose request was built by the spec then in force) nor between a tool call
//! and its result, so every request is made by one configuration from end to end.

use super::Run;
use crate::live_spec::{LiveSpec, SpecRevision, SpecUpdate, changed_fields};
use crate::middleware::RateQuotas;
use std::sync::Arc;
use tokio::sync::watch;
use troupe_core::AgentEventKind;
use troupe_model::ResolvedModel;
use troupe_run::AgentSpec;
use troupe_run::AppliedSpec;
use troupe_run::RunState;
use troupe_run::machine::Input;

/// A run's view of its agent's live spec.
pub(crate) struct LiveFeed {
    /// The live spec's identity.
    source: String,
    rx: watch::Receiver<Arc<SpecRevision>>,
    /// The rate quotas the run last knew of.
    rate_quotas: RateQuotas,
}

/// The spec a run launches with, and its feed of later revisions.
///
/// A run that applied a change carries it in its state and goes on with it when resumed,
/// whatever spec it is resumed with; a resume through the same live spec that has moved
/// on since takes the newer revision at its first boundary.
pub(crate) fn launch_spec(
    given: Arc<AgentSpec>,
    state: &RunState,
    live: Option<&LiveSpec>,
) -> (Arc<AgentSpec>, Option<LiveFeed>) {
    let mut feed = live.map(|live| LiveFeed {
        source: live.id().to_owned(),
        rx: live.subscribe(),
        rate_quotas: live.current().rate_quotas,
    });
    let Some(applied) = &state.applied_spec() else { return (given, feed) };
    if let (Some(feed), Some(live)) = (&mut feed, live)
        && applied.source == feed.source
        && applied.revision < live.revision()
    {
        feed.rx.mark_changed();
    }
    (Arc::new(applied.apply_to(&given)), feed)
}

/// Waits for a revision the run has not taken; forever when there is no live spec or it
/// is gone (the agent was dropped: its configuration can no longer change).
pub(crate) async fn next_revision(live: &mut Option<LiveFeed>) {
    let Some(feed) = live else { return std::future::pending().await };
    if feed.rx.changed().await.is_ok() {
        // `changed` marks the revision seen; the boundary is the one to take it.
        feed.rx.mark_changed();
        return;
    }
    *live = None;
    std::future::pending().await
}

impl Run {
    /// Applies the latest revision of the agent's spec, if the run has not yet: the
    /// instructions, the model (once it resolves), the limits and the time limit. Emits
    /// `ConfigChanged` with what changed and records it in the state (checkpointed, with a
    /// store); a model that does not resolve is kept out with a `config_rejected` event.
    pub(super) async fn take_revision(&mut self, state: &mut RunState, model: &mut ResolvedModel) {
        let Some(feed) = &mut self.live else { return };
        match feed.rx.has_changed() {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                self.live = None;
                return;
            }
        }
        let revision = Arc::clone(&feed.rx.borrow_and_update());
        if state.is_finished() {
            return;
        }
        let mut next = SpecUpdate::from_spec(&revision.spec).apply_to(&self.spec);
        let mut changed = changed_fields(&self.spec, &next);
        if revision.rate_quotas != feed.rate_quotas {
            // The limiter itself changed when the revision was made; it is consulted only
            // before a call, after a boundary like this one.
            feed.rate_quotas = revision.rate_quotas;
            changed.push("rate_limit".to_owned());
        }
        let source = feed.source.clone();
        if next.model != self.spec.model {
            match self.resolver.resolve(&next.model) {
                Ok(resolved) => {
                    let (id, name) = (resolved.id.clone(), resolved.model.clone());
                    self.learn(state, Input::ModelResolved { id, name });
                    *model = resolved;
                }
                Err(error) => {
                    tracing::warn!(
                        run = %state.run_id(), model = %next.model, %error,
                        "the new model does not resolve; the run keeps its model"
                    );
                    let value = serde_json::json!({
                        "revision": revision.revision,
                        "field": "model",
                        "model": next.model,
                        "kept": self.spec.model,
                        "error": error.to_string(),
                        "code": error.code(),
                    });
                    self.emitter.emit(AgentEventKind::Custom { name: "config_rejected".into(), value }).await;
                    next.model.clone_from(&self.spec.model);
                    changed.retain(|field| field != "model");
                }
            }
        }
        if changed.is_empty() {
            return;
        }
        if next.limits.timeout != self.spec.limits.timeout {
            // Counted from when this process took the run up, like the first one; one
            // already passed ends the run at this boundary.
            self.deadline = next.limits.timeout.and_then(|timeout| self.launched.checked_add(timeout));
        }
        tracing::info!(run = %state.run_id(), revision = revision.revision, ?changed, "the run's configuration changed");
        self.learn(state, Input::SpecApplied(AppliedSpec::of(&source, revision.revision, &next)));
        self.spec = Arc::new(next);
        self.emitter.emit(AgentEventKind::ConfigChanged { revision: revision.revision, changed }).await;
        self.checkpoint(state, Vec::new()).await;
    }
}
