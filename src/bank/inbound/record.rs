//! The records of files received from a bank (SPEC B5, B6): an `inbound_bank_file` document per
//! file (what it was, what it did), and its bytes kept in the database in chunks, so any
//! instance can show them (`payrail bank files show`) and none depends on its own disk.
//!
//! A file is known by its connection and content hash: the unique key
//! `bank_inbound/<connection>/<sha256>` is taken in the very commit that applies the file, so
//! a file is applied once whatever crashes, retries and instances happen, and the same bytes
//! dropped again under any name change nothing.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::base::api_key::Scope;
use crate::base::time::Timestamp;
use crate::domain::kinds;
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, ObjectRecord, Store, StoredObject, Term, Write};

pub const KIND: &str = kinds::BANK_INBOUND_FILE;
pub const CHUNK_KIND: &str = kinds::BANK_INBOUND_FILE_CHUNK;
/// Bytes of a file per kept chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Every file carries it (its arrival), so the command line lists files of every tenant.
const AT_TERM: &str = "bank_inbound_at";
/// `<connection>/<sha256>`: the fast check that a file was seen before.
const KEY_TERM: &str = "bank_inbound_key";
/// The parameter a taken content key fails with (a racing process applied the file first).
pub const UNIQUE_PARAMETER: &str = "bank_inbound_file";
/// Notes (answers that matched nothing) kept per file at most; the count is always kept.
pub const NOTES_MAX: usize = 100;

/// What became of a received file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboundStatus {
    /// Read and applied, all of it in one commit.
    Applied,
    /// It could not be read: moved aside at the bank, nothing changed.
    Rejected,
}

impl InboundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InboundStatus::Applied => "applied",
            InboundStatus::Rejected => "rejected",
        }
    }
}

/// What one applied file did, counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Effects {
    /// Answers the file held (returns, corrections, statuses, entries, balances).
    pub answers: u64,
    /// Payment orders it moved (completed, failed, returned).
    pub orders: u64,
    /// Their ids, in id order (files applied by releases before 2026-11-29 kept the count alone).
    #[serde(default)]
    pub order_ids: Vec<String>,
    pub transactions: u64,
    pub returns: u64,
    pub corrections: u64,
    pub balance_reports: u64,
    /// Expected payments it reconciled.
    pub reconciled: u64,
    /// Answers that changed nothing and why (the first [`NOTES_MAX`]).
    pub notes: Vec<String>,
    pub notes_total: u64,
}

impl Effects {
    pub fn note(&mut self, note: String) {
        self.notes_total += 1;
        if self.notes.len() < NOTES_MAX {
            self.notes.push(note);
        }
    }
}

/// A received file's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboundFile {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub connection_id: String,
    /// Its name in the bank's inbound folder.
    pub name: String,
    pub direction: String,
    /// `nacha_returns`, `pain.002`, `camt.053`, `camt.054`; absent when it could not be read.
    pub format: Option<String>,
    pub status: InboundStatus,
    /// Lowercase hex; `unread:NAME:SIZE` for a file rejected unread (too large).
    pub sha256: String,
    pub size_bytes: u64,
    pub effects: Effects,
    /// Why it was rejected.
    pub error: Option<String>,
    /// Where it was moved at the bank when rejected.
    pub aside_name: Option<String>,
    pub chunks: usize,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A stored received file and its tenant.
#[derive(Debug, Clone)]
pub struct Stored {
    pub scope: Scope,
    pub file: InboundFile,
}

#[derive(Serialize, Deserialize)]
struct Chunk {
    file_id: String,
    n: usize,
    base64: String,
}

/// The unique key of a file's content at a connection.
pub fn unique_key(connection_id: &str, sha256: &str) -> String {
    format!("bank_inbound/{connection_id}/{sha256}")
}

impl InboundFile {
    fn terms(&self) -> Vec<Term> {
        vec![
            Term::new(AT_TERM, self.created_at.to_string()),
            Term::new("connection_id", &self.connection_id),
            Term::new("status", self.status.as_str()),
            Term::new(KEY_TERM, format!("{}/{}", self.connection_id, self.sha256)),
        ]
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::internal(format!("inbound bank file: {e}")))
    }

    /// The writes that record this file and keep its bytes, with the unique key of its content.
    pub fn writes(&self, scope: &Scope, bytes: &[u8]) -> Result<Vec<Write>> {
        let mut out = vec![
            Write::Unique {
                key: unique_key(&self.connection_id, &self.sha256),
                parameter: UNIQUE_PARAMETER.into(),
                message: format!("the bank file {} ({}) was received before", self.name, self.sha256),
            },
            Write::Insert(ObjectRecord {
                id: self.id.clone(),
                kind: KIND,
                scope: scope.clone(),
                parent_id: Some(self.connection_id.clone()),
                created_at: self.created_at,
                doc: self.to_json()?,
                terms: self.terms(),
            }),
        ];
        for (n, piece) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let chunk = Chunk { file_id: self.id.clone(), n, base64: base64::engine::general_purpose::STANDARD.encode(piece) };
            out.push(Write::Insert(ObjectRecord {
                id: format!("{}.{n}", self.id),
                kind: CHUNK_KIND,
                scope: scope.clone(),
                parent_id: Some(self.id.clone()),
                created_at: self.created_at,
                doc: serde_json::to_string(&chunk).map_err(|e| Error::internal(format!("inbound chunk: {e}")))?,
                terms: Vec::new(),
            }));
        }
        Ok(out)
    }
}

/// How many chunks `size` bytes take.
pub fn chunk_count(size: usize) -> usize {
    size.div_ceil(CHUNK_BYTES)
}

fn parse(scope: &Scope, stored: &StoredObject) -> Result<Stored> {
    let file = serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored inbound bank file {}: {e}", stored.id)))?;
    Ok(Stored { scope: scope.clone(), file })
}

/// The file with this content at `connection_id`, if it was received before.
pub async fn seen(store: &dyn Store, scope: &Scope, connection_id: &str, sha256: &str) -> Result<Option<Stored>> {
    let query = ListQuery {
        kind: KIND,
        scope: scope.clone(),
        filters: vec![Filter::Eq { name: KEY_TERM.into(), value: format!("{connection_id}/{sha256}") }],
        after_seq: None,
        limit: 1,
    };
    store.list(&query).await?.items.first().map(|s| parse(scope, s)).transpose()
}

/// The connection's received files, newest first (at most `max`).
pub async fn of_connection(store: &dyn Store, scope: &Scope, connection_id: &str, max: usize) -> Result<Vec<Stored>> {
    let mut out = Vec::new();
    let mut after_seq = None;
    let filters = vec![Filter::Eq { name: "connection_id".into(), value: connection_id.into() }];
    loop {
        let query = ListQuery { kind: KIND, scope: scope.clone(), filters: filters.clone(), after_seq, limit: 200 };
        let page = store.list(&query).await?;
        for item in &page.items {
            out.push(parse(scope, item)?);
        }
        match page.next_seq {
            Some(seq) if out.len() < max => after_seq = Some(seq),
            _ => return Ok(out),
        }
    }
}

/// Every received file of every tenant, oldest first (at most `max`).
pub async fn all(store: &dyn Store, max: usize) -> Result<Vec<Stored>> {
    let found = store.scan_due(KIND, AT_TERM, "9999", max).await?;
    found.iter().map(|(scope, stored)| parse(scope, stored)).collect()
}

/// The received file `id`, in whichever tenant it belongs to.
pub async fn find(store: &dyn Store, id: &str, max: usize) -> Result<Option<Stored>> {
    Ok(all(store, max).await?.into_iter().find(|s| s.file.id == id))
}

/// The file's bytes, exactly as received, checked against its recorded SHA-256.
pub async fn content(store: &dyn Store, stored: &Stored) -> Result<Vec<u8>> {
    use sha2::Digest as _;
    let mut bytes = Vec::with_capacity(stored.file.size_bytes as usize);
    for n in 0..stored.file.chunks {
        let id = format!("{}.{n}", stored.file.id);
        let doc =
            store.get(CHUNK_KIND, &stored.scope, &id).await?.ok_or_else(|| Error::internal(format!("inbound chunk {id} is missing")))?;
        let chunk: Chunk = serde_json::from_str(&doc.doc).map_err(|e| Error::internal(format!("inbound chunk {id}: {e}")))?;
        let piece = base64::engine::general_purpose::STANDARD
            .decode(chunk.base64)
            .map_err(|e| Error::internal(format!("inbound chunk {id}: {e}")))?;
        bytes.extend_from_slice(&piece);
    }
    let sha = crate::bank::cutoff::write::hex(&sha2::Sha256::digest(&bytes));
    if sha != stored.file.sha256 {
        return Err(Error::internal(format!("the kept bytes of bank file {} do not match its sha256", stored.file.id)));
    }
    Ok(bytes)
}
