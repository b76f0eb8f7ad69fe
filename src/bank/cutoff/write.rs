//! Writing a bank file from its record and frozen parts, deterministically: the same record
//! and parts give the same bytes, every time and on every instance, which is what lets a file
//! be written again after a crash and uploaded under the same name (SPEC B2).
//!
//! Entries come in the file's one order (groups in order, each group's parts in order, each
//! part's entries in order) and stream through the format writers into the spool file, hashed
//! on the way; nothing holds the whole file or its order set. The ACH trace numbers follow that
//! order (the file's `trace_start`, then +1 each, after the ODFI), so [`super::finish`] gives
//! each order its trace number by walking the same order.

use std::io::{BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};
use time::{Date, PrimitiveDateTime};

use super::files::{self, BankFile};
use super::items::{AchKey, Rail, ach_entry, iso_debtor, iso_transfer, to_offset};
use crate::bank::calendar;
use crate::bank::formats::iso20022::{self as iso, MessageHeader, Pain001Writer, PaymentGroup, Totals};
use crate::bank::formats::nacha::{FileHeader, FileIdModifier, NachaError, NachaWriter};
use crate::base::api_key::Scope;
use crate::domain::bank_id::AbaRoutingNumber;
use crate::error::{Error, Result};
use crate::store::Store;

/// A written file: its digest (lower-case hex) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub sha256: String,
    pub size_bytes: u64,
}

/// Counts and hashes what passes through to `inner`.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn io_err(context: &str, err: std::io::Error) -> Error {
    Error::internal(format!("{context}: {err}"))
}

/// Writes `file` to `path` whole or not at all (a temporary file of this writer's own, flushed,
/// then renamed over `path`).
pub async fn to_path(store: &dyn Store, scope: &Scope, file: &BankFile, path: &Path) -> Result<Written> {
    let tmp = path.with_extension(format!("{}.tmp", crate::domain::common::new_id()));
    let written = write_tmp(store, scope, file, &tmp).await;
    match written {
        Ok(written) => {
            let (from, to) = (tmp.clone(), path.to_path_buf());
            blocking(move || std::fs::rename(from, to)).await.map_err(|e| io_err(&format!("renaming {}", tmp.display()), e))?;
            Ok(written)
        }
        Err(err) => {
            let _ = std::fs::remove_file(&tmp);
            Err(err)
        }
    }
}

async fn write_tmp(store: &dyn Store, scope: &Scope, file: &BankFile, tmp: &Path) -> Result<Written> {
    let sink = crate::base::private_fs::create_options().open(tmp).map_err(|e| io_err(&format!("creating {}", tmp.display()), e))?;
    let out = Hashing { inner: BufWriter::with_capacity(256 * 1024, sink), hasher: Sha256::new(), bytes: 0 };
    let out = render(store, scope, file, out).await?;
    let written = Written { sha256: hex(&out.hasher.finalize()), size_bytes: out.bytes };
    let sink = out.inner.into_inner().map_err(|e| io_err("flushing the spool file", e.into_error()))?;
    // Off the runtime's threads: an fsync of a large file can take a second while the disk is
    // busy, and the API's requests are served on those threads.
    blocking(move || sink.sync_all()).await.map_err(|e| io_err("flushing the spool file", e))?;
    Ok(written)
}

/// Runs a blocking file operation on tokio's blocking pool.
async fn blocking(op: impl FnOnce() -> std::io::Result<()> + Send + 'static) -> std::io::Result<()> {
    tokio::task::spawn_blocking(op).await.unwrap_or_else(|join| Err(std::io::Error::other(join)))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Streams the file's bytes to `out`.
pub async fn render<W: Write>(store: &dyn Store, scope: &Scope, file: &BankFile, out: W) -> Result<W> {
    match Rail::parse(&file.rail) {
        Some(Rail::Ach) => render_ach(store, scope, file, out).await,
        Some(Rail::Iso(rail)) => render_iso(store, scope, file, rail, out).await,
        None => Err(Error::internal(format!("bank file {} has an unknown rail {:?}", file.id, file.rail))),
    }
}

fn nacha_err(file: &BankFile, err: NachaError) -> Error {
    Error::internal(format!("bank file {}: {err}", file.id))
}

/// The NACHA file header a file's record fixes; the creation time is New York's.
pub fn ach_header(file: &BankFile) -> Result<FileHeader> {
    let ach = file.header.ach.as_ref().ok_or_else(|| Error::internal(format!("ach file {} has no ACH identities", file.id)))?;
    let eastern = calendar::to_eastern(to_offset(file.header.created_at));
    let modifier = file.header.file_id_modifier.chars().next().and_then(FileIdModifier::from_char);
    Ok(FileHeader {
        immediate_destination: AbaRoutingNumber::parse("immediate_destination", &ach.immediate_destination)?,
        immediate_origin: ach.immediate_origin.clone(),
        created: PrimitiveDateTime::new(eastern.date(), eastern.time()),
        file_id_modifier: modifier.ok_or_else(|| Error::internal(format!("ach file {} has no file id modifier", file.id)))?,
        immediate_destination_name: ach.immediate_destination_name.clone(),
        immediate_origin_name: ach.immediate_origin_name.clone(),
        reference_code: String::new(),
    })
}

async fn render_ach<W: Write>(store: &dyn Store, scope: &Scope, file: &BankFile, out: W) -> Result<W> {
    let header = ach_header(file)?;
    let ach = file.header.ach.as_ref().expect("checked by ach_header");
    let created_at = file.header.created_at;
    let mut writer = NachaWriter::new(out, &header).map_err(|e| nacha_err(file, e))?.first_trace(first_trace(file));
    for group in &file.groups {
        let key = AchKey::parse(&group.key)?;
        let spec = key.spec(ach, created_at, group.credit_total > 0, group.debit_total > 0);
        for n in 0..group.parts {
            let part = files::part(store, scope, file, group.index, n).await?;
            for item in &part.items {
                let (_, entry) = ach_entry(item, created_at)?;
                writer.push(&spec, entry).map_err(|e| nacha_err(file, e))?;
            }
        }
    }
    let (out, _) = writer.finish().map_err(|e| nacha_err(file, e))?;
    Ok(out)
}

/// The trace sequence of an ACH file's first entry.
pub fn first_trace(file: &BankFile) -> u32 {
    file.trace_start.unwrap_or(1)
}

/// `MsgId`: the file's name without its extension (unique per connection, rail and minute).
pub fn message_id(file: &BankFile) -> String {
    file.name.rsplit_once('.').map_or(file.name.as_str(), |(stem, _)| stem).to_owned()
}

async fn render_iso<W: Write>(store: &dyn Store, scope: &Scope, file: &BankFile, rail: iso::Rail, out: W) -> Result<W> {
    let settings = file
        .header
        .iso20022
        .as_ref()
        .ok_or_else(|| Error::internal(format!("{} file {} has no ISO 20022 identities", file.rail, file.id)))?;
    let execution_date = Date::parse(&file.header.execution_date, time::macros::format_description!("[year]-[month]-[day]"))
        .map_err(|e| Error::internal(format!("bank file {}: execution date: {e}", file.id)))?;
    // The headers carry counts and control sums before the transfers: a first pass adds them up.
    let mut total = Totals::default();
    let mut group_totals = Vec::with_capacity(file.groups.len());
    for group in &file.groups {
        let mut totals = Totals::default();
        for n in 0..group.parts {
            for item in files::part(store, scope, file, group.index, n).await?.items {
                let transfer = iso_transfer(rail, &item)?;
                totals.add(transfer.amount, transfer.currency)?;
                total.add(transfer.amount, transfer.currency)?;
            }
        }
        group_totals.push(totals);
    }
    let message_id = message_id(file);
    let header = MessageHeader {
        message_id: message_id.clone(),
        created_at: to_offset(file.header.created_at),
        initiating_party_name: settings.initiating_party_name.clone(),
        rail,
    };
    let mut writer = Pain001Writer::begin(out, &header, total)?;
    for (group, totals) in file.groups.iter().zip(group_totals) {
        let debtor =
            group.debtor.as_ref().ok_or_else(|| Error::internal(format!("bank file {}: group {} has no debtor", file.id, group.index)))?;
        let payment_group = PaymentGroup {
            id: format!("{message_id}-{}", group.index + 1),
            rail,
            execution_date,
            debtor: iso_debtor(rail, debtor, Some(&settings.debtor_agent_bic))?,
            category_purpose: None,
        };
        writer.next_group(&payment_group, totals)?;
        for n in 0..group.parts {
            for item in files::part(store, scope, file, group.index, n).await?.items {
                writer.add(&iso_transfer(rail, &item)?)?;
            }
        }
    }
    writer.finish()
}
