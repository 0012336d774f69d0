//! Which IP addresses are on the public internet.
//!
//! `web.fetch` runs in troupe's own process, which can reach what a web page cannot: the
//! machine itself, the local network, a cloud provider's metadata service. This module
//! names the address ranges that lead there (IANA's special-purpose registries, as
//! `std`'s still unstable `is_global` reads them, plus multicast and the IPv6 forms that
//! embed an IPv4 address) so the tool can refuse them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not a public unicast address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `0.0.0.0` or `::`: connecting to it reaches the machine itself.
    Unspecified,
    /// `0.0.0.0/8`, "this network".
    ThisNetwork,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT.
    SharedNat,
    /// `169.254.0.0/16` (where cloud metadata services answer), `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`, IPv6's private networks.
    UniqueLocal,
    /// `fec0::/10`, deprecated but still routed inside some networks.
    SiteLocal,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`, for benchmarking networks.
    Benchmarking,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240.0.0.0/4`, reserved for future use.
    Reserved,
    /// IETF protocol and transition ranges (`192.0.0.0/24`, `2001::/23`, `100::/64`,
    /// `64:ff9b:1::/48`, 6to4 `2002::/16`, IPv4-compatible `::/96`): not destinations a
    /// web page lives at, and some are translated to addresses the check cannot see.
    SpecialPurpose,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Unspecified => "the unspecified address (the machine itself)",
            Scope::ThisNetwork => "a \"this network\" address",
            Scope::Loopback => "a loopback address (the machine itself)",
            Scope::Private => "a private network address",
            Scope::SharedNat => "a shared (carrier-grade NAT) address",
            Scope::LinkLocal => "a link-local address (such as a cloud metadata service)",
            Scope::UniqueLocal => "a unique local (private) IPv6 address",
            Scope::SiteLocal => "a site-local IPv6 address",
            Scope::Documentation => "a documentation address",
            Scope::Benchmarking => "a benchmarking address",
            Scope::Multicast => "a multicast address",
            Scope::Broadcast => "the broadcast address",
            Scope::Reserved => "a reserved address",
            Scope::SpecialPurpose => "a special-purpose address",
        })
    }
}

/// Why `address` is not a public unicast address, or `None` when it is one.
pub(crate) fn non_public(address: IpAddr) -> Option<Scope> {
    match address {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(address: Ipv4Addr) -> Option<Scope> {
    let [a, b, c, d] = address.octets();
    let scope = if address.is_unspecified() {
        Scope::Unspecified
    } else if a == 0 {
        Scope::ThisNetwork
    } else if address.is_loopback() {
        Scope::Loopback
    } else if address.is_private() {
        Scope::Private
    } else if a == 100 && (b & 0b1100_0000) == 64 {
        Scope::SharedNat
    } else if address.is_link_local() {
        Scope::LinkLocal
    } else if address.is_documentation() {
        Scope::Documentation
    } else if a == 198 && (b & 0xfe) == 18 {
        Scope::Benchmarking
    } else if address.is_multicast() {
        Scope::Multicast
    } else if address.is_broadcast() {
        Scope::Broadcast
    } else if a >= 240 {
        Scope::Reserved
    } else if (a, b, c) == (192, 0, 0) && !matches!(d, 9 | 10) {
        // 192.0.0.9 and .10 are anycast services IANA lists as globally reachable.
        Scope::SpecialPurpose
    } else {
        return None;
    };
    Some(scope)
}

fn non_public_v6(address: Ipv6Addr) -> Option<Scope> {
    let segments = address.segments();
    if address.is_unspecified() {
        return Some(Scope::Unspecified);
    }
    if address.is_loopback() {
        return Some(Scope::Loopback);
    }
    // Forms that carry an IPv4 address lead where that address leads: `::ffff:a.b.c.d`
    // is a dual-stack socket's way to reach it, and `64:ff9b::a.b.c.d` a NAT64 gateway's
    // (an IPv6-only network reaches every IPv4 site so). The deprecated IPv4-compatible
    // `::a.b.c.d` is refused even for a public address: nothing should resolve to it.
    if let Some(v4) = address.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    if let [0x64, 0xff9b, 0, 0, 0, 0, high, low] = segments {
        return non_public_v4(embedded_v4(high, low));
    }
    if let [0, 0, 0, 0, 0, 0, high, low] = segments {
        return Some(non_public_v4(embedded_v4(high, low)).unwrap_or(Scope::SpecialPurpose));
    }
    let scope = if address.is_multicast() {
        Scope::Multicast
    } else if address.is_unicast_link_local() {
        Scope::LinkLocal
    } else if address.is_unique_local() {
        Scope::UniqueLocal
    } else if segments[0] & 0xffc0 == 0xfec0 {
        Scope::SiteLocal
    } else if (segments[0] == 0x2001 && segments[1] == 0xdb8) || (segments[0] == 0x3fff && segments[1] < 0x1000) {
        Scope::Documentation
    } else if is_special_purpose_v6(segments) {
        Scope::SpecialPurpose
    } else {
        return None;
    };
    Some(scope)
}

/// `2001::/23` (less the anycast and overlay blocks IANA lists as globally reachable),
/// `100::/64`, `64:ff9b:1::/48` and 6to4's `2002::/16`.
fn is_special_purpose_v6(segments: [u16; 8]) -> bool {
    match segments {
        [0x2001, b, ..] if b < 0x200 => {
            let global = matches!(segments, [0x2001, 1, 0, 0, 0, 0, 0, 1 | 2])
                || b == 3
                || matches!(segments, [0x2001, 4, 0x112, ..])
                || (0x20..=0x3f).contains(&b);
            !global
        }
        [0x100, 0, 0, 0, ..] | [0x64, 0xff9b, 1, ..] | [0x2002, ..] => true,
        _ => false,
    }
}

fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(text: &str) -> Option<Scope> {
        non_public(text.parse().expect("an address"))
    }

    #[test]
    fn public_unicast_addresses_pass() {
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.0.9",
            "192.0.0.10",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:4860:4860::8888",
            "2001:1::1",
            "2001:3::1",
            "2001:4:112::1",
            "2001:20::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(scope(public), None, "{public}");
        }
    }

    #[test]
    fn every_non_public_ipv4_range_is_named() {
        for (address, expected) in [
            ("0.0.0.0", Scope::Unspecified),
            ("0.1.2.3", Scope::ThisNetwork),
            ("0.255.255.255", Scope::ThisNetwork),
            ("127.0.0.1", Scope::Loopback),
            ("127.255.255.254", Scope::Loopback),
            ("10.0.0.1", Scope::Private),
            ("10.255.255.255", Scope::Private),
            ("172.16.0.1", Scope::Private),
            ("172.31.255.255", Scope::Private),
            ("192.168.1.1", Scope::Private),
            ("100.64.0.1", Scope::SharedNat),
            ("100.127.255.255", Scope::SharedNat),
            ("169.254.169.254", Scope::LinkLocal),
            ("169.254.0.1", Scope::LinkLocal),
            ("192.0.2.1", Scope::Documentation),
            ("198.51.100.7", Scope::Documentation),
            ("203.0.113.9", Scope::Documentation),
            ("198.18.0.1", Scope::Benchmarking),
            ("198.19.255.255", Scope::Benchmarking),
            ("224.0.0.1", Scope::Multicast),
            ("239.255.255.250", Scope::Multicast),
            ("255.255.255.255", Scope::Broadcast),
            ("240.0.0.1", Scope::Reserved),
            ("255.255.255.254", Scope::Reserved),
            ("192.0.0.1", Scope::SpecialPurpose),
            ("192.0.0.170", Scope::SpecialPurpose),
        ] {
            assert_eq!(scope(address), Some(expected), "{address}");
        }
    }

    #[test]
    fn every_non_public_ipv6_range_is_named() {
        for (address, expected) in [
            ("::", Scope::Unspecified),
            ("::1", Scope::Loopback),
            ("fe80::1", Scope::LinkLocal),
            ("febf:ffff::1", Scope::LinkLocal),
            ("fc00::1", Scope::UniqueLocal),
            ("fd12:3456::1", Scope::UniqueLocal),
            ("fec0::1", Scope::SiteLocal),
            ("ff02::1", Scope::Multicast),
            ("ff0e::1", Scope::Multicast),
            ("2001:db8::1", Scope::Documentation),
            ("3fff:fff::1", Scope::Documentation),
            ("2001::1", Scope::SpecialPurpose),
            ("2001:2::1", Scope::SpecialPurpose),
            ("2001:1::3", Scope::SpecialPurpose),
            ("100::1", Scope::SpecialPurpose),
            ("64:ff9b:1::1", Scope::SpecialPurpose),
            ("2002:7f00:1::1", Scope::SpecialPurpose),
            ("2002:808:808::1", Scope::SpecialPurpose),
        ] {
            assert_eq!(scope(address), Some(expected), "{address}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_by_the_ipv4_address() {
        for (address, expected) in [
            // IPv4-mapped.
            ("::ffff:127.0.0.1", Scope::Loopback),
            ("::ffff:7f00:1", Scope::Loopback),
            ("::ffff:169.254.169.254", Scope::LinkLocal),
            ("::ffff:10.1.2.3", Scope::Private),
            ("::ffff:0.0.0.0", Scope::Unspecified),
            ("::ffff:100.64.0.1", Scope::SharedNat),
            // NAT64's well-known prefix.
            ("64:ff9b::127.0.0.1", Scope::Loopback),
            ("64:ff9b::192.168.0.1", Scope::Private),
            ("64:ff9b::a9fe:a9fe", Scope::LinkLocal),
            // IPv4-compatible (deprecated): refused even for a public address.
            ("::127.0.0.1", Scope::Loopback),
            ("::10.0.0.1", Scope::Private),
            ("::8.8.8.8", Scope::SpecialPurpose),
        ] {
            assert_eq!(scope(address), Some(expected), "{address}");
        }
    }

    #[test]
    fn scopes_read_as_a_reason() {
        assert_eq!(Scope::Loopback.to_string(), "a loopback address (the machine itself)");
        assert!(Scope::LinkLocal.to_string().contains("metadata"));
    }
}
