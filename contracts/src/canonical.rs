//! Canonical JSON and `sha256:` digests.
//!
//! Canonical JSON is the one byte encoding of a record that sf hashes: object keys sorted by
//! their UTF-8 bytes, no insignificant white space, integers only (within ±(2^53 − 1), the
//! range every JSON implementation reads exactly), strings escaped minimally (`"`, `\`, and
//! control characters, with `\b \f \n \r \t` where they exist and `\u00xx` otherwise), and at
//! most [`MAX_BYTES`] bytes in all.
//!
//! The parser here is strict on purpose, because it reads records from outside: UTF-8 only,
//! duplicate keys refused, no fractions or exponents, bounded nesting and size. Reading a
//! stored record "canonically" means parsing it and checking that re-encoding gives the same
//! bytes.
//!
//! Every record type is read and written through this module as serde types: [`to_value`]
//! and [`to_canonical_bytes`] write any `Serialize` type as exactly the bytes [`encode`]
//! gives, and [`from_slice`], [`from_canonical_slice`] and [`from_value`] read any
//! `Deserialize` type from strictly parsed JSON, with errors ([`FieldError`]) that name the
//! field by its JSON path and say which rejection it is. [`literal_fields!`](crate::literal_fields)
//! declares a record's fixed fields (its `protocol`), and [`rules`] holds the field rules
//! records share.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest as _, Sha256};

#[cfg(test)]
mod codec_tests;
mod de;
pub mod literal;
pub mod rules;
mod ser;

pub use crate::literal_fields;
pub(crate) use de::TextVisitor;
pub use de::{
    DIGEST_RULE, FieldError, FieldErrorKind, from_canonical_slice, from_slice, from_slice_within,
    from_value,
};
pub use rules::{checked, nullable, optional, positive, valid_if, variant_tag};
pub use ser::{digest_of, to_canonical_bytes, to_canonical_bytes_within, to_value};

/// The largest canonical document, in bytes (1 MiB).
pub const MAX_BYTES: usize = 1_048_576;
/// The deepest nesting of arrays and objects the parser accepts.
pub const MAX_DEPTH: usize = 64;
/// The largest integer magnitude accepted (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// A JSON value with integer numbers and sorted, unique object keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer; canonical JSON has no other numbers, and only ±(2^53 − 1) encode.
    Integer(i64),
    /// A string of Unicode scalar values.
    String(String),
    /// An array, in order.
    Array(Vec<Value>),
    /// An object; the map keeps its keys unique and sorted as canonical JSON writes them.
    Object(BTreeMap<String, Value>),
}

impl Value {
    /// A short name of the value's JSON type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "boolean",
            Self::Integer(_) => "integer",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::Object(_) => "object",
        }
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Self::String(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Self::String(text)
    }
}

impl From<i64> for Value {
    fn from(number: i64) -> Self {
        Self::Integer(number)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Self::Null, Into::into)
    }
}

/// Builds an object value from `(key, value)` pairs; a later duplicate key replaces an
/// earlier one, so callers build from distinct literal keys.
pub fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Why a document is not acceptable JSON for sf.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The document (read or written) is longer than [`MAX_BYTES`].
    #[error("document is larger than {limit} bytes")]
    TooLarge {
        /// The bound the document exceeds ([`MAX_BYTES`] unless a record names its own).
        limit: usize,
    },
    /// Arrays and objects nest deeper than [`MAX_DEPTH`].
    #[error("document nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The bytes are not UTF-8.
    #[error("document is not valid UTF-8")]
    InvalidUtf8,
    /// An object names the same key twice.
    #[error("duplicate key {key:?}")]
    DuplicateKey {
        /// The repeated key, decoded.
        key: String,
    },
    /// A number has a fraction or an exponent, is `-0`, or is outside ±(2^53 − 1).
    #[error("number at byte {offset} is not an integer within ±(2^53 − 1)")]
    UnsupportedNumber {
        /// Where the number starts, in bytes from the start of the document.
        offset: usize,
    },
    /// The bytes are not JSON.
    #[error("syntax error at byte {offset}: {expected}")]
    Syntax {
        /// Where parsing stopped, in bytes from the start of the document.
        offset: usize,
        /// What the parser expected there.
        expected: &'static str,
    },
    /// An integer to be written is outside ±(2^53 − 1); it shares the code of
    /// [`Self::UnsupportedNumber`].
    #[error("integer {value} is outside ±(2^53 − 1)")]
    UnsafeInteger {
        /// The integer that was to be written.
        value: i64,
    },
    /// A value that canonical JSON cannot hold was to be written (a fraction, raw bytes, an
    /// object key that is not a string).
    #[error("cannot be written as canonical JSON: {what}")]
    Unencodable {
        /// What could not be written, in words (or a type's own serialization message).
        what: String,
    },
}

impl JsonError {
    /// The stable kebab-case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too-large",
            Self::TooDeep => "too-deep",
            Self::InvalidUtf8 => "invalid-utf8",
            Self::DuplicateKey { .. } => "duplicate-key",
            Self::UnsupportedNumber { .. } | Self::UnsafeInteger { .. } => "unsupported-number",
            Self::Syntax { .. } => "syntax",
            Self::Unencodable { .. } => "unencodable",
        }
    }
}

/// Encodes `value` canonically; fails when the result would exceed [`MAX_BYTES`] or an
/// integer is outside the safe range.
pub fn encode(value: &Value) -> Result<Vec<u8>, JsonError> {
    encode_within(value, MAX_BYTES)
}

/// Encodes `value` canonically within `limit` bytes: for the few records whose own bound is
/// not [`MAX_BYTES`] (a proposal a Slice lets grow).
pub fn encode_within(value: &Value, limit: usize) -> Result<Vec<u8>, JsonError> {
    let mut out = Vec::new();
    write_value(value, &mut out, limit)?;
    if out.len() > limit {
        return Err(JsonError::TooLarge { limit });
    }
    Ok(out)
}

fn write_value(value: &Value, out: &mut Vec<u8>, limit: usize) -> Result<(), JsonError> {
    if out.len() > limit {
        return Err(JsonError::TooLarge { limit });
    }
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Integer(number) => {
            if number.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
                return Err(JsonError::UnsafeInteger { value: *number });
            }
            out.extend_from_slice(number.to_string().as_bytes());
        }
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out, limit)?;
            }
            out.push(b']');
        }
        Value::Object(entries) => {
            out.push(b'{');
            for (index, (key, item)) in entries.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out, limit)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_string(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    // Bytes that need no escape are copied in runs: every byte of a multi-byte UTF-8
    // character is 0x80 or above, so the runs hold whole characters and stay valid UTF-8.
    let bytes = text.as_bytes();
    let mut copied = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            byte if byte < 0x20 => {
                out.extend_from_slice(&bytes[copied..at]);
                out.extend_from_slice(format!("\\u{byte:04x}").as_bytes());
                copied = at + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[copied..at]);
        out.extend_from_slice(escape);
        copied = at + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Parses `bytes` strictly (see the module documentation).
pub fn parse(bytes: &[u8]) -> Result<Value, JsonError> {
    parse_within(bytes, MAX_BYTES)
}

/// Parses `bytes` strictly within `limit` bytes (see [`encode_within`]).
pub fn parse_within(bytes: &[u8], limit: usize) -> Result<Value, JsonError> {
    if bytes.len() > limit {
        return Err(JsonError::TooLarge { limit });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| JsonError::InvalidUtf8)?;
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    parser.skip_space();
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.at != parser.bytes.len() {
        return Err(parser.syntax("end of document"));
    }
    Ok(value)
}

/// Parses `bytes` and requires them to be exactly the canonical encoding of what they hold.
pub fn parse_canonical(bytes: &[u8]) -> Result<Value, CanonicalError> {
    let value = parse(bytes).map_err(CanonicalError::Json)?;
    if encode(&value).map_err(CanonicalError::Json)? != bytes {
        return Err(CanonicalError::NotCanonical);
    }
    Ok(value)
}

/// Why bytes are not a canonical document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// The bytes do not parse, or what they hold cannot be re-encoded.
    #[error(transparent)]
    Json(JsonError),
    /// The bytes parse, but re-encoding what they hold gives different bytes.
    #[error("document is valid JSON but not in canonical form")]
    NotCanonical,
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn syntax(&self, expected: &'static str) -> JsonError {
        JsonError::Syntax {
            offset: self.at,
            expected,
        }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, literal: &'static str) -> Result<(), JsonError> {
        if self.bytes[self.at..].starts_with(literal.as_bytes()) {
            self.at += literal.len();
            Ok(())
        } else {
            Err(self.syntax(literal))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.bytes.get(self.at) {
            Some(b'n') => self.eat("null").map(|()| Value::Null),
            Some(b't') => self.eat("true").map(|()| Value::Bool(true)),
            Some(b'f') => self.eat("false").map(|()| Value::Bool(false)),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.at += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    self.skip_space();
                    items.push(self.value(depth + 1)?);
                    self.skip_space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.syntax(", or ]")),
                    }
                }
            }
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.at += 1;
                let mut entries = BTreeMap::new();
                self.skip_space();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Value::Object(entries));
                }
                loop {
                    self.skip_space();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return Err(self.syntax("a string key"));
                    }
                    let key = self.string()?;
                    self.skip_space();
                    self.eat(":")?;
                    self.skip_space();
                    let item = self.value(depth + 1)?;
                    if entries.contains_key(&key) {
                        return Err(JsonError::DuplicateKey { key });
                    }
                    entries.insert(key, item);
                    self.skip_space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Value::Object(entries));
                        }
                        _ => return Err(self.syntax(", or }")),
                    }
                }
            }
            _ => Err(self.syntax("a value")),
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.at;
        if self.bytes[self.at] == b'-' {
            self.at += 1;
        }
        let digits_start = self.at;
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
        let digits = &self.bytes[digits_start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
            return Err(JsonError::Syntax {
                offset: start,
                expected: "an integer without leading zeros",
            });
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes.get(self.at) {
            return Err(JsonError::UnsupportedNumber { offset: start });
        }
        if digits.len() > 16 {
            return Err(JsonError::UnsupportedNumber { offset: start });
        }
        // At most 16 ASCII digits: the parse cannot fail or overflow an i64.
        let text = std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or("0");
        let number: i64 = text
            .parse()
            .map_err(|_| JsonError::UnsupportedNumber { offset: start })?;
        if number.unsigned_abs() > MAX_SAFE_INTEGER as u64 || text == "-0" {
            return Err(JsonError::UnsupportedNumber { offset: start });
        }
        Ok(Value::Integer(number))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let Some(digits) = self.bytes.get(self.at..self.at + 4) else {
            return Err(self.syntax("four hex digits"));
        };
        let mut code = 0;
        for &digit in digits {
            let nibble = (digit as char)
                .to_digit(16)
                .ok_or_else(|| self.syntax("four hex digits"))?;
            code = code * 16 + nibble;
        }
        self.at += 4;
        Ok(code)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.at += 1; // opening quote
        let mut text = String::new();
        loop {
            let start = self.at;
            while let Some(&byte) = self.bytes.get(self.at) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // The input is valid UTF-8 and we stopped on ASCII, so this slice is whole
            // characters.
            text.push_str(std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or_default());
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(text);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escape = *self
                        .bytes
                        .get(self.at)
                        .ok_or_else(|| self.syntax("an escape"))?;
                    self.at += 1;
                    match escape {
                        b'"' => text.push('"'),
                        b'\\' => text.push('\\'),
                        b'/' => text.push('/'),
                        b'b' => text.push('\u{8}'),
                        b'f' => text.push('\u{c}'),
                        b'n' => text.push('\n'),
                        b'r' => text.push('\r'),
                        b't' => text.push('\t'),
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first) {
                                if !self.bytes[self.at..].starts_with(b"\\u") {
                                    return Err(self.syntax("a low surrogate"));
                                }
                                self.at += 2;
                                let second = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&second) {
                                    return Err(self.syntax("a low surrogate"));
                                }
                                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                            } else {
                                first
                            };
                            let ch = char::from_u32(code)
                                .ok_or_else(|| self.syntax("a Unicode scalar value"))?;
                            text.push(ch);
                        }
                        _ => return Err(self.syntax("a valid escape")),
                    }
                }
                Some(_) => return Err(self.syntax("no raw control character in a string")),
                None => return Err(self.syntax("a closing quote")),
            }
        }
    }
}

/// A `sha256:` digest: the prefix and 64 lowercase hex characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The SHA-256 digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest whose 32 raw bytes are `bytes` (no hashing: `bytes` is the digest).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Parses exactly `sha256:` and 64 lowercase hex characters.
    pub fn parse(text: &str) -> Option<Self> {
        let hex_part = text.strip_prefix("sha256:")?;
        if hex_part.len() != 64
            || !hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let mut bytes = [0; 32];
        hex::decode_to_slice(hex_part, &mut bytes).ok()?;
        Some(Self(bytes))
    }

    /// The 64 lowercase hex characters without the prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 32 raw bytes of the digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest(sha256:{})", self.hex())
    }
}

/// The digest of the canonical encoding of `value`.
pub fn digest(value: &Value) -> Result<Digest, JsonError> {
    Ok(Digest::of(&encode(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_sorted_and_minimal() {
        let value = object([
            ("b", Value::Integer(-3)),
            ("a", Value::from("x\"\\\n\u{1}é")),
            ("c", Value::Array(vec![Value::Null, Value::Bool(true)])),
        ]);
        assert_eq!(
            encode(&value).unwrap(),
            b"{\"a\":\"x\\\"\\\\\\n\\u0001\xc3\xa9\",\"b\":-3,\"c\":[null,true]}"
        );
    }

    /// Every character below 0x80 and a few beyond, alone and between others, encodes
    /// exactly as escaping one character at a time does.
    #[test]
    fn strings_escape_as_one_character_at_a_time() {
        let one_at_a_time = |text: &str| {
            let mut out = String::from("\"");
            for ch in text.chars() {
                match ch {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out.into_bytes()
        };
        let mut texts: Vec<String> = (0u8..0x80)
            .map(|byte| char::from(byte).to_string())
            .collect();
        texts.extend(
            [
                "",
                "é",
                "\u{7f}",
                "\u{10ffff}",
                "a\u{1}b\"c\\é\n",
                "\u{1f}\u{1f}x",
            ]
            .map(String::from),
        );
        let all: String = texts.concat();
        texts.push(format!("x{all}y"));
        for text in &texts {
            let mut out = Vec::new();
            write_string(text, &mut out);
            assert_eq!(out, one_at_a_time(text), "{text:?}");
        }
    }

    #[test]
    fn round_trip_is_canonical() {
        let bytes = br#"{"a":[1,{"b":"\u00e9\ud83d\ude00"}],"z":null}"#;
        let value = parse(bytes).unwrap();
        let canonical = encode(&value).unwrap();
        assert_eq!(parse_canonical(&canonical).unwrap(), value);
        assert_eq!(parse_canonical(bytes), Err(CanonicalError::NotCanonical));
    }

    #[test]
    fn refuses_what_is_not_strict() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"a":1,"a":2}"#, "duplicate-key"),
            (b"1.5", "unsupported-number"),
            (b"1e3", "unsupported-number"),
            (b"9007199254740992", "unsupported-number"),
            (b"-0", "unsupported-number"),
            (b"01", "syntax"),
            (b"\"\xff\"", "invalid-utf8"),
            (b"\"\\ud800\"", "syntax"),
            (b"\"\\udc00\"", "syntax"),
            (b"\"a\nb\"", "syntax"),
            (b"[1,]", "syntax"),
            (b"{} x", "syntax"),
            (b"", "syntax"),
        ];
        for (bytes, code) in cases {
            let error = parse(bytes).unwrap_err();
            assert_eq!(error.code(), *code, "{:?}", String::from_utf8_lossy(bytes));
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(deep.as_bytes()), Err(JsonError::TooDeep));
    }

    #[test]
    fn size_bound_is_exact() {
        // A string of n characters encodes to n + 2 bytes.
        let at_limit = Value::String("a".repeat(MAX_BYTES - 2));
        assert_eq!(encode(&at_limit).unwrap().len(), MAX_BYTES);
        let over = Value::String("a".repeat(MAX_BYTES - 1));
        assert_eq!(encode(&over), Err(JsonError::TooLarge { limit: MAX_BYTES }));
    }

    #[test]
    fn digests_are_prefixed_lowercase() {
        let digest = Digest::of(b"");
        assert_eq!(
            digest.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&digest.to_string()), Some(digest.clone()));
        assert!(Digest::parse(&digest.to_string().to_uppercase()).is_none());
        assert!(Digest::parse(&digest.hex()).is_none());
    }
}
