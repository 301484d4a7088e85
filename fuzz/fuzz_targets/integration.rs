//! Fuzzes the parsers of integration records and gate answers: the payload a caller hands to
//! `prepare_integration`, the persisted `PreparedIntegration`, and the file gate's answer.
//!
//! Oracles: parsing never panics; a parsed payload and a parsed prepared record re-encode
//! canonically and parse back to themselves; a gate answer is accepted only in its two exact
//! shapes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::canonical;
use sf_host::contracts::GateAnswer;
use sf_host::gate::parse_answer;
use sf_host::repository::{IntegrationPayload, PreparedIntegration};

fuzz_target!(|data: &[u8]| {
    if let Ok(payload) = IntegrationPayload::from_json(data) {
        let bytes = payload
            .validate()
            .expect("from_json returns only a valid payload");
        canonical::parse_canonical(&bytes).expect("a payload's bytes are canonical");
        let again = IntegrationPayload::from_json(&bytes).expect("a payload's bytes parse");
        assert_eq!(again, payload, "the payload changed on a round trip");
    }

    if let Ok(prepared) = PreparedIntegration::from_json(data) {
        let bytes = canonical::encode(&prepared.to_value())
            .expect("a parsed prepared record re-encodes within the bound");
        let again =
            PreparedIntegration::from_json(&bytes).expect("a prepared record's bytes parse");
        assert_eq!(
            again, prepared,
            "the prepared record changed on a round trip"
        );
    }

    if let Ok(answer) = parse_answer(data) {
        let value = canonical::parse(data).expect("an accepted gate answer is JSON");
        let expected = match &answer {
            GateAnswer::Proceed => canonical::object([("proceed", canonical::Value::Bool(true))]),
            GateAnswer::Refuse { reason } => canonical::object([
                ("proceed", canonical::Value::Bool(false)),
                ("reason", reason.as_str().into()),
            ]),
        };
        assert_eq!(
            value, expected,
            "a gate answer was accepted in another shape"
        );
    }
});
