//! Embedded schema migrations, applied in order at start (SPEC S3).

use rusqlite::{Connection, Transaction};

/// A migration: SQL, or code where SQL cannot do it.
enum Step {
    Sql(&'static str),
    Code(fn(&Transaction<'_>) -> anyhow::Result<()>),
}

/// `(version, step)`, oldest first. Never edit a released migration: add a new one.
const MIGRATIONS: &[(i64, Step)] = &[
    (1, Step::Sql(include_str!("migrations/0001_init.sql"))),
    (2, Step::Code(replies_into_slots)),
    (3, Step::Sql(include_str!("migrations/0003_idempotency_scope.sql"))),
    (4, Step::Sql(include_str!("migrations/0004_ledgers.sql"))),
    (5, Step::Sql(include_str!("migrations/0005_ledger_settlements.sql"))),
    (6, Step::Sql(include_str!("migrations/0006_leases.sql"))),
    (7, Step::Sql(include_str!("migrations/0007_layout_level.sql"))),
    (8, Step::Sql(include_str!("migrations/0008_layout_level_2.sql"))),
    (9, Step::Sql(include_str!("migrations/0009_layout_level_3.sql"))),
    (10, Step::Sql(include_str!("migrations/0010_layout_level_4.sql"))),
    (11, Step::Sql(include_str!("migrations/0011_layout_level_5.sql"))),
    (12, Step::Sql(include_str!("migrations/0012_layout_level_6.sql"))),
];

/// Migration 2: stored replies get rowids derived from their keys (see `reply_slots`).
fn replies_into_slots(tx: &Transaction<'_>) -> anyhow::Result<()> {
    tx.execute_batch(include_str!("migrations/0002_replies_in_slots_begin.sql"))?;
    let moved = super::reply_slots::move_into_slots(tx, "idempotency_replies_v1")?;
    tx.execute_batch(include_str!("migrations/0002_replies_in_slots_end.sql"))?;
    tracing::info!(moved, "moved stored replies into their key slots");
    Ok(())
}

/// Applies every migration not yet applied, each in its own transaction.
pub fn apply(conn: &mut Connection) -> anyhow::Result<()> {
    apply_through(conn, i64::MAX)
}

/// Applies the migrations not yet applied up to version `last` (what an older release had).
fn apply_through(conn: &mut Connection, last: i64) -> anyhow::Result<()> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")?;
    for (version, step) in MIGRATIONS.iter().filter(|(version, _)| *version <= last) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let applied: bool = tx.query_row("SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?1)", [version], |r| r.get(0))?;
        if !applied {
            match step {
                Step::Sql(sql) => tx.execute_batch(sql)?,
                Step::Code(run) => run(&tx)?,
            }
            tx.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000000)", [version])?;
            tracing::info!(version, "applied sqlite migration");
        }
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i3_replies_stored_before_migration_2_are_found_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("m.db")).unwrap();
        conn.execute_batch("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)").unwrap();
        let Step::Sql(first) = MIGRATIONS[0].1 else { panic!("migration 1 is SQL") };
        conn.execute_batch(first).unwrap();
        conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (1, 0)", []).unwrap();
        for (api_key_id, key) in [("key_a", "k1"), ("key_a", "k2"), ("key_b", "k1")] {
            conn.execute(
                "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
                 VALUES (?1, ?2, 201, 'application/json', ?3, zeroblob(32), 1, 100)",
                rusqlite::params![api_key_id, key, format!("{api_key_id}/{key}").into_bytes()],
            )
            .unwrap();
        }
        apply(&mut conn).unwrap();
        apply(&mut conn).unwrap(); // a second start changes nothing
        for (api_key_id, key) in [("key_a", "k1"), ("key_a", "k2"), ("key_b", "k1")] {
            let reply = super::super::reply_slots::find(&conn, api_key_id, key, crate::base::time::Timestamp::from_micros(50))
                .unwrap()
                .expect("the reply moved into its slot");
            let body = reply.body.to_vec();
            assert_eq!(body, format!("{api_key_id}/{key}").into_bytes());
        }
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name IN ('idempotency_replies_v1', 'idempotency_replies_expiry')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 1, "the old table is gone and the expiry index is back");
    }

    #[test]
    fn s3_each_raise_is_recorded_with_its_time_on_a_database_that_held_data_and_as_0_on_an_empty_one() {
        let setting = |conn: &Connection, name: &str| -> Vec<u8> {
            conn.query_row("SELECT value FROM settings WHERE name = ?1", [name], |r| r.get(0)).unwrap()
        };
        let raised_at = |conn: &Connection| -> i64 { String::from_utf8(setting(conn, "layout_raised_at")).unwrap().parse().unwrap() };
        let dir = tempfile::tempdir().unwrap();
        let mut used = Connection::open(dir.path().join("used.db")).unwrap();
        apply_through(&mut used, 7).unwrap();
        assert_eq!(setting(&used, "layout_level"), b"1");
        used.execute(
            "INSERT INTO objects (id, kind, org_id, live_mode, created_at, version, doc) VALUES ('o', 'counterparty', 'org', 0, 1, 1, '{}')",
            [],
        )
        .unwrap();
        // Migrations 8 to 12 raise to levels 2 to 6 (each release's own step).
        for (last, level) in [(8, b"2"), (9, b"3"), (10, b"4"), (11, b"5"), (12, b"6")] {
            let before = crate::base::time::Clock::now(&crate::base::time::SystemClock).as_micros();
            apply_through(&mut used, last).unwrap();
            assert_eq!(setting(&used, "layout_level"), level);
            let raised = raised_at(&used);
            assert!(raised >= before - 1_000 && raised < before + 60_000_000, "raised at {raised}, migrated from {before}");
        }
        assert_eq!(crate::store::layout::LEVEL.to_string().as_bytes(), b"6", "this release reads what its last migration raised to");
        let mut empty = Connection::open(dir.path().join("empty.db")).unwrap();
        apply(&mut empty).unwrap();
        assert_eq!(setting(&empty, "layout_level"), b"6");
        assert_eq!(setting(&empty, "layout_raised_at"), b"0");
    }

    #[test]
    fn i2_keys_made_before_migration_3_are_their_own_idempotency_scope() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("m.db")).unwrap();
        conn.execute_batch("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)").unwrap();
        let Step::Sql(first) = MIGRATIONS[0].1 else { panic!("migration 1 is SQL") };
        conn.execute_batch(first).unwrap();
        conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (1, 0), (2, 0)", []).unwrap();
        conn.execute(
            "INSERT INTO api_keys (id, key_hash, name, organization_id, live_mode, created_at, updated_at) VALUES ('old_key', x'01', 'n', 'o', 0, 1, 1)",
            [],
        )
        .unwrap();
        apply(&mut conn).unwrap();
        let scope: String = conn.query_row("SELECT idempotency_scope FROM api_keys WHERE id = 'old_key'", [], |r| r.get(0)).unwrap();
        assert_eq!(scope, "old_key", "replies it stored, slotted by its id, are still its own");
    }
}
