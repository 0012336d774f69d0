//! The web console's files as the server serves them: without a token (they hold no
//! data) while every API path still needs one, each with its content type, a strict
//! Content-Security-Policy and `nosniff`; and the embedded bundle is what `console/`
//! builds (`scripts/build-console --check`, with node).

use crate::common::serve;
use troupe_server::ServerConfig;
use troupe_server::console::CONTENT_SECURITY_POLICY;

const TOKEN: &str = "tok-console-shell";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_files_load_without_the_token_with_their_types_and_policy_and_the_api_still_needs_it() {
    let served = serve(ServerConfig::default().token(TOKEN), []).await;
    let anonymous = reqwest::Client::new();
    for (path, kind, holds) in [
        ("/", "text/html; charset=utf-8", r#"<script type="module" crossorigin src="/console/console.js">"#),
        ("/console/index.html", "text/html; charset=utf-8", "<div id=\"app\">"),
        ("/console/console.js", "text/javascript; charset=utf-8", "Authorization"),
        ("/console/console.css", "text/css; charset=utf-8", "body"),
    ] {
        let response = anonymous.get(format!("{}{path}", served.url)).send().await.expect("request");
        assert_eq!(response.status(), 200, "{path} needs no token");
        let headers = response.headers().clone();
        assert_eq!(headers["content-type"], kind, "{path}");
        assert_eq!(headers["content-security-policy"], CONTENT_SECURITY_POLICY, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        let body = response.text().await.expect("a body");
        assert!(body.contains(holds), "{path}: {body:.200}");
    }
    assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self'"));
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline") && !CONTENT_SECURITY_POLICY.contains("unsafe-eval"));

    let missing = anonymous.get(format!("{}/console/other.js", served.url)).send().await.expect("request");
    assert_eq!(missing.status(), 401, "no other path under /console/ passes without the token");
    let missing = served.get("/console/other.js").send().await.expect("request");
    assert_eq!(missing.status(), 404);
    for path in ["/v1/runs", "/v1/agents", "/v1/runs/run_x", "/v1/runs/run_x/events"] {
        let refused = anonymous.get(format!("{}{path}", served.url)).send().await.expect("request");
        assert_eq!(refused.status(), 401, "{path} needs the token");
    }
    served.shutdown.cancel();
}

/// The committed bundle (crates/troupe-server/console-dist) is what the sources in
/// `console/` build with their lockfile: a change to the console's sources without a
/// rebuild fails here.
#[test]
fn the_embedded_console_is_what_its_sources_build() {
    let on_path = |program: &str| {
        std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
    };
    if !on_path("npm") {
        troupe_testkit::skip("the_embedded_console_is_what_its_sources_build", "npm is not installed");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/build-console");
    let output = std::process::Command::new(script).arg("--check").output().expect("the script runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
