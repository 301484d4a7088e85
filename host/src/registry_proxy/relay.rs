//! A tunnel once its registry answered: the `200`, then the bytes relayed both ways (TLS end
//! to end: the proxy never sees inside) until both sides close, a stop, or idleness.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::shared::{Shared, Slot};
use super::stream::{Stream, timed_out};

/// What a client reads once its tunnel is open.
pub(super) const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";
/// The bytes a tunnel relays at a time.
const RELAY_CHUNK: usize = 32 * 1024;

/// Which way bytes move through a tunnel.
#[derive(Clone, Copy, Debug)]
pub(super) enum Direction {
    /// Client to registry.
    Up,
    /// Registry to client.
    Down,
}

/// Opens the tunnel (`200`), sends `rest` (what the client sent after its request) and relays
/// until both sides have closed, a stop, or `idle_timeout` with nothing moving.
pub(super) fn tunnel(
    client: &Stream,
    upstream: TcpStream,
    (host, port): (&str, u16),
    rest: &[u8],
    slot: &Slot,
) {
    let shared = &*slot.shared;
    let _ = upstream.set_nodelay(true);
    let upstream = Arc::new(Stream::Tcp(upstream));
    if !shared.attach(slot.id, &upstream) {
        return;
    }
    let idle = shared.config.limits.idle_timeout;
    // Reads wake every tick to see whether the whole tunnel has been idle; a write that makes
    // no progress for idle_timeout (a client that never reads) ends it.
    let tick = (idle / 4).clamp(Duration::from_millis(1), Duration::from_secs(1));
    let bounded = [client, &*upstream].iter().all(|socket| {
        socket.set_read_timeout(Some(tick)).is_ok() && socket.set_write_timeout(Some(idle)).is_ok()
    });
    // Recorded as reached once connected, whether or not the client stays for the 200.
    let entry = shared.record_reached(host, port);
    if !bounded || client.send(ESTABLISHED).is_err() {
        return;
    }
    let relay = Relay {
        shared,
        entry,
        idle,
        start: Instant::now(),
        last_moved_ms: AtomicU64::new(0),
    };
    if !rest.is_empty() {
        if upstream.send(rest).is_err() {
            return relay.end(client, &upstream);
        }
        shared.record_moved(relay.entry, Direction::Up, rest.len());
    }
    thread::scope(|scope| {
        let down = thread::Builder::new()
            .name("sf-registry-proxy-down".into())
            .spawn_scoped(scope, || relay.pump(&upstream, client, Direction::Down));
        if down.is_err() {
            return relay.end(client, &upstream);
        }
        relay.pump(client, &upstream, Direction::Up);
    });
}

/// One tunnel's relay. Both directions share when bytes last moved: a long download while the
/// client says nothing is not idle.
struct Relay<'a> {
    shared: &'a Shared,
    entry: Option<usize>,
    idle: Duration,
    start: Instant,
    last_moved_ms: AtomicU64,
}

impl Relay<'_> {
    /// Copies `from` to `to` until `from` ends (then half-closes `to`: the other direction
    /// goes on), or until an error or idleness ends the whole tunnel.
    fn pump(&self, from: &Stream, to: &Stream, direction: Direction) {
        let mut buf = vec![0; RELAY_CHUNK];
        loop {
            match from.receive(&mut buf) {
                Ok(0) => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => {
                    self.touch();
                    if to.send(&buf[..n]).is_err() {
                        return self.end(from, to);
                    }
                    self.touch();
                    self.shared.record_moved(self.entry, direction, n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if timed_out(&e) && !self.is_idle() => {}
                Err(_) => return self.end(from, to),
            }
        }
    }

    /// Ends both directions: the other pump's read returns at once.
    fn end(&self, a: &Stream, b: &Stream) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_moved_ms.store(now, Ordering::Relaxed);
    }

    fn is_idle(&self) -> bool {
        let last = Duration::from_millis(self.last_moved_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last) >= self.idle
    }
}
