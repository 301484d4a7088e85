//! Reaching an allowed registry: resolving its name (on the host, through a seam tests fill),
//! refusing a name that leads to a local address, and connecting to the addresses checked,
//! never to a second answer.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};

use super::refusal::Refusal;
use super::shared::Shared;

/// Resolves a registry's host name to the addresses to connect to: the seam through which
/// tests map names to loopback servers. The proxy resolves on the host, never in the sandbox.
pub trait Resolve: Send + Sync {
    /// The addresses of `host` for `port`, in the order to try them.
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (std's `ToSocketAddrs`, that is getaddrinfo).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// Resolves an allowed host and connects to the first of its addresses that answers; refuses
/// a name any of whose addresses is local ([`local_kind`]) before connecting to any.
pub(super) fn connect(host: &str, port: u16, shared: &Shared) -> Result<TcpStream, Refusal> {
    let addrs = shared
        .resolver
        .resolve(host, port)
        .map_err(|e| Refusal::new(502, format!("{host} could not be resolved: {e}")))?;
    if shared.config.refuse_private
        && let Some((addr, kind)) = addrs.iter().find_map(|a| Some((a, local_kind(a.ip())?)))
    {
        let why = format!(
            "{host} resolves to {}, a {kind} address: a registry's name may not lead to a local service",
            addr.ip()
        );
        return Err(Refusal::new(403, why));
    }
    let mut failure = format!("{host} resolves to no address");
    for addr in &addrs {
        if shared.stopping() {
            return Err(Refusal::new(503, "the proxy is stopping"));
        }
        match TcpStream::connect_timeout(addr, shared.config.limits.connect_timeout) {
            Ok(upstream) => return Ok(upstream),
            Err(e) => failure = format!("{host}:{port} could not be reached at {addr}: {e}"),
        }
    }
    Err(Refusal::new(502, failure))
}

/// What kind of local address `ip` is, if it is one: a registry never has such an address, and
/// reaching one would let the build talk to the host or its network.
pub(super) fn local_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_local_kind(v4),
        IpAddr::V6(v6) => v6_local_kind(v6).or_else(|| embedded_v4(v6).and_then(v4_local_kind)),
    }
}

/// The IPv4 address an IPv6 address leads to: ::ffff:a.b.c.d (mapped), ::a.b.c.d (the
/// deprecated compatible form) and 64:ff9b::a.b.c.d (NAT64, which a gateway translates to
/// a.b.c.d on its own network).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let [.., a, b, c, d] = ip.octets();
    match ip.segments() {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => {
            Some(Ipv4Addr::new(a, b, c, d))
        }
        _ => None,
    }
}

fn v4_local_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_private() {
        "private (RFC 1918)"
    } else if ip.is_link_local() {
        "link-local"
    } else if a == 0 {
        // 0.0.0.0/8, "this network": Linux connects 0.0.0.0 to the host itself.
        "unspecified"
    } else if a == 100 && b & 0xc0 == 64 {
        // 100.64.0.0/10, carrier-grade NAT and overlay networks: never a registry.
        "shared (RFC 6598)"
    } else if ip.is_multicast() {
        "multicast"
    } else if ip.is_broadcast() {
        "broadcast"
    } else {
        return None;
    })
}

fn v6_local_kind(ip: Ipv6Addr) -> Option<&'static str> {
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_unique_local() {
        "private (fc00::/7)"
    } else if ip.is_unicast_link_local() {
        "link-local"
    } else if ip.segments()[0] & 0xffc0 == 0xfec0 {
        "site-local"
    } else if ip.is_multicast() {
        "multicast"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_addresses_are_named() {
        let local = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::169.254.169.254",
            "64:ff9b::10.0.0.1",
            "64:ff9b::127.0.0.1",
        ];
        for ip in local {
            assert!(local_kind(ip.parse().unwrap()).is_some(), "{ip}");
        }
        for ip in [
            "151.101.0.223",
            "104.16.0.1",
            "2a04:4e42::223",
            "64:ff9b::9765:df",
            "::ffff:151.101.0.223",
        ] {
            assert_eq!(local_kind(ip.parse().unwrap()), None, "{ip}");
        }
    }
}
