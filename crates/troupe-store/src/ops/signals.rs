//! Signals: an inbound queue per run, numbered by the run's counter, taken only by runs that
//! may still apply them.

use super::decode;
use crate::error::StoreError;
use crate::record::{Millis, StoredSignal};
use crate::sql::{Conn, Dialect, Param, Statement};
use serde_json::Value;

/// Only a run that may still apply a signal takes one: bumping its counter locks its row,
/// which orders concurrent senders.
const BUMP_SIGNAL_SEQ: Statement = statement!(
    "UPDATE runs SET signal_seq = signal_seq + 1 WHERE id = $1 AND status IN ('queued', 'running', 'paused') \
     RETURNING signal_seq AS seq"
);

const INSERT_SIGNAL: Statement = statement!(
    "INSERT INTO signals (run_id, seq, kind, payload, sent_at, consumed_at) VALUES ($1, $2, $3, $4, $5, NULL)"
);

/// [`BUMP_SIGNAL_SEQ`] and [`INSERT_SIGNAL`] in one statement, where the dialect allows it.
const BUMP_AND_INSERT_SIGNAL: Statement = statement!(
    "WITH bumped AS (UPDATE runs SET signal_seq = signal_seq + 1 \
     WHERE id = $1 AND status IN ('queued', 'running', 'paused') RETURNING signal_seq) \
     INSERT INTO signals (run_id, seq, kind, payload, sent_at, consumed_at) \
     SELECT $1, signal_seq, $2, $3, $4, NULL FROM bumped RETURNING seq"
);

const RUN_STATUS: Statement = statement!("SELECT status FROM runs WHERE id = $1");

const PENDING_SIGNALS: Statement = statement!(
    "SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals \
     WHERE run_id = $1 AND seq > $2 AND consumed_at IS NULL ORDER BY seq"
);

const SIGNALS: Statement =
    statement!("SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals WHERE run_id = $1 ORDER BY seq");

/// Stores a signal for `run_id` under the run's next sequence number, and returns it.
/// An ended run takes no signal it could never apply ([`StoreError::RunEnded`]).
pub(crate) async fn insert_signal<C: Conn>(
    conn: &mut C,
    run_id: &str,
    kind: &str,
    payload: &Value,
    now: Millis,
) -> Result<i64, StoreError> {
    let payload = crate::chain::json_text(payload);
    let run = [Param::Text(run_id)];
    let seq = if C::Dialect::WRITES_IN_WITH {
        let params = [run[0], Param::Text(kind), Param::Text(&payload), Param::Int(now)];
        conn.fetch_optional(&BUMP_AND_INSERT_SIGNAL, &params, decode::seq).await?
    } else {
        let seq = conn.fetch_optional(&BUMP_SIGNAL_SEQ, &run, decode::seq).await?;
        if let Some(seq) = seq {
            let params = [run[0], Param::Int(seq), Param::Text(kind), Param::Text(&payload), Param::Int(now)];
            conn.execute(&INSERT_SIGNAL, &params).await?;
        }
        seq
    };
    if let Some(seq) = seq {
        return Ok(seq);
    }
    let status = conn.fetch_optional(&RUN_STATUS, &run, |row| row.text("status")).await?;
    Err(match status {
        Some(status) => StoreError::RunEnded { run_id: run_id.to_owned(), status },
        None => StoreError::UnknownRun { run_id: run_id.to_owned() },
    })
}

/// The run's signals after `after` that no checkpoint consumed, in order.
pub(crate) async fn pending_signals(
    conn: &mut impl Conn,
    run_id: &str,
    after: i64,
) -> Result<Vec<StoredSignal>, StoreError> {
    Ok(conn.fetch_all(&PENDING_SIGNALS, &[Param::Text(run_id), Param::Int(after)], decode::signal).await?)
}

/// All of the run's signals, in order.
pub(crate) async fn signals(conn: &mut impl Conn, run_id: &str) -> Result<Vec<StoredSignal>, StoreError> {
    Ok(conn.fetch_all(&SIGNALS, &[Param::Text(run_id)], decode::signal).await?)
}
