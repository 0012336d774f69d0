//! Accepting connections under limits: at most [`ServerConfig::max_connections`] open at
//! once (more wait in the listen backlog), and a client that takes longer than
//! [`ServerConfig::header_timeout`] to send a request's headers — an idle kept-alive
//! connection, or a slowloris trickling bytes — is closed. At shutdown the listener
//! closes, open streams end, and each connection finishes the response it is sending.

use crate::config::ServerConfig;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long accepting pauses after an error that is not a single connection's (out of
/// file descriptors, say), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router`, a service of the caller's own, on `listener` under `config`'s
/// connection limits, as [`Server::serve`](crate::Server::serve) serves its routes: at most
/// [`ServerConfig::max_connections`] open at once, [`ServerConfig::header_timeout`] for a
/// request's headers, [`ServerConfig::body_timeout`] between two pieces of its body, and
/// each response's bytes sent as they are written (`TCP_NODELAY`), not held back until the
/// client acknowledges the ones before. Authentication, body size and routes are the
/// router's own. Returns once `shutdown` is cancelled and every open connection has
/// finished its response: a stream the router holds open must end on `shutdown` too.
pub async fn serve_router(listener: TcpListener, router: Router, config: &ServerConfig, shutdown: CancellationToken) {
    let router = router.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(config.body_timeout));
    serve(listener, router, config, shutdown, CancellationToken::new()).await;
}

/// Serves `router` on `listener` until `shutdown` is cancelled; then cancels `closing`
/// (which ends the open event streams) and waits for the connections to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: CancellationToken,
    closing: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(config.header_timeout);
    let service = TowerToHyperService::new(router);
    loop {
        let permit = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // Told apart from HTTP/2 by its first bytes, a connection is read before hyper's
        // own header timeout runs: one that sends nothing at all is closed here.
        let mut first = [0u8; 1];
        let header_timeout = config.header_timeout;
        let (builder, service, watcher) = (builder.clone(), service.clone(), graceful.watcher());
        let stopping = shutdown.clone();
        tokio::spawn(async move {
            // A connection that has sent nothing when the server stops is closed at once:
            // it must not hold the shutdown up for the header timeout.
            let first_byte = tokio::select! {
                peeked = tokio::time::timeout(header_timeout, stream.peek(&mut first)) => peeked,
                () = stopping.cancelled() => return,
            };
            if !matches!(first_byte, Ok(Ok(n)) if n > 0) {
                return;
            }
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).into_owned();
            // A connection's own failure (a reset, a header timeout) ends only it.
            let _ = watcher.watch(connection).await;
            drop(permit);
        });
    }
    drop(listener);
    closing.cancel();
    graceful.shutdown().await;
}

/// An error of one connection, not of the listener.
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
