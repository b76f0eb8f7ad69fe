//! The records of bank files (SPEC B6): a `bank_file` document per file, in its connection's
//! tenant, and the `bank_file_part` documents that freeze what it carries.
//!
//! A file is recorded before any order is claimed into it, with everything its header will say
//! (creation instant, file id modifier, the connection's identities), so that writing it again
//! after a crash gives the same bytes. Orders are claimed into it in chunks; each chunk commit
//! adds the part documents holding the chunk's entries (one part per group it touched) and the
//! file document's updated totals, so parts and totals never disagree.
//!
//! Status: `claimed` (orders being claimed, or claimed and not yet written), `written` (its
//! bytes are fixed: sha256 recorded), `uploaded` (the bank has it; its orders are `sent`).
//!
//! Parts are named `<file id>.<group>.<n>` (n counting from 0 within the group), so the file's
//! entries are read back in one fixed order without any list query: groups in order, each
//! group's parts in order, each part's entries in order.

use serde::{Deserialize, Serialize};

use super::items::{AccountSnap, Item};
use crate::bank::connection::{AchSettings, IsoSettings};
use crate::base::api_key::Scope;
use crate::base::time::Timestamp;
use crate::domain::kinds;
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, ObjectRecord, Store, StoredObject, Term, Write};

pub const KIND: &str = kinds::BANK_FILE;
pub const PART_KIND: &str = kinds::BANK_FILE_PART;
/// Every file carries it (its creation instant), so the command line lists files of every
/// tenant (`Store::scan_due`).
const AT_TERM: &str = "bank_file_at";
/// `<connection>/<rail>/<yyyymmdd>`: the files of a connection, rail and day, counted for the
/// next file id modifier.
const DAY_TERM: &str = "bank_file_day";
/// Files `payrail bank files` lists at most.
pub const LIST_MAX: usize = 10_000;

/// Where a file is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Claimed,
    Written,
    Uploaded,
}

impl FileStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Claimed => "claimed",
            FileStatus::Written => "written",
            FileStatus::Uploaded => "uploaded",
        }
    }
}

/// What the file's header says, fixed when the file is recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeaderValues {
    /// The creation instant the header carries (NACHA: as Eastern local time; ISO: `CreDtTm`).
    pub created_at: Timestamp,
    /// The day's n-th file of this connection and rail (0-based).
    pub sequence: usize,
    /// NACHA's file id modifier for `sequence` (`A` to `Z`, then `0` to `9`).
    pub file_id_modifier: String,
    /// The connection's ACH identities (ach files).
    pub ach: Option<AchSettings>,
    /// The connection's ISO 20022 identities (wire, rtp and sepa files).
    pub iso20022: Option<IsoSettings>,
    /// `ReqdExctnDt` (ISO files), `YYYY-MM-DD`: the file's day in the connection's time zone,
    /// moved to the rail's next business day when it is not one (`cutoff::business_day`).
    pub execution_date: String,
    /// The day `sequence` counts in, `yyyymmdd` (ACH: New York's, the header's date; ISO: the
    /// connection's).
    pub day: String,
}

/// One batch (ACH: SEC code, same-day flag, company entry description) or payment group
/// (ISO: the paying account) of the file, with its running totals.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Group {
    pub index: usize,
    /// What makes the group (compared to place an order in it).
    pub key: String,
    pub count: u64,
    pub credit_total: u64,
    pub debit_total: u64,
    /// Parts written for this group so far (`<file>.<index>.<0..parts>`).
    pub parts: usize,
    /// ISO groups: the paying account as it was when its first order was claimed.
    pub debtor: Option<AccountSnap>,
}

/// A bank file's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BankFile {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub connection_id: String,
    pub name: String,
    /// `outbound` (Payrail to the bank).
    pub direction: String,
    /// `ach`, `wire`, `rtp` or `sepa`.
    pub rail: String,
    pub status: FileStatus,
    pub order_count: u64,
    /// Sums of the entries' amounts in minor units (ACH: cents), credits and debits apart.
    pub credit_total: u64,
    pub debit_total: u64,
    pub sha256: Option<String>,
    pub size_bytes: Option<u64>,
    pub header: HeaderValues,
    pub groups: Vec<Group>,
    /// ACH: the trace sequence of the file's first entry, taken from the connection's counter
    /// when the file is written (`super::traces`); files recorded before there was one start at 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_start: Option<u32>,
    pub upload_attempts: u32,
    pub last_error: Option<String>,
    /// When a failed upload is tried again by the scheduled worker (backoff).
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub written_at: Option<Timestamp>,
    pub uploaded_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

/// A stored file and the version it was read at.
#[derive(Debug, Clone)]
pub struct Stored {
    pub scope: Scope,
    pub file: BankFile,
    pub version: i64,
}

/// A frozen slice of a file's entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    pub file_id: String,
    pub group: usize,
    pub items: Vec<Item>,
}

impl BankFile {
    pub fn day_key(connection_id: &str, rail: &str, day: &str) -> String {
        format!("{connection_id}/{rail}/{day}")
    }

    fn terms(&self) -> Vec<Term> {
        vec![
            Term::new(AT_TERM, self.created_at.to_string()),
            Term::new("connection_id", &self.connection_id),
            Term::new("status", self.status.as_str()),
            Term::new("rail", &self.rail),
            Term::new(DAY_TERM, Self::day_key(&self.connection_id, &self.rail, &self.header.day)),
        ]
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::internal(format!("bank file: {e}")))
    }

    fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        Ok(ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: Some(self.connection_id.clone()),
            created_at: self.created_at,
            doc: self.to_json()?,
            terms: self.terms(),
        })
    }

    /// The part `n` of group `group`'s id.
    pub fn part_id(&self, group: usize, n: usize) -> String {
        format!("{}.{group}.{n}", self.id)
    }
}

impl Stored {
    /// The insert of a new file.
    pub fn insert(&self) -> Result<Write> {
        Ok(Write::Insert(self.file.record(&self.scope)?))
    }

    /// The replace of this file by `next`, guarded by the version read.
    pub fn replace(&self, next: &BankFile) -> Result<Write> {
        Ok(Write::Replace { record: next.record(&self.scope)?, expected_version: self.version })
    }
}

/// The insert of a part.
pub fn part_record(scope: &Scope, file: &BankFile, group: usize, n: usize, part: &Part) -> Result<Write> {
    let doc = serde_json::to_string(part).map_err(|e| Error::internal(format!("bank file part: {e}")))?;
    Ok(Write::Insert(ObjectRecord {
        id: file.part_id(group, n),
        kind: PART_KIND,
        scope: scope.clone(),
        parent_id: Some(file.id.clone()),
        created_at: file.created_at,
        doc,
        terms: Vec::new(),
    }))
}

fn parse(scope: &Scope, stored: StoredObject) -> Result<Stored> {
    let file: BankFile = serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored bank file {}: {e}", stored.id)))?;
    Ok(Stored { scope: scope.clone(), file, version: stored.version })
}

/// The file `id` in `scope`.
pub async fn get(store: &dyn Store, scope: &Scope, id: &str) -> Result<Option<Stored>> {
    store.get(KIND, scope, id).await?.map(|s| parse(scope, s)).transpose()
}

/// The part `n` of group `group` of `file`.
pub async fn part(store: &dyn Store, scope: &Scope, file: &BankFile, group: usize, n: usize) -> Result<Part> {
    let id = file.part_id(group, n);
    let stored = store.get(PART_KIND, scope, &id).await?.ok_or_else(|| Error::internal(format!("bank file part {id} is missing")))?;
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored bank file part {id}: {e}")))
}

/// The ids of the orders `file` carries, in the file's order (its groups in order, each
/// group's parts in order): what `payrail bank files --json` lists (SPEC B6).
pub async fn order_ids(store: &dyn Store, scope: &Scope, file: &BankFile) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(usize::try_from(file.order_count).unwrap_or(0));
    for group in &file.groups {
        for n in 0..group.parts {
            ids.extend(part(store, scope, file, group.index, n).await?.items.into_iter().map(|item| item.order_id));
        }
    }
    Ok(ids)
}

/// The unique key that keeps two files of one connection from sharing a name.
pub fn name_key(connection_id: &str, name: &str) -> String {
    format!("bank_file_name/{connection_id}/{name}")
}

/// How many files the connection made for `rail` on `day`.
pub async fn count_of_day(store: &dyn Store, scope: &Scope, day_key: &str) -> Result<usize> {
    let query = ListQuery {
        kind: KIND,
        scope: scope.clone(),
        filters: vec![Filter::Eq { name: DAY_TERM.into(), value: day_key.into() }],
        after_seq: None,
        limit: 64,
    };
    Ok(store.list(&query).await?.items.len())
}

/// The connection's files not yet uploaded, oldest first.
pub async fn unfinished(store: &dyn Store, scope: &Scope, connection_id: &str) -> Result<Vec<Stored>> {
    let filters = vec![
        Filter::Eq { name: "connection_id".into(), value: connection_id.into() },
        Filter::AnyOf { name: "status".into(), values: vec!["claimed".into(), "written".into()] },
    ];
    let mut out = of_connection_where(store, scope, filters).await?;
    out.reverse();
    Ok(out)
}

/// The connection's files, newest first (at most [`LIST_MAX`]).
pub async fn of_connection(store: &dyn Store, scope: &Scope, connection_id: &str) -> Result<Vec<Stored>> {
    of_connection_where(store, scope, vec![Filter::Eq { name: "connection_id".into(), value: connection_id.into() }]).await
}

async fn of_connection_where(store: &dyn Store, scope: &Scope, filters: Vec<Filter>) -> Result<Vec<Stored>> {
    let mut out = Vec::new();
    let mut after_seq = None;
    loop {
        let query = ListQuery { kind: KIND, scope: scope.clone(), filters: filters.clone(), after_seq, limit: 200 };
        let page = store.list(&query).await?;
        for item in page.items {
            out.push(parse(scope, item)?);
        }
        match page.next_seq {
            Some(seq) if out.len() < LIST_MAX => after_seq = Some(seq),
            _ => return Ok(out),
        }
    }
}

/// Every file of every tenant, oldest first (at most [`LIST_MAX`]).
pub async fn all(store: &dyn Store) -> Result<Vec<Stored>> {
    let found = store.scan_due(KIND, AT_TERM, "9999", LIST_MAX).await?;
    found.into_iter().map(|(scope, stored)| parse(&scope, stored)).collect()
}

/// The file `id`, in whichever tenant it belongs to.
pub async fn find(store: &dyn Store, id: &str) -> Result<Option<Stored>> {
    Ok(all(store).await?.into_iter().find(|s| s.file.id == id))
}
