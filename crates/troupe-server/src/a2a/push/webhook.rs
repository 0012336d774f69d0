//! A webhook as the server calls it: a config checked on arrival (an http(s) URL the
//! server can connect to, headers it can send), and one delivery of an update, retried
//! with backoff.

use super::config::TaskPushNotificationConfig;
use crate::a2a::rpc::RpcError;
use crate::ids::checked_id;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the check at creation waits to connect to the webhook.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one delivery attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times an update is tried before it is given up (the first try and the
/// retries).
pub const ATTEMPTS: u32 = 5;
/// The wait before the first retry; each next one waits twice as long.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The header carrying the config's token.
pub const TOKEN_HEADER: &str = "x-a2a-notification-token";

/// `url` as it may be shown in errors and logs: without user info, query or fragment
/// (where secrets travel in URLs).
pub fn shown_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// A config the server accepted: its URL parsed and its headers ready.
#[derive(Clone)]
pub struct Webhook {
    config: TaskPushNotificationConfig,
    url: Url,
    headers: HeaderMap,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config's Debug hides its secrets; the headers carry them, so they are left out.
        f.debug_struct("Webhook").field("config", &self.config).finish_non_exhaustive()
    }
}

fn header_value(what: &str, value: &str) -> Result<HeaderValue, RpcError> {
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| RpcError::invalid_params(format!("the push config's {what} is not a valid HTTP header value")))?;
    value.set_sensitive(true);
    Ok(value)
}

impl Webhook {
    /// Checks `config`'s fields (not its task, nor whether its URL answers).
    pub fn parse(mut config: TaskPushNotificationConfig) -> Result<Webhook, RpcError> {
        if config.url.trim().is_empty() {
            return Err(RpcError::invalid_params("the push config has no `url`"));
        }
        let url = Url::parse(config.url.trim()).map_err(|e| {
            RpcError::invalid_params(format!("the push config's url {} is not a URL: {e}", shown_url(&config.url)))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(RpcError::invalid_params(format!(
                "the push config's url {} is not http or https",
                shown_url(url.as_str())
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(RpcError::invalid_params(format!(
                "the push config's url {} carries credentials; give them as `authentication` instead",
                shown_url(url.as_str())
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(RpcError::invalid_params(format!(
                "the push config's url {} names no host",
                shown_url(url.as_str())
            )));
        }
        if !config.id.is_empty() {
            checked_id("push config", &config.id).map_err(|e| RpcError::invalid_params(e.message))?;
        }
        let mut headers = HeaderMap::new();
        if let Some(token) = config.token.as_deref().filter(|t| !t.is_empty()) {
            headers.insert(TOKEN_HEADER, header_value("token", token)?);
        }
        if let Some(auth) = &config.authentication {
            let scheme = auth.scheme.trim();
            let credentials = auth.credentials.as_deref().unwrap_or_default();
            match (scheme.is_empty(), credentials.is_empty()) {
                (true, true) => {}
                (false, false) => {
                    if !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "-._~+".contains(c)) {
                        return Err(RpcError::invalid_params(
                            "the push config's authentication scheme is not an HTTP scheme name (like `Bearer`)",
                        ));
                    }
                    let value = header_value("authentication", &format!("{scheme} {credentials}"))?;
                    headers.insert(AUTHORIZATION, value);
                }
                (false, true) => {
                    return Err(RpcError::invalid_params(format!(
                        "the push config's authentication names the scheme `{scheme}` but no credentials"
                    )));
                }
                (true, false) => {
                    return Err(RpcError::invalid_params(
                        "the push config's authentication has credentials but no scheme",
                    ));
                }
            }
        }
        config.url = url.to_string();
        Ok(Webhook { config, url, headers })
    }

    /// Checks the server can connect to the webhook (within [`REACH_TIMEOUT`]).
    pub async fn check_reachable(&self) -> Result<(), RpcError> {
        let host = self.url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = self.url.port_or_known_default().unwrap_or(80);
        let connect = tokio::net::TcpStream::connect((host.as_str(), port));
        let why = match tokio::time::timeout(REACH_TIMEOUT, connect).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no connection within {} s", REACH_TIMEOUT.as_secs()),
        };
        Err(RpcError::invalid_params(format!(
            "the push config's url {} cannot be reached ({why}); give a webhook this server can connect to",
            shown_url(self.url.as_str())
        )))
    }

    /// The config (with its secrets: redact it before answering).
    pub fn config(&self) -> &TaskPushNotificationConfig {
        &self.config
    }

    /// The config for task `task_id`; without an id of its own, its id is the task's (as
    /// the reference server does: a client that sends its config with every message sets
    /// one webhook, not one per message).
    pub fn for_task(mut self, task_id: &str) -> Webhook {
        task_id.clone_into(&mut self.config.task_id);
        if self.config.id.is_empty() {
            task_id.clone_into(&mut self.config.id);
        }
        self
    }

    /// POSTs `body`, retried with backoff on a failure (no connection, a timeout, a
    /// status other than 2xx) up to [`ATTEMPTS`] times in all, until `stop`. Whether it
    /// was delivered.
    pub async fn deliver(&self, http: &reqwest::Client, body: &Value, stop: &CancellationToken) -> bool {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let sent = http
                .post(self.url.clone())
                .headers(self.headers.clone())
                .timeout(ATTEMPT_TIMEOUT)
                .json(body)
                .send()
                .await;
            let why = match sent {
                Ok(response) if response.status().is_success() => return true,
                Ok(response) => format!("answered {}", response.status()),
                // Without the URL: it may carry secrets.
                Err(error) => error.without_url().to_string(),
            };
            tracing::warn!(
                task = %self.config.task_id,
                webhook = %shown_url(self.url.as_str()),
                attempt,
                error = %why,
                "a push notification was not delivered"
            );
            if attempt == ATTEMPTS {
                break;
            }
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff *= 2;
        }
        tracing::warn!(
            task = %self.config.task_id,
            webhook = %shown_url(self.url.as_str()),
            "a push notification was given up after {ATTEMPTS} attempts"
        );
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::push::config::AuthenticationInfo;

    fn config(url: &str) -> TaskPushNotificationConfig {
        TaskPushNotificationConfig { url: url.into(), ..TaskPushNotificationConfig::default() }
    }

    #[test]
    fn only_http_urls_with_a_host_and_sendable_headers_are_accepted() {
        for bad in ["", "not a url", "ftp://h/x", "file:///etc/passwd", "http://", "https://u:pw@h/in"] {
            let error = Webhook::parse(config(bad)).expect_err(bad);
            assert_eq!(error.code, crate::a2a::rpc::INVALID_PARAMS, "{bad}");
        }
        let hook = Webhook::parse(config("http://127.0.0.1:9/in")).expect("accepted").for_task("run_1");
        assert_eq!(hook.config().id, "run_1", "without an id, the task's");
        let mut with_auth = config("https://h/in");
        with_auth.authentication = Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: None });
        assert!(Webhook::parse(with_auth.clone()).expect_err("no credentials").message.contains("Bearer"));
        with_auth.authentication =
            Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: Some("a\nb".into()) });
        let error = Webhook::parse(with_auth).expect_err("a header cannot carry a newline");
        let userinfo = Webhook::parse(config("https://u:s3cret@h/in")).expect_err("credentials in the URL");
        assert!(!userinfo.message.contains("s3cret") && userinfo.message.contains("authentication"));
        assert!(!error.message.contains("a\nb"), "{}", error.message);
        let mut bad_token = config("https://h/in");
        bad_token.token = Some("line\r\nbreak".into());
        assert!(Webhook::parse(bad_token).is_err());
    }

    #[test]
    fn shown_urls_lose_their_secrets() {
        assert_eq!(shown_url("https://u:p@h.example/in?key=s#f"), "https://h.example/in");
        assert_eq!(shown_url("::"), "(not a URL)");
    }
}
