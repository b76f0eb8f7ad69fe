//! Per-API-key rate limits: a token bucket per key (SPEC L3: 429 with `Retry-After`).
//!
//! Buckets live in this process: on a PostgreSQL deployment each instance enforces the limit
//! on its own, so N instances admit up to N times the rate (documented). Off when the rate is 0.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Buckets kept at most; idle ones are dropped first when the map is full.
const BUCKETS_MAX: usize = 100_000;

#[derive(Debug)]
pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refreshed: Instant,
}

impl RateLimiter {
    pub fn new(per_sec: u32, burst: u32) -> Self {
        let per_sec = f64::from(per_sec);
        RateLimiter { per_sec, burst: f64::from(burst.max(1)).max(per_sec.min(1.0)), buckets: Mutex::default() }
    }

    pub fn enabled(&self) -> bool {
        self.per_sec > 0.0
    }

    /// Takes a token for `key_id`; if none is left, how many seconds until one is.
    pub fn take(&self, key_id: &str, now: Instant) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= BUCKETS_MAX && !buckets.contains_key(key_id) {
            let (per_sec, burst) = (self.per_sec, self.burst);
            buckets.retain(|_, b| b.tokens + now.duration_since(b.refreshed).as_secs_f64() * per_sec < burst);
        }
        let bucket = buckets.entry(key_id.to_owned()).or_insert(Bucket { tokens: self.burst, refreshed: now });
        let elapsed = now.duration_since(bucket.refreshed).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_sec).min(self.burst);
        bucket.refreshed = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.tokens) / self.per_sec).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bucket_allows_the_burst_then_the_rate() {
        let limiter = RateLimiter::new(10, 5);
        let t0 = Instant::now();
        for _ in 0..5 {
            assert!(limiter.take("k", t0).is_ok());
        }
        assert_eq!(limiter.take("k", t0), Err(1));
        assert!(limiter.take("other", t0).is_ok(), "buckets are per key");
        assert!(limiter.take("k", t0 + Duration::from_millis(100)).is_ok(), "one token back after 1/rate");
        assert!(limiter.take("k", t0 + Duration::from_millis(100)).is_err());
    }
}
