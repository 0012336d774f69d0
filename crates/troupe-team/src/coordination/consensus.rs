//! [`Consensus`]: a vote over members' answers.

use crate::MemberResult;
use serde::{Deserialize, Serialize};

/// How many votes the winning answer needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "votes", rename_all = "snake_case")]
pub enum Threshold {
    /// More than half of all ballots (abstentions included).
    Majority,
    /// At least this many votes.
    Quorum(usize),
}

/// One member's vote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ballot {
    /// Who voted.
    pub voter: String,
    /// The answer, as given; `None` for an abstention (a failed member).
    pub answer: Option<String>,
}

impl Ballot {
    /// `voter` answered `answer`.
    pub fn new(voter: impl Into<String>, answer: impl Into<String>) -> Self {
        Ballot { voter: voter.into(), answer: Some(answer.into()) }
    }

    /// `voter` gave no answer.
    pub fn abstain(voter: impl Into<String>) -> Self {
        Ballot { voter: voter.into(), answer: None }
    }
}

/// The votes for one answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// The answer, normalised ([`normalise_answer`]).
    pub normalised: String,
    /// The answer as its first voter gave it.
    pub answer: String,
    /// Who voted for it, in ballot order.
    pub voters: Vec<String>,
}

/// How a vote came out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsensusOutcome {
    /// The agreed answer (as its first voter gave it): set only when the leading answer
    /// met the threshold and no other answer tied with it.
    pub decision: Option<String>,
    /// The answer with the most votes, unless two or more tied for the lead.
    pub leading: Option<String>,
    /// The leading answer's votes (those of each tied answer, on a tie).
    pub votes: usize,
    /// Every ballot, abstentions included.
    pub ballots: usize,
    /// The ballots without an answer.
    pub abstentions: usize,
    /// The votes the threshold asked for.
    pub needed: usize,
    /// Whether the leading answer met the threshold.
    pub threshold_met: bool,
    /// Whether two or more answers tied for the lead.
    pub tie: bool,
    /// Every answer's votes, most votes first (ties in order of first vote).
    pub tally: Vec<Tally>,
}

impl ConsensusOutcome {
    /// Whether the vote reached a decision.
    pub fn is_decided(&self) -> bool {
        self.decision.is_some()
    }
}

/// `answer` trimmed, lower-cased, with runs of whitespace collapsed to one space: the
/// form in which answers are compared.
pub fn normalise_answer(answer: &str) -> String {
    answer.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// A vote over answers, by majority or quorum.
///
/// ```
/// use troupe_team::coordination::{Ballot, Consensus};
///
/// let outcome = Consensus::majority().decide([
///     Ballot::new("a", "Paris"),
///     Ballot::new("b", "  paris "),
///     Ballot::new("c", "Lyon"),
/// ]);
/// assert_eq!(outcome.decision.as_deref(), Some("Paris"));
/// assert_eq!((outcome.votes, outcome.needed), (2, 2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consensus {
    threshold: Threshold,
}

impl Consensus {
    /// More than half of all ballots must agree.
    pub fn majority() -> Self {
        Consensus { threshold: Threshold::Majority }
    }

    /// At least `votes` ballots must agree (at least 1).
    pub fn quorum(votes: usize) -> Self {
        Consensus { threshold: Threshold::Quorum(votes.max(1)) }
    }

    /// The threshold.
    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// Counts `ballots`.
    pub fn decide(&self, ballots: impl IntoIterator<Item = Ballot>) -> ConsensusOutcome {
        let mut tally: Vec<Tally> = Vec::new();
        let (mut count, mut abstentions) = (0, 0);
        for ballot in ballots {
            count += 1;
            let Some(answer) = ballot.answer.filter(|a| !a.trim().is_empty()) else {
                abstentions += 1;
                continue;
            };
            let normalised = normalise_answer(&answer);
            match tally.iter_mut().find(|t| t.normalised == normalised) {
                Some(entry) => entry.voters.push(ballot.voter),
                None => tally.push(Tally { normalised, answer, voters: vec![ballot.voter] }),
            }
        }
        // Stable: equal counts keep the order of their first vote.
        tally.sort_by_key(|t| std::cmp::Reverse(t.voters.len()));
        let votes = tally.first().map_or(0, |t| t.voters.len());
        let tie = tally.get(1).is_some_and(|t| t.voters.len() == votes);
        let needed = match self.threshold {
            Threshold::Majority => count / 2 + 1,
            Threshold::Quorum(n) => n,
        };
        let leading = tally.first().filter(|_| !tie).map(|t| t.answer.clone());
        let threshold_met = votes > 0 && votes >= needed;
        ConsensusOutcome {
            decision: leading.clone().filter(|_| threshold_met),
            leading,
            votes,
            ballots: count,
            abstentions,
            needed,
            threshold_met,
            tie,
            tally,
        }
    }

    /// Counts members' results: each successful result's content is its member's vote; a
    /// failed one abstains.
    pub fn decide_results<'a>(&self, results: impl IntoIterator<Item = &'a MemberResult>) -> ConsensusOutcome {
        self.decide(
            results.into_iter().map(|r| Ballot { voter: r.name.clone(), answer: r.success.then(|| r.content.clone()) }),
        )
    }

    /// Counts `(voter, answer)` pairs.
    pub fn decide_pairs<V: Into<String>, A: Into<String>>(
        &self,
        votes: impl IntoIterator<Item = (V, A)>,
    ) -> ConsensusOutcome {
        self.decide(votes.into_iter().map(|(voter, answer)| Ballot::new(voter, answer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_compared_normalised() {
        assert_eq!(normalise_answer("  The   ANSWER\n is 42 "), "the answer is 42");
    }

    #[test]
    fn nobody_voting_decides_nothing() {
        let outcome = Consensus::quorum(1).decide([]);
        assert!(!outcome.is_decided() && !outcome.tie && !outcome.threshold_met);
        assert_eq!(outcome.leading, None);
    }
}
