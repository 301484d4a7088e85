//! Fuzzes the canonical JSON parser, which reads every record sf takes from outside.
//!
//! Oracles: parsing never panics; a parsed value re-encodes (never longer than the input, so
//! never over the bound); the encoding parses back to the same value and is itself canonical;
//! and the input is accepted as canonical exactly when it equals that encoding. The serde
//! codec agrees with all of it: it reads exactly what the parser reads, as the same value,
//! and writes exactly the bytes `encode` writes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::canonical;

fuzz_target!(|data: &[u8]| {
    let read = canonical::from_slice::<canonical::Value>(data, "");
    let Ok(value) = canonical::parse(data) else {
        assert!(read.is_err(), "the codec read what the parser refuses");
        return;
    };
    assert_eq!(read.as_ref(), Ok(&value), "the codec read another value");
    assert_eq!(
        canonical::to_canonical_bytes(&value),
        canonical::encode(&value),
        "the codec writes other bytes than encode"
    );
    assert_eq!(
        canonical::from_canonical_slice::<canonical::Value>(data, "").is_ok(),
        canonical::parse_canonical(data).is_ok(),
        "the codec's canonical reading disagrees with parse_canonical"
    );
    let bytes = canonical::encode(&value).expect("a parsed value re-encodes");
    assert!(
        bytes.len() <= data.len(),
        "the canonical encoding ({} bytes) is longer than the input ({} bytes)",
        bytes.len(),
        data.len()
    );
    let again = canonical::parse(&bytes).expect("a canonical encoding parses");
    assert_eq!(again, value, "encode then parse changed the value");
    assert_eq!(
        canonical::parse_canonical(&bytes),
        Ok(value),
        "a canonical encoding is not accepted as canonical"
    );
    assert_eq!(
        canonical::parse_canonical(data).is_ok(),
        bytes == data,
        "parse_canonical disagrees with comparing against the encoding"
    );
});
