//! The bearer tokens the API accepts: a file of "NAME TOKEN" lines, private to the user sf
//! serve runs as (mode 0600: a token readable by others is a token anyone on the machine can
//! use). Read once at start, checked as [`crate::private_file`] checks a private file; a bad
//! file stops the server before it listens.

use std::path::Path;

/// The largest tokens file read, in bytes.
const MAX_TOKENS_BYTES: u64 = 1 << 20;

/// The shortest token accepted, in bytes: shorter ones can be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The clients and their tokens.
#[derive(Clone, Debug)]
pub struct Tokens {
    entries: Vec<(String, Vec<u8>)>,
}

impl Tokens {
    /// Reads `path`; the error names the file, what is wrong and the fix.
    pub fn load(path: &Path) -> Result<Self, String> {
        let named = format!("[serve] tokens {}", path.display());
        let bytes = crate::private_file::read(
            path,
            &named,
            "create it with one \"NAME TOKEN\" a line, mode 0600",
            MAX_TOKENS_BYTES,
        )?;
        let text = String::from_utf8(bytes)
            .map_err(|error| format!("{named}: cannot be read as UTF-8 text ({error})"))?;
        Self::parse(&text).map_err(|error| format!("{named}: {error}"))
    }

    /// Parses "NAME TOKEN" lines; blank lines and lines starting with `#` are skipped.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for (at, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, token] = fields[..] else {
                return Err(format!(
                    "line {} is not \"NAME TOKEN\" (two fields separated by white space)",
                    at + 1
                ));
            };
            if token.len() < MIN_TOKEN_BYTES || !token.bytes().all(|byte| byte.is_ascii_graphic()) {
                return Err(format!(
                    "line {}: the token of {name:?} must be at least {MIN_TOKEN_BYTES} printable \
                     characters (`openssl rand -hex 32` makes one)",
                    at + 1
                ));
            }
            if entries.iter().any(|(other, _)| other == name) {
                return Err(format!("line {}: {name:?} is named twice", at + 1));
            }
            entries.push((name.to_owned(), token.as_bytes().to_vec()));
        }
        if entries.is_empty() {
            return Err("it names no client: add one \"NAME TOKEN\" line".into());
        }
        Ok(Self { entries })
    }

    /// The client whose token `given` is, comparing every token in full so that the time
    /// taken does not tell how much of a guess was right.
    pub fn client(&self, given: &[u8]) -> Option<&str> {
        let mut found = None;
        for (name, token) in &self.entries {
            if equal(token, given) {
                found = Some(name.as_str());
            }
        }
        found
    }
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_client_and_nothing_else_does() {
        let tokens =
            Tokens::parse("# team\nagent-1 0123456789abcdef0123\n\nci fedcba9876543210fedc\n")
                .unwrap();
        assert_eq!(tokens.client(b"0123456789abcdef0123"), Some("agent-1"));
        assert_eq!(tokens.client(b"fedcba9876543210fedc"), Some("ci"));
        assert_eq!(tokens.client(b"0123456789abcdef012"), None);
        assert_eq!(tokens.client(b""), None);
        for bad in [
            "",
            "a b c\n",
            "a short\n",
            "a 0123456789abcdef\na 0123456789abcdef0\n",
        ] {
            assert!(Tokens::parse(bad).is_err(), "{bad:?}");
        }
    }
}
