//! CPU, memory and disk figures of a process, sampled from /proc: a run's [`CpuMeter`] reads
//! them before and after.

use std::collections::BTreeMap;
use std::time::Instant;

use super::results::RunResult;

/// CPU time (user + system) of a process so far, in seconds (USER_HZ = 100 on Linux).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// CPU seconds so far of each of a process's threads, summed per thread name.
fn thread_cpu_seconds(pid: u32) -> BTreeMap<String, f64> {
    let mut per_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return per_name };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) else { continue };
        if let Some(seconds) = cpu_seconds(&format!("{pid}/task/{tid}")) {
            *per_name.entry(comm.trim().to_owned()).or_insert(0.0) += seconds;
        }
    }
    per_name
}

/// Bytes a process has caused to be written to storage so far (page cache writes included).
fn disk_write_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines().find_map(|line| line.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok())
}

/// Measures the CPU the server (if any) and this process use over a run, and what the server
/// writes to storage.
pub struct CpuMeter {
    server: Option<ServerSample>,
    bench: Option<f64>,
    wall: Instant,
}

struct ServerSample {
    pid: u32,
    cpu: f64,
    threads: BTreeMap<String, f64>,
    disk: Option<u64>,
}

impl ServerSample {
    fn take(pid: u32) -> Option<Self> {
        let cpu = cpu_seconds(&pid.to_string())?;
        Some(ServerSample { pid, cpu, threads: thread_cpu_seconds(pid), disk: disk_write_bytes(pid) })
    }
}

impl CpuMeter {
    pub fn start(server_pid: Option<u32>) -> Self {
        CpuMeter { server: server_pid.and_then(ServerSample::take), bench: cpu_seconds("self"), wall: Instant::now() }
    }

    pub fn finish(self, run: &mut RunResult) {
        let wall = self.wall.elapsed().as_secs_f64().max(1e-9);
        if let Some(before) = self.server
            && let Some(after) = ServerSample::take(before.pid)
        {
            run.server_cpu_cores = Some((after.cpu - before.cpu) / wall);
            // A thread that started during the run counts from zero; one that ended is lost.
            run.server_threads = after
                .threads
                .iter()
                .map(|(name, s1)| (name.clone(), (s1 - before.threads.get(name).copied().unwrap_or(0.0)) / wall))
                .collect();
            run.server_disk_bytes = before.disk.zip(after.disk).map(|(d0, d1)| d1.saturating_sub(d0));
        }
        run.bench_cpu_cores = self.bench.and_then(|s0| cpu_seconds("self").map(|s1| (s1 - s0) / wall));
    }
}

pub fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}
