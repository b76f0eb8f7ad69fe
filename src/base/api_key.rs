//! API keys, organizations and modes (SPEC A1-A5).
//!
//! A secret key is `pr_sandbox_` or `pr_live_` followed by 43 base62 characters (256 random bits).
//! Only `HMAC-SHA256(pepper, key)` is stored; the pepper is a random per-database secret, so a
//! leaked copy of the key table alone is useless. Keys are high-entropy, so a keyed fast hash is
//! enough: a password hash would cost milliseconds on every request for no gain.

use std::fmt;

use hmac::{Hmac, Mac};
use rand::Rng;
use serde::Serialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::time::Timestamp;
use crate::error::{Error, Result};

const SECRET_BODY_LEN: usize = 43;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Longest organization id accepted.
pub const ORG_ID_LEN_MAX: usize = 64;

/// Sandbox or live: every key, and everything made with it, is one or the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Sandbox,
    Live,
}

impl Mode {
    pub fn is_live(self) -> bool {
        self == Mode::Live
    }

    pub fn from_live(live_mode: bool) -> Self {
        if live_mode { Mode::Live } else { Mode::Sandbox }
    }

    pub fn key_prefix(self) -> &'static str {
        match self {
            Mode::Sandbox => "pr_sandbox_",
            Mode::Live => "pr_live_",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "sandbox" | "test" => Ok(Mode::Sandbox),
            "live" => Ok(Mode::Live),
            _ => Err(Error::invalid("mode", "mode must be sandbox or live")),
        }
    }
}

/// The tenant a request acts for: one organization in one mode (SPEC A3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub organization_id: String,
    pub live_mode: bool,
}

/// Checks an organization id given on the command line.
pub fn validate_org_id(org: &str) -> Result<()> {
    let ok = !org.is_empty() && org.len() <= ORG_ID_LEN_MAX && org.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(Error::invalid("org", "organization ids are 1 to 64 characters of A-Z, a-z, 0-9, - and _")) }
}

/// A secret API key. Never printed by `Debug`; only the CLI shows it, once.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(String);

impl SecretKey {
    pub fn generate(mode: Mode) -> Self {
        let mut rng = rand::rng();
        let mut key = String::with_capacity(mode.key_prefix().len() + SECRET_BODY_LEN);
        key.push_str(mode.key_prefix());
        for _ in 0..SECRET_BODY_LEN {
            key.push(char::from(BASE62[rng.random_range(0..BASE62.len())]));
        }
        SecretKey(key)
    }

    /// Accepts only the exact shape of a key, so garbage never reaches the store.
    pub fn parse(text: &str) -> Option<Self> {
        let body = text.strip_prefix(Mode::Sandbox.key_prefix()).or_else(|| text.strip_prefix(Mode::Live.key_prefix()))?;
        let well_formed = body.len() == SECRET_BODY_LEN && body.bytes().all(|b| b.is_ascii_alphanumeric());
        well_formed.then(|| SecretKey(text.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// HMAC-SHA256 of a key under the database's pepper: what is stored and looked up.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    /// Constant-time equality, for the final check after the indexed lookup.
    pub fn matches(&self, other: &KeyHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHash(<redacted>)")
    }
}

/// Hashes keys under the per-database pepper.
#[derive(Clone)]
pub struct KeyHasher {
    /// HMAC keyed with the pepper once: every request hashes its key, and keying costs as much
    /// as the hash itself.
    keyed: Hmac<Sha256>,
}

impl KeyHasher {
    pub fn new(pepper: Vec<u8>) -> Self {
        KeyHasher { keyed: Hmac::<Sha256>::new_from_slice(&pepper).expect("HMAC takes any key length") }
    }

    pub fn hash(&self, key: &SecretKey) -> KeyHash {
        let mut mac = self.keyed.clone();
        mac.update(key.expose().as_bytes());
        KeyHash(mac.finalize().into_bytes().into())
    }
}

/// A 256-bit secret derived from the pepper for one purpose: every instance sharing the database
/// derives the same one without storing anything new, and it reveals nothing of the pepper.
#[derive(Clone)]
pub struct DerivedKey([u8; 32]);

impl DerivedKey {
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for DerivedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DerivedKey(<redacted>)")
    }
}

/// What the list cursor key is derived for (SPEC L6). A new label gives an unrelated key.
pub const LIST_CURSOR_KEY_LABEL: &str = "payrail list cursor v2";

impl KeyHasher {
    /// `HMAC-SHA256(pepper, label)`: a key for `label`'s purpose, never the pepper itself.
    pub fn derive(&self, label: &str) -> DerivedKey {
        let mut mac = self.keyed.clone();
        mac.update(label.as_bytes());
        DerivedKey(mac.finalize().into_bytes().into())
    }
}

impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHasher(<redacted>)")
    }
}

/// An API key as stored (without its hash) and as shown by `GET /api/api_keys/current`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[schema(as = api_key)]
pub struct ApiKey {
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub live_mode: bool,
    pub organization_id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub decommissioned: bool,
    pub decommissioned_at: Option<Timestamp>,
    /// Whose idempotency keys this key shares (SPEC I2): its own id, or, for a key made by
    /// [`ApiKey::roll`], its predecessor's scope, so a whole chain of rolls shares the first
    /// key's. Claims and stored replies are keyed by it. Never shown: it is an internal id.
    #[serde(skip)]
    #[schema(ignore)]
    pub idempotency_scope: String,
}

/// Whether a key may be used now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    Active,
    Expired,
    Revoked,
}

impl KeyState {
    /// As `payrail keys list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Active => "active",
            KeyState::Expired => "expired",
            KeyState::Revoked => "revoked",
        }
    }
}

impl ApiKey {
    pub fn new(name: String, mode: Mode, organization_id: String, now: Timestamp) -> Self {
        let id = uuid::Uuid::new_v4().to_string();
        ApiKey {
            idempotency_scope: id.clone(),
            id,
            object: "api_key",
            name,
            live_mode: mode.is_live(),
            organization_id,
            created_at: now,
            updated_at: now,
            expires_at: None,
            decommissioned: false,
            decommissioned_at: None,
        }
    }

    pub fn state(&self, now: Timestamp) -> KeyState {
        if self.decommissioned {
            KeyState::Revoked
        } else if self.expires_at.is_some_and(|at| at <= now) {
            KeyState::Expired
        } else {
            KeyState::Active
        }
    }

    pub fn scope(&self) -> Scope {
        Scope { organization_id: self.organization_id.clone(), live_mode: self.live_mode }
    }

    pub fn mode(&self) -> Mode {
        Mode::from_live(self.live_mode)
    }

    /// The key that replaces this one, and this one set to expire after `grace_secs`.
    pub fn roll(&self, grace_secs: i64, now: Timestamp) -> Result<(ApiKey, ApiKey)> {
        if self.state(now) != KeyState::Active {
            return Err(Error::invalid("id", "only an active key can be rolled"));
        }
        let mut successor = ApiKey::new(self.name.clone(), self.mode(), self.organization_id.clone(), now);
        // A retry sent with the new key must replay what the old one stored (I2).
        successor.idempotency_scope = self.idempotency_scope.clone();
        let mut old = self.clone();
        old.expires_at = Some(now.plus_secs(grace_secs.max(0)));
        old.updated_at = now;
        Ok((successor, old))
    }

    pub fn revoke(&self, now: Timestamp) -> ApiKey {
        let mut revoked = self.clone();
        revoked.decommissioned = true;
        revoked.decommissioned_at = Some(now);
        revoked.updated_at = now;
        revoked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a4_generated_keys_carry_mode_prefix_and_parse_back() {
        let key = SecretKey::generate(Mode::Live);
        assert!(key.expose().starts_with("pr_live_"));
        assert_eq!(SecretKey::parse(key.expose()), Some(key.clone()));
        assert_ne!(SecretKey::generate(Mode::Live), key);
        assert!(!format!("{key:?}").contains(key.expose()));
    }

    #[test]
    fn a2_malformed_keys_do_not_parse() {
        for bad in ["", "pr_live_", "pr_test_abc", "pr_live_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"] {
            assert!(SecretKey::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a5_rolled_key_expires_after_grace_and_revoked_key_fails() {
        let now = Timestamp::from_micros(1_000_000_000);
        let key = ApiKey::new("ci".into(), Mode::Sandbox, "default".into(), now);
        let (successor, old) = key.roll(60, now).unwrap();
        assert_eq!(successor.state(now), KeyState::Active);
        assert_eq!(old.state(now.plus_secs(59)), KeyState::Active);
        assert_eq!(old.state(now.plus_secs(60)), KeyState::Expired);
        assert_eq!(key.revoke(now).state(now), KeyState::Revoked);
    }

    #[test]
    fn i2_a_chain_of_rolls_keeps_the_first_keys_idempotency_scope() {
        let now = Timestamp::from_micros(1_000_000_000);
        let first = ApiKey::new("ci".into(), Mode::Sandbox, "default".into(), now);
        assert_eq!(first.idempotency_scope, first.id, "a new key's scope is its own id");
        let (second, _) = first.roll(60, now).unwrap();
        let (third, _) = second.roll(60, now).unwrap();
        assert_ne!(third.id, first.id);
        assert_eq!((second.idempotency_scope.as_str(), third.idempotency_scope.as_str()), (first.id.as_str(), first.id.as_str()));
        let unrelated = ApiKey::new("ci".into(), Mode::Sandbox, "default".into(), now);
        assert_ne!(unrelated.idempotency_scope, first.idempotency_scope, "unrelated keys of one organization stay independent");
        assert!(!serde_json::to_string(&third).unwrap().contains("idempotency_scope"), "never shown");
    }

    #[test]
    fn l6_derived_keys_depend_on_pepper_and_label_and_hide_the_pepper() {
        let hasher = KeyHasher::new(vec![1; 32]);
        let key = hasher.derive(LIST_CURSOR_KEY_LABEL);
        assert_eq!(key.expose(), KeyHasher::new(vec![1; 32]).derive(LIST_CURSOR_KEY_LABEL).expose(), "every instance derives the same");
        assert_ne!(key.expose(), hasher.derive("another purpose").expose());
        assert_ne!(key.expose(), KeyHasher::new(vec![2; 32]).derive(LIST_CURSOR_KEY_LABEL).expose());
        assert_ne!(&key.expose()[..], &[1u8; 32][..]);
        assert!(!format!("{key:?}").contains('1'));
    }

    #[test]
    fn a4_hash_depends_on_pepper() {
        let key = SecretKey::generate(Mode::Sandbox);
        let a = KeyHasher::new(vec![1; 32]).hash(&key);
        let b = KeyHasher::new(vec![2; 32]).hash(&key);
        assert!(!a.matches(&b));
        assert!(a.matches(&KeyHasher::new(vec![1; 32]).hash(&key)));
    }
}
