//! What the server refuses: each a clear 4xx with a JSON error, and no effect on any run.

use crate::common;

use common::{Served, serve, write_call};
use std::time::Duration;
use troupe_server::{Server, ServerConfig, ServerError};
use troupe_testkit::MockTurn;

const TOKEN: &str = "tok-9f2c1e7a-test";

async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("the error body is JSON");
    let code = body["error"]["code"].as_str().expect("an error code").to_owned();
    let message = body["error"]["message"].as_str().expect("an error message").to_owned();
    (status, code, message)
}

fn runs_held(served: &Served) -> usize {
    served.server_hub.list().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_401_and_the_right_one_passes() {
    let served = serve(ServerConfig::default().token(TOKEN), []).await;
    let url = |path: &str| format!("{}{path}", served.url);

    let missing = served.client.get(url("/v1/agents")).send().await.expect("request");
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_of(missing).await.0, 401);

    let wrong = served.client.get(url("/v1/agents")).bearer_auth("tok-wrong").send().await.expect("request");
    let (status, code, message) = error_of(wrong).await;
    assert_eq!((status, code.as_str()), (401, "unauthorized"));
    assert!(!message.contains("tok-"), "no token is echoed: {message}");

    let prefix = served.client.get(url("/v1/agents")).bearer_auth(&TOKEN[..8]).send().await.expect("request");
    assert_eq!(prefix.status(), 401, "a prefix of the token is not the token");
    let basic = served.client.get(url("/v1/agents")).header("authorization", format!("Basic {TOKEN}")).send();
    assert_eq!(basic.await.expect("request").status(), 401);

    let start = served
        .client
        .post(url("/v1/runs"))
        .json(&serde_json::json!({"agent": "coder", "instruction": "x", "stream": false}))
        .send()
        .await
        .expect("request");
    assert_eq!(start.status(), 401);
    assert_eq!(runs_held(&served), 0, "an unauthenticated start starts nothing");

    let right = served.client.get(url("/v1/agents")).bearer_auth(TOKEN).send().await.expect("request");
    assert_eq!(right.status(), 200);
    let health = served.client.get(url("/healthz")).send().await.expect("request");
    assert_eq!(health.status(), 200, "liveness needs no token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_413_and_starts_nothing() {
    let config = ServerConfig { body_limit: 4096, ..ServerConfig::default() };
    let served = serve(config, [MockTurn::text("never")]).await;
    let huge = "x".repeat(10_000);
    let response = served
        .post("/v1/runs")
        .json(&serde_json::json!({"agent": "coder", "instruction": huge, "stream": false}))
        .send()
        .await
        .expect("request");
    let (status, code, _) = error_of(response).await;
    assert_eq!((status, code.as_str()), (413, "body_too_large"));
    assert_eq!(runs_held(&served), 0);
    assert!(served.mock.requests().is_empty(), "no model was called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_misshapen_json_is_a_typed_4xx() {
    let served = serve(ServerConfig::default(), []).await;
    let cases: [(&str, u16, &str); 5] = [
        ("{\"agent\": \"coder\", \"instruction\": ", 400, "malformed_json"),
        ("not json at all", 400, "malformed_json"),
        ("{\"agent\": \"coder\"}", 422, "invalid_body"),
        ("{\"agent\": \"coder\", \"instruction\": \"x\", \"surprise\": 1}", 422, "invalid_body"),
        ("{\"agent\": \"coder\", \"team\": \"crew\", \"instruction\": \"x\"}", 422, "invalid_body"),
    ];
    for (body, want_status, want_code) in cases {
        let response = served
            .post("/v1/runs")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let (status, code, _) = error_of(response).await;
        assert_eq!((status, code.as_str()), (want_status, want_code), "{body}");
    }
    assert_eq!(runs_held(&served), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agents_and_runs_are_404() {
    let served = serve(ServerConfig::default(), []).await;
    let response = served
        .post("/v1/runs")
        .json(&serde_json::json!({"agent": "nobody", "instruction": "x"}))
        .send()
        .await
        .expect("request");
    let (status, code, message) = error_of(response).await;
    assert_eq!((status, code.as_str()), (404, "unknown_agent"));
    assert!(message.contains("nobody"));
    for path in ["/v1/runs/run_missing", "/v1/runs/run_missing/events"] {
        let (status, code, _) = error_of(served.get(path).send().await.expect("request")).await;
        assert_eq!((status, code.as_str()), (404, "unknown_run"), "{path}");
    }
    let signal = served
        .post("/v1/runs/run_missing/signals")
        .json(&serde_json::json!({"type": "cancel"}))
        .send()
        .await
        .expect("request");
    assert_eq!(error_of(signal).await.1, "unknown_run");
    let (status, code, _) = error_of(served.get("/v2/elsewhere").send().await.expect("request")).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_for_another_runs_call_is_refused_and_changes_nothing() {
    let served = serve(
        ServerConfig::default(),
        [
            write_call("call_a", "a.txt", "from a\n"),
            write_call("call_b", "b.txt", "from b\n"),
            MockTurn::text("A is done."),
        ],
    )
    .await;
    let run_a = served.start("write a").await;
    served.wait_phase(&run_a, "waiting").await;
    let run_b = served.start("write b").await;
    served.wait_phase(&run_b, "waiting").await;

    // Run B's call, approved through run A: refused, and neither run moves.
    let (status, code, _) = error_of(served.approve(&run_a, "call_b").await).await;
    assert_eq!((status, code.as_str()), (409, "no_such_call"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    for (run, call) in [(&run_a, "call_a"), (&run_b, "call_b")] {
        let view = served.wait_phase(run, "waiting").await;
        assert_eq!(view["pending"][0]["call_id"], call, "{run} still waits for its own call");
    }
    assert!(!served.workspace.path().join("a.txt").exists());
    assert!(!served.workspace.path().join("b.txt").exists());

    // The right decision, through the right run, works.
    assert_eq!(served.approve(&run_a, "call_a").await.status(), 202);
    let view = served.wait_phase(&run_a, "ended").await;
    assert_eq!(view["end"]["outcome"], "completed");
    assert!(served.workspace.path().join("a.txt").exists());
    assert!(!served.workspace.path().join("b.txt").exists(), "run B's call is still undecided");

    let bad_signal = served
        .post(&format!("/v1/runs/{run_b}/signals"))
        .json(&serde_json::json!({"type": "approval", "call_id": "call_b", "decision": {"type": "maybe"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(error_of(bad_signal).await.0, 422);
    let ended = served.approve(&run_a, "call_a").await;
    assert_eq!(error_of(ended).await.1, "run_ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_try_to_traverse_paths_are_400() {
    let served = serve(ServerConfig::default(), []).await;
    for path in [
        "/v1/runs/..%2F..%2Fetc%2Fpasswd",
        "/v1/runs/..%5Cwindows",
        "/v1/runs/run%00x/events",
        "/v1/runs/a%20b/signals",
    ] {
        let request = if path.ends_with("signals") {
            served.post(path).json(&serde_json::json!({"type": "cancel"}))
        } else {
            served.get(path)
        };
        let (status, code, _) = error_of(request.send().await.expect("request")).await;
        assert_eq!((status, code.as_str()), (400, "invalid_id"), "{path}");
    }
    // Raw requests, so no client normalises the dots away before the server sees them.
    for target in ["/v1/runs/%2e%2e", "/v1/runs/%2E%2E/events", "/v1/runs/.."] {
        let (status, body) = raw_get(&served.url, target).await;
        assert!(status == 400 || status == 404, "{target}: {status}");
        let body: serde_json::Value = serde_json::from_str(&body).expect("a JSON error");
        assert!(body["error"]["code"].is_string(), "{target}: {body}");
    }
    let traversal_agent = served
        .post("/v1/runs")
        .json(&serde_json::json!({"agent": "../coder", "instruction": "x"}))
        .send()
        .await
        .expect("request");
    assert_eq!(error_of(traversal_agent).await.1, "invalid_id");
    let bad_position = served.get("/v1/runs/run_x/events").header("last-event-id", "-1; drop").send();
    let (status, _, _) = error_of(bad_position.await.expect("request")).await;
    assert!(status == 400 || status == 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_address_without_a_token_is_refused_at_start() {
    let server = Server::new(ServerConfig::default(), std::sync::Arc::new(troupe_server::AgentLauncher::new()));
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.expect("bind");
    let error = server.serve(listener, tokio_util::sync::CancellationToken::new()).await.expect_err("refused");
    assert!(matches!(error, ServerError::UnprotectedAddress { .. }), "{error}");
    assert!(error.to_string().contains("TROUPE_SERVER_TOKEN"));
}

/// A server without a token is reached by the web pages its user visits: a foreign page
/// may open a WebSocket to it (not held to CORS) or send requests under a name of its
/// own that resolves to loopback (DNS rebinding). Both are refused, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_token_answers_loopback_names_and_origins_only() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let served = serve(ServerConfig::default(), [MockTurn::text("hello")]).await;
    let port = served.url.rsplit(':').next().expect("a port").to_owned();
    let start = |header: &'static str, value: String| served.start_request("hi", false).header(header, value).send();

    let rebound = start("host", format!("rebound.evil.example:{port}")).await.expect("request");
    let (status, code, message) = error_of(rebound).await;
    assert_eq!((status, code.as_str()), (403, "forbidden_host"), "{message}");
    assert!(message.contains("TROUPE_SERVER_TOKEN"), "{message}");
    let foreign = start("origin", "https://evil.example".to_owned()).await.expect("request");
    assert_eq!(error_of(foreign).await.1, "forbidden_origin");
    let framed = start("origin", "null".to_owned()).await.expect("request");
    assert_eq!(framed.status(), 403, "a sandboxed frame or a file is no loopback origin");
    assert_eq!(runs_held(&served), 0, "a refused start starts nothing");
    assert!(served.mock.requests().is_empty());

    let ws_url = format!("{}/v1/ws", served.url.replacen("http", "ws", 1));
    let mut from_foreign_page = ws_url.as_str().into_client_request().expect("a request");
    from_foreign_page.headers_mut().insert("origin", "https://evil.example".parse().expect("header"));
    let refused = tokio_tungstenite::connect_async(from_foreign_page).await.expect_err("the handshake is refused");
    assert!(
        matches!(&refused, tokio_tungstenite::tungstenite::Error::Http(response) if response.status() == 403),
        "{refused}"
    );
    let mut from_console = ws_url.as_str().into_client_request().expect("a request");
    from_console.headers_mut().insert("origin", format!("http://localhost:{port}").parse().expect("header"));
    tokio_tungstenite::connect_async(from_console).await.expect("a loopback page's socket opens");

    let named = served.get("/v1/agents").header("host", format!("localhost:{port}")).send().await.expect("request");
    assert_eq!(named.status(), 200, "localhost is a loopback name");
    let local_page = start("origin", format!("http://127.0.0.1:{port}")).await.expect("request");
    assert_eq!(local_page.status(), 201, "the console's own page starts runs");

    // With a token, the token guards the server, whatever the name or page.
    let guarded = serve(ServerConfig::default().token(TOKEN), []).await;
    let named = guarded.get("/v1/agents").bearer_auth(TOKEN).header("host", "agents.example.com").send();
    assert_eq!(named.await.expect("request").status(), 200);
}

/// Sends `GET target` as written, over a plain socket; the status and body.
async fn raw_get(url: &str, target: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    socket.read_to_string(&mut response).await.expect("read");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_the_configured_origins() {
    let config = ServerConfig { cors_origins: vec!["https://app.example".to_owned()], ..ServerConfig::default() };
    let served = serve(config.token(TOKEN), []).await;
    let preflight = |origin: &'static str| {
        served
            .client
            .request(reqwest::Method::OPTIONS, format!("{}/v1/runs", served.url))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization, content-type, idempotency-key")
            .send()
    };
    let allowed = preflight("https://app.example").await.expect("request");
    assert!(allowed.status().is_success(), "{}", allowed.status());
    assert_eq!(allowed.headers()["access-control-allow-origin"], "https://app.example");
    let methods = allowed.headers()["access-control-allow-methods"].to_str().expect("text").to_owned();
    assert!(methods.contains("POST"), "{methods}");
    let headers = allowed.headers()["access-control-allow-headers"].to_str().expect("text").to_owned();
    assert!(headers.contains("idempotency-key"), "a page may send a start's key: {headers}");
    // A page may read which run it started, and whether an earlier request had started it.
    let started =
        served.start_request("hi", false).header("origin", "https://app.example").send().await.expect("request");
    let exposed = started.headers()["access-control-expose-headers"].to_str().expect("text").to_owned();
    assert!(exposed.contains("x-troupe-run-id") && exposed.contains("idempotent-replayed"), "{exposed}");
    let other = preflight("https://evil.example").await.expect("request");
    assert!(other.headers().get("access-control-allow-origin").is_none(), "no CORS grant for another origin");

    let unconfigured = serve(ServerConfig::default(), []).await;
    let response = unconfigured.get("/healthz").header("origin", "https://app.example").send().await.expect("request");
    assert!(response.headers().get("access-control-allow-origin").is_none(), "CORS is off unless configured");
}

/// A body that is not JSON is refused before any handler reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_json_is_415_and_starts_nothing() {
    let served = serve(ServerConfig::default(), []).await;
    let json = r#"{"agent": "coder", "instruction": "hi", "stream": false}"#;
    for kind in ["text/plain", "application/x-www-form-urlencoded", "application/xml"] {
        let response = served.post("/v1/runs").header("content-type", kind).body(json).send().await.expect("request");
        let (status, code, _) = error_of(response).await;
        assert_eq!((status, code.as_str()), (415, "unsupported_media_type"), "{kind}");
    }
    let untyped = served.post("/v1/runs").body(json).send().await.expect("request");
    assert_eq!(error_of(untyped).await.0, 415, "a body must say it is JSON");
    let a2a = served.post("/a2a").header("content-type", "text/plain").body("{}").send().await.expect("request");
    assert_eq!(error_of(a2a).await.0, 415);
    assert_eq!(runs_held(&served), 0);
}

/// Connections that never finish their headers (a slowloris) are closed after the header
/// timeout, and while they are held the server still answers others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_headers_are_closed_after_the_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = ServerConfig { header_timeout: Duration::from_millis(500), ..ServerConfig::default() };
    let served = serve(config, []).await;
    let addr = served.url.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.expect("connects");
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.expect("writes part of a header");
        slow.push(stream);
    }
    let healthy = served.get("/healthz").send().await.expect("the server still answers");
    assert_eq!(healthy.status().as_u16(), 200);
    let started = std::time::Instant::now();
    for (i, stream) in slow.iter_mut().enumerate() {
        let mut buffer = [0u8; 256];
        // The server closes the connection (0 bytes, or an error response then close).
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "slow connection {i} was not closed");
    }
    assert!(started.elapsed() < Duration::from_secs(3), "closed within the timeout: {:?}", started.elapsed());
}

/// With every connection slot taken by idle clients, a new client waits in the backlog
/// until the header timeout frees a slot, then is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_limit_holds_and_a_freed_slot_is_used() {
    let config =
        ServerConfig { header_timeout: Duration::from_millis(600), max_connections: 2, ..ServerConfig::default() };
    let served = serve(config, []).await;
    let addr = served.url.trim_start_matches("http://").to_owned();
    let idle_a = tokio::net::TcpStream::connect(&addr).await.expect("connects");
    let idle_b = tokio::net::TcpStream::connect(&addr).await.expect("connects");
    let started = std::time::Instant::now();
    let fresh = reqwest::Client::new();
    let response = fresh.get(format!("{}/healthz", served.url)).send().await.expect("served in the end");
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "the third connection waited for a slot: {:?}",
        started.elapsed()
    );
    drop((idle_a, idle_b));
}

/// A body that stops arriving is answered 408, and the run is not started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_is_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = ServerConfig { body_timeout: Duration::from_millis(300), ..ServerConfig::default() };
    let served = serve(config, []).await;
    let addr = served.url.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.expect("connects");
    stream
        .write_all(
            b"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"agent\"",
        )
        .await
        .expect("writes the start of a body");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert_eq!(runs_held(&served), 0);
}

/// `serve_router` (what `troupe mcp serve --http` serves through) holds a router of one's
/// own to the config's limits: a body that stops arriving is refused after the body
/// timeout instead of holding its connection, and a connection that never finishes its
/// headers is closed after the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_of_ones_own_is_held_to_the_body_and_header_timeouts() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = ServerConfig {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let router = axum::Router::new().route("/echo", axum::routing::post(|body: String| async move { body }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { troupe_server::serve_router(listener, router, &config, shutdown).await }
    });

    let answered =
        reqwest::Client::new().post(format!("http://{addr}/echo")).body("hello").send().await.expect("answers");
    assert_eq!(answered.text().await.expect("a body"), "hello");

    let mut stalled_body = tokio::net::TcpStream::connect(addr).await.expect("connects");
    stalled_body
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhel")
        .await
        .expect("writes the start of a body");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stalled_body.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the stalled body's connection was not let go");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || !answer.starts_with("HTTP/1.1 2"),
        "a cut-off body is not answered as a success: {answer}"
    );

    let mut stalled_headers = tokio::net::TcpStream::connect(addr).await.expect("connects");
    stalled_headers.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.expect("writes part of a header");
    let mut buffer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stalled_headers.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the stalled headers' connection was closed");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving).await.expect("it stops").expect("it ran");
}
