//! Applying a write batch inside one PostgreSQL transaction.

use tokio_postgres::Transaction;

use super::db_err;
use crate::error::{Error, Result};
use crate::store::sqlite::kind_str;
use crate::store::{ObjectRecord, Write};

pub async fn apply(tx: &Transaction<'_>, write: &Write) -> Result<()> {
    match write {
        Write::Insert(record) => insert_object(tx, record).await,
        Write::Replace { record, expected_version } => replace_object(tx, record, *expected_version).await,
        Write::Delete { kind, scope, id } => {
            let deleted = tx
                .execute(
                    "DELETE FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4",
                    &[id, kind, &scope.organization_id, &scope.live_mode],
                )
                .await
                .map_err(db_err)?;
            if deleted == 0 { Err(Error::not_found(&kind_str(kind))) } else { Ok(()) }
        }
        Write::DeleteChildren { kind, scope, parent_id } => {
            tx.execute(
                "DELETE FROM objects WHERE kind = $1 AND org_id = $2 AND live_mode = $3 AND parent_id = $4",
                &[kind, &scope.organization_id, &scope.live_mode, parent_id],
            )
            .await
            .map_err(db_err)?;
            Ok(())
        }
        Write::Require { kind, scope, id, parameter } => {
            // KEY SHARE locks the row until commit: a concurrent delete waits for us.
            let found = tx
                .query_opt(
                    "SELECT 1 FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4 FOR KEY SHARE",
                    &[id, kind, &scope.organization_id, &scope.live_mode],
                )
                .await
                .map_err(db_err)?;
            match found {
                Some(_) => Ok(()),
                None => Err(Error::invalid(parameter.clone(), format!("{parameter} does not name an existing {}", kind_str(kind)))),
            }
        }
        Write::InsertApiKey { key, hash } => {
            tx.execute(
                "INSERT INTO api_keys (id, key_hash, name, organization_id, live_mode, created_at, updated_at, expires_at, decommissioned_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &key.id,
                    &&hash.0[..],
                    &key.name,
                    &key.organization_id,
                    &key.live_mode,
                    &key.created_at.as_micros(),
                    &key.updated_at.as_micros(),
                    &key.expires_at.map(|t| t.as_micros()),
                    &key.decommissioned_at.map(|t| t.as_micros()),
                ],
            )
            .await
            .map_err(db_err)?;
            Ok(())
        }
        Write::UpdateApiKey(key) => {
            let changed = tx
                .execute(
                    "UPDATE api_keys SET name = $2, updated_at = $3, expires_at = $4, decommissioned_at = $5 WHERE id = $1",
                    &[
                        &key.id,
                        &key.name,
                        &key.updated_at.as_micros(),
                        &key.expires_at.map(|t| t.as_micros()),
                        &key.decommissioned_at.map(|t| t.as_micros()),
                    ],
                )
                .await
                .map_err(db_err)?;
            if changed == 0 { Err(Error::not_found("api key")) } else { Ok(()) }
        }
        Write::SaveReply(reply) => {
            tx.execute(
                "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (api_key_id, key) DO UPDATE SET status = EXCLUDED.status, content_type = EXCLUDED.content_type,
                   body = EXCLUDED.body, fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at",
                &[
                    &reply.api_key_id,
                    &reply.key,
                    &i32::from(reply.status),
                    &reply.content_type,
                    &&reply.body[..],
                    &&reply.fingerprint[..],
                    &reply.created_at.as_micros(),
                    &reply.expires_at.as_micros(),
                ],
            )
            .await
            .map_err(db_err)?;
            Ok(())
        }
        Write::PurgeReplies { keys, before } => {
            let (ids, names): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
            tx.execute(
                "DELETE FROM idempotency_replies r USING unnest($1::text[], $2::text[]) AS k(api_key_id, key)
                 WHERE r.api_key_id = k.api_key_id AND r.key = k.key AND r.expires_at <= $3",
                &[&ids, &names, &before.as_micros()],
            )
            .await
            .map_err(db_err)?;
            Ok(())
        }
    }
}

async fn insert_object(tx: &Transaction<'_>, record: &ObjectRecord) -> Result<()> {
    let row = tx
        .query_one(
            "INSERT INTO objects (id, kind, org_id, live_mode, parent_id, created_at, version, doc)
             VALUES ($1, $2, $3, $4, $5, $6, 1, $7) RETURNING seq",
            &[
                &record.id,
                &record.kind,
                &record.scope.organization_id,
                &record.scope.live_mode,
                &record.parent_id,
                &record.created_at.as_micros(),
                &record.doc,
            ],
        )
        .await
        .map_err(db_err)?;
    insert_terms(tx, row.get(0), record).await
}

async fn replace_object(tx: &Transaction<'_>, record: &ObjectRecord, expected_version: i64) -> Result<()> {
    let scope = &record.scope;
    let row = tx
        .query_opt(
            "UPDATE objects SET doc = $1, parent_id = $2, version = version + 1
             WHERE id = $3 AND kind = $4 AND org_id = $5 AND live_mode = $6 AND version = $7 RETURNING seq",
            &[&record.doc, &record.parent_id, &record.id, &record.kind, &scope.organization_id, &scope.live_mode, &expected_version],
        )
        .await
        .map_err(db_err)?;
    let Some(row) = row else {
        let exists = tx
            .query_opt(
                "SELECT 1 FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4",
                &[&record.id, &record.kind, &scope.organization_id, &scope.live_mode],
            )
            .await
            .map_err(db_err)?;
        return Err(match exists {
            None => Error::not_found(&kind_str(record.kind)),
            Some(_) => Error::Conflict {
                message: format!("the {} was changed by another request; retry", kind_str(record.kind)),
                parameter: None,
                retry_after_s: Some(0),
            },
        });
    };
    let seq: i64 = row.get(0);
    tx.execute("DELETE FROM object_terms WHERE object_seq = $1", &[&seq]).await.map_err(db_err)?;
    insert_terms(tx, seq, record).await
}

async fn insert_terms(tx: &Transaction<'_>, seq: i64, record: &ObjectRecord) -> Result<()> {
    if record.terms.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = record.terms.iter().map(|t| t.name.as_str()).collect();
    let values: Vec<&str> = record.terms.iter().map(|t| t.value.as_str()).collect();
    tx.execute(
        "INSERT INTO object_terms (object_seq, name, value) SELECT $1, n, v FROM unnest($2::text[], $3::text[]) AS t(n, v)
         ON CONFLICT DO NOTHING",
        &[&seq, &names, &values],
    )
    .await
    .map_err(db_err)?;
    Ok(())
}
