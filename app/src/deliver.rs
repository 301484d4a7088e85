//! The guarded, at-most-once delivery of a Verified Candidate's commit M to the team's own
//! Git remote: prepare judges the Candidate's evidence under its Slice and refuses anything
//! but Verified; invoke pushes with the judge's proof, whose guard judges the stored evidence
//! again immediately before the push, then asks the gate; inspect reads the intent's history
//! and what the remote shows.

use std::sync::Arc;

use sf_host::canonical::Digest;
use sf_host::contracts::Gate;
use sf_host::repository::{
    Action, DeliveryMode, DeliveryObservation, DeliveryPayload, DeliveryRequest, Owner,
    PreparedDelivery,
};

use crate::attest::attest;
use crate::backends::Backends;
use crate::effect::{
    InspectRequest, InvokeRequest, Invoked, PrepareRequest, PreparedEffect, invoked, prepare_with,
    read_prepared,
};
use crate::error::{AppError, effect_error, repository_error};
use crate::landing::land_error;
use crate::loaded::Loaded;

/// Retains one immutable delivery intent for the occurrence, proved by the attempt's
/// Verified Verdict; pushes nothing. `mode` says where it pushes.
pub fn prepare(
    backends: &Backends,
    request: &PrepareRequest,
    mode: DeliveryMode,
) -> Result<PreparedEffect<DeliveryPayload>, AppError> {
    prepare_with(backends, request, "delivered", |loaded, proof| {
        let occurrence = (request.action.clone(), request.owner.clone());
        prepare_for(loaded, occurrence, proof.digest(), mode)
    })
}

/// Pushes M to the team's remote at most once for the prepared intent.
pub fn invoke(
    backends: &Backends,
    request: &InvokeRequest,
) -> Result<DeliveryObservation, AppError> {
    let Invoked {
        prepared,
        loaded,
        gate,
    } = invoked(backends, request, |payload: &DeliveryPayload| {
        &payload.candidate
    })?;
    invoke_for(backends, &loaded, &prepared, gate)
}

/// Reports the intent's history and what the remote shows, read-only (never pushes).
pub fn inspect(
    backends: &Backends,
    request: &InspectRequest,
) -> Result<DeliveryObservation, AppError> {
    let prepared = read_prepared::<DeliveryPayload>(&request.prepared)?;
    let repository = backends.open_repository(&request.identity)?;
    repository
        .inspect_delivery(&prepared, &backends.remote()?)
        .map_err(|error| effect_error("inspecting the delivery", &error, "pushed"))
}

/// Prepares the delivery of the loaded Candidate for `occurrence` (the action and its
/// owner), admitted by the Verified Verdict `verdict`.
pub(crate) fn prepare_for(
    loaded: &Loaded,
    (action, owner): (Action, Owner),
    verdict: &Digest,
    mode: DeliveryMode,
) -> Result<PreparedDelivery, AppError> {
    let request = DeliveryRequest {
        action,
        owner,
        candidate: loaded.sealed.digest.clone(),
        verdict: verdict.clone(),
        mode,
    };
    loaded
        .repository
        .prepare_delivery(&request)
        .map_err(|error| repository_error("preparing the delivery", &error))
}

/// Invokes `prepared` with the proof the judge makes again from the stored evidence, its
/// guard before `gate`.
pub(crate) fn invoke_for(
    backends: &Backends,
    loaded: &Loaded,
    prepared: &PreparedDelivery,
    gate: Arc<dyn Gate>,
) -> Result<DeliveryObservation, AppError> {
    let remote = backends.remote()?;
    let payload = &prepared.payload;
    let proof = loaded
        .judging(backends)?
        .verified_by(&payload.candidate, &payload.verdict)
        .map_err(|error| land_error("the delivery's Verdict", error))?;
    // The commit's attestation, when landings are attested, is kept before the push so that
    // the push carries it (the one kept already, if the landing made it).
    attest(backends, loaded, &proof)?;
    loaded
        .repository
        .invoke_delivery(prepared, &proof, &remote, Some(gate))
        .map_err(|error| effect_error("invoking the delivery", &error, "pushed"))
}
