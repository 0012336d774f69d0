//! [`StoreError`]: everything a store can report, each with what to do about it.

/// What went wrong in a store. Messages never hold a password: store locations are
/// shown through [`redact_location`](crate::redact_location).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL names no backend troupe knows.
    #[error("`{url}` is not a store URL: use sqlite://PATH (or a file path) or postgres://USER@HOST/DB")]
    InvalidUrl {
        /// The URL, redacted.
        url: String,
    },
    /// The URL names a backend this build leaves out.
    #[error("this troupe was built without the `{backend}` store backend (cargo feature `{backend}`)")]
    BackendDisabled {
        /// `postgres` or `sqlite`.
        backend: &'static str,
    },
    /// The database cannot be reached or opened.
    #[error("cannot open the store at {location}: {reason}")]
    Unreachable {
        /// Where, redacted.
        location: String,
        /// Why, in the driver's words.
        reason: String,
    },
    /// The file exists but is not a SQLite database.
    #[error("{location} is not a SQLite database (corrupted, or another kind of file); it was left unchanged")]
    Corrupt {
        /// The file.
        location: String,
    },
    /// The database belongs to another application.
    #[error(
        "{location} is a database of another application (it has no troupe schema); it was left unchanged: point --store elsewhere"
    )]
    Foreign {
        /// Where, redacted.
        location: String,
    },
    /// The database was written by a newer troupe.
    #[error(
        "the store at {location} has schema version {found}, newer than this troupe understands ({supported}); it was left unchanged: upgrade troupe"
    )]
    NewerSchema {
        /// Where, redacted.
        location: String,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// No run has this id.
    #[error("no run `{run_id}` in the store")]
    UnknownRun {
        /// The id asked for.
        run_id: String,
    },
    /// A run with this id exists already.
    #[error("a run `{run_id}` exists already")]
    RunExists {
        /// The id.
        run_id: String,
    },
    /// The caller's lease on the run was taken over (or released): it must stop working
    /// on the run.
    #[error("the lease on run `{run_id}` is no longer held by `{owner}`")]
    LeaseLost {
        /// The run.
        run_id: String,
        /// Who thought they held it.
        owner: String,
    },
    /// An evidence entry with this sequence number exists: another writer appended to the
    /// run's log since this writer read its head.
    #[error("evidence entry {seq} of run `{run_id}` exists already: another writer is appending to this run")]
    EvidenceConflict {
        /// The run.
        run_id: String,
        /// The contested sequence number.
        seq: i64,
    },
    /// The run has ended: it takes no more signals.
    #[error("run `{run_id}` has ended ({status}); it takes no more signals")]
    RunEnded {
        /// The run.
        run_id: String,
        /// How it ended (`completed`, `cancelled`, ...).
        status: String,
    },
    /// A checkpoint that required every signal to be applied found one that was not.
    #[error("run `{run_id}` has signals it has not applied yet")]
    SignalsPending {
        /// The run.
        run_id: String,
    },
    /// A work item with this id is in the queue already.
    #[error("a work item `{id}` exists already in queue `{queue}`")]
    WorkItemExists {
        /// The queue.
        queue: String,
        /// The id.
        id: String,
    },
    /// No work item has this id in the queue.
    #[error("no work item `{id}` in queue `{queue}`")]
    UnknownWorkItem {
        /// The queue.
        queue: String,
        /// The id asked for.
        id: String,
    },
    /// The worker does not hold the work item: it never did, or its lease lapsed (and the
    /// item went back to the queue, or to another worker). It must drop the item.
    #[error("`{worker}` does not hold work item `{id}` of queue `{queue}` (never did, or its lease lapsed)")]
    WorkLeaseLost {
        /// The queue.
        queue: String,
        /// The item.
        id: String,
        /// Who thought they held it.
        worker: String,
    },
    /// The work item's holder asked for something its state does not allow (starting an
    /// item twice, completing a finished one).
    #[error("work item `{id}` of queue `{queue}` is {state}; {operation} needs it {expected}")]
    WrongWorkState {
        /// The queue.
        queue: String,
        /// The item.
        id: String,
        /// Where it stands.
        state: crate::work::WorkState,
        /// What was asked (`start`, `complete`, ...).
        operation: &'static str,
        /// The states that allow it.
        expected: &'static str,
    },
    /// A stored value could not be read back.
    #[error("stored {what} cannot be read: {reason}")]
    Decode {
        /// What was being read (`run state`, `signal 3 of run r`).
        what: String,
        /// Why.
        reason: String,
    },
    /// The database refused or failed a statement.
    #[error("store error: {message}")]
    Database {
        /// The driver's message.
        message: String,
    },
}

impl StoreError {
    /// A [`StoreError::Database`] from any driver error.
    pub fn database(error: impl std::fmt::Display) -> Self {
        StoreError::Database { message: error.to_string() }
    }

    /// A [`StoreError::Decode`] of `what`.
    pub fn decode(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        StoreError::Decode { what: what.into(), reason: reason.to_string() }
    }
}

/// `postgres://user:secret@host/db` shown as `postgres://user:***@host/db`; anything
/// without a password is returned as it is.
pub fn redact_location(location: &str) -> String {
    let Some((scheme, rest)) = location.split_once("://") else { return location.to_owned() };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    // A password given as a query parameter is masked too.
    let tail = mask_query_password(tail);
    let Some((userinfo, host)) = authority.rsplit_once('@') else { return format!("{scheme}://{authority}{tail}") };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let masked = if userinfo.contains(':') { format!("{user}:***") } else { user.to_owned() };
    format!("{scheme}://{masked}@{host}{tail}")
}

fn mask_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else { return tail.to_owned() };
    let masked: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", masked.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_location("postgres://troupe:hunter2@db:5432/runs"), "postgres://troupe:***@db:5432/runs");
        assert_eq!(redact_location("postgres://troupe@db/runs"), "postgres://troupe@db/runs");
        assert_eq!(redact_location("postgres://db/runs?user=a&password=b"), "postgres://db/runs?user=a&password=***");
        assert_eq!(redact_location("postgres://u:p@db/runs?password=b"), "postgres://u:***@db/runs?password=***");
        assert_eq!(redact_location("sqlite://./.troupe/troupe.db"), "sqlite://./.troupe/troupe.db");
        assert!(
            !StoreError::Unreachable { location: redact_location("postgres://u:pw@h/d"), reason: "x".into() }
                .to_string()
                .contains("pw")
        );
    }
}
