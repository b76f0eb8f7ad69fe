//! Bank connections (SPEC B1): one bank relationship each, registered by an operator from the
//! command line and served (without any secret) as Modern Treasury's `connection`.
//!
//! A connection is two documents: the public record (`connection`), listed by
//! `GET /api/connections` and embedded in the internal accounts that use it, and its private
//! settings (`connection_settings`: transport, cut-offs, file identities, credentials sealed
//! under the master key), which no route serves. What the settings mean is the bank layer's
//! business; the domain keeps them as an opaque document.
//!
//! Every sandbox organization also has a built-in sandbox connection (its id derived from the
//! tenant, see [`builtin`]), used when an internal account names none.

use super::api_key::Scope;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::listing::{self, ListedPage, PageSpec};
use super::time::Timestamp;
use super::{Ctx, event};
use crate::error::{Error, Result};
use crate::store::{ObjectRecord, Store, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::kinds::CONNECTION;
pub const SETTINGS_KIND: &str = super::kinds::CONNECTION_SETTINGS;
/// The term every registered connection carries, so the command line can list them in every
/// tenant (`Store::scan_due`).
const REGISTERED_TERM: &str = "registered_at";
/// The built-in sandbox connection's bank (`vendor_name`).
pub const SANDBOX_BANK_NAME: &str = "Payrail Sandbox Bank";
/// Connections `payrail connections list` shows at most.
pub const LIST_MAX: usize = 10_000;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = connection)]
pub struct Connection {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub vendor_id: String,
    pub vendor_name: String,
    pub vendor_customer_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

/// The tenant's built-in sandbox connection; it is the same every time it is asked for. It has
/// always existed, so its `created_at` is the Unix epoch: older than every registered
/// connection, which is where newest-first lists put it.
pub fn builtin(scope: &Scope) -> Connection {
    let created_at = Timestamp::from_micros(0);
    let digest = Sha256::digest(format!("payrail-connection:{}:{}", scope.organization_id, scope.live_mode));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Connection {
        id: uuid::Builder::from_random_bytes(bytes).into_uuid().to_string(),
        object: "connection".into(),
        live_mode: scope.live_mode,
        vendor_id: "payrail".into(),
        vendor_name: SANDBOX_BANK_NAME.into(),
        vendor_customer_id: None,
        created_at,
        updated_at: created_at,
        discarded_at: None,
    }
}

/// Whether `connection_id` is the built-in sandbox connection of `scope` (sandbox mode only).
pub fn is_builtin(scope: &Scope, connection_id: &str) -> bool {
    !scope.live_mode && builtin(scope).id == connection_id
}

/// A connection's public record and where it belongs.
#[derive(Debug, Clone)]
pub struct Registered {
    pub scope: Scope,
    pub connection: Connection,
}

/// The public record of a new connection.
pub fn new_record(live_mode: bool, vendor_id: &str, vendor_name: &str, vendor_customer_id: Option<String>, now: Timestamp) -> Connection {
    Connection {
        id: super::common::new_id(),
        object: "connection".into(),
        live_mode,
        vendor_id: vendor_id.into(),
        vendor_name: vendor_name.into(),
        vendor_customer_id,
        created_at: now,
        updated_at: now,
        discarded_at: None,
    }
}

/// Stores a connection with its settings (already sealed where secret) and its event.
pub async fn register(store: &dyn Store, scope: &Scope, connection: &Connection, settings_json: String) -> Result<()> {
    let json = to_json(connection)?;
    let mut batch = WriteBatch::new();
    let created = connection.created_at;
    batch.push(Write::Insert(ObjectRecord {
        id: connection.id.clone(),
        kind: KIND,
        scope: scope.clone(),
        parent_id: None,
        created_at: created,
        doc: json.clone(),
        terms: vec![Term::new(REGISTERED_TERM, created.to_string()), Term::new("vendor_name", &connection.vendor_name)],
    }));
    batch.push(Write::Insert(settings_record(scope, connection, settings_json)));
    batch.push(Write::Insert(event::record(scope, KIND, "created", &connection.id, &json, created)?));
    store.commit(batch).await
}

/// A connection's private settings document and the version it was read at.
pub async fn settings_versioned(store: &dyn Store, scope: &Scope, connection_id: &str) -> Result<Option<(String, i64)>> {
    Ok(store.get(SETTINGS_KIND, scope, &settings_id(connection_id)).await?.map(|s| (s.doc, s.version)))
}

/// Replaces a connection's settings document (its identity key sealed afresh by a master key
/// rewrap), guarded by the version read: nothing a client sees changes, so no event.
pub async fn replace_settings(
    store: &dyn Store,
    scope: &Scope,
    connection: &Connection,
    settings_json: String,
    expected_version: i64,
) -> Result<()> {
    let record = settings_record(scope, connection, settings_json);
    store.commit(WriteBatch { writes: vec![Write::Replace { record, expected_version }], ..WriteBatch::default() }).await
}

/// The record of a connection's private settings document, beside the connection.
fn settings_record(scope: &Scope, connection: &Connection, settings_json: String) -> ObjectRecord {
    ObjectRecord {
        id: settings_id(&connection.id),
        kind: SETTINGS_KIND,
        scope: scope.clone(),
        parent_id: Some(connection.id.clone()),
        created_at: connection.created_at,
        doc: settings_json,
        terms: vec![],
    }
}

/// The id of a connection's settings document.
fn settings_id(connection_id: &str) -> String {
    format!("{connection_id}.settings")
}

fn to_json(connection: &Connection) -> Result<String> {
    serde_json::to_string(connection).map_err(|e| Error::internal(format!("connection: {e}")))
}

pub fn parse(stored: &StoredObject) -> Result<Connection> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored connection {}: {e}", stored.id)))
}

/// A connection's private settings document, as the bank layer stored it.
pub async fn settings(store: &dyn Store, scope: &Scope, connection_id: &str) -> Result<Option<String>> {
    Ok(settings_versioned(store, scope, connection_id).await?.map(|(doc, _)| doc))
}

/// The connection an internal account of the caller's tenant names (`connection_id`), staging a
/// precondition that it still exists at commit; with none named, the built-in sandbox
/// connection in sandbox mode, and a 422 in live mode, where money reaches a real bank.
pub async fn for_account(ctx: &Ctx<'_>, batch: &mut WriteBatch, given: Option<&str>) -> Result<Connection> {
    let builtin = builtin(ctx.scope);
    match given {
        None if ctx.scope.live_mode => {
            Err(Error::invalid("connection_id", "connection_id is required in live mode: name a connection (payrail connections list)"))
        }
        None => Ok(builtin),
        Some(id) if is_builtin(ctx.scope, id) => Ok(builtin),
        Some(id) => parse(&super::require(ctx, batch, KIND, id, "connection_id").await?),
    }
}

/// `GET /api/connections`: the tenant's registered connections, newest first, and in sandbox
/// mode its built-in connection last.
pub async fn list(ctx: &Ctx<'_>, page: PageSpec) -> Result<ListedPage> {
    let per_page = page.per_page;
    let found = listing::fetch(ctx, KIND, Vec::new(), page).await?;
    let mut docs: Vec<String> = found.items.into_iter().map(|o| o.doc).collect();
    let mut next_seq = found.next_seq;
    if next_seq.is_none() && !ctx.scope.live_mode {
        if docs.len() < per_page {
            docs.push(to_json(&builtin(ctx.scope))?);
        } else {
            // A full last page: the built-in connection comes on a page of its own, after every
            // registered one (no object's position is below 1).
            next_seq = Some(1);
        }
    }
    Ok(ListedPage { json: listing::json_array(docs.iter().map(String::as_str)), next_seq })
}

/// Every registered connection of every tenant, oldest first (the command line's list).
pub async fn all(store: &dyn Store) -> Result<Vec<Registered>> {
    let found = store.scan_due(KIND, REGISTERED_TERM, "9999", LIST_MAX).await?;
    found.into_iter().map(|(scope, stored)| Ok(Registered { scope, connection: parse(&stored)? })).collect()
}

/// What the command line lists (`connections list`, and the connections `bank files
/// --connection` takes): every registered connection, then the built-in sandbox connection of
/// each organization with a sandbox API key, as `GET /api/connections` shows it to that key.
pub async fn all_with_builtin(store: &dyn Store) -> Result<Vec<Registered>> {
    let mut out = all(store).await?;
    let organizations: std::collections::BTreeSet<String> =
        store.api_keys().await?.into_iter().filter(|key| !key.live_mode).map(|key| key.organization_id).collect();
    out.extend(organizations.into_iter().map(|organization_id| {
        let scope = Scope { organization_id, live_mode: false };
        Registered { connection: builtin(&scope), scope }
    }));
    Ok(out)
}

/// The connection `id`, registered or built in, as [`all_with_builtin`] lists it.
pub async fn find_listed(store: &dyn Store, id: &str) -> Result<Option<Registered>> {
    Ok(all_with_builtin(store).await?.into_iter().find(|r| r.connection.id == id))
}

/// The registered connection `id`, in whichever tenant it belongs to.
pub async fn find(store: &dyn Store, id: &str) -> Result<Option<Registered>> {
    Ok(all(store).await?.into_iter().find(|r| r.connection.id == id))
}
