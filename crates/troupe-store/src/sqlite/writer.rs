//! [`Writer`]: the thread that runs the store's hot calls — a run's creation, its
//! checkpoints, evidence, signals and leases, schedule firings — on one SQLite connection
//! of its own, and commits the writes in groups.
//!
//! Each call is one hand-off to the thread and one answer back, however many statements
//! it runs (statements are prepared once and cached). Writes waiting at the same moment
//! (up to [`MAX_GROUP`]) run in one `BEGIN IMMEDIATE` transaction; the group is committed
//! with one `fsync` (`synchronous = FULL`), and a caller is answered only once its group's
//! commit has returned: what was acknowledged is on disk. Reads run between groups,
//! outside any transaction.
//!
//! The connection goes through `troupe-sqlite-wal`'s VFS, which hands a commit's WAL
//! frames to the system in one write instead of two per page.
//!
//! A write that fails (a lost lease, say) must undo only itself. Failures are rare, so a
//! group first runs without savepoints (each would copy every page its write touches into
//! a sub-journal); when one of its writes fails, the group is rolled back and run again,
//! each write in its own savepoint, and only the failed write's changes are undone. A
//! write may therefore run twice, the first time in a transaction that was rolled back:
//! a write is a function of the database it runs on, with no effect outside it.
//!
//! A group whose writes all asked for [`Flush::WithNextFlush`] commits with
//! `synchronous = NORMAL`: its WAL frames are written but not synced, and the next
//! `FULL` commit's `fsync` of the same WAL file takes them to disk with its own.

use crate::error::StoreError;
use crate::record::Flush;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The most writes one transaction takes.
const MAX_GROUP: usize = 64;

/// How many calls may wait for the thread; further callers wait for room.
const QUEUE: usize = 1024;

/// How many prepared statements the thread's connection keeps: more than the whole store
/// has (its operations' statements, about fifty, and its transactions' own), so that none
/// is prepared twice. rusqlite keeps 16 by default, fewer than this thread runs in a
/// worker's day (runs created and checkpointed, evidence, signals, claims, heartbeats,
/// releases: about twenty): they were evicted and prepared again, each time at several
/// times the cost of running one.
const PREPARED: usize = 128;

/// One caller's call, with its answer channel inside.
trait Call: Send {
    /// Runs the call on `conn` (in the open transaction, for a write); whether it
    /// succeeded. A write may be run again after its group was rolled back.
    fn run(&mut self, conn: &Connection) -> bool;

    /// Answers the caller with the call's last result, once its group's commit is known
    /// (`Err` holds why the commit failed).
    fn answer(self: Box<Self>, committed: Result<(), String>);
}

type Job = Box<dyn Call>;

/// A call and its caller: `F` runs it, the last result waits for the answer.
struct Pending<T, F> {
    call: F,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Answer<T, F>>,
}

/// A call's result, and the call itself, handed back so that what it holds (a checkpoint's
/// state and evidence, allocated by the caller's thread) is freed by the caller's thread.
/// Freed on this thread instead, each such block would go back to the allocator arena of
/// the thread that made it, under that arena's lock, contended with its owner.
type Answer<T, F> = (Result<T, StoreError>, F);

impl<T, F> Call for Pending<T, F>
where
    T: Send,
    F: FnMut(&Connection) -> Result<T, StoreError> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let result = (self.call)(conn);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn answer(self: Box<Self>, committed: Result<(), String>) {
        let answer = match (self.result, committed) {
            // A write that failed undid only itself: its own error, whatever the group's fate.
            (Some(Err(error)), _) => Err(error),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Ok(_)), Err(why)) => Err(StoreError::database(why)),
            (None, _) => Err(StoreError::database("the write's transaction failed before it ran; nothing was written")),
        };
        let _ = self.reply.send((answer, self.call));
    }
}

enum Message {
    Write(Job, Flush),
    Read(Job),
    /// Finish what is queued, close the connection, then say so.
    Stop(oneshot::Sender<()>),
}

/// The handle calls are sent through; clones share one thread.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    queue: mpsc::Sender<Message>,
}

impl Writer {
    /// Opens the thread's connection on the (already migrated) database at `path` and
    /// starts the thread. It ends when every handle is gone, or at [`Writer::stop`].
    pub(super) fn start(path: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let failed = |e: rusqlite::Error| StoreError::Unreachable { location: location.clone(), reason: e.to_string() };
        // Through the VFS that writes a commit's WAL frames in one system call, not two per
        // page (see `troupe-sqlite-wal`). It is built on SQLite's `unix` VFS; where there is
        // none (Windows), the connection opens on the system's own VFS, which writes each
        // frame as it comes.
        let conn = match troupe_sqlite_wal::register() {
            Ok(vfs) => Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs),
            Err(why) => {
                tracing::debug!(%why, "the SQLite writer writes its WAL frame by frame");
                Connection::open(path)
            }
        }
        .map_err(failed)?;
        conn.busy_timeout(busy_timeout).map_err(failed)?;
        // The WAL journal mode is the file's own; these two are the connection's.
        conn.pragma_update(None, "synchronous", Flush::BeforeAnswer.synchronous()).map_err(failed)?;
        conn.pragma_update(None, "foreign_keys", true).map_err(failed)?;
        // A group's savepoints copy each page they change first into a sub-journal: in
        // memory, not in a temporary file written and read back for every write.
        conn.pragma_update(None, "temp_store", "MEMORY").map_err(failed)?;
        conn.set_prepared_statement_cache_capacity(PREPARED);
        let (queue, messages) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("troupe-sqlite-writer".to_owned())
            .spawn(move || serve(conn, messages))
            .map_err(|e| StoreError::Unreachable { location, reason: format!("cannot start its writer: {e}") })?;
        Ok(Writer { queue })
    }

    /// Runs `write` in the next group's transaction: its result once that commit is on
    /// disk, or its own error (its changes undone, the rest of the group unaffected).
    /// `write` runs again when another write of its group failed, so it must touch
    /// nothing but the database.
    pub(super) async fn write<T, F>(&self, write: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.write_flushed(Flush::BeforeAnswer, write).await
    }

    /// [`Writer::write`], on disk when `flush` says.
    pub(super) async fn write_flushed<T, F>(&self, flush: Flush, write: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, answer) = job(write);
        self.send(Message::Write(job, flush)).await?;
        Self::answer(answer).await
    }

    /// Runs `read` on the thread's connection, outside any transaction.
    pub(super) async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, answer) = job(read);
        self.send(Message::Read(job)).await?;
        Self::answer(answer).await
    }

    /// Runs what is queued, closes the connection and ends the thread; later calls fail.
    pub(super) async fn stop(&self) {
        let (done, stopped) = oneshot::channel();
        if self.queue.send(Message::Stop(done)).await.is_ok() {
            let _ = stopped.await;
        }
    }

    async fn send(&self, message: Message) -> Result<(), StoreError> {
        self.queue.send(message).await.map_err(|_| StoreError::database("the store is closed"))
    }

    async fn answer<T, F>(answer: oneshot::Receiver<Answer<T, F>>) -> Result<T, StoreError> {
        // No answer: the group's transaction failed before this call ran, so nothing of it
        // was written.
        let (result, call) = answer
            .await
            .map_err(|_| StoreError::database("the write's transaction failed before it ran; nothing was written"))?;
        drop(call);
        result
    }
}

/// `call` as a job, and where its answer arrives.
fn job<T, F>(call: F) -> (Job, oneshot::Receiver<Answer<T, F>>)
where
    T: Send + 'static,
    F: FnMut(&Connection) -> Result<T, StoreError> + Send + 'static,
{
    let (reply, answer) = oneshot::channel::<Answer<T, F>>();
    (Box::new(Pending { call, result: None, reply }), answer)
}

/// The thread: takes what is waiting, runs the reads, commits the writes as one group.
fn serve(mut conn: Connection, mut messages: mpsc::Receiver<Message>) {
    let mut stop = None;
    let mut mode = Flush::BeforeAnswer;
    while stop.is_none() {
        let Some(first) = messages.blocking_recv() else { break };
        let mut writes = Vec::new();
        let mut flush = Flush::WithNextFlush;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Read(mut job) => {
                    job.run(&conn);
                    job.answer(Ok(()));
                }
                Message::Write(job, wanted) => {
                    writes.push(job);
                    if wanted == Flush::BeforeAnswer {
                        flush = Flush::BeforeAnswer;
                    }
                }
                Message::Stop(done) => stop = Some(done),
            }
            if writes.len() < MAX_GROUP && stop.is_none() {
                next = messages.try_recv().ok();
            }
        }
        if writes.is_empty() {
            continue;
        }
        if flush != mode {
            match conn.pragma_update(None, "synchronous", flush.synchronous()) {
                Ok(()) => mode = flush,
                // Still `NORMAL`: a write that must be on disk when answered cannot run.
                // Its callers hear that nothing of it was written.
                Err(_) if flush == Flush::BeforeAnswer => {
                    drop(writes);
                    continue;
                }
                // Still `FULL`: the group is flushed anyway.
                Err(_) => {}
            }
        }
        commit_group(&mut conn, writes);
    }
    drop(conn);
    if let Some(done) = stop {
        let _ = done.send(());
    }
}

/// Runs `group` in one transaction and answers each of its callers.
fn commit_group(conn: &mut Connection, mut group: Vec<Job>) {
    let committed = run_group(conn, &mut group).map_err(|e| e.to_string());
    for job in group {
        job.answer(committed.clone());
    }
}

/// The transaction: `Ok` when it committed (or, for a lone write that failed, rolled
/// back with nothing else in it).
///
/// Its control statements are prepared once and cached, like the writes' own.
fn run_group(conn: &mut Connection, group: &mut [Job]) -> rusqlite::Result<()> {
    let ended = match run_at_once(conn, group) {
        // A write failed in a group of several: the others run again, each write in a
        // savepoint of its own.
        Ok(false) if group.len() > 1 => execute(conn, "ROLLBACK", [])
            .and_then(|_| run_with_savepoints(conn, group))
            .and_then(|()| execute(conn, "COMMIT", [])),
        Ok(false) => execute(conn, "ROLLBACK", []),
        Ok(true) => execute(conn, "COMMIT", []),
        Err(e) => Err(e),
    };
    if ended.is_err() && !conn.is_autocommit() {
        // Nothing of a group that could not commit stays half-applied.
        let _ = execute(conn, "ROLLBACK", []);
    }
    ended.map(drop)
}

/// Opens the group's transaction and runs its writes one after another: `Ok(false)` as
/// soon as one fails (the transaction is then still open, to be rolled back).
fn run_at_once(conn: &Connection, group: &mut [Job]) -> rusqlite::Result<bool> {
    execute(conn, "BEGIN IMMEDIATE", [])?;
    Ok(group.iter_mut().all(|job| job.run(conn)))
}

/// Opens the group's transaction again and runs each write in a savepoint, undoing a
/// write that fails, and only it.
fn run_with_savepoints(conn: &Connection, group: &mut [Job]) -> rusqlite::Result<()> {
    execute(conn, "BEGIN IMMEDIATE", [])?;
    for job in group {
        execute(conn, "SAVEPOINT write", [])?;
        if !job.run(conn) {
            // Undoes this write alone; the savepoint is then released with nothing in it.
            execute(conn, "ROLLBACK TO write", [])?;
        }
        execute(conn, "RELEASE write", [])?;
    }
    Ok(())
}

/// Runs one statement on `conn`, prepared once per connection and cached.
pub(super) fn execute(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

impl Flush {
    /// The `synchronous` setting a group committed with this flush needs.
    fn synchronous(self) -> &'static str {
        match self {
            Flush::BeforeAnswer => "FULL",
            Flush::WithNextFlush => "NORMAL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer on a new WAL database made by `schema`, in a directory removed when dropped.
    fn writer_on(schema: &str) -> (tempfile::TempDir, Writer) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("writer.db");
        let conn = Connection::open(&path).expect("the database opens");
        conn.pragma_update(None, "journal_mode", "WAL").expect("WAL");
        conn.execute(schema, []).expect("the table is made");
        drop(conn);
        (dir, Writer::start(&path, Duration::from_secs(5)).expect("the writer starts"))
    }

    /// The `synchronous` setting a write ran under, read inside its own transaction.
    async fn synchronous_of(writer: &Writer, flush: Flush) -> i64 {
        writer
            .write_flushed(flush, move |conn| {
                execute(conn, "INSERT INTO notes (flush) VALUES (?1)", [format!("{flush:?}")])
                    .map_err(StoreError::database)?;
                conn.query_row("PRAGMA synchronous", [], |row| row.get(0)).map_err(StoreError::database)
            })
            .await
            .expect("the write commits")
    }

    #[test]
    fn the_connection_keeps_more_prepared_statements_than_the_store_has() {
        let operations = [
            include_str!("../ops/conversations.rs"),
            include_str!("../ops/evidence.rs"),
            include_str!("../ops/memory.rs"),
            include_str!("../ops/queue.rs"),
            include_str!("../ops/runs.rs"),
            include_str!("../ops/schedules.rs"),
            include_str!("../ops/signals.rs"),
            include_str!("../ops/work.rs"),
        ];
        let defined: usize = operations.iter().map(|source| source.matches("statement!(").count()).sum();
        assert!(defined >= 40, "the operations' statements are counted: {defined}");
        // The transactions' own (six), and a memory search's, one per number of terms.
        let room = defined + 6 + 16;
        assert!(PREPARED >= room, "{PREPARED} prepared statements kept, {room} needed");
    }

    #[tokio::test]
    async fn a_failed_write_in_a_group_undoes_only_itself() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let (_dir, writer) = writer_on("CREATE TABLE log (n INTEGER NOT NULL)");

        // The thread is held by a slow read while 40 writes queue: they run as groups.
        let (held, release) = std::sync::mpsc::channel::<()>();
        let read = writer.read(move |_| {
            let _ = release.recv_timeout(Duration::from_secs(5));
            Ok(())
        });
        let runs = Arc::new(AtomicUsize::new(0));
        let writes: Vec<_> = (0..40_i64)
            .map(|n| {
                let (writer, runs) = (writer.clone(), Arc::clone(&runs));
                tokio::spawn(async move {
                    writer
                        .write(move |conn| {
                            runs.fetch_add(1, Ordering::SeqCst);
                            // Every seventh write fails after writing: its row must not stay.
                            execute(conn, "INSERT INTO log (n) VALUES (?1)", [n]).map_err(StoreError::database)?;
                            if n % 7 == 3 {
                                return Err(StoreError::database(format!("write {n} refused")));
                            }
                            Ok(n)
                        })
                        .await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        held.send(()).expect("the read waits");
        read.await.expect("the read answers");
        for (n, write) in writes.into_iter().enumerate() {
            let answer = write.await.expect("the write's task ends");
            if n % 7 == 3 {
                assert!(answer.is_err(), "write {n} failed and is told so");
            } else {
                assert_eq!(answer.expect("the write commits"), n as i64);
            }
        }
        let logged: Vec<i64> = writer
            .read(|conn| {
                let mut statement = conn.prepare("SELECT n FROM log ORDER BY n").map_err(StoreError::database)?;
                let rows = statement.query_map([], |row| row.get(0)).map_err(StoreError::database)?;
                rows.collect::<Result<_, _>>().map_err(StoreError::database)
            })
            .await
            .expect("the log reads");
        let expected: Vec<i64> = (0..40).filter(|n| n % 7 != 3).collect();
        assert_eq!(logged, expected, "each write that succeeded is written once, each that failed not at all");
        assert!(
            runs.load(Ordering::SeqCst) > 40,
            "a group with a failed write ran again, its writes in savepoints ({} runs)",
            runs.load(Ordering::SeqCst)
        );
        writer.stop().await;
    }

    #[tokio::test]
    async fn a_deferred_write_commits_without_a_sync_and_a_flushed_one_with_it() {
        let (_dir, writer) = writer_on("CREATE TABLE notes (flush TEXT NOT NULL)");

        // 1 is NORMAL (no fsync at commit in WAL mode), 2 is FULL.
        assert_eq!(synchronous_of(&writer, Flush::BeforeAnswer).await, 2);
        assert_eq!(synchronous_of(&writer, Flush::WithNextFlush).await, 1);
        assert_eq!(synchronous_of(&writer, Flush::WithNextFlush).await, 1);
        assert_eq!(synchronous_of(&writer, Flush::BeforeAnswer).await, 2, "a flushed write is flushed again");
        let count = writer
            .read(|conn| {
                conn.query_row("SELECT count(*) FROM notes", [], |row| row.get::<_, i64>(0))
                    .map_err(StoreError::database)
            })
            .await
            .expect("the notes read");
        assert_eq!(count, 4, "every write committed");
        writer.stop().await;
    }

    /// Records the thread that drops it.
    struct DroppedOn(std::sync::Arc<std::sync::Mutex<Option<std::thread::ThreadId>>>);

    impl Drop for DroppedOn {
        fn drop(&mut self) {
            *self.0.lock().expect("the slot") = Some(std::thread::current().id());
        }
    }

    #[test]
    fn what_a_call_holds_is_freed_by_its_callers_thread_not_the_writers() {
        let (_dir, writer) = writer_on("CREATE TABLE notes (flush TEXT NOT NULL)");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        for read in [false, true] {
            let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
            let held = DroppedOn(std::sync::Arc::clone(&slot));
            let call = move |conn: &Connection| {
                let _ = &held;
                execute(conn, "INSERT INTO notes (flush) VALUES ('held')", []).map(drop).map_err(StoreError::database)
            };
            runtime
                .block_on(async { if read { writer.read(call).await } else { writer.write(call).await } })
                .expect("the call succeeds");
            let dropped_on = slot.lock().expect("the slot").expect("the call was dropped");
            assert_eq!(dropped_on, std::thread::current().id(), "read: {read}");
        }
        runtime.block_on(writer.stop());
    }
}
