//! The HTTP client the OTLP exporter sends with: the workspace's `reqwest`, driven by a
//! runtime of its own.
//!
//! The SDK's batch span processor exports from a plain thread with a blocking executor,
//! where an async `reqwest` call would find no Tokio reactor. Each request is therefore
//! spawned onto a one-thread Tokio runtime owned by the client, and only the join handle
//! is awaited by the caller. This also means a flush never waits for the application's
//! own runtime, so flushing from inside a single-threaded runtime cannot deadlock.

use crate::error::TelemetryError;
use bytes::{Bytes, BytesMut};
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError, ResponseBodyTooLarge};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The largest collector response read; collectors answer with a few bytes.
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// Sends OTLP requests with `reqwest` on the client's own I/O thread.
#[derive(Clone, Debug)]
pub(crate) struct ReqwestOtlpClient {
    client: reqwest::Client,
    io: Arc<IoThread>,
}

impl ReqwestOtlpClient {
    /// A client whose every request, body included, ends within `timeout`.
    pub(crate) fn new(timeout: Duration) -> Result<Self, TelemetryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| TelemetryError::Exporter(format!("HTTP client: {e}")))?;
        Ok(ReqwestOtlpClient { client, io: Arc::new(IoThread::start()?) })
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestOtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let task = self.io.handle.spawn(async move {
            let request: reqwest::Request = request.try_into()?;
            let mut response = client.execute(request).await?;
            let status = response.status();
            let headers = std::mem::take(response.headers_mut());
            let mut body = BytesMut::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(Box::new(ResponseBodyTooLarge::new()) as HttpError);
                }
                body.extend_from_slice(&chunk);
            }
            let mut out = Response::builder().status(status).body(body.freeze())?;
            *out.headers_mut() = headers;
            Ok(out)
        });
        // A join error means the I/O runtime is gone (the exporter is shutting down).
        task.await.map_err(|e| Box::new(e) as HttpError)?
    }
}

/// A one-thread Tokio runtime that lives as long as the clients sharing it.
#[derive(Debug)]
struct IoThread {
    handle: tokio::runtime::Handle,
    stop: Option<oneshot::Sender<()>>,
}

impl IoThread {
    fn start() -> Result<Self, TelemetryError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TelemetryError::Exporter(format!("I/O runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        // The runtime is dropped on its own thread, outside any async context.
        std::thread::Builder::new()
            .name("troupe-otlp-io".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| TelemetryError::Exporter(format!("I/O thread: {e}")))?;
        Ok(IoThread { handle, stop: Some(stop) })
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot HTTP/1.1 server on a plain thread: no Tokio anywhere on the caller's side.
    fn answer_once(status_line: &'static str, body: &'static str) -> (String, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let url = format!("http://{}/v1/traces", listener.local_addr().expect("has an address"));
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accepts");
            let mut received = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then exactly the 5-byte body the test sends.
            while !received.windows(4).any(|w| w == b"\r\n\r\n") || !received.ends_with(b"hello") {
                let n = stream.read(&mut buf).expect("reads");
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
            let response = format!("{status_line}\r\ncontent-length: {}\r\nx-seen: yes\r\n\r\n{body}", body.len());
            stream.write_all(response.as_bytes()).expect("writes");
            received
        });
        (url, server)
    }

    #[test]
    fn sends_from_a_thread_without_a_runtime_and_returns_status_headers_and_body() {
        let (url, server) = answer_once("HTTP/1.1 202 Accepted", "{}");
        let client = ReqwestOtlpClient::new(Duration::from_secs(5)).expect("builds");
        let request = Request::post(&url)
            .header("content-type", "application/x-protobuf")
            .body(Bytes::from_static(b"hello"))
            .expect("request");
        let response = block_on_without_io(client.send_bytes(request)).expect("sends");
        assert_eq!(response.status(), 202);
        assert_eq!(response.headers()["x-seen"], "yes");
        assert_eq!(response.body().as_ref(), b"{}");
        let received = String::from_utf8(server.join().expect("server")).expect("utf-8");
        assert!(received.starts_with("POST /v1/traces HTTP/1.1"), "{received}");
        assert!(received.contains("content-type: application/x-protobuf"), "{received}");
    }

    #[test]
    fn a_refused_connection_is_an_error_not_a_panic() {
        let port = TcpListener::bind("127.0.0.1:0").expect("binds").local_addr().expect("addr").port();
        let client = ReqwestOtlpClient::new(Duration::from_secs(5)).expect("builds");
        let request = Request::post(format!("http://127.0.0.1:{port}/v1/traces")).body(Bytes::new()).expect("request");
        assert!(block_on_without_io(client.send_bytes(request)).is_err());
    }

    /// Drives a future on this thread on a runtime with no I/O driver: a client that used the
    /// caller's runtime for its socket would fail here.
    fn block_on_without_io<F: std::future::Future>(future: F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime without I/O drivers");
        runtime.block_on(future)
    }
}
