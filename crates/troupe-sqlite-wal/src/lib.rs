//! A SQLite VFS over the system's own (`unix`) that writes a WAL commit's frames in one
//! system call.
//!
//! SQLite appends a WAL frame as two writes, its 24-byte header and its page, so a commit
//! of thirty pages is sixty `pwrite`s. A system call costs the kernel work of its own
//! whatever its size: measured on ext4, twenty-six writes of thirteen frames took 3.5 times
//! as long as one write of the same bytes (20 µs against 6). This VFS keeps a WAL's contiguous
//! writes in memory and hands them to the system's VFS together (in writes of up to
//! 124 KiB, the most `unix` takes at once):
//!
//! - when a commit's last frame is complete (its header says it ends a commit), before
//!   SQLite goes on to sync the WAL or to publish the commit to readers: a commit is in
//!   the file when SQLite has written it, and an error writing it is the commit's own,
//!   where SQLite would have seen it;
//! - when the connection takes or releases a lock on its shared memory, as it releases
//!   one to end a write transaction that did not commit: the frames it wrote are in the
//!   file before another connection may write there, as they would be on the system's
//!   VFS;
//! - before anything that reads or measures the file (a read of a held range, its size, a
//!   sync, a truncation, a file control, closing it), and before a write that does not
//!   follow on;
//! - when it holds more than [`BUFFER_LIMIT`] bytes (a transaction larger than memory
//!   should hold, whose pages SQLite spills before its commit).
//!
//! Nothing SQLite promises changes: what a commit returned is on disk with
//! `synchronous = FULL`, and in the file (safe from a crash of the process) with
//! `NORMAL`; frames written and never committed are ignored after a crash, as they always
//! are. The database file and its shared memory go straight to the system's VFS, and so
//! does a WAL whose database was not opened through this VFS.
//!
//! ```
//! use rusqlite::{Connection, OpenFlags};
//!
//! let dir = tempfile::tempdir()?;
//! let vfs = troupe_sqlite_wal::register()?;
//! let conn = Connection::open_with_flags_and_vfs(dir.path().join("db"), OpenFlags::default(), vfs)?;
//! conn.pragma_update(None, "journal_mode", "WAL")?;
//! conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")?;
//! assert_eq!(conn.query_row("SELECT x FROM t", [], |row| row.get::<_, i64>(0))?, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod file;
mod vfs;

pub use file::BUFFER_LIMIT;
pub use vfs::{NAME, RegisterError, register};

#[cfg(test)]
mod tests;
