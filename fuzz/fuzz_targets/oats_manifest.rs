//! Fuzzes the strict oats 0.24.0 manifest parser (`oats.json` is outside input: a capability
//! directory anyone may hand to `sf oats register`) and its bounded JSON reader.
//!
//! Oracles: nothing panics, and parsing is a function of the bytes: the same bytes parse to
//! the same manifest or fail with the same code.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let first = sf_oats::manifest::parse(data);
    let second = sf_oats::manifest::parse(data);
    match (&first, &second) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.code, b.code),
        _ => panic!("the same bytes parsed once and failed once"),
    }
});
