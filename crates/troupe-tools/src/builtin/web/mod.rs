//! `web.fetch` and `web.search`: reading the web over HTTP(S).
//!
//! Both are [`Effect::ReadOnly`](crate::Effect::ReadOnly) (a GET changes nothing) but
//! reach the network, so they declare [`Access::Network`](crate::Access::Network) /
//! [`Access::NetworkHost`](crate::Access::NetworkHost) for the capability check. Bodies are
//! read up to a size cap and the whole exchange runs under a time cap, so a huge or
//! stalled response cannot flood the model or hang the run. Redirects are followed up to
//! five times; the hosts they lead to are not checked against the capabilities again.
//!
//! `web.fetch` runs without asking anyone and takes its URL from the model, which may be
//! following a page it read, so it reaches only public internet addresses (see `guard`)
//! unless the tool is built with
//! [`WebFetchTool::allow_private_addresses`]. `web.search` talks to a backend a person
//! configured, often a SearXNG on the same machine, and is not restricted so.

mod address;
mod fetch;
mod guard;
mod html;
mod search;

pub use fetch::{WebFetchArgs, WebFetchTool};
pub use search::{SearchBackend, WebSearchArgs, WebSearchTool};

use crate::tool::Tool;
use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

/// How many redirects a request follows.
const MAX_REDIRECTS: usize = 5;
/// How long connecting to a server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("troupe/", env!("CARGO_PKG_VERSION"), " (+https://github.com/troupe-rs/troupe)");

/// The web tools: `web.fetch`, and `web.search` over `backend` where one is given. Not
/// part of [`coding_tools`](crate::coding_tools): an agent gets the web only when asked.
pub fn web_tools(backend: Option<SearchBackend>) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(WebFetchTool::new())];
    if let Some(backend) = backend {
        tools.push(Arc::new(WebSearchTool::new(backend)));
    }
    tools
}

/// Which addresses a web tool's client may connect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Only public internet addresses, checked as names resolve and at every redirect.
    PublicOnly,
    /// Any address, through the proxy the environment names (`HTTP_PROXY`, …) if any.
    Anywhere,
}

/// The HTTP client of the web tools, or why it could not be built (reported at the first
/// call rather than panicking at construction).
fn build_client(reach: Reach) -> Result<reqwest::Client, String> {
    client_builder(reach).build().map_err(describe_error)
}

fn client_builder(reach: Reach) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).user_agent(USER_AGENT);
    match reach {
        Reach::Anywhere => builder.redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS)),
        // No proxy: a proxy resolves the name itself, where the resolver's check cannot see.
        Reach::PublicOnly => {
            builder.redirect(guard::redirect_policy(MAX_REDIRECTS)).dns_resolver(guard::PublicResolver).no_proxy()
        }
    }
}

/// Reads `response`'s body up to `limit` bytes; `true` when there was more (which is
/// then not read).
async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A request error with its causes ("error sending request" alone says little), without
/// the URL, which the caller words itself.
fn describe_error(error: reqwest::Error) -> String {
    if error.is_redirect() {
        return format!("it redirected more than {MAX_REDIRECTS} times");
    }
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// `text` cut to at most `max_chars` characters, with `…` when cut.
fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
