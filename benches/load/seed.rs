//! Fixtures: what the scenarios need before they run, seeded through the API (accounts, the
//! replayed original, the counterparties the reads pick from) or straight into a stopped
//! server's store (stored replies by the million).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use crate::harness::pg::pg_connect;
use crate::harness::{BoxResult, Call, Store, Target, call_json, connect, id_of, unix_micros};
use crate::ledger::LedgerFixture;

/// Counterparties seeded for `get`, `list` and `mix`.
pub const SEED_COUNTERPARTIES_QUICK: usize = 200;
pub const SEED_COUNTERPARTIES_FULL: usize = 1000;

/// What the scenarios need from setup (a new scenario's fixtures go here).
#[derive(Debug, Default, Clone)]
pub struct Fixture {
    pub internal_account: String,
    pub external_account: String,
    pub replay_key: String,
    pub replay_body: Bytes,
    pub counterparty_ids: Vec<String>,
    pub scale_keys: u64,
    /// The ledger scenarios' ledger (each on a server of its own).
    pub ledger: LedgerFixture,
}

/// Creates the accounts, the replayed original and the counterparties `get` reads.
pub async fn seed(target: &Arc<Target>, count: usize) -> BoxResult<Fixture> {
    let mut sender = connect(target).await?;
    let tag = format!("seed-{}-{}", std::process::id(), unix_micros());
    let ia =
        call_json(target, &mut sender, Call::post("/api/internal_accounts", r#"{"name":"bench operating","currency":"USD"}"#.into(), None))
            .await?
            .0;
    let with_account = json!({"name": "bench receiver", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let cp = call_json(target, &mut sender, Call::post("/api/counterparties", with_account.to_string(), None)).await?.0;
    let external_account = cp["accounts"][0]["id"].as_str().ok_or("no accounts[0].id in the counterparty")?.to_owned();
    let replay_key = format!("{tag}-replay");
    let (_, replay_body) =
        call_json(target, &mut sender, Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(replay_key.clone())))
            .await?;
    let workers = 16.min(count.max(1));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let target = target.clone();
        let n = count / workers + usize::from(w < count % workers);
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&target).await?;
            let mut ids = Vec::with_capacity(n);
            for i in 0..n {
                let body = format!(r#"{{"name":"seed {w}-{i}","metadata":{{"bench":"seed"}}}}"#);
                ids.push(id_of(&call_json(&target, &mut sender, Call::post("/api/counterparties", body, None)).await?.0)?);
            }
            BoxResult::Ok(ids)
        }));
    }
    let mut counterparty_ids = Vec::with_capacity(count);
    for task in tasks {
        counterparty_ids.extend(task.await.map_err(|e| e.to_string())??);
    }
    Ok(Fixture {
        internal_account: id_of(&ia)?,
        external_account,
        replay_key,
        replay_body,
        counterparty_ids,
        scale_keys: 0,
        ledger: LedgerFixture::default(),
    })
}

// ---------------------------------------------------------------------------------------------
// Stored replies seeded directly into the store (for the idempotency lookups at scale)

/// Inserts replies `seed-<from>` .. `seed-<to - 1>` for `api_key_id` straight into the table,
/// with the body of a real reply, saved by the server's own `reply_slots::save` (in rowid
/// order, so the table is written front to back). The server must be stopped (SQLite).
fn sqlite_seed_replies(db: &Path, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    use payrail::domain::time::Timestamp;
    use payrail::store::{StoredReply, sqlite::reply_slots};
    let err = |e: rusqlite::Error| format!("seeding replies: {e}");
    let mut keys: Vec<(i64, u64)> = (from..to).map(|x| (reply_slots::window(api_key_id, &seed_key(x)), x)).collect();
    keys.sort_unstable();
    let mut conn = rusqlite::Connection::open(db).map_err(err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
    let now = unix_micros();
    let tx = conn.transaction().map_err(err)?;
    let body = Bytes::copy_from_slice(body);
    for (_, x) in keys {
        let reply = StoredReply {
            api_key_id: api_key_id.to_owned(),
            key: seed_key(x),
            status: 201,
            content_type: "application/json".into(),
            body: body.clone(),
            fingerprint: [0; 32],
            created_at: Timestamp::from_micros(now),
            expires_at: Timestamp::from_micros(now + 24 * 3600 * 1_000_000),
        };
        reply_slots::save(&tx, &reply).map_err(|e| format!("seeding replies: {e}"))?;
    }
    tx.commit().map_err(err)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(err)?;
    Ok(())
}

/// The idempotency key of seeded reply `x` (as the replay_10k / replay_1m requests send it).
pub fn seed_key(x: u64) -> String {
    format!("seed-{x:07}")
}

async fn pg_seed_replies(url: &str, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    let client = pg_connect(url).await?;
    let now = unix_micros();
    let expires = now + 24 * 3600 * 1_000_000;
    let zero = [0u8; 32];
    let step = 100_000u64;
    let mut lo = from;
    while lo < to {
        let hi = (lo + step).min(to);
        client
            .execute(
                "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
                 SELECT $1, 'seed-' || lpad(g::text, 7, '0'), 201, 'application/json', $2, $3, $4, $5
                 FROM generate_series($6::bigint, $7::bigint) g",
                &[&api_key_id, &body, &&zero[..], &now, &expires, &(lo as i64), &(hi as i64 - 1)],
            )
            .await
            .map_err(|e| format!("seeding replies: {e}"))?;
        lo = hi;
    }
    client.batch_execute("ANALYZE idempotency_replies").await.map_err(|e| e.to_string())?;
    Ok(())
}

pub async fn seed_replies(store: &Store, data_dir: &Path, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    match store {
        Store::Sqlite => {
            let (db, id, body) = (data_dir.join("payrail.db"), api_key_id.to_owned(), body.to_vec());
            tokio::task::spawn_blocking(move || sqlite_seed_replies(&db, &id, &body, from, to)).await.map_err(|e| e.to_string())?
        }
        Store::Postgres { url } => pg_seed_replies(url, api_key_id, body, from, to).await,
    }
}
