//! The storage layout's level: the fence that keeps an older instance from serving from a
//! layout it does not know (SPEC S3).
//!
//! Migrations are expand-then-contract: an older instance still running after a newer one
//! migrated keeps answering correctly, because nothing it reads was taken away. A migration
//! that cannot keep that promise (a kind moved into a table of its own, say, so that an older
//! instance's lists would miss what newer ones write) raises the level kept in `settings`
//! instead. Every instance reads the level when it opens the store and every [`CHECK_INTERVAL`]
//! while it serves. An instance that finds it above its own [`LEVEL`] refuses to start, or
//! stops serving: it drains its requests and exits, saying why. An instance of the release
//! that raised the level starts serving only once [`CHECK_INTERVAL`] and the request deadline
//! have passed since the raise ([`hold_off`]): by then no older instance is serving or still
//! finishing a request, so none ever reads what the new layout writes. (On SQLite the serve
//! lock already keeps an older server away until it has drained: nobody waits there.)
//!
//! Levels:
//! 1. Migrations 0015 (PostgreSQL) and 0007 (SQLite): the fence itself.
//! 2. Migrations 0016 and 0008: a ledger entry's transaction and a transaction version's
//!    transaction are their parents, no longer search terms, and an entry's ledger is no
//!    longer a term (nothing asked for it). Older releases list entries and versions by those
//!    terms, so they would miss what this one writes. The terms of rows written before stay
//!    (nothing reads them) until a later release drops them.
//! 3. Migrations 0017 and 0009: a ledger entry's direction, status and effective time are read
//!    from its `ledger_postings` row (`Filter::Posting`), and a transaction's status and
//!    effective time from its entries' rows, no longer from search terms (a posting writes
//!    eight rows fewer). An entry keeps its account (the newest-first walk of an account's
//!    entries) and its metadata as terms. Older releases filter by the dropped terms, so they
//!    would miss what this one writes; the terms of rows written before stay, unread.
//! 4. Migrations 0019 and 0010: an entry moves its account's time buckets of levels 1 to 5 only,
//!    no longer those of levels 0 and 6 (`store::ledger::BUCKET_LEVELS`; a posting writes four
//!    rows fewer). Older releases read those two levels for balances as of an instant, and this
//!    one no longer keeps them up to date; their rows written before stay, unread.
//! 5. Migrations 0020 and 0011: a ledger account keeps time buckets only from its 64th entry on
//!    (`store::ledger::BUCKETS_FROM`); below that a balance as of an instant sums its entries,
//!    and its entries move no buckets (five rows fewer an entry for most accounts). Older
//!    releases read every account's buckets, which this one no longer writes below version 64;
//!    their rows written before stay, unread, until the account's buckets are built afresh.
//! 6. Migrations 0021 and 0012: a webhook delivery stores no body; it is built from the
//!    delivery's event each time it is sent (an event for twenty endpoints was stored
//!    twenty-one times). Older releases send the body the delivery stores, which this one no
//!    longer writes; deliveries written before keep theirs, and this release sends it.

use std::time::Duration;

use super::Store;
use crate::base::time::Timestamp;
use crate::error::Result;

/// The newest layout this release reads and writes.
pub const LEVEL: u32 = 6;
/// The `settings` row holding the database's level (ASCII digits).
pub const SETTING: &str = "layout_level";
/// The `settings` row saying when the level was last raised on a database that already held
/// data (microseconds since the epoch, ASCII digits; 0 when it was raised on an empty one,
/// which no older instance can be serving).
pub const RAISED_AT: &str = "layout_raised_at";
/// How often a serving instance reads the level again.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Whether this release can serve from the database's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    Known,
    /// Newer than this release: what to tell the operator.
    TooNew(String),
}

/// Reads the database's level. An error is the store's (unreachable, say), not a verdict.
pub async fn read(store: &dyn Store) -> Result<Layout> {
    Ok(judge(store.setting(SETTING).await?.as_deref()))
}

/// A database no migration has marked yet is at level 1; a value this release cannot parse
/// was written by a newer one, so it is too new as well (fail closed).
fn judge(value: Option<&[u8]>) -> Layout {
    let Some(value) = value else { return Layout::Known };
    let text = String::from_utf8_lossy(value);
    let found = match text.trim().parse::<u32>() {
        Ok(level) if level <= LEVEL => return Layout::Known,
        Ok(level) => format!("is at level {level}, and this release of Payrail knows levels up to {LEVEL}"),
        Err(_) => format!("level {text:?} is not one this release of Payrail knows"),
    };
    Layout::TooNew(format!("the database's storage layout {found}: a newer release has migrated it; upgrade this instance"))
}

/// How long this instance must still wait before it serves: until [`CHECK_INTERVAL`] and the
/// request deadline have passed since the level was raised, so that every older instance has
/// seen the new level and finished the requests it had.
pub async fn hold_off(store: &dyn Store, request_deadline: Duration, now: Timestamp) -> Result<Duration> {
    Ok(remaining(store.setting(RAISED_AT).await?.as_deref(), request_deadline, now))
}

/// A value this release cannot parse counts as a raise just now (fail closed).
fn remaining(raised_at: Option<&[u8]>, request_deadline: Duration, now: Timestamp) -> Duration {
    let window = CHECK_INTERVAL + request_deadline;
    let raised = match raised_at.map(|v| String::from_utf8_lossy(v).trim().parse::<i64>()) {
        None => return Duration::ZERO,
        Some(Ok(micros)) => micros,
        Some(Err(_)) => now.as_micros(),
    };
    let ends = raised.saturating_add(i64::try_from(window.as_micros()).unwrap_or(i64::MAX));
    Duration::from_micros(u64::try_from(ends.saturating_sub(now.as_micros())).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_a_raise_holds_serving_off_for_the_check_interval_and_the_request_deadline() {
        let deadline = Duration::from_secs(30);
        let now = Timestamp::from_micros(1_000_000_000_000);
        let window = CHECK_INTERVAL + deadline;
        assert_eq!(remaining(None, deadline, now), Duration::ZERO, "no raise recorded");
        assert_eq!(remaining(Some(b"0"), deadline, now), Duration::ZERO, "raised on an empty database");
        assert_eq!(remaining(Some(now.as_micros().to_string().as_bytes()), deadline, now), window);
        let earlier = now.plus_micros(-2_000_000).as_micros().to_string();
        assert_eq!(remaining(Some(earlier.as_bytes()), deadline, now), window - Duration::from_secs(2));
        let long_ago = now.plus_micros(-100_000_000).as_micros().to_string();
        assert_eq!(remaining(Some(long_ago.as_bytes()), deadline, now), Duration::ZERO);
        assert_eq!(remaining(Some(b"soon"), deadline, now), window, "unreadable: as if raised just now");
    }

    #[test]
    fn s3_levels_up_to_this_releases_are_known() {
        assert_eq!(judge(None), Layout::Known);
        assert_eq!(judge(Some(b"1")), Layout::Known);
        assert_eq!(judge(Some(b"2")), Layout::Known);
        assert_eq!(judge(Some(b"3")), Layout::Known);
        assert_eq!(judge(Some(b"4")), Layout::Known);
        assert_eq!(judge(Some(b"5")), Layout::Known);
        assert_eq!(judge(Some(b"6")), Layout::Known);
        assert_eq!(judge(Some(b"0")), Layout::Known);
    }

    #[test]
    fn s3_a_higher_or_unreadable_level_is_too_new_and_says_so() {
        let Layout::TooNew(message) = judge(Some(b"7")) else { panic!("level 7 must be too new") };
        assert!(message.contains("level 7") && message.contains("upgrade this instance"), "{message}");
        let Layout::TooNew(message) = judge(Some(b"two")) else { panic!("an unreadable level must be too new") };
        assert!(message.contains("\"two\""), "{message}");
    }
}
