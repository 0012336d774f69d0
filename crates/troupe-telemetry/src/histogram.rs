//! Fixed-bucket histograms and their snapshots.

use serde::{Deserialize, Serialize};

/// Upper bounds, in seconds, of the run duration histogram: from a tenth of a second to
/// an hour, which spans a single answer and a long unattended task.
pub const RUN_DURATION_BUCKETS: &[f64] =
    &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];

/// Upper bounds, in tokens, of the per-call token histogram: the bucket boundaries the
/// OpenTelemetry GenAI conventions advise for `gen_ai.client.token.usage` (powers of 4).
pub const TOKEN_USAGE_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

/// Upper bounds, in seconds, of the model call duration histogram: the bucket boundaries
/// the OpenTelemetry GenAI conventions advise for `gen_ai.client.operation.duration`.
pub const OPERATION_DURATION_BUCKETS: &[f64] =
    &[0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// A histogram over fixed upper bounds, updated under its owner's lock.
#[derive(Clone, Debug)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); one more than `bounds`, for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: vec![0; bounds.len() + 1], sum: 0.0, count: 0 }
    }

    pub(crate) fn observe(&mut self, value: f64) {
        // A NaN would poison the sum forever; it is not an observation.
        if value.is_nan() {
            return;
        }
        let index = self.bounds.iter().position(|bound| value <= *bound).unwrap_or(self.bounds.len());
        self.counts[index] += 1;
        self.sum += value;
        self.count += 1;
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let buckets = self
            .bounds
            .iter()
            .zip(&self.counts)
            .map(|(bound, count)| {
                cumulative += count;
                Bucket { le: *bound, count: cumulative }
            })
            .collect();
        HistogramSnapshot { buckets, sum: self.sum, count: self.count }
    }
}

/// One bucket of a [`HistogramSnapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// The bucket's inclusive upper bound.
    pub le: f64,
    /// Observations less than or equal to `le` (cumulative, as Prometheus counts them).
    pub count: u64,
}

/// A histogram at one instant: cumulative buckets in ascending order of their bound, plus
/// the implicit `+Inf` bucket, which is [`count`](HistogramSnapshot::count).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistogramSnapshot {
    /// The finite buckets.
    pub buckets: Vec<Bucket>,
    /// The sum of all observations.
    pub sum: f64,
    /// The number of observations.
    pub count: u64,
}

impl HistogramSnapshot {
    /// The number of observations less than or equal to `bound`, when `bound` is one of
    /// the bucket bounds (or `+Inf`).
    pub fn count_le(&self, bound: f64) -> Option<u64> {
        if bound == f64::INFINITY {
            return Some(self.count);
        }
        self.buckets.iter().find(|b| b.le == bound).map(|b| b.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_inclusive_cumulative_and_overflow_lands_in_inf() {
        let mut h = Histogram::new(&[1.0, 5.0]);
        for v in [0.5, 1.0, 3.0, 5.0, 7.0, f64::NAN] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![Bucket { le: 1.0, count: 2 }, Bucket { le: 5.0, count: 4 }]);
        assert_eq!(s.count, 5, "NaN is not counted");
        assert!((s.sum - 16.5).abs() < 1e-9);
        assert_eq!(s.count_le(f64::INFINITY), Some(5));
        assert_eq!(s.count_le(2.0), None);
    }

    #[test]
    fn bucket_bounds_ascend() {
        for bounds in [RUN_DURATION_BUCKETS, TOKEN_USAGE_BUCKETS] {
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        }
    }
}
