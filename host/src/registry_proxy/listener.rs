//! The socket the proxy accepts on: TCP or Unix, bound by the proxy's owner or received as a
//! descriptor from another process (and so possibly from another network namespace), checked
//! to be a listening stream socket before the proxy starts.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::error::{ListenerProblem, ProxyError};
use super::stream::Stream;

/// The socket the proxy accepts on: TCP, or a Unix socket (the sandbox's side reaches the
/// proxy through one, forwarded to the address its tools are given).
///
/// The socket may live in another network namespace than the proxy's: a listener created
/// inside the sandbox's namespace and passed over as a descriptor ([`ProxyListener::from_fd`])
/// accepts the sandbox's connections there, while every outbound connection the proxy makes is
/// from the namespace of the proxy's own threads.
#[derive(Debug)]
pub enum ProxyListener {
    /// A bound, listening TCP socket.
    Tcp(TcpListener),
    /// A bound, listening Unix socket.
    Unix(UnixListener),
}

impl From<TcpListener> for ProxyListener {
    fn from(listener: TcpListener) -> Self {
        Self::Tcp(listener)
    }
}

impl From<UnixListener> for ProxyListener {
    fn from(listener: UnixListener) -> Self {
        Self::Unix(listener)
    }
}

/// Where a proxy accepts, as its owner may ask.
pub(super) struct Bound {
    pub(super) local_addr: Option<SocketAddr>,
    pub(super) socket_path: Option<PathBuf>,
}

impl ProxyListener {
    /// A listening socket received as a descriptor (over a Unix socket from another process,
    /// say): TCP when it is an IPv4 or IPv6 stream socket, Unix when it is a Unix stream
    /// socket; refused when it is neither, or not a socket. Whether it listens is checked when
    /// the proxy starts.
    pub fn from_fd(fd: OwnedFd) -> Result<Self, ProxyError> {
        let problem = |problem| Err(ProxyError::NotAListener(problem));
        match int_option(fd.as_fd(), libc::SO_TYPE) {
            Ok(libc::SOCK_STREAM) => {}
            Ok(_) => return problem(ListenerProblem::NotStream),
            Err(e) if e.raw_os_error() == Some(libc::ENOTSOCK) => {
                return problem(ListenerProblem::NotASocket);
            }
            Err(e) => return Err(ProxyError::Listener(e)),
        }
        match int_option(fd.as_fd(), libc::SO_DOMAIN).map_err(ProxyError::Listener)? {
            libc::AF_INET | libc::AF_INET6 => Ok(Self::Tcp(fd.into())),
            libc::AF_UNIX => Ok(Self::Unix(fd.into())),
            _ => problem(ListenerProblem::Family),
        }
    }

    /// Checks that the socket listens, notes where, and makes it nonblocking: std cannot
    /// interrupt a blocking accept, so the accept thread polls. A descriptor shared with
    /// another process shares this mode (it belongs to the open socket, not the descriptor).
    pub(super) fn prepare(&self) -> Result<Bound, ProxyError> {
        let fd = match self {
            Self::Tcp(l) => l.as_fd(),
            Self::Unix(l) => l.as_fd(),
        };
        if int_option(fd, libc::SO_ACCEPTCONN).map_err(ProxyError::Listener)? == 0 {
            return Err(ProxyError::NotAListener(ListenerProblem::NotListening));
        }
        let bound = match self {
            Self::Tcp(l) => Bound {
                local_addr: Some(l.local_addr().map_err(ProxyError::Listener)?),
                socket_path: None,
            },
            Self::Unix(l) => Bound {
                local_addr: None,
                socket_path: l
                    .local_addr()
                    .map_err(ProxyError::Listener)?
                    .as_pathname()
                    .map(Path::to_path_buf),
            },
        };
        match self {
            Self::Tcp(l) => l.set_nonblocking(true),
            Self::Unix(l) => l.set_nonblocking(true),
        }
        .map_err(ProxyError::Listener)?;
        Ok(bound)
    }

    pub(super) fn accept(&self) -> io::Result<Stream> {
        match self {
            Self::Tcp(listener) => listener.accept().map(|(s, _)| Stream::Tcp(s)),
            Self::Unix(listener) => listener.accept().map(|(s, _)| Stream::Unix(s)),
        }
    }
}

/// An integer socket option at SOL_SOCKET level (std has no call for SO_TYPE, SO_DOMAIN or
/// SO_ACCEPTCONN; nix reads SO_TYPE into an enum, which an unknown type would not fit).
fn int_option(fd: BorrowedFd<'_>, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    // 4: the size of an int, which no socklen_t truncates.
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid descriptor for the call's duration, and an int with its length for the
    // kernel to fill; the kernel writes at most `len` bytes.
    let done = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&raw mut value).cast(),
            &mut len,
        )
    };
    if done == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}
