//! Fuzzes the decoders of every message that crosses the plugin ABI: requests as a plugin
//! decodes them (from a host it cannot trust to be well-formed) and answers and errors as the
//! host decodes them (from a plugin it does not trust), for all four contracts, plus the
//! framing itself.
//!
//! The first byte picks the decoder, the rest is the message. Oracles: nothing panics; where a
//! message round-trips (gate answers, evidence ids and requests, every contract's known
//! errors), what decoded re-encodes to a message that decodes to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sf_host::plugin::protocol::DecodedError;
use sf_host::plugin::{
    evidence_store_protocol as evidence, executor_protocol as executor, gate_protocol as gate,
    message, object_store_protocol as object_store,
};

const OBJECT_STORE_METHODS: &[&str] = &[
    "create",
    "open",
    "mark",
    "write_objects",
    "read_objects",
    "read_ref",
    "list_refs",
    "create_ref",
    "compare_and_swap_ref",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % 16 {
        0 => {
            let _ = message::split(bytes);
        }
        1 => {
            for method in OBJECT_STORE_METHODS {
                let _ = object_store::Request::decode(method, bytes);
            }
        }
        2 => {
            let _ = object_store::decode_root(bytes);
            let _ = object_store::decode_objects(bytes);
            let _ = object_store::decode_ref_value(bytes);
            let _ = object_store::decode_ref_list(bytes);
            let _ = object_store::decode_ref_update(bytes);
            let _ = object_store::decode_error(bytes);
        }
        3 => {
            for method in [
                "describe_runtime",
                "profile",
                "run",
                "run_v2",
                "run_v3",
                "run_v4",
                "run_v5",
                "cancel",
            ] {
                let _ = executor::Request::decode(method, bytes);
            }
        }
        4 => {
            let _ = executor::decode_runtime(bytes);
            let _ = executor::decode_profile(bytes);
            let _ = executor::decode_answer(bytes, executor::RunWire::V1);
            let _ = executor::decode_answer(bytes, executor::RunWire::V2);
            // A decoded answer encodes and decodes to itself in its own shape.
            if let Ok(answer) = executor::decode_answer(bytes, executor::RunWire::V3) {
                let again = executor::decode_answer(
                    &executor::encode_answer(&answer, executor::RunWire::V3),
                    executor::RunWire::V3,
                )
                .expect("an encoded run_v3 answer decodes");
                assert_eq!(again, answer);
            }
            // The limits a run hit survive their own shape.
            if let Ok(answer) = executor::decode_answer(bytes, executor::RunWire::V5) {
                let again = executor::decode_answer(
                    &executor::encode_answer(&answer, executor::RunWire::V5),
                    executor::RunWire::V5,
                )
                .expect("an encoded run_v5 answer decodes");
                assert_eq!(again, answer);
            }
            let _ = executor::decode_cancelled(bytes);
        }
        5 => {
            if let Ok(DecodedError::Known(error)) = executor::decode_error(bytes) {
                let again = executor::decode_error(&executor::encode_error(&error))
                    .expect("an encoded executor error decodes");
                assert_eq!(again, DecodedError::Known(error));
            }
        }
        6 => {
            for method in ["put", "get", "find"] {
                if let Ok(Some(request)) = evidence::Request::decode(method, bytes) {
                    if let evidence::Request::Put { record, deadline } = &request {
                        let again = evidence::Request::decode(
                            method,
                            &evidence::encode_put(record, *deadline),
                        )
                        .expect("an encoded put decodes");
                        let Some(evidence::Request::Put { record: again, .. }) = again else {
                            panic!("a put decoded as something else");
                        };
                        assert_eq!(&again, record);
                    }
                }
            }
        }
        7 => {
            if let Ok(ids) = evidence::decode_ids(bytes) {
                assert_eq!(
                    evidence::decode_ids(&evidence::encode_ids(&ids)).expect("ids decode"),
                    ids
                );
            }
            if let Ok(id) = evidence::decode_id(bytes) {
                assert_eq!(
                    evidence::decode_id(&evidence::encode_id(&id)).expect("an id decodes"),
                    id
                );
            }
            let _ = evidence::decode_record(bytes);
        }
        8 => {
            if let Ok(DecodedError::Known(error)) = evidence::decode_error(bytes) {
                let again = evidence::decode_error(&evidence::encode_error(&error))
                    .expect("an encoded evidence error decodes");
                assert_eq!(again, DecodedError::Known(error));
            }
        }
        9 => {
            let _ = gate::Request::decode("current", bytes);
            if let Ok(answer) = gate::decode_answer(bytes) {
                assert_eq!(
                    gate::decode_answer(&gate::encode_answer(&answer)).expect("answers decode"),
                    answer
                );
            }
        }
        10 => {
            if let Ok(DecodedError::Known(error)) = gate::decode_error(bytes) {
                let again = gate::decode_error(&gate::encode_error(&error))
                    .expect("an encoded gate error decodes");
                assert_eq!(again, DecodedError::Known(error));
            }
        }
        _ => {
            let _ = sf_host::plugin::protocol::PluginErrorReply::decode(bytes);
            let _ = sf_host::plugin::protocol::PanicReply::decode(bytes);
            let _ = sf_host::plugin::manifest::PluginManifest::parse(bytes);
        }
    }
});
