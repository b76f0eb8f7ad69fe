//! The failover drill (SPEC H1, H2, H3, I9) on a real pg_auto_failover formation on 127.0.0.1:
//! a monitor, a primary and a synchronous secondary, from Debian's `postgresql-15-auto-failover`
//! and `pg-auto-failover-cli` (.ci/run installs them; without `pg_autoctl` this test fails, it is
//! never passed over). Two Payrail instances run on the formation's multi-host URL while 16
//! clients create counterparties, each retrying a create with its Idempotency-Key until it gets a
//! 2xx. Then, in turn: (a) a planned failover (`pg_autoctl perform failover`), (b) kill -9 of the
//! primary's postmaster and keeper, (c) SIGSTOP of the primary's postgres processes and keeper,
//! a hung host (thawed once both instances serve again without it). After each: no acknowledged write lost, no
//! idempotency key created twice, no 500, no request held past the request timeout, both
//! instances serving again by themselves. The unavailability windows are printed
//! (`--nocapture`), with the time from the new primary accepting commits to the instances
//! serving again (goal 5 s for (c); only a gross overrun, past 30 s, fails the test).
//!
//! The servers run with the production defaults (request timeout 30 s, database calls 10 s,
//! connection set-up 5 s per host); the monitor runs with the shorter health checks and demotion
//! timeout of [`MONITOR_SETTINGS`] (the README's deployment section explains them), so the whole
//! drill takes about three minutes. PostgreSQL refuses to run as root: under root the formation
//! runs as the `postgres` user, as scripts/pg-test-cluster does. Every process the drill starts is
//! stopped when its guard is dropped, even when the test panics.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::TcpListener as StdListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Key, TestServer};
use serde_json::json;

/// Client tasks creating counterparties, and the pause each makes after a success.
const CLIENTS: usize = 16;
const PACE: Duration = Duration::from_millis(50);
/// A client gives up on one attempt after this long: the server's request timeout (30 s) and
/// some slack. Reaching it is a request held past the request timeout: a failure.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(40);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Goal (printed) and hard limit (asserted) for (c): new primary accepting commits -> serving.
const HUNG_GOAL: Duration = Duration::from_secs(5);
const HUNG_LIMIT: Duration = Duration::from_secs(30);
/// The monitor's health checks: every second, one retry, a node unhealthy after 5 s without
/// reports and failed checks, a primary that does not answer its demotion given 10 s.
const MONITOR_SETTINGS: [(&str, &str); 6] = [
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_timeout", "1000"),
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    ("pgautofailover.node_considered_unhealthy_timeout", "5000"),
    ("pgautofailover.primary_demote_timeout", "10000"),
];

// ---------------------------------------------------------------------------------------------
// The formation: processes, and the guard that stops them
// ---------------------------------------------------------------------------------------------

/// Who runs the formation: the `postgres` user under root (PostgreSQL refuses root), else us.
#[derive(Clone, Copy)]
struct RunAs {
    ids: Option<(u32, u32)>,
}

impl RunAs {
    fn find() -> RunAs {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1)).expect("euid");
        if uid != "0" {
            return RunAs { ids: None };
        }
        let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
        let line = passwd
            .lines()
            .find(|l| l.starts_with("postgres:"))
            .expect("running as root, the drill runs PostgreSQL as the `postgres` user, which does not exist (apt-get install postgresql)");
        let fields: Vec<&str> = line.split(':').collect();
        RunAs { ids: Some((fields[2].parse().unwrap(), fields[3].parse().unwrap())) }
    }

    /// Makes `path` (a directory we just made) the formation user's.
    fn own(&self, path: &Path) {
        if let Some((uid, gid)) = self.ids {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown to postgres");
        }
    }

    /// The PostgreSQL superuser the monitor's initdb makes: the OS user that runs it.
    fn superuser(&self) -> String {
        if self.ids.is_some() {
            return "postgres".into();
        }
        std::env::var("USER").unwrap_or_else(|_| "postgres".into())
    }
}

struct Node {
    name: &'static str,
    pgdata: PathBuf,
    port: u16,
    /// `pg_autoctl run` for this node, leader of its own process group.
    keeper: Mutex<Option<Child>>,
}

/// A 3-node pg_auto_failover formation in a temporary directory; stopped when dropped.
struct Formation {
    root: tempfile::TempDir,
    run_as: RunAs,
    bin: PathBuf,
    monitor: Node,
    nodes: [Node; 2],
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The newest PostgreSQL server binaries, and `pg_autoctl`; a loud failure if either is missing.
fn binaries() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.flatten().map(|e| e.path().join("bin")).filter(|bin| bin.join("pg_ctl").exists()).collect())
        .unwrap_or_default();
    found.sort_by_key(|bin| bin.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()));
    let bin = found.pop().expect("the failover drill needs the PostgreSQL server binaries (apt-get install postgresql)");
    let autoctl = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .any(|d| d.join("pg_autoctl").exists());
    assert!(
        autoctl,
        "the failover drill needs pg_autoctl: apt-get install postgresql-15-auto-failover pg-auto-failover-cli (.ci/run installs them)"
    );
    bin
}

impl Formation {
    fn new() -> Formation {
        let run_as = RunAs::find();
        let root = tempfile::Builder::new().prefix("payrail-drill-").tempdir().unwrap();
        run_as.own(root.path());
        for sub in ["config", "data", "run", "sock"] {
            std::fs::create_dir(root.path().join(sub)).unwrap();
            run_as.own(&root.path().join(sub));
        }
        let node = |name: &'static str| Node { name, pgdata: root.path().join(name), port: free_port(), keeper: Mutex::new(None) };
        let (monitor, nodes) = (node("monitor"), [node("node1"), node("node2")]);
        Formation { run_as, bin: binaries(), monitor, nodes, root }
    }

    /// `pg_autoctl` with this formation's environment, as the formation's user.
    fn autoctl(&self, args: &[&str]) -> Command {
        let root = self.root.path();
        let mut command = Command::new("pg_autoctl");
        command
            .args(args)
            .current_dir(root)
            .env("HOME", root)
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_DATA_HOME", root.join("data"))
            .env("XDG_RUNTIME_DIR", root.join("run"))
            // Sockets in the formation's own directory (pg_autoctl's own test hook).
            .env("PG_REGRESS_SOCK_DIR", root.join("sock"))
            .env("PGHOST", root.join("sock"))
            .env("PATH", format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap_or_default()))
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .env_remove("PGUSER")
            .env_remove("PGDATABASE")
            .stdin(Stdio::null());
        if let Some((uid, gid)) = self.run_as.ids {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Runs a `pg_autoctl` command to its end; its output, or a panic with it.
    fn autoctl_ok(&self, args: &[&str]) -> String {
        let out = self.autoctl(args).output().unwrap_or_else(|e| panic!("pg_autoctl {args:?}: {e}"));
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "pg_autoctl {args:?} failed:\n{text}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn pg_ctl(&self) -> String {
        self.bin.join("pg_ctl").display().to_string()
    }

    fn monitor_uri(&self) -> String {
        format!("postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=prefer", self.monitor.port)
    }

    /// Starts `pg_autoctl run` for `node` in a process group of its own, its output in
    /// `<root>/<name>.log`.
    fn run(&self, node: &Node) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.root.path().join(format!("{}.log", node.name))).unwrap();
        let pgdata = node.pgdata.display().to_string();
        let child = self
            .autoctl(&["run", "--pgdata", &pgdata])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start pg_autoctl run");
        *node.keeper.lock().unwrap() = Some(child);
    }

    fn create_monitor(&self) {
        let (pgdata, port) = (self.monitor.pgdata.display().to_string(), self.monitor.port.to_string());
        let pg_ctl = self.pg_ctl();
        self.autoctl_ok(&[
            "create",
            "monitor",
            "--pgdata",
            &pgdata,
            "--pgport",
            &port,
            "--hostname",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
            "--pgctl",
            &pg_ctl,
        ]);
        self.run(&self.monitor);
    }

    fn create_node(&self, node: &Node) {
        let (pgdata, port, monitor, pg_ctl) = (node.pgdata.display().to_string(), node.port.to_string(), self.monitor_uri(), self.pg_ctl());
        self.autoctl_ok(&[
            "create",
            "postgres",
            "--pgdata",
            &pgdata,
            "--pgport",
            &port,
            "--listen",
            "127.0.0.1",
            "--hostname",
            "127.0.0.1",
            "--name",
            node.name,
            "--auth",
            "trust",
            "--no-ssl",
            "--pgctl",
            &pg_ctl,
            "--monitor",
            &monitor,
            "--dbname",
            "payrail",
            "--username",
            "payrail",
        ]);
        self.run(node);
    }

    /// The postmaster of `node` (from postmaster.pid) and its children (from /proc).
    fn postgres_processes(&self, node: &Node) -> Vec<u32> {
        let Ok(pid_file) = std::fs::read_to_string(node.pgdata.join("postmaster.pid")) else { return Vec::new() };
        let Some(postmaster) = pid_file.lines().next().and_then(|l| l.trim().parse::<u32>().ok()) else { return Vec::new() };
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)).and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(postmaster) {
                pids.push(pid);
            }
        }
        pids
    }

    fn signal(signal: &str, targets: &[String]) {
        if !targets.is_empty() {
            let _ = Command::new("kill").arg(format!("-{signal}")).arg("--").args(targets).stderr(Stdio::null()).status();
        }
    }

    /// kill -9 of the node's keeper (its whole process group, which holds the postmaster).
    fn kill_9(&self, node: &Node) {
        let mut targets: Vec<String> = self.postgres_processes(node).iter().take(1).map(u32::to_string).collect();
        let mut keeper = node.keeper.lock().unwrap();
        if let Some(child) = keeper.as_mut() {
            targets.push(format!("-{}", child.id()));
        }
        Self::signal("KILL", &targets);
        if let Some(mut child) = keeper.take() {
            let _ = child.wait();
        }
    }

    /// Hangs the node as a hung host would: its keeper's process group (which holds the
    /// postmaster) first, so nothing more is forked, then the postmaster's children. The kernel
    /// keeps every socket open and still accepts TCP connections.
    ///
    /// The keeper hangs too: pg_auto_failover 2.0 trusts a keeper that keeps reporting over its
    /// own failed health checks, and a keeper beside a hung PostgreSQL reports every few
    /// seconds, so the monitor fails it over only once a report comes late (here after 54 s
    /// once, 69 s another time, and not within 120 s a third).
    fn freeze(&self, node: &Node) {
        let pids = self.postgres_processes(node);
        let mut first: Vec<String> = pids.iter().take(1).map(u32::to_string).collect();
        if let Some(child) = node.keeper.lock().unwrap().as_ref() {
            first.push(format!("-{}", child.id()));
        }
        Self::signal("STOP", &first);
        Self::signal("STOP", &pids.iter().skip(1).map(u32::to_string).collect::<Vec<_>>());
    }

    fn thaw(&self, node: &Node) {
        let mut all: Vec<String> = self.postgres_processes(node).iter().map(u32::to_string).collect();
        if let Some(child) = node.keeper.lock().unwrap().as_ref() {
            all.push(format!("-{}", child.id()));
        }
        Self::signal("CONT", &all);
    }

    /// Stops a node: thawed, its keeper asked to stop (it stops PostgreSQL, fast), then, after
    /// 20 s, killed with its process group and postmaster.
    fn stop(&self, node: &Node) {
        self.thaw(node);
        let Some(mut child) = node.keeper.lock().unwrap().take() else { return };
        Self::signal("TERM", &[child.id().to_string()]);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if child.try_wait().ok().flatten().is_some() && self.postgres_processes(node).is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut targets: Vec<String> = self.postgres_processes(node).iter().take(1).map(u32::to_string).collect();
        targets.push(format!("-{}", child.id()));
        Self::signal("KILL", &targets);
        let _ = child.wait();
    }

    fn node_log_tails(&self) -> String {
        let mut out = String::new();
        for name in ["monitor", "node1", "node2"] {
            let log = std::fs::read_to_string(self.root.path().join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            out.push_str(&format!("--- {name}.log (last lines)\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
        }
        out
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        for node in self.nodes.iter().chain(std::iter::once(&self.monitor)) {
            self.stop(node);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Talking to the formation
// ---------------------------------------------------------------------------------------------

async fn pg(url: &str) -> Option<tokio_postgres::Client> {
    let connect = tokio_postgres::connect(url, tokio_postgres::NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(2), connect).await.ok()?.ok()?;
    tokio::spawn(connection);
    Some(client)
}

impl Formation {
    fn monitor_admin_url(&self) -> String {
        format!("postgres://{}@127.0.0.1:{}/pg_auto_failover", self.run_as.superuser(), self.monitor.port)
    }

    fn node_url(&self, node: &Node, db: &str) -> String {
        format!("postgres://payrail@127.0.0.1:{}/{db}?connect_timeout=2", node.port)
    }

    /// Each node's (reported state, goal state), by name.
    async fn states(&self) -> BTreeMap<String, (String, String)> {
        let Some(client) = pg(&self.monitor_admin_url()).await else { return BTreeMap::new() };
        let rows =
            client.query("SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node", &[]).await.unwrap_or_default();
        rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect()
    }

    /// Waits until one node is primary and the other secondary (reported and assigned); the
    /// primary's index.
    async fn settled(&self, limit: Duration) -> usize {
        let started = Instant::now();
        loop {
            let states = self.states().await;
            let is = |i: usize, state: &str| states.get(self.nodes[i].name).is_some_and(|(r, g)| r == state && g == state);
            for (p, s) in [(0, 1), (1, 0)] {
                if is(p, "primary") && is(s, "secondary") {
                    return p;
                }
            }
            assert!(started.elapsed() < limit, "the formation did not settle within {limit:?}: {states:?}\n{}", self.node_log_tails());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until node `i` reports one of `states` ("a|b").
    async fn reported(&self, i: usize, states: &str, limit: Duration) {
        let started = Instant::now();
        loop {
            let now = self.states().await;
            if now.get(self.nodes[i].name).is_some_and(|(reported, _)| states.split('|').any(|s| s == reported)) {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{} did not reach {states} within {limit:?}: {now:?}\n{}",
                self.nodes[i].name,
                self.node_log_tails()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn start(&self) -> String {
        let started = Instant::now();
        self.create_monitor();
        let monitor = loop {
            if let Some(client) = pg(&self.monitor_admin_url()).await {
                break client;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "the monitor answers within 30 s\n{}", self.node_log_tails());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for (name, value) in MONITOR_SETTINGS {
            monitor.batch_execute(&format!("ALTER SYSTEM SET {name} = {value}")).await.unwrap();
        }
        monitor.batch_execute("SELECT pg_reload_conf()").await.unwrap();
        self.create_node(&self.nodes[0]);
        self.reported(0, "single", Duration::from_secs(60)).await;
        self.create_node(&self.nodes[1]);
        let primary = self.settled(Duration::from_secs(90)).await;
        eprintln!("formation up in {:?}: primary {}", started.elapsed(), self.nodes[primary].name);
        let monitor_pgdata = self.monitor.pgdata.display().to_string();
        let uri = self.autoctl_ok(&["show", "uri", "--formation", "default", "--pgdata", &monitor_pgdata]);
        // pg_autoctl's URL names no user; Payrail needs one.
        let url = uri.trim().replacen("postgres://", "postgres://payrail@", 1);
        // A table to probe the primaries with, outside Payrail's database.
        let client = pg(&self.node_url(&self.nodes[primary], "postgres")).await.expect("reach the primary");
        client.batch_execute("CREATE TABLE drill_probe (at timestamptz DEFAULT now())").await.unwrap();
        url
    }
}

impl Formation {
    /// The monitor's clock, as seconds since the epoch.
    async fn monitor_now(&self) -> f64 {
        let client = pg(&self.monitor_admin_url()).await.expect("reach the monitor");
        client.query_one("SELECT extract(epoch FROM now())::float8", &[]).await.unwrap().get(0)
    }

    /// The monitor's decisions since `since` (its clock), one line each, seconds after it.
    async fn events_since(&self, since: f64) -> Vec<String> {
        let Some(client) = pg(&self.monitor_admin_url()).await else { return Vec::new() };
        let rows = client
            .query(
                "SELECT extract(epoch FROM eventtime)::float8 - $1, nodename, reportedstate::text, goalstate::text, description
                 FROM pgautofailover.event WHERE eventtime >= to_timestamp($1) ORDER BY eventid",
                &[&since],
            )
            .await
            .unwrap_or_default();
        let mut lines = Vec::new();
        let mut last: HashMap<String, (String, String)> = HashMap::new();
        for row in rows {
            let (at, node, reported, goal, description): (f64, String, String, String, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
            let unhealthy = description.contains("marked as unhealthy");
            if unhealthy || last.get(&node) != Some(&(reported.clone(), goal.clone())) {
                let what = if unhealthy { "marked unhealthy".to_owned() } else { format!("{reported} -> {goal}") };
                lines.push(format!("  +{at:5.1} s  {node}: {what}"));
            }
            last.insert(node, (reported, goal));
        }
        lines
    }
}

/// Polls `url` (a node) until a commit succeeds on it; when that was.
async fn accepts_commits(url: String) -> Instant {
    loop {
        if let Some(client) = pg(&url).await {
            let insert = client.batch_execute("INSERT INTO drill_probe DEFAULT VALUES");
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), insert).await {
                return Instant::now();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The load: clients retrying creates with their idempotency keys
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Tally {
    /// Each 2xx: when, and which instance answered.
    successes: Vec<(Instant, usize)>,
    /// Acknowledged creates: idempotency key (also the name) -> id.
    acknowledged: HashMap<String, String>,
    /// Answers that were not 2xx, by status (or client error), with when the last one came.
    others: BTreeMap<String, usize>,
    slowest: Duration,
}

struct Load {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Load {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Load {
    fn start(servers: &Arc<Vec<TestServer>>, key: &Key) -> Load {
        let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Tally::default())));
        let tasks = (0..CLIENTS)
            .map(|client| tokio::spawn(create_forever(client, servers.clone(), key.clone(), stop.clone(), tally.clone())))
            .collect();
        Load { stop, tally, tasks }
    }

    async fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

/// One client: creates `c<client>-<n>` for n = 0, 1, ..., each retried with its key until a 2xx.
async fn create_forever(client: usize, servers: Arc<Vec<TestServer>>, key: Key, stop: Arc<AtomicBool>, tally: Arc<Mutex<Tally>>) {
    let instance = client % servers.len();
    let server = &servers[instance];
    for n in 0.. {
        let tag = format!("c{client}-{n}");
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let started = Instant::now();
            let sent = server
                .post("/api/counterparties", &key, &json!({ "name": tag }))
                .header("Idempotency-Key", tag.clone())
                .timeout(CLIENT_TIMEOUT)
                .send()
                .await;
            let answered = Instant::now();
            let outcome = match sent {
                Ok(response) if response.status().is_success() => {
                    let body: serde_json::Value = response.json().await.unwrap_or_default();
                    body["id"].as_str().map(str::to_owned).ok_or_else(|| "2xx without an id".to_owned())
                }
                Ok(response) => Err(response.status().as_u16().to_string()),
                Err(err) if err.is_timeout() => Err("client timeout".into()),
                Err(_) => Err("connection error".into()),
            };
            if record(&tally, instance, &tag, started, answered, outcome) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(PACE).await;
    }
}

/// Notes an answer; whether it was a 2xx.
fn record(tally: &Mutex<Tally>, instance: usize, tag: &str, started: Instant, answered: Instant, outcome: Result<String, String>) -> bool {
    let mut tally = tally.lock().unwrap();
    tally.slowest = tally.slowest.max(answered - started);
    match outcome {
        Ok(id) => {
            tally.successes.push((answered, instance));
            tally.acknowledged.insert(tag.to_owned(), id);
            true
        }
        Err(what) => {
            *tally.others.entry(what).or_default() += 1;
            false
        }
    }
}

/// The longest time without a 2xx between `from` and `to` (from any instance, or from
/// `instance`), and when it ended.
fn longest_gap(successes: &[(Instant, usize)], instance: Option<usize>, from: Instant, to: Instant) -> (Duration, Instant) {
    let mut times: Vec<Instant> =
        successes.iter().filter(|(at, i)| *at >= from && *at <= to && instance.is_none_or(|want| *i == want)).map(|(at, _)| *at).collect();
    times.sort();
    let mut previous = from;
    let mut longest = (Duration::ZERO, from);
    for at in times.into_iter().chain(std::iter::once(to)) {
        if at - previous > longest.0 {
            longest = (at - previous, at);
        }
        previous = at;
    }
    longest
}

// ---------------------------------------------------------------------------------------------
// Checks after each fault
// ---------------------------------------------------------------------------------------------

/// Waits until every instance has answered a 2xx after `after`; when the last did.
async fn all_serving_after(tally: &Mutex<Tally>, instances: usize, after: Instant, limit: Duration) -> Option<Instant> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let firsts: Vec<Option<Instant>> = {
            let tally = tally.lock().unwrap();
            (0..instances).map(|i| tally.successes.iter().filter(|(at, n)| *n == i && *at > after).map(|(at, _)| *at).min()).collect()
        };
        if firsts.iter().all(Option::is_some) {
            return firsts.into_iter().flatten().max();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// No acknowledged create lost (each id is in the database under its key's name, and readable
/// through both instances), none made twice (one counterparty per name).
async fn assert_nothing_lost_or_doubled(
    formation: &Formation,
    primary: usize,
    servers: &[TestServer],
    key: &Key,
    tally: &Mutex<Tally>,
    checked: &mut HashSet<String>,
) {
    let acknowledged: Vec<(String, String)> = tally.lock().unwrap().acknowledged.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let client = pg(&formation.node_url(&formation.nodes[primary], "payrail")).await.expect("reach the primary");
    let doubled = client
        .query("SELECT doc::jsonb->>'name', count(*) FROM objects WHERE kind = 'counterparty' GROUP BY 1 HAVING count(*) > 1 LIMIT 10", &[])
        .await
        .unwrap();
    let doubled: Vec<(String, i64)> = doubled.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert!(doubled.is_empty(), "idempotency keys created twice: {doubled:?}");
    let ids: Vec<&str> = acknowledged.iter().map(|(_, id)| id.as_str()).collect();
    let rows = client.query("SELECT id, doc::jsonb->>'name' FROM objects WHERE id = ANY($1)", &[&ids]).await.unwrap();
    let found: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let lost: Vec<&(String, String)> = acknowledged.iter().filter(|(tag, id)| found.get(id) != Some(tag)).take(10).collect();
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?} (of {})", acknowledged.len());
    // Read back through the API (both instances in turn) what was acknowledged since the last check.
    let fresh: Vec<&str> = ids.into_iter().filter(|id| !checked.contains(*id)).collect();
    for (batch, ids) in fresh.chunks(32).enumerate() {
        let reads = ids.iter().map(|id| async move {
            let server = &servers[batch % servers.len()];
            (*id, server.get(&format!("/api/counterparties/{id}"), key).send().await.map(|r| r.status().as_u16()).ok())
        });
        for (id, status) in futures_util::future::join_all(reads).await {
            assert_eq!(status, Some(200), "acknowledged counterparty {id} readable through instance {}", batch % servers.len());
        }
    }
    checked.extend(fresh.into_iter().map(str::to_owned));
}

async fn healthz_ok(server: &TestServer) -> bool {
    let url = format!("{}/healthz", server.admin.as_ref().expect("admin listener"));
    let response = reqwest::Client::new().get(url).timeout(Duration::from_secs(2)).send().await;
    response.is_ok_and(|r| r.status().as_u16() == 200)
}

// ---------------------------------------------------------------------------------------------
// The drill
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Fault {
    PlannedFailover,
    Kill9,
    Hang,
}

/// What one fault cost.
struct Figures {
    fault: Fault,
    window: Duration,
    per_instance: Vec<Duration>,
    accepted_after: Duration,
    served_after_accept: Duration,
    answers: BTreeMap<String, usize>,
}

struct Drill {
    formation: Arc<Formation>,
    servers: Arc<Vec<TestServer>>,
    key: Key,
    load: Load,
    checked: HashSet<String>,
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.expect("a blocking step")
}

impl Drill {
    async fn run(&mut self, fault: Fault) -> Figures {
        let (formation, servers) = (self.formation.clone(), self.servers.clone());
        let primary = formation.settled(Duration::from_secs(120)).await;
        let standby = 1 - primary;
        let before = self.load.tally.lock().unwrap().others.clone();
        let accepted = tokio::spawn(accepts_commits(formation.node_url(&formation.nodes[standby], "postgres")));
        let monitor_at = formation.monitor_now().await;
        let fault_at = Instant::now();
        eprintln!("== {fault:?}: primary {} -> {}", formation.nodes[primary].name, formation.nodes[standby].name);
        let f = formation.clone();
        match fault {
            Fault::PlannedFailover => {
                blocking(move || f.autoctl_ok(&["perform", "failover", "--pgdata", &f.monitor.pgdata.display().to_string()])).await;
            }
            Fault::Kill9 => blocking(move || f.kill_9(&f.nodes[primary])).await,
            Fault::Hang => blocking(move || f.freeze(&f.nodes[primary])).await,
        }
        formation.reported(standby, "primary|wait_primary", Duration::from_secs(120)).await;
        let accepted_at = accepted.await.unwrap();
        // Serving again on the new primary, by themselves: nothing here helps them.
        let serving = all_serving_after(&self.load.tally, servers.len(), accepted_at, Duration::from_secs(60)).await;
        let serving = serving.unwrap_or_else(|| panic!("{fault:?}: the instances did not both serve again within 60 s of the new primary"));
        let f = formation.clone();
        match fault {
            Fault::Kill9 => blocking(move || f.run(&f.nodes[primary])).await,
            Fault::Hang => blocking(move || f.thaw(&f.nodes[primary])).await,
            Fault::PlannedFailover => {}
        }
        let new_primary = formation.settled(Duration::from_secs(180)).await;
        assert_eq!(new_primary, standby, "{fault:?}: the standby became the primary");
        let settled_at = Instant::now();
        assert!(
            all_serving_after(&self.load.tally, servers.len(), settled_at, Duration::from_secs(30)).await.is_some(),
            "{fault:?}: serving after the old primary rejoined"
        );
        for (i, server) in servers.iter().enumerate() {
            assert!(healthz_ok(server).await, "{fault:?}: /healthz of instance {i} is 200 again");
        }
        eprintln!("the monitor's decisions, after the fault:\n{}", formation.events_since(monitor_at).await.join("\n"));
        let figures = self.figures(fault, fault_at, accepted_at, serving, &before);
        assert_nothing_lost_or_doubled(&formation, new_primary, &servers, &self.key, &self.load.tally, &mut self.checked).await;
        figures
    }

    fn figures(
        &self,
        fault: Fault,
        fault_at: Instant,
        accepted_at: Instant,
        serving: Instant,
        before: &BTreeMap<String, usize>,
    ) -> Figures {
        let tally = self.load.tally.lock().unwrap();
        let to = Instant::now();
        let window = longest_gap(&tally.successes, None, fault_at, to).0;
        let per_instance = (0..self.servers.len()).map(|i| longest_gap(&tally.successes, Some(i), fault_at, to).0).collect();
        let answers =
            tally.others.iter().map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0))).filter(|(_, v)| *v > 0).collect();
        Figures {
            fault,
            window,
            per_instance,
            accepted_after: accepted_at - fault_at,
            served_after_accept: serving.saturating_duration_since(accepted_at),
            answers,
        }
    }
}

fn report(figures: &Figures) {
    eprintln!(
        "{:?}: no 2xx for {:.1} s (instances: {}); new primary took commits {:.1} s after the fault; both instances served again {:.1} s after that; other answers: {:?}",
        figures.fault,
        figures.window.as_secs_f64(),
        figures.per_instance.iter().map(|d| format!("{:.1} s", d.as_secs_f64())).collect::<Vec<_>>().join(", "),
        figures.accepted_after.as_secs_f64(),
        figures.served_after_accept.as_secs_f64(),
        figures.answers,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn h2_h3_failover_drill_on_pg_auto_failover() {
    let started = Instant::now();
    let formation = Arc::new(Formation::new());
    let url = formation.start().await;
    eprintln!("database URL: {url}");
    let mut servers = Vec::new();
    for _ in 0..2 {
        servers.push(TestServer::start_with(|c| c.database_url = Some(url.clone())).await);
    }
    let servers = Arc::new(servers);
    let key = servers[0].key().await;
    let load = Load::start(&servers, &key);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut drill = Drill { formation: formation.clone(), servers: servers.clone(), key, load, checked: HashSet::new() };

    let mut all = Vec::new();
    for fault in [Fault::PlannedFailover, Fault::Kill9, Fault::Hang] {
        let figures = drill.run(fault).await;
        report(&figures);
        all.push(figures);
    }
    let Drill { load, .. } = drill;
    let tally = load.tally.clone();
    load.finish().await;
    let tally = tally.lock().unwrap();
    eprintln!(
        "drill done in {:.0} s: {} creates acknowledged, slowest answer {:.1} s, other answers {:?}",
        started.elapsed().as_secs_f64(),
        tally.acknowledged.len(),
        tally.slowest.as_secs_f64(),
        tally.others
    );
    for figures in &all {
        report(figures);
    }
    assert_eq!(tally.others.get("500"), None, "no 500 during any failover");
    assert_eq!(tally.others.get("client timeout"), None, "no request held past the request timeout");
    assert!(tally.slowest < REQUEST_TIMEOUT + Duration::from_secs(5), "slowest answer {:?}", tally.slowest);
    let hung = all.iter().find(|f| matches!(f.fault, Fault::Hang)).unwrap();
    if hung.served_after_accept > HUNG_GOAL {
        eprintln!(
            "note: a hung primary cost {:.1} s after the new primary took commits (goal {HUNG_GOAL:?})",
            hung.served_after_accept.as_secs_f64()
        );
    }
    assert!(
        hung.served_after_accept < HUNG_LIMIT,
        "a hung primary: serving again {:?} after the new primary took commits",
        hung.served_after_accept
    );
}
