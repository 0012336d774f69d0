//! Bearer-token authentication, compared in constant time.

use crate::config::Token;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Paths anyone may read: liveness, the API description and the A2A agent card, which
/// is public by the protocol's design.
pub const PUBLIC_PATHS: &[&str] = &["/healthz", "/openapi.json", "/.well-known/agent-card.json"];

/// The accepted tokens, kept as SHA-256 digests so every comparison is over 32 bytes
/// whatever the lengths, and no token text stays in memory longer than needed.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    digests: Arc<Vec<[u8; 32]>>,
}

impl Auth {
    /// Accepts `tokens`; none means every request passes.
    pub fn new(tokens: &[Token]) -> Self {
        Auth { digests: Arc::new(tokens.iter().map(|t| digest(t.expose())).collect()) }
    }

    /// Whether requests must carry a token.
    pub fn is_required(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Whether `presented` is one of the tokens. Every token is compared, so the time
    /// taken does not tell which one (or how much of one) matched.
    pub fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented);
        let mut matched = subtle::Choice::from(0);
        for known in self.digests.iter() {
            matched |= known.ct_eq(&presented);
        }
        matched.into()
    }

    /// The check on one request's headers.
    pub fn check(&self, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
        if !self.is_required() {
            return Ok(());
        }
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("this server needs `Authorization: Bearer <token>`"))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <token>`"))?;
        if self.accepts(token.trim()) { Ok(()) } else { Err(ApiError::unauthorized("the bearer token is not valid")) }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The middleware: public paths and the console's files (which hold no data) pass, the
/// rest need a valid token.
pub async fn require_token(State(auth): State<Auth>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let public = PUBLIC_PATHS.contains(&path) || crate::console::is_shell_path(path);
    if public || request.method() == axum::http::Method::OPTIONS {
        return next.run(request).await;
    }
    match auth.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(error) => {
            let mut response = error.into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_exactly_the_configured_tokens() {
        let auth = Auth::new(&[Token::new("alpha"), Token::new("beta")]);
        assert!(auth.accepts("alpha"));
        assert!(auth.accepts("beta"));
        assert!(!auth.accepts("alph"));
        assert!(!auth.accepts("alphaa"));
        assert!(!auth.accepts(""));
        assert!(!Auth::new(&[]).is_required());
    }
}
