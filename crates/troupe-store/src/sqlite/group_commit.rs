//! [`GroupCommit`]: the store's hot writes (a run's creation, its checkpoints, its
//! evidence, its signals) committed together.
//!
//! SQLite commits one write transaction at a time, each with an `fsync` of the WAL
//! (`synchronous = FULL`). With many runs recording at once, their boundaries would queue
//! behind one another's `fsync`s. Here one task takes the writes waiting at that moment
//! (up to [`MAX_GROUP`]) and runs them in one `BEGIN IMMEDIATE` transaction, each in its
//! own savepoint (so a write that fails, a lost lease say, undoes only itself), and
//! commits them with one `fsync`. A caller is answered only once its group's commit has
//! returned: what was acknowledged is on disk, as before. A lone write runs without a
//! savepoint, exactly as it would alone.

use crate::error::StoreError;
use futures::future::BoxFuture;
use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

/// The most writes one transaction takes.
pub(super) const MAX_GROUP: usize = 64;

/// How many writes may wait for the writer; further callers wait for room.
const QUEUE: usize = 1024;

/// A write that ran in its savepoint: whether it succeeded, and how to answer its caller
/// once the group's commit is known (`Err` holds why the commit failed).
struct Ran {
    ok: bool,
    answer: Box<dyn FnOnce(Result<(), String>) + Send>,
}

/// One caller's write, with its answer channel inside.
type Job = Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Ran> + Send>;

/// The handle writes are sent through; clones share one writer task.
#[derive(Clone, Debug)]
pub(super) struct GroupCommit {
    jobs: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts the writer task on the current Tokio runtime. It takes a connection from
    /// `pool` for each group and gives it back after, so the pool can still be closed;
    /// it ends when every handle is gone.
    pub(super) fn start(pool: SqlitePool) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        tokio::spawn(writer(pool, queue));
        GroupCommit { jobs }
    }

    /// Runs `write` in the next group's transaction; its result once that commit is on
    /// disk, or its own error (its changes undone, the rest of the group unaffected).
    pub(super) async fn write<T, F>(&self, write: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T, StoreError>>();
        let job: Job = Box::new(move |conn| {
            Box::pin(async move {
                match write(conn).await {
                    Ok(value) => Ran {
                        ok: true,
                        answer: Box::new(move |committed| {
                            let _ = reply.send(committed.map(|()| value).map_err(StoreError::database));
                        }),
                    },
                    Err(error) => Ran {
                        ok: false,
                        answer: Box::new(move |_| {
                            let _ = reply.send(Err(error));
                        }),
                    },
                }
            })
        });
        self.jobs.send(job).await.map_err(|_| StoreError::database("the store's writer has stopped"))?;
        // No answer: the group's transaction failed before this write ran, so nothing of it
        // was committed.
        answer
            .await
            .map_err(|_| StoreError::database("the write's transaction failed before it ran; nothing was written"))?
    }
}

async fn writer(pool: SqlitePool, mut queue: mpsc::Receiver<Job>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut group, MAX_GROUP).await > 0 {
        commit_group(&pool, std::mem::take(&mut group)).await;
    }
}

/// Runs `group` in one transaction and answers each of its callers.
async fn commit_group(pool: &SqlitePool, group: Vec<Job>) {
    let mut answers = Vec::with_capacity(group.len());
    let committed = match pool.acquire().await {
        Ok(mut conn) => run_group(&mut conn, group, &mut answers).await,
        Err(error) => Err(error.to_string()),
    };
    for ran in answers {
        (ran.answer)(committed.clone());
    }
}

/// The transaction: `Ok` when it committed (or, for a lone write that failed, rolled
/// back with nothing else in it).
async fn run_group(conn: &mut SqliteConnection, group: Vec<Job>, answers: &mut Vec<Ran>) -> Result<(), String> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(|e| e.to_string())?;
    if let [_] = group.as_slice() {
        for job in group {
            let ran = job(&mut tx).await;
            let ok = ran.ok;
            answers.push(ran);
            if !ok {
                return tx.rollback().await.map_err(|e| e.to_string());
            }
        }
    } else {
        for job in group {
            let mut savepoint = tx.begin().await.map_err(|e| e.to_string())?;
            let ran = job(&mut savepoint).await;
            let kept = if ran.ok { savepoint.commit().await } else { savepoint.rollback().await };
            answers.push(ran);
            kept.map_err(|e| e.to_string())?;
        }
    }
    tx.commit().await.map_err(|e| e.to_string())
}
