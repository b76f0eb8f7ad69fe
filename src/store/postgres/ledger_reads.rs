//! Ledger balance reads on PostgreSQL, many concurrent ones answered together: accounts'
//! running sums (`Store::ledger_accounts`) and an account's sums over a window of effective time
//! (`Store::ledger_window`, the as-of balances of SPEC G5).
//!
//! As with reads by id (`reads`), PostgreSQL's cost on a small machine is per statement, not per
//! row: each statement is a round trip's and a backend's worth of work. Here a few reader tasks
//! each take whatever reads wait and answer all of them with at most two statements (the
//! accounts' sums, and every window's pieces), pipelined on one connection. A lone read goes
//! out at once; under load the groups grow while the readers are busy. Each read gets exactly
//! the sums it would have got alone: every range and every account is its own lookup, tagged
//! with the read's part, and the statements run after the read was queued, so they see every
//! write acknowledged before it.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;

use super::reads::{self, query_unless};
use super::{Db, ledger, queue, within};
use crate::base::ledger::{Totals, Window};
use crate::error::{Error, Result};
use crate::store::ledger::{AccountState, BUCKETS_FROM, Piece, add_row, window_pieces};

/// Reads in one group at most.
const GROUP_MAX: usize = 64;
/// Reader tasks: while one group is in the database, the next is being gathered.
const READERS: usize = 4;

/// A group's windows in one statement, so that each account's `lock_version` (whether it keeps
/// time buckets, `store::ledger::bucketed`) and the rows summed come from one snapshot. Each row
/// of the inputs is a piece of a read's window, tagged with its part and with the kind of
/// account it is for (`mode`: 1 bucketed, 2 not); a piece counts only if its account is of that
/// kind. Bucket rows come back with a NULL status, entry rows with their status and direction.
/// Each range is its own primary-key lookup (`LATERAL`, the plan the single read used: a plain
/// join hashed an account's every bucket once it held most rows, BENCHMARKS.md eighteenth
/// round), and `OFFSET 0` keeps each entries' range a lookup of its own, as in `reads`; the
/// inputs are read through sub-selects so that the plan is made once (the store's note on plans).
const SUM_WINDOWS: &str = "WITH acc AS MATERIALIZED (
       SELECT a.account_id, a.lock_version >= (SELECT $11::bigint) AS bucketed FROM ledger_account_sums a
       WHERE a.account_id = ANY((SELECT $10::text[])::text[])),
     b AS (
       SELECT r.part, coalesce(sum(s.pd), 0)::bigint AS pd, coalesce(sum(s.pc), 0)::bigint AS pc,
              coalesce(sum(s.qd), 0)::bigint AS qd, coalesce(sum(s.qc), 0)::bigint AS qc
       FROM unnest((SELECT $1::int[]), (SELECT $2::text[]), (SELECT $3::smallint[]), (SELECT $4::bigint[]), (SELECT $5::bigint[]))
         AS r(part, account_id, level, lo, hi)
       JOIN acc ON acc.account_id = r.account_id AND acc.bucketed
       CROSS JOIN LATERAL (
         SELECT sum(x.posted_debits) AS pd, sum(x.posted_credits) AS pc, sum(x.pending_debits) AS qd, sum(x.pending_credits) AS qc
         FROM ledger_buckets x
         WHERE x.account_id = r.account_id AND x.level = r.level AND x.bucket >= r.lo AND x.bucket < r.hi) s
       GROUP BY r.part),
     e AS (
       SELECT r.part, p.status, p.debit, sum(p.amount)::bigint AS amount
       FROM unnest((SELECT $6::int[]), (SELECT $7::text[]), (SELECT $8::bigint[]), (SELECT $9::bigint[]), (SELECT $12::bigint[]),
                   (SELECT $13::smallint[]))
         AS r(part, account_id, lo, hi, upto, mode)
       LEFT JOIN acc ON acc.account_id = r.account_id
       CROSS JOIN LATERAL (
         SELECT x.status, x.debit, x.amount FROM ledger_postings x
         WHERE x.account_id = r.account_id AND x.status <> 2 AND x.effective_at >= r.lo AND x.effective_at <= r.hi
           AND x.version <= r.upto
         OFFSET 0) p
       WHERE (r.mode = 1) = coalesce(acc.bucketed, false)
       GROUP BY r.part, p.status, p.debit)
     SELECT part, NULL::smallint, NULL::boolean, pd, pc, qd, qc FROM b
     UNION ALL
     SELECT part, status, debit, amount, 0::bigint, 0::bigint, 0::bigint FROM e";
/// Piece modes: for a bucketed account, for one without buckets.
const BUCKETED: i16 = 1;
const UNBUCKETED: i16 = 2;

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

/// What a group asks of the database, in the two statements' columns. A window read `i` has
/// two parts: `2i` for the pieces its sums add, `2i + 1` for those they subtract; each part
/// holds the pieces of both kinds of account, and the statement keeps those of the account's.
#[derive(Default)]
struct Ask {
    accounts: Vec<String>,
    window_accounts: Vec<String>,
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
    mode: Vec<i16>,
}

impl Ask {
    fn add(&mut self, index: usize, read: &Read) {
        match read {
            Read::Accounts(ids) => self.accounts.extend(ids.iter().cloned()),
            Read::Window { account_id, window } => {
                self.window_accounts.push(account_id.clone());
                for (bucketed, mode) in [(true, BUCKETED), (false, UNBUCKETED)] {
                    let (add, subtract) = window_pieces(window, bucketed);
                    self.pieces(part(index, false), account_id, &add, mode);
                    self.pieces(part(index, true), account_id, &subtract, mode);
                }
            }
        }
    }

    fn pieces(&mut self, part: i32, account_id: &str, pieces: &[Piece], mode: i16) {
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
                    e.mode.push(mode);
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

/// The group's statements, pipelined on one connection: one round trip, not two.
async fn look_up(db: &Db, ask: &Ask) -> Result<Found> {
    let client = db.get().await?;
    let outcome = within(db.deadline, async {
        let (b, e) = (&ask.buckets, &ask.entries);
        let by_accounts: [&(dyn ToSql + Sync); 1] = [&ask.accounts];
        let by_windows: [&(dyn ToSql + Sync); 13] = [
            &b.part,
            &b.account,
            &b.level,
            &b.from,
            &b.to,
            &e.part,
            &e.account,
            &e.from,
            &e.to,
            &ask.window_accounts,
            &BUCKETS_FROM,
            &e.upto,
            &e.mode,
        ];
        let (accounts, windows) = tokio::try_join!(
            query_unless(ask.accounts.is_empty(), &client, ledger::ACCOUNTS, &by_accounts),
            query_unless(ask.window_accounts.is_empty(), &client, SUM_WINDOWS, &by_windows)
        )?;
        let mut found = Found { accounts: accounts.iter().map(ledger::state_row).collect(), parts: HashMap::new() };
        for row in &windows {
            match row.get::<_, Option<i16>>(1) {
                None => {
                    let sums = ledger::totals_at(row, 3);
                    found.add(row.get(0), |totals| totals.plus(sums));
                }
                Some(status) => {
                    found.add(row.get(0), |mut totals| add_row(&mut totals, status, row.get(2), row.get(3)).map(|()| totals));
                }
            }
        }
        Ok(found)
    })
    .await;
    db.settle(client, outcome)
}
