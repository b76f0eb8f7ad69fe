//! Timestamps and the clock.
//!
//! Time is microseconds since the Unix epoch (UTC), rendered as RFC 3339 with six fractional
//! digits and a `Z`, so that strings sort as the instants do. The clock is injectable: tests move
//! it forward 24 hours instead of sleeping (SPEC I10).

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An instant, in microseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    pub const fn as_micros(self) -> i64 {
        self.0
    }

    pub fn plus_micros(self, micros: i64) -> Self {
        Timestamp(self.0.saturating_add(micros))
    }

    pub fn plus_secs(self, secs: i64) -> Self {
        Timestamp(self.0.saturating_add(secs.saturating_mul(1_000_000)))
    }

    /// Parses RFC 3339 (`2026-01-02T03:04:05Z`, any offset, any fraction).
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339).ok()?;
        i64::try_from(parsed.unix_timestamp_nanos() / 1_000).ok().map(Timestamp)
    }

    /// Parses RFC 3339, or a date-time written without an offset, read as UTC: the SDKs send a
    /// Python `datetime` without a time zone (`datetime.utcnow()`) that way.
    pub fn parse_rfc3339_or_utc(text: &str) -> Option<Self> {
        Self::parse_rfc3339(text).or_else(|| Self::parse_rfc3339(&format!("{text}Z")))
    }
}

/// Length of `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
const RFC3339_LEN: usize = 27;

/// Whether `text` is a clock time written `HH:MM:SS` (as MT's `as_of_time` fields are).
pub fn is_clock_time(text: &str) -> bool {
    text.len() == 8 && time::Time::parse(text, time::macros::format_description!("[hour]:[minute]:[second]")).is_ok()
}

impl Timestamp {
    /// The UTC clock time, `HH:MM:SS`.
    pub fn clock_time(self) -> String {
        let secs = self.0.div_euclid(1_000_000).rem_euclid(86_400);
        format!("{:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
    }
}

impl Timestamp {
    /// The RFC 3339 text written digit by digit, for years 0 to 9999 (None outside them).
    /// Without a calendar library or `write!`: this runs for every timestamp of every reply
    /// (`time`'s conversion was 4.6 % of a create, then padded `write!`s 9 %).
    fn rfc3339_digits(&self) -> Option<[u8; RFC3339_LEN]> {
        let micros = self.0.rem_euclid(1_000_000);
        let secs = self.0.div_euclid(1_000_000);
        let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        if !(0..=9999).contains(&year) {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00.000000Z";
        let mut put = |at: usize, width: usize, mut value: i64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, day_secs / 3600);
        put(14, 2, day_secs % 3600 / 60);
        put(17, 2, day_secs % 60);
        put(20, 6, micros);
        Some(out)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(digits) = self.rfc3339_digits() {
            return f.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?);
        }
        let micros = self.0.rem_euclid(1_000_000);
        let secs = self.0.div_euclid(1_000_000);
        let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        write!(f, "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z", day_secs / 3600, day_secs % 3600 / 60, day_secs % 60)
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.rfc3339_digits() {
            Some(digits) => s.serialize_str(std::str::from_utf8(&digits).map_err(serde::ser::Error::custom)?),
            None => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&text).ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 timestamp"))
    }
}

/// On the wire a timestamp is an RFC 3339 date-time string (schema `timestamp`).
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
            .description(Some("An RFC 3339 date-time in UTC, with microseconds: 2026-01-02T03:04:05.123456Z."))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("timestamp")
    }
}

/// Where "now" comes from.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let micros = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
        Timestamp(i64::try_from(micros).unwrap_or(i64::MAX))
    }
}

/// The wall clock plus an offset that tests can move forward.
#[derive(Debug, Default)]
pub struct ShiftedClock {
    offset_micros: AtomicI64,
}

impl ShiftedClock {
    pub fn advance_secs(&self, secs: i64) {
        self.offset_micros.fetch_add(secs * 1_000_000, Ordering::SeqCst);
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        let base = SystemClock.now();
        Timestamp(base.0 + self.offset_micros.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_times_are_hh_mm_ss() {
        assert_eq!(Timestamp::from_micros(((13 * 60 + 45) * 60 + 30) * 1_000_000 + 999_999).clock_time(), "13:45:30");
        assert_eq!(Timestamp::from_micros(-1).clock_time(), "23:59:59", "before the epoch: the day before");
        assert!(is_clock_time("00:00:00") && is_clock_time("23:59:59"));
        for bad in ["24:00:00", "1:00:00", "12:00", "12:00:00Z", "12:60:00", ""] {
            assert!(!is_clock_time(bad), "{bad}");
        }
    }

    #[test]
    fn fast_formatting_agrees_with_the_time_crate() {
        let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
        let mut micros: i64 = -2_208_988_800_000_000; // 1900-01-01
        while micros < 7_258_118_400_000_000 {
            // to 2200, in uneven steps that visit every month, leap days and day boundaries
            let expected = OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).unwrap().format(&format).unwrap();
            let t = Timestamp::from_micros(micros);
            assert_eq!(t.to_string(), expected);
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{expected}\""));
            micros += 86_399_999_977 + micros.rem_euclid(7_919) * 1_000_003;
        }
    }

    #[test]
    fn renders_sortable_rfc3339_and_parses_back() {
        let t = Timestamp::from_micros(1_700_000_000_123_456);
        let text = t.to_string();
        assert_eq!(text, "2023-11-14T22:13:20.123456Z");
        assert_eq!(Timestamp::parse_rfc3339(&text), Some(t));
        assert_eq!(Timestamp::parse_rfc3339("2023-11-14T23:13:20.123456+01:00"), Some(t));
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }
}
