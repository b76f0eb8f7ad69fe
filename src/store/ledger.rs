//! Ledger postings as the store applies them (SPEC G2 to G6): each account's running sums and
//! version, checked and moved inside the transaction that writes the entries.
//!
//! Both stores load the accounts a batch touches (PostgreSQL locks their rows in one global
//! order, so racing writers queue instead of deadlocking; SQLite has one writer), run the same
//! pure steps here, and write back what changed. A refused posting changes nothing: its batch
//! rolls back whole.

use std::collections::BTreeMap;

use crate::base::ledger::{BalanceCondition, Totals};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};

/// One entry's effect on its account.
#[derive(Debug, Clone)]
pub struct LedgerLine {
    pub entry_id: String,
    pub account_id: String,
    pub effective_at: Timestamp,
    pub debit: bool,
    pub amount: i64,
    /// Whether the entry is written pending (else posted).
    pub pending: bool,
}

/// What must hold of an account for a posting to commit (SPEC G4).
#[derive(Debug, Clone)]
pub struct AccountGuard {
    pub account_id: String,
    /// The version the request expects the account to be at before the posting, and the
    /// request field that gave it.
    pub lock_version: Option<(i64, String)>,
    /// Conditions on the account's balances after the whole posting.
    pub conditions: Vec<BalanceCondition>,
}

/// An account's state as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountState {
    pub credit_normal: bool,
    pub totals: Totals,
    /// How many entries were ever written to the account (SPEC G4's `lock_version`).
    pub lock_version: i64,
}

/// How many posted entries a settlement takes from its account, and their sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Claimed {
    pub count: i64,
    pub debits: i64,
    pub credits: i64,
}

/// A settlement taking an account's posted, not yet settled entries effective before
/// `before_micros` and written at or before `upto_version` (what the domain summed), and its own
/// entries on that account (written in the same batch). The store takes exactly that set, in
/// the commit: if its count or sums are no longer `expected` (a racing settlement took some, or
/// a pending entry posted meanwhile), the batch fails with a conflict and the domain sums again,
/// so no entry is ever settled twice and the amount is always the sum of what was taken.
#[derive(Debug, Clone)]
pub struct Claim {
    pub account_id: String,
    pub settlement_id: String,
    pub before_micros: i64,
    pub upto_version: i64,
    pub expected: Claimed,
    pub own_entry_ids: Vec<String>,
}

/// The conflict of a claim whose entries changed since they were summed: retried by the domain.
pub fn claim_changed() -> Error {
    Error::Conflict {
        message: "the ledger account's unsettled entries changed while the settlement was being computed; retry".into(),
        parameter: None,
        retry_after_s: Some(1),
    }
}

/// Where a posting's entries are kept: status codes of the `ledger_postings` table.
pub const STATUS_PENDING: i16 = 0;
pub const STATUS_POSTED: i16 = 1;
pub const STATUS_ARCHIVED: i16 = 2;

/// Applies `lines` to `accounts` (loaded by the store: every account the lines or guards name)
/// and checks `guards`; returns each line's account version (the version its write made).
/// On error `accounts` is left half-changed: the caller rolls back.
pub fn post(accounts: &mut BTreeMap<String, AccountState>, lines: &[LedgerLine], guards: &[AccountGuard]) -> Result<Vec<i64>> {
    for guard in guards {
        let Some((expected, parameter)) = &guard.lock_version else { continue };
        let state = state_of(accounts, &guard.account_id)?;
        if state.lock_version != *expected {
            return Err(stale_lock_version(parameter, *expected, state.lock_version));
        }
    }
    let mut versions = Vec::with_capacity(lines.len());
    for line in lines {
        let state = accounts.get_mut(&line.account_id).ok_or_else(|| gone(&line.account_id))?;
        state.totals.add(line.debit, line.amount, line.pending)?;
        state.lock_version += 1;
        versions.push(state.lock_version);
    }
    for guard in guards {
        let state = state_of(accounts, &guard.account_id)?;
        for condition in &guard.conditions {
            condition.check(&state.totals, state.credit_normal)?;
        }
    }
    Ok(versions)
}

/// Moves pending `lines` to posted (`post`) or out of every sum (archived).
pub fn settle(accounts: &mut BTreeMap<String, AccountState>, lines: &[LedgerLine], post: bool) -> Result<()> {
    for line in lines {
        let state = accounts.get_mut(&line.account_id).ok_or_else(|| gone(&line.account_id))?;
        state.totals.remove(line.debit, line.amount, true)?;
        if post {
            state.totals.add(line.debit, line.amount, false)?;
        }
    }
    Ok(())
}

/// The accounts `lines` and `guards` name, sorted and distinct: the order rows are locked in.
pub fn accounts_named(lines: &[LedgerLine], guards: &[AccountGuard]) -> Vec<String> {
    let mut ids: Vec<String> = lines.iter().map(|l| l.account_id.clone()).chain(guards.iter().map(|g| g.account_id.clone())).collect();
    ids.sort();
    ids.dedup();
    ids
}

fn state_of<'a>(accounts: &'a BTreeMap<String, AccountState>, id: &str) -> Result<&'a AccountState> {
    accounts.get(id).ok_or_else(|| gone(id))
}

fn gone(account_id: &str) -> Error {
    Error::invalid("ledger_entries", format!("ledger account {account_id} no longer exists"))
}

/// SPEC G4: 409, and retrying the same request cannot fix it (the caller must read the
/// account again), so no `Retry-After`.
fn stale_lock_version(parameter: &str, expected: i64, current: i64) -> Error {
    Error::Conflict {
        message: format!(
            "{parameter} is {expected} but the ledger account is at lock_version {current}: it changed since it was read; nothing was written"
        ),
        parameter: Some(parameter.to_owned()),
        retry_after_s: None,
    }
}

/// The time buckets' levels, finest first: each the number its rows carry in `level` and its
/// width, a power of two of microseconds, from 2^20 us (about a second) to 2^44 us (about 203
/// days), each 64 times the one below. Each level holds an account's sums per bucket of its
/// width. See [`prefix_pieces`].
///
/// Storage layout level 4 (`store::layout`) stopped writing two more levels, which cost a
/// posting four rows and bought little:
/// - 0 (2^14 us): a read now sums the entries of the instant's own second from their rows (an
///   index range of the account's postings: as many as it took in that second);
/// - 6 (2^50 us, 36 years): every instant since 2005 falls in one bucket of it, so the top level
///   now sums every bucket of level 5 before the instant's, about two for each year of the
///   account's entries.
///
/// Their rows written before stay, unread.
pub const BUCKET_LEVELS: [(i16, u32); 5] = [(1, 20), (2, 26), (3, 32), (4, 38), (5, 44)];

/// An account keeps time buckets from its `BUCKETS_FROM`-th entry on (storage layout level 5).
///
/// Below that, a balance as of any instant sums the account's own entries: fewer rows than the
/// buckets a read of a bucketed account sums, so reads stay flat, and most accounts (a
/// customer's wallet with a few dozen entries) never pay the five bucket rows an entry costs.
/// The entry that takes the account to this version builds its buckets from every entry written
/// before it, in the same commit ([`bucket_work`]); every later entry moves them as it is written
/// and settled. Whether an account is bucketed is read from its `lock_version` in the same
/// snapshot as its sums, so a read never mixes the two ways.
pub const BUCKETS_FROM: i64 = 64;

/// Whether an account at `lock_version` keeps time buckets.
pub fn bucketed(lock_version: i64) -> bool {
    lock_version >= BUCKETS_FROM
}

/// What writing entries does to the time buckets: the lines that move buckets, and the accounts
/// whose buckets are built afresh from their entries (after the entries' own rows are written).
pub struct BucketWork<'a> {
    pub lines: Vec<&'a LedgerLine>,
    pub rebuild: Vec<String>,
}

/// The bucket work of `lines` written with `versions` (the account version each line made): a
/// line past [`BUCKETS_FROM`] moves its buckets; the line that reaches it rebuilds its account's
/// buckets from every entry up to it (that line included); earlier lines move none.
pub fn bucket_work<'a>(lines: impl Iterator<Item = &'a LedgerLine>, versions: &[i64]) -> BucketWork<'a> {
    let mut work = BucketWork { lines: Vec::new(), rebuild: Vec::new() };
    for (line, version) in lines.zip(versions) {
        match version.cmp(&BUCKETS_FROM) {
            std::cmp::Ordering::Greater => work.lines.push(line),
            std::cmp::Ordering::Equal => work.rebuild.push(line.account_id.clone()),
            std::cmp::Ordering::Less => {}
        }
    }
    work
}

/// The lines of a settle (a pending entry posted or archived) that move time buckets: those of
/// accounts that keep them.
pub fn settled_bucket_lines<'a>(lines: &'a [LedgerLine], accounts: &BTreeMap<String, AccountState>) -> Vec<&'a LedgerLine> {
    lines.iter().filter(|l| accounts.get(&l.account_id).is_some_and(|s| bucketed(s.lock_version))).collect()
}

/// An entry row read back to build its account's buckets afresh (`(effective_at, status,
/// debit, amount)`, an entry written at or before [`BUCKETS_FROM`]) as the line that moves them,
/// to be summed by [`bucket_deltas`] with [`Change::Write`]; an archived row moves nothing.
pub fn rebuilt_line(account_id: &str, (at, status, debit, amount): (i64, i16, bool, i64)) -> Option<LedgerLine> {
    (status != STATUS_ARCHIVED).then(|| LedgerLine {
        entry_id: String::new(),
        account_id: account_id.to_owned(),
        effective_at: Timestamp::from_micros(at),
        debit,
        amount,
        pending: status == STATUS_PENDING,
    })
}

/// How an entry's change moves its account's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Written, pending or posted as the line says.
    Write,
    /// A pending entry posted.
    Post,
    /// A pending entry archived.
    Archive,
}

/// Applies `change` of `line` to `totals`.
pub fn apply_change(totals: &mut Totals, line: &LedgerLine, change: Change) -> Result<()> {
    match change {
        Change::Write => totals.add(line.debit, line.amount, line.pending),
        Change::Post => {
            totals.remove(line.debit, line.amount, true)?;
            totals.add(line.debit, line.amount, false)
        }
        Change::Archive => totals.remove(line.debit, line.amount, true),
    }
}

/// A bucket: (account, level, index).
pub type BucketKey = (String, i16, i64);

/// The changes to the time buckets that `lines` make, summed per bucket: what keeps a balance
/// as of any instant a read of a few hundred rows at most, however many entries the account
/// has and however far back they were dated (SPEC G5).
pub fn bucket_deltas<'a>(lines: impl Iterator<Item = &'a LedgerLine>, change: Change) -> Result<BTreeMap<BucketKey, Totals>> {
    let mut out: BTreeMap<BucketKey, Totals> = BTreeMap::new();
    for line in lines {
        for (level, shift) in BUCKET_LEVELS {
            let key = (line.account_id.clone(), level, line.effective_at.as_micros() >> shift);
            apply_change(out.entry(key).or_default(), line, change)?;
        }
    }
    Ok(out)
}

/// One part of a prefix sum: whole buckets of a level, or the entries themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// Buckets `from..to` (to exclusive) of `level`.
    Buckets { level: i16, from: i64, to: i64 },
    /// Entries effective within `from..=to` (micros), written at or before `upto_version`.
    Entries { from: i64, to: i64, upto_version: Option<i64> },
}

/// The pieces whose sums add up to the sums of every entry effective at or before `at`: every
/// bucket of the coarsest level before `at`'s, then whole buckets of each finer level (fewer
/// than 64 each), then the entries of the finest bucket `at` falls in.
pub fn prefix_pieces(at: i64) -> Vec<Piece> {
    let top = BUCKET_LEVELS.len() - 1;
    let mut pieces = Vec::with_capacity(BUCKET_LEVELS.len() + 1);
    let (top_level, top_shift) = BUCKET_LEVELS[top];
    let mut parent = at >> top_shift;
    pieces.push(Piece::Buckets { level: top_level, from: i64::MIN, to: parent });
    for index in (0..top).rev() {
        let (level, shift) = BUCKET_LEVELS[index];
        let fan_out = BUCKET_LEVELS[index + 1].1 - shift;
        let here = at >> shift;
        pieces.push(Piece::Buckets { level, from: parent << fan_out, to: here });
        parent = here;
    }
    pieces.push(Piece::Entries { from: parent << BUCKET_LEVELS[0].1, to: at, upto_version: None });
    pieces
}

/// The pieces of every entry effective at or before `at`: the buckets' for a bucketed account,
/// else its entries'.
fn prefix(at: i64, bucketed: bool) -> Vec<Piece> {
    match bucketed {
        true => prefix_pieces(at),
        false => vec![Piece::Entries { from: i64::MIN, to: at, upto_version: None }],
    }
}

/// The pieces of `window` as (pieces to add, pieces to subtract), for an account that keeps
/// time buckets or not ([`bucketed`]). A window with an `upto_version` is summed from the
/// entries directly (versions are not bucketed).
pub fn window_pieces(window: &crate::base::ledger::Window, bucketed: bool) -> (Vec<Piece>, Vec<Piece>) {
    let upper = match (window.through_entry, window.to_micros) {
        (Some((at, _)), _) => at.saturating_sub(1),
        (None, Some(to)) if window.through_inclusive => to,
        (None, Some(to)) => to.saturating_sub(1),
        (None, None) => i64::MAX,
    };
    let mut add = match window.upto_version {
        Some(version) => vec![Piece::Entries { from: i64::MIN, to: upper, upto_version: Some(version) }],
        None => prefix(upper, bucketed),
    };
    if let Some((at, version)) = window.through_entry {
        add.push(Piece::Entries { from: at, to: at, upto_version: Some(version) });
    }
    let subtract = match window.from_micros {
        Some(from) if window.upto_version.is_some() => {
            vec![Piece::Entries { from: i64::MIN, to: from.saturating_sub(1), upto_version: window.upto_version }]
        }
        Some(from) => prefix(from.saturating_sub(1), bucketed),
        None => Vec::new(),
    };
    (add, subtract)
}

/// Adds a posting table row's amount into `totals` (reading balances back from entries).
pub fn add_row(totals: &mut Totals, status: i16, debit: bool, amount: i64) -> Result<()> {
    match status {
        STATUS_PENDING => totals.add(debit, amount, true),
        STATUS_POSTED => totals.add(debit, amount, false),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ledger::{BalanceKind, Comparison};

    fn line(account: &str, debit: bool, amount: i64) -> LedgerLine {
        LedgerLine {
            entry_id: format!("e-{account}-{amount}"),
            account_id: account.into(),
            effective_at: Timestamp::from_micros(0),
            debit,
            amount,
            pending: false,
        }
    }

    fn accounts() -> BTreeMap<String, AccountState> {
        let state = AccountState { credit_normal: true, totals: Totals::default(), lock_version: 0 };
        [("a".to_string(), state), ("b".to_string(), state)].into_iter().collect()
    }

    #[test]
    fn g4_versions_count_entries_and_a_stale_one_is_a_409() {
        let mut state = accounts();
        let versions = post(&mut state, &[line("a", true, 5), line("b", false, 5)], &[]).unwrap();
        assert_eq!(versions, [1, 1]);
        let guard =
            AccountGuard { account_id: "a".into(), lock_version: Some((0, "ledger_entries[0].lock_version".into())), conditions: vec![] };
        let err = post(&mut state, &[line("a", true, 5), line("b", false, 5)], &[guard]).unwrap_err();
        assert!(
            matches!(err, Error::Conflict { parameter: Some(ref p), retry_after_s: None, .. } if p == "ledger_entries[0].lock_version")
        );
    }

    #[test]
    fn g4_conditions_are_checked_after_the_whole_posting() {
        let mut state = accounts();
        let condition = BalanceCondition {
            kind: BalanceKind::Available,
            comparison: Comparison::Gte,
            value: 0,
            parameter: "ledger_entries[0].available_balance_amount".into(),
        };
        let guard = AccountGuard { account_id: "a".into(), lock_version: None, conditions: vec![condition] };
        // Debiting a credit-normal account with nothing in it takes it below zero.
        assert!(post(&mut state.clone(), &[line("a", true, 5), line("b", false, 5)], std::slice::from_ref(&guard)).is_err());
        // The same debit with a credit to the same account first in the transaction nets out.
        assert!(post(&mut state, &[line("a", true, 5), line("a", false, 5)], &[guard]).is_ok());
    }

    /// The width (as a shift) of a level the store writes.
    fn shift_of(level: i16) -> u32 {
        BUCKET_LEVELS.iter().find(|(l, _)| *l == level).expect("a level the store writes").1
    }

    /// The pieces of a prefix cover every instant up to `at` exactly once: checked against a
    /// brute-force walk over instants spread across scales (finest bucket to decades).
    #[test]
    fn g5_prefix_pieces_cover_each_instant_once() {
        let covers = |pieces: &[Piece], t: i64| -> usize {
            pieces
                .iter()
                .filter(|p| match **p {
                    Piece::Buckets { level, from, to } => {
                        let b = t >> shift_of(level);
                        b >= from && b < to
                    }
                    Piece::Entries { from, to, .. } => t >= from && t <= to,
                })
                .count()
        };
        let ats = [0i64, 1, -1, 1 << 14, (1 << 20) + 7, 1_764_000_000_000_000, -62_000_000_000_000_000, 253_000_000_000_000_000];
        for at in ats {
            let pieces = prefix_pieces(at);
            for delta in [0i64, 1, 2, 1 << 10, 1 << 15, 1 << 21, 1 << 27, 1 << 33, 1 << 39, 1 << 45, 1 << 51, 1 << 55] {
                assert_eq!(covers(&pieces, at - delta), 1, "{at} - {delta} is covered once");
                if delta > 0 {
                    assert_eq!(covers(&pieces, at.saturating_add(delta)), 0, "{at} + {delta} is not covered");
                }
            }
            for p in &pieces {
                match *p {
                    Piece::Buckets { level, from, to } if level != BUCKET_LEVELS[BUCKET_LEVELS.len() - 1].0 => {
                        assert!(to - from < 64, "fewer than 64 buckets per level")
                    }
                    Piece::Entries { from, to, .. } => assert!(to - from < 1 << BUCKET_LEVELS[0].1, "entries of one finest bucket"),
                    _ => {}
                }
            }
        }
    }

    /// Layout level 4 writes levels 1 to 5 only (the rows of 0 and 6 written before are never
    /// read), each of an entry's buckets holding its instant, each level 64 times the one below.
    #[test]
    fn g5_an_entry_moves_one_bucket_of_each_level_the_layout_writes() {
        let mut entry = line("a", true, 9);
        entry.effective_at = Timestamp::from_micros(1_764_000_000_123_456);
        let deltas = bucket_deltas(std::iter::once(&entry), Change::Write).unwrap();
        let levels: Vec<i16> = deltas.keys().map(|k| k.1).collect();
        assert_eq!(levels, [1, 2, 3, 4, 5]);
        for ((_, level, bucket), totals) in &deltas {
            assert_eq!(*bucket, 1_764_000_000_123_456 >> shift_of(*level));
            assert_eq!(totals.posted_debits, 9);
        }
        assert!(BUCKET_LEVELS.windows(2).all(|w| w[1].1 - w[0].1 == 6 && w[1].0 == w[0].0 + 1));
    }

    /// Storage layout level 5: the entries before an account's 64th move no buckets, the 64th
    /// builds them from every entry up to it, and each later one moves them itself.
    #[test]
    fn g5_buckets_start_at_the_entry_that_reaches_buckets_from() {
        let lines: Vec<LedgerLine> = ["a", "a", "a", "b"].iter().map(|id| line(id, false, 1)).collect();
        let work = bucket_work(lines.iter(), &[BUCKETS_FROM - 1, BUCKETS_FROM, BUCKETS_FROM + 1, 1]);
        assert_eq!(work.rebuild, ["a"]);
        assert_eq!(work.lines.len(), 1);
        assert!(std::ptr::eq(work.lines[0], &lines[2]));
        let rows = [(0, STATUS_POSTED, true, 5), (0, STATUS_PENDING, false, 7), (0, STATUS_ARCHIVED, true, 100)];
        let rebuilt_lines: Vec<LedgerLine> = rows.into_iter().filter_map(|row| rebuilt_line("a", row)).collect();
        let rebuilt = bucket_deltas(rebuilt_lines.iter(), Change::Write).unwrap();
        assert_eq!(rebuilt.len(), BUCKET_LEVELS.len());
        assert!(rebuilt.values().all(|t| *t == Totals { posted_debits: 5, pending_credits: 7, ..Totals::default() }));
        let mut states = accounts();
        states.get_mut("b").unwrap().lock_version = BUCKETS_FROM;
        let settled: Vec<&str> = settled_bucket_lines(&lines, &states).iter().map(|l| l.account_id.as_str()).collect();
        assert_eq!(settled, ["b"]);
    }

    /// Without buckets, a window is its entries' sums: one range to add, one to take away.
    #[test]
    fn g5_a_window_of_an_account_without_buckets_sums_its_entries() {
        let window = crate::base::ledger::Window { from_micros: Some(100), to_micros: Some(200), ..Default::default() };
        let (add, subtract) = window_pieces(&window, false);
        assert_eq!(add, [Piece::Entries { from: i64::MIN, to: 199, upto_version: None }]);
        assert_eq!(subtract, [Piece::Entries { from: i64::MIN, to: 99, upto_version: None }]);
        let (add, _) = window_pieces(&window, true);
        assert_eq!(add, prefix_pieces(199));
    }

    #[test]
    fn g2_settling_moves_pending_to_posted_or_out() {
        let mut state = accounts();
        let mut pending = line("a", true, 7);
        pending.pending = true;
        post(&mut state, std::slice::from_ref(&pending), &[]).unwrap();
        assert_eq!(state["a"].totals.pending_debits, 7);
        let mut archived = state.clone();
        settle(&mut archived, std::slice::from_ref(&pending), false).unwrap();
        assert_eq!(archived["a"].totals, Totals::default());
        settle(&mut state, &[pending], true).unwrap();
        assert_eq!(state["a"].totals, Totals { posted_debits: 7, ..Totals::default() });
    }
}
