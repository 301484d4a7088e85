//! What the proxy lets through and its bounds: the allow list, the ports, the private-address
//! rule and the limits on each client; and the check that refuses a configuration that would
//! mean something other than what it says.

use std::time::Duration;

use super::error::ProxyError;
use super::names::{entry_rule, host_name_rule};

/// What the proxy lets through, and its bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// The registry hosts a tunnel may reach: lowercase names matched exactly, where
    /// `*.example.org` matches every subdomain of example.org (and not example.org itself).
    pub allow: Vec<String>,
    /// The ports a tunnel may reach (by default 443 only: registries are HTTPS).
    pub ports: Vec<u16>,
    /// Whether a listed name that resolves to a loopback, private, link-local, unspecified,
    /// multicast or broadcast address is refused (by default it is).
    pub refuse_private: bool,
    /// The bounds on each connection and on their number.
    pub limits: ProxyLimits,
}

/// The bounds on what one client may cost the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyLimits {
    /// The most bytes of a request line and headers, blank line included (default 8192).
    pub max_header_bytes: usize,
    /// How long the request line and headers may take to arrive, in all (default 10 s).
    pub header_timeout: Duration,
    /// How long connecting to one address of a registry may take (default 10 s).
    pub connect_timeout: Duration,
    /// How long a tunnel may stay open with no byte moving either way (default 120 s).
    pub idle_timeout: Duration,
    /// The most connections served at once; one more is answered `503` (default 64).
    pub max_connections: usize,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            max_header_bytes: 8192,
            header_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 64,
        }
    }
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            ports: vec![443],
            refuse_private: true,
            limits: ProxyLimits::default(),
        }
    }
}

impl ProxyConfig {
    /// The defaults, allowing `hosts`.
    pub fn allowing<S: Into<String>>(hosts: impl IntoIterator<Item = S>) -> Self {
        Self {
            allow: hosts.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Refuses an allow entry that is not a lowercase host name (or `*.` and one), an empty
    /// port list, port 0 and a zero limit: each would make the list mean something other than
    /// what it says, or serve nothing at all.
    pub fn check(&self) -> Result<(), ProxyError> {
        if let Some((entry, rule)) = self
            .allow
            .iter()
            .find_map(|entry| entry_rule(entry).map(|rule| (entry, rule)))
        {
            return Err(ProxyError::AllowEntry {
                entry: entry.clone(),
                rule,
            });
        }
        if self.ports.is_empty() {
            return Err(ProxyError::NoPorts);
        }
        if self.ports.contains(&0) {
            return Err(ProxyError::PortZero);
        }
        let limits = &self.limits;
        let zero = [
            ("max_header_bytes", limits.max_header_bytes == 0),
            ("header_timeout", limits.header_timeout.is_zero()),
            ("connect_timeout", limits.connect_timeout.is_zero()),
            ("idle_timeout", limits.idle_timeout.is_zero()),
            ("max_connections", limits.max_connections == 0),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((name, _)) => Err(ProxyError::ZeroLimit(name)),
            None => Ok(()),
        }
    }

    /// Whether `host` (lowercase) is a host name on the list, or a subdomain of a `*.` entry.
    pub(super) fn allows(&self, host: &str) -> bool {
        host_name_rule(host).is_none()
            && self
                .allow
                .iter()
                .any(|entry| match entry.strip_prefix("*.") {
                    Some(domain) => host
                        .strip_suffix(domain)
                        .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
                    None => entry == host,
                })
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::AllowRule;
    use super::*;

    #[test]
    fn check_refuses_entries_that_are_not_host_names() {
        let cases = [
            ("", AllowRule::Empty),
            ("https://pypi.org", AllowRule::Scheme),
            ("pypi.org:443", AllowRule::Port),
            ("pypi.org/simple", AllowRule::Path),
            ("pypi.org ", AllowRule::Whitespace),
            ("127.0.0.1", AllowRule::IpLiteral),
            ("127.0.0.1:443", AllowRule::IpLiteral),
            ("::1", AllowRule::IpLiteral),
            ("[::1]:443", AllowRule::IpLiteral),
            ("127.1", AllowRule::IpLiteral),
            ("0x7f000001", AllowRule::IpLiteral),
            ("PyPI.org", AllowRule::Uppercase),
            ("a.*.org", AllowRule::Wildcard),
            ("*", AllowRule::Wildcard),
            ("pypi.org.", AllowRule::Label),
            ("user@pypi.org", AllowRule::Character('@')),
        ];
        for (entry, rule) in cases {
            match ProxyConfig::allowing([entry]).check() {
                Err(ProxyError::AllowEntry { entry: e, rule: r }) => {
                    assert_eq!((e.as_str(), r), (entry, rule))
                }
                other => panic!("{entry:?}: {other:?}"),
            }
        }
        let message = ProxyConfig::allowing(["https://pypi.org"])
            .check()
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "registry proxy: allow entry \"https://pypi.org\" has a scheme; write the host name alone \
             (files.pythonhosted.org, not https://files.pythonhosted.org)"
        );
        ProxyConfig::allowing(["pypi.org", "*.pythonhosted.org", "registry.npmjs.org"])
            .check()
            .unwrap();
    }

    #[test]
    fn check_refuses_ports_and_limits_that_serve_nothing() {
        let mut config = ProxyConfig::allowing(["pypi.org"]);
        config.ports = vec![];
        assert!(matches!(config.check(), Err(ProxyError::NoPorts)));
        config.ports = vec![443, 0];
        assert!(matches!(config.check(), Err(ProxyError::PortZero)));
        config.ports = vec![443];
        config.limits.idle_timeout = Duration::ZERO;
        assert!(matches!(
            config.check(),
            Err(ProxyError::ZeroLimit("idle_timeout"))
        ));
        config.limits = ProxyLimits {
            max_connections: 0,
            ..ProxyLimits::default()
        };
        assert!(matches!(
            config.check(),
            Err(ProxyError::ZeroLimit("max_connections"))
        ));
    }

    #[test]
    fn a_wildcard_matches_subdomains_only() {
        let config = ProxyConfig::allowing(["*.example.org", "pypi.org"]);
        for host in ["a.example.org", "a.b.example.org", "pypi.org"] {
            assert!(config.allows(host), "{host}");
        }
        for host in [
            "example.org",
            "badexample.org",
            ".example.org",
            "a..example.org",
            "www.pypi.org",
            "a_b.example.org",
            "pypi.org.",
            "a.example.org.",
            "PyPI.org",
        ] {
            assert!(!config.allows(host), "{host}");
        }
    }
}
