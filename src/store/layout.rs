//! The storage layout's level: the fence that keeps an older instance from serving from a
//! layout it does not know (SPEC S3).
//!
//! Migrations are expand-then-contract: an older instance still running after a newer one
//! migrated keeps answering correctly, because nothing it reads was taken away. A migration
//! that cannot keep that promise (a kind moved into a table of its own, say, so that an older
//! instance's lists would miss what newer ones write) raises the level kept in `settings`
//! instead. Every instance reads the level when it opens the store and every [`CHECK_INTERVAL`]
//! while it serves. An instance that finds it above its own [`LEVEL`] refuses to start, or
//! stops serving: it drains its requests and exits, saying why. The release that raises the
//! level must start serving only once [`CHECK_INTERVAL`] and the request deadline have passed
//! after its migration, when no older instance can still be writing.

use std::time::Duration;

use super::Store;
use crate::error::Result;

/// The newest layout this release reads and writes.
pub const LEVEL: u32 = 1;
/// The `settings` row holding the database's level (ASCII digits; migrations 0015 on
/// PostgreSQL and 0007 on SQLite write level 1).
pub const SETTING: &str = "layout_level";
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_levels_up_to_this_releases_are_known() {
        assert_eq!(judge(None), Layout::Known);
        assert_eq!(judge(Some(b"1")), Layout::Known);
        assert_eq!(judge(Some(b"0")), Layout::Known);
    }

    #[test]
    fn s3_a_higher_or_unreadable_level_is_too_new_and_says_so() {
        let Layout::TooNew(message) = judge(Some(b"2")) else { panic!("level 2 must be too new") };
        assert!(message.contains("level 2") && message.contains("upgrade this instance"), "{message}");
        let Layout::TooNew(message) = judge(Some(b"two")) else { panic!("an unreadable level must be too new") };
        assert!(message.contains("\"two\""), "{message}");
    }
}
