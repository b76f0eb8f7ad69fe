//! The `sftp` transport (SPEC B1 `kind = "sftp"`): SFTP over SSH with russh and russh-sftp
//! (pure Rust, on tokio), key authentication and the bank's host key pinned.
//!
//! - Host key: the connection pins one OpenSSH public key line (`host_key = "ssh-ed25519
//!   AAAA..."`). Only that key's algorithm is negotiated, and any other key refuses to connect
//!   with [`TransportError::HostKeyMismatch`], naming both SHA-256 fingerprints as OpenSSH shows
//!   them (`SHA256:...`).
//! - Identity: an unencrypted OpenSSH or PEM private key (ed25519, ECDSA or RSA; RSA signs with
//!   SHA-2), given as bytes by the connection layer, which keeps it sealed at rest. It is never
//!   printed: not by `Debug`, not in any error.
//! - One SSH connection per call: each [`Transport`] method connects, works and disconnects, so
//!   a half-dead connection is never reused; a cut-off makes a handful of calls.
//! - Timeouts ([`Timeouts`]): `connect` bounds the TCP connect, SSH handshake, authentication
//!   and the start of the SFTP subsystem together (running out is
//!   [`TransportError::Unreachable`]); `operation` bounds each SFTP request and each chunk of a
//!   transfer, so a large file has no overall limit but a stall is cut after `operation`
//!   ([`TransportError::Timeout`]). SSH keepalives every [`KEEPALIVE`] notice a dead peer.
//! - The final rename is SFTP's plain `rename`, which OpenSSH refuses when the target exists (it
//!   links, then unlinks), so nothing is overwritten even by a race; servers that overwrite on
//!   rename are still safe under the module's one-uploader rule, since the name is checked first.
//! - A write that fails with SFTP's generic failure is reported as [`TransportError::RemoteFull`]
//!   when the server's `statvfs@openssh.com` shows (almost) no space left.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use russh::client::{self, AuthResult, Handle};
use russh::keys::{Algorithm, HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh_sftp::client::SftpSession;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::{OpenFlags, StatusCode};
use tokio::net::TcpStream;

use super::{
    CHUNK, CopyError, Digest, MAX_ASIDE_SUFFIX, OutboundFolder, Published, RemoteFile, Result, Transport, TransportError, Uploaded,
    aside_name, check_name, copy_hashing, hash_reader, is_listed, local_error, upload_via,
};
use crate::base::private_fs;

/// Interval of SSH keepalives; three unanswered ones close the connection.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Bounds on waiting for the bank (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect + SSH handshake + authentication + SFTP start. Default 15 s.
    pub connect: Duration,
    /// Each SFTP request, and each chunk of a transfer. Default 30 s; whole seconds (at least 1).
    pub operation: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: Duration::from_secs(15), operation: Duration::from_secs(30) }
    }
}

/// Where and as whom to connect (SPEC B1 `[transport]`), without the identity key.
#[derive(Debug, Clone)]
pub struct SftpSettings {
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The pinned host key, as an OpenSSH public key line (`ssh-ed25519 AAAA... [comment]`).
    pub host_key: String,
    /// Folders on the server, relative to the login folder unless absolute.
    pub outbound_dir: String,
    pub inbound_dir: String,
    pub timeouts: Timeouts,
}

/// A bank's SFTP server.
pub struct SftpTransport {
    settings: SftpSettings,
    host_key: PublicKey,
    identity: Arc<PrivateKey>,
    ssh: Arc<client::Config>,
}

impl fmt::Debug for SftpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SftpTransport")
            .field("settings", &self.settings)
            .field("identity", &format_args!("<{} key, withheld>", self.identity.algorithm()))
            .finish()
    }
}

impl SftpTransport {
    /// Checks the settings and reads the identity key (the content of `identity_file`).
    pub fn new(settings: SftpSettings, identity_key: &[u8]) -> Result<Self> {
        let host_key = PublicKey::from_openssh(settings.host_key.trim())
            .map_err(|_| TransportError::InvalidConfig("host_key is not an OpenSSH public key line (\"ssh-ed25519 AAAA...\")".into()))?;
        let identity = Arc::new(read_identity(identity_key)?);
        let ssh = Arc::new(ssh_config(&host_key));
        Ok(SftpTransport { settings, host_key, identity, ssh })
    }

    /// `host:port`, for messages.
    fn address(&self) -> String {
        format!("{}:{}", self.settings.host, self.settings.port)
    }

    /// A logged-in SFTP session, within the connect timeout.
    async fn connect(&self) -> Result<Session> {
        let limit = self.settings.timeouts.connect;
        match tokio::time::timeout(limit, self.open_session()).await {
            Ok(session) => session,
            Err(_) => Err(TransportError::Unreachable {
                address: self.address(),
                reason: format!("no SFTP session within the connect timeout ({}s)", limit.as_secs_f32()),
            }),
        }
    }

    async fn open_session(&self) -> Result<Session> {
        let unreachable = |e: io::Error| TransportError::Unreachable { address: self.address(), reason: e.to_string() };
        let tcp = TcpStream::connect((self.settings.host.as_str(), self.settings.port)).await.map_err(unreachable)?;
        let pinned = PinnedHostKey { expected: self.host_key.clone() };
        let mut handle = client::connect_stream(self.ssh.clone(), tcp, pinned).await.map_err(|e| self.handshake_error(e))?;
        self.authenticate(&mut handle).await?;
        let sftp = self.start_sftp(&handle).await?;
        let operation = self.settings.timeouts.operation;
        sftp.set_timeout(operation.as_secs().max(1));
        Ok(Session { sftp, handle, operation, outbound: self.settings.outbound_dir.clone(), inbound: self.settings.inbound_dir.clone() })
    }

    async fn authenticate(&self, handle: &mut Handle<PinnedHostKey>) -> Result<()> {
        let hash = match self.identity.algorithm() {
            // `None` means the server did not say; SHA-2 is what current servers accept.
            Algorithm::Rsa { .. } => {
                handle.best_supported_rsa_hash().await.map_err(|e| self.ssh_error(e))?.unwrap_or(Some(HashAlg::Sha256))
            }
            _ => None,
        };
        let key = PrivateKeyWithHashAlg::new(self.identity.clone(), hash);
        match handle.authenticate_publickey(self.settings.user.as_str(), key).await {
            Ok(AuthResult::Success) => Ok(()),
            Ok(AuthResult::Failure { .. }) => {
                Err(TransportError::AuthRefused { user: self.settings.user.clone(), address: self.address() })
            }
            Err(e) => Err(self.ssh_error(e)),
        }
    }

    async fn start_sftp(&self, handle: &Handle<PinnedHostKey>) -> Result<SftpSession> {
        let channel = handle.channel_open_session().await.map_err(|e| self.ssh_error(e))?;
        channel.request_subsystem(true, "sftp").await.map_err(|e| self.ssh_error(e))?;
        SftpSession::new(channel.into_stream())
            .await
            .map_err(|e| TransportError::Other(format!("{}: the SFTP subsystem did not start: {e}", self.address())))
    }

    fn handshake_error(&self, e: HandshakeError) -> TransportError {
        let expected = describe(&self.host_key);
        match e {
            HandshakeError::Mismatch { offered } => TransportError::HostKeyMismatch { address: self.address(), offered, expected },
            HandshakeError::Ssh(russh::Error::NoCommonAlgo { kind: russh::AlgorithmKind::Key, theirs, .. }) => {
                let offered = format!("no {} key (it has: {})", self.host_key.algorithm(), theirs.join(", "));
                TransportError::HostKeyMismatch { address: self.address(), offered, expected }
            }
            HandshakeError::Ssh(e) => self.ssh_error(e),
        }
    }

    /// An SSH-level error: a lost or refused connection is "unreachable", the rest "other".
    fn ssh_error(&self, e: russh::Error) -> TransportError {
        use russh::Error as E;
        match e {
            E::IO(_) | E::HUP | E::Disconnect | E::ConnectionTimeout | E::KeepaliveTimeout | E::SendError | E::RecvError => {
                TransportError::Unreachable { address: self.address(), reason: e.to_string() }
            }
            e => TransportError::Other(format!("SSH with {}: {e}", self.address())),
        }
    }
}

/// Reads the identity key without ever echoing it.
fn read_identity(bytes: &[u8]) -> Result<PrivateKey> {
    let unreadable = || TransportError::InvalidConfig("the identity key could not be read (expected an OpenSSH or PEM private key)".into());
    let text = std::str::from_utf8(bytes).map_err(|_| unreadable())?;
    match russh::keys::decode_secret_key(text, None) {
        Ok(key) => Ok(key),
        Err(russh::keys::Error::KeyIsEncrypted) => {
            Err(TransportError::InvalidConfig("the identity key is encrypted; give it without a passphrase (it is sealed at rest)".into()))
        }
        Err(_) => Err(unreadable()),
    }
}

/// Negotiates only the pinned key's algorithm, so a server with several host keys shows the
/// pinned one (RSA: with SHA-2 signatures).
fn ssh_config(host_key: &PublicKey) -> client::Config {
    let algorithms = match host_key.algorithm() {
        Algorithm::Rsa { .. } => vec![Algorithm::Rsa { hash: Some(HashAlg::Sha512) }, Algorithm::Rsa { hash: Some(HashAlg::Sha256) }],
        other => vec![other],
    };
    let preferred = russh::Preferred { key: Cow::Owned(algorithms), ..Default::default() };
    client::Config { preferred, keepalive_interval: Some(KEEPALIVE), keepalive_max: 3, nodelay: true, ..Default::default() }
}

/// A key as OpenSSH shows it: `ssh-ed25519 SHA256:...`.
pub fn describe(key: &PublicKey) -> String {
    format!("{} {}", key.algorithm(), key.fingerprint(HashAlg::Sha256))
}

/// The russh handler: accepts exactly the pinned host key.
struct PinnedHostKey {
    expected: PublicKey,
}

#[derive(Debug)]
enum HandshakeError {
    Ssh(russh::Error),
    Mismatch { offered: String },
}

impl From<russh::Error> for HandshakeError {
    fn from(e: russh::Error) -> Self {
        HandshakeError::Ssh(e)
    }
}

impl client::Handler for PinnedHostKey {
    type Error = HandshakeError;

    async fn check_server_key(&mut self, offered: &PublicKeyOrCertificate) -> Result<bool, HandshakeError> {
        let key = offered.public_key();
        if key.key_data() == self.expected.key_data() { Ok(true) } else { Err(HandshakeError::Mismatch { offered: describe(&key) }) }
    }
}

/// One logged-in SFTP session, closed after each call.
struct Session {
    sftp: SftpSession,
    handle: Handle<PinnedHostKey>,
    operation: Duration,
    outbound: String,
    inbound: String,
}

/// `dir/name` on the server (`name` alone when `dir` is empty).
fn join(dir: &str, name: &str) -> String {
    match dir.trim_end_matches('/') {
        "" if dir.is_empty() => name.to_owned(),
        trimmed => format!("{trimmed}/{name}"),
    }
}

impl Session {
    async fn close(self) {
        let _ = self.sftp.close().await;
        let _ = self.handle.disconnect(russh::Disconnect::ByApplication, "", "en").await;
    }

    fn timeout(&self, during: String) -> TransportError {
        TransportError::Timeout { during, after: self.operation }
    }

    /// An SFTP request's error about `path`.
    fn sftp_error(&self, path: &str, e: SftpError) -> TransportError {
        match e {
            SftpError::Status(status) => status_error(path, status.status_code, &status.error_message),
            SftpError::Timeout => self.timeout(format!("working on {path}")),
            e => TransportError::Other(format!("{path}: {e}")),
        }
    }

    /// A streamed read or write's error about `path` (russh-sftp keeps only the status text).
    fn stream_error(&self, path: &str, e: io::Error) -> TransportError {
        if e.kind() == io::ErrorKind::TimedOut {
            return self.timeout(format!("transferring {path}"));
        }
        match e.to_string().as_str() {
            "Permission denied" => TransportError::PermissionDenied { path: path.to_owned() },
            "No such file" => TransportError::NotFound { path: path.to_owned() },
            text => TransportError::Other(format!("{path}: {text}")),
        }
    }

    /// Whether the file system holding `dir` has (almost) no space or inodes left.
    async fn is_full(&self, dir: &str) -> bool {
        let dir = if dir.is_empty() { "." } else { dir };
        match tokio::time::timeout(self.operation, self.sftp.fs_info(dir)).await {
            Ok(Ok(Some(vfs))) => {
                vfs.blocks_avail.saturating_mul(vfs.fragment_size) < CHUNK as u64 || (vfs.inodes > 0 && vfs.inodes_avail == 0)
            }
            _ => false,
        }
    }

    /// Why writing `path` failed, checking for a full disk behind SFTP's generic failure.
    async fn write_failure(&self, path: &str, local: &Path, e: CopyError) -> TransportError {
        match e {
            CopyError::Read(e) => local_error(local, e),
            CopyError::Stalled => self.timeout(format!("writing {path}")),
            CopyError::Write(e) => match self.stream_error(path, e) {
                TransportError::Other(_) if self.is_full(&self.outbound).await => TransportError::RemoteFull { path: path.to_owned() },
                other => other,
            },
        }
    }

    async fn list_inbound(&self) -> Result<Vec<RemoteFile>> {
        let dir = if self.inbound.is_empty() { "." } else { self.inbound.as_str() };
        let entries = self.sftp.read_dir(dir).await.map_err(|e| self.sftp_error(dir, e))?;
        let mut files: Vec<RemoteFile> = entries
            .filter(|entry| is_listed(&entry.file_name(), entry.file_type().is_file()))
            .map(|entry| RemoteFile { name: entry.file_name(), size: entry.metadata().len() })
            .collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    async fn fetch(&self, name: &str, local: &Path) -> Result<Digest> {
        let path = join(&self.inbound, name);
        let mut from = self.sftp.open(path.as_str()).await.map_err(|e| self.sftp_error(&path, e))?;
        let mut to = tokio::fs::OpenOptions::from(private_fs::create_options()).open(local).await.map_err(|e| local_error(local, e))?;
        let copied = copy_hashing(&mut from, &mut to, Some(self.operation)).await;
        let stalled = self.timeout(format!("reading {path}"));
        copied.map_err(|e| e.classify(|e| self.stream_error(&path, e), |e| local_error(local, e), stalled))
    }

    /// Whether anything (file or folder) is at `path`.
    async fn exists(&self, path: &str) -> Result<bool> {
        match self.sftp.symlink_metadata(path).await {
            Ok(_) => Ok(true),
            Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => Ok(false),
            Err(e) => Err(self.sftp_error(path, e)),
        }
    }

    async fn move_aside(&self, name: &str, folder: &str) -> Result<String> {
        let from = join(&self.inbound, name);
        let aside = join(&self.inbound, folder);
        if !self.exists(&aside).await? {
            self.sftp.create_dir(aside.as_str()).await.map_err(|e| self.sftp_error(&aside, e))?;
        }
        for n in 0..=MAX_ASIDE_SUFFIX {
            let target = aside_name(name, n);
            let to = join(&aside, &target);
            if self.exists(&to).await? {
                continue;
            }
            match self.sftp.rename(from.as_str(), to.as_str()).await {
                Ok(()) => return Ok(target),
                Err(_) if self.exists(&to).await? => continue,
                Err(e) => return Err(self.sftp_error(&from, e)),
            }
        }
        Err(TransportError::Other(format!("{aside}: no free name for {name} (up to .{MAX_ASIDE_SUFFIX})")))
    }

    async fn remove_at(&self, path: &str) -> Result<()> {
        match self.sftp.remove_file(path).await {
            Ok(()) => Ok(()),
            Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => Ok(()),
            Err(e) => Err(self.sftp_error(path, e)),
        }
    }
}

/// An SFTP status about `path`, classified.
fn status_error(path: &str, code: StatusCode, message: &str) -> TransportError {
    let path = path.to_owned();
    match code {
        StatusCode::NoSuchFile => TransportError::NotFound { path },
        StatusCode::PermissionDenied => TransportError::PermissionDenied { path },
        _ => TransportError::Other(format!("{path}: {message}")),
    }
}

#[async_trait]
impl OutboundFolder for Session {
    async fn size_of(&self, name: &str) -> Result<Option<u64>> {
        let path = join(&self.outbound, name);
        match self.sftp.metadata(path.as_str()).await {
            Ok(meta) if meta.file_type().is_file() => Ok(Some(meta.len())),
            Ok(_) => Err(TransportError::Other(format!("{path} exists and is not a regular file"))),
            Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => Ok(None),
            Err(e) => Err(self.sftp_error(&path, e)),
        }
    }

    async fn digest_of(&self, name: &str) -> Result<Digest> {
        let path = join(&self.outbound, name);
        let mut file = self.sftp.open(path.as_str()).await.map_err(|e| self.sftp_error(&path, e))?;
        let hashed = hash_reader(&mut file, Some(self.operation)).await;
        let stalled = self.timeout(format!("reading {path}"));
        hashed.map_err(|e| e.classify(|e| self.stream_error(&path, e), |e| self.stream_error(&path, e), stalled))
    }

    async fn write_part(&self, part: &str, local: &Path) -> Result<Digest> {
        let path = join(&self.outbound, part);
        let mut from = tokio::fs::File::open(local).await.map_err(|e| local_error(local, e))?;
        let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE;
        let mut to = self.sftp.open_with_flags(path.as_str(), flags).await.map_err(|e| self.sftp_error(&path, e))?;
        let digest = match copy_hashing(&mut from, &mut to, Some(self.operation)).await {
            Ok(digest) => digest,
            Err(e) => return Err(self.write_failure(&path, local, e).await),
        };
        // fsync@openssh.com when the server offers it (OpenSSH does); a no-op otherwise.
        to.sync_all().await.map_err(|e| self.sftp_error(&path, e))?;
        match tokio::time::timeout(self.operation, to.close()).await {
            Ok(Ok(())) => Ok(digest),
            Ok(Err(e)) => Err(self.write_failure(&path, local, CopyError::Write(e)).await),
            Err(_) => Err(self.timeout(format!("closing {path}"))),
        }
    }

    async fn publish(&self, part: &str, name: &str) -> Result<Published> {
        let (from, to) = (join(&self.outbound, part), join(&self.outbound, name));
        match self.sftp.rename(from.as_str(), to.as_str()).await {
            Ok(()) => Ok(Published::Done),
            Err(_) if self.size_of(name).await?.is_some() => Ok(Published::NameTaken),
            Err(e) => Err(self.sftp_error(&from, e)),
        }
    }

    async fn remove(&self, name: &str) -> Result<()> {
        self.remove_at(&join(&self.outbound, name)).await
    }
}

#[async_trait]
impl Transport for SftpTransport {
    async fn upload(&self, name: &str, local: &Path) -> Result<Uploaded> {
        check_name(name)?;
        let session = self.connect().await?;
        let uploaded = upload_via(&session, name, local).await;
        session.close().await;
        uploaded
    }

    async fn list_inbound(&self) -> Result<Vec<RemoteFile>> {
        let session = self.connect().await?;
        let listed = session.list_inbound().await;
        session.close().await;
        listed
    }

    async fn fetch(&self, name: &str, local: &Path) -> Result<Digest> {
        check_name(name)?;
        let session = self.connect().await?;
        let fetched = session.fetch(name, local).await;
        session.close().await;
        fetched
    }

    async fn move_aside(&self, name: &str, folder: &str) -> Result<String> {
        check_name(name)?;
        check_name(folder)?;
        let session = self.connect().await?;
        let moved = session.move_aside(name, folder).await;
        session.close().await;
        moved
    }

    async fn remove(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let session = self.connect().await?;
        let removed = session.remove_at(&join(&session.inbound, name)).await;
        session.close().await;
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b1_paths_join_relative_and_absolute_folders() {
        assert_eq!(join("", "a.txt"), "a.txt");
        assert_eq!(join("outbound", "a.txt"), "outbound/a.txt");
        assert_eq!(join("/srv/bank/out/", "a.txt"), "/srv/bank/out/a.txt");
        assert_eq!(join("/", "a.txt"), "/a.txt");
    }

    #[test]
    fn b1_bad_keys_are_refused_without_echoing_them() {
        let settings = SftpSettings {
            host: "127.0.0.1".into(),
            port: 22,
            user: "payrail".into(),
            host_key: "ssh-ed25519 not-base64".into(),
            outbound_dir: "outbound".into(),
            inbound_dir: "inbound".into(),
            timeouts: Timeouts::default(),
        };
        let secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END OPENSSH PRIVATE KEY-----\n";
        let err = SftpTransport::new(settings.clone(), secret).unwrap_err().to_string();
        assert!(err.contains("host_key"), "{err}");
        let good_host = SftpSettings {
            host_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOVuCDsYg2DGSP2CAxvdAVLPKR3Jwy1YbAIb9ampoSH".into(),
            ..settings
        };
        let err = SftpTransport::new(good_host, secret).unwrap_err().to_string();
        assert!(err.contains("identity key") && !err.contains("c2VjcmV0"), "{err}");
    }

    #[test]
    fn b5_statuses_are_classified() {
        assert!(matches!(status_error("x", StatusCode::NoSuchFile, ""), TransportError::NotFound { .. }));
        assert!(matches!(status_error("x", StatusCode::PermissionDenied, ""), TransportError::PermissionDenied { .. }));
        assert!(matches!(status_error("x", StatusCode::Failure, "Failure"), TransportError::Other(_)));
    }
}
