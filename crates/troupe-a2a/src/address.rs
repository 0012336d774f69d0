//! [`agent_url`]: whether a text can be where a remote agent is found, before anything is
//! sent there.

/// Why a text is not a remote agent's URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentUrlError {
    /// It does not parse as a URL.
    #[error("`{text}` is not a URL ({reason}); write the agent's base URL, such as \"https://agents.example/\"")]
    Unparsable {
        /// The text.
        text: String,
        /// What the parser said.
        reason: String,
    },
    /// Its scheme is not `http` or `https`.
    #[error("`{text}` is not an http or https URL; A2A agents are reached over HTTP")]
    Scheme {
        /// The text.
        text: String,
    },
    /// It carries a user name or password, which would sit in a file in clear.
    #[error(
        "the URL of a remote agent must not hold credentials; give its token through the environment instead \
         (`bearer_env`)"
    )]
    Credentials,
}

/// Checks that `text` is an `http` or `https` URL with a host and no credentials: the
/// agent's base URL (its card is then under `/.well-known/agent-card.json`) or its card's
/// URL.
///
/// ```
/// use troupe_a2a::agent_url;
///
/// assert!(agent_url("https://agents.example/reviewer").is_ok());
/// assert!(agent_url("ftp://agents.example/").is_err());
/// assert!(agent_url("https://me:secret@agents.example/").unwrap_err().to_string().contains("bearer_env"));
/// ```
pub fn agent_url(text: &str) -> Result<reqwest::Url, AgentUrlError> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| AgentUrlError::Unparsable { text: text.to_owned(), reason: e.to_string() })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(AgentUrlError::Scheme { text: text.to_owned() });
    }
    if !url.has_host() || url.host_str().is_some_and(str::is_empty) {
        return Err(AgentUrlError::Unparsable { text: text.to_owned(), reason: "no host".to_owned() });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(AgentUrlError::Credentials);
    }
    Ok(url)
}
