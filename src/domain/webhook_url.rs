//! The webhook URL guard against server-side request forgery (SPEC W5).
//!
//! Every address a webhook may go to is classified ([`classify`]) whatever its spelling: the
//! `url` crate parses hosts the WHATWG way, so `2130706433`, `0x7f.1`, `017700000001`,
//! `0177.0.0.1` and `127.1` all reach us as `127.0.0.1`; IPv6 forms that carry an IPv4 address
//! (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by it.
//!
//! | Class | Addresses | Sandbox | Live |
//! | --- | --- | --- | --- |
//! | loopback | `127/8`, `::1`, `::ffff:127/104`, `localhost`, `*.localhost` | yes (http too) | never |
//! | private | `10/8`, `172.16/12`, `192.168/16`, `100.64/10`, `169.254/16`, `fc00::/7`, `fe80::/10`, `fec0::/10`, `64:ff9b:1::/48` | with `--webhooks-allow-private` | with `--webhooks-allow-private` |
//! | forbidden | `0/8`, `::`, multicast, broadcast, documentation, benchmarking, reserved, `192.0.0/24`, `192.88.99/24`, IPv4-compatible `::/96`, `100::/64`, `2001::/23` (Teredo...), everything outside `2000::/3`, and NAT64 or 6to4 forms of loopback | never | never |
//! | public | the rest | yes | yes |
//!
//! Unspecified addresses are forbidden, not private: connecting to `0.0.0.0` or `::` reaches
//! the local host, which would let the private-network flag open loopback in live mode.
//! A name is checked again once resolved, at creation and at every delivery (the resolver
//! hands the connector only the addresses that passed, so DNS rebinding gains nothing).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::error::{Error, Result};

pub const URL_LEN_MAX: usize = 2048;
/// How long endpoint creation waits for DNS before leaving the check to delivery time.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where webhooks may go (the server's `--webhooks-allow-private`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlPolicy {
    pub allow_private: bool,
}

/// What an address is, for the request forgery guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// This host: sandbox only (local development).
    Loopback,
    /// Private, shared (CGNAT), link-local, unique-local: needs the operator flag.
    Private,
    /// Unspecified, multicast, broadcast, documentation, benchmarking, reserved, translated
    /// loopback: never a receiver.
    Forbidden,
    Public,
}

pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    if a == 127 {
        AddressClass::Loopback
    } else if a == 10
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 169 && b == 254)
        || (a == 100 && (64..128).contains(&b))
    {
        AddressClass::Private
    } else if a == 0
        || a >= 224
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 192 && b == 88 && c == 99)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        AddressClass::Forbidden
    } else {
        AddressClass::Public
    }
}

/// The IPv4 address in the low 32 bits of `s[6..8]` (or `s[1..3]` for 6to4).
fn v4_of(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

/// A translated form (NAT64, 6to4) is judged by the IPv4 address it carries, except that it
/// never counts as loopback: it leads to some gateway's loopback, never a receiver.
fn translated(v4: Ipv4Addr) -> AddressClass {
    match classify_v4(v4) {
        AddressClass::Loopback => AddressClass::Forbidden,
        other => other,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 || (s[0..3] == [0x64, 0xff9b, 1]) {
        // Unique-local, link-local, site-local, local-use NAT64 (RFC 8215).
        AddressClass::Private
    } else if s[0..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        translated(v4_of(s[6], s[7]))
    } else if s[0] == 0x2002 {
        translated(v4_of(s[1], s[2]))
    } else if (s[0] & 0xe000) != 0x2000 // outside global unicast: ::, ::/96, 100::/64, multicast...
        || (s[0] == 0x2001 && s[1] < 0x0200) // 2001::/23: Teredo, benchmarking, ORCHID...
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] & 0xfff0) == 0x3ff0
    // 3fff::/20 (documentation, RFC 9637)
    {
        AddressClass::Forbidden
    } else {
        AddressClass::Public
    }
}

impl UrlPolicy {
    /// Why `ip` may not receive webhooks of a tenant in `live_mode`, or `None` if it may.
    pub fn refusal(&self, ip: IpAddr, live_mode: bool) -> Option<&'static str> {
        match classify(ip) {
            AddressClass::Public => None,
            AddressClass::Loopback if !live_mode => None,
            AddressClass::Loopback => Some("a loopback address: live-mode webhooks go only to public addresses"),
            AddressClass::Private if self.allow_private => None,
            AddressClass::Private => {
                Some("a private, shared or link-local address: webhooks go there only when the server runs with --webhooks-allow-private")
            }
            AddressClass::Forbidden => Some("an unspecified, multicast, broadcast, documentation or reserved address"),
        }
    }
}

/// True for `localhost` and names under `.localhost` (RFC 6761: always loopback), in any case,
/// with or without the final dot.
pub fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// A webhook URL that passed the rules, and the host to resolve when it is a name.
#[derive(Debug, Clone)]
pub struct CheckedUrl {
    pub url: url::Url,
    /// `Some(name)` when the host is a DNS name (checked again once resolved).
    pub name: Option<String>,
}

/// Checks a URL against the rules (without DNS). `param` names it in a 422.
pub fn check_url(param: &str, text: &str, live_mode: bool, policy: &UrlPolicy) -> Result<CheckedUrl> {
    let invalid = |why: String| Error::invalid(param, format!("{param} {why}"));
    if text.len() > URL_LEN_MAX {
        return Err(invalid(format!("must be at most {URL_LEN_MAX} characters")));
    }
    let url = url::Url::parse(text.trim()).map_err(|e| invalid(format!("is not an absolute URL ({e})")))?;
    let scheme = url.scheme();
    if scheme != "https" && scheme != "http" {
        return Err(invalid("must be an https URL".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("must not contain credentials: verify the X-Signature header instead".into()));
    }
    if url.fragment().is_some() {
        return Err(invalid("must not contain a fragment (#...)".into()));
    }
    let refuse = |ip: IpAddr| match policy.refusal(ip, live_mode) {
        Some(why) => Err(invalid(format!("is refused: {ip} is {why}"))),
        None => Ok(classify(ip) == AddressClass::Loopback),
    };
    let (loopback, name) = match url.host() {
        None => return Err(invalid("must name a host".into())),
        Some(url::Host::Ipv4(ip)) => (refuse(IpAddr::V4(ip))?, None),
        Some(url::Host::Ipv6(ip)) => (refuse(IpAddr::V6(ip))?, None),
        Some(url::Host::Domain(host)) if is_localhost_name(host) && live_mode => {
            return Err(invalid(format!("is refused: {host} is a loopback name: live-mode webhooks go only to public addresses")));
        }
        Some(url::Host::Domain(host)) => (is_localhost_name(host), Some(host.to_owned())),
    };
    if scheme == "http" && (live_mode || !loopback) {
        let mode = if live_mode { " in live mode" } else { "" };
        return Err(invalid(format!(
            "must use https{mode}; http is accepted only in sandbox mode for loopback hosts (127.0.0.1, ::1, localhost), for development"
        )));
    }
    Ok(CheckedUrl { url, name })
}

/// Resolves a host name (bounded by a short timeout) and refuses it if any address it has is
/// refused, or if a `localhost` name leads anywhere but loopback. A name that does not
/// resolve now is accepted: the worker checks every attempt against what it resolves to then.
/// The reply never shows the addresses (they are the operator's network, not the caller's).
pub async fn check_resolved(param: &str, checked: &CheckedUrl, live_mode: bool, policy: &UrlPolicy) -> Result<()> {
    let Some(name) = &checked.name else { return Ok(()) };
    let port = checked.url.port_or_known_default().unwrap_or(443);
    let lookup = tokio::net::lookup_host((name.as_str(), port));
    let Ok(Ok(addrs)) = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await else { return Ok(()) };
    for addr in addrs {
        if let Some(why) = address_refusal(policy, name, addr.ip(), live_mode) {
            return Err(Error::invalid(param, format!("{param} is refused: {name} resolves to {why}")));
        }
    }
    Ok(())
}

/// Why `name` may not be reached at `ip`, if it may not: the policy, plus loopback only for
/// `localhost` names.
pub fn address_refusal(policy: &UrlPolicy, name: &str, ip: IpAddr, live_mode: bool) -> Option<&'static str> {
    if is_localhost_name(name) && classify(ip) != AddressClass::Loopback {
        return Some("an address that is not loopback, which a localhost name must be");
    }
    policy.refusal(ip, live_mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn w5_address_classes() {
        for loopback in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:ffff:7f00:1"] {
            assert_eq!(classify(ip(loopback)), AddressClass::Loopback, "{loopback}");
        }
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "fec0::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "2002:a00:1::",
            "2002:a9fe:a9fe::",
        ] {
            assert_eq!(classify(ip(private)), AddressClass::Private, "{private}");
        }
        for forbidden in [
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "::ffff:0.0.0.0",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "::7f00:1",
            "::127.0.0.1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "64:ff9b::0:0",
            "4000::1",
        ] {
            assert_eq!(classify(ip(forbidden)), AddressClass::Forbidden, "{forbidden}");
        }
        for public in
            ["8.8.8.8", "172.32.0.1", "1.1.1.1", "2606:4700::1111", "100.128.0.1", "64:ff9b::808:808", "2002:808:808::", "2a00::1"]
        {
            assert_eq!(classify(ip(public)), AddressClass::Public, "{public}");
        }
    }

    #[test]
    fn w5_numeric_host_spellings_are_parsed_as_addresses() {
        // The url crate follows WHATWG (inet_aton-like): every spelling reaches us as an address.
        for (text, expect) in [
            ("https://2130706433/", "127.0.0.1"),
            ("https://0x7f.1/", "127.0.0.1"),
            ("https://017700000001/", "127.0.0.1"),
            ("https://0177.0.0.1/", "127.0.0.1"),
            ("https://127.1/", "127.0.0.1"),
            ("https://127.000.000.001/", "127.0.0.1"),
            ("https://0x7f000001/", "127.0.0.1"),
            ("https://127.0.0.1./", "127.0.0.1"),
            ("https://0/", "0.0.0.0"),
            ("https://10.1/", "10.0.0.1"),
            ("https://0xa9.0xfe.0xa9fe/", "169.254.169.254"),
            ("https://0xa9fea9fe/", "169.254.169.254"),
            ("https://0x7f.0x00.0x00.0x01/", "127.0.0.1"),
            ("https://127.0.0.1%2e/", "127.0.0.1"),
            ("https://%31%32%37.0.0.1/", "127.0.0.1"),
            ("https://\u{ff11}\u{ff12}\u{ff17}.0.0.1/", "127.0.0.1"),
        ] {
            let url = url::Url::parse(text).unwrap();
            assert_eq!(url.host(), Some(url::Host::Ipv4(expect.parse().unwrap())), "{text}");
        }
        // A first part above 255 in the two-part form is no address and no name: not a URL.
        assert!(url::Url::parse("https://0xa9fe.0xa9fe/").is_err());
        assert!(check_url("url", "https://0xa9fe.0xa9fe/", false, &UrlPolicy { allow_private: true }).is_err());
    }

    #[test]
    fn w5_live_refuses_loopback_in_every_spelling_sandbox_allows_it() {
        let strict = UrlPolicy::default();
        let open = UrlPolicy { allow_private: true };
        for host in [
            "127.0.0.1",
            "2130706433",
            "0x7f.1",
            "017700000001",
            "0177.0.0.1",
            "127.1",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[64:ff9b::7f00:1]",
            "[2002:7f00:1::]",
            "localhost",
            "LOCALHOST.",
            "app.localhost",
            "0.0.0.0",
            "[::]",
        ] {
            let url = format!("https://{host}/hook");
            for policy in [&strict, &open] {
                let err = check_url("url", &url, true, policy).expect_err(&url);
                assert!(matches!(&err, Error::Invalid { parameter, .. } if parameter == "url"), "{url}: {err:?}");
            }
        }
        for host in ["127.0.0.1", "0x7f.1", "[::1]", "[::ffff:7f00:1]", "localhost"] {
            assert!(check_url("url", &format!("http://{host}:9/hook"), false, &strict).is_ok(), "{host}");
        }
        assert!(check_url("url", "https://[64:ff9b::7f00:1]/", false, &open).is_err(), "translated loopback is never a receiver");
    }

    #[test]
    fn w5_url_rules() {
        let strict = UrlPolicy::default();
        let open = UrlPolicy { allow_private: true };
        let ok = |url: &str, live: bool, policy: &UrlPolicy| check_url("url", url, live, policy).is_ok();
        assert!(ok("https://hooks.example.com/payrail", true, &strict));
        assert!(ok("http://127.0.0.1:8080/hook", false, &strict));
        assert!(!ok("http://127.0.0.1:8080/hook", true, &strict), "no loopback in live mode");
        assert!(!ok("http://localhost:8080/hook", true, &open));
        assert!(!ok("http://hooks.example.com/payrail", true, &strict), "live mode needs https");
        assert!(!ok("http://hooks.example.com/payrail", false, &strict), "http only to loopback");
        assert!(!ok("https://10.0.0.5/hook", false, &strict));
        assert!(!ok("https://10.0.0.5/hook", true, &strict));
        assert!(ok("https://10.0.0.5/hook", false, &open));
        assert!(ok("https://10.0.0.5/hook", true, &open), "the operator flag opens private networks in both modes");
        assert!(!ok("http://10.0.0.5/hook", false, &open), "http stays loopback-only");
        assert!(!ok("https://169.254.169.254/latest", true, &strict));
        assert!(!ok("https://[fe80::1]/hook", true, &strict));
        assert!(!ok("https://0.0.0.0/hook", false, &open), "unspecified reaches the local host: never");
        assert!(!ok("https://224.0.0.1/hook", true, &open));
        assert!(!ok("ftp://example.com/x", false, &strict));
        assert!(!ok("https://user:pw@example.com/x", false, &strict));
        assert!(!ok("https://example.com/x#frag", false, &strict));
        assert!(!ok("not a url", false, &strict));
    }

    #[test]
    fn w5_localhost_names_must_stay_on_loopback() {
        let policy = UrlPolicy::default();
        assert!(address_refusal(&policy, "localhost", ip("127.0.0.1"), false).is_none());
        assert!(address_refusal(&policy, "localhost", ip("127.0.0.1"), true).is_some());
        assert!(address_refusal(&policy, "app.localhost", ip("8.8.8.8"), false).is_some());
        assert!(address_refusal(&policy, "hooks.example.com", ip("8.8.8.8"), true).is_none());
        assert!(address_refusal(&policy, "hooks.example.com", ip("10.0.0.1"), false).is_some());
        assert!(address_refusal(&policy, "rebound.example.com", ip("127.0.0.1"), true).is_some());
    }
}
