//! The `gate` contract served: `current`.

use sf_contracts::Gate;
use sf_plugin_abi::gate_protocol::{self as wire, GateContract, Request};

use super::served::{self, Outcome, Place, Served, exported};

exported!(GateContract: Gate, sf_contracts::GateError);

impl Served for Box<dyn Gate> {
    fn serve(&self, method: &str, request: &[u8], _: Place) -> Outcome {
        let decoded = Request::decode(method, request);
        served::serve::<GateContract, _>(method, decoded, |Request::Current { deadline }| {
            served::answered::<GateContract>(
                self.current(deadline)
                    .map(|answer| wire::encode_answer(&answer)),
            )
        })
    }
}
