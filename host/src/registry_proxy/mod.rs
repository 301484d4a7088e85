//! The registry proxy: the only way out of the sandbox while a check's dependency environment
//! is built from the repository's lockfile.
//!
//! Installing from a lockfile (pip, uv, npm, cargo) must reach the package registries and
//! nothing else: an install script that phones home, or a lockfile that names a service on the
//! host's network, must fail the build with the host named instead of reaching it. So the
//! sandbox's network reaches only this proxy, and the package tools are given
//! `HTTPS_PROXY=http://127.0.0.1:3128`: the Executor relays the connections a build's run
//! makes to that port to this proxy's Unix socket ([`sf_contracts::RunNetwork`]). The proxy serves HTTP/1.1 `CONNECT host:port` to the
//! hosts and ports of an allow list ([`ProxyConfig`]) and relays the bytes (TLS end to end: it
//! never sees inside a tunnel), answers anything else with an HTTP error, and records both
//! ([`ProxyLog`]): the registries reached with their byte counts, every refusal with its reason.
//!
//! Whatever a client sends is hostile. The request is read within a byte and a time bound; an
//! IP literal (in any form a resolver reads as one), an unlisted host or an unlisted port is
//! refused before anything is resolved; a listed name that resolves to a loopback, private or
//! link-local address is refused before any connection, so that a registry's name (or a DNS
//! answer) can never lead to a local service. std threads only: one accepts, one serves each
//! connection (at most [`ProxyLimits::max_connections`] at once), and each tunnel relays its
//! second direction on a scoped thread of its own; [`RegistryProxy::stop`] ends them all.
//!
//! The listener may come from another process and live in another network namespace
//! ([`ProxyListener::from_fd`]): the proxy accepts there, and connects out from its own.
//!
//! Files, one job each:
//! - `config`: what the proxy lets through and its bounds, and their check;
//! - `names`: host names, allow entries and the forms a resolver reads as an address;
//! - `error`: why a proxy could not start;
//! - `listener`: the socket accepted on, and checking one received as a descriptor;
//! - `stream`: a connection's socket, TCP or Unix;
//! - `shared`: what the threads share, and the open sockets a stop shuts down;
//! - `serve`: the accept thread and each connection's thread;
//! - `head`: reading a request's head within its bounds;
//! - `target`: what a request line asks for, or why it is refused;
//! - `refusal`: answering and logging a refusal;
//! - `connect`: resolving, the private-address rule, and connecting;
//! - `relay`: a tunnel's two directions;
//! - `log`: the log [`RegistryProxy::stop`] returns.

mod config;
mod connect;
mod error;
mod head;
mod listener;
mod log;
mod names;
mod refusal;
mod relay;
mod serve;
mod shared;
mod stream;
mod target;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

pub use config::{ProxyConfig, ProxyLimits};
pub use connect::{Resolve, SystemResolver};
pub use error::{ListenerProblem, ProxyError};
pub use listener::ProxyListener;
pub use log::{LOG_ENTRIES, ProxyLog, Reached, Refused, TARGET_CHARS};
pub use names::AllowRule;

use serve::accept_loop;
use shared::Shared;

/// A running proxy. [`RegistryProxy::stop`] ends it and returns its log; dropping it stops it
/// too, discarding the log.
pub struct RegistryProxy {
    shared: Arc<Shared>,
    accepting: Option<JoinHandle<()>>,
    local_addr: Option<SocketAddr>,
    socket_path: Option<PathBuf>,
}

impl fmt::Debug for RegistryProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryProxy")
            .field("local_addr", &self.local_addr)
            .field("socket_path", &self.socket_path)
            .finish_non_exhaustive()
    }
}

impl RegistryProxy {
    /// Checks `config` ([`ProxyConfig::check`]) and the listener (a listening stream socket),
    /// and starts accepting on it, resolving with the system's resolver.
    pub fn start(listener: ProxyListener, config: ProxyConfig) -> Result<Self, ProxyError> {
        Self::start_with_resolver(listener, config, SystemResolver)
    }

    /// The same, resolving registry names with `resolver`.
    pub fn start_with_resolver(
        listener: ProxyListener,
        config: ProxyConfig,
        resolver: impl Resolve + 'static,
    ) -> Result<Self, ProxyError> {
        config.check()?;
        let bound = listener.prepare()?;
        let shared = Arc::new(Shared::new(config, Box::new(resolver)));
        let accepting = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("sf-registry-proxy".into())
                .spawn(move || accept_loop(listener, shared))
                .map_err(ProxyError::Thread)?
        };
        Ok(Self {
            shared,
            accepting: Some(accepting),
            local_addr: bound.local_addr,
            socket_path: bound.socket_path,
        })
    }

    /// The TCP address the proxy accepts on (None for a Unix socket).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The path of the Unix socket the proxy accepts on (None for TCP, or an unnamed socket).
    pub fn socket_path(&self) -> Option<&Path> {
        self.socket_path.as_deref()
    }

    /// The log so far (live tunnels' bytes included up to now).
    pub fn log_so_far(&self) -> ProxyLog {
        self.shared.log().clone()
    }

    /// Stops accepting, ends every tunnel and connection (both sockets shut down), waits for
    /// every thread of the proxy to end and returns the log. A connection that is resolving a
    /// name or connecting is waited for: at most the resolver's time (the system's resolver
    /// may take seconds) and one `connect_timeout`, since no further address is tried.
    pub fn stop(mut self) -> ProxyLog {
        self.halt();
        self.shared.log().clone()
    }

    fn halt(&mut self) {
        self.shared.end_all();
        if let Some(accepting) = self.accepting.take() {
            // The accept thread joins every connection's thread before it returns; a panic in
            // it has nothing left to clean up.
            let _ = accepting.join();
        }
    }
}

impl Drop for RegistryProxy {
    fn drop(&mut self) {
        self.halt();
    }
}
