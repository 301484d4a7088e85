//! What the two effects' use cases (integration and delivery) take alike: the occurrence an
//! intent is prepared for, the prepared record handed back to invoke and inspect, and the
//! file it is read from or written to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, Gate};
use sf_host::judging::Verified;
use sf_host::repository::{Action, EffectPayload, Owner, Prepared};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::files::{new_record_file, write_new_record};
use crate::input::read_input;
use crate::judge::verified;
use crate::loaded::{Loaded, Target};

/// What an effect's intent is prepared for: the Candidate under its Slice, the attempt whose
/// Verified Verdict admits it, and which occurrence of which action, owned by whom.
#[derive(Clone, Debug)]
pub struct PrepareRequest {
    /// The Candidate and its Slice.
    pub target: Target,
    /// The attempt (fence epoch) whose Verdict admits the effect; `None` for the newest.
    pub attempt: Option<u64>,
    /// The action occurrence the intent is for.
    pub action: Action,
    /// Who owns it.
    pub owner: Owner,
    /// A new file the prepared record is also written to (`--prepared-out`).
    pub prepared_out: Option<PathBuf>,
}

/// An intent prepared and retained, and the attempt whose Verified Verdict is its proof.
#[derive(Clone, Debug)]
pub struct PreparedEffect<P> {
    /// The prepared record.
    pub prepared: Prepared<P>,
    /// The attempt judged Verified.
    pub attempt: AttemptId,
}

/// A prepared intent to invoke: at most once, behind the proof's guard and the gate.
#[derive(Clone, Debug)]
pub struct InvokeRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The prepared record's file (`--prepared`).
    pub prepared: PathBuf,
    /// The frozen Slice whose evidence the intent's Verdict is judged from, again.
    pub slice: PathBuf,
    /// A gate file read immediately before the effect, in place of the configured gate.
    pub gate: Option<PathBuf>,
}

/// A prepared intent whose history is read, read-only.
#[derive(Clone, Debug)]
pub struct InspectRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The prepared record's file (`--prepared`).
    pub prepared: PathBuf,
}

/// The prepared record in `path` (`--prepared`), parsed strictly.
pub(crate) fn read_prepared<P: EffectPayload>(path: &Path) -> Result<Prepared<P>, AppError>
where
    Prepared<P>: Serialize + DeserializeOwned,
{
    Prepared::from_json(&read_input(path, "--prepared")?)
        .map_err(|error| repository_error(&format!("--prepared {}", path.display()), &error))
}

/// Prepares an effect's intent: the `--prepared-out` file is checked new first, the
/// Candidate read and judged, and only on a Verified Verdict `retain` prepares the intent
/// from the loaded Candidate and the judge's proof; the record is then written to the file
/// when one was asked for. `effect` says what a refusal did not do (`integrated`,
/// `delivered`).
pub(crate) fn prepare_with<P: EffectPayload>(
    backends: &Backends,
    request: &PrepareRequest,
    effect: &str,
    retain: impl FnOnce(&Loaded, &Verified) -> Result<Prepared<P>, AppError>,
) -> Result<PreparedEffect<P>, AppError>
where
    Prepared<P>: Serialize + DeserializeOwned,
{
    let prepared_out = new_record_file(request.prepared_out.as_deref(), "--prepared-out")?;
    let loaded = Loaded::read(backends, &request.target)?;
    let (verdict, proof) = verified(backends, &loaded, request.attempt, effect)?;
    let prepared = retain(&loaded, &proof)?;
    if let Some(file) = &prepared_out {
        write_new_record(file, &prepared.to_value(), "--prepared-out")?;
    }
    Ok(PreparedEffect {
        prepared,
        attempt: verdict.attempt,
    })
}

/// What an invoke starts from.
pub(crate) struct Invoked<P> {
    /// The prepared intent.
    pub(crate) prepared: Prepared<P>,
    /// The Candidate it names, read and checked under the request's Slice.
    pub(crate) loaded: Loaded,
    /// The gate asked immediately before the effect.
    pub(crate) gate: Arc<dyn Gate>,
}

/// Reads what an invoke of `request` starts from; `candidate` names the Candidate of a
/// payload.
pub(crate) fn invoked<P: EffectPayload>(
    backends: &Backends,
    request: &InvokeRequest,
    candidate: impl FnOnce(&P) -> &Digest,
) -> Result<Invoked<P>, AppError>
where
    Prepared<P>: Serialize + DeserializeOwned,
{
    let prepared = read_prepared::<P>(&request.prepared)?;
    let target = Target {
        identity: request.identity.clone(),
        candidate: candidate(&prepared.payload).to_string(),
        slice: request.slice.clone(),
    };
    let loaded = Loaded::read(backends, &target)?;
    let gate = backends.gate(request.gate.as_deref())?;
    Ok(Invoked {
        prepared,
        loaded,
        gate,
    })
}
