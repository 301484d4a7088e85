//! The bounds on what a client may cost: header bytes, header time (however the bytes are
//! spread out), connections at once, and idle tunnels.

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use super::super::stream::Stream;
use super::support::{
    MapResolver, Via, WAIT, ask, assert_eof, config, dial, limits, open_tunnel, read_to_close,
    start,
};

#[test]
fn an_oversized_header_is_answered_431_without_reading_it_all() {
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[443], true),
        MapResolver::default(),
    );
    let client = TcpStream::connect(proxy.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(WAIT)).unwrap();
    client.set_write_timeout(Some(WAIT)).unwrap();
    // More than the kernel's buffers on both sides can hold: the writer only gets through
    // it if the proxy reads it all.
    const FLOOD: usize = 64 << 20;
    let writer = {
        let mut client = client.try_clone().unwrap();
        thread::spawn(move || {
            let mut sent = 0;
            let mut send = |bytes: &[u8]| client.write_all(bytes).map(|()| sent += bytes.len());
            let pad = vec![b'a'; 64 * 1024];
            let flooded = send(b"CONNECT registry.test:443 HTTP/1.1\r\nX-Pad: ")
                .and_then(|()| (0..FLOOD / pad.len()).try_for_each(|_| send(&pad)));
            (flooded.is_ok(), sent)
        })
    };
    let answer = read_to_close(&Stream::Tcp(client));
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    let (flooded, sent) = writer.join().unwrap();
    assert!(!flooded && sent < FLOOD, "the proxy took all {sent} bytes");
    let log = proxy.stop();
    assert_eq!(log.refused[0].status, 431);
    assert_eq!(log.refused[0].target, "registry.test:443");
}

#[test]
fn a_stalled_request_is_answered_408() {
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[443], true),
        MapResolver::default(),
    );
    let client = dial(&proxy);
    let started = Instant::now();
    client
        .send(b"CONNECT registry.test:443 HTTP/1.1\r\nHost: regi")
        .unwrap();
    let answer = read_to_close(&client);
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let log = proxy.stop();
    assert_eq!(
        (log.refused[0].status, log.refused[0].target.as_str()),
        (408, "registry.test:443")
    );
}

/// A client that sends a byte at a time, each well within the header timeout, is still held
/// to the timeout in all.
#[test]
fn a_request_trickling_in_is_answered_408_at_the_header_timeout() {
    let resolver = MapResolver::default();
    let (proxy, _dir) = start(
        Via::Tcp,
        config(&["registry.test"], &[443], true),
        resolver.clone(),
    );
    let client = TcpStream::connect(proxy.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(WAIT)).unwrap();
    let started = Instant::now();
    let trickle = {
        let mut client = client.try_clone().unwrap();
        thread::spawn(move || {
            let request = b"CONNECT registry.test:443 HTTP/1.1\r\nX-Slow: ".iter();
            for byte in request.chain(std::iter::repeat(&b'a')) {
                if client.write_all(&[*byte]).is_err() || started.elapsed() > WAIT {
                    return;
                }
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let answer = read_to_close(&Stream::Tcp(client));
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    trickle.join().unwrap();
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    assert_eq!(log.refused.len(), 1);
    assert_eq!(log.refused[0].status, 408);
}

#[test]
fn connections_beyond_the_limit_are_answered_503() {
    let mut config = config(&["registry.test"], &[443], true);
    config.limits.max_connections = 1;
    config.limits.header_timeout = WAIT;
    let resolver = MapResolver::default();
    let (proxy, _dir) = start(Via::Tcp, config, resolver.clone());
    // The first connection holds the only slot while it sends its request slowly.
    let first = dial(&proxy);
    first.send(b"CONNECT regi").unwrap();
    let second = dial(&proxy);
    second
        .send(b"CONNECT registry.test:443 HTTP/1.1\r\n\r\n")
        .ok();
    let answer = read_to_close(&second);
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    // Once the first leaves, its slot is free again.
    drop(first);
    let mut answer = String::new();
    for _ in 0..50 {
        answer = ask(&proxy, b"GET / HTTP/1.1\r\n\r\n");
        if !answer.starts_with("HTTP/1.1 503 ") {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert_eq!(resolver.asked(), Vec::<String>::new());
    let log = proxy.stop();
    let first_refusal = &log.refused[0];
    assert_eq!(
        (first_refusal.status, first_refusal.target.as_str()),
        (503, "")
    );
    assert_eq!(first_refusal.why, "more than 1 connections at once");
    assert_eq!(log.refused.last().map(|r| r.status), Some(405));
}

#[test]
fn an_idle_tunnel_is_closed() {
    let mut limits = limits();
    limits.idle_timeout = Duration::from_millis(200);
    let (proxy, client, _port, _dir) = open_tunnel(Via::Tcp, limits);
    let started = Instant::now();
    assert_eof(&client);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    proxy.stop();
}
