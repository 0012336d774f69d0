//! How a server is set up: address, tokens, limits, CORS, shutdown.

use std::net::SocketAddr;
use std::time::Duration;

/// The address `troupe serve` binds by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8787";
/// How long a client may take to send a request's headers, by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take between two pieces of a request's body, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections may be open at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The largest request body accepted by default (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The environment variable holding the server's bearer token(s), comma-separated.
pub const TOKEN_ENV: &str = "TROUPE_SERVER_TOKEN";

/// A bearer token clients must present (the A2A client's type: its `Debug` never shows it).
pub use troupe_a2a::Token;

/// Everything about serving that is not the agents.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The bearer tokens accepted; with none, the server serves loopback addresses only.
    pub tokens: Vec<Token>,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How long a client may take to send a request's headers (also the next request's,
    /// on a kept-alive connection); a slower or idle one is closed.
    pub header_timeout: Duration,
    /// How long a client may take between two pieces of a request's body; a request
    /// whose body stalls longer is answered 408.
    pub body_timeout: Duration,
    /// How many connections may be open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// The origins browsers may call from (`*` for any); none means no CORS headers.
    pub cors_origins: Vec<String>,
    /// How long shutdown waits for active runs to end before leaving them (with a store
    /// they resume on the next start) or cancelling them (without one).
    pub shutdown_grace: Duration,
    /// Whether runs still active after the grace are cancelled; leave them when they are
    /// recorded in a store, so the next start resumes them.
    pub cancel_on_shutdown: bool,
    /// How many ended runs are kept for late readers.
    pub retained_runs: usize,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Duration,
    /// The URL clients reach this server at (`https://agents.example.com`), for links the
    /// server hands out such as the A2A agent card's endpoint; when unset, they are built
    /// from each request's `Host` header.
    pub public_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tokens: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            cors_origins: Vec::new(),
            shutdown_grace: Duration::from_secs(10),
            cancel_on_shutdown: true,
            retained_runs: crate::hub::DEFAULT_RETAINED_RUNS,
            keep_alive: Duration::from_secs(15),
            public_url: None,
        }
    }
}

impl ServerConfig {
    /// The default configuration with the tokens of [`TOKEN_ENV`], if set.
    pub fn from_env() -> Self {
        let tokens = std::env::var(TOKEN_ENV).map(|v| Token::list(&v)).unwrap_or_default();
        ServerConfig { tokens, ..ServerConfig::default() }
    }

    /// Accepts `token` too.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.tokens.push(Token::new(token));
        self
    }

    /// Whether serving `addr` with this configuration is allowed: with no token, only a
    /// loopback address is.
    pub fn allows(&self, addr: SocketAddr) -> bool {
        !self.tokens.is_empty() || addr.ip().is_loopback()
    }

    /// One line saying how clients are authenticated, for the start-up message.
    pub fn auth_summary(&self) -> String {
        match self.tokens.len() {
            0 => format!("no token configured ({TOKEN_ENV} is unset): serving loopback only, without authentication"),
            1 => "clients must send `Authorization: Bearer <token>`".to_owned(),
            n => format!("clients must send `Authorization: Bearer <token>` ({n} tokens accepted)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_never_show_in_debug_and_gate_non_loopback_addresses() {
        let config = ServerConfig::default().token("s3cr3t-token");
        assert!(!format!("{config:?}").contains("s3cr3t"));
        assert!(config.allows("0.0.0.0:8787".parse().expect("addr")));
        let open = ServerConfig::default();
        assert!(open.allows("127.0.0.1:8787".parse().expect("addr")));
        assert!(open.allows("[::1]:8787".parse().expect("addr")));
        assert!(!open.allows("0.0.0.0:8787".parse().expect("addr")));
        assert_eq!(Token::list(" a, ,b ").len(), 2);
    }
}
