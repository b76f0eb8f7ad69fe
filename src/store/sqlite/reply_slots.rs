//! Where a stored reply's row lives: its rowid comes from its key (SPEC I3, I4).
//!
//! A replay is one lookup of (API key id, idempotency key). With a unique index on the key, a
//! lookup walked two B-trees (the index, then the table by rowid) and, once the replies outgrew
//! the cache, read a leaf of each from the OS: at a million replies lookups were ~25 % slower
//! than at ten thousand. Deriving the rowid from the key makes a lookup one walk of the table,
//! whose interior pages hold only rowids (a few hundred pages at a million replies, cached), so
//! it reads one leaf at most, and a saved reply dirties one leaf instead of two.
//!
//! Each key owns a window of [`WINDOW`] rowids, aligned, from a SHA-256 of the key; its row sits
//! in the first free slot of its window. Two keys share a window with a probability of about
//! n / 2^59 for n stored replies (one in half a billion at a million); all sixteen slots taken
//! would need sixteen such keys, which no client can aim at without breaking SHA-256. If it ever
//! happened the save fails (and with it the whole write batch: nothing is created without its
//! reply), rather than overwrite another key's reply.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use sha2::{Digest, Sha256};

use crate::base::time::Timestamp;
use crate::error::{Error, Result};
use crate::store::StoredReply;

/// Rowids per key window (a power of two).
pub const WINDOW: i64 = 16;

/// The first rowid of the key's window; its last is `first + WINDOW - 1`.
pub fn window(api_key_id: &str, key: &str) -> i64 {
    let digest = Sha256::new().chain_update((api_key_id.len() as u64).to_be_bytes()).chain_update(api_key_id).chain_update(key).finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // Non-negative and aligned, so the window ends at or below i64::MAX.
    ((u64::from_be_bytes(first) >> 1) as i64) & !(WINDOW - 1)
}

/// The rowid a reply for this key is to be saved at: the key's own row if it has one (it is
/// replaced), else the first free slot of its window.
pub fn slot_for_save(tx: &Transaction<'_>, api_key_id: &str, key: &str) -> Result<i64> {
    let first = window(api_key_id, key);
    let mut st = tx
        .prepare_cached("SELECT id, api_key_id = ?3 AND key = ?4 FROM idempotency_replies WHERE id BETWEEN ?1 AND ?2")
        .map_err(super::row_err)?;
    let rows = st
        .query_map(params![first, first + WINDOW - 1, api_key_id, key], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, bool>(1)?)))
        .map_err(super::row_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(super::row_err)?;
    if let Some((id, _)) = rows.iter().find(|(_, same)| *same) {
        return Ok(*id);
    }
    (first..first + WINDOW)
        .find(|slot| rows.iter().all(|(id, _)| id != slot))
        .ok_or_else(|| Error::internal(format!("every slot of an idempotency key's window ({first}) is taken; the reply cannot be stored")))
}

/// Saves a reply in its key's slot, replacing the key's previous reply if any.
pub fn save(tx: &Transaction<'_>, reply: &StoredReply) -> Result<()> {
    let slot = slot_for_save(tx, &reply.api_key_id, &reply.key)?;
    tx.prepare_cached(
        "INSERT OR REPLACE INTO idempotency_replies (id, api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut st| {
        st.execute(params![
            slot,
            reply.api_key_id,
            reply.key,
            reply.status,
            reply.content_type,
            &reply.body[..],
            &reply.fingerprint[..],
            reply.created_at.as_micros(),
            reply.expires_at.as_micros(),
        ])
    })
    .map_err(super::row_err)?;
    Ok(())
}

/// Deletes the key's reply if it expired at or before `before` (micros).
pub fn delete_expired(tx: &Transaction<'_>, api_key_id: &str, key: &str, before: i64) -> Result<()> {
    let first = window(api_key_id, key);
    tx.prepare_cached("DELETE FROM idempotency_replies WHERE id BETWEEN ?1 AND ?2 AND api_key_id = ?3 AND key = ?4 AND expires_at <= ?5")
        .and_then(|mut st| st.execute(params![first, first + WINDOW - 1, api_key_id, key, before]))
        .map_err(super::row_err)?;
    Ok(())
}

/// The key's reply, if it has one that expires after `now`.
pub fn find(conn: &Connection, api_key_id: &str, key: &str, now: Timestamp) -> rusqlite::Result<Option<StoredReply>> {
    let first = window(api_key_id, key);
    conn.prepare_cached(
        "SELECT status, content_type, body, fingerprint, created_at, expires_at FROM idempotency_replies
         WHERE id BETWEEN ?1 AND ?2 AND api_key_id = ?3 AND key = ?4 AND expires_at > ?5",
    )?
    .query_row(params![first, first + WINDOW - 1, api_key_id, key, now.as_micros()], |row| {
        reply_from_row(api_key_id.to_owned(), key.to_owned(), row, 0)
    })
    .optional()
}

/// The unexpired replies whose body starts with `prefix` (the sealed ones: a scan, for an
/// operator's command).
pub fn starting_with(conn: &Connection, prefix: &[u8], now: Timestamp) -> rusqlite::Result<Vec<StoredReply>> {
    let mut st = conn.prepare(
        "SELECT api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at FROM idempotency_replies
         WHERE expires_at > ?1 AND substr(body, 1, ?2) = ?3",
    )?;
    let rows =
        st.query_map(params![now.as_micros(), prefix.len() as i64, prefix], |row| reply_from_row(row.get(0)?, row.get(1)?, row, 2))?;
    rows.collect()
}

/// Replaces the key's reply body if it is still `old`; false if it was not.
pub fn replace_body(conn: &Connection, api_key_id: &str, key: &str, old: &[u8], new: &[u8]) -> rusqlite::Result<bool> {
    let first = window(api_key_id, key);
    let changed = conn.execute(
        "UPDATE idempotency_replies SET body = ?1 WHERE id BETWEEN ?2 AND ?3 AND api_key_id = ?4 AND key = ?5 AND body = ?6",
        params![new, first, first + WINDOW - 1, api_key_id, key, old],
    )?;
    Ok(changed == 1)
}

/// A reply from six columns from `at` on: status, content_type, body, fingerprint, created_at,
/// expires_at.
fn reply_from_row(api_key_id: String, key: String, row: &Row<'_>, at: usize) -> rusqlite::Result<StoredReply> {
    let fingerprint: Vec<u8> = row.get(at + 3)?;
    Ok(StoredReply {
        api_key_id,
        key,
        status: row.get(at)?,
        content_type: row.get(at + 1)?,
        body: row.get::<_, Vec<u8>>(at + 2)?.into(),
        fingerprint: fingerprint.try_into().unwrap_or([0; 32]),
        created_at: Timestamp::from_micros(row.get(at + 4)?),
        expires_at: Timestamp::from_micros(row.get(at + 5)?),
    })
}

/// Moves the replies of a table keyed by (api_key_id, key) into slots of `idempotency_replies`
/// (migration 2).
pub fn move_into_slots(tx: &Transaction<'_>, from_table: &str) -> Result<usize> {
    let mut st = tx
        .prepare(&format!("SELECT api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at FROM {from_table}"))
        .map_err(super::row_err)?;
    let mut rows = st.query([]).map_err(super::row_err)?;
    let mut moved = 0;
    while let Some(row) = rows.next().map_err(super::row_err)? {
        let reply =
            reply_from_row(row.get(0).map_err(super::row_err)?, row.get(1).map_err(super::row_err)?, row, 2).map_err(super::row_err)?;
        save(tx, &reply)?;
        moved += 1;
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("r.db")).unwrap();
        super::super::migrations::apply(&mut conn).unwrap();
        (dir, conn)
    }

    fn reply(api_key_id: &str, key: &str, body: &str) -> StoredReply {
        StoredReply {
            api_key_id: api_key_id.into(),
            key: key.into(),
            status: 201,
            content_type: "application/json".into(),
            body: body.as_bytes().to_vec().into(),
            fingerprint: [7; 32],
            created_at: Timestamp::from_micros(1),
            expires_at: Timestamp::from_micros(i64::MAX / 2),
        }
    }

    fn body_of(conn: &Connection, api_key_id: &str, key: &str) -> Option<String> {
        let reply = find(conn, api_key_id, key, Timestamp::from_micros(0)).unwrap()?;
        Some(String::from_utf8(reply.body.to_vec()).unwrap())
    }

    #[test]
    fn i3_windows_never_change_between_versions() {
        // Rowids are stored: a different function would lose every stored reply's lookup.
        assert_eq!(window("key_a", "order-1"), window("key_a", "order-1"));
        // Computed apart from this code: Python, sha256(u64be(len(a)) + a + k)[..8] >> 1, aligned.
        assert_eq!(window("key_a", "order-1"), 8_615_395_301_339_811_664);
        assert_eq!(window("", ""), window("", ""));
        for (a, k) in [("key_a", "order-1"), ("ke", "y_aorder-1"), ("", ""), ("x", &"k".repeat(255))] {
            let first = window(a, k);
            assert!(first >= 0 && first % WINDOW == 0 && first.checked_add(WINDOW - 1).is_some(), "{a}/{k}: {first}");
        }
        // The API key id's length is part of the digest: moving characters between the two
        // parts gives another window.
        assert_ne!(window("key_a", "order-1"), window("key_ao", "rder-1"));
    }

    #[test]
    fn i3_a_saved_reply_is_found_and_a_second_save_replaces_it() {
        let (_dir, mut conn) = db();
        let tx = conn.transaction().unwrap();
        save(&tx, &reply("key_a", "k1", "first")).unwrap();
        save(&tx, &reply("key_a", "k1", "second")).unwrap();
        save(&tx, &reply("key_b", "k1", "other tenant")).unwrap();
        tx.commit().unwrap();
        assert_eq!(body_of(&conn, "key_a", "k1").as_deref(), Some("second"));
        assert_eq!(body_of(&conn, "key_b", "k1").as_deref(), Some("other tenant"));
        assert_eq!(body_of(&conn, "key_a", "k2"), None);
        let rows: i64 = conn.query_row("SELECT count(*) FROM idempotency_replies", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 2, "a replaced reply leaves no second row");
    }

    fn put_stranger(tx: &Transaction<'_>, slot: i64) {
        tx.execute(
            "INSERT INTO idempotency_replies (id, api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
             VALUES (?1, 'key_z', ?2, 201, 'application/json', x'7b7d', x'00', 0, 9)",
            params![slot, format!("stranger-{slot}")],
        )
        .unwrap();
    }

    #[test]
    fn i3_keys_sharing_a_window_take_the_next_slot_and_a_full_window_fails_without_overwriting() {
        let (_dir, mut conn) = db();
        let first = window("key_a", "k1");
        let tx = conn.transaction().unwrap();
        // Strangers in the key's window (as keys with colliding digests would be).
        for slot in first..first + 3 {
            put_stranger(&tx, slot);
        }
        save(&tx, &reply("key_a", "k1", "mine")).unwrap();
        assert_eq!(slot_for_save(&tx, "key_a", "k1").unwrap(), first + 3, "its own row is reused");
        save(&tx, &reply("key_a", "k1", "mine again")).unwrap();
        for slot in first + 4..first + WINDOW {
            put_stranger(&tx, slot);
        }
        save(&tx, &reply("key_a", "k1", "still mine")).expect("its own slot is still its own in a full window");
        assert_eq!(body_of(&tx, "key_a", "k1").as_deref(), Some("still mine"));
        // Its slot taken by a stranger too: nowhere left.
        tx.execute("DELETE FROM idempotency_replies WHERE api_key_id = 'key_a'", []).unwrap();
        put_stranger(&tx, first + 3);
        let err = save(&tx, &reply("key_a", "k1", "no room")).expect_err("a full window refuses");
        assert!(err.to_string().contains("taken"), "{err}");
        let strangers: i64 = tx.query_row("SELECT count(*) FROM idempotency_replies WHERE api_key_id = 'key_z'", [], |r| r.get(0)).unwrap();
        assert_eq!(strangers, WINDOW, "no other key's reply was overwritten");
    }

    #[test]
    fn i3_expired_replies_are_deleted_by_key_and_live_ones_kept() {
        let (_dir, mut conn) = db();
        let tx = conn.transaction().unwrap();
        save(&tx, &reply("key_a", "k1", "x")).unwrap();
        delete_expired(&tx, "key_a", "k1", 5).unwrap();
        assert!(body_of(&tx, "key_a", "k1").is_some(), "not expired yet");
        delete_expired(&tx, "key_a", "k1", i64::MAX).unwrap();
        assert!(body_of(&tx, "key_a", "k1").is_none());
    }
}
