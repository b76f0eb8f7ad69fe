//! The bank transports (SPEC B2, B5; issue 20 item 2 and "Bad input and faults"), with no store
//! and no HTTP: the same behaviour checks run on the `directory` transport and on `sftp` against
//! a real OpenSSH server (tests/common/sshd.rs), then SFTP's own refusals: a host key that is not
//! the pinned one, a user key the server does not accept, a bank that is not there or does not
//! answer.
//!
//! The SFTP server runs as the current user on this machine, so its "remote" folders are local
//! folders the tests look into directly. Like the PostgreSQL suites, these fail loudly rather than
//! pass over what they cannot run: they need `/usr/sbin/sshd` (`.ci/run` installs it) and, for
//! the full disk, permission to mount a small tmpfs (root, as in CI).

#[path = "common/sshd.rs"]
mod sshd;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use payrail::bank::transport::directory::DirectoryTransport;
use payrail::bank::transport::sftp::{SftpSettings, SftpTransport, Timeouts};
use payrail::bank::transport::{RemoteFile, Transport, TransportError};
use sha2::{Digest as _, Sha256};
use sshd::Sshd;

/// A bank to test against: a transport and the two folders it reaches, as local paths.
struct Bank {
    transport: Box<dyn Transport>,
    outbound: PathBuf,
    inbound: PathBuf,
    /// Where test files are made on "our" side.
    local: PathBuf,
    _sshd: Option<Sshd>,
    _dir: tempfile::TempDir,
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix(sshd::TEMP_PREFIX).tempdir_in("/tmp").unwrap()
}

/// Makes `outbound`, `inbound` and `local` under `root`.
fn folders(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let names = ["outbound", "inbound", "local"].map(|n| root.join(n));
    for dir in &names {
        std::fs::create_dir(dir).unwrap();
    }
    let [outbound, inbound, local] = names;
    (outbound, inbound, local)
}

fn directory_bank() -> Bank {
    let dir = temp_dir();
    let (outbound, inbound, local) = folders(dir.path());
    let transport = Box::new(DirectoryTransport::new(&outbound, &inbound));
    Bank { transport, outbound, inbound, local, _sshd: None, _dir: dir }
}

/// Bounds for tests on a loaded machine: generous, but a hang still fails.
fn test_timeouts() -> Timeouts {
    Timeouts { connect: Duration::from_secs(20), operation: Duration::from_secs(30) }
}

fn settings_for(sshd: &Sshd, host_key: &str, root: &Path) -> SftpSettings {
    SftpSettings {
        host: "127.0.0.1".into(),
        port: sshd.port,
        user: sshd.user.clone(),
        host_key: host_key.to_owned(),
        outbound_dir: root.join("outbound").display().to_string(),
        inbound_dir: root.join("inbound").display().to_string(),
        timeouts: test_timeouts(),
    }
}

fn sftp_bank() -> Bank {
    let sshd = Sshd::start();
    let dir = temp_dir();
    let (outbound, inbound, local) = folders(dir.path());
    let settings = settings_for(&sshd, &sshd.host_key.public, dir.path());
    let transport = Box::new(SftpTransport::new(settings, &sshd.user_key.private).unwrap());
    Bank { transport, outbound, inbound, local, _sshd: Some(sshd), _dir: dir }
}

/// Each behaviour check, run once per transport: `directory::NAME` and `sftp::NAME`.
macro_rules! on_both_transports {
    ($($name:ident),* $(,)?) => {
        mod directory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::directory_bank()).await
            })*
        }
        mod sftp {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::sftp_bank()).await
            })*
        }
    };
}

on_both_transports!(
    b2_upload_appears_under_its_final_name_with_its_bytes,
    b2_a_retried_upload_of_the_same_content_succeeds_without_a_second_file,
    b2_an_upload_over_other_content_is_refused_and_overwrites_nothing,
    b2_a_leftover_part_from_a_crash_is_replaced_or_cleared,
    b2_a_large_file_streams_and_is_never_seen_half_written,
    b2_a_full_bank_side_is_reported_and_leaves_no_part,
    b2_names_that_are_not_plain_file_names_are_refused,
    b5_inbound_files_are_listed_fetched_moved_aside_and_removed,
    b5_fetching_a_missing_file_is_not_found,
);

/// Writes `bytes` to a new local file `name` and returns its path.
fn local_file(bank: &Bank, name: &str, bytes: &[u8]) -> PathBuf {
    let path = bank.local.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The names in a folder, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// A NACHA-looking payload of `n` bytes, different per `seed`.
fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| b"0123456789ABCDEFGHIJ\n"[(i + seed as usize) % 21]).collect()
}

async fn b2_upload_appears_under_its_final_name_with_its_bytes(bank: Bank) {
    let bytes = payload(100_000, 1);
    let path = local_file(&bank, "ach.txt", &bytes);
    let up = bank.transport.upload("PAYRAIL_ACH_20260105_1030.txt", &path).await.unwrap();
    assert!(!up.already_present);
    assert_eq!(up.digest.size, bytes.len() as u64);
    assert_eq!(up.digest.sha256, sha256_hex(&bytes));
    assert_eq!(names_in(&bank.outbound), ["PAYRAIL_ACH_20260105_1030.txt"], "one file, no .part left");
    assert_eq!(std::fs::read(bank.outbound.join("PAYRAIL_ACH_20260105_1030.txt")).unwrap(), bytes);
}

async fn b2_a_retried_upload_of_the_same_content_succeeds_without_a_second_file(bank: Bank) {
    let bytes = payload(5_000, 2);
    let path = local_file(&bank, "f", &bytes);
    let first = bank.transport.upload("wire.xml", &path).await.unwrap();
    let again = bank.transport.upload("wire.xml", &path).await.unwrap();
    assert!(!first.already_present);
    assert!(again.already_present, "the retry finds its own file");
    assert_eq!(again.digest, first.digest);
    assert_eq!(names_in(&bank.outbound), ["wire.xml"]);
    assert_eq!(std::fs::read(bank.outbound.join("wire.xml")).unwrap(), bytes);
}

async fn b2_an_upload_over_other_content_is_refused_and_overwrites_nothing(bank: Bank) {
    let first = payload(5_000, 3);
    bank.transport.upload("ach.txt", &local_file(&bank, "a", &first)).await.unwrap();
    for other in [payload(5_000, 4), payload(4_999, 3)] {
        let err = bank.transport.upload("ach.txt", &local_file(&bank, "b", &other)).await.unwrap_err();
        let TransportError::Conflict { ref name, ref remote, ref local } = err else { panic!("expected a conflict, got {err:?}") };
        assert_eq!(name, "ach.txt");
        assert_eq!(remote.sha256, sha256_hex(&first));
        assert_eq!(local.sha256, sha256_hex(&other));
        let text = err.to_string();
        eprintln!("{text}");
        assert!(text.contains("ach.txt already exists") && text.contains("not overwritten"), "{text}");
    }
    assert_eq!(names_in(&bank.outbound), ["ach.txt"], "no second name, no .part");
    assert_eq!(std::fs::read(bank.outbound.join("ach.txt")).unwrap(), first);
}

async fn b2_a_leftover_part_from_a_crash_is_replaced_or_cleared(bank: Bank) {
    // A crash while writing: only NAME.part, half written.
    let bytes = payload(20_000, 5);
    std::fs::write(bank.outbound.join("a.txt.part"), &bytes[..7_000]).unwrap();
    let up = bank.transport.upload("a.txt", &local_file(&bank, "a", &bytes)).await.unwrap();
    assert!(!up.already_present);
    assert_eq!(names_in(&bank.outbound), ["a.txt"]);
    assert_eq!(std::fs::read(bank.outbound.join("a.txt")).unwrap(), bytes);
    // A crash between linking NAME and removing NAME.part: both there, NAME complete.
    std::fs::write(bank.outbound.join("b.txt"), &bytes).unwrap();
    std::fs::write(bank.outbound.join("b.txt.part"), &bytes).unwrap();
    let up = bank.transport.upload("b.txt", &local_file(&bank, "b", &bytes)).await.unwrap();
    assert!(up.already_present);
    assert_eq!(names_in(&bank.outbound), ["a.txt", "b.txt"]);
}

/// Writes a file of `size` bytes in 1 MiB steps (never whole in memory) and returns its SHA-256.
fn big_file(path: &Path, size: usize) -> String {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut sha = Sha256::new();
    let block = payload(1 << 20, 7);
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len());
        file.write_all(&block[..n]).unwrap();
        sha.update(&block[..n]);
        left -= n;
    }
    file.flush().unwrap();
    format!("{:x}", sha.finalize())
}

fn sha256_of_file(path: &Path) -> String {
    let mut file = std::fs::File::open(path).unwrap();
    let mut sha = Sha256::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
    }
    format!("{:x}", sha.finalize())
}

/// The process's peak resident memory so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Watches `dir` until stopped: whenever `name` is visible it must have its full `size`.
/// Returns whether `name.part` was ever seen.
fn watch_final_name(dir: PathBuf, name: &'static str, size: u64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let mut saw_part = false;
        while !stop.load(Ordering::Relaxed) {
            if let Ok(meta) = std::fs::metadata(dir.join(name)) {
                assert_eq!(meta.len(), size, "{name} was visible with {} of {size} bytes", meta.len());
            }
            saw_part |= dir.join(format!("{name}.part")).exists();
            std::thread::sleep(Duration::from_millis(2));
        }
        saw_part
    })
}

const LARGE: usize = 64 << 20;

async fn b2_a_large_file_streams_and_is_never_seen_half_written(bank: Bank) {
    let path = bank.local.join("large.ach");
    let sha = big_file(&path, LARGE);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_final_name(bank.outbound.clone(), "large.ach", LARGE as u64, stop.clone());
    let before = peak_rss();
    let started = Instant::now();
    let up = bank.transport.upload("large.ach", &path).await.unwrap();
    let upload_secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let saw_part = watcher.join().expect("the final name was never seen half written");
    assert!(saw_part, "the upload went through large.ach.part");
    assert_eq!((up.digest.size, up.digest.sha256.as_str()), (LARGE as u64, sha.as_str()));
    assert_eq!(sha256_of_file(&bank.outbound.join("large.ach")), sha);

    std::fs::rename(bank.outbound.join("large.ach"), bank.inbound.join("large.ach")).unwrap();
    let started = Instant::now();
    let fetched = bank.transport.fetch("large.ach", &bank.local.join("back.ach")).await.unwrap();
    let fetch_secs = started.elapsed().as_secs_f64();
    assert_eq!(fetched.sha256, sha);
    assert_eq!(sha256_of_file(&bank.local.join("back.ach")), sha);
    let grown = peak_rss().saturating_sub(before);
    let mb = LARGE as f64 / (1 << 20) as f64;
    eprintln!(
        "64 MiB: upload {upload_secs:.2}s ({:.0} MiB/s), fetch {fetch_secs:.2}s ({:.0} MiB/s), peak RSS grew {} MiB",
        mb / upload_secs,
        mb / fetch_secs,
        grown >> 20
    );
    // Other tests run beside this one in the process; the file whole would be 64 MiB.
    assert!(grown < (LARGE as u64) / 2, "peak RSS grew by {grown} bytes while moving {LARGE}");
}

/// A small tmpfs mounted on a folder (a disk that fills up), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(on: &Path, size: &str) -> Tmpfs {
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(on).output().expect("mount runs");
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "this test mounts a 1 MiB tmpfs to fill the bank's disk (needs root, as in CI): {}", why.trim());
        Tmpfs(on.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

async fn b2_a_full_bank_side_is_reported_and_leaves_no_part(bank: Bank) {
    let _full = Tmpfs::mount(&bank.outbound, "1m");
    let path = local_file(&bank, "big", &payload(3 << 20, 8));
    let err = bank.transport.upload("ach.txt", &path).await.unwrap_err();
    eprintln!("{err}");
    assert!(matches!(err, TransportError::RemoteFull { .. }), "{err:?}");
    assert!(err.to_string().contains("full"), "{err}");
    assert_eq!(names_in(&bank.outbound), Vec::<String>::new(), "the partial file is removed");
    // Room again: the same upload goes through.
    let small = local_file(&bank, "small", &payload(1000, 8));
    bank.transport.upload("ach.txt", &small).await.unwrap();
}

async fn b2_names_that_are_not_plain_file_names_are_refused(bank: Bank) {
    let path = local_file(&bank, "x", b"x");
    for name in ["../escape.txt", "a/b.txt", "", "x.part"] {
        let err = bank.transport.upload(name, &path).await.unwrap_err();
        assert!(matches!(err, TransportError::InvalidName { .. }), "{name:?}: {err:?}");
    }
    let err = bank.transport.move_aside("x", "../up").await.unwrap_err();
    assert!(matches!(err, TransportError::InvalidName { .. }), "{err:?}");
    assert!(names_in(&bank.outbound).is_empty());
}

async fn b5_inbound_files_are_listed_fetched_moved_aside_and_removed(bank: Bank) {
    let inbound = &bank.inbound;
    std::fs::write(inbound.join("returns.ach"), payload(940, 9)).unwrap();
    std::fs::write(inbound.join("camt053.xml"), b"<Document/>").unwrap();
    std::fs::write(inbound.join("arriving.xml.part"), b"half").unwrap();
    std::fs::write(inbound.join(".hidden"), b"h").unwrap();
    std::fs::create_dir(inbound.join("archive")).unwrap();
    std::fs::write(inbound.join("archive").join("old.xml"), b"old").unwrap();

    let listed = bank.transport.list_inbound().await.unwrap();
    let expected = [RemoteFile { name: "camt053.xml".into(), size: 11 }, RemoteFile { name: "returns.ach".into(), size: 940 }];
    assert_eq!(listed, expected);

    let into = bank.local.join("fetched.ach");
    let fetched = bank.transport.fetch("returns.ach", &into).await.unwrap();
    assert_eq!(std::fs::read(&into).unwrap(), payload(940, 9));
    assert_eq!((fetched.size, fetched.sha256), (940, sha256_hex(&payload(940, 9))));

    assert_eq!(bank.transport.move_aside("returns.ach", "failed").await.unwrap(), "returns.ach");
    std::fs::write(inbound.join("returns.ach"), b"again").unwrap();
    assert_eq!(bank.transport.move_aside("returns.ach", "failed").await.unwrap(), "returns.ach.1", "never over a file set aside");
    assert_eq!(names_in(&inbound.join("failed")), ["returns.ach", "returns.ach.1"]);
    assert_eq!(std::fs::read(inbound.join("failed/returns.ach")).unwrap(), payload(940, 9));

    bank.transport.remove("camt053.xml").await.unwrap();
    bank.transport.remove("camt053.xml").await.unwrap();
    assert_eq!(bank.transport.list_inbound().await.unwrap(), []);
    assert!(matches!(bank.transport.move_aside("gone.xml", "failed").await, Err(TransportError::NotFound { .. })));
}

async fn b5_fetching_a_missing_file_is_not_found(bank: Bank) {
    let err = bank.transport.fetch("nothing.xml", &bank.local.join("x")).await.unwrap_err();
    assert!(matches!(err, TransportError::NotFound { .. }), "{err:?}");
}

// --- SFTP only: who the bank is, who we are, whether it is there ---

/// A server with ed25519 and RSA host keys, and a temp dir with the three folders.
fn sftp_server() -> (Sshd, tempfile::TempDir) {
    let sshd = Sshd::start_with(true);
    let dir = temp_dir();
    folders(dir.path());
    (sshd, dir)
}

#[tokio::test]
async fn b1_a_host_key_other_than_the_pinned_one_refuses_to_connect() {
    let (sshd, dir) = sftp_server();
    let impostor = sshd::keygen(dir.path(), "impostor", "ed25519");
    let settings = settings_for(&sshd, &impostor.public, dir.path());
    let transport = SftpTransport::new(settings, &sshd.user_key.private).unwrap();
    std::fs::write(dir.path().join("local/f"), b"x").unwrap();
    let err = transport.upload("f.txt", &dir.path().join("local/f")).await.unwrap_err();
    let TransportError::HostKeyMismatch { ref offered, ref expected, .. } = err else {
        panic!("expected a host key mismatch, got {err:?}")
    };
    assert_eq!(offered, &format!("ssh-ed25519 {}", sshd::fingerprint(&sshd.host_key.public_path)), "OpenSSH's own fingerprint");
    assert_eq!(expected, &format!("ssh-ed25519 {}", sshd::fingerprint(&impostor.public_path)));
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains("host key") && text.contains("did not match") && text.contains("SHA256:"), "{text}");
    assert!(names_in(&dir.path().join("outbound")).is_empty(), "nothing was sent");
    assert!(!sshd.log().contains("Accepted publickey"), "no login happened: {}", sshd.log());
}

#[tokio::test]
async fn b1_a_pinned_rsa_host_key_is_used_beside_an_ed25519_one() {
    let (sshd, dir) = sftp_server();
    let rsa = sshd.rsa_host_key.as_ref().unwrap();
    let transport = SftpTransport::new(settings_for(&sshd, &rsa.public, dir.path()), &sshd.user_key.private).unwrap();
    assert_eq!(transport.list_inbound().await.unwrap(), []);
}

#[tokio::test]
async fn b1_a_user_key_the_bank_does_not_know_is_refused() {
    let (sshd, dir) = sftp_server();
    let stranger = sshd::keygen(dir.path(), "stranger", "ed25519");
    let transport = SftpTransport::new(settings_for(&sshd, &sshd.host_key.public, dir.path()), &stranger.private).unwrap();
    let err = transport.list_inbound().await.unwrap_err();
    assert!(matches!(err, TransportError::AuthRefused { .. }), "{err:?}");
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains("authentication refused") && text.contains(&sshd.user), "{text}");
    let secret = String::from_utf8(stranger.private.clone()).unwrap();
    let body: String = secret.lines().filter(|l| !l.starts_with("-----")).collect();
    for shown in [text, format!("{err:?}"), format!("{transport:?}")] {
        assert!(!body.is_empty() && !shown.contains(&body[..40]), "key material shown: {shown}");
    }
}

#[tokio::test]
async fn b1_an_rsa_user_key_authenticates() {
    let (sshd, dir) = sftp_server();
    let rsa_user = sshd::keygen(dir.path(), "user_rsa", "rsa");
    sshd.authorize(&rsa_user.public);
    let transport = SftpTransport::new(settings_for(&sshd, &sshd.host_key.public, dir.path()), &rsa_user.private).unwrap();
    std::fs::write(dir.path().join("local/f"), b"rsa").unwrap();
    transport.upload("rsa.txt", &dir.path().join("local/f")).await.unwrap();
    assert_eq!(std::fs::read(dir.path().join("outbound/rsa.txt")).unwrap(), b"rsa");
}

/// Settings for a port where no SSH server answers properly.
fn settings_without_server(port: u16, connect: Duration) -> SftpSettings {
    SftpSettings {
        host: "127.0.0.1".into(),
        port,
        user: "payrail".into(),
        host_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOVuCDsYg2DGSP2CAxvdAVLPKR3Jwy1YbAIb9ampoSH".into(),
        outbound_dir: "outbound".into(),
        inbound_dir: "inbound".into(),
        timeouts: Timeouts { connect, operation: Duration::from_secs(5) },
    }
}

fn throwaway_identity() -> Vec<u8> {
    let dir = temp_dir();
    sshd::keygen(dir.path(), "id", "ed25519").private
}

#[tokio::test]
async fn b2_a_closed_port_is_unreachable_at_once() {
    // Bound, then closed: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let transport = SftpTransport::new(settings_without_server(port, Duration::from_secs(5)), &throwaway_identity()).unwrap();
    let started = Instant::now();
    let err = transport.list_inbound().await.unwrap_err();
    eprintln!("{err}");
    assert!(matches!(err, TransportError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once, took {:?}", started.elapsed());
}

#[tokio::test]
async fn b2_a_bank_that_never_answers_is_unreachable_within_the_connect_timeout() {
    // Accepts TCP, never says a word (a hung server or a black-holing firewall).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let transport = SftpTransport::new(settings_without_server(port, Duration::from_secs(1)), &throwaway_identity()).unwrap();
    let started = Instant::now();
    let err = transport.upload("x.txt", Path::new("/nonexistent")).await.unwrap_err();
    let took = started.elapsed();
    eprintln!("{err}");
    assert!(matches!(err, TransportError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("connect timeout"), "{err}");
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(4), "took {took:?}");
    drop(silent);
}
