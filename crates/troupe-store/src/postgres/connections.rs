//! [`Connections`]: the store's own pool of PostgreSQL connections.
//!
//! sqlx's pool pings every connection it takes back, a round trip to the server after
//! each statement, because it cannot tell whether the statement was dropped midway and
//! left the connection in the middle of an exchange. This pool is told instead: a
//! connection goes back only from work that finished ([`InUse::finish`]). One whose work
//! was dropped before it finished, or that failed in the driver or the network, is
//! closed. Work refused for a reason of the store's (a lost lease, a run that exists) is
//! followed by one round trip, which also ends what a transaction left behind, before the
//! connection goes back.
//!
//! A connection idle for [`TRUSTED_IDLE`] or longer is pinged before use, since a server
//! restart or a proxy's idle limit may have closed it; one idle for [`IDLE_LIMIT`] or
//! open for [`LIFETIME`] is closed (sqlx's defaults).

use super::connect::{CONNECT_TIMEOUT, TRUSTED_IDLE, scrub};
use super::link::Pg;
use crate::error::StoreError;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many connections a store holds at most (sqlx's default).
pub(super) const MAX_CONNECTIONS: usize = 10;

/// An idle connection this old is closed rather than used.
const IDLE_LIMIT: Duration = Duration::from_secs(10 * 60);

/// A connection open this long is closed when its work ends.
const LIFETIME: Duration = Duration::from_secs(30 * 60);

/// The store's connections. Cloning is cheap: clones share the pool.
#[derive(Clone)]
pub(super) struct Connections {
    shared: Arc<Shared>,
}

struct Shared {
    options: PgConnectOptions,
    /// The statement that sets each new connection's schema, when the store has one.
    set_path: Option<Arc<str>>,
    /// The URL the store was opened with: what a connection error is scrubbed of.
    url: String,
    /// Where, redacted: what errors name.
    location: String,
    /// Idle connections, the most recently used last.
    idle: Mutex<Vec<Idle>>,
    /// One permit a connection, idle or in use.
    permits: Arc<Semaphore>,
    closed: AtomicBool,
}

struct Idle {
    conn: PgConnection,
    since: Instant,
    opened: Instant,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the options: they hold the password.
        f.debug_struct("Connections")
            .field("location", &self.shared.location)
            .field("idle", &self.idle().len())
            .field("closed", &self.shared.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Connections {
    /// A pool of at most `max` connections made with `options` (then `set_path`, when
    /// given), starting with `first`, an open connection already set up that way.
    pub(super) fn new(
        options: PgConnectOptions,
        set_path: Option<Arc<str>>,
        url: &str,
        location: String,
        max: usize,
        first: Option<PgConnection>,
    ) -> Connections {
        let now = Instant::now();
        let idle = first.into_iter().map(|conn| Idle { conn, since: now, opened: now }).collect();
        Connections {
            shared: Arc::new(Shared {
                options,
                set_path,
                url: url.to_owned(),
                location,
                idle: Mutex::new(idle),
                permits: Arc::new(Semaphore::new(max)),
                closed: AtomicBool::new(false),
            }),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Idle>> {
        // The list is whole at every point a panic could leave it.
        self.shared.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection for one piece of work: an idle one (pinged first when idle for
    /// [`TRUSTED_IDLE`]), else a new one; waiting at most [`CONNECT_TIMEOUT`] for one to
    /// come free when all are in use.
    pub(super) async fn get(&self) -> Result<InUse, StoreError> {
        let shared = &self.shared;
        let permit = tokio::time::timeout(CONNECT_TIMEOUT, Arc::clone(&shared.permits).acquire_owned())
            .await
            .map_err(|_| {
                StoreError::database(format!(
                    "no connection to {} came free within {} s",
                    shared.location,
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|_| StoreError::database(format!("the store at {} is closed", shared.location)))?;
        loop {
            let Some(mut idle) = self.idle().pop() else { break };
            match Checkout::of(idle.since.elapsed(), idle.opened.elapsed()) {
                Checkout::Close => {
                    let _ = idle.conn.close().await;
                }
                // A failed ping drops the connection; the next idle one, or a new one, serves.
                Checkout::Ping if !answers(&mut idle.conn).await => {}
                Checkout::AsItIs | Checkout::Ping => {
                    return Ok(InUse { conn: idle.conn, opened: idle.opened, pool: self.clone(), permit });
                }
            }
        }
        let conn = self.connect().await?;
        Ok(InUse { conn, opened: Instant::now(), pool: self.clone(), permit })
    }

    async fn connect(&self) -> Result<PgConnection, StoreError> {
        let shared = &self.shared;
        let unreachable = |reason: String| StoreError::Unreachable {
            location: shared.location.clone(),
            reason: scrub(&reason, &shared.url),
        };
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&shared.options))
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
            .map_err(|e| unreachable(e.to_string()))?;
        if let Some(set_path) = &shared.set_path {
            sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(set_path)))
                .execute(&mut conn)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
        }
        Ok(conn)
    }

    /// Closes every idle connection; one in use is closed when its work ends, and no
    /// connection is handed out any more.
    pub(super) async fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.permits.close();
        let idle = std::mem::take(&mut *self.idle());
        for idle in idle {
            let _ = idle.conn.close().await;
        }
    }
}

/// What is done with an idle connection before it is lent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Checkout {
    /// Used this recently, it is lent as it is.
    AsItIs,
    /// Idle long enough for the server or a proxy to have closed it: pinged first.
    Ping,
    /// Idle too long, or open too long: closed.
    Close,
}

impl Checkout {
    /// For a connection idle for `idle_for` and open for `age`.
    fn of(idle_for: Duration, age: Duration) -> Checkout {
        if idle_for >= IDLE_LIMIT || age >= LIFETIME {
            Checkout::Close
        } else if idle_for >= TRUSTED_IDLE {
            Checkout::Ping
        } else {
            Checkout::AsItIs
        }
    }
}

/// Whether `conn` answers a ping within [`CONNECT_TIMEOUT`]: a server that stopped
/// answering does not hold up the store's caller past it.
async fn answers(conn: &mut PgConnection) -> bool {
    matches!(tokio::time::timeout(CONNECT_TIMEOUT, conn.ping()).await, Ok(Ok(())))
}

/// A connection lent for one piece of work. It goes back to the pool through
/// [`finish`](InUse::finish); dropped before that (its work dropped midway), it is closed.
pub(super) struct InUse {
    conn: PgConnection,
    opened: Instant,
    pool: Connections,
    permit: OwnedSemaphorePermit,
}

impl InUse {
    /// The connection, for a transaction or a statement of its own.
    pub(super) fn conn(&mut self) -> &mut PgConnection {
        &mut self.conn
    }

    /// The connection as the store's operations take it.
    pub(super) fn link(&mut self) -> Pg<'_> {
        Pg::Conn(&mut self.conn)
    }

    /// Ends the work with `result`, which it returns: the connection goes back to the
    /// pool when the work succeeded, or was refused for a reason of the store's once a
    /// round trip shows the connection ready (ending any transaction left open); after a
    /// failure of the driver or the network it is closed.
    pub(super) async fn finish<T>(mut self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        let reusable = match &result {
            Ok(_) => true,
            Err(StoreError::Database { .. } | StoreError::Unreachable { .. }) => false,
            Err(_) => answers(&mut self.conn).await,
        };
        let InUse { conn, opened, pool, permit } = self;
        if reusable && !pool.shared.closed.load(Ordering::SeqCst) && opened.elapsed() < LIFETIME {
            pool.idle().push(Idle { conn, since: Instant::now(), opened });
        }
        // Otherwise the connection is dropped: its socket closes, and the server ends its
        // session (and any transaction in it). The permit goes back only now, with the
        // connection in the list or gone.
        drop(permit);
        result
    }
}

/// Runs `$op` (an operation of [`crate::ops`], given the connection as `$link`) on a
/// connection of `$store`'s pool, and gives the connection back once it finished.
macro_rules! each {
    ($store:expr, |$link:ident| $op:expr) => {{
        let mut in_use = $store.connections.get().await?;
        let result = {
            let mut pg = in_use.link();
            let $link = &mut pg;
            $op.await
        };
        in_use.finish(result).await
    }};
}

pub(super) use each;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_connection_is_lent_pinged_or_closed_by_how_long_it_waited_and_lived() {
        let minute = Duration::from_secs(60);
        assert_eq!(Checkout::of(Duration::from_millis(100), minute), Checkout::AsItIs);
        assert_eq!(Checkout::of(TRUSTED_IDLE, minute), Checkout::Ping);
        assert_eq!(Checkout::of(9 * minute, 29 * minute), Checkout::Ping);
        assert_eq!(Checkout::of(10 * minute, 10 * minute), Checkout::Close);
        assert_eq!(Checkout::of(Duration::ZERO, 30 * minute), Checkout::Close);
    }
}
