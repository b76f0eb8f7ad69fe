//! What a run measured ([`RunResult`]), the runs of a stage by (scenario, connections)
//! ([`Results`]), and the rounding the report uses.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::{ERROR_SAMPLES_MAX, LATENCY_MAX_US};

#[derive(Debug)]
pub struct RunResult {
    pub scenario: &'static str,
    pub connections: usize,
    /// Right answers: the expected status, or the expected refusal (counted in `refused` too).
    pub ok: u64,
    pub refused: u64,
    pub errors: u64,
    /// Keep-alive connections the server had closed, reopened before the next request (whose
    /// latency includes the new handshake).
    pub reconnects: u64,
    pub elapsed_s: f64,
    pub hist: Histogram<u64>,
    pub error_samples: Vec<String>,
    pub rss_mb: Option<f64>,
    /// CPU the server process used during the run, in cores (of `nproc`), and the same for
    /// this process (the load generator, plus the http_ceiling server in its runs).
    pub server_cpu_cores: Option<f64>,
    pub bench_cpu_cores: Option<f64>,
    /// The server's CPU per thread name, in cores (its runtime's workers together, SQLite's
    /// writer and checkpointer): shows which thread a run waits on.
    pub server_threads: BTreeMap<String, f64>,
    /// Bytes the server caused to be written to storage (`write_bytes` of /proc/PID/io).
    pub server_disk_bytes: Option<u64>,
    /// Connections or writers actually used, where that differs from `connections` (the SQLite
    /// commit ceiling is paired with each create run but always uses one writer).
    pub writers: Option<usize>,
}

impl RunResult {
    pub fn empty(scenario: &'static str, connections: usize) -> Self {
        RunResult {
            scenario,
            connections,
            ok: 0,
            refused: 0,
            errors: 0,
            reconnects: 0,
            elapsed_s: 0.0,
            hist: new_hist(),
            error_samples: vec![],
            rss_mb: None,
            server_cpu_cores: None,
            bench_cpu_cores: None,
            server_threads: BTreeMap::new(),
            server_disk_bytes: None,
            writers: None,
        }
    }

    pub fn rps(&self) -> f64 {
        if self.elapsed_s > 0.0 { self.ok as f64 / self.elapsed_s } else { 0.0 }
    }

    /// Keeps up to [`ERROR_SAMPLES_MAX`] distinct error samples.
    pub fn keep_error_sample(&mut self, sample: String) {
        if self.error_samples.len() < ERROR_SAMPLES_MAX && !self.error_samples.contains(&sample) {
            self.error_samples.push(sample);
        }
    }

    /// Adds another round of the same scenario: counts and histograms add up, CPU is averaged
    /// over the rounds' measured time.
    pub fn absorb(&mut self, round: RunResult) {
        let weighted = |a: Option<f64>, wa: f64, b: Option<f64>, wb: f64| match (a, b) {
            (Some(a), Some(b)) if wa + wb > 0.0 => Some((a * wa + b * wb) / (wa + wb)),
            (a, b) => a.or(b),
        };
        self.server_cpu_cores = weighted(self.server_cpu_cores, self.elapsed_s, round.server_cpu_cores, round.elapsed_s);
        self.bench_cpu_cores = weighted(self.bench_cpu_cores, self.elapsed_s, round.bench_cpu_cores, round.elapsed_s);
        for (name, cores) in round.server_threads {
            let mine = self.server_threads.get(&name).copied();
            if let Some(merged) = weighted(mine, self.elapsed_s, Some(cores), round.elapsed_s) {
                self.server_threads.insert(name, merged);
            }
        }
        self.server_disk_bytes = match (self.server_disk_bytes, round.server_disk_bytes) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.ok += round.ok;
        self.refused += round.refused;
        self.errors += round.errors;
        self.reconnects += round.reconnects;
        self.elapsed_s += round.elapsed_s;
        let _ = self.hist.add(&round.hist);
        for sample in round.error_samples {
            self.keep_error_sample(sample);
        }
        self.rss_mb = round.rss_mb.or(self.rss_mb);
    }

    pub fn ms(&self, quantile: f64) -> f64 {
        if self.hist.is_empty() { 0.0 } else { self.hist.value_at_quantile(quantile) as f64 / 1000.0 }
    }

    pub fn max_ms(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "scenario": self.scenario,
            "connections": self.connections,
            "rps": r1(self.rps()),
            "p50_ms": r3(self.ms(0.5)),
            "p99_ms": r3(self.ms(0.99)),
            "p999_ms": r3(self.ms(0.999)),
            "max_ms": r3(self.max_ms()),
            "ok": self.ok,
            "errors": self.errors,
            "reconnects": self.reconnects,
            "rss_mb": self.rss_mb.map(r1),
        });
        if self.refused > 0 {
            v["refused"] = json!(self.refused);
        }
        if let Some(cores) = self.server_cpu_cores {
            v["server_cpu_cores"] = json!(r3(cores));
            v["server_cpu_us_per_req"] = json!(r1(cores * 1e6 / self.rps().max(1.0)));
        }
        if let Some(cores) = self.bench_cpu_cores {
            v["bench_cpu_cores"] = json!(r3(cores));
        }
        if !self.server_threads.is_empty() {
            let threads: serde_json::Map<String, Value> =
                self.server_threads.iter().map(|(name, cores)| (name.clone(), json!(r3(*cores)))).collect();
            v["server_threads_cores"] = Value::Object(threads);
        }
        if let Some(bytes) = self.server_disk_bytes {
            v["server_disk_kb_per_req"] = json!(r1(bytes as f64 / 1024.0 / (self.ok.max(1) as f64)));
        }
        if let Some(writers) = self.writers {
            v["writers"] = json!(writers);
        }
        if !self.error_samples.is_empty() {
            v["error_samples"] = json!(self.error_samples);
        }
        v
    }
}

pub fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(r3(a / b)),
        _ => None,
    }
}

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("histogram bounds are valid")
}

/// One progress line on stderr per run, with its error samples.
pub fn report_progress(run: &RunResult) {
    eprintln!(
        "bench: {:<22} c={:<3} {:>10.1} rps  p50 {:>8.3} ms  p99 {:>8.3} ms  errors {}  reconnects {}",
        run.scenario,
        run.connections,
        run.rps(),
        run.ms(0.5),
        run.ms(0.99),
        run.errors,
        run.reconnects
    );
    for sample in &run.error_samples {
        eprintln!("bench:     error: {sample}");
    }
}

/// Results by (scenario, connections).
#[derive(Default)]
pub struct Results {
    pub runs: Vec<RunResult>,
}

impl Results {
    pub fn find(&self, scenario: &str, conns: usize) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.scenario == scenario && r.connections == conns)
    }

    pub fn rps(&self, scenario: &str, conns: usize) -> Option<f64> {
        self.find(scenario, conns).map(RunResult::rps)
    }

    pub fn p99(&self, scenario: &str, conns: usize) -> Option<f64> {
        self.find(scenario, conns).map(|r| r.ms(0.99))
    }

    pub fn push(&mut self, run: RunResult) {
        report_progress(&run);
        self.runs.push(run);
    }
}
