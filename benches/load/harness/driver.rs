//! The closed-loop driver, shared by HTTP and PostgreSQL sessions: N sessions, each sending its
//! next request when the last one is done, latencies recorded after a warm-up.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::results::{RunResult, new_hist};
use super::{BoxResult, ERROR_SAMPLES_MAX, LATENCY_MAX_US};

/// What one request or transaction came to.
pub enum Outcome {
    Ok,
    /// The refusal the call expects too: a right answer, counted (and timed) apart.
    Refused,
    /// An answer, but not the expected one: an error; the session stays usable.
    Unexpected(String),
    /// The connection failed: an error; the session is reopened.
    Broken(String),
}

pub trait Session: Send + 'static {
    fn once(&mut self, seq: u64) -> impl Future<Output = Outcome> + Send;

    /// Connections reopened since the last call, because the server had closed them.
    fn take_reconnects(&mut self) -> u64 {
        0
    }
}

pub trait Opener: Send + Sync + 'static {
    type S: Session;
    fn open(&self, conn: usize) -> impl Future<Output = BoxResult<Self::S>> + Send;
}

struct WorkerStats {
    ok: u64,
    refused: u64,
    errors: u64,
    reconnects: u64,
    hist: Histogram<u64>,
    samples: Vec<String>,
    done: Instant,
}

impl WorkerStats {
    fn error(&mut self, measured: bool, message: String) {
        if measured {
            self.errors += 1;
            if self.samples.len() < ERROR_SAMPLES_MAX {
                self.samples.push(message);
            }
        }
    }
}

/// Runs `conns` sessions in a closed loop: all connect, then `warmup` (not recorded), then
/// `duration` recorded. Requests still running at the end are waited for and counted.
pub async fn closed_loop<O: Opener>(name: &'static str, opener: Arc<O>, conns: usize, warmup: Duration, duration: Duration) -> RunResult {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(conns);
    let (go_tx, go_rx) = tokio::sync::watch::channel::<Option<(Instant, Instant)>>(None);
    let mut tasks = Vec::with_capacity(conns);
    for conn in 0..conns {
        let (opener, ready, go) = (opener.clone(), ready_tx.clone(), go_rx.clone());
        tasks.push(tokio::spawn(session_loop(opener, conn, ready, go)));
    }
    drop(ready_tx);
    for _ in 0..conns {
        let _ = ready_rx.recv().await;
    }
    let start = Instant::now() + warmup;
    let end = start + duration;
    let _ = go_tx.send(Some((start, end)));
    let mut result = RunResult::empty(name, conns);
    let mut last = end;
    for task in tasks {
        match task.await {
            Ok(stats) => {
                result.ok += stats.ok;
                result.refused += stats.refused;
                result.errors += stats.errors;
                result.reconnects += stats.reconnects;
                let _ = result.hist.add(&stats.hist);
                for sample in stats.samples {
                    result.keep_error_sample(sample);
                }
                last = last.max(stats.done);
            }
            Err(err) => {
                result.errors += 1;
                result.error_samples.push(format!("worker panicked: {err}"));
            }
        }
    }
    result.elapsed_s = last.saturating_duration_since(start).as_secs_f64();
    result
}

async fn session_loop<O: Opener>(
    opener: Arc<O>,
    conn: usize,
    ready: tokio::sync::mpsc::Sender<()>,
    mut go: tokio::sync::watch::Receiver<Option<(Instant, Instant)>>,
) -> WorkerStats {
    let mut stats = WorkerStats { ok: 0, refused: 0, errors: 0, reconnects: 0, hist: new_hist(), samples: vec![], done: Instant::now() };
    let mut first_error = None;
    let mut session = match opener.open(conn).await {
        Ok(s) => Some(s),
        Err(err) => {
            first_error = Some(err);
            None
        }
    };
    let _ = ready.send(()).await;
    drop(ready);
    let Ok(times) = go.wait_for(|t| t.is_some()).await.map(|t| (*t).expect("checked")) else {
        return stats;
    };
    let (start, end) = times;
    if let Some(err) = first_error {
        stats.error(true, format!("connect: {err}"));
    }
    let mut seq = 0u64;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let measured = t0 >= start;
        let Some(s) = session.as_mut() else {
            match opener.open(conn).await {
                Ok(s) => session = Some(s),
                Err(err) => {
                    stats.error(measured, format!("connect: {err}"));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            continue;
        };
        let outcome = s.once(seq).await;
        let reconnects = s.take_reconnects();
        stats.reconnects += if measured { reconnects } else { 0 };
        seq += 1;
        let latency_us = t0.elapsed().as_micros().max(1) as u64;
        match outcome {
            Outcome::Ok if measured => {
                stats.ok += 1;
                let _ = stats.hist.record(latency_us.min(LATENCY_MAX_US));
            }
            Outcome::Refused if measured => {
                stats.ok += 1;
                stats.refused += 1;
                let _ = stats.hist.record(latency_us.min(LATENCY_MAX_US));
            }
            Outcome::Ok | Outcome::Refused => {}
            Outcome::Unexpected(msg) => stats.error(measured, msg),
            Outcome::Broken(msg) => {
                stats.error(measured, msg);
                session = None;
            }
        }
    }
    stats.done = Instant::now();
    stats
}
