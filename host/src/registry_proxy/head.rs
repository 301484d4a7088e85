//! Reading a request's head (its line and headers, up to the blank line) within a byte and a
//! time bound, whatever the client sends and however slowly.

use std::io;
use std::time::Instant;

use super::config::ProxyLimits;
use super::refusal::Refusal;
use super::stream::{Stream, timed_out};

/// A request's line and what followed its header section (a client may send the start of its
/// TLS handshake without waiting for the `200`).
pub(super) struct Head {
    pub(super) line: Vec<u8>,
    pub(super) rest: Vec<u8>,
}

/// Why no head was read.
pub(super) enum HeadError {
    /// The client closed (or a stop shut the socket) first; with the request line so far.
    Closed(Vec<u8>),
    /// Too large or too slow; with the request line so far.
    Refused(Vec<u8>, Refusal),
}

/// Reads the request line and headers up to the blank line, never more than `max_header_bytes`
/// and never for longer than `header_timeout` in all, however the bytes are spread out.
pub(super) fn read_head(client: &Stream, limits: &ProxyLimits) -> Result<Head, HeadError> {
    // Time left is counted down from the start (no Instant is added to: a configured
    // Duration::MAX must not overflow).
    let started = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let want = limits
            .max_header_bytes
            .saturating_sub(buf.len())
            .min(chunk.len());
        if want == 0 {
            let why = format!(
                "the header section is longer than {} bytes",
                limits.max_header_bytes
            );
            return Err(HeadError::Refused(first_line(&buf), Refusal::new(431, why)));
        }
        let left = limits.header_timeout.saturating_sub(started.elapsed());
        let read = if left.is_zero() {
            Err(io::ErrorKind::TimedOut.into())
        } else {
            client
                .set_read_timeout(Some(left))
                .and_then(|()| client.receive(&mut chunk[..want]))
        };
        let scanned = buf.len();
        match read {
            Ok(0) => return Err(HeadError::Closed(first_line(&buf))),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if timed_out(&e) => {
                let why = format!(
                    "the header section did not arrive within {:?}",
                    limits.header_timeout
                );
                return Err(HeadError::Refused(first_line(&buf), Refusal::new(408, why)));
            }
            Err(_) => return Err(HeadError::Closed(first_line(&buf))),
        }
        // The blank line ends at most 3 bytes after it starts: look again from just before
        // the new bytes only.
        if let Some(end) = head_end(&buf, scanned.saturating_sub(2)) {
            let rest = buf.split_off(end);
            return Ok(Head {
                line: first_line(&buf),
                rest,
            });
        }
    }
}

/// Just past the blank line that ends the header section, looking from `from`: a line feed
/// followed by another, with or without a carriage return between (clients send CRLF; a bare
/// LF is read too).
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| match buf.get(i..)? {
        [b'\n', b'\n', ..] => Some(i + 2),
        [b'\n', b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

/// The request line: up to the first line feed, without its carriage return.
fn first_line(buf: &[u8]) -> Vec<u8> {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    line.strip_suffix(b"\r").unwrap_or(line).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\nrest", 0), Some(24));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\nrest", 0), Some(22));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n", 0), None);
        // Looking from the middle of the blank line still finds it.
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\n", 20), Some(24));
    }

    #[test]
    fn the_request_line_is_the_first_line_without_its_carriage_return() {
        assert_eq!(
            first_line(b"CONNECT a:1 HTTP/1.1\r\nHost: a"),
            b"CONNECT a:1 HTTP/1.1"
        );
        assert_eq!(first_line(b"CONNECT a:1"), b"CONNECT a:1");
        assert_eq!(first_line(b""), b"");
    }
}
