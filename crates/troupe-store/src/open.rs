//! [`open`]: a store from a URL (`sqlite://PATH`, a plain path, or `postgres://…`).

use crate::error::{StoreError, redact_location};
use crate::repository::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the embedded store lives for a workspace: `.troupe/troupe.db` inside it.
pub fn default_sqlite_path(workspace: &Path) -> PathBuf {
    workspace.join(".troupe").join("troupe.db")
}

/// Which backend a store URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl StoreLocation {
    /// Reads `url`: `sqlite://PATH`, `sqlite:PATH`, `postgres://…`, `postgresql://…`, or a
    /// path to a SQLite file.
    pub fn parse(url: &str) -> Result<StoreLocation, StoreError> {
        let url = url.trim();
        if url.is_empty() {
            return Err(StoreError::InvalidUrl { url: String::new() });
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(url.to_owned()));
        }
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path.is_empty() {
                return Err(StoreError::InvalidUrl { url: url.to_owned() });
            }
            return Ok(StoreLocation::Sqlite(PathBuf::from(path)));
        }
        if url.contains("://") {
            return Err(StoreError::InvalidUrl { url: redact_location(url) });
        }
        Ok(StoreLocation::Sqlite(PathBuf::from(url)))
    }
}

/// Opens (creating and migrating where needed) the store at `url`.
///
/// A file that is not a SQLite database, a database of another application, one from a
/// newer troupe, or a server that cannot be reached each give a one-line
/// [`StoreError`], and nothing on disk is changed.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    match StoreLocation::parse(url)? {
        #[cfg(feature = "sqlite")]
        StoreLocation::Sqlite(path) => Ok(Arc::new(crate::sqlite::SqliteStore::open(&path).await?)),
        #[cfg(not(feature = "sqlite"))]
        StoreLocation::Sqlite(_) => Err(StoreError::BackendDisabled { backend: "sqlite" }),
        #[cfg(feature = "postgres")]
        StoreLocation::Postgres(url) => Ok(Arc::new(crate::postgres::PostgresStore::connect(&url).await?)),
        #[cfg(not(feature = "postgres"))]
        StoreLocation::Postgres(_) => Err(StoreError::BackendDisabled { backend: "postgres" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(StoreLocation::parse("sqlite://runs.db").ok(), Some(StoreLocation::Sqlite("runs.db".into())));
        assert_eq!(StoreLocation::parse("sqlite:/tmp/r.db").ok(), Some(StoreLocation::Sqlite("/tmp/r.db".into())));
        assert_eq!(StoreLocation::parse("./r.db").ok(), Some(StoreLocation::Sqlite("./r.db".into())));
        assert!(matches!(StoreLocation::parse("postgres://u@h/db"), Ok(StoreLocation::Postgres(_))));
        assert!(matches!(StoreLocation::parse("postgresql://u@h/db"), Ok(StoreLocation::Postgres(_))));
        assert!(
            matches!(StoreLocation::parse("mysql://u:pw@h/db"), Err(StoreError::InvalidUrl { url }) if !url.contains("pw"))
        );
        assert!(StoreLocation::parse("sqlite://").is_err());
        assert!(StoreLocation::parse("  ").is_err());
    }
}
