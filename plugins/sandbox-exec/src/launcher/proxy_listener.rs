//! An environment build's only way out: in the run's own network namespace, the loopback
//! brought up and a listener on the proxy's port, whose descriptor goes to the supervisor
//! (which relays each connection to the caller's proxy on the host). The program gets no
//! other interface, no route and no address but this one; Landlock lets it connect to this
//! port only.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::plan::Report;

use super::sys::{Failure, Step};
use super::{SOCKET, report_with_descriptor};

/// Brings up the loopback of the launcher's (new) network namespace, listens on
/// `127.0.0.1:port` and hands the listener to the supervisor. Needs the network
/// administration capability over the namespace, which the launcher holds in the user
/// namespace it made.
pub fn open(port: u16) -> Step {
    loopback_up()?;
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .map_err(|error| failure(format!("listening on 127.0.0.1:{port}: {error}")))?;
    let listener = OwnedFd::from(listener);
    report_with_descriptor(SOCKET, &Report::Listening { port }, listener.as_raw_fd())
        .map_err(|error| failure(format!("handing the listener over: {error}")))
    // The launcher's copy closes here: the supervisor holds the listener now.
}

/// Sets the `lo` interface up (`SIOCSIFFLAGS`), the way `ip link set lo up` does.
fn loopback_up() -> Step {
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(failure(format!(
            "a socket to set the loopback up: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a descriptor just opened and owned by no one else.
    let socket = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: a zeroed ifreq is a valid value; the name is written within its bounds.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS and SIOCSIFFLAGS read and write the ifreq given.
    unsafe {
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) != 0 {
            return Err(failure(format!(
                "reading the loopback's flags: {}",
                std::io::Error::last_os_error()
            )));
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) != 0 {
            return Err(failure(format!(
                "setting the loopback up: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

fn failure(detail: String) -> Failure {
    Failure::new("network-namespace", detail)
}
