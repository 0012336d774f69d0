//! What a suite's runs came to: per case and overall, the pass rate with its 95% Wilson
//! interval, cost, tokens and latency; as JSON or as a self-contained HTML page.

use crate::grade::Verdict;
use serde::Serialize;
use std::fmt::Write;

/// One run of a case.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Which run of the case (from 0).
    pub n: u32,
    /// Whether every grader passed.
    pub pass: bool,
    /// Each grader's verdict.
    pub verdicts: Vec<Verdict>,
    /// The final answer.
    pub answer: String,
    /// Why the run did not complete (or could not run), when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it cost, in USD.
    pub cost_usd: f64,
    /// Its tokens.
    pub tokens: u64,
    /// How long it took.
    pub latency_ms: u64,
    /// Whether it was not run (the budget was spent).
    pub skipped: bool,
}

impl RunRecord {
    pub(crate) fn skipped(n: u32, why: String) -> Self {
        RunRecord { skipped: true, ..RunRecord::errored(n, why) }
    }

    pub(crate) fn errored(n: u32, why: String) -> Self {
        RunRecord {
            n,
            pass: false,
            verdicts: Vec::new(),
            answer: String::new(),
            error: Some(why),
            cost_usd: 0.0,
            tokens: 0,
            latency_ms: 0,
            skipped: false,
        }
    }
}

/// A pass rate with its 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// Runs that passed.
    pub passed: u32,
    /// Runs that ran.
    pub runs: u32,
    /// passed / runs (0 with no run).
    pub rate: f64,
    /// The interval's low end (Wilson score, z = 1.96).
    pub low: f64,
    /// Its high end.
    pub high: f64,
}

impl Rate {
    /// The rate of `passed` out of `runs`.
    pub fn new(passed: u32, runs: u32) -> Self {
        if runs == 0 {
            return Rate { passed, runs, rate: 0.0, low: 0.0, high: 1.0 };
        }
        let (k, n, z) = (f64::from(passed), f64::from(runs), 1.96_f64);
        let p = k / n;
        let denominator = 1.0 + z * z / n;
        let centre = (p + z * z / (2.0 * n)) / denominator;
        let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
        Rate { passed, runs, rate: p, low: (centre - half).max(0.0), high: (centre + half).min(1.0) }
    }
}

/// A case's runs and what they came to.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// The case.
    pub name: String,
    /// Its pass rate over the runs that ran.
    pub rate: Rate,
    /// Runs not run for want of budget.
    pub skipped: u32,
    /// Mean cost of a run, in USD.
    pub mean_cost_usd: f64,
    /// Mean tokens of a run.
    pub mean_tokens: f64,
    /// Mean latency of a run.
    pub mean_latency_ms: f64,
    /// Each run.
    pub runs: Vec<RunRecord>,
}

impl CaseReport {
    pub(crate) fn new(name: &str, runs: Vec<RunRecord>) -> Self {
        let ran: Vec<&RunRecord> = runs.iter().filter(|r| !r.skipped).collect();
        let count = u32::try_from(ran.len()).unwrap_or(u32::MAX);
        let passed = u32::try_from(ran.iter().filter(|r| r.pass).count()).unwrap_or(u32::MAX);
        let mean = |f: &dyn Fn(&RunRecord) -> f64| {
            if ran.is_empty() { 0.0 } else { ran.iter().map(|r| f(r)).sum::<f64>() / ran.len() as f64 }
        };
        CaseReport {
            name: name.to_owned(),
            rate: Rate::new(passed, count),
            skipped: u32::try_from(runs.len() - ran.len()).unwrap_or(u32::MAX),
            mean_cost_usd: mean(&|r| r.cost_usd),
            mean_tokens: mean(&|r| r.tokens as f64),
            mean_latency_ms: mean(&|r| r.latency_ms as f64),
            runs,
        }
    }

    /// Why its first failed run failed, in a line.
    pub fn first_failure(&self) -> Option<String> {
        let run = self.runs.iter().find(|r| !r.pass && !r.skipped)?;
        match run.verdicts.iter().find(|v| !v.pass) {
            Some(verdict) => Some(format!("{}: {}", verdict.grader, verdict.reason)),
            None => run.error.clone(),
        }
    }
}

/// A whole suite's report.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// The suite.
    pub suite: String,
    /// What was evaluated.
    pub subject: String,
    /// The pass rate over every run.
    pub overall: Rate,
    /// Total cost, in USD.
    pub cost_usd: f64,
    /// Total tokens.
    pub tokens: u64,
    /// Mean latency of a run.
    pub mean_latency_ms: f64,
    /// The pass rate the suite must reach, when it has one.
    pub threshold: Option<f64>,
    /// Each case.
    pub cases: Vec<CaseReport>,
}

impl SuiteReport {
    pub(crate) fn new(suite: &str, subject: &str, threshold: Option<f64>, cases: Vec<CaseReport>) -> Self {
        let ran: Vec<&RunRecord> = cases.iter().flat_map(|c| c.runs.iter()).filter(|r| !r.skipped).collect();
        let runs = u32::try_from(ran.len()).unwrap_or(u32::MAX);
        let passed = u32::try_from(ran.iter().filter(|r| r.pass).count()).unwrap_or(u32::MAX);
        SuiteReport {
            suite: suite.to_owned(),
            subject: subject.to_owned(),
            overall: Rate::new(passed, runs),
            cost_usd: ran.iter().map(|r| r.cost_usd).sum(),
            tokens: ran.iter().map(|r| r.tokens).sum(),
            mean_latency_ms: if ran.is_empty() {
                0.0
            } else {
                ran.iter().map(|r| r.latency_ms as f64).sum::<f64>() / ran.len() as f64
            },
            threshold,
            cases,
        }
    }

    /// Whether the suite reached its threshold (true without one).
    pub fn meets_threshold(&self) -> bool {
        self.threshold.is_none_or(|t| self.overall.rate >= t)
    }

    /// A self-contained HTML page (no script, no outside resource): the figures, and each
    /// case's pass rate as a bar with its interval.
    pub fn to_html(&self) -> String {
        let mut page = String::new();
        let _ = write!(
            page,
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title><style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n\
             <p class=\"subject\">{subject}</p>\n<dl class=\"figures\">\
             <div><dt>pass rate</dt><dd id=\"overall\">{rate}</dd></div>\
             <div><dt>runs</dt><dd>{runs}</dd></div><div><dt>cost</dt><dd>${cost:.4}</dd></div>\
             <div><dt>tokens</dt><dd>{tokens}</dd></div><div><dt>mean latency</dt><dd>{latency:.0} ms</dd></div></dl>\n",
            title = escape(&format!("Eval: {}", self.suite)),
            subject = escape(&self.subject),
            rate = percent_with_interval(&self.overall),
            runs = self.overall.runs,
            cost = self.cost_usd,
            tokens = self.tokens,
            latency = self.mean_latency_ms,
        );
        if let Some(threshold) = self.threshold {
            let verdict = if self.meets_threshold() { "met" } else { "not met" };
            let _ =
                writeln!(page, "<p class=\"threshold {verdict}\">threshold {:.0}%: {verdict}</p>", threshold * 100.0);
        }
        page.push_str(&self.chart());
        page.push_str(
            "<table><caption>Cases</caption><thead><tr><th scope=\"col\">case</th><th scope=\"col\">pass rate</th>\
             <th scope=\"col\">runs</th><th scope=\"col\">cost (mean)</th><th scope=\"col\">tokens (mean)</th>\
             <th scope=\"col\">latency (mean)</th><th scope=\"col\">first failure</th></tr></thead><tbody>\n",
        );
        for case in &self.cases {
            let _ = writeln!(
                page,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>${:.4}</td><td>{:.0}</td><td>{:.0} ms</td><td>{}</td></tr>",
                escape(&case.name),
                percent_with_interval(&case.rate),
                case.rate.runs,
                case.mean_cost_usd,
                case.mean_tokens,
                case.mean_latency_ms,
                escape(&case.first_failure().unwrap_or_default()),
            );
        }
        page.push_str("</tbody></table>\n</body></html>\n");
        page
    }

    /// The bars: one per case, its pass rate and interval.
    fn chart(&self) -> String {
        let row = 26;
        let height = row * self.cases.len() + 10;
        let mut svg = format!(
            "<svg class=\"chart\" role=\"img\" aria-label=\"Pass rate by case\" viewBox=\"0 0 640 {height}\" \
             width=\"100%\" preserveAspectRatio=\"xMinYMin meet\">\n"
        );
        for (i, case) in self.cases.iter().enumerate() {
            let y = i * row + 5;
            let (x0, width) = (200.0, 400.0);
            let bar = width * case.rate.rate;
            let _ = writeln!(
                svg,
                "<g><title>{name}: {rate}</title><text x=\"0\" y=\"{ty}\">{name}</text>\
                 <rect x=\"{x0}\" y=\"{y}\" width=\"{width}\" height=\"16\" class=\"track\"/>\
                 <rect x=\"{x0}\" y=\"{y}\" width=\"{bar:.1}\" height=\"16\" class=\"bar\"/>\
                 <line x1=\"{lo:.1}\" x2=\"{hi:.1}\" y1=\"{my}\" y2=\"{my}\" class=\"interval\"/></g>",
                name = escape(&case.name),
                rate = percent_with_interval(&case.rate),
                ty = y + 13,
                lo = x0 + width * case.rate.low,
                hi = x0 + width * case.rate.high,
                my = y + 8,
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// `80% (44–97%)`.
fn percent_with_interval(rate: &Rate) -> String {
    format!("{:.0}% ({:.0}–{:.0}%)", rate.rate * 100.0, rate.low * 100.0, rate.high * 100.0)
}

/// Text as HTML shows it, never as markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1b1f24}\
h1{font-size:1.4rem}.subject{color:#57606a}.figures{display:flex;flex-wrap:wrap;gap:1.5rem}\
.figures dt{font-size:.8rem;color:#57606a}.figures dd{margin:0;font-size:1.2rem;font-weight:600}\
.threshold.met{color:#1a7f37}.threshold.not{color:#cf222e}.chart text{font-size:12px}\
.chart .track{fill:#eaeef2}.chart .bar{fill:#2f81f7}.chart .interval{stroke:#1b1f24;stroke-width:2}\
table{border-collapse:collapse;width:100%;margin-top:1rem;display:block;overflow-x:auto}th,td{text-align:left;padding:.3rem .5rem;\
border-bottom:1px solid #d0d7de;vertical-align:top}caption{text-align:left;font-weight:600}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wilson_interval_matches_its_known_values() {
        let rate = Rate::new(8, 10);
        assert!((rate.low - 0.4902).abs() < 1e-3 && (rate.high - 0.9433).abs() < 1e-3, "{rate:?}");
        let all = Rate::new(10, 10);
        assert!((all.low - 0.7225).abs() < 1e-3 && all.high == 1.0, "{all:?}");
        assert_eq!(Rate::new(0, 0).rate, 0.0);
    }

    #[test]
    fn the_page_shows_model_text_as_text() {
        let run =
            RunRecord { answer: "<script>alert(1)</script>".into(), ..RunRecord::errored(0, "<img onerror=x>".into()) };
        let report = SuiteReport::new("s", "agent", Some(0.5), vec![CaseReport::new("<b>case</b>", vec![run])]);
        let page = report.to_html();
        assert!(!page.contains("<script") && !page.contains("<img") && !page.contains("<b>"), "{page}");
        assert!(page.contains("&lt;b&gt;case&lt;/b&gt;") && page.contains("threshold 50%: not met"), "{page}");
    }
}

/// Two reports of one suite side by side: two models, or two revisions of an agent.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The first (the suite's own subject).
    pub a: SuiteReport,
    /// The second.
    pub b: SuiteReport,
}

impl Comparison {
    /// A self-contained HTML page: both subjects' figures, and each case's pass rates side by
    /// side with the change.
    pub fn to_html(&self) -> String {
        let mut page = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title><style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n",
            title = escape(&format!("Eval: {} compared", self.a.suite)),
        );
        let _ = writeln!(
            page,
            "<table><caption>Overall</caption><thead><tr><th scope=\"col\">subject</th><th scope=\"col\">pass rate</th>\
             <th scope=\"col\">cost</th><th scope=\"col\">tokens</th><th scope=\"col\">mean latency</th></tr></thead><tbody>"
        );
        for report in [&self.a, &self.b] {
            let _ = writeln!(
                page,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>${:.4}</td><td>{}</td><td>{:.0} ms</td></tr>",
                escape(&report.subject),
                percent_with_interval(&report.overall),
                report.cost_usd,
                report.tokens,
                report.mean_latency_ms
            );
        }
        page.push_str("</tbody></table>\n");
        let _ = writeln!(
            page,
            "<table><caption>Cases</caption><thead><tr><th scope=\"col\">case</th><th scope=\"col\">{}</th>\
             <th scope=\"col\">{}</th><th scope=\"col\">change</th></tr></thead><tbody>",
            escape(&self.a.subject),
            escape(&self.b.subject)
        );
        for (a, b) in self.cases() {
            let _ = writeln!(
                page,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{:+.0} points</td></tr>",
                escape(&a.name),
                percent_with_interval(&a.rate),
                percent_with_interval(&b.rate),
                (b.rate.rate - a.rate.rate) * 100.0
            );
        }
        page.push_str("</tbody></table>\n</body></html>\n");
        page
    }

    /// The cases of both, paired by name, in the first's order.
    pub fn cases(&self) -> impl Iterator<Item = (&CaseReport, &CaseReport)> {
        self.a.cases.iter().filter_map(|a| self.b.cases.iter().find(|b| b.name == a.name).map(|b| (a, b)))
    }
}
