//! An environment build's relay: each connection the run makes to its proxy port, accepted
//! on the listener the launcher handed over (it lives in the run's network namespace), is
//! joined byte for byte to a new connection to the caller's proxy socket on the host. The
//! relay decides nothing about where the run may go: the caller's proxy does, and records it.
//! It only bounds how many connections are relayed at once.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The most connections relayed at once; one more is closed at once (the proxy bounds its
/// own connections too).
const MAX_CONNECTIONS: usize = 64;
/// How often the accept loop looks for a connection or a stop: std cannot interrupt a
/// blocking accept, so the listener is nonblocking and polled.
const ACCEPT_POLL: Duration = Duration::from_millis(10);
/// The most problems kept; the rest are counted.
const MAX_PROBLEMS: usize = 8;

/// A relay running until [`Relay::stop`].
pub(crate) struct Relay {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What the accept loop and the connections share.
struct Shared {
    stop: AtomicBool,
    /// Both sides of every open connection, shut down on stop.
    open: Mutex<Vec<(TcpStream, UnixStream)>>,
    problems: Mutex<(Vec<String>, usize)>,
}

impl Shared {
    fn problem(&self, problem: String) {
        let mut problems = self.problems.lock().unwrap_or_else(PoisonError::into_inner);
        if problems.0.len() < MAX_PROBLEMS {
            problems.0.push(problem);
        } else {
            problems.1 += 1;
        }
    }
}

impl Relay {
    /// Relays every connection accepted on `listener` to the Unix socket at `proxy`.
    pub(crate) fn start(listener: OwnedFd, proxy: PathBuf) -> Self {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
            problems: Mutex::new((Vec::new(), 0)),
        });
        let listener = TcpListener::from(listener);
        let accepting = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("sf-sandbox-relay".into())
            .spawn(move || accept_loop(&listener, &proxy, &accepting));
        let thread = match thread {
            Ok(thread) => Some(thread),
            Err(error) => {
                shared.problem(format!("the relay to the proxy did not start: {error}"));
                None
            }
        };
        Self { shared, thread }
    }

    /// Stops accepting, closes every open connection, waits for them, and answers what went
    /// wrong in the relay itself (empty normally).
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.halt();
        let mut problems = self
            .shared
            .problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut all = std::mem::take(&mut problems.0);
        if problems.1 > 0 {
            all.push(format!("and {} more relay problems", problems.1));
        }
        all
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Accepts until stopped; then shuts every open connection down and joins their threads.
fn accept_loop(listener: &TcpListener, proxy: &PathBuf, shared: &Arc<Shared>) {
    if let Err(error) = listener.set_nonblocking(true) {
        shared.problem(format!("the relay's listener: {error}"));
        return;
    }
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        connections.retain(|connection| !connection.is_finished());
        match listener.accept() {
            Ok((client, _)) if connections.len() >= MAX_CONNECTIONS => {
                let _ = client.shutdown(Shutdown::Both);
            }
            Ok((client, _)) => match start_connection(client, proxy, shared) {
                Ok(connection) => connections.push(connection),
                Err(problem) => shared.problem(problem),
            },
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_POLL)
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                shared.problem(format!("accepting the run's connection: {error}"));
                std::thread::sleep(ACCEPT_POLL);
            }
        }
    }
    for (client, upstream) in shared
        .open
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain(..)
    {
        let _ = client.shutdown(Shutdown::Both);
        let _ = upstream.shutdown(Shutdown::Both);
    }
    for connection in connections {
        let _ = connection.join();
    }
}

/// Connects to the proxy for `client` and relays both ways on a thread of its own.
fn start_connection(
    client: TcpStream,
    proxy: &PathBuf,
    shared: &Arc<Shared>,
) -> Result<JoinHandle<()>, String> {
    client
        .set_nonblocking(false)
        .map_err(|error| format!("the run's connection: {error}"))?;
    let upstream = UnixStream::connect(proxy)
        .map_err(|error| format!("connecting to the proxy {}: {error}", proxy.display()))?;
    let kept = client
        .try_clone()
        .and_then(|client| Ok((client, upstream.try_clone()?)))
        .map_err(|error| format!("the run's connection: {error}"))?;
    shared
        .open
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(kept);
    std::thread::Builder::new()
        .name("sf-sandbox-relay-connection".into())
        .spawn(move || relay(client, upstream))
        .map_err(|error| format!("a relay thread: {error}"))
}

/// Copies each way until both have ended; an end or an error on one side shuts the other's
/// matching direction, so that neither waits for ever.
fn relay(client: TcpStream, upstream: UnixStream) {
    let (Ok(client_out), Ok(upstream_in)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            copy(&client, &upstream_in);
            let _ = upstream_in.shutdown(Shutdown::Write);
        });
        copy(&upstream, &client_out);
        let _ = client_out.shutdown(Shutdown::Write);
    });
}

/// Copies until the reader ends or either side fails.
fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buffer = vec![0u8; 32 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) => return,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    return;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A connection to the listener reaches the proxy socket with its bytes both ways, and
    /// stopping ends connections still open.
    #[test]
    fn connections_reach_the_proxy_both_ways_and_stop_ends_them() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let proxy = UnixListener::bind(&socket).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let relay = Relay::start(OwnedFd::from(listener), socket.clone());
        let server = std::thread::spawn(move || {
            let (mut upstream, _) = proxy.accept().unwrap();
            let mut asked = [0u8; 5];
            upstream.read_exact(&mut asked).unwrap();
            upstream.write_all(b"pong!").unwrap();
            // Held open: the relay's stop must end the connection anyway.
            let mut rest = Vec::new();
            let _ = upstream.read_to_end(&mut rest);
            asked
        });
        let mut client = TcpStream::connect(address).unwrap();
        client.write_all(b"ping!").unwrap();
        let mut answer = [0u8; 5];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"pong!");
        assert!(relay.stop().is_empty());
        assert_eq!(&server.join().unwrap(), b"ping!");
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).unwrap_or(0), 0);
    }

    /// A proxy that is not there is a problem the relay reports, and the run's connection is
    /// closed.
    #[test]
    fn a_missing_proxy_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let relay = Relay::start(OwnedFd::from(listener), dir.path().join("gone.sock"));
        let mut client = TcpStream::connect(address).unwrap();
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).unwrap_or(0), 0);
        let problems = relay.stop();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("gone.sock"), "{problems:?}");
    }
}
