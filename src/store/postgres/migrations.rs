//! Embedded PostgreSQL migrations, applied at start under an advisory lock so that several
//! instances starting at once apply each migration exactly once (SPEC S3).

use tokio_postgres::Client;

/// `(version, sql)`, oldest first. Never edit a released migration: add a new one.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_outbox_position.sql")),
    (3, include_str!("migrations/0003_newest_first_index.sql")),
    (4, include_str!("migrations/0004_unlogged_claims.sql")),
    (5, include_str!("migrations/0005_drop_unused_page_index.sql")),
    (6, include_str!("migrations/0006_key_epoch.sql")),
    (7, include_str!("migrations/0007_terms_without_foreign_key.sql")),
    (8, include_str!("migrations/0008_idempotency_scope.sql")),
    (9, include_str!("migrations/0009_ledgers.sql")),
    (10, include_str!("migrations/0010_ledger_settlements.sql")),
    (11, include_str!("migrations/0011_leases.sql")),
    (12, include_str!("migrations/0012_term_statistics.sql")),
    (13, include_str!("migrations/0013_objects_fillfactor.sql")),
    (14, include_str!("migrations/0014_lz4_documents.sql")),
    (15, include_str!("migrations/0015_layout_level.sql")),
    (16, include_str!("migrations/0016_layout_level_2.sql")),
    (17, include_str!("migrations/0017_layout_level_3.sql")),
    (18, include_str!("migrations/0018_outbox_index_for_events.sql")),
    (19, include_str!("migrations/0019_layout_level_4.sql")),
    (20, include_str!("migrations/0020_layout_level_5.sql")),
    (21, include_str!("migrations/0021_layout_level_6.sql")),
];
/// Arbitrary but fixed: the advisory lock every Payrail instance takes to migrate.
const MIGRATION_LOCK_ID: i64 = 0x7061_7972_6169_6c00;

pub async fn apply(client: &mut Client) -> anyhow::Result<()> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_ID]).await?;
    let result = apply_locked(client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_ID]).await?;
    result
}

async fn apply_locked(client: &mut Client) -> anyhow::Result<()> {
    client.batch_execute("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)").await?;
    for (version, sql) in MIGRATIONS {
        let tx = client.transaction().await?;
        let applied: bool = tx.query_one("SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", &[version]).await?.get(0);
        if !applied {
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, (extract(epoch FROM now()) * 1000000)::BIGINT)",
                &[version],
            )
            .await?;
            tracing::info!(version, "applied postgres migration");
        }
        tx.commit().await?;
    }
    Ok(())
}
