//! Issue 3 and 4 acceptance: the official Modern Treasury SDKs (PyPI and npm `modern-treasury`),
//! used unchanged with strict response validation, against a real Payrail server.
//!
//! The server starts in-process (sandbox bank at 50 ms a step); `compat/run.sh` then installs
//! the SDKs (a venv at target/compat-venv, `npm ci` in compat/node) and runs both suites against
//! it. So the project's one test command, `cargo test`, runs the SDK suites too. The script fails
//! (and so does this test) when a suite fails or cannot be installed: nothing is skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;

/// Long enough for a first install of both SDKs on a slow network; a warm run takes seconds.
const RUN_LIMIT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_work_unchanged() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 50).await;
    let key = server.key().await;
    let cert = server.dir.path().join("tls-cert.pem");
    assert!(cert.is_file(), "the server's certificate is at {}", cert.display());

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // CARGO_TARGET_TMPDIR is <target dir>/tmp: the venv goes beside it, at <target dir>/compat-venv.
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").to_owned();
    let base = server.base.clone();
    let secret = key.secret.clone();

    // The script runs on a blocking thread: the server keeps serving on the runtime's workers.
    let (status, output, took) = tokio::task::spawn_blocking(move || {
        let log_path = target_dir.join("tmp").join(format!("sdk-compat-{}.log", std::process::id()));
        std::fs::create_dir_all(log_path.parent().unwrap()).expect("log dir");
        let log = std::fs::File::create(&log_path).expect("log file");
        let started = Instant::now();
        let mut child = Command::new("bash")
            .arg(root.join("compat").join("run.sh"))
            .current_dir(&root)
            .env("PAYRAIL_BASE_URL", &base)
            .env("PAYRAIL_API_KEY", &secret)
            .env("PAYRAIL_CA_CERT", &cert)
            .env("CARGO_TARGET_DIR", &target_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("bash runs compat/run.sh");
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for compat/run.sh") {
                break Some(status);
            }
            if started.elapsed() > RUN_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let output = std::fs::read_to_string(&log_path).unwrap_or_default();
        let _ = std::fs::remove_file(&log_path);
        (status, output, started.elapsed())
    })
    .await
    .expect("the compat runner thread");

    println!("---- compat/run.sh output ({:.1} s) ----\n{output}---- end of compat/run.sh output ----", took.as_secs_f64());
    match status {
        None => panic!("compat/run.sh did not finish within {} s", RUN_LIMIT.as_secs()),
        Some(status) => assert!(status.success(), "compat/run.sh failed ({status}): an SDK suite failed or could not be installed; its output is above"),
    }
}
