//! The framing of every request and reply that crosses the plugin ABI: a JSON header and raw
//! byte sections, so that bulk bytes (object bodies, markers, paths) are never base64 or JSON
//! arrays of numbers.
//!
//! ```text
//! u32 little-endian  header length H (at most MAX_HEADER_BYTES)
//! H bytes            the header: one JSON object, UTF-8
//! then, until the end of the message, zero or more sections:
//!   u64 little-endian  section length L
//!   L bytes            the section's bytes
//! ```
//!
//! The header refers to sections by their index (0, 1, …). A decoder requires every section
//! to be referenced exactly once, so a message has one meaning. Header fields are exact: a
//! field a decoder does not declare is malformed (new fields mean a new method; see
//! [`super::abi`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest header accepted, in bytes.
pub const MAX_HEADER_BYTES: usize = 64 * 1024 * 1024;
/// The most sections one message may carry.
pub const MAX_SECTIONS: usize = 1 << 20;

/// Why bytes are not a well-formed message (or not the message a decoder expects).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The bytes end before the framing says they do.
    #[error("the message ends inside {what} (at byte {at})")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// The offset it starts at.
        at: usize,
    },
    /// The header length is over [`MAX_HEADER_BYTES`].
    #[error("the header claims {length} bytes; at most {MAX_HEADER_BYTES} are allowed")]
    HeaderTooLarge {
        /// The length claimed.
        length: usize,
    },
    /// More than [`MAX_SECTIONS`] sections.
    #[error("more than {MAX_SECTIONS} sections")]
    TooManySections,
    /// The header is not JSON of the expected shape.
    #[error("the header is not the expected JSON: {detail}")]
    Header {
        /// What the JSON reader said.
        detail: String,
    },
    /// The header refers to a section that does not exist or was taken already.
    #[error("the header refers to section {index}, which {problem}")]
    Section {
        /// The section's index.
        index: usize,
        /// What is wrong with the reference.
        problem: &'static str,
    },
    /// A section no header field refers to.
    #[error("section {index} is never referenced by the header")]
    UnusedSection {
        /// The section's index.
        index: usize,
    },
    /// A header field breaks a rule of its message.
    #[error("{field}: {rule}")]
    Field {
        /// The field, by its path in the header.
        field: String,
        /// The rule it breaks.
        rule: String,
    },
}

impl MessageError {
    /// A field of the header breaks a rule.
    pub fn field(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Field {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

/// Builds a message: add sections, then encode with a header that names them.
#[derive(Default)]
pub struct MessageBuilder<'a> {
    sections: Vec<&'a [u8]>,
}

impl<'a> MessageBuilder<'a> {
    /// A builder with no sections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a section and returns its index for the header.
    pub fn section(&mut self, bytes: &'a [u8]) -> usize {
        self.sections.push(bytes);
        self.sections.len() - 1
    }

    /// Encodes `header` and the sections added so far.
    pub fn encode(self, header: &impl Serialize) -> Vec<u8> {
        // Serialising a struct of strings, integers and nested structs cannot fail.
        let header = serde_json::to_vec(header).unwrap_or_else(|_| b"{}".to_vec());
        let total = 4
            + header.len()
            + self
                .sections
                .iter()
                .map(|section| 8 + section.len())
                .sum::<usize>();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for section in self.sections {
            out.extend_from_slice(&(section.len() as u64).to_le_bytes());
            out.extend_from_slice(section);
        }
        out
    }
}

/// Encodes a message that has no sections.
pub fn encode_header(header: &impl Serialize) -> Vec<u8> {
    MessageBuilder::new().encode(header)
}

/// A framed message split into its header bytes and its sections, borrowed from the bytes.
#[derive(Debug)]
pub struct Frame<'a> {
    /// The header's bytes (JSON, not yet parsed).
    pub header: &'a [u8],
    /// The sections, in order.
    pub sections: Vec<&'a [u8]>,
}

/// Splits `bytes` into header and sections, checking the framing only.
pub fn split(bytes: &[u8]) -> Result<Frame<'_>, MessageError> {
    let take = |at: usize, n: usize, what: &'static str| -> Result<&[u8], MessageError> {
        bytes
            .get(
                at..at
                    .checked_add(n)
                    .ok_or(MessageError::Truncated { what, at })?,
            )
            .ok_or(MessageError::Truncated { what, at })
    };
    let length = u32::from_le_bytes(
        take(0, 4, "the header length")?
            .try_into()
            .expect("four bytes"),
    ) as usize;
    if length > MAX_HEADER_BYTES {
        return Err(MessageError::HeaderTooLarge { length });
    }
    let header = take(4, length, "the header")?;
    let mut at = 4 + length;
    let mut sections = Vec::new();
    while at < bytes.len() {
        if sections.len() == MAX_SECTIONS {
            return Err(MessageError::TooManySections);
        }
        let length = u64::from_le_bytes(
            take(at, 8, "a section length")?
                .try_into()
                .expect("eight bytes"),
        );
        at += 8;
        let length = usize::try_from(length).map_err(|_| MessageError::Truncated {
            what: "a section",
            at,
        })?;
        sections.push(take(at, length, "a section")?);
        at += length;
    }
    Ok(Frame { header, sections })
}

/// Decodes a message whose header is a `T`, handing back its sections for the caller to take
/// by index.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, Sections<'_>), MessageError> {
    let frame = split(bytes)?;
    let header = serde_json::from_slice(frame.header).map_err(|error| MessageError::Header {
        detail: error.to_string(),
    })?;
    Ok((header, Sections::new(frame.sections)))
}

/// Decodes a message that is its header alone: a `T` and no section.
pub fn decode_header<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, MessageError> {
    let (header, sections) = decode::<T>(bytes)?;
    sections.finish()?;
    Ok(header)
}

/// The sections of a decoded message; each must be taken exactly once.
#[derive(Debug)]
pub struct Sections<'a> {
    slices: Vec<&'a [u8]>,
    used: Vec<bool>,
}

impl<'a> Sections<'a> {
    fn new(slices: Vec<&'a [u8]>) -> Self {
        let used = vec![false; slices.len()];
        Self { slices, used }
    }

    /// The section at `index`, which must exist and not have been taken before.
    pub fn take(&mut self, index: usize) -> Result<&'a [u8], MessageError> {
        match self.used.get_mut(index) {
            None => Err(MessageError::Section {
                index,
                problem: "does not exist",
            }),
            Some(true) => Err(MessageError::Section {
                index,
                problem: "is referenced twice",
            }),
            Some(used) => {
                *used = true;
                Ok(self.slices[index])
            }
        }
    }

    /// Checks that every section was taken.
    pub fn finish(self) -> Result<(), MessageError> {
        match self.used.iter().position(|used| !used) {
            Some(index) => Err(MessageError::UnusedSection { index }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Header {
        a: usize,
        b: usize,
    }

    #[test]
    fn round_trip() {
        let mut builder = MessageBuilder::new();
        let a = builder.section(b"first");
        let b = builder.section(b"");
        let bytes = builder.encode(&Header { a, b });
        let (header, mut sections) = decode::<Header>(&bytes).unwrap();
        assert_eq!(header, Header { a: 0, b: 1 });
        assert_eq!(sections.take(header.a).unwrap(), b"first");
        assert!(sections.take(header.a).is_err());
        assert_eq!(sections.take(header.b).unwrap(), b"");
        sections.finish().unwrap();
    }

    #[test]
    fn refuses_bad_frames() {
        assert!(matches!(split(b""), Err(MessageError::Truncated { .. })));
        assert!(matches!(
            split(&[10, 0, 0, 0, b'{']),
            Err(MessageError::Truncated { .. })
        ));
        let mut bytes = encode_header(&Header { a: 0, b: 0 });
        bytes.extend_from_slice(&100u64.to_le_bytes());
        bytes.extend_from_slice(b"short");
        assert!(matches!(split(&bytes), Err(MessageError::Truncated { .. })));
        let mut bytes = encode_header(&Header { a: 0, b: 0 });
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(split(&bytes), Err(MessageError::Truncated { .. })));
        assert!(matches!(
            split(&u32::MAX.to_le_bytes()),
            Err(MessageError::HeaderTooLarge { .. })
        ));
        let unused = {
            let mut builder = MessageBuilder::new();
            builder.section(b"x");
            builder.encode(&Header { a: 0, b: 0 })
        };
        let (_, sections) = decode::<Header>(&unused).unwrap();
        assert_eq!(
            sections.finish(),
            Err(MessageError::UnusedSection { index: 0 })
        );
        let extra = br#"{"a":0,"b":0,"c":1}"#;
        let mut bytes = (extra.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(extra);
        assert!(matches!(
            decode::<Header>(&bytes),
            Err(MessageError::Header { .. })
        ));
        let duplicate = br#"{"a":0,"a":0,"b":0}"#;
        let mut bytes = (duplicate.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(duplicate);
        assert!(matches!(
            decode::<Header>(&bytes),
            Err(MessageError::Header { .. })
        ));
    }
}
