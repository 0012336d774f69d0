//! Tests of the store's own pool of connections ([`super::connections`]): what goes back
//! to it and without a round trip, what is closed, and how many it holds. Each test works
//! in a schema of its own on the server `TROUPE_TEST_DATABASE_URL` names.

use super::PostgresStore;
use super::connect::CONNECT_TIMEOUT;
use super::connections::MAX_CONNECTIONS;
use super::tests::{drop_schema, run, server};
use crate::error::StoreError;
use crate::record::RunStatus;
use crate::repository::{RunRepository, SignalRepository, Store};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `url` with `application_name` set to `name`, so the server lists the store's
/// connections under it.
fn named(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

/// The pids of the server's sessions named `name`.
async fn sessions(url: &str, name: &str) -> Vec<i32> {
    let mut admin = PgConnection::connect(url).await.expect("the test server accepts a connection");
    let pids = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
        .bind(name)
        .fetch_all(&mut admin)
        .await
        .expect("the server's activity is readable");
    admin.close().await.expect("the connection closes");
    pids
}

/// Waits up to five seconds for `check` of the sessions named `name` to hold.
async fn sessions_until(url: &str, name: &str, check: impl Fn(&[i32]) -> bool) -> Vec<i32> {
    let mut pids = sessions(url, name).await;
    for _ in 0..50 {
        if check(&pids) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        pids = sessions(url, name).await;
    }
    pids
}

/// A TCP relay to the server `url` names, counting what its clients send in separate
/// reads: each request the client sends and waits on is one.
struct Relay {
    url: String,
    sends: Arc<AtomicUsize>,
}

impl Relay {
    async fn to(url: &str) -> Relay {
        let options: sqlx::postgres::PgConnectOptions = url.parse().expect("the test URL parses");
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("bound").port();
        let sends = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&sends);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(&server).await else { continue };
                let counted = Arc::clone(&counted);
                tokio::spawn(relay(client, upstream, counted));
            }
        });
        // The URL's authority (after `@`, up to the path) now names the relay.
        let (scheme, rest) = url.split_once("://").expect("the test URL has a scheme");
        let (authority, path) = rest.split_at(rest.find('/').expect("the test URL names a database"));
        let user = authority.rsplit_once('@').map_or(String::new(), |(user, _)| format!("{user}@"));
        Relay { url: format!("{scheme}://{user}127.0.0.1:{port}{path}"), sends }
    }

    fn sends(&self) -> usize {
        self.sends.load(Ordering::SeqCst)
    }
}

async fn relay(client: TcpStream, upstream: TcpStream, sends: Arc<AtomicUsize>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let up = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n) = client_read.read(&mut buffer).await {
            if n == 0 || upstream_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
            sends.fetch_add(1, Ordering::SeqCst);
        }
        let _ = upstream_write.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut upstream_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_goes_back_after_its_statement_without_a_round_trip() {
    let test = "a_connection_goes_back_after_its_statement_without_a_round_trip";
    let Some((url, schema)) = server(test) else { return };
    let relay = Relay::to(&url).await;
    let store = PostgresStore::connect_in_schema(&relay.url, &schema).await.expect("opens through the relay");
    store.create_run(run("r1", RunStatus::Queued), 1).await.expect("creates");
    // Prepared on the connection once, then each read is one request.
    store.load_run("r1").await.expect("reads");

    let before = relay.sends();
    const READS: usize = 20;
    for _ in 0..READS {
        let record = store.load_run("r1").await.expect("reads");
        assert_eq!(record.map(|r| r.status), Some(RunStatus::Queued));
    }
    let sent = relay.sends() - before;
    // sqlx's pool pings each connection it takes back: two requests a statement.
    assert_eq!(sent, READS, "one request a statement, no ping after it");

    // Refused for a reason of the store's: the statement, then one ping, and the same
    // connection serves on (a new one would send its start-up and prepare again).
    let before = relay.sends();
    let refused = store.create_run(run("r1", RunStatus::Queued), 2).await;
    assert!(matches!(refused, Err(StoreError::RunExists { .. })), "{refused:?}");
    assert_eq!(relay.sends() - before, 2, "the refused statement and one ping");
    let before = relay.sends();
    store.load_run("r1").await.expect("reads");
    assert_eq!(relay.sends() - before, 1, "the connection went back and serves as it is");
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_statement_was_dropped_midway_is_closed_not_reused() {
    let test = "a_connection_whose_statement_was_dropped_midway_is_closed_not_reused";
    let Some((url, schema)) = server(test) else { return };
    let store = PostgresStore::connect_in_schema(&named(&url, &schema), &schema).await.expect("opens");
    store.create_run(run("r1", RunStatus::Queued), 1).await.expect("creates");
    assert_eq!(store.send_signal("r1", "note", json!(1), 2).await.expect("sends"), 1);

    // Another session holds the run's row, so a signal (which bumps the row) waits.
    let mut holder = PgConnection::connect(&url).await.expect("the test server accepts a connection");
    sqlx::raw_sql(AssertSqlSafe(format!("BEGIN; SELECT 1 FROM \"{schema}\".runs WHERE id = 'r1' FOR UPDATE")))
        .execute(&mut holder)
        .await
        .expect("the row is held");
    let waited = tokio::time::timeout(Duration::from_millis(500), store.send_signal("r1", "note", json!(2), 3)).await;
    assert!(waited.is_err(), "the signal waited on the held row and was dropped");
    let waiting = sessions_until(&url, &schema, |pids| !pids.is_empty()).await;
    let before = sessions(&url, &schema).await;
    assert!(!waiting.is_empty(), "the dropped statement's session is still there, waiting");

    sqlx::raw_sql("COMMIT").execute(&mut holder).await.expect("the row is let go");
    holder.close().await.expect("the connection closes");
    // The dropped statement's session ends once it finds its client gone; no session of
    // the store is left, since the pool closed the connection instead of keeping it.
    let after = sessions_until(&url, &schema, |pids| pids.len() < before.len()).await;
    assert!(after.len() < before.len(), "the dropped connection was closed: {before:?} then {after:?}");

    // The store goes on, on a connection of its own.
    let next = store.send_signal("r1", "note", json!(3), 4).await.expect("sends");
    let signals = store.signals("r1").await.expect("reads");
    assert_eq!(signals.last().map(|s| s.seq), Some(next));
    assert_eq!(signals.len() as i64, next, "every signal stored is numbered in order");
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_holds_at_most_its_limit_of_connections_and_closes_them() {
    let test = "the_store_holds_at_most_its_limit_of_connections_and_closes_them";
    let Some((url, schema)) = server(test) else { return };
    let store = PostgresStore::connect_in_schema(&named(&url, &schema), &schema).await.expect("opens");
    store.create_run(run("r1", RunStatus::Queued), 1).await.expect("creates");
    let first = sessions(&url, &schema).await;
    assert_eq!(first.len(), 1, "one session, the store's own: the caller's pool opens none until it is used");
    let reads: Vec<_> = (0..4 * MAX_CONNECTIONS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.load_run("r1").await })
        })
        .collect();
    for read in reads {
        let record = read.await.expect("the read ran").expect("reads");
        assert_eq!(record.map(|r| r.id), Some("r1".to_owned()));
    }
    let open = sessions(&url, &schema).await;
    assert!(!open.is_empty() && open.len() <= MAX_CONNECTIONS, "{} sessions", open.len());

    store.close().await.expect("closes");
    let left = sessions_until(&url, &schema, <[i32]>::is_empty).await;
    assert!(left.is_empty(), "the closed store's sessions ended: {left:?}");
    let refused = tokio::time::timeout(Duration::from_secs(2), store.load_run("r1")).await;
    assert!(matches!(refused, Ok(Err(_))), "a closed store refuses at once: {refused:?}");
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn with_every_connection_in_use_the_store_waits_five_seconds_then_says_so() {
    let test = "with_every_connection_in_use_the_store_waits_five_seconds_then_says_so";
    let Some((url, schema)) = server(test) else { return };
    let store = PostgresStore::connect_in_schema(&url, &schema).await.expect("opens");
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(store.connections.get().await.expect("a connection"));
    }
    // The wait is on the pool alone, no I/O: the paused clock jumps to its end.
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let waited = store.connections.get().await;
    let error = waited.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("came free within 5 s"), "{error}");
    let waited_for = started.elapsed();
    assert!(
        waited_for >= CONNECT_TIMEOUT && waited_for < CONNECT_TIMEOUT + Duration::from_secs(1),
        "it waited the whole timeout: {waited_for:?}"
    );
    tokio::time::resume();

    // One given back is lent again at once.
    let back = held.pop().expect("held");
    back.finish(Ok(())).await.expect("finished");
    assert!(store.connections.get().await.is_ok(), "a connection given back serves the next caller");
    drop(held);
    store.close().await.expect("closes");
    drop_schema(&url, &schema).await;
}
