//! The web console: the page, script and style sheet built from `console/` (Vite, Preact,
//! TypeScript) by `scripts/build-console`, embedded in the binary and served at `/` and
//! `/console/*`.
//!
//! The files carry no data, so they load without a token; everything the console shows it
//! reads from the native API with `Authorization: Bearer`, like any client. They are served
//! with a strict Content-Security-Policy (scripts from this origin only, nothing inline)
//! and `X-Content-Type-Options: nosniff`.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The Content-Security-Policy of the console's files: its own script and style sheet,
/// requests to its own origin, nothing inline, no frames, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file of the console.
struct ShellFile {
    /// Its name under `/console/`.
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const FILES: &[ShellFile] = &[
    ShellFile {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../console-dist/index.html"),
    },
    ShellFile {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console-dist/console.js"),
    },
    ShellFile {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../console-dist/console.css"),
    },
];

/// Whether `path` is one of the console's files (`/` is its page): these are served
/// without a token, since they hold no data.
pub fn is_shell_path(path: &str) -> bool {
    path == "/" || path.strip_prefix("/console/").is_some_and(|name| FILES.iter().any(|f| f.name == name))
}

/// The console's routes: the page at `/`, its files under `/console/`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(|| async { shell("index.html") })).route("/console/{file}", get(file))
}

async fn file(Path(name): Path<String>) -> Response {
    shell(&name)
}

fn shell(name: &str) -> Response {
    let Some(file) = FILES.iter().find(|f| f.name == name) else {
        return ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such console file").into_response();
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(file.content_type)),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
            // The names are fixed, so a browser asks again each time (and gets 304-free
            // small files): a new binary's console is never hidden behind a cached one.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        file.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_paths_are_the_page_and_its_embedded_files() {
        for path in ["/", "/console/index.html", "/console/console.js", "/console/console.css"] {
            assert!(is_shell_path(path), "{path}");
        }
        for path in ["/v1/runs", "/console/", "/console/../v1/runs", "/console/secret.js", "/index.html", ""] {
            assert!(!is_shell_path(path), "{path}");
        }
    }

    #[test]
    fn the_page_loads_its_script_and_styles_from_the_console_path_and_nothing_inline() {
        let page = FILES[0].body;
        assert!(page.contains(r#"src="/console/console.js""#), "{page}");
        assert!(page.contains(r#"href="/console/console.css""#), "{page}");
        assert!(!page.contains("<script>"), "no inline script: {page}");
        assert!(!page.contains("<style"), "no inline style: {page}");
    }
}
