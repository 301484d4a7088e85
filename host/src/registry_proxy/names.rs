//! Which names the proxy matches: what a host name is, the rules an allow entry must keep, and
//! the forms a resolver reads as an address (refused wherever they appear).

use std::fmt;
use std::net::IpAddr;

/// The rule an allow entry breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllowRule {
    /// The entry is empty.
    Empty,
    /// The entry has a scheme (`https://`).
    Scheme,
    /// The entry has a port (`:443`).
    Port,
    /// The entry has a path (`/simple`).
    Path,
    /// The entry contains whitespace.
    Whitespace,
    /// The entry is an IP address (in any form a resolver reads as one).
    IpLiteral,
    /// The entry has uppercase letters.
    Uppercase,
    /// The entry has a `*` other than a leading `*.`.
    Wildcard,
    /// The entry contains a character no host name has.
    Character(char),
    /// The entry has an empty label (a leading, trailing or doubled dot).
    Label,
    /// The entry is longer than a host name can be.
    TooLong,
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "is empty"),
            Self::Scheme => write!(f, "has a scheme"),
            Self::Port => write!(f, "has a port"),
            Self::Path => write!(f, "has a path"),
            Self::Whitespace => write!(f, "contains whitespace"),
            Self::IpLiteral => write!(f, "is an IP address"),
            Self::Uppercase => write!(f, "has uppercase letters"),
            Self::Wildcard => write!(f, "has a `*` other than a leading `*.`"),
            Self::Character(c) => write!(f, "contains {c:?}, which no host name has"),
            Self::Label => write!(f, "has an empty label (a leading, trailing or doubled dot)"),
            Self::TooLong => write!(
                f,
                "is longer than a host name can be (253 characters, 63 a label)"
            ),
        }
    }
}

impl AllowRule {
    /// How to write the entry instead.
    pub fn fix(&self) -> &'static str {
        match self {
            Self::Empty => "remove it, or write a registry's host name (pypi.org)",
            Self::Scheme => {
                "write the host name alone (files.pythonhosted.org, not https://files.pythonhosted.org)"
            }
            Self::Port => "write the host name alone and list the port in ports",
            Self::Path => "write the host name alone: the proxy sees hosts, never paths",
            Self::Whitespace => "write one host name per entry",
            Self::IpLiteral => "write the registry's host name: addresses are never allowed",
            Self::Uppercase => "write it in lowercase",
            Self::Wildcard => {
                "write *.example.org for every subdomain of example.org, or list the names"
            }
            Self::Character(_) => "write a host name: letters, digits, hyphens and dots",
            Self::Label => "write the name without the extra dot",
            Self::TooLong => "write the registry's real host name",
        }
    }
}

/// The rule an allow entry breaks, if any.
pub(super) fn entry_rule(entry: &str) -> Option<AllowRule> {
    let bracketed = entry
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or_default();
    let before_port = entry.rsplit_once(':').map_or("", |(host, _)| host);
    let rule = if entry.is_empty() {
        AllowRule::Empty
    } else if entry.chars().any(char::is_whitespace) {
        AllowRule::Whitespace
    } else if entry.contains("://") {
        AllowRule::Scheme
    } else if entry.contains('/') {
        AllowRule::Path
    } else if is_ip_literal(bracketed) || is_ip_literal(before_port) {
        AllowRule::IpLiteral
    } else if entry.contains(':') {
        AllowRule::Port
    } else {
        let name = entry.strip_prefix("*.").unwrap_or(entry);
        if name.contains('*') {
            AllowRule::Wildcard
        } else {
            return host_name_rule(name);
        }
    };
    Some(rule)
}

/// The rule `name` breaks as a lowercase host name, if any. A trailing dot (the root of a
/// fully qualified name) is an empty label too: the allow list names hosts one way only.
pub(super) fn host_name_rule(name: &str) -> Option<AllowRule> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    if let Some(c) = name.chars().find(|&c| !allowed(c)) {
        return Some(AllowRule::Character(c));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some(AllowRule::Uppercase);
    }
    if name.split('.').any(str::is_empty) {
        return Some(AllowRule::Label);
    }
    if name.len() > 253 || name.split('.').any(|label| label.len() > 63) {
        return Some(AllowRule::TooLong);
    }
    is_ip_literal(name).then_some(AllowRule::IpLiteral)
}

/// Whether a resolver would read `name` as an address: an IPv4 or IPv6 literal, or a name whose
/// last label is a number (`127.1`, `2130706433`, `0x7f.1`: inet_aton's forms, which
/// getaddrinfo accepts; no top-level domain is numeric). Trailing dots are ignored, as a
/// resolver ignores them (`127.0.0.1.`).
pub(super) fn is_ip_literal(name: &str) -> bool {
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    let last = name
        .trim_end_matches('.')
        .rsplit('.')
        .next()
        .unwrap_or_default();
    let hex = last.strip_prefix("0x").or_else(|| last.strip_prefix("0X"));
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_a_resolver_reads_as_an_address_is_an_ip_literal() {
        for name in [
            "127.0.0.1",
            "127.0.0.1.",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0X7F.0X1",
            "0x7f000001",
            "0177.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "1.2.3.4.5",
        ] {
            assert!(is_ip_literal(name), "{name}");
        }
        for name in [
            "registry.test",
            "a.7f",
            "x0.org",
            "0x.org",
            "",
            ".",
            "localhost",
        ] {
            assert!(!is_ip_literal(name), "{name}");
        }
    }

    #[test]
    fn host_names_break_no_rule() {
        for name in [
            "pypi.org",
            "files.pythonhosted.org",
            "a-b.c0.test",
            "localhost",
        ] {
            assert_eq!(host_name_rule(name), None, "{name}");
        }
        let cases = [
            ("pypi.org.", AllowRule::Label),
            (".pypi.org", AllowRule::Label),
            ("a..org", AllowRule::Label),
            ("PyPI.org", AllowRule::Uppercase),
            ("a_b.org", AllowRule::Character('_')),
            ("a:b", AllowRule::Character(':')),
            ("0x7f.1", AllowRule::IpLiteral),
        ];
        for (name, rule) in cases {
            assert_eq!(host_name_rule(name), Some(rule), "{name}");
        }
        let long_label = format!("{}.org", "a".repeat(64));
        assert_eq!(host_name_rule(&long_label), Some(AllowRule::TooLong));
        let long_name = vec!["a".repeat(60); 5].join(".");
        assert_eq!(host_name_rule(&long_name), Some(AllowRule::TooLong));
    }
}
