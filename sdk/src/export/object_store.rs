//! The `object-store` contract served: a factory's `create` and `open` make a store, an
//! instance of its own, which answers every other method.

use sf_contracts::{ObjectStore, ObjectStoreFactory};
use sf_plugin_abi::object_store_protocol::{self as wire, ObjectStoreContract, Request};
use sf_plugin_abi::protocol::{self, Empty};

use super::served::{self, Outcome, Place, Served, exported, plugin_error};

exported!(ObjectStoreContract: ObjectStoreFactory, sf_contracts::ObjectStoreError);

impl Served for Box<dyn ObjectStoreFactory> {
    fn serve(&self, method: &str, request: &[u8], place: Place) -> Outcome {
        let decoded = Request::decode(method, request);
        served::serve::<ObjectStoreContract, _>(method, decoded, |request| {
            make_store(self.as_ref(), method, request, place)
        })
    }
}

impl Served for Box<dyn ObjectStore> {
    fn serve(&self, method: &str, request: &[u8], _: Place) -> Outcome {
        let decoded = Request::decode(method, request);
        served::serve::<ObjectStoreContract, _>(method, decoded, |request| {
            answer(self.as_ref(), method, request)
        })
    }
}

/// What `factory` answers to `method`'s request: a new store, handed to `place`.
fn make_store(
    factory: &dyn ObjectStoreFactory,
    method: &str,
    request: Request,
    place: Place,
) -> Outcome {
    let made = match request {
        Request::Create { path, deadline } => factory.create(&path, deadline),
        Request::Open {
            root,
            marker,
            deadline,
        } => factory.open(&root, &marker, deadline),
        _ => {
            return plugin_error(
                protocol::UNSUPPORTED_METHOD,
                format!("{method} is a store method, and this instance is a factory"),
            );
        }
    };
    match made {
        Ok(store) => {
            let answer = wire::encode_root(store.root());
            if place.is_missing() {
                return plugin_error(protocol::MALFORMED_REQUEST, "no place for the new store");
            }
            place.put(Box::new(store));
            Outcome::Ok(answer)
        }
        Err(error) => Outcome::ContractError(wire::encode_error(&error)),
    }
}

/// What `store` answers to `method`'s request.
fn answer(store: &dyn ObjectStore, method: &str, request: Request) -> Outcome {
    let answer = match request {
        Request::Mark { marker, deadline } => {
            store.mark(&marker, deadline).map(|()| Empty::encode())
        }
        Request::RecordBoundaries { commits, deadline } => store
            .record_boundaries(&commits, deadline)
            .map(|()| Empty::encode()),
        Request::BeginReads => {
            store.begin_reads();
            Ok(Empty::encode())
        }
        Request::EndReads => {
            store.end_reads();
            Ok(Empty::encode())
        }
        Request::WriteObjects { objects, deadline } => store
            .write_objects(&objects, deadline)
            .map(|()| Empty::encode()),
        Request::ReadObjects {
            ids,
            budget,
            deadline,
        } => store
            .read_objects(&ids, budget, deadline)
            .map(|objects| wire::encode_objects(&objects)),
        Request::ReadRef { name, deadline } => store
            .read_ref(&name, deadline)
            .map(|value| wire::encode_ref_value(value.as_ref())),
        Request::ListRefs { prefix, deadline } => store
            .list_refs(&prefix, deadline)
            .map(|refs| wire::encode_ref_list(&refs)),
        Request::CreateRef {
            name,
            value,
            deadline,
        } => store
            .create_ref(&name, &value, deadline)
            .map(|update| wire::encode_ref_update(&update)),
        Request::CompareAndSwapRef {
            name,
            expected,
            new,
            deadline,
        } => store
            .compare_and_swap_ref(&name, &expected, &new, deadline)
            .map(|update| wire::encode_ref_update(&update)),
        Request::Create { .. } | Request::Open { .. } => {
            return plugin_error(
                protocol::UNSUPPORTED_METHOD,
                format!("{method} is a factory method, and this instance is a store"),
            );
        }
    };
    served::answered::<ObjectStoreContract>(answer)
}
