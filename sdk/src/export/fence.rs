//! The `fence` contract served: a fence's `acquire` makes a hold, an instance of its own that
//! answers `assert-active` and `release`; the host's `drop_instance` of a hold drops it, which
//! releases it.

use sf_contracts::{AttemptFence, FenceError, FenceHold};
use sf_plugin_abi::fence_protocol::{self as wire, FenceContract, FenceRequest, HoldRequest};
use sf_plugin_abi::protocol::{self, Empty};

use super::served::{self, Outcome, Place, Served, exported, plugin_error};

exported!(FenceContract: AttemptFence, sf_contracts::FenceError);

impl Served for Box<dyn AttemptFence> {
    fn serve(&self, method: &str, request: &[u8], place: Place) -> Outcome {
        let decoded = FenceRequest::decode(method, request);
        served::serve::<FenceContract, _>(method, decoded, |request| match request {
            FenceRequest::LastEpoch { product } => {
                served::answered::<FenceContract>(self.last_epoch(&product).map(wire::encode_epoch))
            }
            FenceRequest::Acquire { product, candidate } => {
                // Refused before the hold is taken: a hold the host cannot release is never
                // made.
                if place.is_missing() {
                    return plugin_error(protocol::MALFORMED_REQUEST, "no place for the new hold");
                }
                // A host that names no Candidate asks for the whole Product's fence, which
                // this contract no longer has: refused, so that nothing is held looser than
                // the host believes.
                let Some(candidate) = candidate else {
                    return served::answered::<FenceContract>(Err(FenceError::InvalidInput {
                        input: "acquire without a candidate".into(),
                        rule: format!(
                            "holds are per Candidate since ABI minor {}; this host is older: \
                             upgrade sf",
                            wire::CANDIDATE_SINCE_MINOR
                        ),
                    }));
                };
                let hold = self.acquire(&product, &candidate).map(|hold| {
                    let answer = wire::encode_attempt(hold.attempt());
                    place.put(Box::new(hold));
                    answer
                });
                served::answered::<FenceContract>(hold)
            }
        })
    }
}

impl Served for Box<dyn FenceHold> {
    fn serve(&self, method: &str, request: &[u8], _: Place) -> Outcome {
        let decoded = HoldRequest::decode(method, request);
        served::serve::<FenceContract, _>(method, decoded, |request| match request {
            HoldRequest::AssertActive => {
                served::answered::<FenceContract>(self.assert_active().map(|()| Empty::encode()))
            }
            HoldRequest::Release => {
                self.release();
                Outcome::Ok(Empty::encode())
            }
        })
    }
}
