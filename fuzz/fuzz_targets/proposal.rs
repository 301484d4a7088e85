//! Fuzzes `parse_proposal`, the parser of the one record sf takes from an untrusted producer.
//!
//! Oracles: parsing never panics; a parsed proposal's canonical record (edits sorted by path)
//! fits the canonical bound and parses back to the same edits; validation of a parsed proposal
//! never panics.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::canonical;
use sf_host::repository::{parse_proposal, validate_proposal};

fuzz_target!(|data: &[u8]| {
    let Ok(proposal) = parse_proposal(data) else {
        return;
    };
    // The canonical encoding of values parsed from at most 1 MiB is never longer than the
    // input, so it must fit the bound.
    let bytes = canonical::encode(&proposal.to_value())
        .expect("a parsed proposal's canonical record fits the 1 MiB bound");
    let again = parse_proposal(&bytes).expect("a proposal's canonical record parses");
    let mut sorted = proposal.edits.clone();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(
        again.edits, sorted,
        "the canonical record changed the edits"
    );

    // Exercise validation (paths, duplicates, scope, texts, size) with the edit paths as scope.
    let scope: Vec<String> = proposal
        .edits
        .iter()
        .map(|edit| edit.path.clone())
        .collect();
    let _ = validate_proposal(&proposal, &scope);
});
