//! Freshness budgets: how stale a state table may be.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Duration as ChronoDuration, NaiveTime, Utc};

/// The longest duration budget: a year (`365d`). Longer ones would overflow the clock arithmetic
/// of commit cadence and lag, and no table is kept that stale on purpose.
pub const MAX_BUDGET: Duration = Duration::from_secs(365 * 86_400);

/// A table's freshness budget, written `500ms`, `1s`, `5m`, `2h` or `nightly@02:00` (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Every event must be visible within this long of being recorded.
    Within(Duration),
    /// Every event recorded before the most recent `HH:MM` UTC must be visible.
    Nightly { at: NaiveTime },
}

impl Freshness {
    /// How often a deriver commits to honour the budget, at least every 50 ms:
    /// - under a minute (tables agents react to): an eighth of the budget, so most events are
    ///   readable within a fraction of it and a commit that has to wait for a compaction still
    ///   fits (a 1 s table commits every 125 ms);
    /// - a minute or more: half the budget (one commit interval of delay plus processing stays
    ///   inside it, with few snapshots).
    ///
    /// Nightly: `None`, the deriver commits at the nightly time instead.
    pub fn commit_interval(&self) -> Option<Duration> {
        const AGENT_FACING: Duration = Duration::from_secs(60);
        match self {
            Freshness::Within(d) if *d < AGENT_FACING => Some((*d / 8).max(Duration::from_millis(50))),
            Freshness::Within(d) => Some((*d / 2).max(Duration::from_millis(50))),
            Freshness::Nightly { .. } => None,
        }
    }

    /// The most lag that is still within budget at `now`.
    pub fn allowed_lag(&self, now: DateTime<Utc>) -> Duration {
        match self {
            Freshness::Within(d) => *d,
            Freshness::Nightly { .. } => (now - self.last_boundary(now)).to_std().unwrap_or_default(),
        }
    }

    /// For a nightly budget, the most recent `HH:MM` at or before `now`; otherwise `now`.
    pub fn last_boundary(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Freshness::Within(_) => now,
            Freshness::Nightly { at } => {
                let today = now.date_naive().and_time(*at).and_utc();
                if today <= now {
                    today
                } else {
                    today - ChronoDuration::days(1)
                }
            }
        }
    }
}

impl fmt::Display for Freshness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Freshness::Within(d) => f.write_str(&format_duration(*d)),
            Freshness::Nightly { at } => write!(f, "nightly@{}", at.format("%H:%M")),
        }
    }
}

/// `1.2s`, `350ms`, `5m`, `2h`: short human durations.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms < 60_000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// Parses `250ms`, `1s`, `5m`, `2h`, `1d`.
///
/// # Errors
/// A message quoting the text.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a duration like 500ms, 1s, 5m, 2h"))?;
    let secs = |per: u64| {
        n.checked_mul(per).map(Duration::from_secs).ok_or_else(|| format!("`{s}` is too long a duration"))
    };
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => secs(60)?,
        "h" => secs(3600)?,
        "d" => secs(86_400)?,
        _ => return Err(format!("`{s}` has unknown unit `{unit}` (use ms, s, m, h or d)")),
    };
    if d.is_zero() {
        return Err(format!("`{s}` is zero: a budget must be positive"));
    }
    Ok(d)
}

impl FromStr for Freshness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if let Some(rest) = t.strip_prefix("nightly") {
            let at = match rest.strip_prefix('@') {
                None if rest.is_empty() => NaiveTime::from_hms_opt(2, 0, 0).expect("valid time"),
                Some(hm) => NaiveTime::parse_from_str(hm, "%H:%M")
                    .map_err(|_| format!("`{s}`: expected nightly@HH:MM, e.g. nightly@02:00"))?,
                None => return Err(format!("`{s}`: expected nightly@HH:MM, e.g. nightly@02:00")),
            };
            return Ok(Freshness::Nightly { at });
        }
        match parse_duration(t)? {
            d if d > MAX_BUDGET => Err(format!("`{s}` is longer than 365d, the longest budget")),
            d => Ok(Freshness::Within(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_budgets() {
        assert_eq!("1s".parse::<Freshness>().unwrap(), Freshness::Within(Duration::from_secs(1)));
        assert_eq!("5m".parse::<Freshness>().unwrap().to_string(), "5m");
        assert_eq!("nightly@02:00".parse::<Freshness>().unwrap().to_string(), "nightly@02:00");
        assert!("0s".parse::<Freshness>().unwrap_err().contains("zero"));
        assert!("5 parsecs".parse::<Freshness>().is_err());
        assert!("nightly@25:00".parse::<Freshness>().is_err());
    }

    #[test]
    fn budgets_that_would_overflow_or_are_not_durations_are_refused_by_name() {
        assert_eq!("365d".parse::<Freshness>().unwrap(), Freshness::Within(MAX_BUDGET));
        assert!("366d".parse::<Freshness>().unwrap_err().contains("longer than"));
        // u64::MAX days once overflowed the multiplication (a panic in debug builds).
        let e = "18446744073709551615d".parse::<Freshness>().unwrap_err();
        assert!(e.contains("too long"), "{e}");
        assert!("18446744073709551615ms".parse::<Freshness>().unwrap_err().contains("longer than"));
        assert!("-5m".parse::<Freshness>().unwrap_err().contains("not a duration"));
        assert!("forever".parse::<Freshness>().unwrap_err().contains("not a duration"));
        assert!("5 m".parse::<Freshness>().unwrap_err().contains("unit"));
    }

    #[test]
    fn nightly_allows_lag_since_last_boundary() {
        let f: Freshness = "nightly@02:00".parse().unwrap();
        let now = "2026-03-01T02:30:00Z".parse::<DateTime<Utc>>().unwrap();
        assert_eq!(f.allowed_lag(now), Duration::from_secs(1800));
        let before = "2026-03-01T01:00:00Z".parse::<DateTime<Utc>>().unwrap();
        assert_eq!(f.allowed_lag(before), Duration::from_secs(23 * 3600));
    }

    #[test]
    fn commit_interval_is_half_a_long_budget_and_an_eighth_of_a_short_one() {
        let every = |f: &str| f.parse::<Freshness>().unwrap().commit_interval();
        assert_eq!(every("1m"), Some(Duration::from_secs(30)));
        assert_eq!(every("5m"), Some(Duration::from_secs(150)));
        assert_eq!(every("1s"), Some(Duration::from_millis(125)));
        assert_eq!(every("30s"), Some(Duration::from_millis(3750)));
        assert_eq!(every("200ms"), Some(Duration::from_millis(50)));
        assert_eq!(every("nightly"), None);
    }
}
