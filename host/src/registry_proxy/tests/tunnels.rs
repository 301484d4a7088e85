//! Tunnels to allowed registries: bytes both ways, half-closes, byte counts, and a registry
//! that does not answer.

use std::net::{Shutdown, TcpListener};

use super::super::Reached;
use super::super::relay::ESTABLISHED;
use super::support::{
    MapResolver, Via, ask, assert_eof, config, connect_request, dial, echo_server, read_exact,
    start,
};

fn tunnel_both_ways(via: Via) {
    let echo = echo_server();
    let port = echo.port();
    let (proxy, _dir) = start(
        via,
        config(&["registry.test"], &[port], false),
        MapResolver::with("registry.test", echo),
    );
    let client = dial(&proxy);
    // The first bytes ride with the request, as a client that does not wait for the 200
    // sends them; the name's case does not matter.
    let mut request = connect_request(&format!("Registry.Test:{port}"));
    request.extend_from_slice(b"hello");
    client.send(&request).unwrap();
    assert_eq!(read_exact(&client, ESTABLISHED.len()), ESTABLISHED);
    assert_eq!(read_exact(&client, 5), b"hello");
    client.send(b" world").unwrap();
    // Half-close: the echo still answers, then ends its side.
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_exact(&client, 6), b" world");
    assert_eof(&client);
    let log = proxy.stop();
    let reached = Reached {
        host: "registry.test".into(),
        port,
        bytes_up: 11,
        bytes_down: 11,
    };
    assert_eq!(log.reached, vec![reached]);
    assert_eq!(log.refused, vec![]);
}

#[test]
fn an_allowed_host_is_tunnelled_over_tcp() {
    tunnel_both_ways(Via::Tcp);
}

#[test]
fn an_allowed_host_is_tunnelled_over_a_unix_socket() {
    tunnel_both_ways(Via::Unix);
}

#[test]
fn a_registry_that_does_not_answer_is_502() {
    // A port that was just free: nothing listens on it.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let resolver = MapResolver::with("registry.test", closed);
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[closed.port()], false),
        resolver,
    );
    let answer = ask(
        &proxy,
        &connect_request(&format!("registry.test:{}", closed.port())),
    );
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    let log = proxy.stop();
    assert_eq!(log.refused[0].status, 502);
    assert!(
        log.refused[0].why.contains("could not be reached"),
        "{:?}",
        log.refused[0]
    );
}

#[test]
fn a_name_that_does_not_resolve_is_502() {
    let resolver = MapResolver::default();
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[443], true),
        resolver.clone(),
    );
    let answer = ask(&proxy, &connect_request("registry.test:443"));
    assert!(answer.starts_with("HTTP/1.1 502 "), "{answer}");
    assert_eq!(resolver.asked(), vec!["registry.test".to_owned()]);
    let log = proxy.stop();
    assert_eq!(
        log.refused[0].why,
        "registry.test could not be resolved: no such name"
    );
}
