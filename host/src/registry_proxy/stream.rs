//! A connection's socket, TCP or Unix, behind one set of methods: what the request reader,
//! the relay and the stop's sweep all use.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A connection's socket: a client's (TCP or Unix) or a tunnel's upstream (TCP). Shared by
/// reference between a tunnel's two directions and with the stop's sweep.
#[derive(Debug)]
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn receive(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => (&mut &*s).read(buf),
            Self::Unix(s) => (&mut &*s).read(buf),
        }
    }

    /// Writes all of `buf`. std sends with MSG_NOSIGNAL on both kinds of socket, so a client
    /// that has gone away is an EPIPE error here, never a SIGPIPE.
    pub(super) fn send(&self, buf: &[u8]) -> io::Result<()> {
        match self {
            Self::Tcp(s) => (&mut &*s).write_all(buf),
            Self::Unix(s) => (&mut &*s).write_all(buf),
        }
    }

    pub(super) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.shutdown(how),
            Self::Unix(s) => s.shutdown(how),
        }
    }

    pub(super) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(timeout),
            Self::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    pub(super) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_write_timeout(timeout),
            Self::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    pub(super) fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_nonblocking(nonblocking),
            Self::Unix(s) => s.set_nonblocking(nonblocking),
        }
    }
}

/// Whether `e` is a read or write timeout (std reports a socket timeout as WouldBlock).
pub(super) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
