//! The sandbox bank's side of each sandbox connection's folders (SPEC B7): it takes the files
//! Payrail left in `outbound/`, and a step after each arrived, answers it in `inbound/`
//! ([`super::answers`]); the returns follow a step later. What it answered is kept beside the
//! folders (`answered/NAME.json`: the answers still to come and when; a file answered whole is
//! moved to `answered/NAME`), so a restart resumes where it was; an answer written again after a crash has the same bytes, and the inbound
//! reader applies it once.
//!
//! Each connection's folder records its tenant (`tenant.json`), so the bank finds its
//! connections again after a restart without asking the store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{answers, payments};
use crate::app::AppState;
use crate::bank::connection::sandbox_folders;
use crate::base::api_key::Scope;
use crate::base::log_limit::LogLimit;
use crate::base::private_fs;
use crate::domain::bank_answer::{AccountRef, Party};
use crate::domain::connection::Registered;
use crate::store::{Filter, ListQuery};

const TENANT_FILE: &str = "tenant.json";
const ANSWERED: &str = "answered";
/// Sent files answered per connection and pass at most.
const FILES_PER_PASS: usize = 50;

#[derive(Serialize, Deserialize)]
struct Tenant {
    organization_id: String,
}

/// What the bank still owes a sent file: the answers due at `due_unix_ms`.
#[derive(Serialize, Deserialize, Default)]
struct Marker {
    due_unix_ms: u64,
    later: Vec<(String, String)>,
}

/// A connection's folders on the bank's side.
struct Folders {
    outbound: PathBuf,
    inbound: PathBuf,
    answered: PathBuf,
}

impl Folders {
    fn of(data_dir: &Path, connection_id: &str) -> Folders {
        let (outbound, inbound) = sandbox_folders(data_dir, connection_id);
        let answered = outbound.parent().map(|root| root.join(ANSWERED)).unwrap_or_else(|| PathBuf::from(ANSWERED));
        Folders { outbound, inbound, answered }
    }
}

/// Makes the connection's folders (and records its tenant) before its first cut-off.
pub fn open(data_dir: &Path, registered: &Registered) -> anyhow::Result<()> {
    let folders = Folders::of(data_dir, &registered.connection.id);
    for dir in [&folders.outbound, &folders.inbound, &folders.answered] {
        private_fs::ensure_private_dir(dir)?;
    }
    let tenant = folders.answered.with_file_name(TENANT_FILE);
    if !tenant.exists() {
        let json = serde_json::to_vec(&Tenant { organization_id: registered.scope.organization_id.clone() })?;
        private_fs::replace(&tenant, &json)?;
    }
    Ok(())
}

/// Answers what is due in every sandbox connection's folders, then reads each connection's
/// inbound folder (as the bank worker does for live connections).
pub async fn answer_all(state: &AppState, step_ms: u64, log: &LogLimit) -> anyhow::Result<()> {
    let root = state.config.data_dir.join("sandbox-bank");
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(()) };
    let step = Duration::from_millis(step_ms);
    for entry in entries.flatten() {
        let Some(registered) = registered_of(&entry.path()) else { continue };
        let folders = Folders::of(&state.config.data_dir, &registered.connection.id);
        let (folders, answered) = tokio::task::spawn_blocking(move || {
            let answered = answer_due(&folders, step);
            (folders, answered)
        })
        .await?;
        let connection = &registered.connection.id;
        if let Err(err) = answered {
            super::warn_of(log, connection, "the sandbox bank could not answer a file", &err);
        }
        if let Err(err) = book_expected(state, &registered, &folders, step).await {
            super::warn_of(log, connection, "the sandbox bank could not book an expected payment", &err);
        }
        let (store, data_dir, now) = (state.store.clone(), &state.config.data_dir, state.clock.now());
        if let Err(err) = crate::bank::inbound::poll(store, &state.secrets, data_dir, &registered, now, Duration::ZERO).await {
            super::warn_of(log, connection, "a sandbox inbound folder could not be read; it is read again next pass", &err);
        }
    }
    Ok(())
}

/// Books a payment matching each unreconciled expected payment of the connection's accounts a
/// step after its last change (so a client can still update it), as Modern Treasury's sandbox
/// does within seconds (SPEC B7): a `camt.054` entry on the expected
/// payment's account, of its lower bound (its upper one when the lower is zero; nothing when
/// neither is positive), on its first possible day, of its type. The inbound reader then makes the transaction and reconciles it.
async fn book_expected(state: &AppState, registered: &Registered, folders: &Folders, step: Duration) -> anyhow::Result<()> {
    use crate::domain::expected_payment::{self, ExpectedPayment};
    let scope = &registered.scope;
    let settled_before = state.clock.now().plus_micros(-(step.as_micros() as i64));
    let filters = vec![Filter::Eq { name: "status".into(), value: "unreconciled".into() }];
    let page =
        state.store.list(&ListQuery { kind: expected_payment::KIND, scope: scope.clone(), filters, after_seq: None, limit: 100 }).await?;
    let mut numbers: HashMap<String, Option<String>> = HashMap::new();
    for stored in page.items {
        let expected: ExpectedPayment = serde_json::from_str(&stored.doc)?;
        let marker = folders.answered.join(format!("expected-{}.json", expected.id));
        if expected.updated_at > settled_before || marker.exists() {
            continue;
        }
        if !numbers.contains_key(&expected.internal_account_id) {
            let number = account_number(state, registered, &expected.internal_account_id).await?;
            numbers.insert(expected.internal_account_id.clone(), number);
        }
        let Some(number) = numbers[&expected.internal_account_id].clone() else { continue };
        let today = state.clock.now().to_string()[..10].to_owned();
        let payer = match &expected.counterparty_id {
            Some(id) => party_of(state, scope, id).await?,
            None => None,
        };
        match answers::expected_booking(&expected, number, payer, &today).map_err(anyhow::Error::msg)? {
            Some((name, content)) => private_fs::replace(&folders.inbound.join(name), &content)?,
            None => tracing::info!(
                expected_payment = %expected.id,
                "the sandbox bank books nothing for an expected payment whose amount bounds allow no positive amount"
            ),
        }
        private_fs::replace(&marker, b"{}")?;
    }
    Ok(())
}

/// Counterparty `id` as a statement names it: its name and its oldest external account's number
/// (an IBAN as an IBAN); `None` when it has neither.
async fn party_of(state: &AppState, scope: &Scope, id: &str) -> anyhow::Result<Option<Party>> {
    use crate::domain::{counterparty, external_account};
    let name = match state.store.get(counterparty::KIND, scope, id).await? {
        Some(stored) => serde_json::from_str::<counterparty::Counterparty>(&stored.doc)?.name,
        None => None,
    };
    let accounts = external_account::of_counterparty(state.store.as_ref(), scope, id).await?;
    let detail = accounts.iter().flat_map(|a| a.account_details.iter()).find(|d| d.account_number.is_some());
    let mut account = AccountRef::default();
    if let Some(detail) = detail {
        match detail.account_number_type.as_str() {
            "iban" => account.iban = detail.account_number.clone(),
            _ => account.account_number = detail.account_number.clone(),
        }
    }
    Ok(Party { name, account }.named())
}

/// The account number of internal account `id`, if it is on the sandbox connection.
async fn account_number(state: &AppState, registered: &Registered, id: &str) -> anyhow::Result<Option<String>> {
    use crate::domain::internal_account;
    let Some(stored) = state.store.get(internal_account::KIND, &registered.scope, id).await? else { return Ok(None) };
    let account = internal_account::parse(&stored)?;
    if account.connection.id != registered.connection.id {
        return Ok(None);
    }
    Ok(account.account_details.iter().find_map(|d| d.account_number.clone()))
}

/// The sandbox connection whose folder is `dir`, if it is one.
fn registered_of(dir: &Path) -> Option<Registered> {
    let tenant: Tenant = serde_json::from_slice(&std::fs::read(dir.join(TENANT_FILE)).ok()?).ok()?;
    let scope = Scope { organization_id: tenant.organization_id, live_mode: false };
    let registered = super::connection_of(scope);
    (dir.file_name()?.to_str()? == registered.connection.id).then_some(registered)
}

/// Answers the sent files a step old and writes the later answers that came due.
fn answer_due(folders: &Folders, step: Duration) -> anyhow::Result<()> {
    let now = SystemTime::now();
    let mut names: Vec<(String, SystemTime)> = Vec::new();
    for entry in std::fs::read_dir(&folders.outbound)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if meta.is_file() && !name.starts_with('.') && !name.ends_with(crate::bank::transport::PART_SUFFIX) {
            names.push((name, meta.modified()?));
        }
    }
    names.sort();
    for (name, arrived) in names.into_iter().take(FILES_PER_PASS) {
        let marker_path = folders.answered.join(format!("{name}.json"));
        let done = match std::fs::read(&marker_path) {
            Ok(bytes) => finish_later(folders, &marker_path, serde_json::from_slice(&bytes)?, now)?,
            Err(_) if now.duration_since(arrived).unwrap_or_default() >= step => answer_file(folders, &name, arrived, step, &marker_path)?,
            Err(_) => false,
        };
        if done {
            // Answered whole: out of the way, so `outbound/` holds only what is still owed.
            std::fs::rename(folders.outbound.join(&name), folders.answered.join(&name))?;
        }
    }
    Ok(())
}

/// Answers a sent file now (and records what it owes later); whether it is answered whole.
fn answer_file(folders: &Folders, name: &str, arrived: SystemTime, step: Duration, marker_path: &Path) -> anyhow::Result<bool> {
    let bytes = std::fs::read(folders.outbound.join(name))?;
    let arrived_at = time::OffsetDateTime::from(arrived);
    let answers = payments::read(&bytes).and_then(|payments| answers::answer(name, &payments, arrived_at));
    let answers = match answers {
        Ok(answers) => answers,
        Err(err) => {
            tracing::warn!(file = name, error = %err, "the sandbox bank cannot read a file it was sent; it answers nothing");
            answers::Answers::default()
        }
    };
    for (answer, content) in &answers.now {
        private_fs::replace(&folders.inbound.join(answer), content)?;
    }
    let due = arrived + step * 2;
    let due_unix_ms = due.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
    let later: Vec<(String, String)> = answers.later.into_iter().map(|(n, c)| (n, String::from_utf8_lossy(&c).into_owned())).collect();
    let whole = later.is_empty();
    private_fs::replace(marker_path, &serde_json::to_vec(&Marker { due_unix_ms, later })?)?;
    Ok(whole)
}

/// Writes the later answers of a sent file once due; whether it is answered whole.
fn finish_later(folders: &Folders, marker_path: &Path, marker: Marker, now: SystemTime) -> anyhow::Result<bool> {
    let now_ms = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
    if marker.later.is_empty() {
        return Ok(true);
    }
    if now_ms < marker.due_unix_ms {
        return Ok(false);
    }
    for (answer, content) in &marker.later {
        private_fs::replace(&folders.inbound.join(answer), content.as_bytes())?;
    }
    private_fs::replace(marker_path, &serde_json::to_vec(&Marker { due_unix_ms: marker.due_unix_ms, later: Vec::new() })?)?;
    Ok(true)
}
