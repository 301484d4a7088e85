//! A listener the proxy did not bind: received as a descriptor (as from a process in another
//! network namespace), in blocking mode, checked to be a listening stream socket.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;

use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, bind, socket};

use super::super::relay::ESTABLISHED;
use super::super::{ListenerProblem, ProxyError, ProxyListener, RegistryProxy};
use super::support::{MapResolver, config, connect_request, dial, echo_server, read_exact};

/// Serves one tunnel through `listener` and returns the bytes the log counted up.
fn serve_through(listener: ProxyListener, echo: SocketAddr) -> u64 {
    let config = config(&["registry.test"], &[echo.port()], false);
    let resolver = MapResolver::with("registry.test", echo);
    let proxy = RegistryProxy::start_with_resolver(listener, config, resolver).unwrap();
    let client = dial(&proxy);
    client
        .send(&connect_request(&format!("registry.test:{}", echo.port())))
        .unwrap();
    assert_eq!(read_exact(&client, ESTABLISHED.len()), ESTABLISHED);
    client.send(b"through").unwrap();
    assert_eq!(read_exact(&client, 7), b"through");
    let log = proxy.stop();
    log.reached.first().map_or(0, |r| r.bytes_up)
}

#[test]
fn a_tcp_listener_received_as_a_descriptor_is_served() {
    // Bound and listening elsewhere, blocking, and handed over as a bare descriptor.
    let bound = TcpListener::bind("127.0.0.1:0").unwrap();
    let fd = OwnedFd::from(bound);
    let listener = ProxyListener::from(TcpListener::from(fd));
    assert_eq!(serve_through(listener, echo_server()), 7);

    let fd = OwnedFd::from(TcpListener::bind("127.0.0.1:0").unwrap());
    let listener = ProxyListener::from_fd(fd).unwrap();
    assert!(matches!(listener, ProxyListener::Tcp(_)), "{listener:?}");
    assert_eq!(serve_through(listener, echo_server()), 7);
}

#[test]
fn a_unix_listener_received_as_a_descriptor_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.sock");
    let fd = OwnedFd::from(UnixListener::bind(&path).unwrap());
    let listener = ProxyListener::from_fd(fd).unwrap();
    assert!(matches!(listener, ProxyListener::Unix(_)), "{listener:?}");
    assert_eq!(serve_through(listener, echo_server()), 7);
}

#[test]
fn a_descriptor_that_is_not_a_listening_stream_socket_is_refused() {
    let problem = |result: Result<ProxyListener, ProxyError>| match result {
        Err(ProxyError::NotAListener(problem)) => problem,
        other => panic!("{other:?}"),
    };
    let udp = OwnedFd::from(UdpSocket::bind("127.0.0.1:0").unwrap());
    assert_eq!(
        problem(ProxyListener::from_fd(udp)),
        ListenerProblem::NotStream
    );
    let file = OwnedFd::from(tempfile::tempfile().unwrap());
    assert_eq!(
        problem(ProxyListener::from_fd(file)),
        ListenerProblem::NotASocket
    );

    // Bound, but listen() never called: taken as a Unix socket, refused when the proxy
    // starts (its accept would fail forever).
    let dir = tempfile::tempdir().unwrap();
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    let path = UnixAddr::new(&dir.path().join("bound.sock")).unwrap();
    bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &path).unwrap();
    let listener = ProxyListener::from_fd(fd).unwrap();
    assert!(matches!(listener, ProxyListener::Unix(_)), "{listener:?}");
    let started = RegistryProxy::start(listener, config(&["registry.test"], &[443], true));
    match started {
        Err(e @ ProxyError::NotAListener(ListenerProblem::NotListening)) => assert_eq!(
            e.to_string(),
            "registry proxy: the socket given to accept on is not listening; pass a TCP or Unix \
             stream socket on which listen() was called"
        ),
        other => panic!("{other:?}"),
    }
}
