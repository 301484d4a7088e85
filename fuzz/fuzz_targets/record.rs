//! Fuzzes the strict record parsers: the repository identity (persisted by callers and held in
//! the ownership marker), the frozen Slice record and acceptance (read from a Slice
//! directory), the Candidate manifest, the import record and a review (read from the store).
//!
//! Oracles: parsing never panics; a parsed identity re-encodes canonically and parses back to
//! itself; a parsed Slice record or acceptance passes its own validation and re-encodes to
//! bytes that parse back to itself; a parsed manifest re-encodes to a value that parses back
//! to itself; an import record and a review are read only from their canonical bytes, so each
//! re-encodes to exactly the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::assurance::{Acceptance, Review, SliceRecord};
use sf_host::canonical;
use sf_host::repository::{CandidateManifest, ImportRecord, parse_repository_identity};

fuzz_target!(|data: &[u8]| {
    if let Ok(identity) = parse_repository_identity(data) {
        let bytes = identity.to_canonical_bytes();
        assert!(!bytes.is_empty(), "a parsed identity must encode");
        canonical::parse_canonical(&bytes).expect("an identity's bytes are canonical");
        let again = parse_repository_identity(&bytes).expect("an identity's bytes parse");
        assert_eq!(again, identity, "the identity changed on a round trip");
    }

    if let Ok(record) = SliceRecord::from_json(data) {
        record
            .validate()
            .expect("from_json returns only validated Slice records");
        let bytes = record.to_bytes().expect("a parsed Slice record encodes");
        assert_eq!(
            SliceRecord::from_json(&bytes).expect("it parses back"),
            record
        );
    }

    if let Ok(acceptance) = Acceptance::from_json(data) {
        let bytes = acceptance.to_bytes().expect("a parsed acceptance encodes");
        assert_eq!(
            Acceptance::from_json(&bytes).expect("it parses back"),
            acceptance
        );
    }

    if let Ok(value) = canonical::parse(data) {
        if let Ok(manifest) = CandidateManifest::from_value(&value) {
            let encoded = manifest.to_value();
            let again = CandidateManifest::from_value(&encoded)
                .unwrap_or_else(|_| panic!("a parsed manifest's value does not parse back"));
            assert_eq!(again, manifest, "the manifest changed on a round trip");
        }
    }

    if let Ok(record) = canonical::from_canonical_slice::<ImportRecord>(data, "import.json") {
        assert_eq!(record.to_bytes(), data, "an import record is its canonical bytes");
    }

    if let Ok(review) = Review::from_payload(data) {
        assert_eq!(
            review.to_bytes().expect("a parsed review encodes"),
            data,
            "a review is its canonical bytes"
        );
        review
            .signed_message()
            .expect("a parsed review has a message to sign");
    }
});
