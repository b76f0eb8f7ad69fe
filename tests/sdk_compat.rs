//! Issue 3 and 4 acceptance: the official Modern Treasury SDKs (PyPI and npm `modern-treasury`),
//! used unchanged with strict response validation, against a real Payrail server.
//!
//! The server starts in-process (sandbox bank at 50 ms a step); `compat/run.sh` then installs
//! the SDKs (a venv at target/compat-venv, `npm ci` in compat/node) and runs both suites against
//! it. So the project's one test command, `cargo test`, runs the SDK suites too. The script fails
//! (and so does this test) when a suite fails or cannot be installed: nothing is skipped.

mod common;

use std::time::Duration;

use common::TestServer;

/// Long enough for a first install of both SDKs on a slow network; a warm run takes seconds.
const RUN_LIMIT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_work_unchanged() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 50).await;
    let key = server.key().await;
    let run = common::run_compat_script(&server, &key.secret, "run.sh", &[], RUN_LIMIT).await;
    let (status, output, took) = (run.status, run.output, run.took);

    println!("---- compat/run.sh output ({:.1} s) ----\n{output}---- end of compat/run.sh output ----", took.as_secs_f64());
    match status {
        None => panic!("compat/run.sh did not finish within {} s", RUN_LIMIT.as_secs()),
        Some(status) => {
            assert!(status.success(), "compat/run.sh failed ({status}): an SDK suite failed or could not be installed; its output is above")
        }
    }
}
