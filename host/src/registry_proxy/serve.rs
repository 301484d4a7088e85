//! The proxy's threads: one accepts and admits (at most `max_connections` at once, one more is
//! answered `503`), one serves each connection from its request to its tunnel's end, and the
//! accept thread joins them all once a stop ends accepting.

use std::io;
use std::net::Shutdown;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::connect::connect;
use super::head::{HeadError, read_head};
use super::listener::ProxyListener;
use super::refusal::{Refusal, refuse};
use super::relay::tunnel;
use super::shared::{Admission, Shared, Slot};
use super::stream::Stream;
use super::target::{destination, requested};

/// How often the accept thread looks for a connection or a stop: std cannot interrupt a
/// blocking accept, so the listener is nonblocking and polled.
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// Accepts until a stop, then joins every connection's thread.
pub(super) fn accept_loop(listener: ProxyListener, shared: Arc<Shared>) {
    let mut serving: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stopping() {
        let client = match listener.accept() {
            Ok(client) => Arc::new(client),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Nothing waiting (WouldBlock), or a failure the next accept may not have (out of
            // descriptors, a connection aborted in the queue): wait a tick either way, never
            // spin.
            Err(_) => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        serving.retain(|handle| !handle.is_finished());
        if let Some(handle) = dispatch(client, &shared) {
            serving.push(handle);
        }
    }
    // Connections still queued are reset now rather than after the joins.
    drop(listener);
    for handle in serving {
        let _ = handle.join();
    }
}

/// Starts serving `client` on a thread of its own, or answers `503` when too many are open.
fn dispatch(client: Arc<Stream>, shared: &Arc<Shared>) -> Option<JoinHandle<()>> {
    // An accepted socket may inherit the listener's nonblocking mode (it does on BSDs).
    client.set_nonblocking(false).ok()?;
    match shared.admit(&client) {
        Admission::Open(slot) => {
            let spawned = thread::Builder::new()
                .name("sf-registry-proxy-conn".into())
                .spawn(move || serve(&client, &slot));
            match spawned {
                Ok(handle) => Some(handle),
                Err(e) => {
                    let why = format!("no thread could serve the connection ({e})");
                    shared.record_refused(b"", &Refusal::new(503, why));
                    None
                }
            }
        }
        Admission::Full => {
            busy(&client, shared);
            None
        }
        Admission::Stopping => None,
    }
}

/// Answers `503` on the accept thread without waiting: the answer fits in a fresh socket's send
/// buffer, and a client that never reads must not hold up accepting.
fn busy(client: &Stream, shared: &Shared) {
    let max = shared.config.limits.max_connections;
    let refusal = Refusal::new(503, format!("more than {max} connections at once"));
    shared.record_refused(b"", &refusal);
    if client.set_nonblocking(true).is_ok() {
        let _ = client.send(&refusal.response());
        let _ = client.shutdown(Shutdown::Write);
    }
}

/// One connection: read the request, refuse it or open its tunnel.
fn serve(client: &Stream, slot: &Slot) {
    let shared = &*slot.shared;
    let head = match read_head(client, &shared.config.limits) {
        Ok(head) => head,
        Err(HeadError::Closed(line)) => {
            // Nothing asked (a probe), or a stop ended the read: nothing to answer or record.
            if !line.is_empty() && !shared.stopping() {
                let refusal = Refusal::new(
                    400,
                    "the client closed before the end of the header section",
                );
                shared.record_refused(requested(&line), &refusal);
            }
            return;
        }
        Err(HeadError::Refused(line, refusal)) => return refuse(client, shared, &line, &refusal),
    };
    let opened = destination(&head.line, &shared.config)
        .and_then(|(host, port)| Ok((connect(&host, port, shared)?, host, port)));
    match opened {
        Ok((upstream, host, port)) => tunnel(client, upstream, (&host, port), &head.rest, slot),
        Err(refusal) => refuse(client, shared, &head.line, &refusal),
    }
}
