//! sf's error envelope over HTTP: `{"schemaVersion":1,"ok":false,"error":{"code","message"}}`
//! with the status that says whose fault it was, the same shape `sf --json` prints.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A refused or failed request.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable kebab-case code.
    pub code: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

impl ApiError {
    /// `status` with `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// A request that cannot be served as sent (400, `invalid-input`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-input", message)
    }

    /// Something this server could not do (500, `unavailable`): logged, and told in one line.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "schemaVersion": 1,
            "ok": false,
            "error": {"code": self.code, "message": self.message},
        });
        let mut response = (self.status, json_body(&body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A JSON body with its content type.
pub fn json_body(value: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}
