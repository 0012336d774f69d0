//! Keeping `web.fetch` on the public internet (against server-side request forgery).
//!
//! A URL's host is checked where its address becomes known: an address written in the
//! URL before the request is sent ([`check_url`]), a name when it is resolved
//! ([`PublicResolver`], the client's own resolver, so the addresses checked are the ones
//! connected to and a name cannot resolve one way for a check and another for the
//! connection), and every redirect's target again ([`redirect_policy`]).

use super::address::{Scope, non_public};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Attempt, Policy};
use std::error::Error;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Why `web.fetch` will not request a URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The host is, or resolves to, an address off the public internet.
    #[error("web.fetch does not fetch private or local addresses: {}, and only public internet addresses are fetched", Named::of(.host, .address, .scope))]
    NotPublic {
        /// The host's name, when it was a name that resolved to `address`.
        host: Option<String>,
        /// The address refused.
        address: IpAddr,
        /// What kind of address it is.
        scope: Scope,
    },
    /// The URL is neither `http` nor `https`.
    #[error("web.fetch fetches only http and https URLs")]
    Scheme,
    /// A redirect leads to a URL refused for `refused`.
    #[error("the page redirected to `{to}`: {refused}")]
    Redirect {
        /// Where the redirect led.
        to: String,
        /// Why that URL was refused.
        refused: Box<Refused>,
    },
}

/// "`name` resolves to ADDRESS, SCOPE", or "ADDRESS is SCOPE" for an address written as such.
struct Named<'a> {
    host: Option<&'a str>,
    address: IpAddr,
    scope: Scope,
}

impl<'a> Named<'a> {
    fn of(host: &'a Option<String>, address: &IpAddr, scope: &Scope) -> Self {
        Named { host: host.as_deref(), address: *address, scope: *scope }
    }
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Named { host, address, scope } = self;
        match host {
            Some(host) => write!(f, "`{host}` resolves to {address}, {scope}"),
            None => write!(f, "{address} is {scope}"),
        }
    }
}

/// `Ok` when `url` may be requested as far as can be told before resolving it: an `http`
/// or `https` URL whose host, when written as an IP address, is a public one. A named
/// host is checked by [`PublicResolver`] when the request resolves it.
pub(crate) fn check_url(url: &Url) -> Result<(), Refused> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused::Scheme);
    }
    // The URL parser has already turned `2130706433`, `0x7f000001` and `127.1` into the
    // address they stand for; an IPv6 address comes in brackets.
    let host = url.host_str().unwrap_or_default();
    let literal = host.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')).unwrap_or(host);
    match literal.parse::<IpAddr>() {
        Ok(address) => check_address(None, address),
        Err(_) => Ok(()),
    }
}

/// `Ok` when every one of `addresses` (what `host` resolved to) is public. One private
/// address among public ones refuses the name: it can lead to either.
pub(crate) fn check_resolved(host: &str, addresses: &[SocketAddr]) -> Result<(), Refused> {
    addresses.iter().try_for_each(|socket| check_address(Some(host), socket.ip()))
}

fn check_address(host: Option<&str>, address: IpAddr) -> Result<(), Refused> {
    match non_public(address) {
        None => Ok(()),
        Some(scope) => Err(Refused::NotPublic { host: host.map(str::to_owned), address, scope }),
    }
}

/// The system resolver, refusing a name when any address it resolves to is not public.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PublicResolver;

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port (or the scheme's) in its place.
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            check_resolved(&host, &addresses)?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// Follows at most `max` redirects, each to a URL [`check_url`] accepts (its host, when a
/// name, then goes through [`PublicResolver`] like the first one).
pub(crate) fn redirect_policy(max: usize) -> Policy {
    let limited = Policy::limited(max);
    Policy::custom(move |attempt: Attempt<'_>| match check_url(attempt.url()) {
        Ok(()) => limited.redirect(attempt),
        Err(refused) => {
            let to = attempt.url().to_string();
            attempt.error(Refused::Redirect { to, refused: Box::new(refused) })
        }
    })
}

/// The refusal that made a request fail, found among `error`'s causes (the resolver's and
/// the redirect policy's errors reach the caller wrapped in reqwest's and hyper's).
pub(crate) fn refusal_in(error: &reqwest::Error) -> Option<&Refused> {
    let mut cause: Option<&(dyn Error + 'static)> = error.source();
    while let Some(current) = cause {
        if let Some(refused) = current.downcast_ref::<Refused>() {
            return Some(refused);
        }
        cause = current.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    #[test]
    fn addresses_written_in_any_form_are_checked() {
        for private in [
            "http://127.0.0.1:8787/v1/runs",
            "http://169.254.169.254/latest/meta-data/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]:8080/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "https://10.0.0.1/",
            "http://0.0.0.0:8787/",
            "http://[fd00::1]/",
        ] {
            assert!(matches!(check_url(&url(private)), Err(Refused::NotPublic { host: None, .. })), "{private}");
        }
        for public in
            ["https://93.184.216.34/", "http://[2606:4700:4700::1111]/", "https://example.com/", "http://localhost/"]
        {
            // Names (`localhost` too) are left to the resolver, which sees what they lead to.
            assert_eq!(check_url(&url(public)), Ok(()), "{public}");
        }
        assert_eq!(check_url(&url("ftp://example.com/")), Err(Refused::Scheme));
        assert_eq!(check_url(&url("file:///etc/passwd")), Err(Refused::Scheme));
    }

    #[test]
    fn a_name_is_refused_when_any_of_its_addresses_is_not_public() {
        let at = |text: &str| SocketAddr::new(text.parse().expect("an address"), 443);
        assert_eq!(check_resolved("example.com", &[at("93.184.216.34"), at("2606:2800:220:1::")]), Ok(()));
        let mixed = check_resolved("rebind.example", &[at("93.184.216.34"), at("10.0.0.7")]);
        assert_eq!(
            mixed,
            Err(Refused::NotPublic {
                host: Some("rebind.example".into()),
                address: "10.0.0.7".parse().expect("an address"),
                scope: Scope::Private
            })
        );
    }

    #[test]
    fn refusals_say_what_was_refused_and_why() {
        let written = check_url(&url("http://169.254.169.254/latest/meta-data/")).expect_err("refused");
        assert_eq!(
            written.to_string(),
            "web.fetch does not fetch private or local addresses: 169.254.169.254 is a link-local address \
             (such as a cloud metadata service), and only public internet addresses are fetched"
        );
        let named = check_resolved("localhost", &["127.0.0.1:80".parse().expect("an address")]).expect_err("refused");
        assert!(
            named.to_string().contains("`localhost` resolves to 127.0.0.1, a loopback address (the machine itself)"),
            "{named}"
        );
        let hop = Refused::Redirect { to: "http://[::1]/admin".into(), refused: Box::new(written) };
        assert!(
            hop.to_string().starts_with("the page redirected to `http://[::1]/admin`: web.fetch does not"),
            "{hop}"
        );
    }

    #[tokio::test]
    async fn the_resolver_refuses_local_names_and_passes_no_address_on() {
        let name: Name = "localhost".parse().expect("a name");
        let error = match PublicResolver.resolve(name).await {
            Ok(addresses) => panic!("localhost resolved to {:?}", addresses.collect::<Vec<_>>()),
            Err(error) => error,
        };
        let refused = error.downcast_ref::<Refused>().expect("a refusal");
        assert!(
            matches!(refused, Refused::NotPublic { host: Some(host), scope: Scope::Loopback, .. } if host == "localhost"),
            "{refused:?}"
        );
    }
}
