//! Answering a request the proxy does not serve: the status and one line of why, logged
//! first, then answered and closed without resetting the connection.

use std::net::Shutdown;
use std::time::{Duration, Instant};

use sf_io::text_escape;

use super::shared::Shared;
use super::stream::Stream;
use super::target::requested;

/// After an error answer the proxy reads (and drops) a little more before closing: closing a
/// socket with unread input resets the connection, and the client's TCP may then discard the
/// answer. Bounded, so that a client still sending 1 GiB of header costs next to nothing.
const LINGER_TIME: Duration = Duration::from_millis(500);
/// The most bytes read while lingering (see [`LINGER_TIME`]).
const LINGER_BYTES: usize = 64 * 1024;

/// An answer other than `200`: its status and one line of why.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) why: String,
}

impl Refusal {
    /// `why` made one printable line: it quotes what the client sent and what a resolver or
    /// the system said.
    pub(super) fn new(status: u16, why: impl AsRef<str>) -> Self {
        let why = text_escape::line(why.as_ref()).into_owned();
        Self { status, why }
    }

    /// The HTTP answer, closing the connection, with `why` as its body.
    pub(super) fn response(&self) -> Vec<u8> {
        let phrase = match self.status {
            400 => "Bad Request",
            403 => "Forbidden",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            502 => "Bad Gateway",
            _ => "Service Unavailable",
        };
        let allow = if self.status == 405 {
            "Allow: CONNECT\r\n"
        } else {
            ""
        };
        let body = format!("{}\n", self.why);
        format!(
            "HTTP/1.1 {} {phrase}\r\n{allow}Content-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.status,
            body.len()
        )
        .into_bytes()
    }
}

/// Records a refusal of the request `line`, answers it and closes without resetting the
/// connection.
pub(super) fn refuse(client: &Stream, shared: &Shared, line: &[u8], refusal: &Refusal) {
    // Recorded first: a client that never reads its answer must not keep it out of the log.
    shared.record_refused(requested(line), refusal);
    let answered = client
        .set_write_timeout(Some(shared.config.limits.header_timeout))
        .and_then(|()| client.send(&refusal.response()));
    if answered.is_ok() {
        linger(client);
    }
}

/// Ends the answer and reads what the client still sends, within [`LINGER_TIME`] and
/// [`LINGER_BYTES`], so that the close does not reset the connection before the client reads.
fn linger(client: &Stream) {
    let _ = client.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER_TIME;
    let mut sink = [0; 4096];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match client.receive(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}
