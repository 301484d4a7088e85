//! `land`: the whole guarded path as one use case. The Candidate is read and checked against
//! its Slice, the preflight runs (unless the occurrence already holds an intent), and the
//! landing ([`crate::landing`]) collects, judges and integrates only on Verified. A gate that
//! withholds is a decided outcome wherever it does (at the preflight or immediately before the
//! move): the landing answers `withheld` with the gate's reason, never an error. With a
//! delivery asked for, a landing that integrated goes on to deliver the same commit to the
//! base's upstream: the same Verified Verdict, a delivery intent for the same action
//! occurrence.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use sf_host::canonical::Digest;
use sf_host::contracts::{Executor, Gate};
use sf_host::repository::{
    Action, DeliveryMode, DeliveryObservation, Owner, PreparedDelivery, PreparedIntegration,
};

use crate::attest::{Attested, attest_verdict, signing_key};
use crate::backends::Backends;
use crate::deliver::{invoke_for, prepare_for};
use crate::env::verified_trees;
use crate::error::{AppError, repository_error};
use crate::input::deadline;
use crate::judge::{CheckOutput, unmet_outputs};
use crate::landing::{self, Composition, LandError, LandOutcome, Landing, land_error};
use crate::loaded::{Loaded, Target, trees_store_for};
use crate::preflight::{check_gate_file, check_jobs, preflight};
use crate::progress::Progress;
use crate::slice_dir::SliceDir;

/// The owner a landing names when the request names none.
pub const DEFAULT_OWNER: &str = "sf-land";

/// One landing, as asked for.
#[derive(Clone, Debug)]
pub struct LandRequest {
    /// The Candidate and its Slice.
    pub target: Target,
    /// A gate file read before anything starts, before every run and immediately before the
    /// move, in place of the configured gate.
    pub gate: Option<PathBuf>,
    /// The action id of the integration; `None` for `land/<the Candidate digest>`.
    pub action: Option<String>,
    /// The action's occurrence (a new effect needs a new occurrence).
    pub occurrence: u64,
    /// The owner id of the integration.
    pub owner: String,
    /// The owner's generation.
    pub generation: u64,
    /// When the collection must be over, as given (RFC 3339 UTC); `None` for an hour from
    /// now.
    pub deadline: Option<String>,
    /// How many checks run at a time.
    pub jobs: NonZeroUsize,
    /// After integrating, deliver the commit to the base's upstream, where the mode says.
    pub deliver: Option<DeliveryMode>,
    /// Land this attempt, collected earlier (`collect`), judged again, instead of collecting
    /// a new one: how a service collects Candidates in parallel and lands them in turn.
    /// `None` collects.
    pub attempt: Option<u64>,
}

/// What a landing did, with what its caller shows of it.
pub struct Landed {
    /// The Candidate's digest.
    pub candidate: Digest,
    /// The frozen Slice it landed under.
    pub slice: SliceDir,
    /// What the landing did and saw.
    pub landing: Landing,
    /// What each check the landing's Verdict did not meet wrote.
    pub unmet: Vec<CheckOutput>,
    /// The delivery, when one was asked for and the landing integrated.
    pub delivery: Option<Delivered>,
    /// The attestation of the landed commit, when `[attest]` is configured and the landing
    /// integrated.
    pub attestation: Option<Attested>,
}

/// A delivery made after a landing.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// The delivery intent.
    pub prepared: PreparedDelivery,
    /// What its invocation reported.
    pub observation: DeliveryObservation,
}

/// Lands `request.target`: `Err` means nothing was started after the point the error names;
/// everything reached is in the answer. `progress` hears the collection's events.
pub fn land(
    backends: &Backends,
    request: &LandRequest,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Landed, AppError> {
    let ready = match Ready::check(backends, request)? {
        Checked::Ready(ready) => *ready,
        Checked::Withheld { loaded, reason } => {
            return Ok(Landed {
                candidate: loaded.sealed.digest.clone(),
                slice: loaded.slice,
                landing: Landing::withheld_before(reason),
                unmet: Vec::new(),
                delivery: None,
                attestation: None,
            });
        }
    };
    let Ready {
        loaded,
        action,
        owner,
        gate,
        ..
    } = &ready;
    let protected = loaded.protected()?;
    let store = loaded.slice.evidence_store(backends)?;
    let fence = loaded
        .slice
        .fence(backends, &loaded.repository.identity().product_id)?;
    // An sf-candidate/4 Candidate's programs run by reference from its materialised base.
    let trees_store = trees_store_for(backends, &loaded.sealed)?;
    let composition = Composition {
        repository: &loaded.repository,
        candidate: loaded.sealed.digest.clone(),
        slice: loaded.slice.frozen.clone(),
        executor: Arc::clone(&ready.executor),
        store: Arc::clone(&store),
        gate: Arc::clone(gate),
        fence: &fence,
        protected,
        action: action.clone(),
        owner: owner.clone(),
        deadline: ready.deadline,
        jobs: request.jobs,
        attempt: request.attempt,
        environments: verified_trees(backends, loaded.slice.frozen.acceptance.environments())?,
        capabilities: crate::capabilities::staged_for_run(
            backends,
            &loaded.slice.frozen.acceptance,
        ),
        tree_store: trees_store.as_ref(),
        faults: Arc::clone(&backends.faults),
    };
    let landing =
        landing::land(composition, progress).map_err(|error| land_error("landing", error))?;
    let unmet = landing
        .verdict
        .as_ref()
        .map_or_else(Vec::new, |verdict| unmet_outputs(store.as_ref(), verdict));
    // Attested before it is delivered, so that the delivery's push carries the attestation.
    let attestation = match &landing.prepared {
        Some(prepared) if landing.outcome == LandOutcome::Integrated => {
            attest_verdict(backends, loaded, &prepared.payload.proof)?
        }
        _ => None,
    };
    let delivery = match (request.deliver, &landing.prepared) {
        (Some(mode), Some(prepared)) if landing.outcome == LandOutcome::Integrated => {
            Some(deliver(backends, &ready, prepared, mode)?)
        }
        _ => None,
    };
    Ok(Landed {
        candidate: ready.loaded.sealed.digest.clone(),
        slice: ready.loaded.slice,
        landing,
        unmet,
        delivery,
        attestation,
    })
}

/// A landing checked before anything starts: the Candidate read and checked against its
/// Slice, the occurrence it lands, the Slice's executor and the gate, and (unless the
/// occurrence already holds an intent) the preflight passed.
struct Ready {
    deadline: SystemTime,
    loaded: Loaded,
    action: Action,
    owner: Owner,
    executor: Arc<dyn Executor>,
    gate: Arc<dyn Gate>,
}

/// A landing checked before anything starts: ready, or withheld by the gate at the preflight.
enum Checked {
    Ready(Box<Ready>),
    /// The gate withheld: nothing was written, and the occurrence is not consumed.
    Withheld {
        loaded: Box<Loaded>,
        reason: String,
    },
}

impl Ready {
    fn check(backends: &Backends, request: &LandRequest) -> Result<Checked, AppError> {
        let deadline = deadline(request.deadline.as_deref())?;
        check_gate_file(request.gate.as_deref())?;
        let loaded = Loaded::read(backends, &request.target)?;
        // A signing key sf cannot use refuses the landing before anything starts.
        signing_key(backends)?;
        let (action, owner) = occurrence(request, &loaded.sealed.digest);
        let executor = loaded.slice.executor(backends)?;
        check_jobs(executor.as_ref(), request.jobs)?;
        let gate = backends.gate(request.gate.as_deref())?;
        let replay = loaded
            .repository
            .retained_intent(&action)
            .map_err(|error| repository_error("the action's intent", &error))?;
        if replay.is_none() {
            match preflight(executor.as_ref(), &loaded.slice.frozen, &gate, deadline) {
                Ok(()) => {}
                Err(LandError::Withheld { reason }) => {
                    return Ok(Checked::Withheld {
                        loaded: Box::new(loaded),
                        reason,
                    });
                }
                Err(error) => return Err(land_error("before anything started", error)),
            }
        }
        Ok(Checked::Ready(Box::new(Self {
            deadline,
            loaded,
            action,
            owner,
            executor,
            gate,
        })))
    }
}

/// The action occurrence and owner a landing of Candidate `candidate` names.
fn occurrence(request: &LandRequest, candidate: &Digest) -> (Action, Owner) {
    let action = Action {
        id: request
            .action
            .clone()
            .unwrap_or_else(|| format!("land/{candidate}")),
        occurrence: request.occurrence,
    };
    let owner = Owner {
        id: request.owner.clone(),
        generation: request.generation,
    };
    (action, owner)
}

/// Delivers what the landing integrated (`integrated`, the intent whose proof is the
/// Verified Verdict) for the same occurrence, behind the same gate.
fn deliver(
    backends: &Backends,
    ready: &Ready,
    integrated: &PreparedIntegration,
    mode: DeliveryMode,
) -> Result<Delivered, AppError> {
    let occurrence = (ready.action.clone(), ready.owner.clone());
    let loaded = &ready.loaded;
    let prepared = prepare_for(loaded, occurrence, &integrated.payload.proof, mode)?;
    let observation = invoke_for(backends, loaded, &prepared, Arc::clone(&ready.gate))?;
    Ok(Delivered {
        prepared,
        observation,
    })
}
