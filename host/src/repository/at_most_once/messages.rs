//! The commits of one intent, as bytes: the intent commit's objects and the messages of the
//! intent, dispatch and receipt commits, each naming the protocol and the payload digest.

use crate::canonical::Digest;
use crate::contracts::EncodedObject;

use super::super::record_commit::record_objects;
use super::payload::EffectPayload;

/// The name of the payload in an intent commit's tree.
pub(super) const PAYLOAD_NAME: &str = "payload.json";

/// The message of intent commit I of `protocol`.
pub(in crate::repository) fn intent_message(protocol: &str, digest: &Digest) -> String {
    format!("{protocol} intent\n\nintent: {digest}\n")
}

/// The message of dispatch commit D of `protocol` up to its nonce.
pub(in crate::repository) fn dispatch_head(protocol: &str, digest: &Digest) -> String {
    format!("{protocol} dispatch\n\nintent: {digest}\nnonce: ")
}

/// The message of dispatch commit D of `protocol`.
pub(in crate::repository) fn dispatch_message(
    protocol: &str,
    digest: &Digest,
    nonce: &str,
) -> String {
    format!("{}{nonce}\n", dispatch_head(protocol, digest))
}

/// The message of receipt commit R of `protocol` up to what the effect's receipt says.
pub(in crate::repository) fn receipt_head(protocol: &str, digest: &Digest) -> String {
    format!("{protocol} receipt\n\nintent: {digest}\n")
}

/// The intent objects for a payload of `P`: blob, tree and commit (last).
pub(in crate::repository) fn intent_objects<P: EffectPayload>(
    payload_bytes: Vec<u8>,
    digest: &Digest,
) -> Vec<EncodedObject> {
    record_objects(
        PAYLOAD_NAME,
        payload_bytes,
        Vec::new(),
        intent_message(P::PROTOCOL, digest),
    )
}
