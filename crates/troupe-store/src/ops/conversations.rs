//! Conversations: the turns of each conversation id, across the runs that continued it,
//! numbered in the order they were appended.

use super::decode;
use crate::error::StoreError;
use crate::record::{ConversationTurn, Millis};
use crate::sql::{Conn, Dialect, Param, Statement};
use serde_json::Value;

/// Two-key advisory locks of troupe's conversations (the first key; the second is the
/// conversation id's hash). Two-key locks never collide with the one-key migration lock.
const CONVERSATION_LOCK_CLASS: i64 = 0x7472_6f75;

// Numbering reads the conversation's last turn: where writers run at once, appenders of one
// conversation take turns.
const LOCK_CONVERSATION: Statement = statement!("SELECT pg_advisory_xact_lock(CAST($1 AS INTEGER), hashtext($2))");

// All the turns in one statement, numbered after the last: `$4` holds their roles, `$5`
// their messages, in order.
const APPEND_TURNS: Statement = statement!(
    "INSERT INTO conversation_turns (conversation_id, seq, run_id, role, message, recorded_at) \
     SELECT $1, last.seq + t.ord, $2, t.role, t.message, $3 \
     FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM conversation_turns WHERE conversation_id = $1) AS last, ",
    postgres("UNNEST($4::text[], $5::text[]) WITH ORDINALITY AS t (role, message, ord)"),
    sqlite(
        "(SELECT r.key + 1 AS ord, r.value AS role, m.value AS message \
          FROM json_each($4) AS r JOIN json_each($5) AS m ON m.key = r.key) AS t"
    ),
    ""
);

const CONVERSATION: Statement = statement!(
    "SELECT conversation_id, seq, run_id, role, message, recorded_at FROM conversation_turns \
     WHERE conversation_id = $1 ORDER BY seq"
);

/// Appends `turns` (role and message) by `run_id` to the conversation, numbered after its
/// last turn; one transaction, which the caller opened (taking SQLite's write lock up
/// front, so that no other appender comes between the read of the last turn and the
/// insert).
pub(crate) async fn append_turns<C: Conn>(
    conn: &mut C,
    conversation_id: &str,
    run_id: &str,
    turns: &[(String, Value)],
    now: Millis,
) -> Result<(), StoreError> {
    if C::Dialect::LOCKS_ROWS {
        let lock = [Param::Int(CONVERSATION_LOCK_CLASS), Param::Text(conversation_id)];
        conn.execute(&LOCK_CONVERSATION, &lock).await?;
    }
    let (roles, messages): (Vec<String>, Vec<String>) =
        turns.iter().map(|(role, message)| (role.clone(), message.to_string())).unzip();
    let params = [
        Param::Text(conversation_id),
        Param::Text(run_id),
        Param::Int(now),
        Param::Texts(&roles),
        Param::Texts(&messages),
    ];
    conn.execute(&APPEND_TURNS, &params).await?;
    Ok(())
}

/// The conversation's turns, oldest first.
pub(crate) async fn conversation(
    conn: &mut impl Conn,
    conversation_id: &str,
) -> Result<Vec<ConversationTurn>, StoreError> {
    Ok(conn.fetch_all(&CONVERSATION, &[Param::Text(conversation_id)], decode::conversation_turn).await?)
}
