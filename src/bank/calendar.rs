//! The Federal Reserve's banking days and the ACH effective entry date (SPEC B3), and TARGET2's
//! business days, on which SEPA credit transfers settle.
//!
//! A banking day is a weekday that is not a Fed holiday: New Year's Day, Martin Luther King Jr.
//! Day, Presidents Day, Memorial Day, Juneteenth (from 2022), Independence Day, Labor Day,
//! Columbus Day, Veterans Day, Thanksgiving and Christmas. The Fed's observance rule differs
//! from the federal government's: a holiday on a Sunday is observed on the Monday after, but a
//! holiday on a Saturday is not moved to the Friday before (the Fed is open that Friday).
//!
//! "Before 14:00 Eastern" needs New York's offset. The US rule since 2007 (EDT, UTC-4, from the
//! second Sunday of March at 02:00 to the first Sunday of November at 02:00; EST, UTC-5,
//! otherwise) is written out here rather than pulling in a tz database crate for one zone whose
//! rule is law; cut-offs in a connection's own time zone (SPEC B2) will need one (jiff), and
//! this can move onto it then.

use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset, Weekday};

/// Same-day ACH is only asked for when the cut-off runs before this hour, Eastern (SPEC B3).
pub const SAME_DAY_BEFORE_HOUR: u8 = 14;

/// The `n`th (1-based) `weekday` of `month`.
fn nth_weekday(year: i32, month: Month, weekday: Weekday, n: u8) -> Date {
    let first = Date::from_calendar_date(year, month, 1).expect("day 1 exists");
    let shift = (7 + weekday.number_days_from_monday() - first.weekday().number_days_from_monday()) % 7;
    first + Duration::days(i64::from(shift + 7 * (n - 1)))
}

/// The last `weekday` of `month`.
fn last_weekday(year: i32, month: Month, weekday: Weekday) -> Date {
    let last = Date::from_calendar_date(year, month, month.length(year)).expect("last day exists");
    let back = (7 + last.weekday().number_days_from_monday() - weekday.number_days_from_monday()) % 7;
    last - Duration::days(i64::from(back))
}

fn day(year: i32, month: Month, day: u8) -> Date {
    Date::from_calendar_date(year, month, day).expect("a fixed holiday date exists")
}

/// The Fed's holidays of `year` on their calendar dates (before the Sunday rule).
pub fn holidays(year: i32) -> Vec<Date> {
    use Month::*;
    use Weekday::*;
    let mut dates = vec![
        day(year, January, 1),
        nth_weekday(year, January, Monday, 3),
        nth_weekday(year, February, Monday, 3),
        last_weekday(year, May, Monday),
        day(year, July, 4),
        nth_weekday(year, September, Monday, 1),
        nth_weekday(year, October, Monday, 2),
        day(year, November, 11),
        nth_weekday(year, November, Thursday, 4),
        day(year, December, 25),
    ];
    if year >= 2022 {
        dates.push(day(year, June, 19));
    }
    dates.sort();
    dates
}

/// Is `date` a Fed holiday as observed: the holiday itself, or the Monday after a Sunday one?
pub fn is_observed_holiday(date: Date) -> bool {
    let holidays = holidays(date.year());
    holidays.contains(&date) || (date.weekday() == Weekday::Monday && date.previous_day().is_some_and(|sunday| holidays.contains(&sunday)))
}

/// A weekday that is not an observed Fed holiday.
pub fn is_banking_day(date: Date) -> bool {
    !matches!(date.weekday(), Weekday::Saturday | Weekday::Sunday) && !is_observed_holiday(date)
}

/// The first day from `date` on (itself included) that `open` says a calendar is open.
fn first_open_from(date: Date, open: fn(Date) -> bool) -> Date {
    let mut day = date;
    while !open(day) {
        day = day.next_day().expect("dates before year 9999");
    }
    day
}

/// The first banking day strictly after `date`.
pub fn next_banking_day(date: Date) -> Date {
    first_open_from(date.next_day().expect("dates before year 9999"), is_banking_day)
}

/// `date` if it is a banking day, else the first banking day after it.
pub fn banking_day_on_or_after(date: Date) -> Date {
    first_open_from(date, is_banking_day)
}

/// Easter Sunday of `year` (the Gregorian computus, Meeus/Jones/Butcher).
fn easter_sunday(year: i32) -> Date {
    let (a, b, c) = (year % 19, year / 100, year % 100);
    let (d, e) = (b / 4, b % 4);
    let g = (b - (b + 8) / 25 + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let (i, k) = (c / 4, c % 4);
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day_of_month = (h + l - 7 * m + 114) % 31 + 1;
    let month = Month::try_from(month as u8).expect("Easter is in March or April");
    day(year, month, day_of_month as u8)
}

/// Is `date` a TARGET2 business day, when SEPA credit transfers settle: a weekday other than
/// New Year's Day, Good Friday, Easter Monday, 1 May and 25 and 26 December.
pub fn is_target_day(date: Date) -> bool {
    let easter = easter_sunday(date.year());
    let closed = [
        day(date.year(), Month::January, 1),
        easter - Duration::days(2),
        easter + Duration::days(1),
        day(date.year(), Month::May, 1),
        day(date.year(), Month::December, 25),
        day(date.year(), Month::December, 26),
    ];
    !matches!(date.weekday(), Weekday::Saturday | Weekday::Sunday) && !closed.contains(&date)
}

/// `date` if it is a TARGET2 business day, else the first one after it.
pub fn target_day_on_or_after(date: Date) -> Date {
    first_open_from(date, is_target_day)
}

/// New York's UTC offset at `instant`: EDT (-4) from the second Sunday of March 02:00 EST to
/// the first Sunday of November 02:00 EDT, EST (-5) otherwise.
pub fn eastern_offset(instant: OffsetDateTime) -> UtcOffset {
    let year = instant.to_offset(UtcOffset::UTC).year();
    // 02:00 EST is 07:00 UTC; 02:00 EDT is 06:00 UTC.
    let starts =
        PrimitiveDateTime::new(nth_weekday(year, Month::March, Weekday::Sunday, 2), Time::from_hms(7, 0, 0).expect("valid")).assume_utc();
    let ends = PrimitiveDateTime::new(nth_weekday(year, Month::November, Weekday::Sunday, 1), Time::from_hms(6, 0, 0).expect("valid"))
        .assume_utc();
    let hours = if instant >= starts && instant < ends { -4 } else { -5 };
    UtcOffset::from_hms(hours, 0, 0).expect("valid offset")
}

/// `instant` in New York's local time.
pub fn to_eastern(instant: OffsetDateTime) -> OffsetDateTime {
    instant.to_offset(eastern_offset(instant))
}

/// The effective entry date a cut-off at `cutoff` gives an entry, and whether it settles the
/// same day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveDate {
    pub date: Date,
    pub same_day: bool,
}

/// SPEC B3: the next banking day after the cut-off's (Eastern) date; or that same date when
/// `same_day_requested` (`priority: high`) and the cut-off runs before 14:00 Eastern on a
/// banking day. A high-priority order that misses that window goes out next-day.
pub fn effective_entry_date(cutoff: OffsetDateTime, same_day_requested: bool) -> EffectiveDate {
    let local = to_eastern(cutoff);
    let today = local.date();
    if same_day_requested && is_banking_day(today) && local.hour() < SAME_DAY_BEFORE_HOUR {
        return EffectiveDate { date: today, same_day: true };
    }
    EffectiveDate { date: next_banking_day(today), same_day: false }
}

#[cfg(test)]
mod tests {
    use time::macros::{date, datetime};

    use super::*;

    #[test]
    fn fed_holidays_2026_and_2027_on_their_observed_days() {
        let observed = |year| {
            std::iter::successors(Date::from_calendar_date(year, Month::January, 1).ok(), |d| d.next_day())
                .take(366)
                .filter(|d: &Date| {
                    d.year() == year && is_observed_holiday(*d) && !matches!(d.weekday(), Weekday::Saturday | Weekday::Sunday)
                })
                .collect::<Vec<_>>()
        };
        #[rustfmt::skip]
        let want_2026 = [date!(2026-01-01), date!(2026-01-19), date!(2026-02-16), date!(2026-05-25), date!(2026-06-19), date!(2026-09-07), date!(2026-10-12), date!(2026-11-11), date!(2026-11-26), date!(2026-12-25)];
        assert_eq!(observed(2026), want_2026, "July 4th 2026 is a Saturday: no weekday holiday for it");
        #[rustfmt::skip]
        let want_2027 = [date!(2027-01-01), date!(2027-01-18), date!(2027-02-15), date!(2027-05-31), date!(2027-07-05), date!(2027-09-06), date!(2027-10-11), date!(2027-11-11), date!(2027-11-25)];
        assert_eq!(observed(2027), want_2027, "Juneteenth and Christmas 2027 fall on Saturdays; July 4th on a Sunday moves to Monday");
    }

    #[test]
    fn target2_closes_on_weekends_easter_may_day_and_christmas() {
        assert_eq!(easter_sunday(2026), date!(2026 - 04 - 05));
        assert_eq!(easter_sunday(2027), date!(2027 - 03 - 28));
        assert_eq!(easter_sunday(2038), date!(2038 - 04 - 25), "the latest Easter of the century but one");
        for closed in [date!(2026 - 04 - 03), date!(2026 - 04 - 06), date!(2026 - 05 - 01), date!(2026 - 12 - 25), date!(2027 - 01 - 01)] {
            assert!(!is_target_day(closed), "{closed}");
        }
        assert!(is_target_day(date!(2026 - 11 - 26)), "Thanksgiving is not a TARGET2 holiday");
        assert_eq!(target_day_on_or_after(date!(2026 - 12 - 24)), date!(2026 - 12 - 24));
        assert_eq!(target_day_on_or_after(date!(2026 - 12 - 25)), date!(2026 - 12 - 28), "over Christmas, St Stephen's and the weekend");
        assert_eq!(target_day_on_or_after(date!(2026 - 04 - 03)), date!(2026 - 04 - 07), "over Good Friday, Easter and Easter Monday");
    }

    #[test]
    fn banking_day_on_or_after_keeps_a_banking_day() {
        assert_eq!(banking_day_on_or_after(date!(2026 - 11 - 25)), date!(2026 - 11 - 25));
        assert_eq!(banking_day_on_or_after(date!(2026 - 11 - 26)), date!(2026 - 11 - 27), "Thanksgiving");
        assert_eq!(banking_day_on_or_after(date!(2026 - 11 - 28)), date!(2026 - 11 - 30), "a Saturday");
    }

    #[test]
    fn saturday_holidays_are_not_observed_on_friday() {
        assert!(is_banking_day(date!(2026 - 07 - 03)), "July 4th 2026 is a Saturday: Friday the 3rd is open");
        assert!(is_banking_day(date!(2027 - 06 - 18)), "Juneteenth 2027 is a Saturday: Friday the 18th is open");
        assert!(is_banking_day(date!(2027 - 12 - 24)), "Christmas 2027 is a Saturday: Christmas Eve is open");
        assert!(is_banking_day(date!(2027 - 12 - 31)), "New Year 2028 is a Saturday: Dec 31 2027 is a banking day");
        assert!(!is_banking_day(date!(2027 - 07 - 05)), "July 4th 2027 is a Sunday: observed Monday");
        assert!(!is_banking_day(date!(2022 - 06 - 20)) && is_banking_day(date!(2021 - 06 - 18)), "Juneteenth from 2022");
    }

    #[test]
    fn next_banking_day_skips_weekends_and_holidays_strictly_after() {
        assert_eq!(next_banking_day(date!(2026 - 11 - 25)), date!(2026 - 11 - 27), "over Thanksgiving");
        assert_eq!(next_banking_day(date!(2026 - 12 - 24)), date!(2026 - 12 - 28), "over Christmas and the weekend");
        assert_eq!(next_banking_day(date!(2027 - 07 - 02)), date!(2027 - 07 - 06), "weekend then July 5th observed");
        assert_eq!(next_banking_day(date!(2027 - 12 - 30)), date!(2027 - 12 - 31));
        assert_eq!(next_banking_day(date!(2027 - 12 - 31)), date!(2028 - 01 - 03));
        assert_eq!(next_banking_day(date!(2026 - 01 - 16)), date!(2026 - 01 - 20), "MLK Day");
    }

    #[test]
    fn eastern_offset_follows_us_daylight_saving() {
        let offset = |t: OffsetDateTime| eastern_offset(t).whole_hours();
        assert_eq!(offset(datetime!(2026-03-08 06:59 UTC)), -5, "01:59 EST, just before the change");
        assert_eq!(offset(datetime!(2026-03-08 07:00 UTC)), -4, "02:00 EST becomes 03:00 EDT");
        assert_eq!(offset(datetime!(2026-11-01 05:59 UTC)), -4);
        assert_eq!(offset(datetime!(2026-11-01 06:00 UTC)), -5, "02:00 EDT becomes 01:00 EST");
        assert_eq!(offset(datetime!(2027-01-15 12:00 UTC)), -5);
    }

    #[test]
    fn b3_effective_date_is_next_banking_day_or_same_day_before_14_eastern() {
        let at = |t| effective_entry_date(t, true);
        // Summer (EDT): 13:59 Eastern is 17:59 UTC.
        assert_eq!(at(datetime!(2026-07-02 17:59 UTC)), EffectiveDate { date: date!(2026 - 07 - 02), same_day: true });
        assert_eq!(
            at(datetime!(2026-07-02 18:00 UTC)),
            EffectiveDate { date: date!(2026 - 07 - 03), same_day: false },
            "14:00 Eastern is too late"
        );
        // Winter (EST): 13:59 Eastern is 18:59 UTC.
        assert!(at(datetime!(2026-12-04 18:59 UTC)).same_day);
        assert_eq!(at(datetime!(2026-12-04 19:00 UTC)).date, date!(2026 - 12 - 07), "Friday after 14:00: Monday");
        assert_eq!(effective_entry_date(datetime!(2026-12-04 15:00 UTC), false).date, date!(2026 - 12 - 07), "normal priority is next-day");
        assert_eq!(at(datetime!(2026-11-26 15:00 UTC)).date, date!(2026 - 11 - 27), "Thanksgiving is no banking day: no same-day");
        assert_eq!(at(datetime!(2026-07-04 15:00 UTC)).date, date!(2026 - 07 - 06), "Saturday");
        // 23:30 Eastern on Dec 31 2027 is already Jan 1 in UTC; the Eastern date counts.
        assert_eq!(effective_entry_date(datetime!(2028-01-01 04:30 UTC), false).date, date!(2028 - 01 - 03));
    }
}
