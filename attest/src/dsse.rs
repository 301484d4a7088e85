//! DSSE (Dead Simple Signing Envelope, v1): the envelope an attestation travels in, its
//! pre-authentication encoding (PAE) that the signature covers, and the envelope's JSON.
//!
//! The signature is over `PAE(payloadType, payload)` and never over the JSON, so any DSSE
//! implementation checks sf's envelopes (the tests hold it to Python's `securesystemslib`).
//! sf writes the envelope as canonical JSON (sorted keys, no white space) with the payload and
//! each signature in standard base64 with padding; it reads any key order and white space,
//! and both base64 alphabets, as the DSSE specification asks of a reader, but nothing else.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use serde::{Deserialize, Serialize};
use sf_contracts::canonical;

use crate::error::AttestError;

/// The payload type of an in-toto Statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// The most bytes an envelope may have: a Statement is bounded by canonical JSON's own
/// limit (1 MiB); its base64 and a few signatures fit under twice that.
pub const MAX_ENVELOPE_BYTES: usize = 2 * 1024 * 1024;

/// The most signatures an envelope read may carry.
pub const MAX_SIGNATURES: usize = 16;

/// One signature of an envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The signer's key id (sf writes the key's OpenSSH SHA-256 fingerprint).
    pub keyid: String,
    /// The raw signature bytes (64 for Ed25519).
    pub sig: Vec<u8>,
}

/// A DSSE envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// What the payload is (`application/vnd.in-toto+json` for sf's).
    pub payload_type: String,
    /// The payload's bytes.
    pub payload: Vec<u8>,
    /// Its signatures.
    pub signatures: Vec<Signature>,
}

/// The envelope's JSON form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeWire {
    payload: String,
    #[serde(rename = "payloadType")]
    payload_type: String,
    signatures: Vec<SignatureWire>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureWire {
    keyid: String,
    sig: String,
}

/// DSSE's pre-authentication encoding: `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`,
/// lengths in ASCII decimal.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    bytes.extend_from_slice(payload);
    bytes
}

impl Envelope {
    /// The bytes the signatures cover.
    pub fn pae(&self) -> Vec<u8> {
        pae(&self.payload_type, &self.payload)
    }

    /// The envelope as sf writes it: canonical JSON, standard base64.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AttestError> {
        let wire = EnvelopeWire {
            payload: STANDARD.encode(&self.payload),
            payload_type: self.payload_type.clone(),
            signatures: self
                .signatures
                .iter()
                .map(|signature| SignatureWire {
                    keyid: signature.keyid.clone(),
                    sig: STANDARD.encode(&signature.sig),
                })
                .collect(),
        };
        let bytes = canonical::to_canonical_bytes_within(&wire, MAX_ENVELOPE_BYTES)
            .map_err(|error| AttestError::malformed(format!("the envelope: {error}")))?;
        Ok(bytes)
    }

    /// Reads an envelope: a JSON object with exactly `payload`, `payloadType` and
    /// `signatures` (1 to [`MAX_SIGNATURES`] of `{keyid, sig}`), base64 in either alphabet,
    /// at most [`MAX_ENVELOPE_BYTES`]. Anything else is `malformed`.
    pub fn parse(bytes: &[u8]) -> Result<Self, AttestError> {
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(AttestError::malformed(format!(
                "the envelope has {} bytes, more than {MAX_ENVELOPE_BYTES}",
                bytes.len()
            )));
        }
        let wire: EnvelopeWire =
            canonical::from_slice_within(bytes, "envelope", MAX_ENVELOPE_BYTES)
                .map_err(|error| AttestError::malformed(error.to_string()))?;
        if wire.signatures.is_empty() || wire.signatures.len() > MAX_SIGNATURES {
            return Err(AttestError::malformed(format!(
                "the envelope carries {} signatures; it must carry 1 to {MAX_SIGNATURES}",
                wire.signatures.len()
            )));
        }
        let payload = decode(&wire.payload, "envelope.payload")?;
        let signatures = wire
            .signatures
            .into_iter()
            .enumerate()
            .map(|(index, signature)| {
                Ok(Signature {
                    sig: decode(&signature.sig, &format!("envelope.signatures[{index}].sig"))?,
                    keyid: signature.keyid,
                })
            })
            .collect::<Result<_, AttestError>>()?;
        Ok(Self {
            payload_type: wire.payload_type,
            payload,
            signatures,
        })
    }
}

/// Base64 in the standard or the URL-safe alphabet, padded (what DSSE readers accept).
fn decode(text: &str, field: &str) -> Result<Vec<u8>, AttestError> {
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|error| AttestError::malformed(format!("{field} is not base64: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_specifications_example() {
        // DSSE's protocol document: PAE("http://example.com/HelloWorld", "hello world").
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn an_envelope_reads_back_and_anything_else_is_malformed() {
        let envelope = Envelope {
            payload_type: IN_TOTO_PAYLOAD_TYPE.into(),
            payload: b"{\"a\":1}".to_vec(),
            signatures: vec![Signature {
                keyid: "k".into(),
                sig: vec![1, 2, 3],
            }],
        };
        let bytes = envelope.to_bytes().unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"payload":"eyJhIjoxfQ==","payloadType":"application/vnd.in-toto+json","signatures":[{"keyid":"k","sig":"AQID"}]}"#
        );
        assert_eq!(Envelope::parse(&bytes).unwrap(), envelope);
        for bad in [
            &b"not json"[..],
            br#"{"payload":"eyJhIjoxfQ==","payloadType":"t","signatures":[]}"#,
            br#"{"payload":"%%%","payloadType":"t","signatures":[{"keyid":"k","sig":"AQID"}]}"#,
            br#"{"payload":"","payloadType":"t","signatures":[{"keyid":"k","sig":"AQID"}],"x":1}"#,
            br#"{"payloadType":"t","signatures":[{"keyid":"k","sig":"AQID"}]}"#,
        ] {
            let error = Envelope::parse(bad).unwrap_err();
            assert_eq!(error.code(), "malformed-envelope", "{error}");
        }
    }
}
