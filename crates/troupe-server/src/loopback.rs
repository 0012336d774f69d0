//! What a server without a token answers: requests addressed to a loopback host name,
//! from no browser page or from a page of a loopback origin (or a configured CORS one).
//!
//! A tokenless server listens on loopback only, but a web page the user visits runs on
//! the same machine: it may open `ws://127.0.0.1:8787/v1/ws` (a WebSocket is not held to
//! CORS) or, through DNS rebinding, send any request under a name of its own that
//! resolves to `127.0.0.1`. Browsers always say where a request comes from (`Origin`)
//! and which name it was sent to (`Host`), so both are checked; clients that are not
//! browsers send no `Origin` and pass.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// Which browser origins, besides loopback ones, may call a server without a token: its
/// configured CORS origins (`*` for any).
#[derive(Clone, Debug, Default)]
pub struct LocalOnly {
    origins: Arc<Vec<String>>,
    any_origin: bool,
}

impl LocalOnly {
    /// Loopback origins and `cors_origins`.
    pub fn new(cors_origins: &[String]) -> Self {
        LocalOnly {
            any_origin: cors_origins.iter().any(|o| o == "*"),
            origins: Arc::new(cors_origins.iter().map(|o| o.trim_end_matches('/').to_ascii_lowercase()).collect()),
        }
    }

    /// Whether a request with these `Host` (or authority) and `Origin` values is answered:
    /// else the error that says why not.
    pub fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), ApiError> {
        if let Some(host) = host
            && !is_loopback_name(host_name(host))
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!(
                    "this server has no token and answers only requests sent to a loopback name (localhost, \
                     127.0.0.1, [::1]), not `{host}`; set TROUPE_SERVER_TOKEN to serve others"
                ),
            ));
        }
        if let Some(origin) = origin {
            let listed = self.any_origin || self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin));
            if !listed && !is_loopback_origin(origin) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden_origin",
                    format!(
                        "this server has no token and answers browser pages of loopback origins only, not \
                         `{origin}`; set TROUPE_SERVER_TOKEN, or list the origin in the server's CORS origins"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The middleware, for a server without a token.
pub async fn local_only(State(local): State<LocalOnly>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = request
        .uri()
        .authority()
        .map(|authority| authority.as_str().to_owned())
        .or_else(|| headers.get(header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}").to_owned()));
    let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("\u{fffd}"));
    match local.check(host.as_deref(), origin) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// `host` without its port: `localhost:8787` → `localhost`, `[::1]:8787` → `::1`.
fn host_name(host: &str) -> &str {
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or_default();
    }
    host.rsplit_once(':').map_or(host, |(name, _port)| name)
}

/// `localhost`, a name under `.localhost` (which resolves to loopback, RFC 6761), or a
/// loopback address.
fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `http(s)://` and a loopback name, with or without a port. `null` (a sandboxed frame,
/// a file) is not.
fn is_loopback_origin(origin: &str) -> bool {
    let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    rest.is_some_and(|host| !host.contains('/') && !host.contains('@') && is_loopback_name(host_name(host)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_origins_pass_and_others_are_refused() {
        let local = LocalOnly::new(&["https://app.example.com".to_owned()]);
        for host in ["127.0.0.1:8787", "localhost:8787", "localhost", "[::1]:8787", "api.localhost:1", "127.3.4.5"] {
            assert!(local.check(Some(host), None).is_ok(), "{host}");
        }
        for host in ["evil.example:8787", "127.0.0.1.evil.example", "0.0.0.0:8787", "[::2]:1", "localhost.evil", ""] {
            assert!(local.check(Some(host), None).is_err(), "{host}");
        }
        for origin in ["http://127.0.0.1:8787", "http://localhost:3000", "https://[::1]", "https://app.example.com"] {
            assert!(local.check(Some("127.0.0.1:8787"), Some(origin)).is_ok(), "{origin}");
        }
        for origin in ["https://evil.example", "null", "http://localhost.evil", "file://", "http://a@localhost/x"] {
            assert!(local.check(Some("127.0.0.1:8787"), Some(origin)).is_err(), "{origin}");
        }
        assert!(LocalOnly::new(&["*".to_owned()]).check(None, Some("https://evil.example")).is_ok());
    }
}
