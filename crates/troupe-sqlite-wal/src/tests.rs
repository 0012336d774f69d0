//! The VFS against SQLite itself: every commit in the file when it returns, seen by a
//! connection on the system's VFS, across spills, rollbacks, checkpoints and a crash.

use crate::file::WAL_WRITES;
use rusqlite::{Connection, OpenFlags, params};
use std::path::Path;

/// A connection through the VFS, in WAL mode, with `synchronous`.
fn batched(path: &Path, synchronous: &str) -> Connection {
    let vfs = crate::register().expect("the VFS registers");
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL").expect("WAL");
    conn.pragma_update(None, "synchronous", synchronous).expect("synchronous");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)").expect("table");
    conn
}

/// A connection on the system's own VFS, which reads only what is in the files.
fn plain(path: &Path) -> Connection {
    Connection::open(path).expect("open")
}

/// A connection through the VFS whose cache holds a few pages: a transaction of more
/// writes frames before its commit (SQLite spills them), and may write a page again.
fn small_cache(path: &Path) -> Connection {
    let conn = batched(path, "FULL");
    conn.pragma_update(None, "cache_size", 5).expect("cache_size");
    conn
}

/// Inserts a row of 1,000 random bytes for each of `ids`.
fn insert_rows(conn: &Connection, ids: std::ops::Range<i64>) {
    for id in ids {
        conn.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(1000))", params![id]).expect("insert");
    }
}

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0)).expect("count")
}

fn integrity(conn: &Connection) -> String {
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("integrity_check")
}

#[test]
fn a_commit_of_many_pages_reaches_the_wal_in_one_write() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = batched(&path, "FULL");
    let before = WAL_WRITES.with(std::cell::Cell::get);
    let tx = conn.unchecked_transaction().expect("begin");
    for i in 0..40 {
        tx.execute("INSERT INTO t (id, body) VALUES (?1, zeroblob(2000))", params![i]).expect("insert");
    }
    tx.commit().expect("commit");
    // About twenty pages: forty writes through the system's VFS, one through this one.
    assert_eq!(WAL_WRITES.with(std::cell::Cell::get) - before, 1);
    assert_eq!(count(&plain(&path)), 40);
}

#[test]
fn each_commit_is_in_the_file_when_it_returns() {
    for synchronous in ["NORMAL", "FULL"] {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("db");
        let conn = batched(&path, synchronous);
        let reader = plain(&path);
        for i in 1..=30 {
            conn.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(700))", params![i]).expect("insert");
            // The reader reads the frames from the file: held back, they would be missing.
            assert_eq!(count(&reader), i, "commit {i} with synchronous = {synchronous}");
        }
        assert_eq!(integrity(&reader), "ok");
    }
}

#[test]
fn a_transaction_that_spills_and_rewrites_its_pages_commits_whole() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = small_cache(&path);
    let tx = conn.unchecked_transaction().expect("begin");
    insert_rows(&tx, 0..300);
    tx.execute("UPDATE t SET body = zeroblob(900) WHERE id % 7 = 0", []).expect("update");
    tx.commit().expect("commit");
    let reader = plain(&path);
    assert_eq!(count(&reader), 300);
    let rewritten: i64 =
        reader.query_row("SELECT count(*) FROM t WHERE length(body) = 900", [], |row| row.get(0)).expect("count");
    assert_eq!(rewritten, 43);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn a_transaction_larger_than_the_buffer_reaches_the_file_before_its_commit() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = small_cache(&path);
    let wal = dir.path().join("db-wal");
    let tx = conn.unchecked_transaction().expect("begin");
    // About 8 MiB spilled before the commit, in overflow pages SQLite never reads back:
    // past the limit, they are written out.
    for id in 0..16 {
        tx.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(500000))", params![id]).expect("insert");
    }
    let written = std::fs::metadata(&wal).expect("the WAL").len();
    assert!(written > crate::BUFFER_LIMIT as u64, "{written} bytes in the WAL before the commit");
    tx.commit().expect("commit");
    let reader = plain(&path);
    assert_eq!(count(&reader), 16);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn a_rolled_back_transaction_leaves_nothing_and_the_next_commits() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = small_cache(&path);
    let tx = conn.unchecked_transaction().expect("begin");
    insert_rows(&tx, 0..200);
    tx.rollback().expect("rollback");
    conn.execute("INSERT INTO t (id, body) VALUES (1000, x'01')", []).expect("insert");
    let reader = plain(&path);
    assert_eq!(count(&reader), 1);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn another_connection_writes_after_a_rollback_without_meeting_its_frames() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = small_cache(&path);
    let other = plain(&path);
    for round in 0..5 {
        // Frames written before the commit (a small cache), then no commit: they lie past
        // the WAL's end, where the other connection writes next.
        let tx = conn.unchecked_transaction().expect("begin");
        insert_rows(&tx, 100_000..100_100);
        tx.rollback().expect("rollback");
        other.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(3000))", params![round * 2]).expect("other");
        conn.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(3000))", params![round * 2 + 1]).expect("insert");
    }
    drop((conn, other));
    let reader = plain(&path);
    assert_eq!(integrity(&reader), "ok");
    assert_eq!(count(&reader), 10);
}

#[test]
fn the_wal_restarts_after_checkpoints_and_stays_whole() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let conn = batched(&path, "FULL");
    // A checkpoint every few commits, after which the WAL is written from its start again.
    conn.pragma_update(None, "wal_autocheckpoint", 8).expect("wal_autocheckpoint");
    let reader = plain(&path);
    for i in 1..=200 {
        conn.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(3000))", params![i]).expect("insert");
        if i % 50 == 0 {
            assert_eq!(count(&reader), i);
        }
    }
    drop(conn);
    assert_eq!(integrity(&reader), "ok");
    assert_eq!(count(&reader), 200);
}

/// Set in the child process of the test below: where it commits before it dies.
const DIE_AFTER_COMMIT: &str = "TROUPE_SQLITE_WAL_DIE_AFTER_COMMIT";

#[test]
fn a_process_that_dies_right_after_its_commit_keeps_it() {
    if let Some(path) = std::env::var_os(DIE_AFTER_COMMIT) {
        // The child: commits with `synchronous = NORMAL` (no sync; the commit only has to
        // be in the file), then dies without closing anything.
        let conn = batched(Path::new(&path), "NORMAL");
        conn.execute("INSERT INTO t (id, body) VALUES (7, randomblob(5000))", []).expect("insert");
        std::process::abort();
    }
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let status = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "tests::a_process_that_dies_right_after_its_commit_keeps_it", "--nocapture"])
        .env(DIE_AFTER_COMMIT, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("child");
    assert!(!status.success(), "the child died instead of finishing");
    let reader = plain(&path);
    assert_eq!(count(&reader), 1, "the commit the child made before it died");
    assert_eq!(integrity(&reader), "ok");
}

/// Set in the child process of the test below: where it commits until the disk is "full".
const FILL_UNTIL_FULL: &str = "TROUPE_SQLITE_WAL_FILL_UNTIL_FULL";

#[test]
fn a_commit_that_cannot_be_written_fails_and_every_commit_that_returned_is_kept() {
    if let Some(path) = std::env::var_os(FILL_UNTIL_FULL) {
        // The child, under a file size limit: commits until one fails, then says how many
        // returned.
        let conn = batched(Path::new(&path), "FULL");
        let mut committed = 0;
        for i in 0..10_000 {
            match conn.execute("INSERT INTO t (id, body) VALUES (?1, randomblob(3000))", params![i]) {
                Ok(_) => committed += 1,
                Err(e) => {
                    println!("committed {committed}: {e}");
                    return;
                }
            }
        }
        println!("committed {committed}: no failure");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    // Writes past 400 KiB fail (EFBIG, with SIGXFSZ ignored): the WAL fills up first.
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 800; exec \"$0\" --exact \"$1\" --nocapture")
        .arg(std::env::current_exe().expect("test binary"))
        .arg("tests::a_commit_that_cannot_be_written_fails_and_every_commit_that_returned_is_kept")
        .env(FILL_UNTIL_FULL, &path)
        .output()
        .expect("child");
    let said = String::from_utf8_lossy(&child.stdout);
    let line = said.lines().find(|line| line.starts_with("committed ")).expect("the child says what it committed");
    assert!(!line.ends_with("no failure"), "{line}");
    let committed: i64 = line["committed ".len()..].split(':').next().and_then(|n| n.parse().ok()).expect("a count");
    assert!(committed > 10, "{line}");
    let reader = plain(&path);
    assert_eq!(integrity(&reader), "ok");
    assert_eq!(count(&reader), committed, "every commit that returned, and no other");
}
