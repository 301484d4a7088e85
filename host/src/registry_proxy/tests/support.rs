//! The tests' harness: proxies on loopback TCP or Unix sockets, a resolver that notes what it
//! was asked, echo servers, a listener that tells whether anyone reached it, and clients.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::super::relay::ESTABLISHED;
use super::super::stream::Stream;
use super::super::{ProxyConfig, ProxyLimits, RegistryProxy, Resolve};

/// How long a test waits for anything the proxy should do at once.
pub(super) const WAIT: Duration = Duration::from_secs(5);

pub(super) fn limits() -> ProxyLimits {
    ProxyLimits {
        max_header_bytes: 1024,
        header_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        max_connections: 8,
    }
}

pub(super) fn config(allow: &[&str], ports: &[u16], refuse_private: bool) -> ProxyConfig {
    ProxyConfig {
        allow: allow.iter().map(|h| h.to_string()).collect(),
        ports: ports.to_vec(),
        refuse_private,
        limits: limits(),
    }
}

/// Names mapped to loopback servers (or every name to one address); every name asked is
/// noted, to show when the proxy never resolved (so never connected).
#[derive(Clone, Default)]
pub(super) struct MapResolver {
    names: HashMap<String, Vec<SocketAddr>>,
    every_name: Option<SocketAddr>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl MapResolver {
    pub(super) fn with(name: &str, addr: SocketAddr) -> Self {
        Self::default().and(name, &[addr])
    }

    /// The same, with `name` resolving to `addrs` too.
    pub(super) fn and(mut self, name: &str, addrs: &[SocketAddr]) -> Self {
        self.names.insert(name.to_owned(), addrs.to_vec());
        self
    }

    /// Every name resolves to `addr`: whatever the proxy resolved, it could reach.
    pub(super) fn every_name(addr: SocketAddr) -> Self {
        Self {
            every_name: Some(addr),
            ..Self::default()
        }
    }

    pub(super) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Resolve for MapResolver {
    fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        self.asked.lock().unwrap().push(host.to_owned());
        let addrs = self.names.get(host).cloned();
        addrs
            .or_else(|| self.every_name.map(|a| vec![a]))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Via {
    Tcp,
    Unix,
}

/// A proxy on a loopback TCP port or a Unix socket in a temporary directory (kept alive by
/// the second value).
pub(super) fn start(
    via: Via,
    config: ProxyConfig,
    resolver: impl Resolve + 'static,
) -> (RegistryProxy, Option<tempfile::TempDir>) {
    let (listener, dir) = match via {
        Via::Tcp => (TcpListener::bind("127.0.0.1:0").unwrap().into(), None),
        Via::Unix => {
            let dir = tempfile::tempdir().unwrap();
            let listener = UnixListener::bind(dir.path().join("proxy.sock")).unwrap();
            (listener.into(), Some(dir))
        }
    };
    let proxy = RegistryProxy::start_with_resolver(listener, config, resolver).unwrap();
    (proxy, dir)
}

pub(super) fn dial(proxy: &RegistryProxy) -> Stream {
    let stream = match (proxy.local_addr(), proxy.socket_path()) {
        (Some(addr), _) => Stream::Tcp(TcpStream::connect(addr).unwrap()),
        (None, Some(path)) => Stream::Unix(UnixStream::connect(path).unwrap()),
        (None, None) => panic!("the proxy has no address"),
    };
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    stream
}

/// Everything until the proxy closes (or the connection fails).
pub(super) fn read_to_close(stream: &Stream) -> String {
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    while let Ok(n @ 1..) = stream.receive(&mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn read_exact(stream: &Stream, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let mut got = 0;
    while got < len {
        match stream.receive(&mut out[got..]) {
            Ok(0) => panic!("closed after {got} of {len} bytes"),
            Ok(n) => got += n,
            Err(e) => panic!("after {got} of {len} bytes: {e}"),
        }
    }
    out
}

pub(super) fn assert_eof(stream: &Stream) {
    let mut buf = [0; 16];
    assert_eq!(
        stream.receive(&mut buf).unwrap(),
        0,
        "expected the end of the stream"
    );
}

pub(super) fn ask(proxy: &RegistryProxy, request: &[u8]) -> String {
    let stream = dial(proxy);
    stream.send(request).unwrap();
    read_to_close(&stream)
}

pub(super) fn connect_request(target: &str) -> Vec<u8> {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").into_bytes()
}

/// A loopback server that echoes one connection and half-closes when its client does.
pub(super) fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let _ = io::copy(&mut &stream, &mut &stream);
            let _ = stream.shutdown(Shutdown::Write);
        }
    });
    addr
}

/// A listener nobody should reach: accepting on it tells whether anyone did.
pub(super) fn quiet_listener() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

pub(super) fn assert_never_connected(listener: &TcpListener) {
    thread::sleep(Duration::from_millis(100));
    match listener.accept() {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        other => panic!("the listener was reached: {other:?}"),
    }
}

/// Opens a tunnel to registry.test (an echo server) and checks the `200`.
pub(super) fn open_tunnel(
    via: Via,
    limits: ProxyLimits,
) -> (RegistryProxy, Stream, u16, Option<tempfile::TempDir>) {
    let echo = echo_server();
    let mut config = config(&["registry.test"], &[echo.port()], false);
    config.limits = limits;
    let (proxy, dir) = start(via, config, MapResolver::with("registry.test", echo));
    let client = dial(&proxy);
    client
        .send(&connect_request(&format!("registry.test:{}", echo.port())))
        .unwrap();
    assert_eq!(read_exact(&client, ESTABLISHED.len()), ESTABLISHED);
    (proxy, client, echo.port(), dir)
}
