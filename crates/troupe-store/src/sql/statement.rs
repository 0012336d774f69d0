//! [`Statement`]: one statement's text, written once, in each dialect.
//!
//! Statements are written with PostgreSQL's numbered placeholders (`$1`); SQLite's text is
//! derived at compile time (`?1`, which SQLite and both of its drivers bind by number, as
//! PostgreSQL does). Where only a row-locking clause differs, it is given apart and left
//! out of SQLite's text: SQLite locks the whole database for a write (the store's writes
//! take that lock when they begin), so it has no rows to lock. Statements that differ
//! further are written out for each dialect, side by side.

use std::borrow::Cow;

/// One statement's text in each dialect.
#[derive(Clone, Debug)]
pub(crate) struct Statement {
    /// PostgreSQL's text.
    #[cfg(feature = "postgres")]
    pub(crate) postgres: Cow<'static, str>,
    /// SQLite's text.
    #[cfg(feature = "sqlite")]
    pub(crate) sqlite: Cow<'static, str>,
}

impl Statement {
    /// A statement of these texts (see [`statement!`]).
    #[cfg_attr(not(all(feature = "postgres", feature = "sqlite")), allow(unused_variables))]
    pub(crate) const fn new(postgres: &'static str, sqlite: &'static str) -> Statement {
        Statement {
            #[cfg(feature = "postgres")]
            postgres: Cow::Borrowed(postgres),
            #[cfg(feature = "sqlite")]
            sqlite: Cow::Borrowed(sqlite),
        }
    }

    /// A statement built at run time (only its placeholders vary), written as PostgreSQL's.
    pub(crate) fn built(postgres: String) -> Statement {
        Statement {
            #[cfg(feature = "sqlite")]
            sqlite: Cow::Owned(String::from_utf8_lossy(&question_marks_of(postgres.as_bytes())).into_owned()),
            #[cfg(feature = "postgres")]
            postgres: Cow::Owned(postgres),
        }
    }
}

/// `text` with each placeholder `$N` written `?N`: the same length, so it can be computed
/// at compile time into an array of `N` bytes.
pub(crate) const fn question_marks<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        let placeholder = bytes[i] == b'$' && i + 1 < N && bytes[i + 1].is_ascii_digit();
        out[i] = if placeholder { b'?' } else { bytes[i] };
        i += 1;
    }
    out
}

#[cfg(feature = "sqlite")]
fn question_marks_of(text: &[u8]) -> Vec<u8> {
    text.iter()
        .enumerate()
        .map(|(i, &b)| {
            let placeholder = b == b'$' && text.get(i + 1).is_some_and(u8::is_ascii_digit);
            if placeholder { b'?' } else { b }
        })
        .collect()
}

/// `bytes` as text; a compile error (the statement is a constant) if it is not UTF-8,
/// which an ASCII-for-ASCII substitution cannot cause.
pub(crate) const fn utf8(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => panic!("a statement's text is not UTF-8"),
    }
}

/// A [`Statement`] constant.
///
/// - `statement!("SELECT ... WHERE id = $1")`: the same text in both dialects;
/// - `statement!("SELECT ... LIMIT 1", lock("FOR UPDATE SKIP LOCKED"), ") ...")`: with a
///   row-locking clause between the two parts in PostgreSQL, none in SQLite;
/// - `statement!("...", postgres("..."), sqlite("..."), "...")`: a part of each dialect's
///   own between two shared ones.
macro_rules! statement {
    ($head:expr, lock($lock:literal), $tail:expr $(,)?) => {
        statement!($head, postgres(concat!(" ", $lock)), sqlite(""), $tail)
    };
    ($head:expr, postgres($postgres:expr), sqlite($sqlite:expr), $tail:expr $(,)?) => {{
        const POSTGRES: &str = concat!($head, $postgres, $tail);
        const NUMBERED: &str = concat!($head, $sqlite, $tail);
        static SQLITE: [u8; NUMBERED.len()] = $crate::sql::statement::question_marks(NUMBERED);
        $crate::sql::Statement::new(POSTGRES, $crate::sql::statement::utf8(&SQLITE))
    }};
    ($text:expr $(,)?) => {
        statement!($text, postgres(""), sqlite(""), "")
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKED: Statement =
        statement!("SELECT seq FROM t WHERE a = $1 AND b = $12 LIMIT 1", lock("FOR UPDATE SKIP LOCKED"), " -- $x");

    #[test]
    fn placeholders_and_locks_follow_the_dialect() {
        let built = Statement::built("x = $3 AND y LIKE $4".to_owned());
        #[cfg(feature = "postgres")]
        {
            assert_eq!(
                LOCKED.postgres,
                "SELECT seq FROM t WHERE a = $1 AND b = $12 LIMIT 1 FOR UPDATE SKIP LOCKED -- $x"
            );
            assert_eq!(built.postgres, "x = $3 AND y LIKE $4");
        }
        #[cfg(feature = "sqlite")]
        {
            assert_eq!(LOCKED.sqlite, "SELECT seq FROM t WHERE a = ?1 AND b = ?12 LIMIT 1 -- $x");
            assert_eq!(built.sqlite, "x = ?3 AND y LIKE ?4");
        }
    }
}
