//! Stopping: `stop` and `Drop` end every tunnel and connection and return only once every
//! connection's thread has ended.

use std::io;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::super::{Reached, Resolve};
use super::support::{
    MapResolver, Via, WAIT, assert_eof, config, connect_request, dial, echo_server, limits,
    open_tunnel, read_exact, read_to_close, start,
};

#[test]
fn stop_ends_a_live_tunnel() {
    let (proxy, client, port, _dir) = open_tunnel(Via::Unix, limits());
    client.send(b"ping").unwrap();
    assert_eq!(read_exact(&client, 4), b"ping");
    assert_eq!(proxy.log_so_far().reached.len(), 1);
    let started = Instant::now();
    let log = proxy.stop();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eof(&client);
    let reached = Reached {
        host: "registry.test".into(),
        port,
        bytes_up: 4,
        bytes_down: 4,
    };
    assert_eq!(log.reached, vec![reached]);
}

#[test]
fn dropping_the_proxy_ends_a_live_tunnel() {
    let (proxy, client, _port, _dir) = open_tunnel(Via::Tcp, limits());
    let started = Instant::now();
    drop(proxy);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eof(&client);
}

#[test]
fn stop_ends_a_request_still_arriving_without_waiting_for_its_timeout() {
    let mut config = config(&["registry.test"], &[443], true);
    config.limits.header_timeout = WAIT;
    let (proxy, _dir) = start(Via::Tcp, config, MapResolver::default());
    let client = dial(&proxy);
    client.send(b"CONNECT registry.test:4").unwrap();
    // Wait until the proxy is reading it.
    thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let log = proxy.stop();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(read_to_close(&client), "");
    // Ended by the stop, not refused: nothing to record.
    assert_eq!(log.refused, vec![]);
}

/// Takes its time over one name, telling the test when it started.
struct SlowResolver {
    started: Mutex<mpsc::Sender<()>>,
    delay: Duration,
    addr: SocketAddr,
    returned: Arc<Mutex<bool>>,
}

impl Resolve for SlowResolver {
    fn resolve(&self, _host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        let _ = self.started.lock().unwrap().send(());
        thread::sleep(self.delay);
        *self.returned.lock().unwrap() = true;
        Ok(vec![self.addr])
    }
}

/// A connection's thread still resolving when the stop comes is waited for: the stop returns
/// after it has ended, with its refusal logged, and no tunnel is opened.
#[test]
fn stop_waits_for_a_connection_that_is_resolving() {
    let echo = echo_server();
    let (started_tx, started_rx) = mpsc::channel();
    let returned = Arc::new(Mutex::new(false));
    let resolver = SlowResolver {
        started: Mutex::new(started_tx),
        delay: Duration::from_millis(300),
        addr: echo,
        returned: Arc::clone(&returned),
    };
    let config = config(&["registry.test"], &[echo.port()], false);
    let (proxy, _dir) = start(Via::Tcp, config, resolver);
    let client = dial(&proxy);
    client
        .send(&connect_request(&format!("registry.test:{}", echo.port())))
        .unwrap();
    started_rx.recv_timeout(WAIT).unwrap();
    let log = proxy.stop();
    assert!(*returned.lock().unwrap(), "stop returned while resolving");
    assert_eq!(log.reached, vec![]);
    assert_eq!(log.refused.len(), 1, "{:?}", log.refused);
    assert_eq!(
        (log.refused[0].status, log.refused[0].why.as_str()),
        (503, "the proxy is stopping")
    );
    assert_eq!(read_to_close(&client), "");
}
