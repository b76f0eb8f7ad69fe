//! Key management, the operations behind `payrail keys` (SPEC A4, A5, K2).
//!
//! They write through the same store as the server, so a key created or revoked while a server
//! runs on the database takes effect on its next request. The pepper keys are hashed under is
//! stored sealed under the master key; [`rewrap_pepper`] re-seals it after a rotation.

use super::api_key::{ApiKey, Mode, SecretKey, validate_org_id};
use super::secret_box::{self, SecretBox};
use super::time::{Clock, Timestamp};
use crate::error::{Error, Result};
use crate::store::{Store, Write, WriteBatch};

/// Longest key name accepted.
pub const KEY_NAME_LEN_MAX: usize = 200;
/// How long a rolled key keeps working when no grace period is given.
pub const ROLL_GRACE_DEFAULT_SECS: i64 = 24 * 60 * 60;

/// A key just made: the only moment its secret exists outside the client.
#[derive(Debug)]
pub struct IssuedKey {
    pub key: ApiKey,
    pub secret: SecretKey,
}

pub async fn create(store: &dyn Store, clock: &dyn Clock, name: &str, mode: Mode, org: &str) -> Result<IssuedKey> {
    if name.trim().is_empty() || name.len() > KEY_NAME_LEN_MAX {
        return Err(Error::invalid("name", "a key name is 1 to 200 characters"));
    }
    if name.chars().any(char::is_control) {
        // A newline would split `keys list`'s row in two for the scripts that read it.
        return Err(Error::invalid("name", "a key name must not contain control characters"));
    }
    validate_org_id(org)?;
    let key = ApiKey::new(name.to_owned(), mode, org.to_owned(), clock.now());
    let secret = SecretKey::generate(mode);
    let hash = store.key_hasher().hash(&secret);
    let mut batch = WriteBatch::new();
    batch.push(Write::InsertApiKey { key: key.clone(), hash });
    store.commit(batch).await?;
    Ok(IssuedKey { key, secret })
}

pub async fn list(store: &dyn Store) -> Result<Vec<ApiKey>> {
    store.api_keys().await
}

/// Issues a successor of key `id`; the old key keeps working for `grace_secs`, then expires.
pub async fn roll(store: &dyn Store, clock: &dyn Clock, id: &str, grace_secs: i64) -> Result<(IssuedKey, ApiKey)> {
    let old = store.api_key(id).await?.ok_or_else(|| Error::not_found("api key"))?;
    let (successor, expiring) = old.roll(grace_secs, clock.now())?;
    let secret = SecretKey::generate(successor.mode());
    let hash = store.key_hasher().hash(&secret);
    let mut batch = WriteBatch::new();
    batch.push(Write::InsertApiKey { key: successor.clone(), hash });
    batch.push(Write::UpdateApiKey(expiring.clone()));
    store.commit(batch).await?;
    Ok((IssuedKey { key: successor, secret }, expiring))
}

/// Revokes key `id` at once. Revoking a revoked key changes nothing.
pub async fn revoke(store: &dyn Store, clock: &dyn Clock, id: &str) -> Result<ApiKey> {
    let key = store.api_key(id).await?.ok_or_else(|| Error::not_found("api key"))?;
    if key.decommissioned {
        return Ok(key);
    }
    let revoked = key.revoke(clock.now());
    let mut batch = WriteBatch::new();
    batch.push(Write::UpdateApiKey(revoked.clone()));
    store.commit(batch).await?;
    Ok(revoked)
}

/// Parses a duration such as `90s`, `15m`, `24h`, `7d` (or bare seconds) into seconds.
pub fn parse_duration_secs(text: &str) -> Result<i64> {
    let text = text.trim();
    let invalid = || Error::invalid("grace", "a duration is a whole number with s, m, h or d, e.g. 24h");
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let value: i64 = number.parse().map_err(|_| invalid())?;
    let factor = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(invalid()),
    };
    if value < 0 {
        return Err(invalid());
    }
    value.checked_mul(factor).ok_or_else(invalid)
}

/// Re-seals the stored API key pepper under the newest master key, if it is not already
/// (`payrail master-key rewrap`); true if it did. A compare-and-set: a racing rewrap changes
/// nothing twice, and the pepper itself never changes, so every key keeps verifying.
pub async fn rewrap_pepper(store: &dyn Store, secrets: &SecretBox) -> Result<bool> {
    let Some(stored) = store.setting(secret_box::PEPPER_SETTING).await? else { return Ok(false) };
    if secret_box::is_sealed(&stored) && secrets.is_current(&stored) {
        return Ok(false);
    }
    let (pepper, _) = secret_box::open_pepper(secrets, &stored).map_err(|e| Error::internal(e.to_string()))?;
    let sealed = secrets.seal(&pepper, secret_box::PEPPER_PURPOSE);
    store.replace_setting(secret_box::PEPPER_SETTING, &stored, &sealed).await
}

/// What [`rewrap_replies`] did: re-sealed, already under the newest key, and sealed under a key
/// the ring no longer holds (their replays answer 500 whatever this does).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RewrappedReplies {
    pub resealed: usize,
    pub current: usize,
    pub unreadable: usize,
}

/// Re-seals the unexpired stored replies that carry a secret (S4) under the newest master key,
/// so that retiring the older keys never leaves a replay that cannot be opened (I4). Each is a
/// compare-and-set: a reply purged or re-sealed meanwhile is left as it is.
pub async fn rewrap_replies(store: &dyn Store, secrets: &SecretBox, now: Timestamp) -> Result<RewrappedReplies> {
    let mut done = RewrappedReplies::default();
    for reply in store.sealed_replies(now).await? {
        if secrets.is_current(&reply.body) {
            done.current += 1;
            continue;
        }
        let purpose = secret_box::reply_purpose(&reply.api_key_id, &reply.key);
        let Ok(plain) = secrets.open(&reply.body, &purpose) else {
            done.unreadable += 1;
            continue;
        };
        let fresh = secrets.seal(&plain, &purpose);
        if store.replace_reply_body(&reply.api_key_id, &reply.key, &reply.body, &fresh).await? {
            done.resealed += 1;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a5_grace_durations_parse() {
        assert_eq!(parse_duration_secs("90").unwrap(), 90);
        assert_eq!(parse_duration_secs("15m").unwrap(), 900);
        assert_eq!(parse_duration_secs("24h").unwrap(), 86_400);
        assert_eq!(parse_duration_secs("0s").unwrap(), 0);
        for bad in ["", "h", "-1h", "3w", "1.5h"] {
            assert!(parse_duration_secs(bad).is_err(), "{bad}");
        }
    }
}
