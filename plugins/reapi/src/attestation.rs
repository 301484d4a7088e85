//! What a worker attests of a run it executed: the Action it ran (by digest), its own name,
//! and the sandbox's whole answer (status, exit code or signal, times, the identities actually
//! enforced, the enforcement facts, whether every process ended, problems, the limits the run
//! hit, what became of the results file). It travels in the ActionResult's
//! `execution_metadata.auxiliary_metadata` as one `Any` of type [`TYPE_URL`], whose bytes are
//! a plugin-ABI message:
//!
//! ```text
//! header {"protocol":"sf-run-attestation/1","action":"HASH/SIZE","worker":…,"answer":0}
//! section 0: the answer as the plugin ABI's run_v6 answer, without its bytes
//! ```
//!
//! The answer's stdout and stderr are empty and a results file that was written is
//! `Written` with no bytes: the bytes are in the CAS, named by the ActionResult
//! (`stdout_digest`, `stderr_digest`, the output file), which the Executor downloads within
//! the run's limits.

use serde::{Deserialize, Serialize};
use sf_contracts::RunAnswer;
use sf_contracts::command::CapturedResults;
use sf_plugin_abi::executor_protocol::{self as wire, RunWire};
use sf_plugin_abi::message::{self, MessageBuilder};

use crate::digest;
use crate::proto::execution::Digest;
use crate::proto::protobuf::Any;

/// The protocol string of an attestation.
pub const PROTOCOL: &str = "sf-run-attestation/1";

/// The type URL of the `Any` holding an attestation.
pub const TYPE_URL: &str = "type.googleapis.com/sf.RunAttestation.v1";

/// A worker's statement about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attestation {
    /// The digest of the Action the worker ran.
    pub action: Digest,
    /// The worker's name (its bot id).
    pub worker: String,
    /// The sandbox's answer, without stdout, stderr and the results file's bytes.
    pub answer: RunAnswer,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    protocol: String,
    action: String,
    worker: String,
    answer: usize,
}

/// `answer` without its bytes, as an attestation carries it.
pub fn without_bytes(answer: &RunAnswer) -> RunAnswer {
    let mut answer = answer.clone();
    answer.stdout = Vec::new();
    answer.stderr = Vec::new();
    if let Some(CapturedResults::Written(bytes)) = &mut answer.results {
        bytes.clear();
    }
    answer
}

impl Attestation {
    /// The attestation as the `Any` a worker puts in the auxiliary metadata.
    pub fn to_any(&self) -> Any {
        let answer = wire::encode_answer(&without_bytes(&self.answer), RunWire::V6);
        let mut builder = MessageBuilder::new();
        let section = builder.section(&answer);
        let value = builder.encode(&Header {
            protocol: PROTOCOL.to_owned(),
            action: digest::text(&self.action),
            worker: self.worker.clone(),
            answer: section,
        });
        Any {
            type_url: TYPE_URL.to_owned(),
            value,
        }
    }

    /// The attestation among `metadata` (the auxiliary metadata of an ActionResult): `Err`
    /// when there is none, more than one, or it does not decode.
    pub fn find(metadata: &[Any]) -> Result<Self, String> {
        let mut found = metadata.iter().filter(|any| any.type_url == TYPE_URL);
        let (Some(any), None) = (found.next(), found.next()) else {
            return Err(format!(
                "the result carries {} worker attestations, not one",
                metadata
                    .iter()
                    .filter(|any| any.type_url == TYPE_URL)
                    .count()
            ));
        };
        Self::decode(&any.value).map_err(|error| format!("the worker's attestation: {error}"))
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let (header, mut sections) = message::decode::<Header>(bytes).map_err(|e| e.to_string())?;
        if header.protocol != PROTOCOL {
            return Err(format!("protocol {:?} is not {PROTOCOL}", header.protocol));
        }
        let answer = sections.take(header.answer).map_err(|e| e.to_string())?;
        let answer = wire::decode_answer(answer, RunWire::V6).map_err(|e| e.to_string())?;
        sections.finish().map_err(|e| e.to_string())?;
        Ok(Self {
            action: digest::parse(&header.action)?,
            worker: header.worker,
            answer,
        })
    }
}
