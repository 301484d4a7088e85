//! The guarded, at-most-once integration of a sealed Candidate into the target ref, bound to
//! a Verified Verdict: prepare judges the Candidate's evidence under its Slice and refuses
//! anything but Verified (the Verdict's digest is the intent's proof); invoke moves the target
//! with the judge's proof, whose guard judges the stored evidence again immediately before the
//! move; inspect reads the intent's history.

use sf_host::repository::{IntegrationObservation, IntegrationPayload};

use crate::backends::Backends;
use crate::effect::{
    InspectRequest, InvokeRequest, Invoked, PrepareRequest, PreparedEffect, invoked, prepare_with,
    read_prepared,
};
use crate::error::{AppError, effect_error, repository_error};
use crate::landing::land_error;

/// Retains one immutable intent for the occurrence, proved by the attempt's Verified
/// Verdict; moves nothing.
pub fn prepare(
    backends: &Backends,
    request: &PrepareRequest,
) -> Result<PreparedEffect<IntegrationPayload>, AppError> {
    prepare_with(backends, request, "integrated", |loaded, proof| {
        let repository = &loaded.repository;
        let payload =
            repository.integration_payload(proof, request.action.clone(), request.owner.clone());
        repository
            .prepare_integration(&payload)
            .map_err(|error| repository_error("preparing the integration", &error))
    })
}

/// Moves the target from B to M at most once for the prepared intent, with the proof the
/// judge makes again from the stored evidence.
pub fn invoke(
    backends: &Backends,
    request: &InvokeRequest,
) -> Result<IntegrationObservation, AppError> {
    let Invoked {
        prepared,
        loaded,
        gate,
    } = invoked(backends, request, |payload: &IntegrationPayload| {
        &payload.candidate
    })?;
    let payload = &prepared.payload;
    let proof = loaded
        .judging(backends)?
        .verified_by(&payload.candidate, &payload.proof)
        .map_err(|error| land_error("the intent's proof", error))?;
    loaded
        .repository
        .invoke_once(&prepared, &proof, Some(gate))
        .map_err(|error| effect_error("invoking the integration", &error, "started"))
}

/// Reports the intent's retained history, read-only.
pub fn inspect(
    backends: &Backends,
    request: &InspectRequest,
) -> Result<IntegrationObservation, AppError> {
    let prepared = read_prepared::<IntegrationPayload>(&request.prepared)?;
    let repository = backends.open_repository(&request.identity)?;
    repository
        .inspect_integration(&prepared)
        .map_err(|error| effect_error("inspecting the integration", &error, "started"))
}
