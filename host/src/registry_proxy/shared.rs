//! What the accept thread, the connections' threads and the stop share: the configuration, the
//! resolver, the log, and the table of open sockets through which a stop ends every
//! connection.

use std::collections::HashMap;
use std::net::Shutdown;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::config::ProxyConfig;
use super::connect::Resolve;
use super::log::{ProxyLog, Refused, shown};
use super::refusal::Refusal;
use super::relay::Direction;
use super::stream::Stream;

/// What the accept thread and the connections share.
pub(super) struct Shared {
    pub(super) config: ProxyConfig,
    pub(super) resolver: Box<dyn Resolve>,
    log: Mutex<ProxyLog>,
    live: Mutex<Live>,
}

/// The open connections' sockets, so that a stop can shut them down, and whether it has.
#[derive(Default)]
struct Live {
    stopping: bool,
    next_id: u64,
    open: HashMap<u64, Vec<Arc<Stream>>>,
}

/// A connection's place among the open ones, freed when the connection ends.
pub(super) struct Slot {
    pub(super) shared: Arc<Shared>,
    pub(super) id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.live().open.remove(&self.id);
    }
}

/// Whether a new connection is served.
pub(super) enum Admission {
    Open(Slot),
    Full,
    Stopping,
}

impl Shared {
    pub(super) fn new(config: ProxyConfig, resolver: Box<dyn Resolve>) -> Self {
        Self {
            config,
            resolver,
            log: Mutex::default(),
            live: Mutex::default(),
        }
    }

    // A thread that panicked while holding a lock left the log or the table whole (each update
    // is one push, add or insert), so a poisoned lock is used as it is.
    pub(super) fn log(&self) -> MutexGuard<'_, ProxyLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stopping(&self) -> bool {
        self.live().stopping
    }

    /// A slot for `client`, unless `max_connections` are open or the proxy is stopping.
    pub(super) fn admit(self: &Arc<Self>, client: &Arc<Stream>) -> Admission {
        let mut live = self.live();
        if live.stopping {
            return Admission::Stopping;
        }
        if live.open.len() >= self.config.limits.max_connections {
            return Admission::Full;
        }
        let id = live.next_id;
        live.next_id += 1;
        live.open.insert(id, vec![Arc::clone(client)]);
        Admission::Open(Slot {
            shared: Arc::clone(self),
            id,
        })
    }

    /// Adds a tunnel's upstream socket to its slot; false when a stop came first (checked under
    /// the same lock as the stop's sweep, so no socket escapes it).
    pub(super) fn attach(&self, id: u64, upstream: &Arc<Stream>) -> bool {
        let mut live = self.live();
        if live.stopping {
            return false;
        }
        match live.open.get_mut(&id) {
            Some(sockets) => {
                sockets.push(Arc::clone(upstream));
                true
            }
            None => false,
        }
    }

    /// Marks the proxy stopping and shuts down every open socket: blocked reads and writes
    /// return, and each connection's thread ends.
    pub(super) fn end_all(&self) {
        let mut live = self.live();
        live.stopping = true;
        for socket in live.open.values().flatten() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// Logs `refusal` of a request for `target` (as the client sent it).
    pub(super) fn record_refused(&self, target: &[u8], refusal: &Refusal) {
        self.log().add_refused(Refused {
            target: shown(target),
            status: refusal.status,
            why: refusal.why.clone(),
        });
    }

    /// The log entry of `host:port`, added if new (None when the list is full).
    pub(super) fn record_reached(&self, host: &str, port: u16) -> Option<usize> {
        self.log().reached_entry(host, port)
    }

    pub(super) fn record_moved(&self, entry: Option<usize>, direction: Direction, bytes: usize) {
        self.log().add_moved(entry, direction, bytes);
    }
}
