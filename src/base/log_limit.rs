//! Rate limit for repeated log lines (SPEC W4: a tenant's failing receivers must not flood the
//! log; the sandbox bank's failing steps likewise). A line is identified by a key (what it says
//! and about which endpoint or organization); the first one
//! is logged, then at most one per `every` window, carrying how many were suppressed since.
//!
//! Limits: at most `KEYS_MAX` keys are remembered; past that, keys idle for a whole window are
//! forgotten first, then the oldest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Distinct lines remembered at most.
const KEYS_MAX: usize = 10_000;

#[derive(Debug)]
pub struct LogLimit {
    every: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    logged_at: Instant,
    suppressed: u64,
}

impl LogLimit {
    pub fn new(every: Duration) -> Self {
        LogLimit { every, seen: Mutex::default() }
    }

    /// `Some(suppressed)` if the line for `key` may be logged now (with how many were held back
    /// since the last one), `None` if it is to be suppressed.
    pub fn admit(&self, key: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = seen.get_mut(key) {
            if now.saturating_duration_since(entry.logged_at) < self.every {
                entry.suppressed += 1;
                return None;
            }
            let suppressed = entry.suppressed;
            *entry = Seen { logged_at: now, suppressed: 0 };
            return Some(suppressed);
        }
        if seen.len() >= KEYS_MAX {
            self.forget(&mut seen, now);
        }
        seen.insert(key.to_owned(), Seen { logged_at: now, suppressed: 0 });
        Some(0)
    }

    /// Makes room: drops keys idle for a window (their suppressed count is lost, as their
    /// next line would have been logged anyway), or else the oldest one.
    fn forget(&self, seen: &mut HashMap<String, Seen>, now: Instant) {
        seen.retain(|_, s| now.saturating_duration_since(s.logged_at) < self.every);
        if seen.len() >= KEYS_MAX
            && let Some(oldest) = seen.iter().min_by_key(|(_, s)| s.logged_at).map(|(k, _)| k.clone())
        {
            seen.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w4_a_repeated_line_is_logged_once_per_window_with_a_count() {
        let limit = LogLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.admit("attempt failed/ep1", t0), Some(0));
        for i in 1..=99 {
            assert_eq!(limit.admit("attempt failed/ep1", t0 + Duration::from_millis(i * 10)), None);
        }
        assert_eq!(limit.admit("attempt failed/ep2", t0), Some(0), "another endpoint has its own window");
        assert_eq!(limit.admit("attempt failed/ep1", t0 + Duration::from_secs(10)), Some(99));
        assert_eq!(limit.admit("attempt failed/ep1", t0 + Duration::from_secs(11)), None);
    }

    #[test]
    fn keys_are_bounded() {
        let limit = LogLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..KEYS_MAX + 50 {
            limit.admit(&format!("k{i}"), t0 + Duration::from_micros(i as u64));
        }
        assert!(limit.seen.lock().unwrap().len() <= KEYS_MAX);
    }
}
