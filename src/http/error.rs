//! The error body of the contract (SPEC L3, L4) and the status of every [`Error`].

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::{AuthFailure, Error};

/// The error body of every failed request (SPEC L3).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = error_message)]
pub struct Body<'a> {
    errors: Detail<'a>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = error_detail)]
pub struct Detail<'a> {
    /// What went wrong, for programs: `parameter_invalid`, `parameter_missing`, `invalid_key`,
    /// `resource_not_found`, `conflict`, `malformed_json`, `rate_limit_exceeded`, ...
    code: &'a str,
    /// What went wrong, for people.
    message: &'a str,
    /// The parameter at fault (a body field path such as `accounts[0].name`, a query
    /// parameter, or a header such as `Idempotency-Key`), or `null`.
    parameter: Option<&'a str>,
}

pub const SHOULD_RETRY: &str = "x-should-retry";

/// The error body's bytes, for replies written below the router (the transport's own refusals).
pub fn body_bytes(code: &str, message: &str, parameter: Option<&str>) -> Vec<u8> {
    serde_json::to_vec(&Body { errors: Detail { code, message, parameter } }).unwrap_or_default()
}

impl Error {
    pub fn status(&self) -> StatusCode {
        match self {
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Error::NotFound { .. } => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::Conflict { .. } => StatusCode::CONFLICT,
            Error::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Unavailable { .. } | Error::OutcomeUnknown { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Error::Unauthorized(AuthFailure::Invalid) => "invalid_key",
            Error::Unauthorized(AuthFailure::Expired) => "expired_key",
            Error::BadRequest { code, .. } | Error::Invalid { code, .. } => code,
            Error::NotFound { .. } => "resource_not_found",
            Error::MethodNotAllowed => "method_not_allowed",
            Error::Conflict { .. } => "conflict",
            Error::PayloadTooLarge { .. } => "request_too_large",
            Error::UnsupportedMediaType { .. } => "unsupported_media_type",
            Error::RateLimited { .. } => "rate_limit_exceeded",
            Error::Unavailable { .. } | Error::OutcomeUnknown { .. } => "service_unavailable",
            Error::Internal(_) => "internal_server_error",
        }
    }

    fn public_message(&self) -> String {
        match self {
            Error::Unauthorized(AuthFailure::Invalid) => {
                "Invalid API key. Authenticate with HTTP Basic: user name x-api-key, password your API key.".into()
            }
            Error::Unauthorized(AuthFailure::Expired) => "This API key has expired; use the key that replaced it.".into(),
            Error::MethodNotAllowed => "This method is not allowed on this path.".into(),
            Error::Internal(_) => "Something went wrong on our side; the request was not carried out.".into(),
            other => other.to_string(),
        }
    }

    fn parameter(&self) -> Option<&str> {
        match self {
            Error::BadRequest { parameter, .. } | Error::Conflict { parameter, .. } => parameter.as_deref(),
            Error::Invalid { parameter, .. } => Some(parameter),
            _ => None,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if let Error::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let message = self.public_message();
        let body = Body { errors: Detail { code: self.code(), message: &message, parameter: self.parameter() } };
        let mut response = (self.status(), Json(body)).into_response();
        let headers = response.headers_mut();
        match &self {
            Error::Unauthorized(_) => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"payrail\""));
            }
            Error::Conflict { retry_after_s: Some(secs), .. }
            | Error::RateLimited { retry_after_s: secs }
            | Error::Unavailable { retry_after_s: secs, .. }
            | Error::OutcomeUnknown { retry_after_s: secs, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            // A conflict nobody can retry away, and every 422: retrying cannot fix them (L4).
            Error::Conflict { retry_after_s: None, .. } | Error::Invalid { .. } => {
                headers.insert(SHOULD_RETRY, HeaderValue::from_static("false"));
            }
            _ => {}
        }
        response
    }
}
