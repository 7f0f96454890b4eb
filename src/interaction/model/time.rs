//! Times as imrelay writes them (RFC 3339, UTC, milliseconds), the clock it reads, and adding a
//! duration without overflow.

use std::fmt;

use jiff::Timestamp;
use serde::Serialize;

/// A time as imrelay writes every time it emits (API, events, audit trail, webhooks): RFC 3339
/// in UTC with three fractional digits, `2026-11-22T08:36:19.090Z`. (A bare [`Timestamp`]
/// drops trailing zeros: `…:19.09Z`.) Every time imrelay makes is a whole millisecond
/// ([`now`]); a finer one (given by code embedding the registry) keeps its further digits
/// rather than being cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(pub Timestamp);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.subsec_nanosecond() % 1_000_000 == 0 {
            write!(f, "{:.3}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Writes `t` as [`Millis`]: for `#[serde(serialize_with = "millis")]`.
pub fn millis<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    Millis(*t).serialize(s)
}

/// The current time, truncated to milliseconds (the precision imrelay stores).
pub fn now() -> Timestamp {
    let ms = Timestamp::now().as_millisecond();
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `t + d`, or `t` itself when that is beyond the representable times: for horizons and
/// expiries, where "never" and "now" are both safe readings of a duration too long to add.
pub fn after(t: Timestamp, d: std::time::Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}
