//! The evidence hash chain: each entry carries the hash of the one before it in the same
//! run, so changing, removing or reordering any entry is detectable.
//!
//! Sealing happens in memory: the writer of a run keeps its chain's head, so appending
//! an entry is one `INSERT` and never a read. Two writers on one run cannot both succeed:
//! the store refuses a second entry with the same sequence number
//! ([`StoreError::EvidenceConflict`](crate::StoreError::EvidenceConflict)).

use crate::record::{EvidenceEntry, EvidenceKind, Millis, NewEvidence};
use sha2::{Digest, Sha256};

/// The head of one run's evidence chain: the next sequence number and the last hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvidenceChain {
    run_id: String,
    next_seq: i64,
    head: String,
}

impl EvidenceChain {
    /// The chain of a run with no evidence yet.
    pub fn new(run_id: impl Into<String>) -> Self {
        EvidenceChain { run_id: run_id.into(), next_seq: 1, head: String::new() }
    }

    /// The chain continuing after `last`, the run's newest entry (`None` for none).
    ///
    /// A store refuses to read back an entry numbered `i64::MAX` (a corrupt row); after one
    /// made by hand the chain stays at that number, where the store refuses the next entry
    /// as a conflict, instead of overflowing.
    pub fn after(run_id: impl Into<String>, last: Option<&EvidenceEntry>) -> Self {
        let mut chain = EvidenceChain::new(run_id);
        if let Some(last) = last {
            chain.next_seq = last.seq.saturating_add(1);
            chain.head.clone_from(&last.hash);
        }
        chain
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The sequence number the next entry gets.
    pub fn next_seq(&self) -> i64 {
        self.next_seq
    }

    /// Seals `entries` after the head, in order, without moving the head: call
    /// [`advance`](Self::advance) once the store has accepted them.
    pub fn seal(&self, entries: Vec<NewEvidence>, recorded_at: Millis) -> Vec<EvidenceEntry> {
        let mut prev = self.head.clone();
        let mut seq = self.next_seq;
        entries
            .into_iter()
            .map(|entry| {
                // Encoded once (when it is not already): hashed here, written by the store as it is.
                let text = entry.payload.text();
                let (number, at) = (seq.to_string(), recorded_at.to_string());
                let call_id = entry.call_id.as_deref().unwrap_or("\u{0}");
                let hash = hash_fields([&prev, &self.run_id, &number, entry.kind.as_str(), call_id, &at, text]);
                let sealed = EvidenceEntry {
                    run_id: self.run_id.clone(),
                    seq,
                    kind: entry.kind,
                    call_id: entry.call_id,
                    payload: entry.payload,
                    recorded_at,
                    prev_hash: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                };
                seq = seq.saturating_add(1);
                sealed
            })
            .collect()
    }

    /// Moves the head past `sealed`, entries the store has accepted.
    pub fn advance(&mut self, sealed: &[EvidenceEntry]) {
        if let Some(last) = sealed.last() {
            self.next_seq = last.seq.saturating_add(1);
            self.head.clone_from(&last.hash);
        }
    }
}

/// The hash of an entry: SHA-256, in lowercase hex, over the previous hash and every
/// field of the entry, each length-prefixed so no two entries encode alike.
pub fn entry_hash(
    prev_hash: &str,
    run_id: &str,
    seq: i64,
    kind: EvidenceKind,
    call_id: Option<&str>,
    recorded_at: Millis,
    payload: &serde_json::Value,
) -> String {
    let (seq, recorded_at, payload) = (seq.to_string(), recorded_at.to_string(), json_text(payload));
    hash_fields([prev_hash, run_id, &seq, kind.as_str(), call_id.unwrap_or("\u{0}"), &recorded_at, &payload])
}

/// [`entry_hash`] of the fields as text, in its order, the payload as its JSON.
fn hash_fields(fields: [&str; 7]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    lower_hex(&hasher.finalize())
}

/// `value` as compact JSON: the text `Value`'s `Display` writes, made without passing
/// through a formatter, which takes about twice as long.
pub fn json_text(value: &serde_json::Value) -> String {
    // Cannot fail: a `Value`'s map keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}

/// `bytes` in lowercase hex (a digest's usual form), two digits per byte.
pub fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

/// Where a run's evidence chain is broken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("evidence entry {seq} of run `{run_id}`: {problem}")]
pub struct ChainBreak {
    /// The run.
    pub run_id: String,
    /// The first entry found wrong.
    pub seq: i64,
    /// What is wrong with it.
    pub problem: String,
}

/// Checks that `entries` (a run's whole log, in order) form an unbroken chain: numbered
/// from 1 without gaps, each linked to the one before, each hash matching its content.
pub fn verify_chain(entries: &[EvidenceEntry]) -> Result<(), ChainBreak> {
    let mut prev = String::new();
    for (i, entry) in entries.iter().enumerate() {
        let expected_seq = i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1);
        let broken = |problem: String| ChainBreak { run_id: entry.run_id.clone(), seq: entry.seq, problem };
        if entry.seq != expected_seq {
            return Err(broken(format!("expected entry {expected_seq} here: an entry is missing or out of order")));
        }
        if entry.prev_hash != prev {
            return Err(broken("it does not link to the entry before it (that one was changed or removed)".into()));
        }
        let (seq, recorded_at) = (entry.seq.to_string(), entry.recorded_at.to_string());
        let call_id = entry.call_id.as_deref().unwrap_or("\u{0}");
        let hash = hash_fields([
            &entry.prev_hash,
            &entry.run_id,
            &seq,
            entry.kind.as_str(),
            call_id,
            &recorded_at,
            entry.payload.text(),
        ]);
        if hash != entry.hash {
            return Err(broken("its content does not match its hash (it was changed)".into()));
        }
        prev.clone_from(&entry.hash);
    }
    Ok(())
}

/// Checks a run's whole log as [`verify_chain`] does, and that it reaches `head`, the
/// head its run record holds: a log whose last entries were removed is cut short of it.
pub fn verify_log(entries: &[EvidenceEntry], head: &crate::EvidenceHead, run_id: &str) -> Result<(), ChainBreak> {
    verify_chain(entries)?;
    let (seq, hash) = entries.last().map_or((0, ""), |last| (last.seq, last.hash.as_str()));
    if seq < head.seq {
        return Err(ChainBreak {
            run_id: run_id.to_owned(),
            seq: seq.saturating_add(1),
            problem: format!(
                "the log ends at entry {seq} but its run recorded {} entries: the last ones were removed",
                head.seq
            ),
        });
    }
    if seq == head.seq && hash != head.hash {
        return Err(ChainBreak {
            run_id: run_id.to_owned(),
            seq,
            problem: "the last entry is not the one its run recorded (the log was replaced)".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log() -> Vec<EvidenceEntry> {
        let mut chain = EvidenceChain::new("r1");
        let first = chain.seal(vec![NewEvidence::new(EvidenceKind::RunStarted, json!({"instruction": "go"}))], 10);
        chain.advance(&first);
        let rest = chain.seal(
            vec![
                NewEvidence::new(EvidenceKind::ActionStarted, json!({"tool": "fs.write"})).for_call("c1"),
                NewEvidence::new(EvidenceKind::ActionCompleted, json!({"content": "ok"})).for_call("c1"),
            ],
            11,
        );
        chain.advance(&rest);
        assert_eq!(chain.next_seq(), 4);
        first.into_iter().chain(rest).collect()
    }

    /// A cost summed over many calls has a long decimal expansion: read back from a store
    /// (its text parsed again), it must hash as it was sealed.
    #[test]
    fn a_sealed_entry_keeps_the_text_it_was_hashed_over_for_the_store_to_write() {
        let payload = json!({"b": [1, "two"], "a": {"nested": "é\n"}});
        let sealed =
            EvidenceChain::new("r1").seal(vec![NewEvidence::new(EvidenceKind::RunStarted, payload.clone())], 10);
        let entry = &sealed[0];
        assert_eq!(entry.payload.text(), payload.to_string());
        assert_eq!(entry.hash, entry_hash("", "r1", 1, EvidenceKind::RunStarted, None, 10, &payload));
        // An entry read back is encoded from its payload, to the same.
        let json = serde_json::to_string(entry).expect("an entry encodes");
        let read: EvidenceEntry = serde_json::from_str(&json).expect("and decodes");
        assert_eq!(read.payload.text(), entry.payload.text());
        assert_eq!(&read, entry);
        // A payload encoded straight from a typed value is sealed as its `Value` would be.
        #[derive(serde::Serialize)]
        struct Typed {
            b: (u8, &'static str),
            a: std::collections::HashMap<&'static str, &'static str>,
        }
        let typed = Typed { b: (1, "two"), a: std::collections::HashMap::from([("nested", "é\n")]) };
        let encoded = NewEvidence::encoded(EvidenceKind::RunStarted, &typed).expect("encoded");
        let sealed = EvidenceChain::new("r1").seal(vec![encoded], 10);
        assert_eq!(sealed[0].payload.text(), entry.payload.text());
        assert_eq!(sealed[0].hash, entry.hash);
        assert_eq!(sealed[0].payload, payload, "and reads as that value");
        verify_chain(&sealed).expect("it verifies");
    }

    #[test]
    fn a_log_read_back_from_its_text_verifies_whatever_its_floats() {
        let mut cost = 0.0_f64;
        let mut chain = EvidenceChain::new("r1");
        let mut sealed = Vec::new();
        for _ in 0..40 {
            cost += 0.000105;
            let entries = chain.seal(vec![NewEvidence::new(EvidenceKind::RunFinished, json!({"cost_usd": cost}))], 1);
            chain.advance(&entries);
            sealed.extend(entries);
        }
        let read_back: Vec<EvidenceEntry> = sealed
            .into_iter()
            .map(|mut e| {
                e.payload = serde_json::from_str(&e.payload.to_string()).expect("the payload parses");
                e
            })
            .collect();
        assert_eq!(verify_chain(&read_back), Ok(()));
    }

    #[test]
    fn a_sealed_log_verifies() {
        let log = log();
        assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(log[0].prev_hash, "");
        assert_eq!(log[1].prev_hash, log[0].hash);
        assert_eq!(verify_chain(&log), Ok(()));
    }

    #[test]
    fn any_change_is_detected() {
        let mut changed = log();
        changed[1].payload = json!({"tool": "fs.read"}).into();
        assert!(verify_chain(&changed).is_err_and(|b| b.seq == 2 && b.problem.contains("content")));

        let mut removed = log();
        removed.remove(1);
        assert!(verify_chain(&removed).is_err_and(|b| b.seq == 3));

        let mut relinked = log();
        relinked.remove(1);
        relinked[1].seq = 2;
        assert!(verify_chain(&relinked).is_err_and(|b| b.problem.contains("link")));

        let mut resealed = log();
        resealed[2].call_id = Some("c2".into());
        assert!(verify_chain(&resealed).is_err());
    }

    #[test]
    fn a_resumed_chain_continues_the_head() {
        let log = log();
        let chain = EvidenceChain::after("r1", log.last());
        let next = chain.seal(vec![NewEvidence::new(EvidenceKind::RunFinished, json!({}))], 12);
        let all: Vec<_> = log.into_iter().chain(next).collect();
        assert_eq!(verify_chain(&all), Ok(()));
    }

    #[test]
    fn a_chain_after_the_last_number_does_not_overflow() {
        let mut last = log().pop().expect("an entry");
        last.seq = i64::MAX;
        let mut chain = EvidenceChain::after("r1", Some(&last));
        assert_eq!(chain.next_seq(), i64::MAX, "the store refuses the next entry as taken");
        let entries = vec![NewEvidence::new(EvidenceKind::RunFinished, json!({})); 2];
        let sealed = chain.seal(entries, 12);
        assert_eq!(sealed.iter().map(|e| e.seq).collect::<Vec<_>>(), [i64::MAX, i64::MAX]);
        chain.advance(&sealed);
        assert_eq!(chain.next_seq(), i64::MAX);
    }

    #[test]
    fn fields_cannot_bleed_into_each_other() {
        let a = entry_hash("", "r", 1, EvidenceKind::ModelTurn, Some("ab"), 1, &json!("c"));
        let b = entry_hash("", "r", 1, EvidenceKind::ModelTurn, Some("a"), 1, &json!("bc"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
    }
}
