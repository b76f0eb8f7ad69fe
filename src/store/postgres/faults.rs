//! What a failing PostgreSQL costs a request (SPEC H3): every call is bounded by a deadline, a
//! failure that says the server went away, hung, restarted or stopped taking writes answers 503
//! with `Retry-After` (never 500), and the connection it broke is dropped, never handed out again.
//!
//! The SQLSTATE decides: serialization failures and deadlocks are retryable conflicts (409);
//! connection exceptions (08), `admin_shutdown`/`crash_shutdown`/`cannot_connect_now`
//! (57P01-03), a statement cancelled by `statement_timeout` (57014), insufficient resources (53)
//! and `read_only_sql_transaction` (25006: the primary was demoted under us) mean "this server,
//! now": 503. Everything else is a 500 whose PostgreSQL message and code stay in the log. The
//! 503s are logged too, at warn, at most once a second (an outage fails every request), with
//! the number of lines held back. A COMMIT without an answer is its own case (SPEC H2): the
//! work may have landed, so the request's idempotency claim is kept (see [`commit`]).

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool, PoolError};

use crate::error::{Error, Result};

const RETRY_AFTER_S: u64 = 1;
/// Unavailability is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// How a PostgreSQL error is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 409 with `Retry-After: 0`: the request lost a race; retrying runs it afresh.
    Conflict,
    /// 503 with `Retry-After`: the server is gone, hung, restarting or read-only; the
    /// connection is dropped.
    Unavailable,
    /// 500: a bug or a broken schema; the detail stays in the log.
    Internal,
}

/// The class of a SQLSTATE (five characters).
pub fn classify(sqlstate: &str) -> Class {
    match sqlstate {
        "40001" | "40P01" => Class::Conflict,
        "25006" | "57P01" | "57P02" | "57P03" | "57014" => Class::Unavailable,
        code if code.starts_with("08") || code.starts_with("53") => Class::Unavailable,
        _ => Class::Internal,
    }
}

/// A database error as the request's error (see the module header); an error without a
/// SQLSTATE is a broken or closed connection.
pub(crate) fn db_err(err: tokio_postgres::Error) -> Error {
    let code = err.code().map(|c| c.code());
    let class = if err.is_closed() { Class::Unavailable } else { code.map_or(Class::Unavailable, classify) };
    match class {
        Class::Conflict => {
            Error::Conflict { message: "The request collided with another; retry.".into(), parameter: None, retry_after_s: Some(0) }
        }
        Class::Unavailable => {
            warn_unavailable(code.unwrap_or("-"), &crate::error::chain(&err));
            unavailable()
        }
        Class::Internal => Error::Internal(format!("postgres {}: {}", code.unwrap_or("-"), crate::error::chain(&err))),
    }
}

pub(crate) fn pool_err(err: PoolError) -> Error {
    warn_unavailable("-", &format!("no database connection: {}", crate::error::chain(&err)));
    unavailable()
}

/// 503 for a cause found without an error from PostgreSQL (a probe's answer), logged as one.
pub(crate) fn unavailable_because(code: &str, why: &str) -> Error {
    warn_unavailable(code, why);
    unavailable()
}

fn unavailable() -> Error {
    Error::Unavailable { message: "The database is unavailable; retry shortly.".into(), retry_after_s: RETRY_AFTER_S }
}

/// `work`'s own outcome, or 503 if it has none within `deadline` (a hung server keeps its TCP
/// connections open and acknowledges what it is sent: only a clock notices it).
pub(crate) async fn within<T>(deadline: Duration, work: impl Future<Output = Result<T>>) -> Result<T> {
    match tokio::time::timeout(deadline, work).await {
        Ok(outcome) => outcome,
        Err(_) => {
            warn_unavailable("-", &format!("no answer within {} ms", deadline.as_millis()));
            Err(Error::Unavailable { message: "The database did not answer in time; retry shortly.".into(), retry_after_s: RETRY_AFTER_S })
        }
    }
}

/// COMMIT, exempt from the session's `statement_timeout`: on a synchronously replicated
/// primary, COMMIT waits for the standby, and a cancel (which is what the timeout is) would cut
/// that wait short and make the transaction visible though no standby has it. The call
/// deadline still bounds the request; the server finishes the wait (or is failed over) alone.
const COMMIT_SQL: &str = "SET LOCAL statement_timeout = 0; COMMIT";

/// Commits the transaction open on `client`, under `deadline`. A COMMIT the server refused
/// was rolled back: its own error. One with no answer (deadline, connection lost, server going
/// down, or its standby wait cut short: see `connect`) may have committed or not: 503
/// [`Error::OutcomeUnknown`], and the connection is not to be reused.
pub(crate) async fn commit(client: &Object, deadline: Duration) -> Result<()> {
    match within(deadline, async { client.batch_execute(COMMIT_SQL).await.map_err(db_err) }).await {
        Err(Error::Unavailable { .. }) => {
            warn_unavailable(
                "-",
                "a COMMIT got no answer: its outcome is unknown, and its Idempotency-Key stays claimed until its lease ends",
            );
            Err(outcome_unknown())
        }
        known => known,
    }
}

/// What a request whose COMMIT got no answer is told: a retry with the same Idempotency-Key
/// replays the reply if the commit took effect, and runs it once if not.
pub(crate) fn outcome_unknown() -> Error {
    Error::OutcomeUnknown {
        message: "The database did not confirm this request's commit; retry it with the same Idempotency-Key.".into(),
        retry_after_s: RETRY_AFTER_S,
    }
}

/// Whether a call that failed with `err` leaves its connection in doubt (mid-statement, in a
/// transaction, on a hung, gone or demoted server): then it is dropped, never reused.
pub(crate) fn breaks_connection(err: &Error) -> bool {
    matches!(err, Error::Unavailable { .. } | Error::OutcomeUnknown { .. })
}

/// Logs an unavailability at warn, at most once every [`WARN_EVERY`], with the count held back.
pub(crate) fn warn_unavailable(code: &str, detail: &str) {
    static LAST: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
    let held_back = {
        let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match last.as_mut() {
            Some((at, held)) if now.duration_since(*at) < WARN_EVERY => {
                *held += 1;
                return;
            }
            _ => {}
        }
        let held_back = last.map_or(0, |(_, held)| held);
        *last = Some((now, 0));
        held_back
    };
    tracing::warn!(code, error = detail, held_back, "database unavailable");
}

/// The pool and the deadline every call on it runs under.
#[derive(Clone)]
pub(crate) struct Db {
    pub pool: Pool,
    pub deadline: Duration,
}

impl Db {
    /// The deadline of a transaction of `writes` writes: the call deadline, plus 100 µs a write
    /// beyond the first thousand, so a bank file of 50,000 entries applied in one transaction
    /// (SPEC B5) gets the time it needs while a request's few writes keep the call deadline.
    pub fn deadline_for(&self, writes: usize) -> Duration {
        self.deadline + Duration::from_micros(writes.saturating_sub(1_000) as u64 * 100)
    }

    /// A pooled connection (bounded by the pool's own wait and create timeouts).
    pub async fn get(&self) -> Result<Object> {
        self.pool.get().await.map_err(pool_err)
    }

    /// Hands `client` back to the pool after a call, unless the call was answered 503: then
    /// the connection may be mid-statement, in a transaction, on a hung server or on a demoted
    /// primary, and it is dropped. So are the pool's idle connections, which share its server:
    /// each would otherwise cost a request its deadline before being found out.
    pub fn settle<T>(&self, client: Object, outcome: Result<T>) -> Result<T> {
        if outcome.as_ref().is_err_and(breaks_connection) {
            self.discard(client);
        }
        outcome
    }

    pub fn discard(&self, client: Object) {
        drop(Object::take(client));
        let idle = self.pool.retain(|_, _| false).removed.len();
        if idle > 0 {
            tracing::debug!(idle, "dropped idle database connections after a failure");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h3_sqlstates_map_to_conflict_unavailable_or_internal() {
        for code in ["40001", "40P01"] {
            assert_eq!(classify(code), Class::Conflict, "{code}");
        }
        // Failover, restart, demotion, hung statements, exhaustion: 503, never 500.
        for code in ["25006", "57P01", "57P02", "57P03", "57014", "08000", "08003", "08006", "08001", "08P01", "53000", "53300", "53100"] {
            assert_eq!(classify(code), Class::Unavailable, "{code}");
        }
        for code in ["23505", "42P01", "42703", "22P02", "XX000", "25P02"] {
            assert_eq!(classify(code), Class::Internal, "{code}");
        }
    }
}
