//! Crash drills (SPEC S2, S3, I5, I8, I9): real `payrail serve` processes killed with SIGKILL
//! under concurrent write load while every client retries with its idempotency key, and a
//! PostgreSQL restart under load. The figures are printed; lost writes and duplicates must be 0.

#[macro_use]
mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestServer, client_trusting, on_postgres, test_database_url};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_payrail");
const WORKERS: usize = 12;
const CREATES_PER_WORKER: usize = 12;

/// A `payrail serve` child process, killed when dropped.
struct Instance {
    child: Child,
    port: u16,
    data_dir: PathBuf,
    database_url: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Instances sharing a database need one master key (SPEC S4): one file beside their data
/// directories, made by the first that needs it.
fn shared_master_key(data_dir: &Path) -> std::path::PathBuf {
    let path = data_dir.parent().expect("data directories live in the drill's root").join("master.key");
    if !path.exists() {
        payrail::base::secret_box::SecretBox::generate_file(&path).expect("a master key file");
    }
    path
}

fn spawn(data_dir: &Path, database_url: &str, port: u16) -> Instance {
    let child = Command::new(BIN)
        .arg("--master-key-file")
        .arg(shared_master_key(data_dir))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--admin-listen", "off", "--sandbox-step-ms", "3600000"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--database-url", database_url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start payrail");
    let started = Instant::now();
    // The port accepts connections as soon as it is bound, before the server has written its
    // certificate (and opened its store): wait for both, or a drill reads a missing file.
    let cert = data_dir.join("tls-cert.pem");
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let written = || std::fs::read(&cert).is_ok_and(|pem| pem.windows(END.len()).any(|w| w == END));
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() || !written() {
        assert!(started.elapsed() < Duration::from_secs(30), "payrail did not start listening");
        std::thread::sleep(Duration::from_millis(50));
    }
    Instance { child, port, data_dir: data_dir.to_owned(), database_url: database_url.to_owned() }
}

fn create_key(database_url: &str, data_dir: &Path) -> String {
    let out = Command::new(BIN)
        .arg("--master-key-file")
        .arg(shared_master_key(data_dir))
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--database-url", database_url, "keys", "create", "--name", "drill"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_owned()
}

/// What the drill saw: the reply each idempotency key was acknowledged with.
#[derive(Default)]
struct Tally {
    acknowledged: BTreeMap<String, String>,
    acknowledged_before_kill: usize,
    attempts: usize,
    failures: usize,
}

/// Clients create counterparties, each with its own idempotency key, retrying every failure
/// (on any live instance) until acknowledged. `kill` runs once a third of the work is done.
async fn drill(instances: Vec<(u16, Vec<u8>)>, secret: String, kill: impl FnOnce() -> Vec<(u16, Vec<u8>)> + Send + 'static) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let targets = Arc::new(Mutex::new(instances));
    let killed = Arc::new(Mutex::new(Some(kill)));
    let total = WORKERS * CREATES_PER_WORKER;
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let (tally, targets, killed, secret) = (tally.clone(), targets.clone(), killed.clone(), secret.clone());
        workers.push(tokio::spawn(async move {
            for n in 0..CREATES_PER_WORKER {
                let key = format!("drill-{worker}-{n}");
                let mut attempt = 0usize;
                loop {
                    let (port, pem) = {
                        let targets = targets.lock().unwrap();
                        targets[(worker + attempt) % targets.len()].clone()
                    };
                    attempt += 1;
                    let client = client_trusting(&pem);
                    let sent = client
                        .post(format!("https://127.0.0.1:{port}/api/counterparties"))
                        .basic_auth("x-api-key", Some(&secret))
                        .header("Idempotency-Key", &key)
                        .json(&json!({"name": key}))
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                    let ok = match sent {
                        Ok(response) if response.status() == 201 => {
                            Some(response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned())
                        }
                        _ => None,
                    };
                    let acknowledged = {
                        let mut t = tally.lock().unwrap();
                        t.attempts += 1;
                        match ok {
                            Some(id) => {
                                t.acknowledged.insert(key.clone(), id);
                                true
                            }
                            None => {
                                t.failures += 1;
                                false
                            }
                        }
                    };
                    if acknowledged {
                        break;
                    }
                    assert!(attempt < 600, "{key} was never acknowledged");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let done = tally.lock().unwrap().acknowledged.len();
                if done >= total / 3 {
                    let kill = killed.lock().unwrap().take();
                    if let Some(kill) = kill {
                        tally.lock().unwrap().acknowledged_before_kill = done;
                        let survivors = kill();
                        *targets.lock().unwrap() = survivors;
                    }
                }
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap()
}

/// Every counterparty the server holds, by name, following the cursors.
async fn all_counterparties(port: u16, pem: &[u8], secret: &str) -> Vec<(String, String)> {
    let client = client_trusting(pem);
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let response = client
            .get(format!("https://127.0.0.1:{port}/api/counterparties?per_page=100&after_cursor={cursor}"))
            .basic_auth("x-api-key", Some(secret))
            .send()
            .await
            .unwrap();
        cursor = response.headers()["x-after-cursor"].to_str().unwrap().to_owned();
        let page: Value = response.json().await.unwrap();
        out.extend(page.as_array().unwrap().iter().map(|c| (c["name"].as_str().unwrap().to_owned(), c["id"].as_str().unwrap().to_owned())));
        if cursor.is_empty() {
            return out;
        }
    }
}

fn report(store: &str, tally: &Tally, held: &[(String, String)]) {
    let names: HashSet<&str> = held.iter().map(|(name, _)| name.as_str()).collect();
    let ids: HashSet<&str> = held.iter().map(|(_, id)| id.as_str()).collect();
    let lost = tally.acknowledged.values().filter(|id| !ids.contains(id.as_str())).count();
    let duplicates = held.len() - names.len();
    eprintln!(
        "crash drill ({store}): {} creates attempted {} times ({} failed attempts retried); acknowledged {} before the kill, {} in all; \
         {} held by the store; acknowledged writes lost: {lost}; created twice: {duplicates}",
        WORKERS * CREATES_PER_WORKER,
        tally.attempts,
        tally.failures,
        tally.acknowledged_before_kill,
        tally.acknowledged.len(),
        held.len(),
    );
    assert_eq!(tally.acknowledged.len(), WORKERS * CREATES_PER_WORKER);
    assert_eq!(lost, 0, "every acknowledged write survives");
    assert_eq!(duplicates, 0, "nothing is created twice");
    assert_eq!(held.len(), WORKERS * CREATES_PER_WORKER);
}

fn pem_of(instance: &Instance) -> Vec<u8> {
    std::fs::read(instance.data_dir.join("tls-cert.pem")).unwrap()
}

on_both_stores! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_kill_9_under_load_loses_nothing_and_creates_nothing_twice() {
    let root = tempfile::tempdir().unwrap();
    let dir_a = root.path().join("a");
    if on_postgres() {
        // Two instances on one database; A is killed, clients carry on against B (S2, I9).
        let url = test_database_url(root.path()).await.unwrap();
        let a = spawn(&dir_a, &url, free_port());
        let b = spawn(&root.path().join("b"), &url, free_port());
        let secret = create_key(&url, &dir_a);
        let targets = vec![(a.port, pem_of(&a)), (b.port, pem_of(&b))];
        let b_target = (b.port, pem_of(&b));
        let a = Arc::new(Mutex::new(Some(a)));
        let victim = a.clone();
        let tally = drill(targets, secret.clone(), move || {
            drop(victim.lock().unwrap().take()); // SIGKILL
            vec![b_target]
        })
        .await;
        let held = all_counterparties(b.port, &pem_of(&b), &secret).await;
        report("postgres, 2 instances, one killed", &tally, &held);
    } else {
        // One instance owns the SQLite file; it is killed and restarted on the same port.
        let url = format!("sqlite://{}", dir_a.join("payrail.db").display());
        let port = free_port();
        let first = spawn(&dir_a, &url, port);
        let secret = create_key(&url, &dir_a);
        let pem = pem_of(&first);
        let slot = Arc::new(Mutex::new(Some(first)));
        let keep = slot.clone();
        let tally = drill(vec![(port, pem.clone())], secret.clone(), move || {
            let old = keep.lock().unwrap().take().unwrap();
            let (dir, url) = (old.data_dir.clone(), old.database_url.clone());
            drop(old); // SIGKILL
            *keep.lock().unwrap() = Some(spawn(&dir, &url, port));
            vec![(port, std::fs::read(dir.join("tls-cert.pem")).unwrap())]
        })
        .await;
        let held = all_counterparties(port, &pem, &secret).await;
        report("sqlite, killed and restarted", &tally, &held);
        drop(slot);
    }
}
}

on_postgres_only! {
#[tokio::test]
async fn s2_database_restart_answers_503_then_recovers() {
    // A cluster of its own, so restarting it disturbs no other test.
    let cluster_dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-test-cluster");
    let run = |cmd: &str| {
        let out = Command::new(script).arg(cmd).env("PAYRAIL_PG_DIR", cluster_dir.path()).env("PAYRAIL_PG_PORT", &port).output().unwrap();
        assert!(out.status.success(), "pg-test-cluster {cmd}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let url = run("start");
    let server = TestServer::start_with(|c| c.database_url = Some(url.clone())).await;
    let key = server.key().await;
    let create = |i: usize| {
        server.post("/api/counterparties", &key, &json!({"name": format!("r{i}")})).header("Idempotency-Key", format!("restart-{i}"))
    };
    assert_eq!(create(0).send().await.unwrap().status(), 201);
    run("down");
    let started = Instant::now();
    let response = create(1).timeout(Duration::from_secs(20)).send().await.unwrap();
    eprintln!("with the database down: {} after {:?}", response.status(), started.elapsed());
    assert_eq!(response.status(), 503, "an unreachable database is a 503, never a hang");
    assert!(response.headers().contains_key("retry-after"));
    run("up");
    let mut recovered = None;
    for _ in 0..100 {
        let response = create(1).send().await.unwrap();
        if response.status() == 201 {
            recovered = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("recovered after {recovered:?}");
    assert!(recovered.is_some(), "the server recovers by itself when the database returns");
    let (_, listed) = common::json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "the write refused while the database was down was not half-applied");
    drop(server);
    run("stop");
}
}

on_both_stores! {
/// SPEC S3 and the README's rolling upgrades: once a newer release raises the storage layout's
/// level (what its migration does when older releases cannot read what it writes), an older
/// instance still serving stops by itself within the check interval, drained and saying why,
/// and the older release's command line then refuses the database with the same reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_newer_storage_layout_stops_an_older_instance_and_is_refused_after() {
    use payrail::store::layout;
    let mut server = TestServer::start().await;
    let key = server.key().await;
    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
    let (this, newer) = (layout::LEVEL.to_string(), (layout::LEVEL + 1).to_string());
    assert!(server.store.replace_setting(layout::SETTING, this.as_bytes(), newer.as_bytes()).await.unwrap(), "the level is this release's");
    let raised = Instant::now();
    let why = server.stopped_by_itself(layout::CHECK_INTERVAL * 3).await.expect_err("the server stops, with its reason");
    println!("stopped {:?} after the level was raised", raised.elapsed());
    let why = format!("{why:#}");
    let named = format!("level {newer}");
    assert!(why.contains(&named) && why.contains("upgrade this instance"), "{why}");
    assert!(server.get("/api/ping", &key).send().await.is_err(), "nothing serves any more");
    let run = common::cli(&server, &["keys", "list"]).await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "the older release refuses the database: {stderr}");
    assert!(stderr.contains(&named) && stderr.contains("upgrade this instance"), "{stderr}");
}
}

/// A webhook receiver on loopback that records when each attempt arrives and its
/// `X-Webhook-ID`; it never answers the first attempt (a sender killed mid-send) and answers
/// every later one 200.
async fn hanging_receiver() -> (u16, tokio::sync::mpsc::UnboundedReceiver<(Instant, String)>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (arrivals, seen) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut head = Vec::new();
            let mut chunk = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut chunk).await {
                    Ok(n) if n > 0 => head.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let id = text.lines().find_map(|l| l.strip_prefix("x-webhook-id:")).unwrap_or("").trim().to_owned();
            let _ = arrivals.send((Instant::now(), id));
            if held.is_empty() {
                held.push(socket); // the first attempt is never answered
            } else {
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
            }
        }
    });
    (port, seen)
}

/// W3: a delivery whose sender was killed (kill -9) in the middle of an attempt is attempted
/// again by the restarted server soon: its claim lasts the send timeout and a margin, not half
/// a minute. The attempt that got no answer counts as failed at the 5 s timeout, and the first
/// retry is due within 10 s of that, so it must come within 15 s of the first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w3_a_delivery_whose_sender_was_killed_is_retried_within_the_bound() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a");
    let url = format!("sqlite://{}", dir.join("payrail.db").display());
    let port = free_port();
    let server = spawn(&dir, &url, port);
    let secret = create_key(&url, &dir);
    let client = client_trusting(&pem_of(&server));
    let (hook_port, mut arrivals) = hanging_receiver().await;
    let post = |path: &str, body: Value| {
        client.post(format!("https://127.0.0.1:{port}{path}")).basic_auth("x-api-key", Some(&secret)).json(&body).send()
    };
    let made = post("/api/webhook_endpoints", json!({"url": format!("http://127.0.0.1:{hook_port}/hook")})).await.unwrap();
    assert_eq!(made.status().as_u16(), 201, "{}", made.text().await.unwrap());
    assert_eq!(post("/api/counterparties", json!({"name": "Hooked"})).await.unwrap().status().as_u16(), 201);

    let (first_at, first_id) = tokio::time::timeout(Duration::from_secs(10), arrivals.recv()).await.expect("a first attempt").unwrap();
    drop(server); // SIGKILL, while the receiver holds the attempt unanswered
    let restarted = spawn(&dir, &url, port);
    let (again_at, again_id) = tokio::time::timeout(Duration::from_secs(40), arrivals.recv()).await.expect("a retry").unwrap();
    let waited = again_at - first_at;
    println!("w3 drill: the retry came {:.1} s after the killed attempt", waited.as_secs_f64());
    assert_eq!(again_id, first_id, "the same delivery, with the same X-Webhook-ID (W2)");
    assert!(waited < Duration::from_secs(15), "the retry came {waited:?} after the killed attempt");
    drop(restarted);
}
