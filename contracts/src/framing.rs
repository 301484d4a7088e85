//! The one framing of sf's binary records: a protocol line, a decimal length line and a head
//! of that many bytes (canonical JSON), then the rest (raw bytes the head describes). Evidence
//! records, observations and stored snapshots all use it, so each is read the same strict way.
//!
//! ```text
//! <protocol>\n<length>\n<head: length bytes><rest>
//! ```

/// Splits `bytes` into its head and rest. `what` names the head in errors; the length has at
/// most `max_digits` digits and no leading zeros.
pub fn split<'a>(
    bytes: &'a [u8],
    protocol: &str,
    what: &str,
    max_digits: usize,
) -> Result<(&'a [u8], &'a [u8]), String> {
    let rest = bytes
        .strip_prefix(protocol.as_bytes())
        .and_then(|rest| rest.strip_prefix(b"\n"))
        .ok_or_else(|| format!("does not start with {protocol}"))?;
    let newline = rest
        .iter()
        .take(max_digits + 1)
        .position(|&b| b == b'\n')
        .ok_or_else(|| format!("no {what} length line"))?;
    let digits = &rest[..newline];
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
    {
        return Err(format!(
            "the {what} length is not a decimal without leading zeros"
        ));
    }
    // At most `max_digits` ASCII digits, checked above.
    let length: usize = std::str::from_utf8(digits)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("the {what} length is not a number"))?;
    let body = &rest[newline + 1..];
    if length > body.len() {
        return Err(format!("the {what} runs past the end"));
    }
    Ok(body.split_at(length))
}

/// Writes the protocol and length lines of a record whose head is `head_len` bytes.
pub fn prefix(protocol: &str, head_len: usize) -> Vec<u8> {
    format!("{protocol}\n{head_len}\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_exactly_and_refuses_the_rest() {
        let mut bytes = prefix("p/1", 3);
        bytes.extend_from_slice(b"abcrest");
        assert_eq!(
            split(&bytes, "p/1", "head", 8),
            Ok((&b"abc"[..], &b"rest"[..]))
        );
        for bad in [
            &b"q/1\n3\nabc"[..],
            b"p/1\n03\nabc",
            b"p/1\n\nabc",
            b"p/1\n9\nabc",
            b"p/1\n-3\nabc",
            b"p/1\n123456789\nabc",
        ] {
            assert!(
                split(bad, "p/1", "head", 8).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
