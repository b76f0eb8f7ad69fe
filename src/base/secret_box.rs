//! Secrets at rest (SPEC S4): values sealed with AES-256-GCM under a master key ring.
//!
//! The ring is a file (`--master-key-file`, default `<data-dir>/master.key`) of 256-bit keys,
//! one base64 line each, newest first; `#` lines are comments. Sealing always uses the newest
//! key; opening uses the key the value names, so values sealed before a rotation still open
//! until `payrail master-key rewrap` re-seals them and the old line is retired.
//!
//! A sealed value is `MAGIC | version | key id (4) | nonce (12) | ciphertext | tag (16)`. The
//! associated data is the header plus a `purpose` naming where the value belongs (the endpoint
//! id, the setting's name, the idempotency key), so a sealed value copied to another row fails
//! to open. Nonces are random (96 bits): far below the 2^32 seals per key where that matters.
//! The text form, for JSON documents, is [`TEXT_PREFIX`] and the bytes in base64url.
//!
//! A running server re-reads the file when it changed since it was loaded (checked before each
//! seal, and when a value names a key it does not hold), so a rotation needs no restart.
//! This module knows nothing of SQL or HTTP: the store keeps the bytes, the domain decides what
//! is sealed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::{Digest, Sha256};

use super::private_fs;

/// First bytes of every sealed value: a NUL, so no JSON body or plain secret starts with it.
pub const MAGIC: &[u8; 4] = b"\0prs";
const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const HEADER_LEN: usize = MAGIC.len() + 1 + KEY_ID_LEN;
const TAG_LEN: usize = 16;
/// Length of a master key, in bytes (256 bits).
pub const KEY_LEN: usize = 32;
/// Prefix of the text form of a sealed value.
pub const TEXT_PREFIX: &str = "sealed:";
/// Name of the generated key file in the data directory.
pub const DEFAULT_FILE_NAME: &str = "master.key";
/// Most keys a ring holds (a rotation adds one; retiring removes the old ones).
const RING_KEYS_MAX: usize = 16;

/// What every [`SecretError::UnknownKey`] says, however far up the chain of errors it travels
/// as text (a store wraps it into its own error).
pub const UNKNOWN_KEY_SAYS: &str = "which the master key file does not hold";

/// Why a value could not be sealed or opened, or a key file not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the value is not sealed")]
    NotSealed,
    #[error("the value is sealed under master key {0}, which the master key file does not hold (is this the right --master-key-file?)")]
    UnknownKey(String),
    #[error("the value does not open under master key {0}: a wrong key, or the value was altered or moved")]
    Rejected(String),
    #[error("{0}")]
    KeyFile(String),
}

/// One master key and its id (a hash of it: shown in messages, never the key).
struct MasterKey {
    id: [u8; KEY_ID_LEN],
    raw: [u8; KEY_LEN],
    aead: LessSafeKey,
}

impl MasterKey {
    fn new(raw: [u8; KEY_LEN]) -> Self {
        let digest = Sha256::new().chain_update(b"payrail master key id\0").chain_update(raw).finalize();
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        let aead = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &raw).expect("a 32-byte AES-256 key"));
        MasterKey { id, raw, aead }
    }
}

fn hex_id(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The keys loaded, and the file's state when they were (to notice a rotation).
struct Ring {
    keys: Vec<MasterKey>,
    stamp: Option<(SystemTime, u64)>,
}

/// The master key ring: seals and opens secrets. Shared by the store (the key pepper), the
/// domain (webhook secrets) and the commit machinery (stored replies that carry a secret).
pub struct SecretBox {
    ring: RwLock<Arc<Ring>>,
    path: Option<PathBuf>,
}

impl fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretBox").field("path", &self.path).field("newest", &self.newest_id()).finish_non_exhaustive()
    }
}

impl SecretBox {
    /// A box holding these keys, newest first (tests and tools; no file behind it).
    pub fn from_keys(keys: &[[u8; KEY_LEN]]) -> Self {
        assert!(!keys.is_empty(), "a ring holds at least one key");
        let ring = Ring { keys: keys.iter().map(|k| MasterKey::new(*k)).collect(), stamp: None };
        SecretBox { ring: RwLock::new(Arc::new(ring)), path: None }
    }

    /// Loads the ring from `path`, refusing a file that group or others may read or write.
    pub fn load(path: &Path) -> Result<Self, SecretError> {
        let ring = read_ring(path)?;
        Ok(SecretBox { ring: RwLock::new(Arc::new(ring)), path: Some(path.to_owned()) })
    }

    /// The ring named by `--master-key-file`, or `<data_dir>/master.key`, created with one
    /// fresh key if it does not exist yet (the second value says whether this call created it).
    pub fn load_or_create(explicit: Option<&Path>, data_dir: &Path) -> Result<(Self, bool), SecretError> {
        if let Some(path) = explicit {
            return Ok((Self::load(path)?, false));
        }
        let path = data_dir.join(DEFAULT_FILE_NAME);
        if path.exists() {
            return Ok((Self::load(&path)?, false));
        }
        private_fs::ensure_private_dir(data_dir).map_err(|e| key_file_error(&path, &e))?;
        let created = match write_ring(&path, &[generate_key()], true) {
            Ok(()) => true,
            // Another process made it first: use theirs.
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(err) => return Err(key_file_error(&path, &err)),
        };
        Ok((Self::load(&path)?, created))
    }

    /// Writes a new key file holding one fresh key (0600); refuses to overwrite a file. Returns
    /// the key's id (the key itself is never shown).
    pub fn generate_file(path: &Path) -> Result<String, SecretError> {
        let key = generate_key();
        write_ring(path, &[key], true).map_err(|e| key_file_error(path, &e))?;
        Ok(hex_id(&MasterKey::new(key).id))
    }

    /// The file the ring was read from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn current(&self) -> Arc<Ring> {
        self.ring.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Id (hex) of the key new values are sealed under.
    pub fn newest_id(&self) -> String {
        hex_id(&self.current().keys[0].id)
    }

    /// Ids (hex) of every key of the ring, newest first.
    pub fn key_ids(&self) -> Vec<String> {
        self.current().keys.iter().map(|k| hex_id(&k.id)).collect()
    }

    /// Re-reads the file if it changed since it was loaded. A file that became unreadable or
    /// invalid keeps the ring in memory (logged): a server never loses keys it already had.
    pub fn refresh(&self) {
        let Some(path) = &self.path else { return };
        let stamp = file_stamp(path);
        if stamp.is_none() || stamp == self.current().stamp {
            return;
        }
        match read_ring(path) {
            Ok(ring) => {
                tracing::info!(path = %path.display(), newest = %hex_id(&ring.keys[0].id), "master key file changed: reloaded");
                *self.ring.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(ring);
            }
            Err(err) => tracing::error!(%err, "master key file changed but cannot be used; keeping the keys loaded"),
        }
    }

    /// Seals `plain` for `purpose` under the newest key.
    pub fn seal(&self, plain: &[u8], purpose: &str) -> Vec<u8> {
        self.refresh();
        seal_with(&self.current().keys[0], plain, purpose)
    }

    /// Opens a value sealed for `purpose` by any key of the ring.
    pub fn open(&self, sealed: &[u8], purpose: &str) -> Result<Vec<u8>, SecretError> {
        let id = sealed_key_id(sealed)?;
        match self.open_with_ring(&self.current(), sealed, id, purpose) {
            Err(SecretError::UnknownKey(_)) => {
                // Perhaps sealed by an instance that already uses a newer ring.
                self.refresh();
                self.open_with_ring(&self.current(), sealed, id, purpose)
            }
            other => other,
        }
    }

    fn open_with_ring(&self, ring: &Ring, sealed: &[u8], id: [u8; KEY_ID_LEN], purpose: &str) -> Result<Vec<u8>, SecretError> {
        let key = ring.keys.iter().find(|k| k.id == id).ok_or_else(|| SecretError::UnknownKey(hex_id(&id)))?;
        open_with(key, sealed, purpose)
    }

    /// Whether `sealed` is sealed under the newest key (else `rewrap` re-seals it).
    pub fn is_current(&self, sealed: &[u8]) -> bool {
        sealed_key_id(sealed).is_ok_and(|id| id == self.current().keys[0].id)
    }

    /// The text form of [`seal`](Self::seal), for JSON documents.
    pub fn seal_text(&self, plain: &str, purpose: &str) -> String {
        format!("{TEXT_PREFIX}{}", URL_SAFE_NO_PAD.encode(self.seal(plain.as_bytes(), purpose)))
    }

    /// Opens the text form of a sealed string.
    pub fn open_text(&self, sealed: &str, purpose: &str) -> Result<String, SecretError> {
        let bytes = decode_text(sealed)?;
        let plain = self.open(&bytes, purpose)?;
        String::from_utf8(plain).map_err(|_| SecretError::Rejected(self.newest_id()))
    }

    /// Whether a text value is sealed under the newest key.
    pub fn is_current_text(&self, sealed: &str) -> bool {
        decode_text(sealed).is_ok_and(|bytes| self.is_current(&bytes))
    }

    /// Writes a new ring to the file: a fresh key first, then the keys held now (`rotate`).
    /// Returns the new key's id.
    pub fn rotate(&self) -> Result<String, SecretError> {
        let path = self.path.as_ref().ok_or_else(|| SecretError::KeyFile("this key ring has no file".into()))?;
        let ring = read_ring(path)?;
        if ring.keys.len() >= RING_KEYS_MAX {
            return Err(SecretError::KeyFile(format!("{} holds {RING_KEYS_MAX} keys already: retire the old ones first", path.display())));
        }
        let fresh = generate_key();
        let mut keys = vec![fresh];
        keys.extend(ring.keys.iter().map(|k| k.raw));
        write_ring(path, &keys, false).map_err(|e| key_file_error(path, &e))?;
        self.refresh();
        Ok(hex_id(&MasterKey::new(fresh).id))
    }

    /// Writes the ring back with the newest key only (`retire`); returns the ids dropped.
    pub fn retire_old(&self) -> Result<Vec<String>, SecretError> {
        let path = self.path.as_ref().ok_or_else(|| SecretError::KeyFile("this key ring has no file".into()))?;
        let ring = read_ring(path)?;
        let dropped = ring.keys[1..].iter().map(|k| hex_id(&k.id)).collect();
        write_ring(path, &[ring.keys[0].raw], false).map_err(|e| key_file_error(path, &e))?;
        self.refresh();
        Ok(dropped)
    }
}

/// The `settings` row holding the API key pepper, and the purpose it is sealed for.
pub const PEPPER_SETTING: &str = "key_pepper";
pub const PEPPER_PURPOSE: &str = "settings:key_pepper";

/// What a sealed stored reply is bound to: the idempotency key's scope and the key, so a sealed
/// body moved to another key's row does not open.
pub fn reply_purpose(api_key_id: &str, key: &str) -> String {
    format!("idempotency_reply:{api_key_id}:{key}")
}

/// The API key pepper from its stored value, and, when an older release stored it plain, the
/// sealed value to store in its place.
pub fn open_pepper(secrets: &SecretBox, stored: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), SecretError> {
    if is_sealed(stored) {
        let pepper =
            secrets.open(stored, PEPPER_PURPOSE).map_err(|e| SecretError::KeyFile(format!("the API key pepper in the database: {e}")))?;
        return Ok((pepper, None));
    }
    Ok((stored.to_vec(), Some(secrets.seal(stored, PEPPER_PURPOSE))))
}

/// Whether a stored value is sealed (cheap: a prefix compare).
pub fn is_sealed(value: &[u8]) -> bool {
    value.starts_with(MAGIC)
}

/// Whether a stored text value is in sealed text form.
pub fn is_sealed_text(value: &str) -> bool {
    value.starts_with(TEXT_PREFIX)
}

fn decode_text(sealed: &str) -> Result<Vec<u8>, SecretError> {
    let body = sealed.strip_prefix(TEXT_PREFIX).ok_or(SecretError::NotSealed)?;
    URL_SAFE_NO_PAD.decode(body).map_err(|_| SecretError::NotSealed)
}

fn sealed_key_id(sealed: &[u8]) -> Result<[u8; KEY_ID_LEN], SecretError> {
    if !is_sealed(sealed) || sealed.len() < HEADER_LEN + NONCE_LEN + TAG_LEN || sealed[MAGIC.len()] != VERSION {
        return Err(SecretError::NotSealed);
    }
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&sealed[MAGIC.len() + 1..HEADER_LEN]);
    Ok(id)
}

/// The associated data: the header (version and key id) and where the value belongs.
fn aad(header: &[u8], purpose: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(header.len() + purpose.len());
    aad.extend_from_slice(header);
    aad.extend_from_slice(purpose.as_bytes());
    aad
}

fn seal_with(key: &MasterKey, plain: &[u8], purpose: &str) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
    let mut out = Vec::with_capacity(HEADER_LEN + NONCE_LEN + plain.len() + TAG_LEN);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&key.id);
    let aad = aad(&out, purpose);
    out.extend_from_slice(&nonce);
    let mut in_out = plain.to_vec();
    key.aead
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&aad[..]), &mut in_out)
        .expect("AES-GCM seals any value shorter than 64 GiB");
    out.extend_from_slice(&in_out);
    out
}

fn open_with(key: &MasterKey, sealed: &[u8], purpose: &str) -> Result<Vec<u8>, SecretError> {
    let (header, rest) = sealed.split_at(HEADER_LEN);
    let (nonce, body) = rest.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::NotSealed)?;
    let mut in_out = body.to_vec();
    let plain = key
        .aead
        .open_in_place(nonce, Aad::from(&aad(header, purpose)[..]), &mut in_out)
        .map_err(|_| SecretError::Rejected(hex_id(&key.id)))?;
    Ok(plain.to_vec())
}

/// 256 bits from the operating system's generator.
pub fn generate_key() -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key).expect("the operating system's random generator");
    key
}

fn key_file_error(path: &Path, err: &dyn fmt::Display) -> SecretError {
    SecretError::KeyFile(format!("master key file {}: {err}", path.display()))
}

fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Reads and checks a key file: owner-only permissions, 1 to 16 keys of exactly 256 bits.
fn read_ring(path: &Path) -> Result<Ring, SecretError> {
    let stamp = file_stamp(path);
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => key_file_error(
            path,
            &format!(
                "no such file; make one with `payrail master-key generate {}` (or leave --master-key-file out to keep the key in the data directory)",
                path.display()
            ),
        ),
        _ => key_file_error(path, &e),
    })?;
    if !meta.is_file() {
        return Err(key_file_error(path, &"not a regular file"));
    }
    if let Some(mode) = private_fs::loose_mode(&meta) {
        return Err(SecretError::KeyFile(format!(
            "master key file {} may be read or written by group or others (mode {mode:o}); refusing to use it: run `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| key_file_error(path, &e))?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let raw: [u8; KEY_LEN] = STANDARD.decode(line).ok().and_then(|k| k.try_into().ok()).ok_or_else(|| {
            SecretError::KeyFile(format!(
                "master key file {}, line {}: not a 256-bit key (44 base64 characters; `payrail master-key rotate` makes one)",
                path.display(),
                n + 1
            ))
        })?;
        keys.push(MasterKey::new(raw));
    }
    if keys.is_empty() || keys.len() > RING_KEYS_MAX {
        return Err(key_file_error(path, &format!("holds {} keys; it must hold 1 to {RING_KEYS_MAX}, newest first", keys.len())));
    }
    Ok(Ring { keys, stamp })
}

/// Writes a ring file, owner-only, atomically (a temporary file renamed over it). With
/// `create_new`, fails with `AlreadyExists` if the file is there.
fn write_ring(path: &Path, keys: &[[u8; KEY_LEN]], create_new: bool) -> std::io::Result<()> {
    let mut text = String::from("# Payrail master key ring: 256-bit keys in base64, newest first. Keep this file secret.\n");
    for key in keys {
        text.push_str(&STANDARD.encode(key));
        text.push('\n');
    }
    if create_new {
        return private_fs::write_new(path, text.as_bytes());
    }
    private_fs::replace(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(keys: &[[u8; KEY_LEN]]) -> SecretBox {
        SecretBox::from_keys(keys)
    }

    #[test]
    fn an_unknown_key_says_what_callers_look_for() {
        assert!(SecretError::UnknownKey("1a2b3c4d".into()).to_string().contains(UNKNOWN_KEY_SAYS));
    }

    #[test]
    fn s4_seal_then_open_and_no_plain_text_in_the_sealed_bytes() {
        let b = boxed(&[generate_key()]);
        let sealed = b.seal(b"whsec_topsecret", "webhook_endpoint:a");
        assert!(is_sealed(&sealed));
        assert!(!sealed.windows(9).any(|w| w == b"topsecret"));
        assert_eq!(b.open(&sealed, "webhook_endpoint:a").unwrap(), b"whsec_topsecret");
        let text = b.seal_text("whsec_x", "p");
        assert!(is_sealed_text(&text));
        assert_eq!(b.open_text(&text, "p").unwrap(), "whsec_x");
        assert_ne!(b.seal(b"same", "p"), b.seal(b"same", "p"), "random nonces");
    }

    #[test]
    fn s4_a_value_moved_to_another_row_or_altered_does_not_open() {
        let b = boxed(&[generate_key()]);
        let mut sealed = b.seal(b"secret", "webhook_endpoint:a");
        assert!(matches!(b.open(&sealed, "webhook_endpoint:b"), Err(SecretError::Rejected(_))));
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert!(matches!(b.open(&sealed, "webhook_endpoint:a"), Err(SecretError::Rejected(_))));
        assert_eq!(b.open(b"{\"plain\":1}", "p"), Err(SecretError::NotSealed));
    }

    #[test]
    fn s4_another_master_key_is_named_not_guessed() {
        let sealed = boxed(&[generate_key()]).seal(b"secret", "p");
        assert!(matches!(boxed(&[generate_key()]).open(&sealed, "p"), Err(SecretError::UnknownKey(_))));
    }

    #[test]
    fn s4_a_ring_opens_values_of_its_older_keys_and_seals_under_the_newest() {
        let (old, new) = (generate_key(), generate_key());
        let sealed_old = boxed(&[old]).seal(b"secret", "p");
        let ring = boxed(&[new, old]);
        assert_eq!(ring.open(&sealed_old, "p").unwrap(), b"secret");
        assert!(!ring.is_current(&sealed_old));
        assert!(ring.is_current(&ring.seal(b"x", "p")));
    }

    #[cfg(unix)]
    #[test]
    fn s4_key_files_created_private_refused_when_loose_or_malformed_and_rotated() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let (made, created) = SecretBox::load_or_create(None, &data).unwrap();
        assert!(created);
        let path = data.join(DEFAULT_FILE_NAME);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let sealed = made.seal(b"secret", "p");
        let (again, created) = SecretBox::load_or_create(None, &data).unwrap();
        assert!(!created);
        assert_eq!(again.open(&sealed, "p").unwrap(), b"secret");

        let new_id = again.rotate().unwrap();
        assert_eq!(again.newest_id(), new_id);
        assert_eq!(again.open(&sealed, "p").unwrap(), b"secret", "the old key stays in the ring");
        made.refresh();
        assert_eq!(made.newest_id(), new_id, "a running holder picks up the rotated file");
        assert_eq!(again.retire_old().unwrap().len(), 1);
        assert!(matches!(again.open(&sealed, "p"), Err(SecretError::UnknownKey(_))));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = SecretBox::load(&path).unwrap_err().to_string();
        assert!(err.contains("group or others") && err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "c2hvcnQ=\n").unwrap();
        let err = SecretBox::load(&path).unwrap_err().to_string();
        assert!(err.contains("not a 256-bit key"), "{err}");
        assert!(!err.contains("c2hvcnQ"), "a key file's content is never printed");
    }
}
