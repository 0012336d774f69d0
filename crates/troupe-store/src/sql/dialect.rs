//! [`Dialect`]: what differs between the SQL of the backends, beyond the text of a
//! [`Statement`].

use super::Statement;
use std::borrow::Cow;

/// A dialect of SQL the store's statements are written in.
pub(crate) trait Dialect {
    /// Whether a `WITH` clause may hold an `UPDATE ... RETURNING` whose rows an `INSERT`
    /// then reads: two writes in one statement, one round trip.
    const WRITES_IN_WITH: bool;

    /// Whether writers run at once, each locking what it must read unchanged (PostgreSQL's
    /// rows, its advisory locks), or one at a time under the database's write lock
    /// (SQLite), with nothing of their own to lock.
    const LOCKS_ROWS: bool;

    /// The statement's text in this dialect.
    fn text(statement: &Statement) -> &Cow<'static, str>;
}

/// SQLite's SQL.
#[cfg(feature = "sqlite")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sqlite;

#[cfg(feature = "sqlite")]
impl Dialect for Sqlite {
    const WRITES_IN_WITH: bool = false;
    const LOCKS_ROWS: bool = false;

    fn text(statement: &Statement) -> &Cow<'static, str> {
        &statement.sqlite
    }
}

/// PostgreSQL's SQL.
#[cfg(feature = "postgres")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Postgres;

#[cfg(feature = "postgres")]
impl Dialect for Postgres {
    const WRITES_IN_WITH: bool = true;
    const LOCKS_ROWS: bool = true;

    fn text(statement: &Statement) -> &Cow<'static, str> {
        &statement.postgres
    }
}
