//! Requests refused from their text alone (never resolved, never connected) and names refused
//! once resolved (never connected), each logged with its reason.

use std::net::SocketAddr;

use super::super::TARGET_CHARS;
use super::support::{
    MapResolver, Via, ask, assert_never_connected, config, connect_request, echo_server,
    quiet_listener, start,
};

#[test]
fn a_host_not_allowed_is_refused_without_a_connection() {
    let target = quiet_listener();
    let addr = target.local_addr().unwrap();
    let port = addr.port();
    let resolver = MapResolver::with("elsewhere.test", addr);
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[port], false),
        resolver.clone(),
    );
    let targets = [
        format!("127.0.0.1:{port}"),
        format!("elsewhere.test:{port}"),
        format!("[::1]:{port}"),
        format!("2130706433:{port}"),
        format!("registry.test.elsewhere.test:{port}"),
    ];
    for target in &targets {
        let answer = ask(&proxy, &connect_request(target));
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{target}: {answer}"
        );
    }
    assert_never_connected(&target);
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    let got: Vec<_> = log
        .refused
        .iter()
        .map(|r| (r.target.as_str(), r.status))
        .collect();
    let want: Vec<_> = targets.iter().map(|t| (t.as_str(), 403)).collect();
    assert_eq!(got, want);
    assert!(
        log.refused[0].why.contains("is an IP address"),
        "{:?}",
        log.refused[0]
    );
    assert_eq!(
        log.refused[1].why,
        "elsewhere.test is not an allowed registry host"
    );
    assert_eq!(log.reached, vec![]);
}

/// Every hostile target a package tool (or what runs inside one) could send, against a proxy
/// whose resolver would take any name to a listener: none is resolved, none connected.
#[test]
fn hostile_targets_are_refused_without_resolving_or_connecting() {
    let target = quiet_listener();
    let resolver = MapResolver::every_name(target.local_addr().unwrap());
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test", "*.cdn.test"], &[443], false),
        resolver.clone(),
    );
    let cases = [
        ("[::1]:443", 403, "[::1]:443 is an IP address"),
        ("[::ffff:127.0.0.1]:443", 403, "is an IP address"),
        ("127.0.0.1:443", 403, "127.0.0.1 is an IP address"),
        ("0x7f.1:443", 403, "0x7f.1 is an IP address"),
        ("127.1:443", 403, "127.1 is an IP address"),
        (
            "localhost:443",
            403,
            "localhost is not an allowed registry host",
        ),
        (
            "registry.test.:443",
            403,
            "registry.test. is not a registry host name",
        ),
        ("a.cdn.test.:443", 403, "has an empty label"),
        (
            "EVIL.TEST:443",
            403,
            "evil.test is not an allowed registry host",
        ),
        (
            "CDN.TEST:443",
            403,
            "cdn.test is not an allowed registry host",
        ),
        ("registry.test:65536", 400, "has no valid port (1 to 65535)"),
        ("registry.test:4430000", 400, "has no valid port"),
        ("registry.test:0", 400, "has no valid port"),
        ("registry.test", 400, "has no port"),
        ("registry.test:80", 403, "port 80 is not allowed"),
    ];
    for (requested, status, _) in cases {
        let answer = ask(&proxy, &connect_request(requested));
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{requested}: {answer}"
        );
    }
    let answer = ask(
        &proxy,
        b"GET http://registry.test/simple/ HTTP/1.1\r\nHost: registry.test\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert_never_connected(&target);
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    assert_eq!(log.refused.len(), cases.len() + 1);
    for ((requested, status, why), refused) in cases.iter().zip(&log.refused) {
        assert_eq!(refused.target, *requested);
        assert_eq!(refused.status, *status, "{refused:?}");
        assert!(refused.why.contains(why), "{refused:?}");
    }
    assert_eq!(
        log.refused[cases.len()].why,
        "method GET: only CONNECT tunnels to registries are served"
    );
    assert_eq!(log.reached, vec![]);
}

#[test]
fn a_name_resolving_to_a_local_address_is_refused_before_connecting() {
    let target = quiet_listener();
    let addr = target.local_addr().unwrap();
    let resolver = MapResolver::with("registry.test", addr);
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[addr.port()], true),
        resolver.clone(),
    );
    let answer = ask(
        &proxy,
        &connect_request(&format!("registry.test:{}", addr.port())),
    );
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(
        answer.contains("resolves to 127.0.0.1, a loopback address"),
        "{answer}"
    );
    assert_never_connected(&target);
    assert_eq!(resolver.asked(), vec!["registry.test".to_owned()]);
    let log = proxy.stop();
    assert_eq!(log.refused.len(), 1);
    assert_eq!(log.refused[0].status, 403);
}

/// A listed `localhost` (a careless allow list) still leads nowhere local, and neither does a
/// name with one public address among local ones: no address of it is tried.
#[test]
fn a_listed_name_with_any_local_address_is_refused_before_connecting() {
    let target = quiet_listener();
    let local = target.local_addr().unwrap();
    // TEST-NET-3: public as far as the rule goes, and never answered, so a connection
    // attempt would show as a 502 after connect_timeout.
    let public: SocketAddr = "203.0.113.7:443".parse().unwrap();
    let resolver = MapResolver::with("localhost", local).and("registry.test", &[public, local]);
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["localhost", "registry.test"], &[443, local.port()], true),
        resolver.clone(),
    );
    for requested in [
        format!("localhost:{}", local.port()),
        "registry.test:443".into(),
    ] {
        let answer = ask(&proxy, &connect_request(&requested));
        assert!(answer.starts_with("HTTP/1.1 403 "), "{requested}: {answer}");
        assert!(answer.contains("a loopback address"), "{answer}");
    }
    assert_never_connected(&target);
    assert_eq!(resolver.asked(), vec!["localhost", "registry.test"]);
    let log = proxy.stop();
    assert_eq!(log.refused.len(), 2);
}

#[test]
fn a_port_not_allowed_is_refused_before_resolving() {
    let resolver = MapResolver::with("registry.test", echo_server());
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[443], false),
        resolver.clone(),
    );
    let answer = ask(&proxy, &connect_request("registry.test:80"));
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(
        answer.ends_with("port 80 is not allowed (allowed: [443])\n"),
        "{answer}"
    );
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    assert_eq!(log.refused[0].target, "registry.test:80");
}

fn requests_other_than_connect_are_refused(via: Via) {
    let resolver = MapResolver::with("registry.test", echo_server());
    let (proxy, _dir) = start(
        via,
        config(&["registry.test"], &[443], false),
        resolver.clone(),
    );
    let long = format!("{}.test:443", "a".repeat(600));
    let cases: [(Vec<u8>, u16, &str); 8] = [
        (
            b"GET http://registry.test/simple/ HTTP/1.1\r\nHost: registry.test\r\n\r\n".to_vec(),
            405,
            "http://registry.test/simple/",
        ),
        (b"HELLO\r\n\r\n".to_vec(), 400, "HELLO"),
        (
            b"CONNECT registry.test:443\r\n\r\n".to_vec(),
            400,
            "registry.test:443",
        ),
        (
            b"CONNECT registry.test HTTP/1.1\r\n\r\n".to_vec(),
            400,
            "registry.test",
        ),
        (
            b"CONNECT registry.test:+443 HTTP/1.1\r\n\r\n".to_vec(),
            400,
            "registry.test:+443",
        ),
        (
            b"CONNECT reg\0istry.test:443 HTTP/1.1\r\n\r\n".to_vec(),
            400,
            "reg\\x00istry.test:443",
        ),
        (b"\x1b[2J\xff\n\n".to_vec(), 400, "\\x1b[2J\\xff"),
        (
            format!("CONNECT {long} HTTP/1.1\r\n\r\n").into_bytes(),
            403,
            "",
        ),
    ];
    for (request, status, _) in &cases {
        let answer = ask(&proxy, request);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{answer}"
        );
        if *status == 405 {
            assert!(answer.contains("\r\nAllow: CONNECT\r\n"), "{answer}");
        }
    }
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    assert_eq!(log.refused.len(), cases.len());
    for ((_, status, target), refused) in cases.iter().zip(&log.refused) {
        assert_eq!(refused.status, *status, "{refused:?}");
        if !target.is_empty() {
            assert_eq!(refused.target, *target);
        }
    }
    let cut = &log.refused[cases.len() - 1].target;
    assert_eq!(cut.chars().count(), TARGET_CHARS);
    assert!(cut.starts_with("aaaa") && cut.ends_with('…'), "{cut}");
}

#[test]
fn requests_other_than_connect_are_refused_over_tcp() {
    requests_other_than_connect_are_refused(Via::Tcp);
}

#[test]
fn requests_other_than_connect_are_refused_over_a_unix_socket() {
    requests_other_than_connect_are_refused(Via::Unix);
}
