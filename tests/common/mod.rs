//! The test harness: a real Payrail server on 127.0.0.1 port 0, in a fresh data directory,
//! spoken to over verified HTTPS as a client would (the generated certificate is trusted).
#![allow(dead_code, unused_macros)]

pub mod bank;
pub mod sshd;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use payrail::config::Config;
use payrail::domain::api_key::Mode;
use payrail::domain::keys;
use payrail::domain::time::ShiftedClock;
use payrail::store::Store;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;
use tokio::sync::oneshot;

pub struct TestServer {
    pub base: String,
    pub addr: std::net::SocketAddr,
    pub admin: Option<String>,
    pub client: reqwest::Client,
    pub clock: Arc<ShiftedClock>,
    pub store: Arc<dyn Store>,
    /// The server's master key ring (what the command line would open).
    pub secrets: Arc<payrail::base::secret_box::SecretBox>,
    /// The master key file the server reads when it is not the data directory's own
    /// (`--master-key-file` for a command run beside it).
    pub master_key_file: Option<std::path::PathBuf>,
    pub dir: tempfile::TempDir,
    pub cert_pem: Vec<u8>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<payrail::Server>,
}

/// A key made for a test: its id and its secret.
#[derive(Clone, Debug)]
pub struct Key {
    pub id: String,
    pub secret: String,
    pub org: String,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts a server; `tweak` may change the configuration first.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, tweak).await
    }

    /// Starts a server on an existing data directory (restarts keep their data).
    pub async fn start_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> Self {
        let clock = Arc::new(ShiftedClock::default());
        let mut config = Config {
            data_dir: dir.path().to_owned(),
            database_url: test_database_url(dir.path()).await,
            admin_listen: Some("127.0.0.1:0".parse().unwrap()),
            clock: clock.clone(),
            ..Config::default()
        };
        tweak(&mut config);
        shared_master_key(&mut config);
        let master_key_file = config.master_key_file.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (stop, stopped) = oneshot::channel::<()>();
        let server = payrail::launch(config, listener, async move {
            let _ = stopped.await;
        })
        .await
        .expect("launch");
        let addr = server.local_addr;
        let (base, client, cert_pem) = match &server.cert_path {
            Some(path) => {
                let pem = std::fs::read(path).expect("certificate");
                (format!("https://127.0.0.1:{}", addr.port()), client_trusting(&pem), pem)
            }
            None => (format!("http://127.0.0.1:{}", addr.port()), reqwest::Client::new(), Vec::new()),
        };
        TestServer {
            base,
            addr,
            admin: server.admin_addr.map(|a| format!("http://{a}")),
            client,
            clock,
            store: server.store.clone(),
            secrets: server.secrets.clone(),
            master_key_file,
            dir,
            cert_pem,
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// Stops the server, waits for it to drain, and hands back its data directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.shutdown().await;
        let dir = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, dir)
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(40), server.wait()).await.expect("server stops");
        }
    }

    /// Waits up to `limit` for the server to stop by itself (no stop is sent); what it said.
    pub async fn stopped_by_itself(&mut self, limit: Duration) -> anyhow::Result<()> {
        let server = self.server.take().expect("a running server");
        tokio::time::timeout(limit, server.wait()).await.expect("the server stops by itself in time")
    }

    pub async fn key(&self) -> Key {
        self.key_for("default", Mode::Sandbox).await
    }

    pub async fn key_for(&self, org: &str, mode: Mode) -> Key {
        let issued = keys::create(self.store.as_ref(), self.clock.as_ref(), "test", mode, org).await.expect("create key");
        Key { id: issued.key.id, secret: issued.secret.expose().to_owned(), org: org.to_owned() }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request authenticated with `key` (user name `x-api-key`).
    pub fn req(&self, method: Method, path: &str, key: &Key) -> RequestBuilder {
        self.client.request(method, self.url(path)).basic_auth("x-api-key", Some(&key.secret))
    }

    pub fn get(&self, path: &str, key: &Key) -> RequestBuilder {
        self.req(Method::GET, path, key)
    }

    pub fn post(&self, path: &str, key: &Key, body: &Value) -> RequestBuilder {
        self.req(Method::POST, path, key).json(body)
    }

    pub fn patch(&self, path: &str, key: &Key, body: &Value) -> RequestBuilder {
        self.req(Method::PATCH, path, key).json(body)
    }

    pub fn delete(&self, path: &str, key: &Key) -> RequestBuilder {
        self.req(Method::DELETE, path, key)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The store a test runs on. Behaviour suites run each test on both (see [`on_both_stores!`]);
/// store-independent suites (TLS, CLI, parsers, SDKs) run once, on SQLite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

tokio::task_local! {
    static STORE: StoreKind;
}

/// Runs `test` with every server it starts on `kind` (a task-local: servers started from tasks
/// the test spawns must be started in the test's own task, or inherit nothing).
pub async fn run_on<F: std::future::Future<Output = ()>>(kind: StoreKind, test: F) {
    STORE.scope(kind, test).await
}

/// The store of the running test: the one [`run_on`] set, SQLite otherwise.
pub fn store_kind() -> StoreKind {
    STORE.try_with(|kind| *kind).unwrap_or(StoreKind::Sqlite)
}

/// Whether this test runs on PostgreSQL (some SQLite-only checks read the database file).
pub fn on_postgres() -> bool {
    store_kind() == StoreKind::Postgres
}

/// The PostgreSQL server the suite's PostgreSQL half uses: `PAYRAIL_TEST_DATABASE_URL`, which
/// `scripts/test` (the README's test command) sets after starting a throwaway cluster. Without
/// it a PostgreSQL test fails, loudly: it is never passed over.
pub fn postgres_server_url() -> String {
    match std::env::var("PAYRAIL_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "this test runs on PostgreSQL and PAYRAIL_TEST_DATABASE_URL is not set: run the suite with scripts/test \
             (it starts a throwaway cluster), or point the variable at a server where the user may CREATE DATABASE"
        ),
    }
}

/// The database URL for a server in `dir`: `None` (SQLite in the data directory) or, on
/// PostgreSQL, a fresh database for this server (remembered in the data directory, so a restart
/// on that directory finds its data again).
pub async fn test_database_url(dir: &std::path::Path) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let server = postgres_server_url();
    let remembered = dir.join("test-database-url");
    if let Ok(url) = std::fs::read_to_string(&remembered) {
        return Some(url);
    }
    let name = format!("payrail_test_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls).await.expect("reach the test PostgreSQL server");
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create a test database");
    drop(client);
    let _ = driver.await;
    let base = server.rsplit_once('/').map_or(server.as_str(), |(base, _)| base);
    let url = format!("{base}/{name}");
    std::fs::write(&remembered, &url).expect("remember the test database");
    Some(url)
}

/// Declares tests once and runs each on both stores: a test `NAME` becomes `NAME::sqlite` and
/// `NAME::postgres` (`cargo test ::postgres` runs the PostgreSQL half). Each test is written as
/// usual, attributes and doc comments included: `#[tokio::test] async fn NAME() { ... }`.
macro_rules! on_both_stores {
    ($($(#[$attr:meta])* async fn $name:ident() $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(#[$attr])*
            async fn sqlite() {
                $crate::common::run_on($crate::common::StoreKind::Sqlite, async move $body).await
            }
            $(#[$attr])*
            async fn postgres() {
                $crate::common::run_on($crate::common::StoreKind::Postgres, async move $body).await
            }
        }
    )*};
}

/// Declares tests that need PostgreSQL (several instances on one database): each runs once, on
/// PostgreSQL, as `NAME::postgres`.
macro_rules! on_postgres_only {
    ($($(#[$attr:meta])* async fn $name:ident() $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(#[$attr])*
            async fn postgres() {
                $crate::common::run_on($crate::common::StoreKind::Postgres, async move $body).await
            }
        }
    )*};
}

/// On PostgreSQL, instances in different data directories often share one test database, and
/// every instance on a database needs the same master key (SPEC S4): unless the test chose a key
/// file, use one per database, kept outside any data directory: in `PAYRAIL_TEST_KEY_DIR`
/// (`scripts/test` makes one and removes it on exit), else in one under the temp directory per
/// test process.
fn shared_master_key(config: &mut Config) {
    let Some(url) = config.database_url.as_deref().filter(|u| u.starts_with("postgres")) else { return };
    if config.master_key_file.is_some() {
        return;
    }
    let name = url.rsplit('/').next().unwrap_or("db").split('?').next().unwrap_or("db").to_owned();
    let dir = std::env::var_os("PAYRAIL_TEST_KEY_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("payrail-test-keys-{}", std::process::id())));
    payrail::base::private_fs::ensure_private_dir(&dir).expect("a private key directory");
    let path = dir.join(format!("{name}.key"));
    if !path.exists() {
        let _ = payrail::base::secret_box::SecretBox::generate_file(&path); // a racing test may win: same file
    }
    config.master_key_file = Some(path);
}

pub fn client_trusting(pem: &[u8]) -> reqwest::Client {
    let cert = reqwest::Certificate::from_pem(pem).expect("certificate parses");
    reqwest::Client::builder()
        .add_root_certificate(cert)
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Status and JSON body of a response.
pub async fn json(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let value = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")) };
    (status, value)
}

/// Asserts the contract's error body (SPEC L3) and returns it.
pub fn assert_error(status: u16, body: &Value, expected_status: u16, code: &str) {
    assert_eq!(status, expected_status, "status; body {body}");
    let errors = body.get("errors").and_then(Value::as_object).unwrap_or_else(|| panic!("no errors object in {body}"));
    assert_eq!(errors.get("code").and_then(Value::as_str), Some(code), "code in {body}");
    assert!(errors.get("message").and_then(Value::as_str).is_some_and(|m| !m.is_empty()), "message in {body}");
    assert!(errors.contains_key("parameter"), "parameter key in {body}");
}

/// What a `compat/` script run against a test server gave: its exit status (None if it overran
/// its time limit and was killed), its output, and how long it took.
pub struct ScriptRun {
    pub status: Option<std::process::ExitStatus>,
    pub output: String,
    pub took: Duration,
}

/// Runs `bash compat/<script>` against `server` with `PAYRAIL_BASE_URL`, `PAYRAIL_API_KEY`,
/// `PAYRAIL_CA_CERT` (and `env`) set, on a blocking thread so the server keeps serving; its
/// virtual environments go under the target directory.
pub async fn run_compat_script(server: &TestServer, secret: &str, script: &str, env: &[(&str, String)], limit: Duration) -> ScriptRun {
    use std::process::{Command, Stdio};
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // CARGO_TARGET_TMPDIR is <target dir>/tmp.
    let target_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").to_owned();
    let cert = server.dir.path().join("tls-cert.pem");
    assert!(cert.is_file(), "the server's certificate is at {}", cert.display());
    let mut command = Command::new("bash");
    command
        .arg(root.join("compat").join(script))
        .current_dir(&root)
        .env("PAYRAIL_BASE_URL", &server.base)
        .env("PAYRAIL_API_KEY", secret)
        .env("PAYRAIL_CA_CERT", &cert)
        .env("CARGO_TARGET_DIR", &target_dir)
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let log_path = target_dir.join("tmp").join(format!("{script}-{}.log", std::process::id()));
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(log_path.parent().unwrap()).expect("log dir");
        let log = std::fs::File::create(&log_path).expect("log file");
        let started = std::time::Instant::now();
        let mut child = command.stdout(log.try_clone().expect("log file")).stderr(log).spawn().expect("bash runs the script");
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the script") {
                break Some(status);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let output = std::fs::read_to_string(&log_path).unwrap_or_default();
        let _ = std::fs::remove_file(&log_path);
        ScriptRun { status, output, took: started.elapsed() }
    })
    .await
    .expect("the script runner thread")
}

/// The `payrail` command line on `server`'s database (as an operator would run it beside it),
/// with no `PAYRAIL_*` variable of the test's environment leaking in; not yet started.
pub async fn cli_command(server: &TestServer, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_payrail"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PAYRAIL_") {
            command.env_remove(&name);
        }
    }
    command.arg("--data-dir").arg(server.dir.path());
    if let Some(url) = test_database_url(server.dir.path()).await {
        command.arg("--database-url").arg(url);
    }
    if let Some(path) = &server.master_key_file {
        command.arg("--master-key-file").arg(path);
    }
    command.args(args);
    command
}

/// Runs the `payrail` command line on `server`'s database; its output.
pub async fn cli(server: &TestServer, args: &[&str]) -> std::process::Output {
    cli_command(server, args).await.output().expect("run payrail")
}

/// Registers a live directory-transport connection for `org` on `server` (`payrail connections
/// add`); returns its id.
pub async fn live_connection(server: &TestServer, org: &str) -> String {
    let sections = "[ach]\nimmediate_destination = \"021000021\"\nimmediate_destination_name = \"TEST BANK\"\n\
                    immediate_origin = \"1234567890\"\nimmediate_origin_name = \"TEST CORP\"\ncompany_id = \"1234567890\"\n\
                    company_name = \"TEST CORP\"\n[iso20022]\ninitiating_party_name = \"TEST CORP\"\ndebtor_agent_bic = \"CHASUS33XXX\"\n";
    live_connection_with(server, org, sections).await
}

/// A live `directory` connection of `org` with these config `sections` ([ach], [iso20022]).
pub async fn live_connection_with(server: &TestServer, org: &str, sections: &str) -> String {
    let dir = server.dir.path().join(format!("bank-{org}"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("connection.toml");
    std::fs::write(
        &config,
        format!(
            "name = \"Test Bank\"\norganization = \"{org}\"\nmode = \"live\"\ntimezone = \"America/New_York\"\ncutoffs = [\"16:45\"]\n\
             [transport]\nkind = \"directory\"\noutbound_dir = \"outbound\"\ninbound_dir = \"inbound\"\n{sections}"
        ),
    )
    .unwrap();
    let output = cli(server, &["connections", "add", "--config", config.to_str().unwrap(), "--json"]).await;
    assert!(output.status.success(), "connections add: {}", String::from_utf8_lossy(&output.stderr));
    let added: Value = serde_json::from_slice(&output.stdout).expect("--json prints one object");
    added["id"].as_str().expect("an id").to_owned()
}
