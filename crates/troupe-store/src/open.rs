//! [`open`]: a store from a URL (`sqlite://PATH`, a plain path, or `postgres://…`).

use crate::error::{StoreError, redact_location};
use crate::repository::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the embedded store lives for a workspace: outside it, where the agent working in
/// it cannot reach the record of its runs — the user's data directory, one store per
/// workspace: `$XDG_DATA_HOME/troupe/workspaces/NAME-HASH/troupe.db` (else under
/// `~/.local/share`), `NAME` the workspace directory's name and `HASH` a digest of its
/// canonical path. With neither variable set, it is [`legacy_sqlite_path`].
///
/// ```
/// let path = troupe_store::default_sqlite_path(std::path::Path::new("/srv/gadget"));
/// assert!(!path.starts_with("/srv/gadget"), "the store is outside the workspace");
/// # if std::env::var_os("XDG_DATA_HOME").is_some() || std::env::var_os("HOME").is_some() {
/// assert!(path.parent().unwrap().file_name().unwrap().to_str().unwrap().starts_with("gadget-"));
/// # }
/// ```
pub fn default_sqlite_path(workspace: &Path) -> PathBuf {
    match user_data_dir() {
        Some(data) => data.join("troupe").join("workspaces").join(workspace_key(workspace)).join("troupe.db"),
        None => legacy_sqlite_path(workspace),
    }
}

/// Where the embedded store of a workspace used to live: `.troupe/troupe.db` inside it,
/// within the agent's reach. Found there, it is still used (the CLI says to move it).
pub fn legacy_sqlite_path(workspace: &Path) -> PathBuf {
    workspace.join(".troupe").join("troupe.db")
}

/// The store a workspace's runs are recorded in: [`legacy_sqlite_path`] where a store was
/// made there before and none is at [`default_sqlite_path`] yet, else the default.
pub fn workspace_sqlite_path(workspace: &Path) -> PathBuf {
    let default = default_sqlite_path(workspace);
    let legacy = legacy_sqlite_path(workspace);
    if !default.exists() && legacy.is_file() { legacy } else { default }
}

/// The user's data directory, outside every workspace: `$XDG_DATA_HOME` (when absolute),
/// else `$HOME/.local/share`; `None` without either.
pub fn user_data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    xdg.or_else(|| {
        std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()).map(|home| home.join(".local/share"))
    })
}

/// `NAME-HASH` of a workspace: its directory's name (cut, only letters, digits, `-`, `_`
/// and `.`) and the first 16 hex digits of the SHA-256 of its canonical path.
fn workspace_key(workspace: &Path) -> String {
    use sha2::{Digest, Sha256};
    let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
        .take(40)
        .collect();
    let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
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
