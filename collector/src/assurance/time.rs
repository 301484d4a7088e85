//! Timestamps in records: RFC 3339 in UTC with exactly three fractional digits
//! (`2026-09-29T12:00:00.000Z`), the one form sf writes and the only one it reads back from a
//! record. [`parse_loose`] also accepts whole seconds and other fractions, for deadlines
//! typed by a person.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The latest instant a record can name: 9999-12-31T23:59:59.999Z.
const MAX_MILLIS: u64 = 253_402_300_799_999;

/// Milliseconds since the Unix epoch, or `None` before 1970 or after year 9999.
pub fn to_millis(time: SystemTime) -> Option<u64> {
    let millis = u64::try_from(time.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()?;
    (millis <= MAX_MILLIS).then_some(millis)
}

/// The instant `millis` after the Unix epoch.
pub fn from_millis(millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(millis)
}

// Howard Hinnant's days-from-civil and civil-from-days algorithms, for the proleptic
// Gregorian calendar.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Formats `millis` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_millis(millis: u64) -> String {
    let seconds = millis / 1000;
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        millis % 1000
    )
}

/// Formats `time`, or `None` outside 1970 … 9999.
pub fn format(time: SystemTime) -> Option<String> {
    to_millis(time).map(format_millis)
}

fn digits(text: &str) -> Option<u32> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Parses exactly `YYYY-MM-DDTHH:MM:SS.mmmZ` (what [`format_millis`] writes) to milliseconds.
pub fn parse_millis(text: &str) -> Option<u64> {
    if text.len() != 24 || text.as_bytes()[19] != b'.' {
        return None;
    }
    let millis = parse_loose(text)?;
    (format_millis(millis) == text).then_some(millis)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.f…]Z` (UTC only; a fraction of 1 to 9 digits, truncated to
/// milliseconds) to milliseconds since the epoch.
pub fn parse_loose(text: &str) -> Option<u64> {
    let body = text.strip_suffix('Z')?;
    let (seconds_part, fraction) = match body.split_once('.') {
        Some((whole, fraction)) if (1..=9).contains(&fraction.len()) => {
            (whole, digits(fraction).map(|_| fraction)?)
        }
        Some(_) => return None,
        None => (body, "0"),
    };
    let bytes = seconds_part.as_bytes();
    if bytes.len() != 19
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || bytes[10] != b'T'
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let year = digits(&seconds_part[0..4])?;
    let month = digits(&seconds_part[5..7])?;
    let day = digits(&seconds_part[8..10])?;
    let hour = digits(&seconds_part[11..13])?;
    let minute = digits(&seconds_part[14..16])?;
    let second = digits(&seconds_part[17..19])?;
    if !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || day < 1
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    // Reject days past the end of the month (2026-02-30) by a round trip.
    if civil_from_days(days) != (i64::from(year), month, day) {
        return None;
    }
    let millis_of_second: u32 = format!("{fraction:0<3}")[..3].parse().ok()?;
    let seconds = days as u64 * 86_400 + u64::from(hour * 3600 + minute * 60 + second);
    Some(seconds * 1000 + u64::from(millis_of_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_millis(MAX_MILLIS), "9999-12-31T23:59:59.999Z");
        for millis in [0, 1, 951_782_400_123, 1_790_000_000_000, MAX_MILLIS] {
            assert_eq!(parse_millis(&format_millis(millis)), Some(millis));
        }
    }

    #[test]
    fn strict_and_loose() {
        assert_eq!(parse_loose("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        assert_eq!(
            parse_loose("2000-02-29T00:00:00.1234Z"),
            Some(951_782_400_123)
        );
        assert_eq!(parse_millis("2000-02-29T00:00:00Z"), None);
        for bad in [
            "2001-02-29T00:00:00.000Z",
            "2000-13-01T00:00:00.000Z",
            "2000-01-01T24:00:00.000Z",
            "2000-01-01 00:00:00.000Z",
            "2000-01-01T00:00:00.000+00:00",
            "1969-12-31T23:59:59.999Z",
            "2000-01-01T00:00:00.Z",
        ] {
            assert_eq!(parse_loose(bad), None, "{bad}");
        }
    }
}
