//! What the proxy did, as [`RegistryProxy::stop`](super::RegistryProxy::stop) returns it: the
//! registries reached with their byte counts and every request refused with its reason, each
//! list bounded; and how outside bytes are shown in it.

use sf_io::text_escape;

use super::relay::Direction;

/// The most entries each list of a [`ProxyLog`] keeps; the rest are counted.
pub const LOG_ENTRIES: usize = 1000;
/// The most characters of a refused request's target kept in the log.
pub const TARGET_CHARS: usize = 256;

/// What the proxy did: the registries reached and every request refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyLog {
    /// One entry per host and port tunnelled to, in the order first reached, with the bytes
    /// of all its tunnels summed (at most [`LOG_ENTRIES`]).
    pub reached: Vec<Reached>,
    /// Tunnels opened to a host and port left out of `reached` because it was full (their
    /// bytes are not counted anywhere).
    pub reached_left_out: u64,
    /// Every request refused, in order (at most [`LOG_ENTRIES`]).
    pub refused: Vec<Refused>,
    /// Refusals left out of `refused` because it was full.
    pub refused_left_out: u64,
}

/// A registry reached through the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reached {
    /// The host name as requested (lowercase).
    pub host: String,
    /// The port.
    pub port: u16,
    /// Bytes relayed from the client to the registry.
    pub bytes_up: u64,
    /// Bytes relayed from the registry to the client.
    pub bytes_down: u64,
}

/// A request the proxy refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The target as requested (`host:port` for a CONNECT, the URI of another method, the
    /// request line when it has no target), control characters and invalid UTF-8 escaped, at
    /// most [`TARGET_CHARS`] characters. Empty when the proxy answered before reading a
    /// request (`503`).
    pub target: String,
    /// The HTTP status answered.
    pub status: u16,
    /// Why, in one line (also the answer's body).
    pub why: String,
}

impl ProxyLog {
    /// Adds `refused`, or counts it when the list is full.
    pub(super) fn add_refused(&mut self, refused: Refused) {
        if self.refused.len() < LOG_ENTRIES {
            self.refused.push(refused);
        } else {
            self.refused_left_out += 1;
        }
    }

    /// The index of `host:port` in `reached`, added if new (None when the list is full).
    pub(super) fn reached_entry(&mut self, host: &str, port: u16) -> Option<usize> {
        if let Some(index) = self
            .reached
            .iter()
            .position(|r| r.host == host && r.port == port)
        {
            return Some(index);
        }
        if self.reached.len() >= LOG_ENTRIES {
            self.reached_left_out += 1;
            return None;
        }
        self.reached.push(Reached {
            host: host.to_owned(),
            port,
            bytes_up: 0,
            bytes_down: 0,
        });
        Some(self.reached.len() - 1)
    }

    /// Counts `bytes` relayed in `direction` on the entry `reached_entry` gave.
    pub(super) fn add_moved(&mut self, entry: Option<usize>, direction: Direction, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        if let Some(reached) = entry.and_then(|i| self.reached.get_mut(i)) {
            let count = match direction {
                Direction::Up => &mut reached.bytes_up,
                Direction::Down => &mut reached.bytes_down,
            };
            *count = count.saturating_add(bytes);
        }
    }
}

/// Outside bytes as the log and the reasons show them: escaped, at most [`TARGET_CHARS`]
/// characters (the last an ellipsis when cut).
pub(super) fn shown(bytes: &[u8]) -> String {
    // An escape is at most 4 characters per byte, so more bytes than this cannot show.
    let escaped = text_escape::line_bytes(&bytes[..bytes.len().min(TARGET_CHARS * 4)]);
    if escaped.chars().count() <= TARGET_CHARS {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(TARGET_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_list_keeps_its_first_entries_and_counts_the_rest() {
        let mut log = ProxyLog::default();
        for i in 0..=LOG_ENTRIES {
            let refused = Refused {
                target: i.to_string(),
                status: 403,
                why: String::new(),
            };
            log.add_refused(refused);
            log.reached_entry(&format!("h{i}.test"), 443);
        }
        assert_eq!((log.refused.len(), log.refused_left_out), (LOG_ENTRIES, 1));
        assert_eq!((log.reached.len(), log.reached_left_out), (LOG_ENTRIES, 1));
        assert_eq!(log.reached_entry("h0.test", 443), Some(0));
        log.add_moved(Some(0), Direction::Down, 7);
        log.add_moved(None, Direction::Up, 7);
        assert_eq!((log.reached[0].bytes_up, log.reached[0].bytes_down), (0, 7));
    }

    #[test]
    fn outside_bytes_are_escaped_and_cut() {
        assert_eq!(shown(b"a\x1b[2J\xff\n"), "a\\x1b[2J\\xff\\n");
        let cut = shown(&[0xff; 10_000]);
        assert_eq!(cut.chars().count(), TARGET_CHARS);
        assert!(cut.ends_with('…'), "{cut}");
    }
}
