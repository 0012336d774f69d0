//! The server against its own `/openapi.json`, checked by schemathesis (the real tool,
//! from PyPI): every operation fuzzed with schema-valid and schema-violating requests,
//! the responses checked against the document (status codes, content types, bodies), a
//! stateful phase following the links. Zero failures allowed. `/v1/ws` is left out: it is
//! a WebSocket, which the document describes by its upgrade headers only.

use crate::common::serve;
use std::path::Path;
use troupe_server::ServerConfig;
use troupe_testkit::test_deps;

const TOKEN: &str = "tok-schemathesis-4b1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_matches_its_openapi_document() {
    let Some(python) = test_deps::python_with("schemathesis") else {
        test_deps::skip("the_server_matches_its_openapi_document", "schemathesis is not installed in .test-deps/py");
        return;
    };
    let schemathesis = python.with_file_name("schemathesis");
    let served = serve(ServerConfig::default().token(TOKEN), []).await;
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis/schemathesis.toml");
    let output = tokio::process::Command::new(&schemathesis)
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{}/openapi.json", served.url))
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        // A WebSocket, and a stream that only ends with the server: no request of either ends.
        .args(["--max-examples", "30", "--seed", "1", "--exclude-path", "/v1/ws"])
        .args(["--exclude-path", "/v1/runs/changes", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        .output()
        .await
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("passed"), "it tested something: {report}");
    assert!(!report.contains("failed"), "{report}");
}
