//! Why a proxy could not start: a configuration that would not mean what it says, or a socket
//! that cannot be accepted on.

use std::fmt;
use std::io;

use super::names::AllowRule;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// An allow entry is not a host name the proxy can match.
    #[error("registry proxy: allow entry {entry:?} {rule}; {fix}", fix = .rule.fix())]
    AllowEntry {
        /// The entry as configured.
        entry: String,
        /// The rule it breaks.
        rule: AllowRule,
    },
    /// No port is allowed, so no request could be served.
    #[error("registry proxy: no port is allowed; list the registries' ports (443 for HTTPS)")]
    NoPorts,
    /// Port 0 is among the allowed ports.
    #[error("registry proxy: port 0 is among the allowed ports; nothing listens there, remove it")]
    PortZero,
    /// A limit is zero, so no request could be served.
    #[error(
        "registry proxy: limits.{0} is zero, so no request could be served; give it a positive value"
    )]
    ZeroLimit(&'static str),
    /// The socket given to accept on is not a listening stream socket the proxy can serve.
    #[error(
        "registry proxy: the socket given to accept on {0}; pass a TCP or Unix stream socket \
         on which listen() was called"
    )]
    NotAListener(ListenerProblem),
    /// The listener's address or kind could not be read, or it could not be made nonblocking.
    #[error(
        "registry proxy: the listener could not be prepared ({0}); pass a bound, listening socket"
    )]
    Listener(io::Error),
    /// The accept thread could not be started.
    #[error(
        "registry proxy: the accept thread could not be started ({0}); the system is out of \
         threads or memory, start the proxy again once fewer processes run"
    )]
    Thread(io::Error),
}

/// What is wrong with a socket given to accept on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerProblem {
    /// The descriptor is not a socket.
    NotASocket,
    /// The socket is not a stream socket (a datagram or sequenced-packet socket).
    NotStream,
    /// The socket is neither an IPv4, IPv6 nor Unix socket.
    Family,
    /// listen() was not called on the socket, so no connection can be accepted.
    NotListening,
}

impl fmt::Display for ListenerProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotASocket => "is not a socket",
            Self::NotStream => "is not a stream socket",
            Self::Family => "is neither an IPv4, IPv6 nor Unix socket",
            Self::NotListening => "is not listening",
        })
    }
}
