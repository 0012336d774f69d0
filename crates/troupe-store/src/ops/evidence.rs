//! The evidence log: entries appended under a run's fence, never changed.

use super::decode;
use super::queue::hold_fence;
use crate::error::StoreError;
use crate::record::{EvidenceEntry, Lease};
use crate::sql::{Conn, Dialect, Failure, Param, Statement};

const INSERT_EVIDENCE: Statement = statement!(
    "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
);

// The head only moves forward: a write that appends behind it (refused anyway, its sequence
// number taken) never moves it back. Used where a `WITH` may not write (SQLite), whose
// schema keeps the head in the run's row; elsewhere it moves with its entries
// (`INSERT_EVIDENCE_MOVING_HEAD`, `fenced_entries!`).
const MOVE_HEAD: Statement = statement!(
    "",
    postgres(""),
    sqlite("UPDATE runs SET evidence_seq = $2, evidence_hash = $3 WHERE id = $1 AND evidence_seq < $2"),
    ""
);

/// [`INSERT_EVIDENCE`] and [`MOVE_HEAD`] to it in one statement, where the dialect allows it.
const INSERT_EVIDENCE_MOVING_HEAD: Statement = statement!(
    "WITH entry AS (INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING run_id, seq, hash) \
     INSERT INTO evidence_heads (run_id, seq, hash) SELECT run_id, seq, hash FROM entry \
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash \
     WHERE evidence_heads.seq < excluded.seq"
);

/// The parts of a `WITH` that append a write's entries to run `$1` and move its head to
/// the last, each only for a row of the gate `$gate` (a lease held, a checkpoint allowed):
/// the entries are `$4` to `$10`, the columns of [`EntryColumns`].
#[cfg(feature = "postgres")]
macro_rules! fenced_entries {
    ($gate:literal) => {
        concat!(
            " entries AS (INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
               SELECT $1, e.seq, e.kind, e.call_id, e.payload, e.recorded_at, e.prev_hash, e.hash \
               FROM ",
            $gate,
            ", UNNEST($4, $5, $6, $7, $8, $9, $10) AS e (seq, kind, call_id, payload, recorded_at, prev_hash, hash)), \
             head AS (INSERT INTO evidence_heads (run_id, seq, hash) \
               SELECT $1, $4[CARDINALITY($4)], $10[CARDINALITY($10)] FROM ",
            $gate,
            " WHERE CARDINALITY($4) > 0 \
               ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash \
               WHERE evidence_heads.seq < excluded.seq)"
        )
    };
}
#[cfg(feature = "postgres")]
pub(crate) use fenced_entries;

// Entries appended under a fence in one statement, where a `WITH` may write: the lease
// held (`FOR SHARE`, as `FENCE` holds it), then `fenced_entries!`. Parameters: the run,
// the lease's owner and epoch, then the entries' columns.
#[cfg(feature = "postgres")]
const APPEND_FENCED: Statement = statement!(
    "",
    postgres(concat!(
        "WITH fence AS (SELECT run_id FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3 FOR SHARE),",
        fenced_entries!("fence"),
        " SELECT EXISTS (SELECT 1 FROM fence) AS held"
    )),
    sqlite(""),
    ""
);

const EVIDENCE: Statement = statement!(
    "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
     WHERE run_id = $1 AND seq > $2 ORDER BY seq"
);

const LAST_EVIDENCE: Statement = statement!(
    "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
     WHERE run_id = $1 ORDER BY seq DESC LIMIT 1"
);

/// Appends sealed `entries` in order, then moves each run's head to its last entry but
/// `moved`'s, whose head the caller moves; in the caller's transaction.
/// [`StoreError::EvidenceConflict`] if a sequence number is taken.
pub(crate) async fn insert_entries<C: Conn>(
    conn: &mut C,
    entries: &[EvidenceEntry],
    moved: Option<&str>,
) -> Result<(), StoreError> {
    // The last entry of each run moves its head: a write's entries are one run's, save a
    // fence-less append's.
    let last_of_its_run = |i: usize| entries[i + 1..].iter().all(|later| later.run_id != entries[i].run_id);
    for (i, entry) in entries.iter().enumerate() {
        // Where the dialect allows it, the entry moves the head in the same statement.
        let statement = if C::Dialect::WRITES_IN_WITH && last_of_its_run(i) {
            &INSERT_EVIDENCE_MOVING_HEAD
        } else {
            &INSERT_EVIDENCE
        };
        insert_evidence(conn, statement, entry).await?;
    }
    if !C::Dialect::WRITES_IN_WITH {
        for (i, entry) in entries.iter().enumerate() {
            if last_of_its_run(i) && moved != Some(entry.run_id.as_str()) {
                let params = [Param::Text(&entry.run_id), Param::Int(entry.seq), Param::Text(&entry.hash)];
                conn.execute(&MOVE_HEAD, &params).await?;
            }
        }
    }
    Ok(())
}

/// Appends one sealed entry with `statement` (which may move the head too); its payload
/// is stored as the very text that was hashed. [`StoreError::EvidenceConflict`] if its
/// sequence number is taken.
async fn insert_evidence(conn: &mut impl Conn, statement: &Statement, entry: &EvidenceEntry) -> Result<(), StoreError> {
    let payload = entry.payload.text();
    let params = [
        Param::Text(&entry.run_id),
        Param::Int(entry.seq),
        Param::Text(entry.kind.as_str()),
        Param::OptText(entry.call_id.as_deref()),
        Param::Text(payload),
        Param::Int(entry.recorded_at),
        Param::Text(&entry.prev_hash),
        Param::Text(&entry.hash),
    ];
    conn.execute(statement, &params).await.map_err(|e| {
        e.when(Failure::Unique, || StoreError::EvidenceConflict { run_id: entry.run_id.clone(), seq: entry.seq })
    })?;
    Ok(())
}

/// Appends `entries`, with `fence` only while its lease is held (and only to its own run);
/// one transaction, which the caller opened.
pub(crate) async fn append(
    conn: &mut impl Conn,
    entries: &[EvidenceEntry],
    fence: Option<&Lease>,
) -> Result<(), StoreError> {
    if let Some(lease) = fence {
        let foreign = entries.iter().find(|e| e.run_id != lease.run_id);
        hold_fence(conn, lease, foreign.map_or(lease.run_id.as_str(), |e| e.run_id.as_str())).await?;
    }
    insert_entries(conn, entries, None).await
}

/// Appends `entries` under `fence` in one statement ([`APPEND_FENCED`]), where the dialect
/// can and every entry is the fenced run's: `false` when it wrote nothing (the lease not
/// held, an entry's number taken, or no such statement here), for the caller to [`append`]
/// them, which says why, in a transaction.
#[cfg(feature = "postgres")]
pub(crate) async fn append_fenced<C: Conn>(
    conn: &mut C,
    entries: &[EvidenceEntry],
    fence: &Lease,
) -> Result<bool, StoreError> {
    if !C::Dialect::WRITES_IN_WITH || entries.iter().any(|entry| entry.run_id != fence.run_id) {
        return Ok(false);
    }
    let columns = EntryColumns::new(entries);
    let params = columns.fenced_params(&fence.run_id, fence);
    match conn.fetch_optional(&APPEND_FENCED, &params, |row| row.flag("held")).await {
        Ok(held) => Ok(held == Some(true)),
        // An entry's number taken: the statement wrote nothing, and the transaction says which.
        Err(e) if e.failure == Failure::Unique => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A write's entries as the columns of one `UNNEST`, each a list in the entries' order:
/// sequence numbers, kinds, call ids, payloads, times, previous
/// hashes, hashes.
#[cfg(feature = "postgres")]
pub(crate) struct EntryColumns<'a> {
    seqs: Vec<i64>,
    kinds: Vec<Option<&'a str>>,
    call_ids: Vec<Option<&'a str>>,
    payloads: Vec<Option<&'a str>>,
    recorded_at: Vec<i64>,
    prev_hashes: Vec<Option<&'a str>>,
    hashes: Vec<Option<&'a str>>,
}

#[cfg(feature = "postgres")]
impl<'a> EntryColumns<'a> {
    /// The columns of `entries`.
    pub(crate) fn new(entries: &'a [EvidenceEntry]) -> Self {
        let column = |text: fn(&'a EvidenceEntry) -> Option<&'a str>| entries.iter().map(text).collect();
        EntryColumns {
            seqs: entries.iter().map(|entry| entry.seq).collect(),
            kinds: column(|entry| Some(entry.kind.as_str())),
            call_ids: column(|entry| entry.call_id.as_deref()),
            // Each payload as the very text that was hashed.
            payloads: column(|entry| Some(entry.payload.text())),
            recorded_at: entries.iter().map(|entry| entry.recorded_at).collect(),
            prev_hashes: column(|entry| Some(entry.prev_hash.as_str())),
            hashes: column(|entry| Some(entry.hash.as_str())),
        }
    }

    /// The first ten parameters of a statement written with [`fenced_entries!`]: the
    /// fenced run, its lease's owner and epoch, then the columns in the order above.
    pub(crate) fn fenced_params<'p>(&'p self, run_id: &'p str, lease: &'p Lease) -> [Param<'p>; 10] {
        [
            Param::Text(run_id),
            Param::Text(&lease.owner),
            Param::Int(lease.epoch),
            Param::Ints(&self.seqs),
            Param::OptTexts(&self.kinds),
            Param::OptTexts(&self.call_ids),
            Param::OptTexts(&self.payloads),
            Param::Ints(&self.recorded_at),
            Param::OptTexts(&self.prev_hashes),
            Param::OptTexts(&self.hashes),
        ]
    }
}

/// The run's entries after `after`, in order.
pub(crate) async fn evidence(conn: &mut impl Conn, run_id: &str, after: i64) -> Result<Vec<EvidenceEntry>, StoreError> {
    Ok(conn.fetch_all(&EVIDENCE, &[Param::Text(run_id), Param::Int(after)], decode::evidence_entry).await?)
}

/// The run's newest entry.
pub(crate) async fn last_evidence(conn: &mut impl Conn, run_id: &str) -> Result<Option<EvidenceEntry>, StoreError> {
    Ok(conn.fetch_optional(&LAST_EVIDENCE, &[Param::Text(run_id)], decode::evidence_entry).await?)
}
