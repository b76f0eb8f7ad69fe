//! SPEC K1, K2, A4, A5 (and the start-up side of T1, T3): the `payrail` binary driven as a user
//! would drive it, including beside a running `payrail serve`.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_payrail");
/// The binary with a clean environment: no `PAYRAIL_*` variable (every flag reads one, SPEC K1)
/// nor log settings from the caller's shell can steer a test.
fn command() -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("PAYRAIL_") || text == "RUST_LOG" || text == "NO_COLOR" {
            command.env_remove(&name);
        }
    }
    command
}

/// What a finished command printed.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from(output: Output) -> Self {
        Run {
            status: output.status,
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }

    fn ok(self, what: &str) -> Self {
        assert!(self.status.success(), "{what} failed ({}):\nstdout: {}\nstderr: {}", self.status, self.stdout, self.stderr);
        self
    }

    fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }

    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|err| panic!("stdout is not one JSON value ({err}): {}", self.stdout))
    }
}

/// `payrail --data-dir DIR ARGS...`
fn payrail(dir: &Path, args: &[&str]) -> Run {
    Run::from(command().arg("--data-dir").arg(dir).args(args).output().expect("run payrail"))
}

fn is_secret(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|body| body.len() == 43 && body.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Creates a key with the CLI (`--json`) and returns `(id, secret)`.
fn create_key(dir: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["keys", "create", "--name", "cli", "--json"];
    args.extend_from_slice(extra);
    let object = payrail(dir, &args).ok("keys create --json").json();
    (object["id"].as_str().expect("id").to_owned(), object["key"].as_str().expect("key").to_owned())
}

fn list_keys(dir: &Path) -> Vec<Value> {
    let run = payrail(dir, &["keys", "list", "--json"]).ok("keys list --json");
    run.json().as_array().expect("keys list --json prints an array").clone()
}

fn find_key<'a>(list: &'a [Value], id: &str) -> &'a Value {
    list.iter().find(|k| k["id"] == id).unwrap_or_else(|| panic!("key {id} not listed in {list:?}"))
}

// ---------------------------------------------------------------------------------------------
// K2: keys create / list
// ---------------------------------------------------------------------------------------------

#[test]
fn k2_keys_create_prints_the_secret_alone_on_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = payrail(dir.path(), &["keys", "create", "--name", "x"]).ok("keys create");
    let secret = run.last_line();
    assert!(is_secret(secret, "pr_sandbox_"), "last stdout line is the bare secret: {:?}", run.stdout);
    assert_eq!(run.stdout.matches(secret).count(), 1, "the secret is printed once: {}", run.stdout);
    assert!(!run.stderr.contains(secret), "the secret is not logged: {}", run.stderr);
    let list = list_keys(dir.path());
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "x");
    assert_eq!(list[0]["live_mode"], false);
    assert_eq!(list[0]["organization_id"], "default");
    assert!(run.stdout.contains(list[0]["id"].as_str().unwrap()), "the id is shown too: {}", run.stdout);
}

#[test]
fn k2_keys_create_json_is_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let run = payrail(dir.path(), &["keys", "create", "--name", "x", "--json"]).ok("keys create --json");
    assert_eq!(run.stdout.trim().lines().count(), 1, "one line of JSON: {}", run.stdout);
    let object = run.json();
    assert!(object.is_object(), "{object}");
    assert!(object["id"].as_str().is_some_and(|id| !id.is_empty()), "{object}");
    assert!(is_secret(object["key"].as_str().unwrap_or(""), "pr_sandbox_"), "{object}");
    assert_eq!(object["live_mode"], false);
    assert_eq!(object["organization_id"], "default");
    assert_eq!(object["name"], "x");
}

/// Found by the hostile audit: a name with a newline split `keys list`'s row in two, and
/// `--data-dir` naming a file made that file 0700 before failing.
#[test]
fn k2_a_key_name_with_control_characters_and_a_data_dir_that_is_a_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = payrail(dir.path(), &["keys", "create", "--name", "a\nb"]);
    assert!(!run.status.success() && run.stderr.contains("control characters"), "{}{}", run.stdout, run.stderr);
    assert!(list_keys(dir.path()).is_empty(), "no key was made");
    let file = dir.path().join("keys.json");
    std::fs::write(&file, b"{}").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let run = payrail(&file, &["keys", "list"]);
    assert!(!run.status.success() && run.stderr.contains("not a directory"), "{}{}", run.stdout, run.stderr);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions()) & 0o777;
    assert_eq!(mode, 0o644, "the file is left as it was");
}

#[test]
fn k2_keys_create_live_for_an_organization() {
    let dir = tempfile::tempdir().unwrap();
    let object = payrail(dir.path(), &["keys", "create", "--name", "prod", "--mode", "live", "--org", "acme", "--json"])
        .ok("keys create --mode live")
        .json();
    assert!(is_secret(object["key"].as_str().unwrap_or(""), "pr_live_"), "{object}");
    assert_eq!(object["live_mode"], true);
    assert_eq!(object["organization_id"], "acme");
    // And without --json the last line is the live secret.
    let run = payrail(dir.path(), &["keys", "create", "--name", "prod2", "--mode", "live", "--org", "acme"]).ok("create");
    assert!(is_secret(run.last_line(), "pr_live_"), "{}", run.stdout);
}

#[test]
fn k2_keys_list_never_shows_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (sandbox_id, sandbox) = create_key(dir.path(), &[]);
    let (live_id, live) = create_key(dir.path(), &["--mode", "live", "--org", "acme"]);
    let json_run = payrail(dir.path(), &["keys", "list", "--json"]).ok("keys list --json");
    let table_run = payrail(dir.path(), &["keys", "list"]).ok("keys list");
    for run in [&json_run, &table_run] {
        for secret in [&sandbox, &live] {
            assert!(!run.stdout.contains(secret.as_str()), "a secret is listed: {}", run.stdout);
            assert!(!run.stdout.contains(&secret[secret.len() - 43..]), "a secret's body is listed: {}", run.stdout);
        }
        assert!(!run.stdout.contains("pr_sandbox_") && !run.stdout.contains("pr_live_"), "{}", run.stdout);
        assert!(!run.stdout.to_lowercase().contains("hash"), "{}", run.stdout);
        assert!(run.stdout.contains(&sandbox_id) && run.stdout.contains(&live_id), "both keys listed: {}", run.stdout);
    }
    let list = json_run.json();
    let list = list.as_array().expect("an array");
    assert_eq!(list.len(), 2);
    assert_eq!(find_key(list, &sandbox_id)["live_mode"], false);
    let live_key = find_key(list, &live_id);
    assert_eq!(live_key["live_mode"], true);
    assert_eq!(live_key["organization_id"], "acme");
    assert_eq!(live_key["decommissioned"], false);
    assert_eq!((&live_key["state"], &find_key(list, &sandbox_id)["state"]), (&json!("active"), &json!("active")), "as the table says");
    payrail(dir.path(), &["keys", "revoke", &live_id]).ok("keys revoke");
    let list = payrail(dir.path(), &["keys", "list", "--json"]).ok("keys list --json").json();
    assert_eq!(find_key(list.as_array().unwrap(), &live_id)["state"], "revoked");
}

// ---------------------------------------------------------------------------------------------
// A5: roll and revoke from the command line
// ---------------------------------------------------------------------------------------------

#[test]
fn a5_keys_revoke_and_roll() {
    let dir = tempfile::tempdir().unwrap();
    let (revoked_id, _) = create_key(dir.path(), &[]);
    let run = payrail(dir.path(), &["keys", "revoke", &revoked_id]).ok("keys revoke");
    assert!(run.stdout.contains(&revoked_id), "{}", run.stdout);
    let listed = list_keys(dir.path());
    let revoked = find_key(&listed, &revoked_id);
    assert_eq!(revoked["decommissioned"], true, "{revoked}");
    assert!(revoked["decommissioned_at"].is_string(), "{revoked}");
    let table = payrail(dir.path(), &["keys", "list"]).ok("keys list");
    assert!(table.stdout.lines().any(|l| l.contains(&revoked_id) && l.contains("revoked")), "{}", table.stdout);
    // A revoked key cannot be rolled back to life.
    let run = payrail(dir.path(), &["keys", "roll", &revoked_id]);
    assert!(!run.status.success(), "rolling a revoked key must fail: {}", run.stdout);

    let (old_id, old_secret) = create_key(dir.path(), &["--mode", "live", "--org", "acme"]);
    let run = payrail(dir.path(), &["keys", "roll", &old_id, "--grace", "1h"]).ok("keys roll --grace 1h");
    let new_secret = run.last_line().to_owned();
    assert!(is_secret(&new_secret, "pr_live_"), "the successor keeps the mode: {}", run.stdout);
    assert_ne!(new_secret, old_secret);
    let listed = list_keys(dir.path());
    assert_eq!(listed.len(), 3);
    let old = find_key(&listed, &old_id);
    let expires = old["expires_at"].as_str().expect("the rolled key expires");
    let expires = time::OffsetDateTime::parse(expires, &time::format_description::well_known::Rfc3339).unwrap();
    let in_one_hour = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    assert!((expires - in_one_hour).abs() < time::Duration::minutes(2), "expires about an hour from now: {old}");
    let successor = listed.iter().find(|k| k["id"] != old_id && k["id"] != revoked_id).unwrap();
    assert_eq!(successor["organization_id"], "acme");
    assert_eq!(successor["live_mode"], true);
    assert_eq!(successor["expires_at"], Value::Null);

    // --json on roll prints the successor as create --json does.
    let successor_id = successor["id"].as_str().unwrap().to_owned();
    let object = payrail(dir.path(), &["keys", "roll", &successor_id, "--grace", "0s", "--json"]).ok("roll --json").json();
    assert!(is_secret(object["key"].as_str().unwrap_or(""), "pr_live_"), "{object}");
    assert_eq!(object["organization_id"], "acme");
    assert_ne!(object["id"], successor_id.as_str());
}

#[test]
fn k2_bad_inputs_exit_non_zero_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _) = create_key(dir.path(), &[]);
    let unknown = "00000000-0000-4000-8000-000000000000";
    let cases: [(&[&str], &[&str]); 9] = [
        (&["keys", "create", "--name", "x", "--mode", "bogus"], &["mode"]),
        (&["keys", "create", "--name", "x", "--org", "bad org!"], &["org"]),
        (&["keys", "create", "--name", "x", "--org", ""], &["org"]),
        (&["keys", "create"], &["--name"]),
        (&["keys", "create", "--name", ""], &["name"]),
        (&["keys", "revoke", unknown], &["not found"]),
        (&["keys", "roll", unknown], &["not found"]),
        (&["keys", "roll", &id, "--grace", "3w"], &["duration"]),
        (&["keys", "frobnicate"], &["frobnicate"]),
    ];
    for (args, words) in cases {
        let run = payrail(dir.path(), args);
        assert!(!run.status.success(), "{args:?} must fail; stdout: {}", run.stdout);
        let stderr = run.stderr.to_lowercase();
        for word in words {
            assert!(stderr.contains(&word.to_lowercase()), "{args:?}: stderr should mention {word:?}: {}", run.stderr);
        }
        assert!(!run.stdout.contains("pr_sandbox_") && !run.stdout.contains("pr_live_"), "{args:?} printed a key: {}", run.stdout);
    }
    // None of the failures created, revoked or rolled anything.
    let listed = list_keys(dir.path());
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["decommissioned"], false);
    assert_eq!(listed[0]["expires_at"], Value::Null);
}

// ---------------------------------------------------------------------------------------------
// K1: defaults and environment
// ---------------------------------------------------------------------------------------------

#[test]
fn k1_default_data_dir_and_environment_variables() {
    let cwd = tempfile::tempdir().unwrap();
    let run = Run::from(command().current_dir(cwd.path()).args(["keys", "create", "--name", "d"]).output().unwrap()).ok("create");
    assert!(is_secret(run.last_line(), "pr_sandbox_"), "{}", run.stdout);
    assert!(cwd.path().join("payrail-data").join("payrail.db").is_file(), "default database ./payrail-data/payrail.db");

    // PAYRAIL_DATA_DIR and PAYRAIL_DATABASE_URL stand in for the flags.
    let other = tempfile::tempdir().unwrap();
    let run = Run::from(
        command().current_dir(cwd.path()).env("PAYRAIL_DATA_DIR", other.path()).args(["keys", "create", "--name", "e"]).output().unwrap(),
    )
    .ok("create with PAYRAIL_DATA_DIR");
    assert!(is_secret(run.last_line(), "pr_sandbox_"));
    assert!(other.path().join("payrail.db").is_file(), "PAYRAIL_DATA_DIR is honoured");
    assert_eq!(list_keys(other.path()).len(), 1);
    assert_eq!(list_keys(&cwd.path().join("payrail-data")).len(), 1);

    let url = format!("sqlite://{}", other.path().join("elsewhere.db").display());
    let run = Run::from(command().env("PAYRAIL_DATABASE_URL", &url).args(["migrate"]).output().unwrap()).ok("migrate");
    assert!(run.stdout.contains("elsewhere.db"), "{}", run.stdout);
    assert!(other.path().join("elsewhere.db").is_file(), "PAYRAIL_DATABASE_URL is honoured");

    // Every flag, of every subcommand: a script that exports the tenant for `keys` gets the same
    // tenant from `webhooks create`, never the default one.
    let env =
        [("PAYRAIL_ORG", "acme"), ("PAYRAIL_MODE", "live"), ("PAYRAIL_JSON", "true"), ("PAYRAIL_URL", "https://hooks.example.com/in")];
    let run = Run::from(
        command().arg("--data-dir").arg(other.path()).envs(env).args(["webhooks", "create", "--event", "completed"]).output().unwrap(),
    )
    .ok("webhooks create from the environment");
    let created = run.json();
    assert_eq!((created["organization_id"].as_str(), created["live_mode"].as_bool()), (Some("acme"), Some(true)), "{created}");
    assert_eq!(created["url"], "https://hooks.example.com/in");
    let listed =
        Run::from(command().arg("--data-dir").arg(other.path()).env("PAYRAIL_JSON", "true").args(["webhooks", "list"]).output().unwrap())
            .ok("webhooks list");
    assert_eq!(listed.json()[0]["id"], created["id"], "PAYRAIL_JSON is honoured: {}", listed.stdout);
    for args in [["connections", "list"], ["bank", "files"]] {
        let run =
            Run::from(command().arg("--data-dir").arg(other.path()).env("PAYRAIL_JSON", "true").args(args).output().unwrap()).ok("list");
        assert!(run.json().is_array(), "{args:?}: {}", run.stdout);
    }
}

// ---------------------------------------------------------------------------------------------
// A running `payrail serve`
// ---------------------------------------------------------------------------------------------

/// A port that was free a moment ago (`serve` does not print the port it bound).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process killed on drop, so a failing test leaves nothing running.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// `payrail serve --data-dir DIR ARGS...` with stderr (its log) to `log`.
    fn serve(dir: &Path, args: &[&str], log: &Path, rust_log: Option<&str>) -> Self {
        let mut command = command();
        command.arg("serve").arg("--data-dir").arg(dir).args(args);
        if let Some(filter) = rust_log {
            command.env("RUST_LOG", filter);
        }
        let stderr = File::create(log).expect("log file");
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).spawn().expect("spawn payrail serve");
        Daemon { child, log: log.to_owned() }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `ready` succeeds, failing early if the process exits.
    async fn wait_until<F, Fut>(&mut self, what: &str, mut ready: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("payrail serve exited ({status}) before {what}; log:\n{}", self.log());
            }
            if ready().await {
                return;
            }
            assert!(Instant::now() < deadline, "payrail serve not {what} after 30 s; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().expect("kill -TERM");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit, at most `limit`.
    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "payrail serve still running {limit:?} after SIGTERM; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn client_trusting(cert: &Path) -> reqwest::Client {
    let pem = std::fs::read(cert).expect("certificate file");
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("certificate parses"))
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Waits until the server answers HTTPS on `addr`, verified against `cert`; returns a client
/// that trusts it.
async fn wait_for_https(daemon: &mut Daemon, addr: SocketAddr, cert: &Path) -> reqwest::Client {
    let url = format!("https://{addr}/api/ping");
    daemon
        .wait_until("answering HTTPS", || {
            // The certificate may not be written yet, or only partly: retry until it verifies.
            let attempt = std::fs::read(cert).ok().and_then(|pem| {
                let cert = reqwest::Certificate::from_pem(&pem).ok()?;
                let client = reqwest::Client::builder()
                    .add_root_certificate(cert)
                    .tls_built_in_root_certs(false)
                    .timeout(Duration::from_secs(5))
                    .build()
                    .ok()?;
                Some(client.get(&url).send())
            });
            async move {
                match attempt {
                    Some(request) => matches!(request.await, Ok(response) if response.status() == 401),
                    None => false,
                }
            }
        })
        .await;
    client_trusting(cert)
}

async fn ping(client: &reqwest::Client, addr: SocketAddr, secret: &str) -> (u16, String) {
    let response = client.get(format!("https://{addr}/api/ping")).basic_auth("x-api-key", Some(secret)).send().await.expect("ping");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Every file in `dir`, as bytes, with its name.
fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            path.is_file().then(|| (path.display().to_string(), std::fs::read(&path).unwrap_or_default()))
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn k2_cli_keys_take_effect_on_a_running_server_and_a4_no_secret_in_log_or_database() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("d");
    let log = data.path().join("serve.log");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let listen = addr.to_string();
    // Debug logging: no level may leak a key (SPEC A4).
    let mut server = Daemon::serve(&dir, &["--listen", &listen, "--admin-listen", "127.0.0.1:0"], &log, Some("debug"));
    let cert = dir.join("tls-cert.pem");
    let client = wait_for_https(&mut server, addr, &cert).await;
    let mut secrets = Vec::new();

    // K2: a key created by the CLI while the server runs works at once.
    let (id, secret) = create_key(&dir, &[]);
    secrets.push(secret.clone());
    assert_eq!(ping(&client, addr, &secret).await, (200, r#"{"ping":"pong"}"#.to_owned()));
    let plain = payrail(&dir, &["keys", "create", "--name", "plain", "--mode", "live", "--org", "acme"]).ok("create");
    let live_secret = plain.last_line().to_owned();
    secrets.push(live_secret.clone());
    assert_eq!(ping(&client, addr, &live_secret).await.0, 200);
    let current: Value = client
        .get(format!("https://{addr}/api/api_keys/current"))
        .basic_auth("acme", Some(&live_secret))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(current["live_mode"], true);
    assert_eq!(current["organization_id"], "acme");

    // A5: roll while serving: both work within the grace period.
    let rolled = payrail(&dir, &["keys", "roll", &id, "--grace", "1h"]).ok("keys roll");
    let successor = rolled.last_line().to_owned();
    secrets.push(successor.clone());
    assert_eq!(ping(&client, addr, &successor).await.0, 200, "the successor works at once");
    assert_eq!(ping(&client, addr, &secret).await.0, 200, "the old key works within its grace");

    // A5: revoke by CLI: the very next request is refused.
    payrail(&dir, &["keys", "revoke", &id]).ok("keys revoke");
    let (status, body) = ping(&client, addr, &secret).await;
    assert_eq!(status, 401, "a revoked key fails at once: {body}");
    assert!(body.contains("invalid_key"), "{body}");
    assert_eq!(ping(&client, addr, &successor).await.0, 200, "revoking one key leaves the successor working");

    // S/K: a second server on the same data directory refuses to start, naming the lock.
    let second_log = data.path().join("second.log");
    let second_listen = format!("127.0.0.1:{}", free_port());
    let mut second = Daemon::serve(&dir, &["--listen", &second_listen, "--admin-listen", "off"], &second_log, None);
    let status = second.wait_exit(Duration::from_secs(30));
    assert!(!status.success(), "a second server on the same SQLite file must not start");
    let second_stderr = second.log();
    assert!(second_stderr.to_lowercase().contains("lock"), "the refusal mentions the lock: {second_stderr}");
    assert_eq!(ping(&client, addr, &successor).await.0, 200, "the first server is unaffected");

    // Graceful shutdown on SIGTERM, exit status 0, even with a keep-alive connection open.
    server.terminate();
    let status = server.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "payrail serve exits 0 on SIGTERM, got {status}; log:\n{}", server.log());
    drop(client);

    // T1: the log names the certificate file.
    let log_text = server.log();
    assert!(log_text.contains(&cert.display().to_string()), "the log names the certificate {}:\n{log_text}", cert.display());

    // A4: no secret, whole or hashed, in the server's log, the CLI's output other than the
    // creation line, or any file of the data directory (database, WAL, certificate...).
    let store =
        payrail::open_store(&payrail::config::Config { data_dir: dir.clone(), admin_listen: None, ..payrail::config::Config::default() })
            .expect("open the store after the server stopped");
    let files = files_in(&dir);
    assert!(files.iter().any(|(name, _)| name.ends_with("payrail.db")), "{:?}", files.iter().map(|f| &f.0).collect::<Vec<_>>());
    for secret in &secrets {
        let body = &secret[secret.len() - 43..];
        let parsed = payrail::domain::api_key::SecretKey::parse(secret).expect("a well-formed key");
        let hash = store.key_hasher().hash(&parsed).0;
        for (needle, what) in [(secret.as_str(), "key"), (body, "key body"), (&hex(&hash), "hex hash")] {
            assert!(!log_text.contains(needle), "the server log contains the key as {what}");
            assert!(!second_stderr.contains(needle), "the second server's log contains the key as {what}");
            for (name, bytes) in &files {
                assert!(!contains(bytes, needle.as_bytes()), "{name} contains the key as {what}");
            }
        }
        // Hashed, or as the Authorization header carries it (base64 of user:key).
        let b64 = |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
        let encoded = [
            (b64(&hash), "base64 hash"),
            (b64(format!("x-api-key:{secret}").as_bytes()), "Authorization header"),
            (b64(format!("acme:{secret}").as_bytes()), "Authorization header"),
            (b64(format!("default:{secret}").as_bytes()), "Authorization header"),
        ];
        for (needle, what) in &encoded {
            assert!(!log_text.contains(needle.trim_end_matches('=')), "the server log contains the key as {what}");
        }
    }
}

#[tokio::test]
async fn t3_plain_http_flag_serves_http_and_warns() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("d");
    let log = data.path().join("serve.log");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (_, secret) = create_key(&dir, &[]);
    let mut server = Daemon::serve(&dir, &["--listen", &addr.to_string(), "--admin-listen", "off", "--plain-http"], &log, None);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let url = format!("http://{addr}/api/ping");
    server
        .wait_until("answering plain HTTP", || {
            let request = client.get(&url).basic_auth("x-api-key", Some(&secret)).send();
            async move { matches!(request.await, Ok(r) if r.status() == 200) }
        })
        .await;
    let log_text = server.log();
    assert!(log_text.to_lowercase().contains("plain http"), "a warning at start (T3):\n{log_text}");
    assert!(log_text.contains("WARN"), "logged as a warning:\n{log_text}");
    assert!(!dir.join("tls-cert.pem").exists(), "no certificate is made for plain HTTP");
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(30)).success());
}

#[tokio::test]
async fn t1_serve_with_operator_certificate_files() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("d");
    let log = data.path().join("serve.log");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let cert = data.path().join("operator-cert.pem");
    let key = data.path().join("operator-key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let (_, secret) = create_key(&dir, &[]);
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args =
        ["--listen", &addr.to_string(), "--admin-listen", "off", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    let mut server = Daemon::serve(&dir, &args, &log, None);
    let client = wait_for_https(&mut server, addr, &cert).await;
    assert_eq!(ping(&client, addr, &secret).await.0, 200);
    assert!(!dir.join("tls-cert.pem").exists(), "no self-signed certificate when one is configured");
    assert!(server.log().contains(&cert.display().to_string()), "the log names the certificate:\n{}", server.log());
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(30)).success());

    // --tls-cert without --tls-key is refused.
    let run = Run::from(
        command().args(["serve", "--data-dir"]).arg(&dir).args(["--listen", &addr.to_string(), "--tls-cert"]).arg(&cert).output().unwrap(),
    );
    assert!(!run.status.success());
    assert!(run.stderr.contains("--tls-key"), "{}", run.stderr);
}

#[test]
fn s2_unreachable_database_at_start_fails_naming_the_url_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"])
        .arg("--data-dir")
        .arg(dir.path())
        // Port 1 on loopback: nothing listens there, so the connection is refused at once.
        .args(["--database-url", "postgres://app:s3cret-pw@127.0.0.1:1/payrail"])
        .env_remove("PAYRAIL_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve must exit non-zero: {stderr}");
    assert!(stderr.contains("postgres://app:***@127.0.0.1:1/payrail"), "the message names the URL: {stderr}");
    assert!(!stderr.contains("s3cret-pw"), "the password never appears: {stderr}");
}

/// Issue 17 (and H3's "logs keep PostgreSQL's own message"): a database that refuses the
/// connection is reported with PostgreSQL's own reason, not a bare "db error". Needs the suite's
/// PostgreSQL (`PAYRAIL_TEST_DATABASE_URL`, set by scripts/test); without it this fails loudly.
#[test]
fn s2_a_refused_database_login_names_postgresql_s_reason() {
    let server = std::env::var("PAYRAIL_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .expect("PAYRAIL_TEST_DATABASE_URL names the suite's PostgreSQL: run scripts/test, which starts one");
    let (scheme, rest) = server.split_once("://").expect("a URL");
    let host_and_db = rest.split_once('@').map_or(rest, |(_, after)| after);
    let url = format!("{scheme}://payrail_no_such_role@{host_and_db}");
    let dir = tempfile::tempdir().unwrap();
    let run = payrail(dir.path(), &["migrate", "--database-url", &url]);
    assert!(!run.status.success(), "migrate must fail: {}", run.stderr);
    assert!(run.stderr.contains("role \"payrail_no_such_role\" does not exist"), "PostgreSQL's own reason is shown: {}", run.stderr);
}

/// Found by the hostile audit: `serve --connections-max 0` started and then served nobody.
/// Limits that would leave nothing to serve are refused before anything starts.
#[test]
fn k1_limits_that_would_serve_nothing_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--connections-max", "--body-limit-bytes", "--request-timeout-ms", "--webhook-timeout-ms"] {
        let run = payrail(dir.path(), &["serve", flag, "0", "--listen", "127.0.0.1:0"]);
        assert!(!run.status.success(), "{flag} 0 was accepted: {}", run.stderr);
        assert!(run.stderr.contains(flag), "the refusal names {flag}: {}", run.stderr);
    }
}

/// Found by the re-audit: a key name an older release stored with a newline still split its
/// row of `keys list`; it is shown escaped, on its row.
#[test]
fn k2_a_stored_name_with_a_newline_stays_on_its_row_of_keys_list() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _) = create_key(dir.path(), &[]);
    let db = rusqlite::Connection::open(dir.path().join("payrail.db")).unwrap();
    db.execute("UPDATE api_keys SET name = ?1 WHERE id = ?2", ["old\nname", id.as_str()]).unwrap();
    let run = payrail(dir.path(), &["keys", "list"]).ok("keys list");
    let row = run.stdout.lines().find(|line| line.contains(&id)).expect("the key's row");
    assert!(row.ends_with("old\\nname"), "{}", run.stdout);
}

/// A master key file made by `master-key generate` in a folder of its own, outside `dir` (the
/// folder is removed when the first value is dropped).
fn key_file_outside(dir: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("payrail.key");
    payrail(dir, &["master-key", "generate", key_file.to_str().unwrap()]).ok("master-key generate");
    (outside, key_file)
}

/// Found by the README audit: a command run without the server's `--master-key-file` made a
/// `master.key` in the data directory, then failed on the database sealed under the other key,
/// leaving that stray key behind. Now it fails the same way and leaves nothing.
#[test]
fn s4_a_command_without_the_servers_key_file_leaves_no_stray_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_outside, key_file) = key_file_outside(dir.path());
    payrail(dir.path(), &["--master-key-file", key_file.to_str().unwrap(), "keys", "create", "--name", "first"]).ok("keys create");
    let forgot = payrail(dir.path(), &["keys", "create", "--name", "second"]);
    assert!(!forgot.status.success(), "{}", forgot.stdout);
    assert!(forgot.stderr.contains("does not hold"), "{}", forgot.stderr);
    assert!(!dir.path().join("master.key").exists(), "no stray master key is left in the data directory");
    // The right key still works, and a fresh data directory still gets its own key.
    payrail(dir.path(), &["--master-key-file", key_file.to_str().unwrap(), "keys", "list"]).ok("keys list");
    let fresh = tempfile::tempdir().unwrap();
    payrail(fresh.path(), &["keys", "create", "--name", "own"]).ok("keys create in a fresh directory");
    assert!(fresh.path().join("master.key").exists());
}

/// Found by the re-audit: `migrate --master-key-file` sealed nothing, so a command run next
/// without the flag made a `master.key` of its own and bound the database to it, and the
/// operator's key file was refused from then on. Now migrate binds the database to the key it
/// is given, and the command without the flag is refused, leaving no key behind.
#[test]
fn s4_migrate_with_a_key_file_binds_the_database_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_outside, key_file) = key_file_outside(dir.path());
    payrail(dir.path(), &["--master-key-file", key_file.to_str().unwrap(), "migrate"]).ok("migrate");
    let forgot = payrail(dir.path(), &["keys", "create", "--name", "y"]);
    assert!(!forgot.status.success() && forgot.stderr.contains("does not hold"), "{}\n{}", forgot.stdout, forgot.stderr);
    assert!(!dir.path().join("master.key").exists(), "no key of its own");
    payrail(dir.path(), &["--master-key-file", key_file.to_str().unwrap(), "keys", "create", "--name", "z"]).ok("keys create with the key");
    // Without a key file, migrate touches no secret (it may run from a host that holds none).
    let bare = tempfile::tempdir().unwrap();
    payrail(bare.path(), &["migrate"]).ok("migrate without a key");
    assert!(!bare.path().join("master.key").exists(), "migrate alone makes no key");
}
