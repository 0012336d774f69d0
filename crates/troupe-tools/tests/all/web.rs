//! `web.fetch` and `web.search` against loopback servers started by each test (which
//! `web.fetch` reaches only when allowed private addresses).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use troupe_tools::{
    Access, Effect, Idempotency, SearchBackend, Tool, ToolCatalog, ToolContext, ToolError, ToolResultOutcome,
    WebFetchTool, WebSearchTool, Workspace, web_tools,
};

/// Serves `router` on a loopback port for the rest of the test.
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// Runs one call of `tool`.
async fn call(tool: impl Tool + 'static, args: Value) -> ToolResultOutcome {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));
    let catalog = ToolCatalog::with_tools([Arc::new(tool) as Arc<dyn Tool>]).expect("catalog");
    let name = catalog.names()[0].to_owned();
    catalog.invoke(&name, args, &ctx).await
}

/// `web.fetch` allowed to reach the loopback servers of these tests.
fn local_fetch() -> WebFetchTool {
    WebFetchTool::new().allow_private_addresses(true)
}

fn ok(outcome: &ToolResultOutcome) -> &str {
    assert!(!outcome.is_error, "expected success, got error: {}", outcome.content);
    &outcome.content
}

fn err(outcome: &ToolResultOutcome) -> &ToolError {
    assert!(outcome.is_error, "expected an error, got: {}", outcome.content);
    outcome.error.as_ref().expect("an error outcome carries its error")
}

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>The  Test Page</title>
<style>body { color: red }</style>
<script>document.write("SCRIPT-TEXT")</script></head>
<body><nav><a href="/">Home</a></nav>
<h1>Welcome</h1>
<p>Read   the <a href="/docs">documentation</a> &amp; enjoy.</p>
<script>var hidden = "ALSO-HIDDEN";</script>
</body></html>"#;

fn page_server() -> Router {
    Router::new()
        .route("/page", get(|| async { Html(PAGE) }))
        .route("/json", get(|| async { axum::Json(json!({"answer": 42})) }))
        .route("/big", get(|| async { "a".repeat(10_000) }))
        .route("/png", get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0x89u8, b'P', b'N', b'G', 0]) }))
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, Html("<h1>No such page</h1>")) }))
        .route(
            "/hop/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    "arrived".into_response()
                } else {
                    Redirect::temporary(&format!("/hop/{}", n - 1)).into_response()
                }
            }),
        )
        .route(
            "/endless",
            get(|| async {
                // A body that never ends: the size cap must stop reading it.
                let chunk = Bytes::from(vec![b'z'; 64 * 1024]);
                let stream = futures::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/plain")
                    .body(Body::from_stream(stream))
                    .expect("response")
            }),
        )
        .route(
            "/stall",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "too late"
            }),
        )
        .route(
            "/stall-body",
            get(|| async {
                // Headers and a first chunk at once, then nothing more.
                let first = futures::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(b"partial ")) });
                let stream = futures::StreamExt::chain(first, futures::stream::pending());
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/plain")
                    .body(Body::from_stream(stream))
                    .expect("response")
            }),
        )
}

#[tokio::test]
async fn html_is_reduced_to_its_title_and_readable_text() {
    let address = serve(page_server()).await;
    let outcome = call(local_fetch(), json!({"url": format!("http://{address}/page")})).await;
    let text = ok(&outcome);
    assert!(text.starts_with("Title: The Test Page\nURL: http://"), "{text}");
    assert!(text.contains("Welcome\n\nRead the documentation & enjoy."), "{text}");
    assert!(text.contains("Home"), "link text is kept: {text}");
    for hidden in ["SCRIPT-TEXT", "ALSO-HIDDEN", "color: red", "<p>", "href"] {
        assert!(!text.contains(hidden), "`{hidden}` leaked into: {text}");
    }
    let structured = outcome.structured.as_ref().expect("structured");
    assert_eq!(structured["title"], "The Test Page");
    assert_eq!(structured["status"], 200);
    assert_eq!(structured["truncated"], false);

    let data = call(local_fetch(), json!({"url": format!("http://{address}/json")})).await;
    assert!(ok(&data).contains(r#"{"answer":42}"#), "JSON is returned as it is: {}", data.content);
}

#[tokio::test]
async fn bodies_are_capped_and_say_they_were_cut() {
    let address = serve(page_server()).await;
    let outcome = call(local_fetch(), json!({"url": format!("http://{address}/big"), "max_bytes": 1000})).await;
    let text = ok(&outcome);
    assert!(text.contains(&"a".repeat(1000)) && !text.contains(&"a".repeat(1001)), "{} bytes", text.len());
    assert!(text.contains("[content truncated: only the first 1000 bytes of the response were read]"), "{text}");
    assert_eq!(outcome.structured.as_ref().expect("structured")["bytes"], 1000);

    // The tool's own limit bounds what a call may ask for.
    let capped = local_fetch().max_bytes(300);
    let outcome = call(capped, json!({"url": format!("http://{address}/big"), "max_bytes": 5000})).await;
    assert!(ok(&outcome).contains(&"a".repeat(300)) && !outcome.content.contains(&"a".repeat(301)));

    // A body that never ends is cut at the default 1 MiB.
    let started = Instant::now();
    let endless = call(local_fetch(), json!({"url": format!("http://{address}/endless")})).await;
    assert!(
        ok(&endless).contains("[content truncated: only the first 1.0 MiB"),
        "{}",
        &endless.content[endless.content.len() - 200..]
    );
    assert_eq!(endless.structured.as_ref().expect("structured")["bytes"], 1024 * 1024);
    assert!(started.elapsed() < Duration::from_secs(15));

    let whole = call(local_fetch(), json!({"url": format!("http://{address}/big")})).await;
    assert!(!ok(&whole).contains("truncated"));
}

#[tokio::test]
async fn a_stalled_server_hits_the_time_cap() {
    let address = serve(page_server()).await;
    for path in ["stall", "stall-body"] {
        let tool = local_fetch().timeout(Duration::from_millis(300));
        let started = Instant::now();
        let outcome = call(tool, json!({"url": format!("http://{address}/{path}")})).await;
        assert!(
            matches!(err(&outcome), ToolError::Timeout { after } if *after == Duration::from_millis(300)),
            "{path}: {}",
            outcome.content
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{path} took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn only_http_and_https_urls_are_fetched() {
    for url in
        ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "not a url", "http://user:pw@127.0.0.1/"]
    {
        let outcome = call(WebFetchTool::new(), json!({"url": url})).await;
        assert!(matches!(err(&outcome), ToolError::InvalidArguments { .. }), "{url}: {}", outcome.content);
        assert!(!outcome.content.contains("root:"), "{url}");
    }
    let outcome = call(WebFetchTool::new(), json!({"url": "file:///etc/passwd"})).await;
    assert!(outcome.content.contains("only http and https URLs can be fetched, not `file:`"), "{}", outcome.content);
}

#[tokio::test]
async fn redirects_are_followed_at_most_five_times_and_errors_are_reported() {
    let address = serve(page_server()).await;
    let three = call(local_fetch(), json!({"url": format!("http://{address}/hop/3")})).await;
    let text = ok(&three);
    assert!(text.contains("arrived"), "{text}");
    assert!(text.contains(&format!("URL: http://{address}/hop/0 (redirected from http://{address}/hop/3)")), "{text}");

    let seven = call(local_fetch(), json!({"url": format!("http://{address}/hop/7")})).await;
    assert!(err(&seven).to_string().contains("redirected more than 5 times"), "{}", seven.content);

    let missing = call(local_fetch(), json!({"url": format!("http://{address}/missing")})).await;
    assert!(err(&missing).to_string().contains("returned HTTP 404 Not Found: No such page"), "{}", missing.content);

    let png = call(local_fetch(), json!({"url": format!("http://{address}/png")})).await;
    assert!(err(&png).to_string().contains("image/png content, not text"), "{}", png.content);

    // Nothing listens on a port just released.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("address");
    let refused = call(local_fetch(), json!({"url": format!("http://{closed}/")})).await;
    assert!(
        err(&refused).to_string().starts_with(&format!("could not fetch `http://{closed}/`: ")),
        "{}",
        refused.content
    );
}

/// A loopback server counting the requests it receives, and its address.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let router = Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "an internal page" }
    });
    (serve(router).await, hits)
}

#[tokio::test]
async fn private_and_local_addresses_are_refused_before_anything_is_sent() {
    let (address, hits) = counting_server().await;
    let port = address.port();
    // Where a refused URL would get through, a short timeout ends the wait for an address
    // that does not answer and the assertion below names it.
    let tool = || WebFetchTool::new().timeout(Duration::from_secs(3));
    for (url, why) in [
        (format!("http://127.0.0.1:{port}/"), "127.0.0.1 is a loopback address".to_owned()),
        (format!("http://localhost:{port}/v1/runs"), "`localhost` resolves to".to_owned()),
        (format!("http://[::1]:{port}/"), "::1 is a loopback address".to_owned()),
        (format!("http://[::ffff:127.0.0.1]:{port}/"), "::ffff:127.0.0.1 is a loopback address".to_owned()),
        // The URL parser reads these as 127.0.0.1.
        (format!("http://2130706433:{port}/"), "127.0.0.1 is a loopback address".to_owned()),
        (format!("http://0x7f000001:{port}/"), "127.0.0.1 is a loopback address".to_owned()),
        (format!("http://0177.0.0.1:{port}/"), "127.0.0.1 is a loopback address".to_owned()),
        (format!("http://127.1:{port}/"), "127.0.0.1 is a loopback address".to_owned()),
        (format!("http://0.0.0.0:{port}/"), "0.0.0.0 is the unspecified address".to_owned()),
        (
            "http://169.254.169.254/latest/meta-data/iam/".to_owned(),
            "169.254.169.254 is a link-local address".to_owned(),
        ),
        ("http://[::ffff:a9fe:a9fe]/latest/".to_owned(), "::ffff:169.254.169.254 is a link-local address".to_owned()),
        ("http://10.0.0.1/".to_owned(), "10.0.0.1 is a private network address".to_owned()),
        ("https://192.168.1.1/admin".to_owned(), "192.168.1.1 is a private network address".to_owned()),
        ("http://172.16.0.1/".to_owned(), "172.16.0.1 is a private network address".to_owned()),
        ("http://100.64.0.1/".to_owned(), "100.64.0.1 is a shared (carrier-grade NAT) address".to_owned()),
        ("http://[fe80::1]/".to_owned(), "fe80::1 is a link-local address".to_owned()),
        ("http://[fd00::1]/".to_owned(), "fd00::1 is a unique local".to_owned()),
    ] {
        let outcome = call(tool(), json!({"url": url})).await;
        let error = err(&outcome);
        assert!(matches!(error, ToolError::Denied { .. }), "{url}: {}", outcome.content);
        let message = error.to_string();
        assert!(message.contains("web.fetch does not fetch private or local addresses"), "{url}: {message}");
        assert!(message.contains(&why), "{url}: {message}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a refused fetch must not reach the server");

    // The same server, allowed: it was there to be reached.
    let allowed = call(local_fetch(), json!({"url": format!("http://127.0.0.1:{port}/")})).await;
    assert!(ok(&allowed).contains("an internal page"), "{}", allowed.content);
    let by_name = call(local_fetch(), json!({"url": format!("http://localhost:{port}/")})).await;
    assert!(ok(&by_name).contains("an internal page"), "{}", by_name.content);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_model_is_told_that_private_addresses_are_refused() {
    let description = |tool: WebFetchTool| Tool::declaration(&tool).description.clone();
    assert!(description(WebFetchTool::new()).contains("Only public internet addresses"));
    assert!(!description(local_fetch()).contains("Only public internet addresses"));
    let again = local_fetch().allow_private_addresses(false);
    assert!(description(again.clone()).contains("Only public internet addresses"));
    let (address, hits) = counting_server().await;
    let outcome = call(again, json!({"url": format!("http://{address}/")})).await;
    assert!(matches!(err(&outcome), ToolError::Denied { .. }), "{}", outcome.content);
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

/// A proxy resolves names itself, out of the resolver's sight: the checked `web.fetch`
/// uses none, where a tool allowed private addresses uses the environment's, as reqwest's
/// clients do. The proxy's variable is set for a child process of this test, which builds
/// and calls the tool (this process's environment is not changed).
#[test]
fn the_environments_proxy_is_not_used_while_addresses_are_checked() {
    if let Ok(mode) = std::env::var("TROUPE_PROXY_TEST_CHILD") {
        return fetch_through_the_environment(&mode);
    }
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("a proxy's port");
    proxy.set_nonblocking(true).expect("non-blocking");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("its address"));
    let fetch_in_a_child = |mode: &str| {
        let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", "web::the_environments_proxy_is_not_used_while_addresses_are_checked"])
            .args(["--nocapture", "--test-threads=1"])
            .env("TROUPE_PROXY_TEST_CHILD", mode)
            .env("HTTP_PROXY", &proxy_url)
            .env("http_proxy", &proxy_url)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .expect("the child test runs");
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "the {mode} child failed:\n{said}");
    };
    fetch_in_a_child("checked");
    assert!(proxy.accept().is_err(), "the checked tool sent nothing to the proxy");
    fetch_in_a_child("allowed");
    assert!(proxy.accept().is_ok(), "the tool allowed private addresses went through the proxy");
}

/// The child's side: fetch a name that never resolves with the tool of `mode`.
fn fetch_through_the_environment(mode: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let tool = WebFetchTool::new().timeout(Duration::from_secs(2));
        let tool = if mode == "allowed" { tool.allow_private_addresses(true) } else { tool };
        // `.invalid` never resolves; a proxy that never answers ends in the timeout.
        let outcome = call(tool, json!({"url": "http://troupe-proxy-check.invalid/"})).await;
        assert!(outcome.is_error, "{}", outcome.content);
    });
}

/// What a search backend received.
#[derive(Clone, Debug, Default)]
struct Seen {
    method: String,
    path: String,
    query: HashMap<String, String>,
    headers: HashMap<String, String>,
    body: Option<Value>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn seen(log: &Log) -> Vec<Seen> {
    log.lock().expect("log").clone()
}

fn headers_of(headers: &HeaderMap) -> HashMap<String, String> {
    headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned())).collect()
}

/// A backend answering GET and POST on every path with `answer` (and `status`), logging
/// each request.
async fn backend(status: StatusCode, answer: Value) -> (SocketAddr, Log) {
    let log: Log = Arc::default();
    let record = |method: &'static str| {
        move |State((log, status, answer)): State<(Log, StatusCode, Value)>,
              uri: axum::http::Uri,
              Query(query): Query<HashMap<String, String>>,
              headers: HeaderMap,
              body: Bytes| async move {
            log.lock().expect("log").push(Seen {
                method: method.to_owned(),
                path: uri.path().to_owned(),
                query,
                headers: headers_of(&headers),
                body: serde_json::from_slice(&body).ok(),
            });
            (status, axum::Json(answer))
        }
    };
    let router = Router::new().route("/{*path}", get(record("GET")).merge(post(record("POST")))).with_state((
        Arc::clone(&log),
        status,
        answer,
    ));
    (serve(router).await, log)
}

#[tokio::test]
async fn searxng_is_asked_for_json_and_its_results_are_listed() {
    let results: Vec<Value> = (1..=8)
        .map(|i| json!({"title": format!("Result {i}"), "url": format!("https://example.com/{i}"), "content": format!("About &amp; {i}"), "engine": "x"}))
        .collect();
    let (address, log) =
        backend(StatusCode::OK, json!({"query": "rust", "number_of_results": 8, "results": results})).await;
    let tool = WebSearchTool::new(SearchBackend::searxng(format!("http://{address}/searx/")));
    let outcome = call(tool, json!({"query": "rust async", "max_results": 3})).await;
    assert_eq!(
        ok(&outcome),
        "1. Result 1\n   https://example.com/1\n   About & 1\n\
         2. Result 2\n   https://example.com/2\n   About & 2\n\
         3. Result 3\n   https://example.com/3\n   About & 3\n"
    );
    let requests = seen(&log);
    assert_eq!(requests.len(), 1);
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("GET", "/searx/search"));
    assert_eq!(requests[0].query.get("q").map(String::as_str), Some("rust async"));
    assert_eq!(requests[0].query.get("format").map(String::as_str), Some("json"));
    assert_eq!(outcome.structured.as_ref().expect("structured")["results"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn brave_gets_the_subscription_token_and_its_web_results_are_parsed() {
    let answer = json!({"type": "search", "web": {"type": "search", "results": [
        {"title": "The <strong>Rust</strong> Language", "url": "https://www.rust-lang.org/", "description": "A language empowering <strong>everyone</strong>."},
        {"title": "No URL", "description": "dropped"},
    ]}});
    let (address, log) = backend(StatusCode::OK, answer).await;
    let backend_config = SearchBackend::brave().with_base_url(format!("http://{address}/res/v1/web/search"));
    let tool = WebSearchTool::new(backend_config).api_key("brave-test-key");
    let outcome = call(tool, json!({"query": "rust"})).await;
    assert_eq!(
        ok(&outcome),
        "1. The Rust Language\n   https://www.rust-lang.org/\n   A language empowering everyone.\n"
    );
    let request = &seen(&log)[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("GET", "/res/v1/web/search"));
    assert_eq!(request.query.get("q").map(String::as_str), Some("rust"));
    assert_eq!(request.query.get("count").map(String::as_str), Some("5"));
    assert_eq!(request.headers.get("x-subscription-token").map(String::as_str), Some("brave-test-key"));
    assert_eq!(request.headers.get("accept").map(String::as_str), Some("application/json"));

    // A response without web results is an empty list, not an error.
    let (address, _log) = backend(StatusCode::OK, json!({"type": "search", "query": {"original": "x"}})).await;
    let tool = WebSearchTool::new(SearchBackend::brave().with_base_url(format!("http://{address}/s"))).api_key("k");
    assert_eq!(ok(&call(tool, json!({"query": "x"})).await), "No results for `x`.");
}

#[tokio::test]
async fn tavily_gets_a_bearer_token_and_a_json_body() {
    let answer = json!({"query": "q", "answer": null, "response_time": 1.2, "results": [
        {"title": "Tavily hit", "url": "https://tavily.example/a", "content": "Snippet text.", "score": 0.9},
    ]});
    let (address, log) = backend(StatusCode::OK, answer).await;
    let tool = WebSearchTool::new(SearchBackend::tavily().with_base_url(format!("http://{address}/search")))
        .api_key("tvly-test-key");
    let outcome = call(tool, json!({"query": "what is tavily", "max_results": 50})).await;
    assert_eq!(ok(&outcome), "1. Tavily hit\n   https://tavily.example/a\n   Snippet text.\n");
    let request = &seen(&log)[0];
    assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/search"));
    assert_eq!(request.headers.get("authorization").map(String::as_str), Some("Bearer tvly-test-key"));
    assert_eq!(request.headers.get("content-type").map(String::as_str), Some("application/json"));
    // max_results above 20 is clamped to 20; the key is not in the body.
    assert_eq!(request.body, Some(json!({"query": "what is tavily", "max_results": 20})));
}

#[tokio::test]
async fn api_keys_come_from_the_environment_and_never_show_in_errors() {
    // Cargo sets CARGO_PKG_NAME for test processes, so it stands in for a key variable.
    let from_env = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let (address, log) = backend(StatusCode::OK, json!({"web": {"results": []}})).await;
    let config = SearchBackend::brave().with_base_url(format!("http://{address}/s")).with_api_key_env("CARGO_PKG_NAME");
    ok(&call(WebSearchTool::new(config), json!({"query": "x"})).await);
    assert_eq!(seen(&log)[0].headers.get("x-subscription-token"), Some(&from_env));

    let unset = SearchBackend::tavily()
        .with_base_url(format!("http://{address}/s"))
        .with_api_key_env("TROUPE_TEST_VARIABLE_THAT_IS_NEVER_SET");
    let outcome = call(WebSearchTool::new(unset), json!({"query": "x"})).await;
    assert!(
        err(&outcome).to_string().contains("TROUPE_TEST_VARIABLE_THAT_IS_NEVER_SET must hold a tavily API key"),
        "{}",
        outcome.content
    );
    assert_eq!(seen(&log).len(), 1, "no request is sent without a key");

    // A backend that echoes the key in its error must not make the tool show it.
    let (address, _log) = backend(StatusCode::UNAUTHORIZED, json!({"error": "invalid key sk-live-12345"})).await;
    let tool = WebSearchTool::new(SearchBackend::brave().with_base_url(format!("http://{address}/s")))
        .api_key("sk-live-12345");
    let outcome = call(tool, json!({"query": "x"})).await;
    let message = err(&outcome).to_string();
    assert!(message.contains("HTTP 401 Unauthorized (check the API key in BRAVE_API_KEY)"), "{message}");
    assert!(!message.contains("sk-live-12345") && message.contains("[redacted]"), "{message}");

    let (address, _log) = backend(StatusCode::OK, json!({"results": "not a list"})).await;
    let tool = WebSearchTool::new(SearchBackend::searxng(format!("http://{address}")));
    let outcome = call(tool, json!({"query": "x"})).await;
    assert!(err(&outcome).to_string().contains("unexpected shape"), "{}", outcome.content);
}

#[test]
fn web_tools_are_read_only_idempotent_and_need_the_network() {
    let only_fetch = web_tools(None);
    assert_eq!(only_fetch.len(), 1);
    let both = web_tools(Some(SearchBackend::brave()));
    let names: Vec<&str> = both.iter().map(|t| t.declaration().name.as_str()).collect();
    assert_eq!(names, ["web.fetch", "web.search"]);
    for tool in &both {
        let decl = tool.declaration();
        assert_eq!((decl.effect, decl.idempotency), (Effect::ReadOnly, Idempotency::Idempotent), "{}", decl.name);
    }
    assert_eq!(both[0].declaration().access, [Access::network("url")]);
    assert_eq!(both[1].declaration().access, [Access::NetworkHost("api.search.brave.com".into())]);
}
