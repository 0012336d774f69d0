//! Runs and their transitions; checkpoints, which save a run's boundary whole.

use super::decode;
use super::evidence::insert_entries;
#[cfg(feature = "postgres")]
use super::evidence::{EntryColumns, fenced_entries};
use super::queue::{acquire, enqueue, hold_fence, release};
use crate::error::StoreError;
use crate::record::{
    Checkpoint, Lease, MessagesWrite, Millis, NewRun, RunFilter, RunRecord, RunSpend, RunStatus, RunSummary,
    SavedCheckpoint, SpendGroup, SpendSums, Transition,
};
use crate::sql::{Conn, Dialect, Failure, Param, Statement};
use std::time::Duration;

/// The run's row, without its input (see [`INSERT_RUN`]): its spend is `$9` to `$12`.
macro_rules! insert_run_row {
    () => {
        "INSERT INTO runs (id, agent, status, activity, conversation_id, parent_run_id, state, signal_seq, \
         transition_seq, created_at, updated_at, spend_model, spend_tokens, spend_cost_usd, spend_rollup) \
         VALUES ($1, $2, $3, NULL, $4, $5, $6, 0, 1, $7, $7, $9, $10, $11, $12)"
    };
}

// The input goes to `run_inputs`: written once, not with every checkpoint of the run's row.
// Where a `WITH` may write, the run is created whole in one statement: its input, its first
// transition and, when it is queued, its place in the queue (what `insert_run` adds in
// steps on SQLite, starting with `INSERT_INPUT`).
const INSERT_RUN: Statement = statement!(
    "",
    postgres(concat!(
        "WITH run AS (",
        insert_run_row!(),
        " RETURNING id, status), \
         run_input AS (INSERT INTO run_inputs (run_id, input) SELECT id, $8 FROM run), \
         transition AS (INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) \
           SELECT id, 1, NULL, status, $7 FROM run) \
         INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) \
         SELECT id, $7, NULL, 0, NULL FROM run WHERE status = 'queued'"
    )),
    sqlite(insert_run_row!()),
    ""
);

const INSERT_INPUT: Statement = statement!("INSERT INTO run_inputs (run_id, input) VALUES ($1, $2)");

/// [`INSERT_RUN`] with its input, its first transition and its lease (what [`acquire`]
/// makes of a new run: epoch 1, available at once) in one statement, where the dialect
/// allows it.
const INSERT_LEASED_RUN: Statement = statement!(
    "WITH run AS (INSERT INTO runs (id, agent, status, activity, conversation_id, parent_run_id, state, \
       signal_seq, transition_seq, created_at, updated_at, spend_model, spend_tokens, spend_cost_usd, spend_rollup) \
       VALUES ($1, $2, $3, NULL, $4, $5, $6, 0, 1, $7, $7, $11, $12, $13, $14) \
       RETURNING id, status), \
     run_input AS (INSERT INTO run_inputs (run_id, input) SELECT id, $8 FROM run), \
     transition AS (INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) \
       SELECT id, 1, NULL, status, $7 FROM run) \
     INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) SELECT id, $7, $9, 1, $10 FROM run \
     RETURNING run_id, owner, epoch, expires_at"
);

const INSERT_TRANSITION: Statement =
    statement!("INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) VALUES ($1, $2, $3, $4, $5)");

// With the run's conversation as one JSON array (NULL for none), made by joining the
// messages' stored texts: one statement, one round trip to a server, and no message parsed
// by the database. The head of the run's evidence is a table of its own on PostgreSQL, the
// run's own columns on SQLite (schema 9: a checkpoint writes the run's row anyway).
const LOAD_RUN: Statement = statement!(
    "SELECT id, agent, status, activity, conversation_id, parent_run_id, i.input, state, created_at, updated_at, ",
    postgres(
        "COALESCE(h.seq, 0) AS evidence_seq, COALESCE(h.hash, '') AS evidence_hash, \
         (SELECT '[' || string_agg(m.message, ',' ORDER BY m.seq) || ']' \
           FROM run_messages m WHERE m.run_id = runs.id) AS messages \
         FROM runs LEFT JOIN run_inputs i ON i.run_id = runs.id LEFT JOIN evidence_heads h ON h.run_id = runs.id"
    ),
    sqlite(
        "evidence_seq, evidence_hash, \
         (SELECT '[' || group_concat(m.message, ',' ORDER BY m.seq) || ']' \
           FROM run_messages m WHERE m.run_id = runs.id) AS messages \
         FROM runs LEFT JOIN run_inputs i ON i.run_id = runs.id"
    ),
    " WHERE id = $1"
);

// Which runs a `RunFilter` selects, newest first, for `LIST_RUNS` and `LIST_RUN_RECORDS`:
// its status, agent, limit, conversation, parent, id prefix, search, creation time and
// offset are `$1` to `$9`. A search finds part of a name or of the model the run's state names,
// letters in either case (`instr`/`strpos`: no pattern characters to escape), or an id's
// start.
// PostgreSQL refuses to read a JSON text holding the escape `\u0000` (a NUL a tool's
// output may carry into a state), so the escape is read as `\ufffd` (the replacement
// character) there: the text stays valid JSON whatever precedes the escape (after an
// escaped backslash, `u0000` is plain text, and so is `ufffd`), and the model is found.
macro_rules! runs_selected {
    ($contains:literal, $model:literal) => {
        concat!(
            " WHERE (CAST($1 AS TEXT) IS NULL OR status = $1) AND (CAST($2 AS TEXT) IS NULL OR agent = $2) \
               AND (CAST($3 AS TEXT) IS NULL OR conversation_id = $3) \
               AND (CAST($5 AS TEXT) IS NULL OR parent_run_id = $5) \
               AND (CAST($6 AS TEXT) IS NULL OR (id >= $6 AND substr(id, 1, length($6)) = $6)) \
               AND (CAST($7 AS TEXT) IS NULL OR (id >= $7 AND substr(id, 1, length($7)) = $7) \
                    OR ",
            $contains,
            "(lower(agent), lower($7)) > 0 OR ",
            $contains,
            "(lower(",
            $model,
            "), lower($7)) > 0) \
               AND (CAST($8 AS BIGINT) IS NULL OR created_at >= $8) \
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $9"
        )
    };
}

const LIST_RUNS: Statement = statement!(
    "SELECT id, agent, status, activity, conversation_id, parent_run_id, created_at, updated_at FROM runs",
    postgres(runs_selected!("strpos", "replace(state, '\\u0000', '\\ufffd')::json ->> 'model'")),
    sqlite(runs_selected!("instr", "json_extract(state, '$.model')")),
    ""
);

// The runs whole but for their conversation kept apart (`NULL AS messages`): a list shows
// no message, and reading them would read every run's conversation.
const LIST_RUN_RECORDS: Statement = statement!(
    "SELECT id, agent, status, activity, conversation_id, parent_run_id, i.input, state, created_at, updated_at, ",
    postgres(concat!(
        "COALESCE(h.seq, 0) AS evidence_seq, COALESCE(h.hash, '') AS evidence_hash, NULL AS messages \
         FROM runs LEFT JOIN run_inputs i ON i.run_id = runs.id LEFT JOIN evidence_heads h ON h.run_id = runs.id",
        runs_selected!("strpos", "replace(state, '\\u0000', '\\ufffd')::json ->> 'model'")
    )),
    sqlite(concat!(
        "evidence_seq, evidence_hash, NULL AS messages FROM runs LEFT JOIN run_inputs i ON i.run_id = runs.id",
        runs_selected!("instr", "json_extract(state, '$.model')")
    )),
    ""
);

const TRANSITIONS: Statement =
    statement!("SELECT run_id, seq, from_status, to_status, at FROM run_transitions WHERE run_id = $1 ORDER BY seq");

// What a checkpoint's read of its run adds on SQLite: whether run `$1` has a message from
// `$past` on, the first past the ones the checkpoint writes (`NULL` when it writes none).
// SQLite deletes the rows of a `WITHOUT ROWID` table a statement may delete several of by
// first collecting their keys in a temporary b-tree; a boundary that only appends (nearly
// every one) has nothing to drop and skips `DROP_MESSAGES_FROM`. The look is one seek in the
// messages' key, made in the statement the checkpoint runs anyway (asked alone, it cost a
// statement more per boundary). Elsewhere the messages' write drops those rows itself
// (`REPLACE_MESSAGES_FROM`).
macro_rules! with_messages_past {
    ($past:literal) => {
        concat!(", EXISTS (SELECT 1 FROM run_messages m WHERE m.run_id = $1 AND m.seq >= ", $past, ") AS messages_past")
    };
}

// NO KEY UPDATE, not UPDATE: inserting a signal (whose foreign key share-locks the run) need
// not wait for the checkpoint; the bump of `signal_seq` does.
const CHECKPOINTED_RUN: Statement = statement!(
    "SELECT status, transition_seq, signal_seq",
    postgres(" FROM runs WHERE id = $1 FOR NO KEY UPDATE"),
    sqlite(concat!(with_messages_past!("$2"), " FROM runs WHERE id = $1")),
    ""
);

/// What [`FENCED_RUN`] reads from, in both dialects.
macro_rules! fenced_run_from {
    () => {
        " FROM runs r JOIN run_queue q ON q.run_id = r.id WHERE r.id = $1 AND q.owner = $2 AND q.epoch = $3"
    };
}

// A fenced checkpoint's read: the run, only while `owner` holds its lease at `epoch`; one
// statement where the lease and the run were two (one round trip less to a server).
const FENCED_RUN: Statement = statement!(
    "SELECT r.status, r.transition_seq, r.signal_seq",
    postgres(concat!(fenced_run_from!(), " FOR NO KEY UPDATE OF r FOR SHARE OF q")),
    sqlite(concat!(with_messages_past!("$4"), fenced_run_from!())),
    ""
);

// What `SAVE_RUN` adds on SQLite: the head moved forward to `$6`/`$7`, never back (every
// expression of a `SET` reads the row as it was).
macro_rules! sqlite_head_moved {
    () => {
        ", evidence_seq = max(evidence_seq, $6), \
         evidence_hash = CASE WHEN $6 > evidence_seq THEN $7 ELSE evidence_hash END, \
         spend_model = CASE WHEN $9 IS NULL THEN spend_model ELSE $8 END, \
         spend_tokens = coalesce($9, spend_tokens), spend_cost_usd = coalesce($10, spend_cost_usd), \
         spend_rollup = coalesce($11, spend_rollup)"
    };
}

// Two forms: SQLite rewrites the entries of every index on a column the `SET` names, even
// when its value is unchanged, so a boundary that keeps the status does not name it.
// SQLite's also move the head of the run's evidence, kept in its row, to `$6`/`$7` (the
// checkpoint's last entry; 0 for none, which never moves it): the row is written once,
// not again by `MOVE_HEAD`. Elsewhere the entries move it (`insert_entries`). They also
// keep the run's spend, `$8` to `$11`, when the checkpoint says it (`$9` not `NULL`);
// elsewhere `SAVE_SPEND` does.
const SAVE_RUN: Statement = statement!(
    "UPDATE runs SET activity = $2, state = $3, updated_at = $4",
    postgres(""),
    sqlite(sqlite_head_moved!()),
    " WHERE id = $1"
);

const SAVE_RUN_WITH_STATUS: Statement = statement!(
    "UPDATE runs SET activity = $2, state = $3, updated_at = $4, status = $5, transition_seq = transition_seq + 1",
    postgres(""),
    sqlite(sqlite_head_moved!()),
    " WHERE id = $1"
);

// The run's spend, where `SAVE_RUN` does not keep it (PostgreSQL's checkpoint in steps).
const SAVE_SPEND: Statement = statement!(
    "UPDATE runs SET spend_model = $2, spend_tokens = $3, spend_cost_usd = $4, spend_rollup = $5 WHERE id = $1"
);

// What the runs created since `$1` spent, in one statement (one snapshot): the runs that
// keep their spend summed by agent, model, day (whole days since the epoch, UTC) and rollup,
// `id` NULL; then each run that keeps none, by its `id` alone.
const SPEND_SINCE: Statement = statement!(
    "SELECT agent, spend_model, created_at / 86400000 AS day, spend_rollup, count(*) AS runs, \
       CAST(sum(spend_tokens) AS BIGINT) AS tokens, sum(spend_cost_usd) AS cost_usd, CAST(NULL AS TEXT) AS id \
     FROM runs WHERE created_at >= $1 AND spend_tokens IS NOT NULL \
     GROUP BY agent, spend_model, created_at / 86400000, spend_rollup \
     UNION ALL \
     SELECT agent, spend_model, 0, spend_rollup, 0, spend_tokens, spend_cost_usd, id \
     FROM runs WHERE created_at >= $1 AND spend_tokens IS NULL"
);

const DROP_MESSAGES_FROM: Statement = statement!("DELETE FROM run_messages WHERE run_id = $1 AND seq >= $2");

// The messages from `$2` on replaced by `$3`'s, in order, and the rows past them dropped in
// the same statement (one round trip to a server): they lie past the rows it writes, so the
// two never touch one row. Where a `WITH` may not write, see `UPSERT_MESSAGE`.
const REPLACE_MESSAGES_FROM: Statement = statement!(
    "",
    postgres(
        "WITH dropped AS (DELETE FROM run_messages WHERE run_id = $1 AND seq >= $2 + CARDINALITY($3::text[])) \
         INSERT INTO run_messages (run_id, seq, message) \
         SELECT $1, $2 + t.ord - 1, t.message FROM UNNEST($3::text[]) WITH ORDINALITY AS t (message, ord) \
         ON CONFLICT (run_id, seq) DO UPDATE SET message = excluded.message"
    ),
    sqlite(""),
    ""
);

// One message, on SQLite: after `DROP_MESSAGES_FROM`, one statement per message. A
// statement that writes one row needs no statement journal (SQLite copies every page a
// statement of several rows changes first, to undo that statement alone), and the
// messages' texts are bound as they are, not made into a JSON array for `json_each` to
// parse again.
const UPSERT_MESSAGE: Statement = statement!(
    "INSERT INTO run_messages (run_id, seq, message) VALUES ($1, $2, $3) \
     ON CONFLICT (run_id, seq) DO UPDATE SET message = excluded.message"
);

// A fenced checkpoint whole, in one statement where a `WITH` may write: one round trip to
// a server and no transaction to open and commit, where the steps of `save_checkpoint` are
// six to nine. `cur` reads the run and holds it and its lease, as `FENCED_RUN` does; `go` is
// that row if the checkpoint may be saved (a status the store knows, no signal pending that
// had to be consumed), and every write is of `go`'s run, so none happens unless all do. The
// writes touch distinct rows (the messages past the new ones and the new ones never meet).
// Parameters: the run, the lease's owner and epoch, the evidence's columns
// (`EntryColumns`, as `fenced_entries!` takes them), activity,
// state, now, status, signals-must-be-consumed, consumed-through, the messages' first
// index and texts, release, the known statuses, the spend (`$21` to `$24`, as `SAVE_RUN`'s
// `$8` to `$11`).
#[cfg(feature = "postgres")]
const SAVE_FENCED_CHECKPOINT: Statement = statement!(
    "",
    postgres(concat!(
        "WITH cur AS (SELECT r.status, r.transition_seq, r.signal_seq FROM runs r \
           JOIN run_queue q ON q.run_id = r.id WHERE r.id = $1 AND q.owner = $2 AND q.epoch = $3 \
           FOR NO KEY UPDATE OF r FOR SHARE OF q), \
         go AS (SELECT status, transition_seq FROM cur \
           WHERE status = ANY($20) AND NOT ($15 AND signal_seq > COALESCE($16, 0))), \
         saved AS (UPDATE runs SET activity = $11, state = $12, updated_at = $13, status = $14, \
           transition_seq = runs.transition_seq + CASE WHEN go.status = $14 THEN 0 ELSE 1 END, \
           spend_model = CASE WHEN $22::bigint IS NULL THEN runs.spend_model ELSE $21 END, \
           spend_tokens = COALESCE($22, runs.spend_tokens), spend_cost_usd = COALESCE($23, runs.spend_cost_usd), \
           spend_rollup = COALESCE($24, runs.spend_rollup) \
           FROM go WHERE runs.id = $1), \
         transition AS (INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) \
           SELECT $1, transition_seq + 1, status, $14, $13 FROM go WHERE status <> $14), \
         dropped AS (DELETE FROM run_messages WHERE run_id = $1 AND seq >= $17 + CARDINALITY($18) \
           AND EXISTS (SELECT 1 FROM go)), \
         messages AS (INSERT INTO run_messages (run_id, seq, message) \
           SELECT $1, $17 + t.ord - 1, t.message FROM go, UNNEST($18) WITH ORDINALITY AS t (message, ord) \
           ON CONFLICT (run_id, seq) DO UPDATE SET message = excluded.message),",
        fenced_entries!("go"),
        ", \
         consumed AS (UPDATE signals SET consumed_at = $13 \
           WHERE run_id = $1 AND seq <= $16 AND consumed_at IS NULL AND EXISTS (SELECT 1 FROM go)), \
         released AS (DELETE FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3 AND $19 \
           AND EXISTS (SELECT 1 FROM go)) \
         SELECT signal_seq, EXISTS (SELECT 1 FROM go) AS saved FROM cur"
    )),
    sqlite(""),
    ""
);

const CONSUME_SIGNALS: Statement =
    statement!("UPDATE signals SET consumed_at = $3 WHERE run_id = $1 AND seq <= $2 AND consumed_at IS NULL");

/// Creates `run` with its first transition, enqueued at `now` when it is queued (one
/// statement where the dialect writes in `WITH`). [`StoreError::RunExists`] if the id is
/// taken.
pub(crate) async fn insert_run<C: Conn>(conn: &mut C, run: &NewRun, now: Millis) -> Result<(), StoreError> {
    let (input, state) = (run.input.text(), run.state.text());
    let (params, spend) = (run_params(run, state, now, input), spend_params(run.spend.as_ref()));
    // SQLite's `INSERT_RUN` does not read the input (`$8`), which it writes in a statement
    // of its own.
    let params: Vec<Param<'_>> = params.into_iter().chain(spend).collect();
    conn.execute(&INSERT_RUN, &params).await.map_err(|e| e.when(Failure::Unique, taken(run)))?;
    if C::Dialect::WRITES_IN_WITH {
        return Ok(());
    }
    conn.execute(&INSERT_INPUT, &[Param::Text(&run.id), Param::Text(input)]).await?;
    insert_transition(conn, &run.id, 1, None, run.status, now).await?;
    if run.status == RunStatus::Queued {
        enqueue(conn, &run.id, now).await?;
    }
    Ok(())
}

/// Creates `run` and takes its lease for `owner`; one transaction, which the caller opened.
pub(crate) async fn insert_leased_run<C: Conn>(
    conn: &mut C,
    run: &NewRun,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Lease, StoreError> {
    let lease = if C::Dialect::WRITES_IN_WITH {
        let (input, state) = (run.input.text(), run.state.text());
        // `INSERT_RUN`'s eight, the lease's owner and expiry, then the spend.
        let lease = [Param::Text(owner), Param::Int(super::expiry(now, ttl))];
        let params: Vec<Param<'_>> = run_params(run, state, now, input)
            .into_iter()
            .chain(lease)
            .chain(spend_params(run.spend.as_ref()))
            .collect();
        conn.fetch_optional(&INSERT_LEASED_RUN, &params, decode::lease)
            .await
            .map_err(|e| e.when(Failure::Unique, taken(run)))?
    } else {
        insert_run(conn, run, now).await?;
        acquire(conn, &run.id, owner, ttl, now).await?
    };
    lease.ok_or_else(|| StoreError::LeaseLost { run_id: run.id.clone(), owner: owner.to_owned() })
}

/// The error of creating `run` under an id already taken.
fn taken(run: &NewRun) -> impl FnOnce() -> StoreError + '_ {
    || StoreError::RunExists { run_id: run.id.clone() }
}

/// [`INSERT_RUN`]'s parameters: `run` with its `state` as text, created `now`, and its
/// `input` as text last.
fn run_params<'a>(run: &'a NewRun, state: &'a str, now: Millis, input: &'a str) -> [Param<'a>; 8] {
    [
        Param::Text(&run.id),
        Param::Text(&run.agent),
        Param::Text(run.status.as_str()),
        Param::OptText(run.conversation_id.as_deref()),
        Param::OptText(run.parent_run_id.as_deref()),
        Param::Text(state),
        Param::Int(now),
        Param::Text(input),
    ]
}

/// `spend` as the four parameters of the `spend_*` columns (`NULL`s for none).
fn spend_params(spend: Option<&RunSpend>) -> [Param<'_>; 4] {
    match spend {
        Some(spend) => [
            Param::OptText(spend.model.as_deref()),
            Param::OptInt(Some(i64::try_from(spend.tokens).unwrap_or(i64::MAX))),
            // A cost no sum can hold is not kept as one: none is known.
            Param::OptFloat(Some(if spend.cost_usd.is_finite() { spend.cost_usd } else { 0.0 })),
            Param::OptBool(Some(spend.rollup)),
        ],
        None => [Param::OptText(None), Param::OptInt(None), Param::OptFloat(None), Param::OptBool(None)],
    }
}

async fn insert_transition(
    conn: &mut impl Conn,
    run_id: &str,
    seq: i64,
    from: Option<RunStatus>,
    to: RunStatus,
    at: Millis,
) -> Result<(), StoreError> {
    let params = [
        Param::Text(run_id),
        Param::Int(seq),
        Param::OptText(from.map(RunStatus::as_str)),
        Param::Text(to.as_str()),
        Param::Int(at),
    ];
    conn.execute(&INSERT_TRANSITION, &params).await?;
    Ok(())
}

/// The run `run_id`, with the head of its evidence, its state holding its conversation
/// (kept apart from it since the run's first checkpoint that wrote messages).
pub(crate) async fn load_run(conn: &mut impl Conn, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
    let loaded = conn.fetch_optional(&LOAD_RUN, &[Param::Text(run_id)], decode::run_record_with_messages).await?;
    let Some((mut record, messages)) = loaded else {
        return Ok(None);
    };
    // No rows: the run's conversation is in its state, as every run's was before.
    if let (Some(messages), Some(state)) = (messages, record.state.as_object_mut()) {
        state.insert("messages".to_owned(), serde_json::Value::Array(messages));
    }
    Ok(Some(record))
}

/// What the runs created since `since` spent: summed where they keep it, named where not.
pub(crate) async fn spend_since(conn: &mut impl Conn, since: Millis) -> Result<SpendSums, StoreError> {
    let rows = conn.fetch_all(&SPEND_SINCE, &[Param::Int(since)], spend_row).await?;
    let mut sums = SpendSums::default();
    for row in rows {
        match row {
            Ok(group) => sums.groups.push(group),
            Err(id) => sums.unsummed.push(id),
        }
    }
    Ok(sums)
}

/// A row of [`SPEND_SINCE`]: a group, or the id of a run that keeps no spend.
fn spend_row(row: &dyn crate::sql::Columns) -> Result<Result<SpendGroup, String>, StoreError> {
    if let Some(id) = row.opt_text("id")? {
        return Ok(Err(id));
    }
    let count = |name: &str| row.int(name).map(|n| u64::try_from(n).unwrap_or(0));
    Ok(Ok(SpendGroup {
        agent: row.text("agent")?,
        model: row.opt_text("spend_model")?,
        day: row.int("day")?,
        rollup: row.flag("spend_rollup")?,
        runs: count("runs")?,
        tokens: count("tokens")?,
        cost_usd: row.float("cost_usd")?,
    }))
}

/// The runs `filter` selects, newest first.
pub(crate) async fn list_runs(conn: &mut impl Conn, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    Ok(conn.fetch_all(&LIST_RUNS, &filter_params(filter), decode::run_summary).await?)
}

/// The runs `filter` selects, newest first, each whole but for the conversation kept
/// apart from its state (one statement, where [`load_run`] per run would read every
/// conversation).
pub(crate) async fn list_run_records(conn: &mut impl Conn, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
    let rows = conn.fetch_all(&LIST_RUN_RECORDS, &filter_params(filter), decode::run_record_with_messages).await?;
    Ok(rows.into_iter().map(|(record, _)| record).collect())
}

/// `filter` as the parameters of [`runs_selected!`].
fn filter_params(filter: &RunFilter) -> [Param<'_>; 9] {
    // No limit: a limit no store reaches.
    let limit = if filter.limit == 0 { i64::MAX } else { i64::from(filter.limit) };
    [
        Param::OptText(filter.status.map(RunStatus::as_str)),
        Param::OptText(filter.agent.as_deref()),
        Param::OptText(filter.conversation_id.as_deref()),
        Param::Int(limit),
        Param::OptText(filter.parent_run_id.as_deref()),
        Param::OptText(filter.id_prefix.as_deref()),
        Param::OptText(filter.search.as_deref()),
        Param::OptInt(filter.created_since),
        Param::Int(i64::from(filter.offset)),
    ]
}

/// The run's status changes, oldest first.
pub(crate) async fn transitions(conn: &mut impl Conn, run_id: &str) -> Result<Vec<Transition>, StoreError> {
    Ok(conn.fetch_all(&TRANSITIONS, &[Param::Text(run_id)], decode::transition).await?)
}

/// Saves `checkpoint`; one transaction, which the caller opened.
///
/// The run's row is read first, locked where the dialect locks rows: no signal can come
/// between that read and the commit, so the latest signal it saw is the latest at commit.
pub(crate) async fn save_checkpoint<C: Conn>(
    conn: &mut C,
    checkpoint: &Checkpoint,
    now: Millis,
) -> Result<SavedCheckpoint, StoreError> {
    let run_id = checkpoint.run_id.as_str();
    let past = checkpoint.messages.as_ref().map(past_of);
    let current = match &checkpoint.fence {
        Some(lease) => fenced_run(conn, lease, run_id, past).await?,
        None => checkpointed(conn, run_id, past).await?,
    };
    let Some(Current { status: from, transition_seq, signal_seq, messages_past }) = current else {
        return Err(StoreError::UnknownRun { run_id: run_id.to_owned() });
    };
    let from = decode::parse_status(&from, || format!("status of run `{run_id}`"))?;
    if checkpoint.require_signals_consumed && signal_seq > checkpoint.signals_consumed_through.unwrap_or(0) {
        return Err(StoreError::SignalsPending { run_id: run_id.to_owned() });
    }
    let changed = from != checkpoint.status;
    // Where the head of the run's evidence is kept in its row (SQLite), the row's write moves
    // it to the checkpoint's last entry of this run.
    let head_in_row = !C::Dialect::WRITES_IN_WITH;
    let head = checkpoint.evidence.iter().rev().find(|entry| entry.run_id == run_id);
    // `SAVE_RUN` takes the first four and, where it moves the head, the last two; the status
    // is the fifth, for `SAVE_RUN_WITH_STATUS`.
    let [spend_model, spend_tokens, spend_cost, spend_rollup] = spend_params(checkpoint.spend.as_ref());
    let params = [
        Param::Text(run_id),
        Param::OptText(checkpoint.activity.as_deref()),
        Param::Text(checkpoint.state.get()),
        Param::Int(now),
        Param::Text(checkpoint.status.as_str()),
        Param::Int(head.map_or(0, |entry| entry.seq)),
        Param::Text(head.map_or("", |entry| entry.hash.as_str())),
        spend_model,
        spend_tokens,
        spend_cost,
        spend_rollup,
    ];
    let params = if head_in_row { &params[..] } else { &params[..5] };
    if changed {
        // Checked before anything is written: only a corrupt row has no next number.
        let next = transition_seq.checked_add(1).ok_or_else(|| {
            StoreError::decode(
                format!("transition number of run `{run_id}`"),
                format!("{transition_seq} leaves no room for another transition"),
            )
        })?;
        conn.execute(&SAVE_RUN_WITH_STATUS, params).await?;
        insert_transition(conn, run_id, next, Some(from), checkpoint.status, now).await?;
    } else if head_in_row {
        conn.execute(&SAVE_RUN, params).await?;
    } else {
        conn.execute(&SAVE_RUN, &params[..4]).await?;
    }
    if !head_in_row && checkpoint.spend.is_some() {
        conn.execute(&SAVE_SPEND, &[Param::Text(run_id), spend_model, spend_tokens, spend_cost, spend_rollup]).await?;
    }
    if let Some(write) = &checkpoint.messages {
        save_messages(conn, run_id, write, messages_past).await?;
    }
    insert_entries(conn, &checkpoint.evidence, head_in_row.then_some(run_id)).await?;
    if let Some(through) = checkpoint.signals_consumed_through {
        conn.execute(&CONSUME_SIGNALS, &[Param::Text(run_id), Param::Int(through), Param::Int(now)]).await?;
    }
    if let (true, Some(lease)) = (checkpoint.release, &checkpoint.fence) {
        release(conn, lease, None).await?;
    }
    Ok(SavedCheckpoint { latest_signal: signal_seq })
}

/// Saves `checkpoint` in one statement ([`SAVE_FENCED_CHECKPOINT`]), where the dialect
/// can and the checkpoint is a fenced one with its own run's evidence. `None` when it saved
/// nothing (no such run, a lost lease, a signal pending, an entry's number taken): the
/// caller then saves it with [`save_checkpoint`], which finds out which, in a transaction.
#[cfg(feature = "postgres")]
pub(crate) async fn save_fenced_checkpoint<C: Conn>(
    conn: &mut C,
    checkpoint: &Checkpoint,
    now: Millis,
) -> Result<Option<SavedCheckpoint>, StoreError> {
    let run_id = checkpoint.run_id.as_str();
    let Some(lease) = checkpoint.fence.as_ref().filter(|lease| lease.run_id == run_id) else {
        return Ok(None);
    };
    if !C::Dialect::WRITES_IN_WITH || checkpoint.evidence.iter().any(|entry| entry.run_id != run_id) {
        return Ok(None);
    }
    let (messages_from, messages) = match &checkpoint.messages {
        Some(write) => (
            Some(i64::try_from(write.from).unwrap_or(i64::MAX)),
            write.messages.iter().map(|message| Some(message.get())).collect(),
        ),
        None => (None, Vec::new()),
    };
    let columns = EntryColumns::new(&checkpoint.evidence);
    let known = RunStatus::ALL.map(|status| Some(status.as_str()));
    let checkpointed = [
        Param::OptText(checkpoint.activity.as_deref()),
        Param::Text(checkpoint.state.get()),
        Param::Int(now),
        Param::Text(checkpoint.status.as_str()),
        Param::Bool(checkpoint.require_signals_consumed),
        Param::OptInt(checkpoint.signals_consumed_through),
        Param::OptInt(messages_from),
        Param::OptTexts(&messages),
        Param::Bool(checkpoint.release),
        Param::OptTexts(&known),
    ];
    let spend = spend_params(checkpoint.spend.as_ref());
    let params: Vec<Param<'_>> =
        columns.fenced_params(run_id, lease).into_iter().chain(checkpointed).chain(spend).collect();
    let decode: crate::sql::Decoder<(i64, bool)> = |row| Ok((row.int("signal_seq")?, row.flag("saved")?));
    match conn.fetch_optional(&SAVE_FENCED_CHECKPOINT, &params, decode).await {
        Ok(Some((latest_signal, true))) => Ok(Some(SavedCheckpoint { latest_signal })),
        Ok(_) => Ok(None),
        // An entry's number taken: the statement wrote nothing, and the transaction says which.
        Err(e) if e.failure == Failure::Unique => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replaces run `run_id`'s stored messages from `write.from` on with `write`'s. Where a
/// `WITH` may not write, `past` says whether the run has rows past the new ones (its
/// checkpoint's read asked, `with_messages_past!`), which go first, in a statement of their own.
async fn save_messages<C: Conn>(
    conn: &mut C,
    run_id: &str,
    write: &MessagesWrite,
    past: bool,
) -> Result<(), StoreError> {
    let from = i64::try_from(write.from).unwrap_or(i64::MAX);
    if C::Dialect::WRITES_IN_WITH {
        let messages: Vec<Option<&str>> = write.messages.iter().map(|m| Some(m.get())).collect();
        let params = [Param::Text(run_id), Param::Int(from), Param::OptTexts(&messages)];
        conn.execute(&REPLACE_MESSAGES_FROM, &params).await?;
        return Ok(());
    }
    if past {
        conn.execute(&DROP_MESSAGES_FROM, &[Param::Text(run_id), Param::Int(past_of(write))]).await?;
    }
    for (seq, message) in (from..).zip(&write.messages) {
        conn.execute(&UPSERT_MESSAGE, &[Param::Text(run_id), Param::Int(seq), Param::Text(message.get())]).await?;
    }
    Ok(())
}

/// The number of the first message past `write`'s.
fn past_of(write: &MessagesWrite) -> i64 {
    let (from, written) = (i64::try_from(write.from), i64::try_from(write.messages.len()));
    from.unwrap_or(i64::MAX).saturating_add(written.unwrap_or(i64::MAX))
}

/// The run a checkpoint saves, as it reads it first.
struct Current {
    status: String,
    transition_seq: i64,
    signal_seq: i64,
    /// Whether the run has messages past the checkpoint's new ones (always `false` where a
    /// `WITH` may write: its messages' write drops them without asking).
    messages_past: bool,
}

/// The run `run_id` as a checkpoint reads it, while `lease` holds it:
/// [`StoreError::LeaseLost`] if it does not. `past` is the number of the first message past
/// the checkpoint's (see [`Current`]).
async fn fenced_run<C: Conn>(
    conn: &mut C,
    lease: &Lease,
    run_id: &str,
    past: Option<i64>,
) -> Result<Option<Current>, StoreError> {
    if lease.run_id == run_id {
        let params = [Param::Text(run_id), Param::Text(&lease.owner), Param::Int(lease.epoch), Param::OptInt(past)];
        let params = if C::Dialect::WRITES_IN_WITH { &params[..3] } else { &params[..] };
        if let Some(found) = conn.fetch_optional(&FENCED_RUN, params, current::<C::Dialect>).await? {
            return Ok(Some(found));
        }
    }
    // Nothing: the lease is not held (or is another run's), or there is no such run. The
    // two are asked apart, in the order a checkpoint has always checked them.
    hold_fence(conn, lease, run_id).await?;
    checkpointed(conn, run_id, past).await
}

/// The run `run_id` as an unfenced checkpoint reads it; `past` as [`fenced_run`] takes it.
async fn checkpointed<C: Conn>(conn: &mut C, run_id: &str, past: Option<i64>) -> Result<Option<Current>, StoreError> {
    let params = [Param::Text(run_id), Param::OptInt(past)];
    let params = if C::Dialect::WRITES_IN_WITH { &params[..1] } else { &params[..] };
    Ok(conn.fetch_optional(&CHECKPOINTED_RUN, params, current::<C::Dialect>).await?)
}

/// A row of [`CHECKPOINTED_RUN`] or [`FENCED_RUN`] in dialect `D`.
fn current<D: Dialect>(row: &dyn crate::sql::Columns) -> Result<Current, StoreError> {
    Ok(Current {
        status: row.text("status")?,
        transition_seq: row.int("transition_seq")?,
        signal_seq: row.int("signal_seq")?,
        messages_past: !D::WRITES_IN_WITH && row.flag("messages_past")?,
    })
}
