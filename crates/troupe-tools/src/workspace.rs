//! The directory a tool call is confined to.
//!
//! Every path a model gives a built-in tool goes through [`Workspace::resolve`], which only
//! returns paths inside the workspace's canonical root: absolute paths, `..` climbing above
//! the root, symlinks leading out (also through a symlinked parent of a file that does not
//! exist yet), NUL bytes and over-long paths are refused with an error the model can act on.
//!
//! The check is made when the path is resolved. A process that swaps a checked directory
//! for a symlink between the check and the use (a race only something already running
//! inside the workspace can win) is outside what this layer can prevent; run untrusted
//! agents in a worker process or container for that.
//!
//! The programs tools start (`shell`, `git`) are confined by the workspace's
//! [`Sandbox`]: `workspace-write` unless it is set otherwise.

use crate::error::ToolError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use troupe_sandbox::Sandbox;

/// The longest path, in bytes, a tool accepts (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest path component, in bytes, a tool accepts (`NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// The directory of a workspace that holds troupe's own files (agent files, a store an
/// older troupe made there): no tool reads, writes or lists it, so an agent cannot change
/// its own definition or the record of its runs.
pub const RESERVED_DIR: &str = ".troupe";

/// How much of a refused path an error message repeats.
const SHOWN_PATH_CHARS: usize = 120;

/// A confined directory: its canonical root, the rules for resolving paths under it, and
/// the sandbox of the programs tools start in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
    sandbox: Sandbox,
}

impl Workspace {
    /// A workspace rooted at `root`, which must be an existing directory; the root is
    /// canonicalized, so symlinks in it are resolved once, here.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, ToolError> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given).map_err(|e| ToolError::io(given.to_string_lossy(), &e))?;
        if !root.is_dir() {
            return Err(ToolError::Io {
                path: root.to_string_lossy().into_owned(),
                message: "the workspace root is not a directory".into(),
            });
        }
        Ok(Workspace { root, sandbox: Sandbox::default() })
    }

    /// The same workspace, with the programs tools start confined by `sandbox`.
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox of the programs tools start here.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path `user_path` (relative to the root) names, guaranteed to lie inside
    /// the root at the time of the call. The path need not exist; its longest existing
    /// prefix is canonicalized and must stay inside the root.
    pub fn resolve(&self, user_path: impl AsRef<Path>) -> Result<PathBuf, ToolError> {
        let user_path = user_path.as_ref();
        let shown = shown(user_path);
        let bytes = user_path.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(ToolError::invalid_arguments(format!("path `{shown}` contains a NUL byte; remove it")));
        }
        if bytes.len() > MAX_PATH_BYTES {
            return Err(ToolError::invalid_arguments(format!(
                "path `{shown}` is {} bytes long; paths may be at most {MAX_PATH_BYTES} bytes",
                bytes.len()
            )));
        }
        if let Some(long) = user_path.iter().find(|c| c.len() > MAX_COMPONENT_BYTES) {
            return Err(ToolError::invalid_arguments(format!(
                "path `{shown}` has a component of {} bytes; each file or directory name may be at most {MAX_COMPONENT_BYTES} bytes",
                long.len()
            )));
        }
        let parts = self.normalize(user_path, &shown)?;
        let resolved = self.confine(&parts, &shown)?;
        if self.is_reserved(&resolved) {
            return Err(ToolError::PathOutsideWorkspace {
                path: shown,
                reason: format!("`{RESERVED_DIR}` holds troupe's own files; no tool reaches it"),
            });
        }
        Ok(resolved)
    }

    /// Whether `path` (absolute, resolved) is the workspace's [`RESERVED_DIR`] or lies
    /// under it.
    pub fn is_reserved(&self, path: &Path) -> bool {
        path.starts_with(self.root.join(RESERVED_DIR))
    }

    /// `path` relative to the root for display (`.` for the root itself); names that are
    /// not UTF-8 are shown lossily.
    pub fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    /// The path's components after removing `.` and applying `..` lexically; climbing
    /// above the root or naming an absolute path is refused.
    fn normalize<'p>(&self, user_path: &'p Path, shown: &str) -> Result<Vec<&'p OsStr>, ToolError> {
        let mut parts: Vec<&OsStr> = Vec::new();
        for component in user_path.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    return Err(ToolError::PathOutsideWorkspace {
                        path: shown.to_owned(),
                        reason: "absolute paths are not accepted; the workspace root is `.`".into(),
                    });
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(ToolError::PathOutsideWorkspace {
                            path: shown.to_owned(),
                            reason: "`..` climbs above the workspace root".into(),
                        });
                    }
                }
                Component::Normal(name) => parts.push(name),
            }
        }
        Ok(parts)
    }

    /// Canonicalizes the longest existing prefix of `root/parts` and requires it inside
    /// the root; the rest, which does not exist, cannot contain a symlink.
    fn confine(&self, parts: &[&OsStr], shown: &str) -> Result<PathBuf, ToolError> {
        for existing in (1..=parts.len()).rev() {
            let mut candidate = self.root.clone();
            candidate.extend(&parts[..existing]);
            let Ok(meta) = std::fs::symlink_metadata(&candidate) else { continue };
            let canonical = match std::fs::canonicalize(&candidate) {
                Ok(canonical) => canonical,
                Err(_) if meta.file_type().is_symlink() => {
                    return Err(ToolError::PathOutsideWorkspace {
                        path: shown.to_owned(),
                        reason: format!(
                            "`{}` is a symbolic link whose target does not exist, so where it leads cannot be checked",
                            self.relative(&candidate)
                        ),
                    });
                }
                Err(error) => return Err(ToolError::io(self.relative(&candidate), &error)),
            };
            if !canonical.starts_with(&self.root) {
                return Err(ToolError::PathOutsideWorkspace {
                    path: shown.to_owned(),
                    reason: format!("`{}` is a symbolic link leading outside the workspace", self.relative(&candidate)),
                });
            }
            let mut resolved = canonical;
            resolved.extend(&parts[existing..]);
            return Ok(resolved);
        }
        let mut resolved = self.root.clone();
        resolved.extend(parts);
        Ok(resolved)
    }
}

fn shown(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text.chars().count() <= SHOWN_PATH_CHARS {
        text.into_owned()
    } else {
        let head: String = text.chars().take(SHOWN_PATH_CHARS).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalisation_stays_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        assert_eq!(ws.resolve("a/./b/../c.txt").expect("inside"), ws.root().join("a/c.txt"));
        assert_eq!(ws.resolve("").expect("root"), ws.root());
        assert_eq!(ws.resolve("a/..").expect("root"), ws.root());
        assert!(matches!(ws.resolve("a/../../x"), Err(ToolError::PathOutsideWorkspace { .. })));
    }

    #[test]
    fn relative_shows_the_root_as_dot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new(dir.path()).expect("workspace");
        assert_eq!(ws.relative(ws.root()), ".");
        assert_eq!(ws.relative(&ws.root().join("src/lib.rs")), "src/lib.rs");
    }
}
