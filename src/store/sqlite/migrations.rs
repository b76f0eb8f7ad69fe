//! Embedded schema migrations, applied in order at start (SPEC S3).

use rusqlite::Connection;

/// `(version, sql)`, oldest first. Never edit a released migration: add a new one.
const MIGRATIONS: &[(i64, &str)] = &[(1, include_str!("migrations/0001_init.sql"))];

/// Applies every migration not yet applied, each in its own transaction.
pub fn apply(conn: &mut Connection) -> anyhow::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )?;
    for (version, sql) in MIGRATIONS {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let applied: bool =
            tx.query_row("SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?1)", [version], |r| r.get(0))?;
        if !applied {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000000)",
                [version],
            )?;
            tracing::info!(version, "applied sqlite migration");
        }
        tx.commit()?;
    }
    Ok(())
}
