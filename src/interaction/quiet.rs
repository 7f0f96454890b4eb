//! Quiet hours: when a person's phone is left alone (`[[people]] quiet = "22:00-07:00"`,
//! `time_zone = "Europe/Berlin"`). A notification to their phone that falls in them is held
//! until they end (and never sent if the interaction is settled or expires first), unless it
//! is an escalation whose route says escalations go through (`escalate_to.through_quiet`).
//!
//! The hours are wall-clock times in the person's time zone, so they follow daylight saving
//! time; a span past midnight ("22:00-07:00") ends the next morning.

use jiff::Timestamp;
use jiff::civil::Time;
use jiff::tz::TimeZone;

/// A person's quiet hours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuietHours {
    from: Time,
    to: Time,
    zone: TimeZone,
    /// As written, for messages.
    text: String,
}

/// Why quiet hours were refused: what is wrong, with the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuietError(pub String);

fn hhmm(s: &str) -> Option<Time> {
    let (h, m) = s.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (i8, i8) = (h.parse().ok()?, m.parse().ok()?);
    Time::new(h, m, 0, 0).ok()
}

impl QuietHours {
    /// Reads `"HH:MM-HH:MM"` in time zone `zone` (an IANA name such as `Europe/Berlin`;
    /// empty: the machine's own).
    pub fn parse(span: &str, zone: &str) -> Result<Self, QuietError> {
        let bad = || {
            QuietError(format!(
                "{span:?} is not a span of hours: write it as \"HH:MM-HH:MM\" on a 24-hour \
                 clock, like quiet = \"22:00-07:00\""
            ))
        };
        let (a, b) = span.split_once('-').ok_or_else(bad)?;
        let (from, to) = (hhmm(a).ok_or_else(bad)?, hhmm(b).ok_or_else(bad)?);
        if from == to {
            return Err(QuietError(format!(
                "{span:?} starts and ends at the same time: give the hours the phone is left \
                 alone, like \"22:00-07:00\""
            )));
        }
        let zone = match zone.trim() {
            "" => TimeZone::system(),
            name => TimeZone::get(name).map_err(|_| {
                QuietError(format!(
                    "time_zone = {name:?} is not a time zone this machine knows: use an IANA \
                     name, like \"Europe/Berlin\", \"America/New_York\" or \"UTC\""
                ))
            })?,
        };
        Ok(Self {
            from,
            to,
            zone,
            text: span.trim().to_string(),
        })
    }

    /// The span as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// When the quiet hours `now` falls in end; `None` when `now` is outside them.
    pub fn ends_after(&self, now: Timestamp) -> Option<Timestamp> {
        let local = now.to_zoned(self.zone.clone());
        let t = local.time();
        let inside = if self.from < self.to {
            self.from <= t && t < self.to
        } else {
            t >= self.from || t < self.to
        };
        if !inside {
            return None;
        }
        let day = if self.from > self.to && t >= self.from {
            local.date().tomorrow().ok()?
        } else {
            local.date()
        };
        day.to_datetime(self.to)
            .to_zoned(self.zone.clone())
            .ok()
            .map(|z| z.timestamp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_span_past_midnight_ends_the_next_morning_in_the_persons_zone() {
        let q = QuietHours::parse("22:00-07:00", "Europe/Berlin").unwrap();
        // 23:30 in Berlin (UTC+1 in winter): quiet until 07:00 the next day.
        assert_eq!(
            q.ends_after(at("2026-01-10T22:30:00Z")),
            Some(at("2026-01-11T06:00:00Z"))
        );
        // 05:00 in Berlin: quiet until 07:00 that day.
        assert_eq!(
            q.ends_after(at("2026-01-11T04:00:00Z")),
            Some(at("2026-01-11T06:00:00Z"))
        );
        // Noon: not quiet.
        assert_eq!(q.ends_after(at("2026-01-11T11:00:00Z")), None);
        // Summer time moves it with the clock (UTC+2).
        assert_eq!(
            q.ends_after(at("2026-07-11T21:00:00Z")),
            Some(at("2026-07-12T05:00:00Z"))
        );
        let day = QuietHours::parse("9:00-17:30", "UTC").unwrap();
        assert_eq!(
            day.ends_after(at("2026-07-11T12:00:00Z")),
            Some(at("2026-07-11T17:30:00Z"))
        );
        assert_eq!(day.ends_after(at("2026-07-11T17:30:00Z")), None);
    }

    #[test]
    fn bad_values_say_the_fix() {
        for (span, zone, needle) in [
            ("22-07", "UTC", "HH:MM-HH:MM"),
            ("25:00-07:00", "UTC", "HH:MM-HH:MM"),
            ("07:00-07:00", "UTC", "same time"),
            ("22:00-07:00", "Mars/Olympus", "Europe/Berlin"),
        ] {
            let e = QuietHours::parse(span, zone).unwrap_err();
            assert!(e.0.contains(needle), "{span} {zone}: {e}");
        }
    }
}
