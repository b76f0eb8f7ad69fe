//! SPEC S4 (with W1, W2, I4, A4): the data directory is its owner's alone (0700, files 0600),
//! and secrets at rest (webhook signing secrets, the stored reply that carries one, the API key
//! pepper) are sealed under a master key that can live outside the data directory, with a
//! rotation that keeps everything working. Every test runs on both stores.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{Key, TestServer, json, on_postgres};
use hmac::{Hmac, Mac};
use payrail::config::Config;
use serde_json::{Value, json};
use sha2::Sha256;

#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;

const BIN: &str = env!("CARGO_BIN_EXE_payrail");

fn fast(c: &mut Config) {
    c.webhook_poll_ms = 25;
    c.webhook_timeout_ms = 1_000;
    c.webhook_retry_base_ms = 200;
    c.webhook_retry_max_ms = 800;
}

/// Where the tests keep the data directory: a sub-directory the server creates (a temporary
/// directory is already 0700, which would hide the server's own choice).
fn data_dir(root: &Path) -> PathBuf {
    root.join("data")
}

#[derive(Clone, Debug)]
struct Hit {
    signature: String,
    body: Bytes,
}

/// A webhook receiver on 127.0.0.1 that answers 200 and keeps what it was sent.
struct Receiver {
    addr: std::net::SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    async fn start() -> Self {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(hits.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, hits }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Waits (bounded) for a delivery whose body contains `needle`, signed with `secret`.
    async fn wait_signed(&self, needle: &str, secret: &str) -> Hit {
        let start = Instant::now();
        loop {
            let hits: Vec<Hit> =
                self.hits.lock().unwrap().iter().filter(|h| std::str::from_utf8(&h.body).unwrap().contains(needle)).cloned().collect();
            if let Some(hit) = hits.iter().find(|h| h.signature == hmac_hex(secret, &h.body)) {
                return hit.clone();
            }
            let seen: Vec<&str> = hits.iter().map(|h| h.signature.as_str()).collect();
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no delivery carrying {needle} signed with the secret; signatures seen: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn receive(State(hits): State<Arc<Mutex<Vec<Hit>>>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let signature = headers.get("x-signature").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    hits.lock().unwrap().push(Hit { signature, body });
    StatusCode::OK
}

fn hmac_hex(secret: &str, message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates an endpoint under an idempotency key; returns the 201 body's exact bytes and secret.
async fn create_endpoint(server: &TestServer, key: &Key, url: &str, idempotency_key: &str) -> (Bytes, String) {
    let response =
        server.post("/api/webhook_endpoints", key, &json!({"url": url})).header("Idempotency-Key", idempotency_key).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let body = response.bytes().await.unwrap();
    let secret = serde_json::from_slice::<Value>(&body).unwrap()["secret"].as_str().unwrap().to_owned();
    (body, secret)
}

/// Replays the create and checks it is the original reply, byte for byte (I4).
async fn assert_replay(server: &TestServer, key: &Key, url: &str, idempotency_key: &str, original: &Bytes) {
    let replay =
        server.post("/api/webhook_endpoints", key, &json!({"url": url})).header("Idempotency-Key", idempotency_key).send().await.unwrap();
    assert_eq!(replay.status().as_u16(), 201);
    assert_eq!(replay.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(&replay.bytes().await.unwrap(), original, "the replay is the original reply, byte for byte");
}

/// Makes an event and checks its delivery is signed with `secret` (W2).
async fn assert_signed_delivery(server: &TestServer, key: &Key, receiver: &Receiver, secret: &str, name: &str) {
    let (status, made) = json(server.post("/api/counterparties", key, &json!({"name": name})).send().await.unwrap()).await;
    assert_eq!(status, 201, "{made}");
    // X-Signature is HMAC-SHA256 of the body under the endpoint's secret.
    receiver.wait_signed(name, secret).await;
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every file under `dir`, with its mode (skipping one removed while the walk runs, as SQLite
/// removes `-wal` and `-shm` when its last connection closes).
#[cfg(unix)]
fn walk(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        out.push((path.clone(), meta.permissions().mode() & 0o777));
        if meta.is_dir() {
            out.extend(walk(&path));
        }
    }
    out
}

/// Files under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes())) {
            // (A file SQLite removed as its last connection closed is skipped: its pages are in
            // the database file by then.)
            found.push(path);
        }
    }
    found
}

/// Rows of any table of the test's PostgreSQL database whose text contains `needle`.
async fn postgres_rows_containing(root: &Path, needle: &str) -> Vec<String> {
    let url = std::fs::read_to_string(root.join("test-database-url")).expect("the test database url");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let tables = client.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", &[]).await.unwrap();
    let mut found = Vec::new();
    for table in tables {
        let name: String = table.get(0);
        // Bytea columns as text are hex: look for the needle's hex spelling too.
        let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
        let sql = format!("SELECT t::text FROM {name} t WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0");
        for row in client.query(&sql, &[&needle, &hex]).await.unwrap() {
            found.push(format!("{name}: {}", row.get::<_, String>(0)));
        }
    }
    found
}

/// The stored pepper's raw bytes (it must be sealed: starts with the sealed magic).
async fn stored_pepper(root: &Path) -> Vec<u8> {
    stored_setting(root, "key_pepper").await
}

/// A `settings` row's raw bytes.
async fn stored_setting(root: &Path, name: &str) -> Vec<u8> {
    if on_postgres() {
        let url = std::fs::read_to_string(root.join("test-database-url")).unwrap();
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        return client.query_one("SELECT value FROM settings WHERE name = $1", &[&name]).await.unwrap().get(0);
    }
    let conn = rusqlite::Connection::open(data_dir(root).join("payrail.db")).unwrap();
    conn.query_row("SELECT value FROM settings WHERE name = ?1", [name], |r| r.get(0)).unwrap()
}

/// Runs `sql` (statements separated by `;`) on the test's database.
async fn execute_sql(root: &Path, sql: &str) {
    if on_postgres() {
        let url = std::fs::read_to_string(root.join("test-database-url")).unwrap();
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(sql).await.unwrap();
        return;
    }
    rusqlite::Connection::open(data_dir(root).join("payrail.db")).unwrap().execute_batch(sql).unwrap();
}

/// Where a secret is found at rest: files of the data directory, and rows on PostgreSQL.
async fn places_holding(root: &Path, secret: &str) -> Vec<String> {
    let mut places: Vec<String> = files_containing(root, secret).iter().map(|p| p.display().to_string()).collect();
    if on_postgres() {
        places.extend(postgres_rows_containing(root, secret).await);
    }
    places
}

async fn start(root: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> TestServer {
    let data = data_dir(root.path());
    TestServer::start_in(root, |c| {
        fast(c);
        c.data_dir = data;
        tweak(c);
    })
    .await
}

/// The configuration `start` would use, for launching by hand (to see a refusal).
async fn config_for(root: &Path, tweak: impl FnOnce(&mut Config)) -> Config {
    let mut config =
        Config { data_dir: data_dir(root), database_url: common::test_database_url(root).await, admin_listen: None, ..Config::default() };
    tweak(&mut config);
    config
}

async fn launch_error(config: Config) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    match payrail::launch(config, listener, std::future::pending()).await {
        Ok(_) => panic!("the server started"),
        Err(err) => format!("{err:#}"),
    }
}

/// An ACH order through the sandbox bank until it completes: a NACHA file written and
/// uploaded, answered with a statement the inbound side reads.
async fn send_through_the_sandbox_bank(server: &TestServer, key: &Key) {
    let body = json!({"name": "Operating", "currency": "USD", "party_name": "Acme Corp"});
    let (status, account) = json(server.post("/api/internal_accounts", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{account}");
    let receiving = json!({"party_name": "Jane Doe", "account_type": "checking", "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]});
    let body = json!({"type": "ach", "amount": 100, "direction": "credit", "originating_account_id": account["id"], "receiving_account": receiving});
    let (status, order) = json(server.post("/api/payment_orders", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{order}");
    let path = format!("/api/payment_orders/{}", order["id"].as_str().unwrap());
    for _ in 0..400 {
        let (_, order) = json(server.get(&path, key).send().await.unwrap()).await;
        if order["status"] == "completed" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the sandbox bank never completed {path}");
}

on_both_stores! {
#[cfg(unix)]
#[tokio::test]
async fn s4_data_dir_is_0700_files_0600_and_no_secret_is_stored_in_clear() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root, |c| c.sandbox_step_ms = 0).await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    let (created, secret) = create_endpoint(&server, &key, &receiver.url(), "hook-1").await;
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    assert_signed_delivery(&server, &key, &receiver, &secret, "Sealed Vendor").await;
    // The bank files (the cut-off's spool, the sandbox bank's folders and answers) are files
    // of the data directory too.
    send_through_the_sandbox_bank(&server, &key).await;
    let root = server.stop().await;

    let data = data_dir(root.path());
    let files = walk(&data);
    let loose: Vec<_> = files.iter().filter(|(p, m)| if p.is_dir() { *m != 0o700 } else { *m != 0o600 }).collect();
    println!("data dir {:o}; files: {files:?}", mode(&data));
    let places = places_holding(root.path(), &secret).await;
    println!("the webhook secret found in {} place(s): {places:?}", places.len());
    println!("stored pepper: {} bytes", stored_pepper(root.path()).await.len());
    assert_eq!(mode(&data), 0o700, "the data directory is its owner's alone");
    assert!(loose.is_empty(), "files others may read: {loose:?}");
    if !on_postgres() {
        // (On PostgreSQL the harness gives instances sharing a database one key file elsewhere.)
        assert!(files.iter().any(|(p, _)| p.ends_with("master.key")), "the generated master key: {files:?}");
        for name in ["payrail.db", "payrail.db.lock", "payrail.db.keys-epoch", "tls-key.pem", "tls-cert.pem"] {
            assert!(files.iter().any(|(p, _)| p.ends_with(name)), "{name} in {files:?}");
        }
    }
    assert!(places.is_empty(), "the webhook secret is stored in clear in {places:?}");
    let pepper = stored_pepper(root.path()).await;
    assert!(pepper.starts_with(b"\0prs") && pepper.len() > 32, "the key pepper is sealed ({} bytes)", pepper.len());

    // Restarted on the same data, the replay and the signatures still hold.
    let server = start(root, |_| {}).await;
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    assert_signed_delivery(&server, &key, &receiver, &secret, "After Restart").await;
    server.stop().await;
}
}

on_both_stores! {
#[cfg(unix)]
#[tokio::test]
async fn s4_a_wider_data_dir_and_files_are_tightened_at_start() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir(root.path());
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = start(root, |_| {}).await;
    let root = server.stop().await;
    for (path, _) in walk(&data).iter().filter(|(p, _)| p.is_file()) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // master.key must not be loosened: a loose key file is refused (tested below).
    if data.join("master.key").exists() {
        std::fs::set_permissions(data.join("master.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = start(root, |_| {}).await;
    let root = server.stop().await;
    assert_eq!(mode(&data_dir(root.path())), 0o700);
    let loose: Vec<_> = walk(&data_dir(root.path())).into_iter().filter(|(_, m)| *m != 0o600).collect();
    assert!(loose.is_empty(), "{loose:?}");
}
}

on_both_stores! {
#[tokio::test]
async fn s4_another_master_key_refuses_to_start_instead_of_signing_wrong() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root, |_| {}).await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    create_endpoint(&server, &key, &receiver.url(), "hook-1").await;
    let root = server.stop().await;

    let other = tempfile::tempdir().unwrap();
    let other_key = other.path().join("other.key");
    run(&["master-key", "generate", other_key.to_str().unwrap()], root.path(), None);
    // As if this release's last migration (a raise of the storage layout) were still to run:
    // the refusal comes before it, so older instances still serving are not stopped by an
    // instance that cannot serve (found by the re-audit of level 6).
    let last = payrail::store::layout::LEVEL;
    let bytes = if on_postgres() { "BYTEA" } else { "BLOB" };
    let undo = format!(
        "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations);
         UPDATE settings SET value = CAST('{}' AS {bytes}) WHERE name = 'layout_level'",
        last - 1
    );
    execute_sql(root.path(), &undo).await;
    let config = config_for(root.path(), |c| c.master_key_file = Some(other_key.clone())).await;
    let err = launch_error(config).await;
    assert!(err.contains("master key"), "a clear message: {err}");
    assert!(err.contains("--master-key-file"), "it says which setting to check: {err}");
    let level = String::from_utf8(stored_setting(root.path(), "layout_level").await).unwrap();
    assert_eq!(level, (last - 1).to_string(), "no migration ran for an instance that cannot serve");
}
}

on_both_stores! {
#[cfg(unix)]
#[tokio::test]
async fn s4_a_master_key_file_readable_by_group_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("payrail.key");
    let err = launch_error(config_for(root.path(), |c| c.master_key_file = Some(key_file.clone())).await).await;
    assert!(err.contains("no such file") && err.contains("master-key generate"), "a missing file says how to make one: {err}");
    run(&["master-key", "generate", key_file.to_str().unwrap()], root.path(), None);
    assert_eq!(mode(&key_file), 0o600);
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = launch_error(config_for(root.path(), |c| c.master_key_file = Some(key_file.clone())).await).await;
    assert!(err.contains("group or others") && err.contains("chmod 600"), "{err}");
    std::fs::write(&key_file, "dG9vIHNob3J0\n").unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = launch_error(config_for(root.path(), |c| c.master_key_file = Some(key_file.clone())).await).await;
    assert!(err.contains("not a 256-bit key") && !err.contains("dG9v"), "{err}");
}
}

/// `payrail ARGS...` on the test's data directory and database; panics unless it succeeds.
fn run(args: &[&str], root: &Path, key_file: Option<&Path>) -> String {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PAYRAIL_") {
            command.env_remove(&name);
        }
    }
    command.arg("--data-dir").arg(data_dir(root));
    if let Ok(url) = std::fs::read_to_string(root.join("test-database-url")) {
        command.arg("--database-url").arg(url);
    }
    if let Some(file) = key_file {
        command.arg("--master-key-file").arg(file);
    }
    let output = command.args(args).output().expect("run payrail");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "payrail {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}");
    stdout.into_owned()
}

on_both_stores! {
#[tokio::test]
async fn s4_rotation_beside_a_running_server_keeps_keys_webhooks_and_replays_working() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("payrail.key");
    let generated = run(&["master-key", "generate", key_file.to_str().unwrap()], root.path(), None);
    let with_key = {
        let key_file = key_file.clone();
        move |c: &mut Config| c.master_key_file = Some(key_file)
    };
    let server = start(root, with_key.clone()).await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    let (created, secret) = create_endpoint(&server, &key, &receiver.url(), "hook-1").await;
    assert!(!data_dir(server.dir.path()).join("master.key").exists(), "no key is made in the data directory when one is given");

    let rotated = run(&["master-key", "rotate"], server.dir.path(), Some(&key_file));
    let rewrapped = run(&["master-key", "rewrap"], server.dir.path(), Some(&key_file));
    for output in [&generated, &rotated, &rewrapped] {
        let key_text = std::fs::read_to_string(&key_file).unwrap();
        for line in key_text.lines().filter(|l| !l.starts_with('#')) {
            assert!(!output.contains(line), "a key was printed: {output}");
        }
    }
    assert!(rewrapped.contains("re-sealed") && rewrapped.contains("1 of 1 stored replies"), "hook-1's reply is re-sealed: {rewrapped}");
    // The running server reads the rotated file when it meets the new key.
    let (status, _) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "keys still authenticate");
    assert_signed_delivery(&server, &key, &receiver, &secret, "During Rotation").await;
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    let (created_2, secret_2) = create_endpoint(&server, &key, &format!("{}?2", receiver.url()), "hook-2").await;
    // Retiring the old key at once, beside the server that sealed hook-1's reply under it: the
    // rewrap re-sealed that stored reply, and the server never kept the old one in memory, so
    // its replay still opens (I4).
    let retired = run(&["master-key", "retire"], server.dir.path(), Some(&key_file));
    assert!(retired.contains("0 of 2 stored replies"), "both replies are under the newest key: {retired}");
    // A seal makes the server read the retired file, so it no longer holds the old key.
    create_endpoint(&server, &key, &format!("{}?3", receiver.url()), "hook-3").await;
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    assert_replay(&server, &key, &format!("{}?2", receiver.url()), "hook-2", &created_2).await;
    let root = server.stop().await;

    let again = run(&["master-key", "rewrap"], root.path(), Some(&key_file));
    assert!(again.contains("re-sealed 0"), "everything is under the newest key: {again}");
    let server = start(root, with_key.clone()).await;
    let (status, _) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "keys still authenticate after the restart");
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    assert_replay(&server, &key, &format!("{}?2", receiver.url()), "hook-2", &created_2).await;
    assert_signed_delivery(&server, &key, &receiver, &secret, "After Rotation").await;
    receiver.wait_signed("After Rotation", &secret_2).await;
    let root = server.stop().await;

    // Retiring again with the server stopped: the secrets, the pepper and every reply still open.
    run(&["master-key", "retire"], root.path(), Some(&key_file));
    let server = start(root, with_key).await;
    let (status, _) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "keys still authenticate after the retirement");
    assert_replay(&server, &key, &receiver.url(), "hook-1", &created).await;
    assert_replay(&server, &key, &format!("{}?2", receiver.url()), "hook-2", &created_2).await;
    assert_signed_delivery(&server, &key, &receiver, &secret, "After Retire").await;
    server.stop().await;
}
}

#[cfg(unix)]
#[test]
fn s4_keys_create_from_the_command_line_leaves_files_0600() {
    let root = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(common::test_database_url(root.path()));
    let secret = run(&["keys", "create", "--name", "cli"], root.path(), None).lines().last().unwrap().to_owned();
    let data = data_dir(root.path());
    assert_eq!(mode(&data), 0o700);
    let loose: Vec<_> = walk(&data).into_iter().filter(|(_, m)| *m != 0o600).collect();
    assert!(loose.is_empty(), "{loose:?}");
    assert!(files_containing(root.path(), &secret).is_empty(), "the API key itself is never stored");
}

on_both_stores! {
/// Found by the README audit: `master-key rewrap` left the SFTP identity keys of bank
/// connections under the old master key, so after `retire` no connection could log in to its
/// bank again. Now rewrap re-seals them too, and the connection reaches a real OpenSSH server
/// after the old key is retired.
#[tokio::test]
async fn s4_a_retired_master_key_leaves_bank_connections_able_to_log_in() {
    let sshd = common::sshd::Sshd::start();
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("payrail.key");
    run(&["master-key", "generate", key_file.to_str().unwrap()], root.path(), None);
    let with_key = {
        let key_file = key_file.clone();
        move |c: &mut Config| c.master_key_file = Some(key_file)
    };
    let server = start(root, with_key).await;
    let bank = sshd.dir().join("bank-acme");
    for folder in ["outbound", "inbound"] {
        std::fs::create_dir_all(bank.join(folder)).unwrap();
    }
    let identity = outside.path().join("acme_ed25519");
    std::fs::write(&identity, &sshd.user_key.private).unwrap();
    let transport = sshd.transport_toml(&identity, &bank);
    let config = outside.path().join("acme.toml");
    std::fs::write(&config, common::bank::config_toml("acme", "16:45", &transport)).unwrap();
    let added: Value = serde_json::from_str(&run(&["connections", "add", "--config", config.to_str().unwrap(), "--json"], server.dir.path(), Some(&key_file))).unwrap();
    let connection = added["id"].as_str().unwrap();
    // A directory connection beside it holds no identity key, and is not counted.
    let folders = "kind = \"directory\"\noutbound_dir = \"dir-out\"\ninbound_dir = \"dir-in\"";
    let local = outside.path().join("local.toml");
    std::fs::write(&local, common::bank::config_toml("acme", "16:45", folders)).unwrap();
    run(&["connections", "add", "--config", local.to_str().unwrap()], server.dir.path(), Some(&key_file));
    let read = |root: &Path| run(&["bank", "inbound", connection], root, Some(&key_file));
    assert!(read(server.dir.path()).contains("is empty"), "the connection logs in before the rotation\n{}", sshd.log());

    run(&["master-key", "rotate"], server.dir.path(), Some(&key_file));
    let retired = run(&["master-key", "retire"], server.dir.path(), Some(&key_file));
    assert!(retired.contains("1 of 1 bank connection identity keys"), "{retired}");
    assert!(read(server.dir.path()).contains("is empty"), "the connection still logs in once the old key is retired\n{}", sshd.log());
    let again = run(&["master-key", "rewrap"], server.dir.path(), Some(&key_file));
    assert!(again.contains("0 of 1 bank connection identity keys"), "already under the newest key: {again}");
    server.stop().await;
}
}
