//! The server as a child process: where it keeps its data ([`Store`]), its API key, and
//! [`ServerProcess`] (start, wait until it answers, read its memory, stop).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::Value;

use super::BoxResult;
use super::http::{Call, Target, connect, read_cert, send};
use super::sampling::proc_status_kb;

/// How long a starting server may take to answer its first ping (generous for valgrind).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Where Payrail keeps its data in this run.
#[derive(Clone)]
pub enum Store {
    Sqlite,
    /// A fresh database created by the bench in the given server.
    Postgres {
        url: String,
    },
}

impl Store {
    pub fn name(&self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres { .. } => "postgres",
        }
    }

    pub fn url_args(&self) -> Vec<String> {
        match self {
            Store::Sqlite => vec![],
            Store::Postgres { url } => vec!["--database-url".into(), url.clone()],
        }
    }
}

pub fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_payrail"))
}

/// `payrail keys create --json`: (key id, secret).
pub fn create_key(data_dir: &Path, store: &Store) -> BoxResult<(String, String)> {
    let output = Command::new(server_bin())
        .arg("--data-dir")
        .arg(data_dir)
        .args(store.url_args())
        .args(["keys", "create", "--name", "bench", "--json"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running payrail keys create: {e}"))?;
    if !output.status.success() {
        return Err(format!("payrail keys create failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty()).ok_or("payrail keys create printed nothing")?;
    let value: Value = serde_json::from_str(line).map_err(|e| format!("payrail keys create --json: {e}: {line}"))?;
    let id = value["id"].as_str().ok_or("no id from keys create")?.to_owned();
    let key = value["key"].as_str().ok_or("no key from keys create")?.to_owned();
    Ok((id, key))
}

pub struct ServerProcess {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    log: PathBuf,
}

impl ServerProcess {
    pub fn start(data_dir: &Path, store: &Store, log_name: &str) -> BoxResult<Self> {
        let addr = free_port()?;
        let log = data_dir.join(log_name);
        let log_file = std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        let wrapper = std::env::var("PAYRAIL_BENCH_SERVER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        words.push(server_bin().display().to_string());
        let mut command = Command::new(&words[0]);
        command
            .args(&words[1..])
            .arg("--data-dir")
            .arg(data_dir)
            .args(store.url_args())
            .args(["serve", "--listen", &addr.to_string(), "--admin-listen", "off", "--sandbox-step-ms", "3600000"])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        let child = command.spawn().map_err(|e| format!("starting {}: {e}", words[0]))?;
        Ok(ServerProcess { child: Some(child), addr, data_dir: data_dir.to_owned(), log })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits for the certificate, then for an authenticated ping to answer 200.
    pub async fn ready(&mut self, secret: &str) -> BoxResult<Arc<Target>> {
        let deadline = Instant::now() + START_TIMEOUT;
        let cert_path = self.data_dir.join("tls-cert.pem");
        let mut last_err = String::from("not started");
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("the server exited ({status}); its log:\n{}", tail(&self.log)));
            }
            if let Ok(cert) = read_cert(&cert_path) {
                let target = Arc::new(Target::new(self.addr, cert, secret)?);
                match connect(&target).await {
                    Ok(mut sender) => match send(&mut sender, &target, &Call::get("/api/ping")).await {
                        Ok(reply) if reply.status == StatusCode::OK => return Ok(target),
                        Ok(reply) => last_err = format!("ping answered {}", reply.status),
                        Err(e) => last_err = e,
                    },
                    Err(e) => last_err = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("the server did not answer within {START_TIMEOUT:?}: {last_err}; its log:\n{}", tail(&self.log)))
    }

    /// Peak resident set (VmHWM) so far, in MB.
    pub fn peak_rss_mb(&self) -> Option<f64> {
        self.pid().and_then(|pid| proc_status_kb(pid, "VmHWM:")).map(|kb| kb as f64 / 1024.0)
    }

    pub fn rss_mb(&self) -> Option<f64> {
        self.pid().and_then(|pid| proc_status_kb(pid, "VmRSS:")).map(|kb| kb as f64 / 1024.0)
    }

    /// SIGTERM, then SIGKILL if it has not drained in 40 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("bench: the server did not stop on SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> BoxResult<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener.local_addr().map_err(|e| e.to_string())
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
