//! [`CompactionPolicy`]: when a run's conversation is compacted and how, as data (the
//! runtime's `PolicyCompactor` carries it out).

use serde::{Deserialize, Serialize};
use troupe_model::ResolvedModel;

/// The context window assumed for a model the registry does not know: small enough for
/// nearly every current model.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 128_000;

fn default_keep_recent() -> usize {
    2
}

fn default_summary_tokens() -> u32 {
    1_024
}

/// One way of shrinking the conversation. Every strategy keeps the task (the first user
/// message), the most recent unit, and each tool call with its results.
///
/// When the policy runs through its list more than once (see
/// [`CompactionPolicy::max_attempts`]), round `r` (from 0) applies each strategy harder:
/// counts of kept units and kept characters are halved `r` times (units never below one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Strategy {
    /// Keeps the task and the last `n` units; the task's message gets a note
    /// `[k earlier turns were removed to fit the context window]`.
    KeepRecent {
        /// Units kept (at least one).
        n: usize,
    },
    /// Cuts tool results outside the last `keep_recent` units to `keep_chars` characters,
    /// ending them with `[trimmed N chars]`.
    TrimToolResults {
        /// Characters kept of each old result.
        keep_chars: usize,
        /// Recent units whose results are left whole (default 2, at least one).
        #[serde(default = "default_keep_recent")]
        keep_recent: usize,
    },
    /// Replaces the units before the last `keep_recent` by a summary written by a model;
    /// the task's message carries it as `Summary of earlier conversation: …`.
    Summarize {
        /// The summary model's id, resolved by the runner's resolver; `None` for the
        /// agent's own model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The most tokens of the summary (default 1,024).
        #[serde(default = "default_summary_tokens")]
        max_summary_tokens: u32,
        /// Recent units kept verbatim (default 2, at least one).
        #[serde(default = "default_keep_recent")]
        keep_recent: usize,
    },
    /// Leaves compaction to the provider, which compacts server-side: a no-op here.
    ProviderManaged,
}

impl Strategy {
    /// [`Strategy::KeepRecent`] of `n` units.
    pub fn keep_recent(n: usize) -> Self {
        Strategy::KeepRecent { n }
    }

    /// [`Strategy::TrimToolResults`] to `keep_chars`, leaving the last two units whole.
    pub fn trim_tool_results(keep_chars: usize) -> Self {
        Strategy::TrimToolResults { keep_chars, keep_recent: default_keep_recent() }
    }

    /// [`Strategy::Summarize`] with the agent's model, in at most `max_summary_tokens`,
    /// keeping the last two units verbatim.
    pub fn summarize(max_summary_tokens: u32) -> Self {
        Strategy::Summarize { model: None, max_summary_tokens, keep_recent: default_keep_recent() }
    }

    /// The strategy's name in reports: its serialized `type`.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::KeepRecent { .. } => "keep_recent",
            Strategy::TrimToolResults { .. } => "trim_tool_results",
            Strategy::Summarize { .. } => "summarize",
            Strategy::ProviderManaged => "provider_managed",
        }
    }
}

/// When to compact, and how.
///
/// Before each model call the conversation is estimated (the runtime's `TokenEstimator`, corrected by
/// the provider's reported usage); above `trigger_ratio` of the context window, the
/// strategies are applied in order until the estimate is at most `target_ratio` of the
/// window or `max_attempts` strategy applications have been made. A list shorter than
/// `max_attempts` is gone through again, harder each round (see [`Strategy`]), unless a
/// whole round changed nothing. A step that does not make the estimate smaller is undone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactionPolicy {
    /// Compacts when the estimate exceeds this share of the context window (default 0.8).
    pub trigger_ratio: f32,
    /// Compacts down to this share of the window (default 0.6; never above the trigger).
    pub target_ratio: f32,
    /// The context window in tokens; `None` takes the model's registry entry, else
    /// [`DEFAULT_CONTEXT_WINDOW`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// The strategies, in the order they are tried (default: trim old tool results to
    /// 1,000 characters, then keep the last 6 units).
    pub strategies: Vec<Strategy>,
    /// The most strategy applications of one compaction (default 3).
    pub max_attempts: u32,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            trigger_ratio: 0.8,
            target_ratio: 0.6,
            context_window: None,
            strategies: vec![Strategy::trim_tool_results(1_000), Strategy::keep_recent(6)],
            max_attempts: 3,
        }
    }
}

impl CompactionPolicy {
    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the strategies.
    pub fn strategies(mut self, strategies: impl IntoIterator<Item = Strategy>) -> Self {
        self.strategies = strategies.into_iter().collect();
        self
    }

    /// Sets the share of the window that triggers compaction.
    pub fn trigger_ratio(mut self, ratio: f32) -> Self {
        self.trigger_ratio = ratio;
        self
    }

    /// Sets the share of the window compaction aims for.
    pub fn target_ratio(mut self, ratio: f32) -> Self {
        self.target_ratio = ratio;
        self
    }

    /// Sets the context window, whatever the model's entry says.
    pub fn context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the most strategy applications of one compaction.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The context window used for `model`.
    pub fn window_for(&self, model: &ResolvedModel) -> u32 {
        self.context_window
            .or_else(|| model.info.as_ref().map(|i| i.context_window))
            .filter(|w| *w > 0)
            .unwrap_or(DEFAULT_CONTEXT_WINDOW)
    }

    /// The trigger and target, in tokens, for a `window`-token context.
    pub fn thresholds(&self, window: u32) -> (u64, u64) {
        let share = |ratio: f32, default: f32| {
            let ratio = if ratio.is_finite() && ratio > 0.0 { ratio.min(1.0) } else { default };
            (f64::from(window) * f64::from(ratio)) as u64
        };
        let trigger = share(self.trigger_ratio, 0.8);
        (trigger, share(self.target_ratio, 0.6).min(trigger))
    }
}
