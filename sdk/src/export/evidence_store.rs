//! The `evidence-store` contract served: `put`, `get` and `find`, the record crossing as its
//! exact bytes (parsed strictly before the store sees it).

use sf_contracts::EvidenceStore;
use sf_plugin_abi::evidence_store_protocol::{self as wire, EvidenceStoreContract, Request};

use super::served::{self, Outcome, Place, Served, exported};

exported!(EvidenceStoreContract: EvidenceStore, sf_contracts::EvidenceStoreError);

impl Served for Box<dyn EvidenceStore> {
    fn serve(&self, method: &str, request: &[u8], _: Place) -> Outcome {
        let decoded = Request::decode(method, request);
        served::serve::<EvidenceStoreContract, _>(method, decoded, |request| {
            served::answered::<EvidenceStoreContract>(match request {
                Request::Put { record, deadline } => {
                    self.put(&record, deadline).map(|id| wire::encode_id(&id))
                }
                Request::Get { id, deadline } => self
                    .get(&id, deadline)
                    .map(|record| wire::encode_record(&record)),
                Request::Find { pins, deadline } => {
                    self.find(&pins, deadline).map(|ids| wire::encode_ids(&ids))
                }
            })
        })
    }
}
