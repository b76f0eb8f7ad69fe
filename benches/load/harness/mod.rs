//! The harness every scenario shares: the server as a child process (`server`), TLS client
//! connections and the requests a scenario sends (`http`), the closed-loop driver (`driver`),
//! what a run measured (`results`), CPU, memory and disk sampled from /proc (`sampling`), and
//! PostgreSQL connections and throwaway databases (`pg`).

pub mod driver;
pub mod http;
pub mod pg;
pub mod results;
pub mod sampling;
pub mod server;

use std::time::{SystemTime, UNIX_EPOCH};

pub use http::{Call, Reply, Req, Requests, Target, call_json, connect, id_of, measure_http};
pub use results::{Results, RunResult, r1, r3, ratio};
pub use server::{ServerProcess, Store, create_key, server_bin};

pub type BoxResult<T> = Result<T, String>;

/// Longest latency the histograms hold: one minute, in microseconds.
pub const LATENCY_MAX_US: u64 = 60_000_000;
/// Error messages kept per run for the report.
pub const ERROR_SAMPLES_MAX: usize = 4;

pub fn unix_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}
