//! `web.search`: a web search over a configured backend (SearXNG, Brave or Tavily).

use super::{Reach, build_client, clip, describe_error, html, read_capped};
use crate::declaration::{Access, ApprovalRequirement, Effect, EvidenceCapture, Idempotency, ToolDeclaration};
use crate::error::ToolError;
use crate::schema::{decode_arguments, schema_for};
use crate::tool::{Tool, ToolContext, ToolOutput};
use futures::FutureExt;
use futures::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt;
use std::time::Duration;

/// Results returned when the call gives no `max_results`.
const DEFAULT_RESULTS: u64 = 5;
/// The most results a call may ask for (Brave's and Tavily's own limit).
const MAX_RESULTS: u64 = 20;
/// How long one search may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes of a backend's response read at most.
const RESPONSE_LIMIT: usize = 4 * 1024 * 1024;
/// Characters of a result's snippet shown.
const SNIPPET_CHARS: usize = 500;

/// Where `web.search` sends queries. API keys are read from the named environment
/// variable at each call (or given with [`WebSearchTool::api_key`]), never stored here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SearchBackend {
    /// A SearXNG instance: `GET {base_url}/search?q=…&format=json` (the instance must
    /// allow the `json` format).
    #[serde(rename = "searxng")]
    SearXng {
        /// The instance's address, e.g. `http://localhost:8080`.
        base_url: String,
    },
    /// The Brave Search API: `GET {base_url}?q=…&count=…` with the key in
    /// `X-Subscription-Token`.
    Brave {
        /// The environment variable holding the API key (default `BRAVE_API_KEY`).
        #[serde(default = "brave_key_env")]
        api_key_env: String,
        /// The endpoint (default `https://api.search.brave.com/res/v1/web/search`).
        #[serde(default = "brave_url")]
        base_url: String,
    },
    /// The Tavily API: `POST {base_url}` with `{"query", "max_results"}` and
    /// `Authorization: Bearer KEY`.
    Tavily {
        /// The environment variable holding the API key (default `TAVILY_API_KEY`).
        #[serde(default = "tavily_key_env")]
        api_key_env: String,
        /// The endpoint (default `https://api.tavily.com/search`).
        #[serde(default = "tavily_url")]
        base_url: String,
    },
}

fn brave_key_env() -> String {
    SearchBackend::BRAVE_API_KEY_ENV.to_owned()
}
fn brave_url() -> String {
    SearchBackend::BRAVE_URL.to_owned()
}
fn tavily_key_env() -> String {
    SearchBackend::TAVILY_API_KEY_ENV.to_owned()
}
fn tavily_url() -> String {
    SearchBackend::TAVILY_URL.to_owned()
}

impl SearchBackend {
    /// The default environment variable of the Brave API key.
    pub const BRAVE_API_KEY_ENV: &'static str = "BRAVE_API_KEY";
    /// The Brave web search endpoint.
    pub const BRAVE_URL: &'static str = "https://api.search.brave.com/res/v1/web/search";
    /// The default environment variable of the Tavily API key.
    pub const TAVILY_API_KEY_ENV: &'static str = "TAVILY_API_KEY";
    /// The Tavily search endpoint.
    pub const TAVILY_URL: &'static str = "https://api.tavily.com/search";

    /// A SearXNG instance at `base_url`.
    pub fn searxng(base_url: impl Into<String>) -> Self {
        SearchBackend::SearXng { base_url: base_url.into() }
    }

    /// The Brave Search API with its defaults.
    pub fn brave() -> Self {
        SearchBackend::Brave { api_key_env: brave_key_env(), base_url: brave_url() }
    }

    /// The Tavily API with its defaults.
    pub fn tavily() -> Self {
        SearchBackend::Tavily { api_key_env: tavily_key_env(), base_url: tavily_url() }
    }

    /// The same backend at another address (a proxy, a test server).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        match &mut self {
            SearchBackend::SearXng { base_url }
            | SearchBackend::Brave { base_url, .. }
            | SearchBackend::Tavily { base_url, .. } => *base_url = url.into(),
        }
        self
    }

    /// The same backend reading its API key from the environment variable `name`
    /// (SearXNG needs no key and is unchanged).
    pub fn with_api_key_env(mut self, name: impl Into<String>) -> Self {
        if let SearchBackend::Brave { api_key_env, .. } | SearchBackend::Tavily { api_key_env, .. } = &mut self {
            *api_key_env = name.into();
        }
        self
    }

    /// The backend's name: `searxng`, `brave` or `tavily`.
    pub fn name(&self) -> &'static str {
        match self {
            SearchBackend::SearXng { .. } => "searxng",
            SearchBackend::Brave { .. } => "brave",
            SearchBackend::Tavily { .. } => "tavily",
        }
    }

    /// The address queries go to.
    pub fn base_url(&self) -> &str {
        match self {
            SearchBackend::SearXng { base_url }
            | SearchBackend::Brave { base_url, .. }
            | SearchBackend::Tavily { base_url, .. } => base_url,
        }
    }

    /// The environment variable of the API key, for backends that need one.
    pub fn api_key_env(&self) -> Option<&str> {
        match self {
            SearchBackend::SearXng { .. } => None,
            SearchBackend::Brave { api_key_env, .. } | SearchBackend::Tavily { api_key_env, .. } => Some(api_key_env),
        }
    }
}

/// Arguments of `web.search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search the web for.
    pub query: String,
    /// How many results to return (default 5, at most 20).
    pub max_results: Option<u64>,
}

/// An API key: shown nowhere.
#[derive(Clone)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The `web.search` tool: a query to a [`SearchBackend`], answered with a numbered list of
/// titles, URLs and snippets.
///
/// It needs network access to the backend's host ([`Access::NetworkHost`]). The API key
/// never appears in its output, its errors or its `Debug` form.
#[derive(Clone, Debug)]
pub struct WebSearchTool {
    declaration: ToolDeclaration,
    backend: SearchBackend,
    client: Result<reqwest::Client, String>,
    api_key: Option<Secret>,
    timeout: Duration,
}

impl WebSearchTool {
    /// The tool over `backend`, with a 20 s limit per search.
    pub fn new(backend: SearchBackend) -> Self {
        let host = Url::parse(backend.base_url())
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_else(|| backend.base_url().to_owned());
        let mut declaration = ToolDeclaration::new(
            "web.search",
            "Search the web. Returns a numbered list of results, each with its title, URL and a snippet; \
             use web.fetch to read a result.",
            schema_for::<WebSearchArgs>(),
            Effect::ReadOnly,
        )
        .with_access(vec![Access::NetworkHost(host)]);
        declaration.idempotency = Idempotency::Idempotent;
        declaration.evidence = EvidenceCapture::Summary;
        declaration.approval = ApprovalRequirement::Derived;
        declaration.timeout = Some(DEFAULT_TIMEOUT + Duration::from_secs(5));
        WebSearchTool {
            declaration,
            backend,
            client: build_client(Reach::Anywhere),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Uses `key` as the API key instead of reading the backend's environment variable.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Secret(key.into()));
        self
    }

    /// How long one search may take in all.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.declaration.timeout = Some(timeout + Duration::from_secs(5));
        self
    }

    /// The backend searched.
    pub fn backend(&self) -> &SearchBackend {
        &self.backend
    }

    /// The API key, for backends that need one.
    fn key(&self) -> Result<Option<Secret>, ToolError> {
        let Some(variable) = self.backend.api_key_env() else { return Ok(None) };
        if let Some(key) = &self.api_key {
            return Ok(Some(key.clone()));
        }
        match std::env::var(variable) {
            Ok(key) if !key.trim().is_empty() => Ok(Some(Secret(key.trim().to_owned()))),
            _ => Err(ToolError::failed(format!(
                "web.search is not configured: the environment variable {variable} must hold a {} API key",
                self.backend.name()
            ))),
        }
    }

    async fn run(&self, args: WebSearchArgs) -> Result<ToolOutput, ToolError> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolError::invalid_arguments("`query` is empty; say what to search for"));
        }
        let count = match args.max_results {
            Some(0) => return Err(ToolError::invalid_arguments("`max_results` must be at least 1")),
            Some(n) => n.min(MAX_RESULTS),
            None => DEFAULT_RESULTS,
        };
        let key = self.key()?;
        let client = self
            .client
            .as_ref()
            .map_err(|error| ToolError::failed(format!("web.search cannot make HTTP requests here: {error}")))?;
        let request = self.request(client, query, count, key.as_ref())?;
        let backend = self.backend.name();
        let redact = |text: String| match &key {
            Some(Secret(key)) => text.replace(key.as_str(), "[redacted]"),
            None => text,
        };
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let (body, _) = read_capped(response, RESPONSE_LIMIT).await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let (status, body) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => return Err(ToolError::Timeout { after: self.timeout }),
            Ok(Err(error)) => {
                let message = redact(describe_error(error));
                return Err(ToolError::failed(format!("the {backend} search request failed: {message}")));
            }
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            let detail = redact(clip(String::from_utf8_lossy(&body).trim(), 300));
            let hint = match status.as_u16() {
                401 | 403 => match self.backend.api_key_env() {
                    Some(variable) => format!(" (check the API key in {variable})"),
                    None => " (the instance refused the request; it may not allow the json format)".to_owned(),
                },
                429 => " (rate limited: wait before searching again)".to_owned(),
                _ => String::new(),
            };
            return Err(ToolError::failed(format!("the {backend} search returned HTTP {status}{hint}: {detail}")));
        }
        let hits = parse_hits(&self.backend, &body).map_err(|error| {
            ToolError::failed(format!("the {backend} search answered with JSON of an unexpected shape: {error}"))
        })?;
        Ok(render(backend, query, hits.into_iter().take(count as usize).collect()))
    }

    /// The request for `query` in the backend's wire shape.
    fn request(
        &self,
        client: &reqwest::Client,
        query: &str,
        count: u64,
        key: Option<&Secret>,
    ) -> Result<reqwest::RequestBuilder, ToolError> {
        let base = self.backend.base_url();
        let mut url = Url::parse(base)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .ok_or_else(|| ToolError::failed(format!("the search backend's address `{base}` is not an http(s) URL")))?;
        let key = key.map(|Secret(key)| key.as_str()).unwrap_or_default();
        // Marked sensitive so no `Debug` of the request shows it.
        let secret_header = |value: String| {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ToolError::failed(format!(
                    "the {} API key contains characters an HTTP header cannot carry",
                    self.backend.name()
                ))
            })?;
            value.set_sensitive(true);
            Ok::<_, ToolError>(value)
        };
        Ok(match &self.backend {
            SearchBackend::SearXng { .. } => {
                if let Ok(mut segments) = url.path_segments_mut() {
                    segments.pop_if_empty().push("search");
                }
                url.query_pairs_mut().append_pair("q", query).append_pair("format", "json");
                client.get(url).header(ACCEPT, "application/json")
            }
            SearchBackend::Brave { .. } => {
                url.query_pairs_mut().append_pair("q", query).append_pair("count", &count.to_string());
                client
                    .get(url)
                    .header(ACCEPT, "application/json")
                    .header("X-Subscription-Token", secret_header(key.to_owned())?)
            }
            SearchBackend::Tavily { .. } => client
                .post(url)
                .header(ACCEPT, "application/json")
                .header(AUTHORIZATION, secret_header(format!("Bearer {key}"))?)
                .json(&json!({"query": query, "max_results": count})),
        })
    }
}

/// One result as the backends send it (SearXNG and Tavily `content`, Brave `description`).
#[derive(Debug, Deserialize)]
struct Hit {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, alias = "description")]
    content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ResultsBody {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Debug, Deserialize)]
struct BraveBody {
    #[serde(default)]
    web: Option<ResultsBody>,
}

fn parse_hits(backend: &SearchBackend, body: &[u8]) -> Result<Vec<Hit>, serde_json::Error> {
    let hits = match backend {
        SearchBackend::Brave { .. } => serde_json::from_slice::<BraveBody>(body)?.web.map(|w| w.results),
        SearchBackend::SearXng { .. } | SearchBackend::Tavily { .. } => {
            Some(serde_json::from_slice::<ResultsBody>(body)?.results)
        }
    };
    Ok(hits.unwrap_or_default().into_iter().filter(|hit| hit.url.as_deref().is_some_and(|u| !u.is_empty())).collect())
}

fn render(backend: &str, query: &str, hits: Vec<Hit>) -> ToolOutput {
    if hits.is_empty() {
        return ToolOutput::text(format!("No results for `{query}`."))
            .with_structured(json!({"backend": backend, "query": query, "results": []}));
    }
    let mut out = String::new();
    let mut structured = Vec::with_capacity(hits.len());
    for (i, hit) in hits.iter().enumerate() {
        let url = hit.url.as_deref().unwrap_or_default();
        let title = hit.title.as_deref().map(html::inline_text).filter(|t| !t.is_empty());
        let title = title.unwrap_or_else(|| url.to_owned());
        let snippet = clip(&hit.content.as_deref().map(html::inline_text).unwrap_or_default(), SNIPPET_CHARS);
        out.push_str(&format!("{}. {title}\n   {url}\n", i + 1));
        if !snippet.is_empty() {
            out.push_str(&format!("   {snippet}\n"));
        }
        structured.push(json!({"title": title, "url": url, "snippet": snippet}));
    }
    ToolOutput::text(out).with_structured(json!({"backend": backend, "query": query, "results": structured}))
}

impl Tool for WebSearchTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async move {
            let args = decode_arguments::<WebSearchArgs>(&self.declaration.input_schema, args)?;
            self.run(args).await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_deserialize_with_vendor_defaults() {
        let brave: SearchBackend = serde_json::from_value(json!({"kind": "brave"})).expect("parses");
        assert_eq!(brave, SearchBackend::brave());
        let searx: SearchBackend =
            serde_json::from_value(json!({"kind": "searxng", "base_url": "http://localhost:8080"})).expect("parses");
        assert_eq!(searx.base_url(), "http://localhost:8080");
        assert_eq!(SearchBackend::tavily().api_key_env(), Some("TAVILY_API_KEY"));
    }

    #[test]
    fn the_api_key_is_not_in_debug_output() {
        let tool = WebSearchTool::new(SearchBackend::brave()).api_key("sk-very-secret");
        let shown = format!("{tool:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
