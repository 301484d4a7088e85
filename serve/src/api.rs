//! The HTTP API: routes, bearer tokens, bounded bodies. A proposal is stored in the queue
//! before `202` is answered; a request that is refused (no valid token, a bad body, an
//! unknown repository or Slice) queues nothing and is answered with sf's error envelope.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Path, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use sf_host::plugin::serve_config::ServeSettings;
use sf_host::repository::{MAX_PROPOSAL_DOCUMENT_BYTES, parse_proposal};

use crate::envelope::{ApiError, json_body};
use crate::pages;
use crate::queue::{Entry, Kind, QueueStore};
use crate::tokens::Tokens;
use crate::worker::Activity;

/// The largest request body read: a proposal document at its limit, and room for the
/// request's own fields.
pub const MAX_BODY_BYTES: usize = MAX_PROPOSAL_DOCUMENT_BYTES + 64 * 1024;

/// How long a request body may take to arrive.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What every handler reads.
pub struct Server {
    /// `[serve]`.
    pub settings: ServeSettings,
    /// The accepted tokens.
    pub tokens: Tokens,
    /// The queue, for the handlers (the workers hold their own handles).
    pub queue: Mutex<Box<dyn QueueStore>>,
    /// Each repository's Slices: id → frozen Slice directory.
    pub slices: BTreeMap<String, BTreeMap<String, std::path::PathBuf>>,
    /// What the workers are doing.
    pub activity: Arc<Activity>,
    /// The configuration file `sf report` is given, as sf serve was.
    pub config: Option<std::path::PathBuf>,
}

impl Server {
    /// Runs `work`, a few short operations, on the handlers' queue handle; its error is
    /// `500 unavailable`. A handle may block on the network (a PostgreSQL session also runs a
    /// runtime of its own, which must not be entered from a thread of this one), so it runs
    /// where the HTTP runtime allows blocking.
    pub fn with_queue<T>(
        &self,
        work: impl FnOnce(&mut dyn QueueStore) -> Result<T, String>,
    ) -> Result<T, ApiError> {
        tokio::task::block_in_place(|| {
            let mut queue = self
                .queue
                .lock()
                .map_err(|_| ApiError::unavailable("the queue's handle was poisoned by a panic"))?;
            work(queue.as_mut()).map_err(ApiError::unavailable)
        })
    }
}

/// The API's routes.
pub fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/", get(pages::queue_page))
        .route("/metrics", get(pages::metrics))
        .route("/v1/repositories/{name}/proposals", post(submit))
        .route("/v1/proposals/{id}", get(status))
        .route("/v1/proposals/{id}/report", get(pages::report))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not-found",
                "no such route: the API is POST /v1/repositories/NAME/proposals, GET \
                 /v1/proposals/ID, GET /v1/proposals/ID/report, GET /, GET /metrics",
            )
        })
        .with_state(server)
}

/// The client whose bearer token the request carries; 401 otherwise.
pub fn client(server: &Server, headers: &HeaderMap) -> Result<String, ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "no valid bearer token: send `Authorization: Bearer TOKEN` with a token of the \
             server's tokens file",
        )
    };
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(unauthorized)?
        .as_bytes();
    // The scheme is case-insensitive in HTTP; the token is not.
    if value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
        return Err(unauthorized());
    }
    let token = &value[7..];
    server
        .tokens
        .client(token)
        .map(str::to_owned)
        .ok_or_else(unauthorized)
}

/// `POST /v1/repositories/{name}/proposals`.
async fn submit(
    Shared(server): Shared<Arc<Server>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let client = client(&server, &headers)?;
    let Some(slices) = server.slices.get(&name) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            format!(
                "repository {name:?} is not served here; the repositories are {}",
                server.slices.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    // A client that sends its body slowly holds a connection no longer than this.
    let read = tokio::time::timeout(BODY_TIMEOUT, to_bytes(body, MAX_BODY_BYTES)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the request body is larger than {MAX_BODY_BYTES} bytes, or was cut off"),
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "timed-out",
                format!(
                    "the request body did not arrive within {} seconds; send it at once",
                    BODY_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    let (slice, kind, payload) = read_request(&bytes, slices)?;
    let id = new_id()?;
    let limit = server.settings.in_flight;
    let stored = server.with_queue(|queue| {
        queue.insert_within(&id, &name, &slice, kind, &payload, &client, limit)
    })?;
    if !stored {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too-many",
            format!(
                "client {client:?} has {limit} proposals in the queue that have not ended \
                 ([serve] in_flight); send this one when one of them has ended"
            ),
        ));
    }
    Ok((
        StatusCode::ACCEPTED,
        json_body(&serde_json::json!({"id": id, "state": "queued"})),
    )
        .into_response())
}

/// The request's Slice id, what its proposal is, and the bytes to store: refused (400)
/// unless it is `{"slice": ID, "proposal": {…}}` or `{"slice": ID, "diff": "…"}` naming a
/// configured Slice.
fn read_request(
    bytes: &[u8],
    slices: &BTreeMap<String, std::path::PathBuf>,
) -> Result<(String, Kind, Vec<u8>), ApiError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| {
        ApiError::invalid(format!(
            "the request body is not JSON ({error}); send {{\"slice\": ID, \"proposal\": {{…}}}} \
             or {{\"slice\": ID, \"diff\": \"…\"}}"
        ))
    })?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err(ApiError::invalid(
            "the request body must be a JSON object: {\"slice\": ID, \"proposal\": {…}} or \
             {\"slice\": ID, \"diff\": \"…\"}",
        ));
    };
    let slice = match fields.remove("slice") {
        Some(serde_json::Value::String(slice)) => slice,
        _ => {
            return Err(ApiError::invalid(
                "slice must be the id of a frozen Slice (a string)",
            ));
        }
    };
    if !slices.contains_key(&slice) {
        return Err(ApiError::invalid(format!(
            "slice {slice:?} is not a Slice of this repository; its Slices are {}",
            slices.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let (kind, payload) = match (fields.remove("proposal"), fields.remove("diff")) {
        (Some(proposal @ serde_json::Value::Object(_)), None) => {
            let bytes = proposal.to_string().into_bytes();
            parse_proposal(&bytes).map_err(|error| {
                ApiError::invalid(format!(
                    "proposal: {error}; send sf's proposal format ({{\"edits\": [{{\"path\", \
                     \"prior\", \"text\"}}], \"message\"?, \"author\"?}})"
                ))
            })?;
            (Kind::Proposal, bytes)
        }
        (None, Some(serde_json::Value::String(diff))) if !diff.trim().is_empty() => {
            (Kind::Diff, diff.into_bytes())
        }
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of proposal (sf's proposal format, an object) or diff (a \
                 Git diff of the Slice's base, a non-empty string)",
            ));
        }
    };
    if let Some(unknown) = fields.keys().next() {
        return Err(ApiError::invalid(format!(
            "{unknown} is not a known field; the fields are slice, and proposal or diff"
        )));
    }
    Ok((slice, kind, payload))
}

/// A new proposal id: 128 random bits, hex.
pub fn new_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom")
            .map_err(|error| ApiError::unavailable(format!("/dev/urandom: {error}")))?,
        &mut bytes,
    )
    .map_err(|error| ApiError::unavailable(format!("/dev/urandom: {error}")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The proposal `id`, or 404.
pub fn entry(server: &Server, id: &str) -> Result<Entry, ApiError> {
    server.with_queue(|queue| queue.get(id))?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not-found",
            format!("proposal {id:?} is not in the queue; use the id its POST answered"),
        )
    })
}

/// `GET /v1/proposals/{id}`.
async fn status(
    Shared(server): Shared<Arc<Server>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    client(&server, &headers)?;
    let entry = entry(&server, &id)?;
    let sealings = server.with_queue(|queue| queue.sealings_for(&id))?;
    let mut body = entry_json(&entry);
    body["sealings"] = sealings
        .iter()
        .map(|sealing| {
            serde_json::json!({
                "number": sealing.number,
                "base": sealing.base,
                "candidate": sealing.candidate,
                "commit": sealing.commit,
                "collection": sealing.trial,
                "refusal": sealing.refusal,
            })
        })
        .collect();
    Ok(json_body(&body))
}

/// What the API shows of a proposal.
pub fn entry_json(entry: &Entry) -> serde_json::Value {
    serde_json::json!({
        "id": entry.id,
        "repository": entry.repository,
        "slice": entry.slice,
        "client": entry.client,
        "state": entry.state.as_str(),
        "candidate": entry.candidate,
        "verdict": entry.verdict,
        "commit": entry.commit,
        "reasons": entry.reasons,
        "error": entry.error,
        "queuedAt": entry.queued_at,
        "updatedAt": entry.updated_at,
        "generation": entry.generation,
        "base": entry.base,
        "collection": entry.trial,
    })
}
