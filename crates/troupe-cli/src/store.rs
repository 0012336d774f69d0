//! The store option every durable command shares, and opening the store it names.

use crate::Failure;
use anyhow::anyhow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use troupe::store::{Millis, Store, StoreLocation};

/// The audit log's file name beside the default store.
pub(crate) const AUDIT_LOG_FILE: &str = "audit.jsonl";

/// Where runs are recorded and where the agent works.
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct StoreArgs {
    /// The store: `sqlite://PATH` (or a file path) or `postgres://USER@HOST/DB` [default:
    /// the workspace's store in the user's data directory, outside the workspace:
    /// $XDG_DATA_HOME/troupe/workspaces/NAME-HASH/troupe.db].
    // A PostgreSQL URL may hold a password: `--help` must not show it.
    #[arg(long, env = "TROUPE_STORE", hide_env_values = true, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// The directory the agent works in (its tools cannot reach outside it), whose runs
    /// the default store holds [default: the current directory].
    #[arg(long, short, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
}

impl StoreArgs {
    /// The store's URL: `--store`, else the workspace's SQLite file.
    pub(crate) fn url(&self, workspace: &Path) -> String {
        match self.store.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            Some(url) => url.to_owned(),
            None => {
                let path = troupe::store::workspace_sqlite_path(workspace);
                let default = troupe::store::default_sqlite_path(workspace);
                // Without a data directory (no HOME) there is nowhere better to suggest.
                if path == troupe::store::legacy_sqlite_path(workspace) && path != default {
                    diagln!(
                        "note: the store {} is inside the workspace, where the agent's tools and commands can reach \
                         it; move it to {} (or pass --store)",
                        path.display(),
                        default.display()
                    );
                }
                path.display().to_string()
            }
        }
    }

    /// Where the run's audit log goes by default: beside the workspace's default store, in
    /// the user's data directory (`audit.jsonl`), out of the agent's reach. `None` with
    /// `--store`, and for a store still inside the workspace: no new file goes there.
    pub(crate) fn default_audit_log(&self, workspace: &Path) -> Option<PathBuf> {
        if self.store.as_deref().is_some_and(|s| !s.trim().is_empty()) {
            return None;
        }
        let store = troupe::store::workspace_sqlite_path(workspace);
        if store == troupe::store::legacy_sqlite_path(workspace) {
            return None;
        }
        Some(store.with_file_name(AUDIT_LOG_FILE))
    }

    /// The workspace, checked to be a directory.
    pub(crate) fn workspace(&self) -> Result<PathBuf, Failure> {
        crate::setup::workspace_dir(self.workspace.as_deref())
    }

    /// Opens (creating where needed) the store.
    pub(crate) async fn open(&self) -> Result<Arc<dyn Store>, Failure> {
        let workspace = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        open(&self.url(&workspace)).await
    }

    /// Opens a store that must exist already: reading a SQLite file that is not there
    /// would create one, which helps nobody looking for their runs.
    pub(crate) async fn open_existing(&self) -> Result<Arc<dyn Store>, Failure> {
        let workspace = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let url = self.url(&workspace);
        if let Ok(StoreLocation::Sqlite(path)) = StoreLocation::parse(&url)
            && !path.exists()
        {
            return Err(Failure::Usage(anyhow!(
                "there is no store at {}: nothing was recorded there (pass --store URL or --workspace DIR)",
                path.display()
            )));
        }
        open(&url).await
    }
}

/// Opens the store at `url`; one that cannot be opened is a configuration error, told in
/// the store's one line.
pub(crate) async fn open(url: &str) -> Result<Arc<dyn Store>, Failure> {
    troupe::store::open(url).await.map_err(|e| Failure::Usage(e.into()))
}

/// A store timestamp in RFC 3339 (UTC, milliseconds).
pub(crate) fn rfc3339(at: Millis) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at)
        .map_or_else(|| format!("{at} ms"), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_store_is_the_workspaces_own_outside_it() {
        let args = StoreArgs::default();
        let url = args.url(Path::new("/w"));
        assert_eq!(url, troupe::store::default_sqlite_path(Path::new("/w")).display().to_string());
        if std::env::var_os("HOME").is_some() {
            assert!(!url.starts_with("/w/"), "outside the workspace: {url}");
        }
        let args = StoreArgs { store: Some(" postgres://u@h/db ".into()), workspace: None };
        assert_eq!(args.url(Path::new("/w")), "postgres://u@h/db");
    }

    #[test]
    fn times_are_rfc_3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
