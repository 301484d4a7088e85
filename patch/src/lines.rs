//! A cursor over the diff's lines, counting them so that errors can name a line.

/// The diff's lines, each with its `\n` (the last may lack it).
pub(crate) struct Lines<'a> {
    data: &'a [u8],
    pos: usize,
    /// The 1-based number of the line `peek` returns.
    number: usize,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Lines {
            data,
            pos: 0,
            number: 1,
        }
    }

    /// The next line, not consumed.
    pub(crate) fn peek(&self) -> Option<&'a [u8]> {
        line_at(&self.data[self.pos..])
    }

    /// The line after the next one, not consumed.
    pub(crate) fn peek_second(&self) -> Option<&'a [u8]> {
        let first = self.peek()?;
        line_at(&self.data[self.pos + first.len()..])
    }

    /// Consumes and returns the next line.
    pub(crate) fn next_line(&mut self) -> Option<&'a [u8]> {
        let line = self.peek()?;
        self.pos += line.len();
        self.number += 1;
        Some(line)
    }

    /// The 1-based number of the next line.
    pub(crate) fn number(&self) -> usize {
        self.number
    }
}

/// A line without its `\n` (and without a `\r` before it, which some mailers add).
pub(crate) fn trim_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The first line of `rest` with its newline (the last one may have none), or `None` when
/// nothing is left.
fn line_at(rest: &[u8]) -> Option<&[u8]> {
    if rest.is_empty() {
        return None;
    }
    let end = rest
        .iter()
        .position(|&c| c == b'\n')
        .map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}
