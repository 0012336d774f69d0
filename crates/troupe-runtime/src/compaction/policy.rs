//! [`PolicyCompactor`], the [`Compactor`] that carries out a [`CompactionPolicy`] (when to
//! compact and how, as data: part of the agent's spec, in `troupe-run`).

use super::estimate::TokenEstimator;
use super::strategies::{keep_recent, trim_tool_results};
use super::summarize::summarize;
use super::{CompactionContext, Compactor};
use crate::error::RuntimeError;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use troupe_core::{Message, Usage};
use troupe_run::{CompactionPolicy, Strategy};

/// A model call a compactor made (a summary), for the run's usage and cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuxiliaryUsage {
    /// The model's `provider/model` id.
    pub model: String,
    /// The tokens it used.
    pub usage: Usage,
    /// What it cost by the registry, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// What one compaction did; the runner puts it in its `compacted` event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactionReport {
    /// The last strategy that shrank the conversation (empty if none did).
    pub strategy: String,
    /// Every strategy application that shrank it, in order.
    pub applied: Vec<String>,
    /// Strategy applications made, effective or not.
    pub attempts: u32,
    /// The estimated request size before compaction, in tokens.
    pub before_tokens: u64,
    /// The estimated request size after compaction, in tokens.
    pub after_tokens: u64,
    /// The size compaction aimed for (0 when the compactor has no target).
    pub target_tokens: u64,
    /// The context window assumed (0 when the compactor does not say).
    pub context_window: u32,
    /// Messages removed from the conversation.
    pub removed_messages: usize,
    /// Model calls made for the compaction, effective or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auxiliary: Vec<AuxiliaryUsage>,
    /// Why strategies failed (a summary call that errored, say); a failed strategy is
    /// skipped, the run goes on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

impl CompactionReport {
    /// Whether the conversation changed.
    pub fn changed(&self) -> bool {
        !self.applied.is_empty()
    }
}

/// The [`Compactor`] of a [`CompactionPolicy`].
///
/// [`compact_with_report`](Compactor::compact_with_report) returns a report when the
/// conversation changed, and also when it did not but a model call was made (a summary
/// that was not shorter), so that the call's tokens are counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyCompactor {
    policy: CompactionPolicy,
}

impl PolicyCompactor {
    /// The compactor of `policy`.
    pub fn new(policy: CompactionPolicy) -> Self {
        PolicyCompactor { policy }
    }

    /// Its policy.
    pub fn policy(&self) -> &CompactionPolicy {
        &self.policy
    }

    async fn run(
        &self,
        messages: &mut Vec<Message>,
        context: CompactionContext<'_>,
    ) -> Result<Option<CompactionReport>, RuntimeError> {
        let window = self.policy.window_for(context.model);
        let (trigger, target) = self.policy.thresholds(window);
        let estimator = TokenEstimator::for_context(&context, messages);
        let before_tokens = estimator.conversation(messages);
        let strategies = &self.policy.strategies;
        if before_tokens <= trigger || strategies.is_empty() {
            return Ok(None);
        }
        let mut report = CompactionReport {
            before_tokens,
            after_tokens: before_tokens,
            target_tokens: target,
            context_window: window,
            ..CompactionReport::default()
        };
        let before_messages = messages.len();
        let mut changed_this_round = false;
        for attempt in 0..self.policy.max_attempts as usize {
            let (index, round) = (attempt % strategies.len(), attempt / strategies.len());
            if index == 0 && round > 0 {
                // Another round can only differ if some strategy gets harder in it.
                if !changed_this_round && strategies.iter().all(|s| saturated(s, round - 1)) {
                    break;
                }
                changed_this_round = false;
            }
            let strategy = &strategies[index];
            report.attempts += 1;
            // Only a summary can come out longer than what it replaces, so only it is
            // tried on a copy.
            let mut copy = matches!(strategy, Strategy::Summarize { .. }).then(|| messages.clone());
            let step = apply(strategy, copy.as_mut().unwrap_or(&mut *messages), &context, round).await;
            report.auxiliary.extend(step.call);
            report.failures.extend(step.failure);
            if step.cancelled {
                break;
            }
            if step.changed {
                let after = estimator.conversation(copy.as_deref().unwrap_or(messages.as_slice()));
                if after < report.after_tokens || copy.is_none() {
                    if let Some(copy) = copy {
                        *messages = copy;
                    }
                    report.after_tokens = after;
                    report.applied.push(strategy.name().to_owned());
                    changed_this_round = true;
                } else {
                    report.failures.push(format!("{} did not shrink the conversation", strategy.name()));
                }
            }
            if report.after_tokens <= target {
                break;
            }
        }
        report.removed_messages = before_messages.saturating_sub(messages.len());
        if let Some(last) = report.applied.last() {
            report.strategy.clone_from(last);
        }
        if report.after_tokens > target {
            tracing::warn!(
                before = report.before_tokens,
                after = report.after_tokens,
                target,
                attempts = report.attempts,
                "compaction stopped above its target"
            );
        }
        Ok((report.changed() || !report.auxiliary.is_empty()).then_some(report))
    }
}

/// What one strategy application came to.
#[derive(Default)]
struct Step {
    changed: bool,
    call: Option<AuxiliaryUsage>,
    failure: Option<String>,
    cancelled: bool,
}

/// Halves `n` `round` times.
fn halved(n: usize, round: usize) -> usize {
    n.checked_shr(u32::try_from(round).unwrap_or(u32::MAX)).unwrap_or(0)
}

/// Halves `n` `round` times, never below one.
fn harder(n: usize, round: usize) -> usize {
    halved(n, round).max(1)
}

/// Whether `strategy` is applied the same way in round `round + 1` as in `round`.
fn saturated(strategy: &Strategy, round: usize) -> bool {
    match strategy {
        Strategy::KeepRecent { n } => harder(*n, round) == harder(*n, round + 1),
        Strategy::TrimToolResults { keep_chars, keep_recent } => {
            halved(*keep_chars, round) == halved(*keep_chars, round + 1)
                && harder(*keep_recent, round) == harder(*keep_recent, round + 1)
        }
        Strategy::Summarize { keep_recent, .. } => harder(*keep_recent, round) == harder(*keep_recent, round + 1),
        Strategy::ProviderManaged => true,
    }
}

async fn apply(
    strategy: &Strategy,
    messages: &mut Vec<Message>,
    context: &CompactionContext<'_>,
    round: usize,
) -> Step {
    match strategy {
        Strategy::KeepRecent { n } => Step { changed: keep_recent(messages, harder(*n, round)), ..Step::default() },
        Strategy::TrimToolResults { keep_chars, keep_recent } => {
            let keep_chars = halved(*keep_chars, round);
            Step { changed: trim_tool_results(messages, keep_chars, harder(*keep_recent, round)), ..Step::default() }
        }
        Strategy::Summarize { model, max_summary_tokens, keep_recent } => {
            let done =
                summarize(messages, context, model.as_deref(), *max_summary_tokens, harder(*keep_recent, round)).await;
            Step { changed: done.changed, call: done.call, failure: done.failure, cancelled: done.cancelled }
        }
        Strategy::ProviderManaged => Step::default(),
    }
}

impl Compactor for PolicyCompactor {
    fn compact<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<bool, RuntimeError>> {
        Box::pin(async move { Ok(self.run(messages, context).await?.is_some_and(|r| r.changed())) })
    }

    fn compact_with_report<'a>(
        &'a self,
        messages: &'a mut Vec<Message>,
        context: CompactionContext<'a>,
    ) -> BoxFuture<'a, Result<Option<CompactionReport>, RuntimeError>> {
        Box::pin(self.run(messages, context))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::strategies::tests::pairing_errors;
    use crate::compaction::test_support::{Fixture, tool_loop};
    use crate::compaction::{REMOVED_NOTE_SUFFIX, SUMMARY_PREFIX};
    use serde_json::json;
    use troupe_run::DEFAULT_CONTEXT_WINDOW;
    use troupe_testkit::MockTurn;

    fn compact(policy: CompactionPolicy, fixture: &Fixture, messages: &mut Vec<Message>) -> Option<CompactionReport> {
        let compactor = PolicyCompactor::new(policy);
        futures::executor::block_on(compactor.compact_with_report(messages, fixture.context())).expect("no error")
    }

    #[test]
    fn policies_serialize_with_defaults() {
        let policy: CompactionPolicy = serde_json::from_value(json!({
            "context_window": 50_000,
            "strategies": [{"type": "summarize", "model": "openai/gpt-4o-mini"}, {"type": "provider_managed"}]
        }))
        .expect("parses");
        assert_eq!(policy.trigger_ratio, 0.8);
        assert_eq!(policy.max_attempts, 3);
        assert_eq!(
            policy.strategies[0],
            Strategy::Summarize { model: Some("openai/gpt-4o-mini".into()), max_summary_tokens: 1_024, keep_recent: 2 }
        );
        let back: CompactionPolicy =
            serde_json::from_value(serde_json::to_value(&policy).expect("serializes")).expect("round-trips");
        assert_eq!(back, policy);
        assert_eq!(
            serde_json::from_value::<CompactionPolicy>(json!({})).expect("all defaults"),
            CompactionPolicy::new()
        );
        assert!(serde_json::from_value::<Strategy>(json!({"type": "shrink_somehow"})).is_err());
    }

    #[test]
    fn the_window_comes_from_the_policy_then_the_model_then_the_default() {
        let fixture = Fixture::new(2_000);
        assert_eq!(CompactionPolicy::new().window_for(&fixture.model), 2_000);
        assert_eq!(CompactionPolicy::new().context_window(500).window_for(&fixture.model), 500);
        let mut unknown = fixture.model.clone();
        unknown.info = None;
        assert_eq!(CompactionPolicy::new().window_for(&unknown), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(CompactionPolicy::new().thresholds(1_000), (800, 600));
        assert_eq!(CompactionPolicy::new().target_ratio(0.95).thresholds(1_000), (800, 800), "target ≤ trigger");
        assert_eq!(CompactionPolicy::new().trigger_ratio(f32::NAN).thresholds(1_000), (800, 600));
    }

    #[test]
    fn below_the_trigger_nothing_happens() {
        let fixture = Fixture::new(100_000);
        let mut messages = tool_loop(10, 100);
        let before = messages.clone();
        assert_eq!(compact(CompactionPolicy::new(), &fixture, &mut messages), None);
        assert_eq!(messages, before);
    }

    #[test]
    fn strategies_apply_in_order_until_under_the_target() {
        let fixture = Fixture::new(2_000);
        // Ten units of ~260 tokens: ~2,600 tokens against a trigger of 1,600.
        let mut messages = tool_loop(10, 1_000);
        let policy = CompactionPolicy::new().strategies([
            Strategy::ProviderManaged,
            Strategy::trim_tool_results(100),
            Strategy::keep_recent(3),
        ]);
        let report = compact(policy, &fixture, &mut messages).expect("compacted");
        assert_eq!(report.applied, ["trim_tool_results"], "trimming was enough: {report:?}");
        assert_eq!((report.attempts, report.removed_messages, report.strategy.as_str()), (2, 0, "trim_tool_results"));
        assert!(report.before_tokens > 1_600 && report.after_tokens <= 1_200, "{report:?}");
        assert_eq!(report.after_tokens, TokenEstimator::new().conversation(&messages));

        let mut messages = tool_loop(10, 1_000);
        let policy = CompactionPolicy::new().strategies([Strategy::trim_tool_results(900), Strategy::keep_recent(3)]);
        let report = compact(policy, &fixture, &mut messages).expect("compacted");
        assert_eq!(report.applied, ["trim_tool_results", "keep_recent"]);
        assert_eq!(report.removed_messages, 14);
        assert!(messages[0].content[1].as_text().is_some_and(|t| t.ends_with(REMOVED_NOTE_SUFFIX)));
        assert_eq!(pairing_errors(&messages), Vec::<String>::new());
    }

    #[test]
    fn later_rounds_apply_the_strategies_harder_within_max_attempts() {
        let fixture = Fixture::new(2_000);
        let mut messages = tool_loop(10, 1_500);
        // Keeping 8 units is not enough, nor 4 in the second round; the third keeps 2.
        let report = compact(CompactionPolicy::new().strategies([Strategy::keep_recent(8)]), &fixture, &mut messages)
            .expect("compacted");
        assert_eq!((report.attempts, report.applied.len()), (3, 3), "{report:?}");
        assert_eq!(messages.len(), 1 + 2 * 2);
        assert!(report.after_tokens <= report.target_tokens);

        let mut messages = tool_loop(10, 1_500);
        let policy = CompactionPolicy::new().strategies([Strategy::keep_recent(8)]).max_attempts(2);
        let report = compact(policy, &fixture, &mut messages).expect("compacted");
        assert_eq!(report.attempts, 2, "bounded by max_attempts");
        assert_eq!(messages.len(), 1 + 2 * 4);
        assert!(report.after_tokens > report.target_tokens, "stopped above the target: {report:?}");
    }

    #[test]
    fn a_round_without_change_ends_the_compaction() {
        let fixture = Fixture::new(2_000);
        // One huge unit: nothing before it can go.
        let mut messages = tool_loop(1, 20_000);
        let policy =
            CompactionPolicy::new().strategies([Strategy::keep_recent(1), Strategy::ProviderManaged]).max_attempts(50);
        assert_eq!(compact(policy, &fixture, &mut messages), None, "no change, no model call: no report");
        assert_eq!(messages.len(), 3);
    }

    #[test]
    fn a_summary_that_does_not_shrink_is_undone_but_counted() {
        let fixture = Fixture::new(2_000);
        let usage = Usage { input_tokens: 900, output_tokens: 800, ..Usage::default() };
        fixture.scripted.push(MockTurn::text("s".repeat(12_000)).with_usage(usage));
        fixture.scripted.push(MockTurn::text("short summary").with_usage(usage));
        let mut messages = tool_loop(10, 1_000);
        let policy = CompactionPolicy::new().strategies([Strategy::summarize(200)]).max_attempts(2);
        let report = compact(policy, &fixture, &mut messages).expect("compacted");
        assert_eq!(report.auxiliary.len(), 2, "both calls are reported for their cost");
        assert_eq!(report.applied, ["summarize"], "{report:?}");
        assert!(report.failures[0].contains("did not shrink"), "{:?}", report.failures);
        assert_eq!(messages[0].content[1].as_text(), Some(format!("{SUMMARY_PREFIX}short summary").as_str()));
        assert_eq!(messages.len(), 1 + 2, "the second round keeps one unit verbatim");
    }

    #[test]
    fn a_failed_summary_falls_through_to_the_next_strategy() {
        let fixture = Fixture::new(2_000);
        let mut messages = tool_loop(10, 1_000);
        let policy = CompactionPolicy::new().strategies([
            Strategy::Summarize { model: Some("unknown/model".into()), max_summary_tokens: 100, keep_recent: 2 },
            Strategy::keep_recent(2),
        ]);
        // FixedModel resolves every id, so the summary call reaches the scripted model,
        // which has no turn left: the call fails.
        let report = compact(policy, &fixture, &mut messages).expect("compacted");
        assert_eq!(report.applied, ["keep_recent"]);
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert!(report.auxiliary.is_empty());
    }
}
