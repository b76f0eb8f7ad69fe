//! A real OpenSSH server for the bank transport tests (issue 20: never a mock): Debian's
//! `openssh-server` (`.ci/run` installs it), started on 127.0.0.1 with its own config, host
//! keys and authorized keys in a temp dir, and killed on drop (also when a test panics).
//!
//! sshd authenticates a real local user: the current one (`id -un`). As root, which is how CI
//! runs, `PermitRootLogin prohibit-password` lets it in by key. Privilege separation needs
//! `/run/sshd`, created here when missing. Ports come from [`PORTS`]; one taken by someone else
//! makes sshd exit at once, and the next port is tried.
#![allow(dead_code)]

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Where Debian puts the server.
pub const SSHD: &str = "/usr/sbin/sshd";
/// Ports the test servers may listen on.
pub const PORTS: Range<u16> = 56600..56700;
/// Prefix of the temp dirs (under /tmp).
pub const TEMP_PREFIX: &str = "i20sftp-";

static NEXT_PORT: AtomicU16 = AtomicU16::new(PORTS.start);

/// A key made with `ssh-keygen`: the private key file's bytes and the public key line.
pub struct KeyPair {
    pub private: Vec<u8>,
    pub public: String,
    pub public_path: PathBuf,
}

/// Makes a key pair of `kind` (`ed25519`, `rsa`) named `name` in `dir`.
pub fn keygen(dir: &Path, name: &str, kind: &str) -> KeyPair {
    let path = dir.join(name);
    let bits: &[&str] = if kind == "rsa" { &["-b", "2048"] } else { &[] };
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", name])
        .args(bits)
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen {kind} failed");
    let public_path = path.with_extension("pub");
    KeyPair {
        private: std::fs::read(&path).unwrap(),
        public: std::fs::read_to_string(&public_path).unwrap().trim().to_owned(),
        public_path,
    }
}

/// OpenSSH's own fingerprint of a public key file: `SHA256:...`.
pub fn fingerprint(public_path: &Path) -> String {
    let out = Command::new("ssh-keygen").args(["-l", "-E", "sha256", "-f"]).arg(public_path).output().expect("ssh-keygen -l runs");
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().nth(1).expect("a fingerprint").to_owned()
}

/// A running sshd; dropping it kills the server and removes its temp dir.
pub struct Sshd {
    pub port: u16,
    /// The server's ed25519 host key.
    pub host_key: KeyPair,
    /// Its RSA host key, when asked for.
    pub rsa_host_key: Option<KeyPair>,
    /// A user key listed in the authorized keys.
    pub user_key: KeyPair,
    pub user: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl Sshd {
    /// A server with an ed25519 host key.
    pub fn start() -> Sshd {
        Self::start_with(false)
    }

    /// A server with an ed25519 host key and, if `rsa_too`, an RSA one beside it.
    pub fn start_with(rsa_too: bool) -> Sshd {
        assert!(Path::new(SSHD).exists(), "{SSHD} is missing: apt-get install openssh-server (.ci/run does)");
        let dir = tempfile::Builder::new().prefix(TEMP_PREFIX).tempdir_in("/tmp").expect("temp dir");
        let host_key = keygen(dir.path(), "host_ed25519", "ed25519");
        let rsa_host_key = rsa_too.then(|| keygen(dir.path(), "host_rsa", "rsa"));
        let user_key = keygen(dir.path(), "user_ed25519", "ed25519");
        std::fs::write(dir.path().join("authorized_keys"), format!("{}\n", user_key.public)).unwrap();
        let _ = std::fs::create_dir_all("/run/sshd");
        let user = current_user();
        for _ in 0..PORTS.len() {
            let port = next_port();
            let config = write_config(dir.path(), port, rsa_host_key.is_some());
            if let Some(child) = launch(&config, dir.path(), port) {
                return Sshd { port, host_key, rsa_host_key, user_key, user, child, dir };
            }
        }
        panic!("no free port for sshd in {PORTS:?}");
    }

    /// The server's temp dir (the folders the tests use live under it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a public key line to the authorized keys (read at each login).
    pub fn authorize(&self, public: &str) {
        let mut file = std::fs::OpenOptions::new().append(true).open(self.dir.path().join("authorized_keys")).unwrap();
        writeln!(file, "{public}").unwrap();
    }

    /// The `[transport]` keys of a connection to this server as its user, logging in with the
    /// private key in `identity`, with its folders `outbound` and `inbound` under `root`.
    pub fn transport_toml(&self, identity: &Path, root: &Path) -> String {
        format!(
            "kind = \"sftp\"\nhost = \"127.0.0.1\"\nport = {}\nuser = \"{}\"\nidentity_file = \"{}\"\nhost_key = \"{}\"\noutbound_dir = \"{}\"\ninbound_dir = \"{}\"",
            self.port,
            self.user,
            identity.display(),
            self.host_key.public.trim(),
            root.join("outbound").display(),
            root.join("inbound").display(),
        )
    }

    /// What sshd logged so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The next port of [`PORTS`] to try, wrapping around.
fn next_port() -> u16 {
    let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
    PORTS.start + (n - PORTS.start) % PORTS.len() as u16
}

fn write_config(dir: &Path, port: u16, rsa_host_key: bool) -> PathBuf {
    let d = dir.display();
    let rsa = if rsa_host_key { format!("HostKey {d}/host_rsa\n") } else { String::new() };
    let config = format!(
        "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_ed25519\n{rsa}AuthorizedKeysFile {d}/authorized_keys\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
         PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nPidFile {d}/sshd.pid\n\
         Subsystem sftp internal-sftp\nLoginGraceTime 30\nMaxStartups 50\n"
    );
    let path = dir.join("sshd_config");
    std::fs::write(&path, config).unwrap();
    path
}

/// Starts sshd on `port` and waits until it says it listens; None if it exited (the port was
/// taken).
fn launch(config: &Path, dir: &Path, port: u16) -> Option<Child> {
    let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
    let mut child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("sshd starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        let said = std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default();
        if said.contains(&format!("Server listening on 127.0.0.1 port {port}")) {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("sshd did not listen on {port} within 20s: {}", std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default());
}
