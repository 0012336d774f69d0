//! `web.fetch`: one page, by HTTP(S) GET, as readable text.

use super::guard::{self, Refused};
use super::{Reach, build_client, clip, describe_error, html, read_capped};
use crate::builtin::human_bytes;
use crate::declaration::{Access, ApprovalRequirement, Effect, EvidenceCapture, Idempotency, ToolDeclaration};
use crate::error::ToolError;
use crate::schema::{decode_arguments, schema_for};
use crate::tool::{Tool, ToolContext, ToolOutput};
use futures::FutureExt;
use futures::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Bytes of a body read when the call gives no `max_bytes`, and the most it may ask for.
const DEFAULT_MAX_BYTES: usize = 1024 * 1024;
/// How long one fetch may take, from connecting to the last byte.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes inspected to tell text from binary content of an unknown type.
const SNIFF: usize = 8 * 1024;
/// Characters of an error page shown with a failed status.
const ERROR_SNIPPET_CHARS: usize = 300;
/// What the tool does, for the model.
const DESCRIPTION: &str = "Fetch a web page (HTTP GET) and return its title and readable text; HTML is reduced to text, \
     plain text and JSON are returned as they are. Only http and https URLs. Long pages are cut: the output says so.";
/// Added to [`DESCRIPTION`] while private addresses are refused, so the model does not try them.
const PUBLIC_ONLY: &str = " Only public internet addresses: localhost, private networks (10.x, 192.168.x, …), \
     link-local and cloud metadata addresses are refused, directly or through a redirect.";

/// Arguments of `web.fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// The absolute http:// or https:// URL to fetch.
    pub url: String,
    /// The most bytes of the response body to read; the rest is not fetched. Defaults to, and may not exceed, the tool's limit (1 MiB unless configured otherwise).
    pub max_bytes: Option<u64>,
}

/// The `web.fetch` tool: an HTTP(S) GET of one URL, returning the page's title and its
/// text (HTML reduced to what a person reads; plain text, JSON and XML as they are).
///
/// Only `http` and `https` URLs are fetched, without credentials in the URL; the body is
/// read up to [`WebFetchTool::max_bytes`] (default 1 MiB) and the output says when it was
/// cut; the whole fetch is stopped after [`WebFetchTool::timeout`] (default 20 s);
/// redirects are followed at most five times; binary content is refused. It needs
/// network access to the URL's host ([`Access::Network`] on `url`).
///
/// It connects only to public internet addresses: a URL whose host is, or resolves to, a
/// loopback, private, link-local (cloud metadata), shared, multicast, documentation or
/// other special-purpose address (in IPv4 or IPv6, the IPv6 forms of IPv4 addresses too)
/// is refused with [`ToolError::Denied`] before anything is sent, and so is a redirect
/// that leads to one. The addresses checked are those the connection is made to, so a
/// name cannot resolve to a public address for the check and a private one after. The
/// environment's proxy settings are not used (a proxy would resolve names where the check
/// cannot see). [`WebFetchTool::allow_private_addresses`] lifts all of this.
#[derive(Clone, Debug)]
pub struct WebFetchTool {
    declaration: ToolDeclaration,
    client: Result<reqwest::Client, String>,
    max_bytes: usize,
    timeout: Duration,
    private_addresses: bool,
}

impl Default for WebFetchTool {
    fn default() -> Self {
        WebFetchTool::new()
    }
}

impl WebFetchTool {
    /// The tool with its defaults: 1 MiB per body, 20 s per fetch, public addresses only.
    pub fn new() -> Self {
        let mut declaration = ToolDeclaration::new(
            "web.fetch",
            format!("{DESCRIPTION}{PUBLIC_ONLY}"),
            schema_for::<WebFetchArgs>(),
            Effect::ReadOnly,
        )
        .with_access(vec![Access::network("url")]);
        declaration.idempotency = Idempotency::Idempotent;
        declaration.evidence = EvidenceCapture::Summary;
        declaration.approval = ApprovalRequirement::Derived;
        let mut tool = WebFetchTool {
            declaration,
            client: build_client(Reach::PublicOnly),
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: DEFAULT_TIMEOUT,
            private_addresses: false,
        };
        tool.set_backstop();
        tool
    }

    /// The most bytes of a body read (at least 1), and so the largest `max_bytes` a call
    /// may ask for.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// How long one fetch may take in all.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.set_backstop();
        self
    }

    /// Whether the tool may fetch private and local addresses (`localhost`, the local
    /// network, cloud metadata services, …); off by default. Turn it on only where the
    /// agent is trusted with everything the machine running troupe can reach: with it, a
    /// page the agent reads can steer it to those addresses, which are then fetched
    /// without asking anyone like any other URL. It also lets redirects go anywhere and
    /// uses the environment's proxy settings (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`).
    pub fn allow_private_addresses(mut self, allow: bool) -> Self {
        self.private_addresses = allow;
        self.client = build_client(if allow { Reach::Anywhere } else { Reach::PublicOnly });
        self.declaration.description =
            if allow { DESCRIPTION.to_owned() } else { format!("{DESCRIPTION}{PUBLIC_ONLY}") };
        self
    }

    /// The catalog's own limit, a little above the tool's, in case something outside the
    /// tool's timer hangs.
    fn set_backstop(&mut self) {
        self.declaration.timeout = Some(self.timeout + Duration::from_secs(5));
    }

    async fn run(&self, args: WebFetchArgs) -> Result<ToolOutput, ToolError> {
        let url = parse_web_url(&args.url)?;
        let limit = match args.max_bytes {
            Some(0) => return Err(ToolError::invalid_arguments("`max_bytes` must be at least 1")),
            Some(asked) => usize::try_from(asked).unwrap_or(usize::MAX).min(self.max_bytes),
            None => self.max_bytes,
        };
        if !self.private_addresses {
            // An address written in the URL is connected to without resolving, so the
            // resolver's check never sees it.
            guard::check_url(&url)?;
        }
        let client = self
            .client
            .as_ref()
            .map_err(|error| ToolError::failed(format!("web.fetch cannot make HTTP requests here: {error}")))?;
        let exchange = async {
            let response = client
                .get(url.clone())
                .header(ACCEPT, "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5")
                .send()
                .await?;
            let status = response.status();
            let final_url = response.url().clone();
            let content_type =
                response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(str::to_owned);
            let (body, truncated) = read_capped(response, limit).await?;
            Ok::<_, reqwest::Error>(Fetched { status, final_url, content_type, body, truncated })
        };
        let fetched = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => return Err(ToolError::Timeout { after: self.timeout }),
            Ok(Err(error)) => {
                if let Some(refused) = guard::refusal_in(&error) {
                    return Err(refused.clone().into());
                }
                return Err(ToolError::failed(format!("could not fetch `{url}`: {}", describe_error(error))));
            }
            Ok(Ok(fetched)) => fetched,
        };
        render(&url, limit, fetched)
    }
}

/// A refused URL is a policy's refusal, which the model should not retry.
impl From<Refused> for ToolError {
    fn from(refused: Refused) -> Self {
        ToolError::Denied { reason: refused.to_string() }
    }
}

/// What a GET brought back.
struct Fetched {
    status: reqwest::StatusCode,
    final_url: Url,
    content_type: Option<String>,
    body: Vec<u8>,
    truncated: bool,
}

/// How a body is shown.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
}

/// `given` as a URL web.fetch may fetch.
fn parse_web_url(given: &str) -> Result<Url, ToolError> {
    let url = Url::parse(given.trim()).map_err(|error| {
        ToolError::invalid_arguments(format!(
            "`{given}` is not a valid URL ({error}); give an absolute http:// or https:// URL"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::invalid_arguments(format!(
            "only http and https URLs can be fetched, not `{}:` URLs",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ToolError::invalid_arguments(format!("`{given}` has no host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ToolError::invalid_arguments(
            "URLs with a user name or password in them are not fetched; remove the credentials",
        ));
    }
    Ok(url)
}

fn classify(content_type: Option<&str>, body: &[u8]) -> Kind {
    let essence =
        content_type.map(|ct| ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()).unwrap_or_default();
    if essence.contains("html") {
        return Kind::Html;
    }
    let textual = essence.starts_with("text/")
        || ["json", "xml", "javascript", "yaml", "toml", "csv"].iter().any(|t| essence.contains(t));
    if textual {
        return Kind::Text;
    }
    if !(essence.is_empty() || essence == "application/octet-stream") {
        return Kind::Binary;
    }
    // No declared type (or the generic one): look at the bytes.
    let head = &body[..body.len().min(SNIFF)];
    if head.contains(&0) {
        return Kind::Binary;
    }
    let start = String::from_utf8_lossy(&head[..head.len().min(512)]).trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") { Kind::Html } else { Kind::Text }
}

fn render(url: &Url, limit: usize, fetched: Fetched) -> Result<ToolOutput, ToolError> {
    let Fetched { status, final_url, content_type, body, truncated } = fetched;
    let kind = classify(content_type.as_deref(), &body);
    let shown_type = content_type.as_deref().unwrap_or("an unknown type");
    if kind == Kind::Binary && status.is_success() {
        return Err(ToolError::failed(format!(
            "`{url}` is {shown_type} content, not text; web.fetch only returns web pages and text"
        )));
    }
    let raw = String::from_utf8_lossy(&body);
    let (title, text) = match kind {
        Kind::Html => {
            let reduced = html::reduce(&raw);
            (reduced.title, reduced.text)
        }
        Kind::Text | Kind::Binary => (None, raw.replace("\r\n", "\n").trim().to_owned()),
    };
    if !status.is_success() {
        let snippet = if kind == Kind::Binary { String::new() } else { clip(&text, ERROR_SNIPPET_CHARS) };
        let shown = if snippet.is_empty() { String::new() } else { format!(": {snippet}") };
        return Err(ToolError::failed(format!("GET `{url}` returned HTTP {status}{shown}")));
    }
    let mut out = String::new();
    if let Some(title) = &title {
        out.push_str(&format!("Title: {title}\n"));
    }
    if final_url == *url {
        out.push_str(&format!("URL: {url}\n\n"));
    } else {
        out.push_str(&format!("URL: {final_url} (redirected from {url})\n\n"));
    }
    if text.is_empty() {
        out.push_str("(the page has no readable text)\n");
    } else {
        out.push_str(&text);
        out.push('\n');
    }
    if truncated {
        out.push_str(&format!(
            "[content truncated: only the first {} of the response were read]\n",
            human_bytes(limit)
        ));
    }
    let structured = json!({
        "url": url.as_str(),
        "final_url": final_url.as_str(),
        "status": status.as_u16(),
        "content_type": content_type,
        "title": title,
        "bytes": body.len(),
        "truncated": truncated,
    });
    Ok(ToolOutput::text(out).with_structured(structured))
}

impl Tool for WebFetchTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async move {
            let args = decode_arguments::<WebFetchArgs>(&self.declaration.input_schema, args)?;
            self.run(args).await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::super::client_builder;
    use super::*;
    use axum::Router;
    use axum::extract::{Path, State};
    use axum::response::Redirect;
    use axum::routing::get;
    use std::sync::{Arc, Mutex};

    /// Serves redirects on loopback, standing in for a public server: the tool's client is
    /// told that `public.test` is there, which skips the resolver's check for that one
    /// name, as if it were a public address. Returns the tool and the paths requested.
    async fn tool_behind_a_public_name() -> (WebFetchTool, u16, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let port = address.port();
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let router = Router::new()
            .route(
                "/to/{target}",
                get(move |State(log): State<Arc<Mutex<Vec<String>>>>, Path(target): Path<String>| async move {
                    log.lock().expect("log").push(format!("/to/{target}"));
                    let location = match target.as_str() {
                        "literal" => format!("http://127.0.0.1:{port}/secret"),
                        "mapped" => format!("http://[::ffff:127.0.0.1]:{port}/secret"),
                        "decimal" => format!("http://2130706433:{port}/secret"),
                        "metadata" => "http://169.254.169.254/latest/meta-data/".to_owned(),
                        "name" => format!("http://localhost:{port}/secret"),
                        "ftp" => "ftp://public.test/secret".to_owned(),
                        "loop" => "/to/loop".to_owned(),
                        _ => "/page".to_owned(),
                    };
                    Redirect::temporary(&location)
                }),
            )
            .route(
                "/{page}",
                get(|State(log): State<Arc<Mutex<Vec<String>>>>, Path(page): Path<String>| async move {
                    log.lock().expect("log").push(format!("/{page}"));
                    format!("this is {page}")
                }),
            )
            .with_state(Arc::clone(&log));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let client = client_builder(Reach::PublicOnly).resolve("public.test", address).build().map_err(describe_error);
        (WebFetchTool { client, ..WebFetchTool::new().timeout(Duration::from_secs(5)) }, port, log)
    }

    async fn fetch(tool: &WebFetchTool, url: String) -> Result<ToolOutput, ToolError> {
        tool.run(WebFetchArgs { url, max_bytes: None }).await
    }

    #[tokio::test]
    async fn a_redirect_from_a_public_host_to_a_private_address_is_refused() {
        let (tool, port, log) = tool_behind_a_public_name().await;
        // A redirect to an allowed host is followed as before.
        let followed = fetch(&tool, format!("http://public.test:{port}/to/elsewhere")).await.expect("followed");
        assert!(followed.content.contains("this is page"), "{}", followed.content);

        for (target, why) in [
            ("literal", format!("the page redirected to `http://127.0.0.1:{port}/secret`: web.fetch does not fetch private or local addresses: 127.0.0.1 is a loopback address")),
            ("mapped", format!("the page redirected to `http://[::ffff:7f00:1]:{port}/secret`: web.fetch does not fetch private or local addresses: ::ffff:127.0.0.1 is a loopback")),
            ("decimal", format!("the page redirected to `http://127.0.0.1:{port}/secret`")),
            ("metadata", "the page redirected to `http://169.254.169.254/latest/meta-data/`: web.fetch does not fetch private or local addresses: 169.254.169.254 is a link-local".to_owned()),
            // A name is checked by the resolver when the redirect is followed.
            ("name", "`localhost` resolves to".to_owned()),
            ("ftp", "the page redirected to `ftp://public.test/secret`: web.fetch fetches only http and https URLs".to_owned()),
        ] {
            let refused = fetch(&tool, format!("http://public.test:{port}/to/{target}")).await.expect_err(target);
            assert!(
                matches!(&refused, ToolError::Denied { reason } if reason.contains(&why)),
                "{target}: {refused}"
            );
        }
        let requested = log.lock().expect("log").clone();
        assert_eq!(
            requested,
            [
                "/to/elsewhere",
                "/page",
                "/to/literal",
                "/to/mapped",
                "/to/decimal",
                "/to/metadata",
                "/to/name",
                "/to/ftp"
            ]
        );

        // The hop limit still holds.
        let endless = fetch(&tool, format!("http://public.test:{port}/to/loop")).await.expect_err("too many");
        assert!(endless.to_string().contains("redirected more than 5 times"), "{endless}");
        assert_eq!(log.lock().expect("log").iter().filter(|path| *path == "/to/loop").count(), 6);
    }

    #[tokio::test]
    async fn with_private_addresses_allowed_redirects_go_anywhere() {
        let (_, port, log) = tool_behind_a_public_name().await;
        let tool = WebFetchTool::new().allow_private_addresses(true);
        let output = fetch(&tool, format!("http://127.0.0.1:{port}/to/literal")).await.expect("followed");
        assert!(output.content.contains("this is secret"), "{}", output.content);
        assert_eq!(log.lock().expect("log").as_slice(), ["/to/literal", "/secret"]);
    }

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(parse_web_url("https://example.com/a?b").is_ok());
        for bad in ["file:///etc/passwd", "ftp://example.com/", "javascript:alert(1)", "example.com", "http://u:p@h/"] {
            assert!(matches!(parse_web_url(bad), Err(ToolError::InvalidArguments { .. })), "{bad}");
        }
    }

    #[test]
    fn content_is_classified_by_type_then_by_sniffing() {
        assert_eq!(classify(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(classify(Some("application/json"), b"{}"), Kind::Text);
        assert_eq!(classify(Some("image/png"), b"\x89PNG"), Kind::Binary);
        assert_eq!(classify(None, b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(classify(None, b"plain words"), Kind::Text);
        assert_eq!(classify(Some("application/octet-stream"), b"a\0b"), Kind::Binary);
    }
}
