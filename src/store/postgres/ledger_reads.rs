//! Ledger balance reads on PostgreSQL, many concurrent ones answered together: accounts'
//! running sums (`Store::ledger_accounts`) and an account's sums over a window of effective time
//! (`Store::ledger_window`, the as-of balances of SPEC G5).
//!
//! As with reads by id (`reads`), PostgreSQL's cost on a small machine is per statement, not per
//! row: an as-of read alone is two statements (its buckets, the few entries of its finest
//! bucket) and the accounts' sums a third, each a round trip's and a backend's worth of work.
//! Here a few reader tasks each take whatever reads wait and answer all of them with at most
//! those three statements, pipelined on one connection. A lone read goes out at once; under load
//! the groups grow while the readers are busy. Each read gets exactly the sums it would have got
//! alone: every range and every account is its own lookup, tagged with the read's part, and the
//! statements run after the read was queued, so they see every write acknowledged before it.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;

use super::reads::{self, query_unless};
use super::{Db, ledger, queue, within};
use crate::base::ledger::{Totals, Window};
use crate::error::{Error, Result};
use crate::store::ledger::{AccountState, Piece, add_row, window_pieces};

/// Reads in one group at most.
const GROUP_MAX: usize = 64;
/// Reader tasks: while one group is in the database, the next is being gathered.
const READERS: usize = 4;

/// Each range is its own primary-key lookup (`LATERAL`, the plan the single read used: a plain
/// join hashed an account's every bucket once it held most rows, BENCHMARKS.md eighteenth
/// round), tagged with the part of the read it belongs to; the inputs are read through
/// sub-selects so that the plan is made once (the store's note on plans).
const SUM_BUCKETS: &str = "SELECT r.part, coalesce(sum(s.pd), 0)::bigint, coalesce(sum(s.pc), 0)::bigint,
       coalesce(sum(s.qd), 0)::bigint, coalesce(sum(s.qc), 0)::bigint
     FROM unnest((SELECT $1::int[]), (SELECT $2::text[]), (SELECT $3::smallint[]), (SELECT $4::bigint[]), (SELECT $5::bigint[]))
       AS r(part, account_id, level, lo, hi)
     CROSS JOIN LATERAL (
       SELECT sum(b.posted_debits) AS pd, sum(b.posted_credits) AS pc, sum(b.pending_debits) AS qd, sum(b.pending_credits) AS qc
       FROM ledger_buckets b
       WHERE b.account_id = r.account_id AND b.level = r.level AND b.bucket >= r.lo AND b.bucket < r.hi) s
     GROUP BY r.part";
/// The entries of the finest buckets at a window's ends, one index range of the account's
/// postings each (`OFFSET 0` keeps each range a lookup of its own, as in `reads`).
const SUM_ENTRIES: &str = "SELECT r.part, p.status, p.debit, sum(p.amount)::bigint
     FROM unnest((SELECT $1::int[]), (SELECT $2::text[]), (SELECT $3::bigint[]), (SELECT $4::bigint[]), (SELECT $5::bigint[]))
       AS r(part, account_id, lo, hi, upto)
     CROSS JOIN LATERAL (
       SELECT x.status, x.debit, x.amount FROM ledger_postings x
       WHERE x.account_id = r.account_id AND x.status <> 2 AND x.effective_at >= r.lo AND x.effective_at <= r.hi
         AND x.version <= r.upto
       OFFSET 0) p
     GROUP BY r.part, p.status, p.debit";

/// One read.
pub enum Read {
    /// The running sums of these accounts (those that exist).
    Accounts(Vec<String>),
    /// One account's sums over a window.
    Window { account_id: String, window: Window },
}

pub enum Answer {
    Accounts(Vec<(String, AccountState)>),
    Totals(Totals),
}

pub type Queue = queue::Queue<Read, Answer>;
type Job = queue::Job<Read, Answer>;

/// Starts the readers; they stop when the queue's last sender is dropped.
pub fn start(db: Db) -> Queue {
    queue::serve(READERS, GROUP_MAX, move |group| {
        let db = db.clone();
        async move { answer(&db, group).await }
    })
}

pub async fn accounts(queue: &Queue, account_ids: &[String]) -> Result<Vec<(String, AccountState)>> {
    match queue::submit(queue, Read::Accounts(account_ids.to_vec()), "ledger reader").await? {
        Answer::Accounts(states) => Ok(states),
        Answer::Totals(_) => Err(Error::internal("the ledger reader answered an accounts read with sums")),
    }
}

pub async fn window(queue: &Queue, account_id: &str, window: &Window) -> Result<Totals> {
    let read = Read::Window { account_id: account_id.to_owned(), window: *window };
    match queue::submit(queue, read, "ledger reader").await? {
        Answer::Totals(totals) => Ok(totals),
        Answer::Accounts(_) => Err(Error::internal("the ledger reader answered a window read with accounts")),
    }
}

async fn answer(db: &Db, group: Vec<Job>) {
    let mut ask = Ask::default();
    for (index, job) in group.iter().enumerate() {
        ask.add(index, &job.item);
    }
    match look_up(db, &ask).await {
        Ok(found) => {
            for (index, job) in group.into_iter().enumerate() {
                let _ = job.done.send(found.answer(index, &job.item));
            }
        }
        Err(err) => {
            for job in group {
                let _ = job.done.send(Err(reads::each(&err)));
            }
        }
    }
}

/// What a group asks of the database, in the three statements' columns. A window read `i` has
/// two parts: `2i` for the pieces its sums add, `2i + 1` for those they subtract.
#[derive(Default)]
struct Ask {
    accounts: Vec<String>,
    buckets: BucketColumns,
    entries: EntryColumns,
}

#[derive(Default)]
struct BucketColumns {
    part: Vec<i32>,
    account: Vec<String>,
    level: Vec<i16>,
    from: Vec<i64>,
    to: Vec<i64>,
}

#[derive(Default)]
struct EntryColumns {
    part: Vec<i32>,
    account: Vec<String>,
    from: Vec<i64>,
    to: Vec<i64>,
    upto: Vec<i64>,
}

impl Ask {
    fn add(&mut self, index: usize, read: &Read) {
        match read {
            Read::Accounts(ids) => self.accounts.extend(ids.iter().cloned()),
            Read::Window { account_id, window } => {
                let (add, subtract) = window_pieces(window);
                self.pieces(part(index, false), account_id, &add);
                self.pieces(part(index, true), account_id, &subtract);
            }
        }
    }

    fn pieces(&mut self, part: i32, account_id: &str, pieces: &[Piece]) {
        for piece in pieces {
            match *piece {
                Piece::Buckets { level, from, to } => {
                    let b = &mut self.buckets;
                    b.part.push(part);
                    b.account.push(account_id.to_owned());
                    b.level.push(level);
                    b.from.push(from);
                    b.to.push(to);
                }
                Piece::Entries { from, to, upto_version } => {
                    let e = &mut self.entries;
                    e.part.push(part);
                    e.account.push(account_id.to_owned());
                    e.from.push(from);
                    e.to.push(to);
                    e.upto.push(upto_version.unwrap_or(i64::MAX));
                }
            }
        }
    }
}

fn part(index: usize, subtracted: bool) -> i32 {
    // A group holds at most GROUP_MAX reads, so the part always fits.
    (index * 2 + usize::from(subtracted)) as i32
}

/// What a group's statements returned.
struct Found {
    accounts: HashMap<String, AccountState>,
    /// Each part's sums (a part no row named sums to zero).
    parts: HashMap<i32, Result<Totals>>,
}

impl Found {
    fn answer(&self, index: usize, read: &Read) -> Result<Answer> {
        match read {
            Read::Accounts(ids) => {
                Ok(Answer::Accounts(ids.iter().filter_map(|id| self.accounts.get(id).map(|state| (id.clone(), *state))).collect()))
            }
            Read::Window { .. } => {
                let added = self.part(part(index, false))?;
                let subtracted = self.part(part(index, true))?;
                Ok(Answer::Totals(added.minus(subtracted)?))
            }
        }
    }

    fn part(&self, part: i32) -> Result<Totals> {
        match self.parts.get(&part) {
            None => Ok(Totals::default()),
            Some(Ok(totals)) => Ok(*totals),
            Some(Err(err)) => Err(reads::each(err)),
        }
    }

    /// Adds a row's sums to its part's (an overflow stays that part's error).
    fn add(&mut self, part: i32, add: impl FnOnce(Totals) -> Result<Totals>) {
        let sum = self.parts.remove(&part).unwrap_or(Ok(Totals::default())).and_then(add);
        self.parts.insert(part, sum);
    }
}

/// The group's statements, pipelined on one connection: one round trip, not three.
async fn look_up(db: &Db, ask: &Ask) -> Result<Found> {
    let client = db.get().await?;
    let outcome = within(db.deadline, async {
        let (b, e) = (&ask.buckets, &ask.entries);
        let by_accounts: [&(dyn ToSql + Sync); 1] = [&ask.accounts];
        let by_buckets: [&(dyn ToSql + Sync); 5] = [&b.part, &b.account, &b.level, &b.from, &b.to];
        let by_entries: [&(dyn ToSql + Sync); 5] = [&e.part, &e.account, &e.from, &e.to, &e.upto];
        let (accounts, buckets, entries) = tokio::try_join!(
            query_unless(ask.accounts.is_empty(), &client, ledger::ACCOUNTS, &by_accounts),
            query_unless(b.part.is_empty(), &client, SUM_BUCKETS, &by_buckets),
            query_unless(e.part.is_empty(), &client, SUM_ENTRIES, &by_entries)
        )?;
        let mut found = Found { accounts: accounts.iter().map(ledger::state_row).collect(), parts: HashMap::new() };
        for row in &buckets {
            let sums = ledger::totals_at(row, 1);
            found.add(row.get(0), |totals| totals.plus(sums));
        }
        for row in &entries {
            found.add(row.get(0), |mut totals| add_row(&mut totals, row.get(1), row.get(2), row.get(3)).map(|()| totals));
        }
        Ok(found)
    })
    .await;
    db.settle(client, outcome)
}
