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
// number taken) never moves it back.
const MOVE_HEAD: Statement = statement!(
    "INSERT INTO evidence_heads (run_id, seq, hash) VALUES ($1, $2, $3) \
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash \
     WHERE evidence_heads.seq < excluded.seq"
);

/// [`INSERT_EVIDENCE`] and [`MOVE_HEAD`] to it in one statement, where the dialect allows it.
const INSERT_EVIDENCE_MOVING_HEAD: Statement = statement!(
    "WITH entry AS (INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING run_id, seq, hash) \
     INSERT INTO evidence_heads (run_id, seq, hash) SELECT run_id, seq, hash FROM entry \
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash \
     WHERE evidence_heads.seq < excluded.seq"
);

const EVIDENCE: Statement = statement!(
    "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
     WHERE run_id = $1 AND seq > $2 ORDER BY seq"
);

const LAST_EVIDENCE: Statement = statement!(
    "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
     WHERE run_id = $1 ORDER BY seq DESC LIMIT 1"
);

/// Appends sealed `entries` in order, then moves each run's head to its last entry; in the
/// caller's transaction. [`StoreError::EvidenceConflict`] if a sequence number is taken.
pub(crate) async fn insert_entries<C: Conn>(conn: &mut C, entries: &[EvidenceEntry]) -> Result<(), StoreError> {
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
            if last_of_its_run(i) {
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
    let payload = entry.payload_text();
    let params = [
        Param::Text(&entry.run_id),
        Param::Int(entry.seq),
        Param::Text(entry.kind.as_str()),
        Param::OptText(entry.call_id.as_deref()),
        Param::Text(&payload),
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
    insert_entries(conn, entries).await
}

/// The run's entries after `after`, in order.
pub(crate) async fn evidence(conn: &mut impl Conn, run_id: &str, after: i64) -> Result<Vec<EvidenceEntry>, StoreError> {
    Ok(conn.fetch_all(&EVIDENCE, &[Param::Text(run_id), Param::Int(after)], decode::evidence_entry).await?)
}

/// The run's newest entry.
pub(crate) async fn last_evidence(conn: &mut impl Conn, run_id: &str) -> Result<Option<EvidenceEntry>, StoreError> {
    Ok(conn.fetch_optional(&LAST_EVIDENCE, &[Param::Text(run_id)], decode::evidence_entry).await?)
}
