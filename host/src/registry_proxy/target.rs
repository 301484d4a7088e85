//! What a request line asks for: the host and port of a `CONNECT`, or why it is refused, from
//! the text alone (nothing here resolves or connects).

use super::config::ProxyConfig;
use super::log::shown;
use super::names::{host_name_rule, is_ip_literal};
use super::refusal::Refusal;

/// What a request line asks for, as the log shows it: its second word (the target), or the
/// whole line when it has none.
pub(super) fn requested(line: &[u8]) -> &[u8] {
    line.split(|&b| b == b' ').nth(1).unwrap_or(line)
}

/// The host (lowercase) and port a request line asks for, or why it is refused: anything but
/// `CONNECT host:port HTTP/1.x`, an IP literal, an unlisted port or an unlisted host.
pub(super) fn destination(line: &[u8], config: &ProxyConfig) -> Result<(String, u16), Refusal> {
    let malformed = || Refusal::new(400, "the request line is not `CONNECT host:port HTTP/1.1`");
    let line = std::str::from_utf8(line)
        .ok()
        .filter(|l| l.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
        .ok_or_else(malformed)?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(malformed());
    };
    if method.is_empty() || target.is_empty() || !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(malformed());
    }
    if method != "CONNECT" {
        let why = format!(
            "method {}: only CONNECT tunnels to registries are served",
            shown(method.as_bytes())
        );
        return Err(Refusal::new(405, why));
    }
    let (host, port) = authority(target)?;
    // Before the port and the list: an address is refused as one whatever else is wrong.
    if is_ip_literal(host) {
        return Err(ip_literal(host));
    }
    if !config.ports.contains(&port) {
        return Err(Refusal::new(
            403,
            format!("port {port} is not allowed (allowed: {:?})", config.ports),
        ));
    }
    // Host names are case-insensitive: Registry.Test is registry.test, listed or not.
    let host = host.to_ascii_lowercase();
    let shown_host = shown(host.as_bytes());
    if let Some(rule) = host_name_rule(&host) {
        let why = format!("{shown_host} is not a registry host name: it {rule}");
        return Err(Refusal::new(403, why));
    }
    if !config.allows(&host) {
        let why = format!("{shown_host} is not an allowed registry host");
        return Err(Refusal::new(403, why));
    }
    Ok((host, port))
}

/// `host:port` split, the port 1 to 65535 in digits only; a bracketed host (`[::1]:443`) is
/// an IPv6 literal, refused as one.
fn authority(target: &str) -> Result<(&str, u16), Refusal> {
    if target.starts_with('[') {
        return Err(ip_literal(target));
    }
    let shown_target = shown(target.as_bytes());
    let Some((host, port)) = target.rsplit_once(':') else {
        let why = format!("the target {shown_target} has no port: a CONNECT names host:port");
        return Err(Refusal::new(400, why));
    };
    // Digits only: Rust's parse takes a leading `+`, which no port has.
    let port = Some(port)
        .filter(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p != 0);
    let Some(port) = port else {
        let why = format!("the target {shown_target} has no valid port (1 to 65535)");
        return Err(Refusal::new(400, why));
    };
    if host.is_empty() {
        let why = format!("the target {shown_target} has no host");
        return Err(Refusal::new(400, why));
    }
    Ok((host, port))
}

/// The refusal of an address where a registry's name belongs.
fn ip_literal(host: &str) -> Refusal {
    let why = format!(
        "{} is an IP address: only registry host names are allowed",
        shown(host.as_bytes())
    );
    Refusal::new(403, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(target: &str) -> Result<(String, u16), (u16, String)> {
        let config = ProxyConfig::allowing(["registry.test", "*.cdn.test", "localhost"]);
        let line = format!("CONNECT {target} HTTP/1.1");
        destination(line.as_bytes(), &config).map_err(|r| (r.status, r.why))
    }

    #[test]
    fn listed_hosts_in_any_case_are_served() {
        let ok = |host: &str| Ok((host.to_owned(), 443));
        assert_eq!(asked("registry.test:443"), ok("registry.test"));
        assert_eq!(asked("REGISTRY.Test:443"), ok("registry.test"));
        assert_eq!(asked("a.CDN.test:443"), ok("a.cdn.test"));
        let http10 = destination(
            b"CONNECT registry.test:443 HTTP/1.0",
            &ProxyConfig::allowing(["registry.test"]),
        );
        assert_eq!(http10.ok(), Some(("registry.test".to_owned(), 443)));
    }

    #[test]
    fn hostile_targets_are_refused_with_their_reason() {
        let cases = [
            ("[::1]:443", 403, "[::1]:443 is an IP address"),
            ("::1:443", 403, "::1 is an IP address"),
            ("127.0.0.1:443", 403, "127.0.0.1 is an IP address"),
            ("127.0.0.1.:443", 403, "127.0.0.1. is an IP address"),
            ("0x7f.1:443", 403, "0x7f.1 is an IP address"),
            ("0X7F000001:443", 403, "0X7F000001 is an IP address"),
            ("2130706433:80", 403, "2130706433 is an IP address"),
            (
                "registry.test.:443",
                403,
                "registry.test. is not a registry host name",
            ),
            (
                "EVIL.test:443",
                403,
                "evil.test is not an allowed registry host",
            ),
            ("registry.test@evil.test:443", 403, "contains '@'"),
            ("registry.test:443:443", 403, "contains ':'"),
            ("registry.test:80", 403, "port 80 is not allowed"),
            ("registry.test:65536", 400, "has no valid port (1 to 65535)"),
            ("registry.test:99999999", 400, "has no valid port"),
            ("registry.test:0", 400, "has no valid port"),
            ("registry.test:+443", 400, "has no valid port"),
            ("registry.test:", 400, "has no valid port"),
            ("registry.test", 400, "has no port"),
            (":443", 400, "has no host"),
        ];
        for (target, status, why) in cases {
            match asked(target) {
                Err((s, w)) => assert!(s == status && w.contains(why), "{target}: {s} {w}"),
                Ok(ok) => panic!("{target}: served as {ok:?}"),
            }
        }
    }

    #[test]
    fn anything_but_connect_is_refused() {
        let config = ProxyConfig::allowing(["registry.test"]);
        let cases: [(&[u8], u16); 8] = [
            (b"GET http://registry.test/ HTTP/1.1", 405),
            (b"connect registry.test:443 HTTP/1.1", 405),
            (b"CONNECT registry.test:443", 400),
            (b"CONNECT registry.test:443 HTTP/2", 400),
            (b"CONNECT  registry.test:443 HTTP/1.1", 400),
            (b"CONNECT registry.test:443\tHTTP/1.1", 400),
            (b"CONNECT r\xc3\xa9gistry.test:443 HTTP/1.1", 400),
            (b"", 400),
        ];
        for (line, status) in cases {
            let refused = destination(line, &config).err().map(|r| r.status);
            assert_eq!(refused, Some(status), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn the_log_shows_the_target_or_the_whole_line() {
        assert_eq!(requested(b"CONNECT a.test:443 HTTP/1.1"), b"a.test:443");
        assert_eq!(requested(b"HELLO"), b"HELLO");
    }
}
