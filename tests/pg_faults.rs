//! PostgreSQL faults (SPEC H1, H2, H3): a hung primary (SIGSTOP: it keeps its TCP connections
//! but stops answering), a multi-host URL moving on from a hung host, a primary turned read-only
//! (what a demoted primary looks like to its clients), and commits whose outcome is unknown (a
//! synchronous standby that never answers: COMMIT waits, then is cut short or outlives the
//! deadline). Each test runs its own throwaway cluster
//! (scripts/pg-test-cluster, on a port of its own) so it can freeze or reconfigure it without
//! disturbing other tests; a guard thaws and stops it however the test ends. The figures are
//! printed (`--nocapture`).

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::net::TcpListener as StdListener;
use std::process::Command;
use std::time::{Duration, Instant};

use common::TestServer;
use common::wire::{basic, tls_connect};
use payrail::config::Config;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The request timeout the servers here run with: every answer during a fault must come sooner.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// What the tests allow `/healthz` to take (H3 says a second; this is the test's slack).
const HEALTHZ_BOUND: Duration = Duration::from_millis(1_500);

/// Small limits, so a fault costs the tests seconds, not the production defaults' tens.
fn fault_config(config: &mut Config, url: &str) {
    config.database_url = Some(url.to_owned());
    config.request_timeout_ms = REQUEST_TIMEOUT.as_millis() as u64;
    config.database_timeout_ms = 1_000;
    config.database_connect_timeout_ms = 1_000;
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A throwaway cluster of the test's own; thawed and stopped when dropped, even on panic.
struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    url: String,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cluster = Cluster { dir, port, url: String::new() };
        cluster.url = cluster.run("start");
        cluster
    }

    fn run(&self, cmd: &str) -> String {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-test-cluster");
        let out = Command::new(script)
            .arg(cmd)
            .env("PAYRAIL_PG_DIR", self.dir.path())
            .env("PAYRAIL_PG_PORT", self.port.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "pg-test-cluster {cmd}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The postmaster (first line of postmaster.pid) and its children (from /proc).
    fn processes(&self) -> Vec<u32> {
        let pid_file = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).expect("postmaster.pid");
        let postmaster: u32 = pid_file.lines().next().unwrap().trim().parse().unwrap();
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // "pid (comm) state ppid ...": comm may hold spaces, so read after its last ')'.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)).and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(postmaster) {
                pids.push(pid);
            }
        }
        pids
    }

    fn signal(&self, signal: &str, pids: &[u32]) {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        let status = Command::new("kill").arg(format!("-{signal}")).args(&pids).status().unwrap();
        assert!(status.success(), "kill -{signal} {pids:?}");
    }

    /// Hangs the whole cluster: the postmaster first (so it forks nothing more), then its
    /// children. The kernel keeps every socket open and even accepts new TCP connections.
    fn freeze(&self) {
        let pids = self.processes();
        self.signal("STOP", &pids[..1]);
        self.signal("STOP", &pids[1..]);
    }

    fn thaw(&self) {
        let pids = self.processes();
        self.signal("CONT", &pids);
    }

    async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.expect("reach the test cluster");
        tokio::spawn(connection);
        client
    }

    async fn execute(&self, sql: &str) {
        let client = self.client().await;
        // The session default may already be read-only: this session must be able to undo it.
        client.batch_execute("SET default_transaction_read_only = off").await.unwrap();
        client.batch_execute(sql).await.unwrap_or_else(|err| panic!("{sql}: {err:?}"));
    }

    async fn count(&self, sql: &str) -> i64 {
        self.client().await.query_one(sql, &[]).await.unwrap().get(0)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A stopped postmaster would never act on `pg_ctl stop`.
        if self.dir.path().join("data/postmaster.pid").exists() {
            let pids: Vec<String> = self.processes().iter().map(u32::to_string).collect();
            let _ = Command::new("kill").arg("-CONT").args(&pids).status();
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-test-cluster");
        let _ =
            Command::new(script).arg("stop").env("PAYRAIL_PG_DIR", self.dir.path()).env("PAYRAIL_PG_PORT", self.port.to_string()).output();
    }
}

/// `/healthz`'s status and how long it took (None: no answer within 5 s).
async fn healthz(server: &TestServer) -> (Option<u16>, Duration) {
    let started = Instant::now();
    let url = format!("{}/healthz", server.admin.as_ref().expect("admin listener"));
    let response = reqwest::Client::new().get(url).timeout(Duration::from_secs(5)).send().await;
    (response.ok().map(|r| r.status().as_u16()), started.elapsed())
}

/// Creates a counterparty: the status (None: no answer within 20 s), whether Retry-After came,
/// and how long it took.
async fn create(server: &TestServer, key: &common::Key, tag: &str) -> (Option<u16>, bool, Duration) {
    let started = Instant::now();
    let response = server
        .post("/api/counterparties", key, &json!({"name": tag}))
        .header("Idempotency-Key", tag.to_owned())
        .timeout(Duration::from_secs(20))
        .send()
        .await;
    let elapsed = started.elapsed();
    match response {
        Ok(r) => (Some(r.status().as_u16()), r.headers().contains_key("retry-after"), elapsed),
        Err(_) => (None, false, elapsed),
    }
}

/// Retries a create until it answers 201; how long that took (None: not within `limit`).
async fn until_created(server: &TestServer, key: &common::Key, tag: &str, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if create(server, key, tag).await.0 == Some(201) {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A create whose claim is taken (its headers are in and the claim row is committed) while its
/// body is held back, so the test can break the database between the claim and the commit.
struct HeldCreate {
    tag: String,
    stream: TlsStream<TcpStream>,
    body: Vec<u8>,
}

impl HeldCreate {
    async fn start(server: &TestServer, cluster: &Cluster, key: &common::Key, tag: &str) -> HeldCreate {
        let body = serde_json::to_vec(&json!({ "name": tag })).unwrap();
        let head = format!(
            "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nContent-Type: application/json\r\n\
             Idempotency-Key: {tag}\r\nContent-Length: {}\r\n\r\n",
            basic(key),
            body.len()
        );
        let mut stream = tls_connect(server).await;
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.flush().await.unwrap();
        let claimed = format!("SELECT count(*) FROM idempotency_claims WHERE key = '{tag}'");
        let started = Instant::now();
        while cluster.count(&claimed).await == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "the claim of {tag} is taken within 5 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        HeldCreate { tag: tag.to_owned(), stream, body }
    }

    async fn send_body(&mut self) {
        self.stream.write_all(&self.body).await.unwrap();
        self.stream.flush().await.unwrap();
    }

    /// The reply's status, whether it carried Retry-After, and the whole text.
    async fn reply(mut self) -> (u16, bool, String) {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        let text = loop {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                    .unwrap_or(0);
                if body.len() >= length {
                    break text;
                }
            }
            let n =
                tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut chunk)).await.expect("a reply within 20 s").unwrap();
            assert!(n > 0, "{}: the connection closed before a whole reply: {text}", self.tag);
            bytes.extend_from_slice(&chunk[..n]);
        };
        let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
        let retry_after = text.to_ascii_lowercase().contains("\r\nretry-after:");
        (status, retry_after, text)
    }
}

/// Makes every commit wait for a synchronous standby that does not exist (or stop waiting).
async fn standby_required(cluster: &Cluster, required: bool) {
    let setting = if required {
        "ALTER SYSTEM SET synchronous_standby_names = 'no_such_standby'"
    } else {
        "ALTER SYSTEM RESET synchronous_standby_names"
    };
    cluster.execute(setting).await;
    cluster.execute("SELECT pg_reload_conf()").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// Backends whose COMMIT waits for the synchronous standby.
async fn waiting_for_standby(cluster: &Cluster) -> i64 {
    cluster.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").await
}

/// Retries `tag`'s create until it answers 201, asserting on the way that nothing but 409 or
/// 503 (both with Retry-After) comes first; the 201's replay header and how long it took.
async fn retried_until_created(server: &TestServer, key: &common::Key, tag: &str) -> (Option<String>, Duration) {
    let started = Instant::now();
    loop {
        let response = server
            .post("/api/counterparties", key, &json!({ "name": tag }))
            .header("Idempotency-Key", tag.to_owned())
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .expect("an answer within 20 s");
        let status = response.status().as_u16();
        let replayed = response.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap().to_owned());
        if status == 201 {
            return (replayed, started.elapsed());
        }
        assert!(status == 409 || status == 503, "{tag}: a retry is answered 201, 409 or 503, not {status}");
        assert!(response.headers().contains_key("retry-after"), "{tag}: the {status} says when to retry");
        assert!(started.elapsed() < Duration::from_secs(30), "{tag}: the retry succeeds within 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates held at their claim, then released into a database whose commits wait for a
/// standby that never answers; each must be answered 503 with Retry-After (not 201: a cut-short
/// wait committed only locally; not 500).
async fn creates_into_a_waiting_commit(
    server: &TestServer,
    cluster: &Cluster,
    key: &common::Key,
    tags: &[String],
    cut_short: bool,
) -> Vec<(u16, bool, String)> {
    let mut held = Vec::new();
    for tag in tags {
        held.push(HeldCreate::start(server, cluster, key, tag).await);
    }
    standby_required(cluster, true).await;
    for create in &mut held {
        create.send_body().await;
    }
    if cut_short {
        // Cancel the waits as soon as they start (well inside the call deadline): PostgreSQL
        // then commits locally and reports COMMIT a success, with a warning.
        let started = Instant::now();
        while waiting_for_standby(cluster).await == 0 && started.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").await;
    }
    futures_util::future::join_all(held.into_iter().map(HeldCreate::reply)).await
}

on_postgres_only! {
#[tokio::test]
async fn h2_an_unknown_commit_outcome_is_503_and_a_retry_never_runs_twice() {
    let cluster = Cluster::start();
    let server = TestServer::start_with(|c| {
        fault_config(c, &cluster.url);
        c.database_timeout_ms = 2_000;
    })
    .await;
    let key = server.key().await;
    assert_eq!(create(&server, &key, "before").await.0, Some(201));

    for (round, cut_short) in [("cut-short", true), ("past-the-deadline", false)] {
        let tags: Vec<String> = (0..3).map(|i| format!("{round}-{i}")).collect();
        let started = Instant::now();
        let replies = creates_into_a_waiting_commit(&server, &cluster, &key, &tags, cut_short).await;
        let took = started.elapsed();
        for (tag, (status, retry_after, text)) in tags.iter().zip(&replies) {
            eprintln!("{round}: {tag} answered {status} after {took:?}");
            assert_eq!(*status, 503, "{tag}: a commit of unknown outcome is 503, neither acknowledged nor a 500: {text}");
            assert!(retry_after, "{tag}: the 503 says when to retry: {text}");
        }
        if !cut_short {
            // Left alone, the COMMITs keep waiting for the standby (no statement timeout cuts
            // them short): nothing of them is visible yet, and retries must not run them again.
            assert!(waiting_for_standby(&cluster).await >= 1, "the COMMITs still wait for the standby");
            let (status, retry_after, _) = create(&server, &key, &tags[0]).await;
            eprintln!("{round}: a retry while the COMMIT still waits: {status:?}");
            assert!(matches!(status, Some(409 | 503)) && retry_after, "a retry while the outcome is unknown: 409 or 503 with Retry-After");
        }
        // The standby requirement lifted, every wait ends in a local commit: each retry replays it.
        standby_required(&cluster, false).await;
        for tag in &tags {
            let (replayed, after) = retried_until_created(&server, &key, tag).await;
            eprintln!("{round}: {tag} replayed={replayed:?} after {after:?}");
            assert_eq!(replayed.as_deref(), Some("true"), "{tag}: the retry replays the commit that landed, it does not run again");
        }
    }
    let (status, list) = common::json(server.get("/api/counterparties?per_page=100", &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    for round in ["cut-short", "past-the-deadline"] {
        for i in 0..3 {
            let tag = format!("{round}-{i}");
            assert_eq!(names.iter().filter(|n| **n == tag).count(), 1, "exactly one counterparty {tag}: {names:?}");
        }
    }
    drop(server);
}

#[tokio::test]
async fn h3_a_hung_database_answers_503_within_the_deadline_and_healthz_within_a_second() {
    let cluster = Cluster::start();
    let server = TestServer::start_with(|c| fault_config(c, &cluster.url)).await;
    let key = server.key().await;
    assert_eq!(create(&server, &key, "before").await.0, Some(201));
    assert_eq!(healthz(&server).await.0, Some(200));

    cluster.freeze();
    for i in 0..3 {
        let (status, retry_after, elapsed) = create(&server, &key, &format!("hung-{i}")).await;
        eprintln!("create {i} while the database hangs: {status:?} after {elapsed:?}");
        assert_eq!(status, Some(503), "a hung database is a 503, never a hang");
        assert!(retry_after, "the 503 says when to retry");
        assert!(elapsed < REQUEST_TIMEOUT, "answered within the request timeout ({elapsed:?})");
    }
    let (status, elapsed) = healthz(&server).await;
    eprintln!("/healthz while the database hangs: {status:?} after {elapsed:?}");
    assert_eq!(status, Some(503), "/healthz says unhealthy while the database hangs");
    assert!(elapsed < HEALTHZ_BOUND, "/healthz answers within a second ({elapsed:?})");
    // The probe it left behind ends (unhealthy) while nobody waits: no later answer may use it.
    tokio::time::sleep(Duration::from_secs(3)).await;

    cluster.thaw();
    let recovered = until_created(&server, &key, "after", Duration::from_secs(15)).await;
    eprintln!("served again {recovered:?} after the database resumed");
    assert!(recovered.is_some(), "the server recovers by itself when the database answers again");
    assert_eq!(healthz(&server).await.0, Some(200));
    drop(server);
}

/// Found by the PostgreSQL audit: a keyed request whose database hung after its claim was
/// taken answered its 503 past the request timeout, as the reply waited to give the key back to
/// the database that did not answer (up to the database deadline more).
#[tokio::test]
async fn h3_a_keyed_request_whose_database_hangs_after_its_claim_is_answered_within_the_request_timeout() {
    let cluster = Cluster::start();
    let server = TestServer::start_with(|c| {
        fault_config(c, &cluster.url);
        c.database_timeout_ms = 3_000;
    })
    .await;
    let key = server.key().await;
    assert_eq!(create(&server, &key, "before").await.0, Some(201));
    let mut held = HeldCreate::start(&server, &cluster, &key, "held").await;
    let started = Instant::now();
    cluster.freeze();
    held.send_body().await;
    let (status, retry_after, text) = held.reply().await;
    let elapsed = started.elapsed();
    cluster.thaw();
    eprintln!("the keyed create answered {status} after {elapsed:?}");
    assert_eq!((status, retry_after), (503, true), "{text}");
    // The slack is the test's (scheduling on a busy machine); the fault cost a second more.
    assert!(elapsed < REQUEST_TIMEOUT + Duration::from_millis(250), "answered within the request timeout ({elapsed:?})");
    // The key is given back once the database answers: a retry executes (I5).
    assert!(until_created(&server, &key, "held", Duration::from_secs(15)).await.is_some(), "the retry executes");
}

#[tokio::test]
async fn h3_a_read_only_database_answers_503_not_500() {
    let cluster = Cluster::start();
    let server = TestServer::start_with(|c| fault_config(c, &cluster.url)).await;
    let key = server.key().await;
    for i in 0..4 {
        assert_eq!(create(&server, &key, &format!("before-{i}")).await.0, Some(201));
    }

    // What a demoted primary looks like to the connections it keeps: writes refused (25006).
    cluster.execute("ALTER SYSTEM SET default_transaction_read_only = on").await;
    cluster.execute("SELECT pg_reload_conf()").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut statuses: BTreeMap<Option<u16>, usize> = BTreeMap::new();
    for i in 0..20 {
        let (status, retry_after, _) = create(&server, &key, &format!("read-only-{i}")).await;
        *statuses.entry(status).or_default() += 1;
        if status == Some(503) {
            assert!(retry_after, "the 503 says when to retry");
        }
    }
    let (health, elapsed) = healthz(&server).await;
    eprintln!("creates on a read-only primary: {statuses:?}; /healthz {health:?} after {elapsed:?}");
    assert_eq!(statuses.get(&Some(500)), None, "a read-only primary is never a 500");
    assert_eq!(statuses.get(&Some(503)), Some(&20), "every create is refused with 503");
    assert_eq!(health, Some(503), "/healthz says unhealthy when the database refuses writes");

    cluster.execute("ALTER SYSTEM RESET default_transaction_read_only").await;
    cluster.execute("SELECT pg_reload_conf()").await;
    let recovered = until_created(&server, &key, "after", Duration::from_secs(10)).await;
    eprintln!("served again {recovered:?} after the database took writes again");
    assert!(recovered.is_some(), "the server recovers by itself once the database takes writes");
    assert_eq!(healthz(&server).await.0, Some(200));
    drop(server);
}

#[tokio::test]
async fn h1_a_multi_host_url_moves_on_from_a_hung_host() {
    // Two independent clusters: this shows the server moving on to the URL's next host, not a
    // replicated failover (B holds none of A's data; the failover drill is pg_auto_failover's).
    let (a, b) = (Cluster::start(), Cluster::start());
    payrail::migrate(&Config { database_url: Some(b.url.clone()), ..Config::default() }).await.expect("migrate B");
    let url = format!("postgres://payrail@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write", a.port, b.port);

    // A running server whose host hangs moves on to the next host.
    let server = TestServer::start_with(|c| fault_config(c, &url)).await;
    let key = server.key().await;
    assert_eq!(create(&server, &key, "on-a").await.0, Some(201));
    a.freeze();
    let started = Instant::now();
    let mut moved = None;
    while started.elapsed() < Duration::from_secs(20) {
        if healthz(&server).await.0 == Some(200) {
            moved = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("healthy again on the next host {moved:?} after the first hung");
    assert!(moved.is_some_and(|t| t < Duration::from_secs(10)), "moved on within seconds: {moved:?}");
    // B has its own keys: a key made now lands on B, and a create with it commits on B.
    let key_b = server.key().await;
    let (status, _, elapsed) = create(&server, &key_b, "served-by-b").await;
    eprintln!("create on the next host: {status:?} after {elapsed:?}");
    assert_eq!(status, Some(201));
    assert!(b.count("SELECT count(*) FROM objects WHERE doc LIKE '%served-by-b%'").await >= 1, "the write is on B");

    // A server starting while the first host hangs opens on the next one.
    let started = Instant::now();
    let second = tokio::time::timeout(Duration::from_secs(30), TestServer::start_with(|c| fault_config(c, &url))).await;
    eprintln!("a server started while the first host hangs: up after {:?} ({})", started.elapsed(), second.is_ok());
    let second = second.expect("a server starts while the first host hangs");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(healthz(&second).await.0, Some(200));
    drop(second);
    drop(server);

    a.thaw();
    assert_eq!(a.count("SELECT count(*) FROM objects WHERE doc LIKE '%served-by-b%'").await, 0, "nothing of it on A");
}
}
