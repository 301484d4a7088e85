//! Fuzzes the canonical JSON parser, which reads every record sf takes from outside.
//!
//! Oracles: parsing never panics; a parsed value re-encodes (never longer than the input, so
//! never over the bound); the encoding parses back to the same value and is itself canonical;
//! and the input is accepted as canonical exactly when it equals that encoding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::canonical;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = canonical::parse(data) else {
        return;
    };
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
