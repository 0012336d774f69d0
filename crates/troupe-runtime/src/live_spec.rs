//! [`LiveSpec`]: an agent's configuration that can change while its runs are going.
//!
//! An [`Agent`](crate::Agent) holds its spec as revisions on a `watch` channel. A new run
//! starts with the latest revision; a running run looks for a newer one at each safe
//! boundary (before a model call, between tool batches, while waiting for approval) and
//! takes what can change live: the instructions, the model, the [`Limits`] and the rate
//! limit ([`SpecUpdate`]). It then emits
//! [`ConfigChanged`](troupe_core::AgentEventKind::ConfigChanged) and carries what it applied
//! in its state ([`AppliedSpec`]), so a checkpoint holds it and a resume goes on with it.
//! The tools, the approval policy and the accepted signals stay as the run started.

use crate::middleware::RateQuotas;
use std::sync::Arc;
use tokio::sync::watch;
use troupe_run::{AgentSpec, Limits};

/// A change to the parts of an agent's spec that runs take live; `None` keeps a part as
/// it is.
///
/// ```
/// use troupe_runtime::{AgentSpec, Limits, SpecUpdate};
///
/// let spec = AgentSpec::new("coder", "demo").instructions("Be brief.");
/// let update = SpecUpdate::new().instructions("Be thorough.").limits(Limits { max_usd: Some(0.5), ..Limits::default() });
/// let next = update.apply_to(&spec);
/// assert_eq!(next.instructions, "Be thorough.");
/// assert_eq!(troupe_runtime::changed_fields(&spec, &next), ["instructions", "limits.max_usd"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SpecUpdate {
    /// New system instructions.
    pub instructions: Option<String>,
    /// A new model id; it must resolve, or the model stays as it is.
    pub model: Option<String>,
    /// New limits, all of them (budgets, time, iterations, output tokens).
    pub limits: Option<Limits>,
    /// New quotas for the agent's own [`RateLimit`](crate::RateLimit).
    pub rate_quotas: Option<RateQuotas>,
}

impl SpecUpdate {
    /// A change of nothing yet.
    pub fn new() -> Self {
        SpecUpdate::default()
    }

    /// The live parts of `spec`: its instructions, model and limits.
    pub fn from_spec(spec: &AgentSpec) -> Self {
        SpecUpdate {
            instructions: Some(spec.instructions.clone()),
            model: Some(spec.model.clone()),
            limits: Some(spec.limits.clone()),
            rate_quotas: None,
        }
    }

    /// Sets new instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Sets a new model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets new limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Sets new quotas for the agent's rate limit.
    pub fn rate_quotas(mut self, quotas: RateQuotas) -> Self {
        self.rate_quotas = Some(quotas);
        self
    }

    /// `spec` with this change.
    pub fn apply_to(&self, spec: &AgentSpec) -> AgentSpec {
        let mut next = spec.clone();
        if let Some(instructions) = &self.instructions {
            next.instructions.clone_from(instructions);
        }
        if let Some(model) = &self.model {
            next.model.clone_from(model);
        }
        if let Some(limits) = &self.limits {
            next.limits = limits.clone();
        }
        next
    }
}

/// The live parts that differ between `old` and `new`, by name, in a fixed order:
/// `instructions`, `model`, then each limit as `limits.<field>` (`limits.timeout` for the
/// timeout).
pub fn changed_fields(old: &AgentSpec, new: &AgentSpec) -> Vec<String> {
    let mut changed = Vec::new();
    if old.instructions != new.instructions {
        changed.push("instructions".to_owned());
    }
    if old.model != new.model {
        changed.push("model".to_owned());
    }
    let (a, b) = (&old.limits, &new.limits);
    let limits = [
        ("max_iterations", a.max_iterations != b.max_iterations),
        ("timeout", a.timeout != b.timeout),
        ("max_total_tokens", a.max_total_tokens != b.max_total_tokens),
        ("max_usd", a.max_usd != b.max_usd),
        ("max_output_tokens", a.max_output_tokens != b.max_output_tokens),
        ("max_tokens_recoveries", a.max_tokens_recoveries != b.max_tokens_recoveries),
    ];
    changed.extend(limits.into_iter().filter(|(_, differs)| *differs).map(|(name, _)| format!("limits.{name}")));
    changed
}

/// Checks limits that no run could work by: a dollar budget that is negative or not a
/// number.
pub fn validate_limits(limits: &Limits) -> Result<(), String> {
    match limits.max_usd {
        Some(usd) if !usd.is_finite() || usd < 0.0 => {
            Err(format!("limits.max_usd is {usd}; a budget is a finite number of dollars, 0 or more"))
        }
        _ => Ok(()),
    }
}

/// One revision of a live spec.
#[derive(Clone, Debug)]
pub struct SpecRevision {
    /// The revision: 0 as built, then one more for each change.
    pub revision: u64,
    /// The spec.
    pub spec: Arc<AgentSpec>,
    /// The quotas of the agent's rate limit (unlimited for an agent without one).
    pub rate_quotas: RateQuotas,
    /// What changed from the previous revision ([`changed_fields`], then `rate_limit`).
    pub changed: Vec<String>,
}

/// An agent's spec as revisions that its runs follow; cheap to clone (clones share the
/// revisions).
///
/// [`update`](LiveSpec::update) publishes a change without checking it: a run that
/// cannot resolve a new model keeps its model and says so in a `config_rejected`
/// [`Custom`](troupe_core::AgentEventKind::Custom) event. [`Agent::reconfigure`](crate::Agent::reconfigure)
/// checks a change before publishing it.
///
/// ```
/// use troupe_runtime::{AgentSpec, LiveSpec, SpecUpdate};
///
/// let live = LiveSpec::new(AgentSpec::new("coder", "demo"));
/// assert_eq!(live.revision(), 0);
/// let next = live.update(SpecUpdate::new().instructions("Be brief.")).expect("a change");
/// assert_eq!((next.revision, next.changed.as_slice()), (1, &["instructions".to_owned()][..]));
/// assert!(live.update(SpecUpdate::new().instructions("Be brief.")).is_none(), "nothing changed");
/// assert_eq!(live.spec().instructions, "Be brief.");
/// ```
#[derive(Clone)]
pub struct LiveSpec {
    /// Tells this live spec's revisions from those of any other, in any process.
    id: Arc<str>,
    tx: Arc<watch::Sender<Arc<SpecRevision>>>,
}

impl std::fmt::Debug for LiveSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.current();
        f.debug_struct("LiveSpec")
            .field("agent", &current.spec.name)
            .field("revision", &current.revision)
            .finish_non_exhaustive()
    }
}

impl LiveSpec {
    /// Revision 0 of `spec`, with no rate quotas.
    pub fn new(spec: AgentSpec) -> Self {
        Self::with_quotas(spec, RateQuotas::default())
    }

    /// Revision 0 of `spec`, whose rate limit has `quotas`.
    pub fn with_quotas(spec: AgentSpec, quotas: RateQuotas) -> Self {
        let first = SpecRevision { revision: 0, spec: Arc::new(spec), rate_quotas: quotas, changed: Vec::new() };
        let (tx, _) = watch::channel(Arc::new(first));
        LiveSpec { id: troupe_core::RunId::generate().to_string().into(), tx: Arc::new(tx) }
    }

    /// The latest revision.
    pub fn current(&self) -> Arc<SpecRevision> {
        Arc::clone(&self.tx.borrow())
    }

    /// The latest spec.
    pub fn spec(&self) -> Arc<AgentSpec> {
        Arc::clone(&self.tx.borrow().spec)
    }

    /// The latest revision's number.
    pub fn revision(&self) -> u64 {
        self.tx.borrow().revision
    }

    /// Publishes `update` as the next revision, unchecked, for new runs and every run in
    /// flight; `None` (and no revision) when it changes nothing.
    pub fn update(&self, update: SpecUpdate) -> Option<Arc<SpecRevision>> {
        let mut published = None;
        self.tx.send_if_modified(|current| {
            let spec = update.apply_to(&current.spec);
            let mut changed = changed_fields(&current.spec, &spec);
            let rate_quotas = update.rate_quotas.unwrap_or(current.rate_quotas);
            if rate_quotas != current.rate_quotas {
                changed.push("rate_limit".to_owned());
            }
            if changed.is_empty() {
                return false;
            }
            let next =
                Arc::new(SpecRevision { revision: current.revision + 1, spec: Arc::new(spec), rate_quotas, changed });
            *current = Arc::clone(&next);
            published = Some(next);
            true
        });
        published
    }

    /// This live spec's identity, as [`AppliedSpec::source`] records it.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// A receiver that has seen the latest revision.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<SpecRevision>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middleware::RateQuota;
    use std::time::Duration;
    use troupe_run::AppliedSpec;

    #[test]
    fn changed_fields_name_each_live_part_that_differs() {
        let old = AgentSpec::new("a", "demo").instructions("one");
        assert!(changed_fields(&old, &old.clone()).is_empty());
        let mut new = old.clone();
        new.model = "x/y".into();
        new.limits.timeout = Some(Duration::from_secs(5));
        new.limits.max_total_tokens = Some(10);
        new.limits.max_iterations = 2;
        assert_eq!(
            changed_fields(&old, &new),
            ["model", "limits.max_iterations", "limits.timeout", "limits.max_total_tokens"]
        );
        // Parts that are not live do not count.
        new = old.clone();
        new.tools = Some(vec!["fs.read".into()]);
        assert!(changed_fields(&old, &new).is_empty());
    }

    #[test]
    fn revisions_count_up_only_for_changes_and_keep_the_other_parts() {
        let mut spec = AgentSpec::new("a", "demo");
        spec.tools = Some(vec!["fs.read".into()]);
        let live = LiveSpec::new(spec);
        let mut rx = live.subscribe();
        assert!(!rx.has_changed().expect("open"));
        let quotas = RateQuotas { model: Some(RateQuota::per_minute(5)), tool: None };
        let next = live.update(SpecUpdate::new().model("x/y").rate_quotas(quotas)).expect("changes");
        assert_eq!(next.revision, 1);
        assert_eq!(next.changed, ["model", "rate_limit"]);
        assert_eq!(next.spec.tools, Some(vec!["fs.read".to_owned()]), "the rest of the spec stays");
        assert!(rx.has_changed().expect("open"));
        assert_eq!(rx.borrow_and_update().revision, 1);
        assert!(live.update(SpecUpdate::new().model("x/y").rate_quotas(quotas)).is_none());
        assert_eq!(live.revision(), 1);
        assert!(!rx.has_changed().expect("open"));
    }

    #[test]
    fn applied_specs_round_trip_and_replace_the_live_parts() {
        let mut spec = AgentSpec::new("a", "demo").instructions("new");
        spec.limits.max_usd = Some(0.25);
        let applied = AppliedSpec::of("live-1", 2, &spec);
        let back: AppliedSpec =
            serde_json::from_value(serde_json::to_value(&applied).expect("serializes")).expect("parses");
        assert_eq!(back, applied);
        let original = AgentSpec::new("a", "old-model").instructions("old");
        let resumed = back.apply_to(&original);
        assert_eq!((resumed.instructions.as_str(), resumed.model.as_str()), ("new", "demo"));
        assert_eq!(resumed.limits.max_usd, Some(0.25));
    }

    #[test]
    fn impossible_budgets_are_refused() {
        assert!(validate_limits(&Limits::default()).is_ok());
        for usd in [-1.0, f64::NAN, f64::INFINITY] {
            let limits = Limits { max_usd: Some(usd), ..Limits::default() };
            assert!(validate_limits(&limits).expect_err("refused").contains("limits.max_usd"));
        }
    }
}
