//! The one error type of Payrail.
//!
//! Domain rules, the store and the HTTP layer all fail with [`Error`]; `http::error` is the only
//! place that turns it into a status code and the contract's body (SPEC L3):
//! `{"errors":{"code":..., "message":..., "parameter":...}}`. Internal failures keep their detail
//! for the log and reveal nothing to the client.

use std::fmt;

/// Why a credential was refused (SPEC A2). Both answer 401; only the code differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// Missing, malformed, non-Basic, unknown or revoked.
    Invalid,
    /// A rolled key whose grace period is over.
    Expired,
}

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("authentication failed")]
    Unauthorized(AuthFailure),

    /// 400: the request itself could not be read (malformed JSON, malformed header, plain HTTP).
    #[error("{message}")]
    BadRequest { code: &'static str, message: String, parameter: Option<String> },

    /// 404: no such resource in the caller's organization and mode, or no such route.
    #[error("{message}")]
    NotFound { message: String },

    #[error("method not allowed")]
    MethodNotAllowed,

    /// 409. `retry_after_s` is set when retrying later can succeed (a key still in flight).
    #[error("{message}")]
    Conflict { message: String, parameter: Option<String>, retry_after_s: Option<u64> },

    #[error("request body larger than {limit_bytes} bytes")]
    PayloadTooLarge { limit_bytes: usize },

    #[error("{message}")]
    UnsupportedMediaType { message: String },

    /// 422: a parameter is missing or invalid. Retrying the same request cannot fix it.
    #[error("{message}")]
    Invalid { code: &'static str, parameter: String, message: String },

    #[error("rate limit exceeded")]
    RateLimited { retry_after_s: u64 },

    /// 503: the request was not carried out (timed out before committing, store unreachable).
    #[error("{message}")]
    Unavailable { message: String, retry_after_s: u64 },

    /// 503 too, but the work may have been carried out: a commit whose outcome is unknown (the
    /// connection was lost during COMMIT, or its wait for the synchronous standby was cut
    /// short). The request's idempotency claim is kept, not released, until its lease runs out,
    /// so a retry with the same key replays what committed or runs once (SPEC H2).
    #[error("{message}")]
    OutcomeUnknown { message: String, retry_after_s: u64 },

    /// 500. The detail is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// 422 `parameter_invalid` naming `parameter`.
    pub fn invalid(parameter: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid { code: "parameter_invalid", parameter: parameter.into(), message: message.into() }
    }

    /// 422 `parameter_missing` naming `parameter`.
    pub fn missing(parameter: impl Into<String>) -> Self {
        let parameter = parameter.into();
        let message = format!("{parameter} is required");
        Error::Invalid { code: "parameter_missing", parameter, message }
    }

    pub fn not_found(what: &str) -> Self {
        Error::NotFound { message: format!("{what} not found") }
    }

    pub fn internal(detail: impl fmt::Display) -> Self {
        Error::Internal(detail.to_string())
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>, parameter: Option<&str>) -> Self {
        Error::BadRequest { code, message: message.into(), parameter: parameter.map(str::to_owned) }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `err` and every error beneath it, outermost first, joined by ": ". Libraries often say only
/// what failed at the top ("db error") and why underneath (the server's own message), so a log
/// line must carry the whole chain to say the cause.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        // Some errors repeat their source's text in their own; say it once.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("db error")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn chain_says_the_cause_under_a_vague_error() {
        let err = Outer(std::io::Error::other("relation \"x\" does not exist"));
        assert_eq!(err.to_string(), "db error", "the top alone says nothing");
        assert_eq!(chain(&err), "db error: relation \"x\" does not exist");
    }
}
