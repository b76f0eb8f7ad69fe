//! The report: the table of every run (stdout), and the one final JSON line (the last line of
//! stdout) with the headline figures, every scenario's keys, the checks and the machine.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

use crate::durability::Durability;
use crate::harness::{RunResult, Store, r1, r3, ratio, server_bin};
use crate::plan::Plan;
use crate::scenarios::{self, Measured, Scenario, SharedRun};

/// The machine the run is on: cores, memory, load, and what the temporary directory is.
pub fn machine() -> Value {
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_mb = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb / 1024);
    let load1 = load_average();
    json!({"nproc": nproc, "mem_mb": mem_mb, "loadavg_1m_at_start": load1, "temp_fs": temp_fs(&std::env::temp_dir())})
}

/// The commit the server was built from, and whether src/ had uncommitted changes.
pub fn source_revision() -> Value {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"]).map(|s| !s.is_empty());
    json!({"commit": commit, "src_dirty": dirty})
}

pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The filesystem type the temporary directory lives on (tmpfs makes fsync free).
fn temp_fs(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, mount, fs) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(mount).then(|| (mount.len(), fs.to_owned()))
        })
        .max()
        .map(|(_, fs)| fs)
}

/// One row per run; the last column compares its rate with its baseline at the same concurrency
/// (the first run of that name measured at it).
pub fn print_table(runs: &[&RunResult]) {
    let rps = |name: &str, conns: usize| runs.iter().find(|r| r.scenario == name && r.connections == conns).map(|r| r.rps());
    println!();
    println!(
        "{:<22} {:>5} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}  ratio",
        "scenario", "conns", "rps", "p50 ms", "p99 ms", "p999 ms", "max ms", "errors", "reconn", "srv cpu", "gen cpu"
    );
    println!("{}", "-".repeat(134));
    for run in runs {
        let c = run.connections;
        let note = match run.scenario {
            name if name.starts_with("commit_ceiling") && run.writers == Some(1) => Some("one writer, single-row commits".into()),
            name if name.starts_with("commit_ceiling") => Some("single-row commits, one per connection".into()),
            name => scenarios::baseline_of(name)
                .and_then(|baseline| ratio(Some(run.rps()), rps(baseline, c)).map(|x| format!("{x:.3} of {baseline}"))),
        };
        let note = match (note, run.refused) {
            (note, 0) => note.unwrap_or_default(),
            (Some(note), refused) => format!("{note} ({refused} refused as expected)"),
            (None, refused) => format!("{refused} refused as expected"),
        };
        println!(
            "{:<22} {:>5} {:>11.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7} {:>7} {:>7} {:>7}  {}",
            run.scenario,
            c,
            run.rps(),
            run.ms(0.5),
            run.ms(0.99),
            run.ms(0.999),
            run.max_ms(),
            run.errors,
            run.reconnects,
            run.server_cpu_cores.map(|c| format!("{c:.2}")).unwrap_or_else(|| "-".into()),
            run.bench_cpu_cores.map(|c| format!("{c:.2}")).unwrap_or_else(|| "-".into()),
            note
        );
    }
    println!();
}

/// Everything a run measured, for the report.
pub struct Run<'a> {
    pub plan: &'a Plan,
    pub store: &'a Store,
    pub shared: &'a SharedRun,
    pub own: &'a [(&'static str, Measured)],
    pub durability: Durability,
    pub machine: Value,
    pub started: Instant,
}

impl<'a> Run<'a> {
    /// Every run, in the order measured: the shared server's, then each own-servers scenario's.
    pub fn all(&self) -> Vec<&'a RunResult> {
        let own = self.own.iter().flat_map(|(_, measured)| measured.runs.iter());
        self.shared.results.runs.iter().chain(own).collect()
    }

    /// The final JSON line.
    pub fn json_line(self) -> Value {
        let mut out = self.headline();
        self.scenario_keys(&mut out);
        let all = self.all();
        out["errors_total"] = json!(all.iter().map(|run| run.errors).sum::<u64>());
        out["reconnects_total"] = json!(all.iter().map(|run| run.reconnects).sum::<u64>());
        let per_run: BTreeMap<String, Value> =
            all.iter().map(|run| (format!("{}@{}", run.scenario, run.connections), run.to_json())).collect();
        out["durable_checks"] = self.durability.checks;
        out["machine"] = self.machine;
        out["server_bin"] = json!(server_bin().display().to_string());
        out["source"] = source_revision();
        out["wall_s"] = json!(r1(self.started.elapsed().as_secs_f64()));
        out["machine"]["loadavg_1m_at_end"] = json!(load_average());
        out["runs"] = json!(per_run);
        out
    }

    /// Payrail beside the machine's ceilings, at the headline concurrency.
    fn headline(&self) -> Value {
        let (r, h) = (&self.shared.results, self.plan.headline());
        let ping = r.rps("ping", h);
        let create = r.rps("create_counterparty", h);
        let replay = r.rps("replay", h);
        let commit_ceiling = r.rps("commit_ceiling", h);
        json!({
            "store": self.store.name(),
            "durable": self.durability.durable,
            "quick": self.plan.opts.quick,
            "connections": h,
            "duration_s": self.plan.opts.duration.as_secs_f64(),
            "ping_rps": ping.map(r1),
            "http_ceiling_rps": r.rps("http_ceiling", h).map(r1),
            "ping_vs_ceiling": ratio(ping, r.rps("http_ceiling", h)),
            "create_rps": create.map(r1),
            "create_p99_ms": r.p99("create_counterparty", h).map(r3),
            "commit_ceiling_tps": commit_ceiling.map(r1),
            "create_vs_commit_ceiling": ratio(create, commit_ceiling),
            "replay_rps": replay.map(r1),
            "replay_vs_ping": ratio(replay, ping),
            "peak_rss_mb": self.shared.peak_rss_mb.map(r1),
        })
    }

    /// Every shared-server scenario's rate and p99 (null when it did not run), then each
    /// scenario's own keys, in registry order.
    fn scenario_keys(&self, out: &mut Value) {
        let (r, h) = (&self.shared.results, self.plan.headline());
        let out = out.as_object_mut().expect("the JSON line is an object");
        for scenario in scenarios::ALL {
            if let Scenario::Shared(s) = scenario
                && s.headline_rates()
            {
                out.insert(format!("{}_rps", s.name()), json!(r.rps(s.name(), h).map(r1)));
                out.insert(format!("{}_p99_ms", s.name()), json!(r.p99(s.name(), h).map(r3)));
            }
        }
        for scenario in scenarios::ALL {
            match scenario {
                Scenario::Shared(s) => s.report(r, self.plan, out),
                Scenario::Own(s) => {
                    let measured = self.own.iter().find(|(name, _)| *name == s.name());
                    out.extend(measured.map(|(_, m)| m.keys.clone()).unwrap_or_default());
                }
            }
        }
    }
}
