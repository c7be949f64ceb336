//! Where a persona stands at one instant, as the operator reads it: the current activity,
//! when it ends and, asleep, when the persona wakes, with the one way those instants are
//! written (local time in the persona's zone, with the zone's abbreviation or offset, and
//! the date when it is not the same local day). Every view of presence uses it (`ctl
//! status` and the owner's `/status`, `ctl schedule` and `state schedule`, the console's
//! personas page), so they never disagree. Pure: no I/O and no clock.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::{Activity, Presence};

/// A persona's presence at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The current activity.
    pub activity: Activity,
    /// When it ends.
    pub until: Timestamp,
    /// Asleep: when the persona wakes (the end of the whole sleep, across midnight).
    pub asleep_until: Option<Timestamp>,
}

impl Presence {
    /// Where the persona stands at `now`.
    pub fn standing(&self, now: Timestamp) -> Standing {
        let state = self.now(now);
        Standing {
            activity: state.activity,
            until: state.until,
            asleep_until: self.wake_at(now),
        }
    }
}

impl Standing {
    /// One line for the operator: `Sleep (asleep until 06:45 CET)` or `Lunch (responsiveness
    /// 50, until 13:00 CET)`, times in `tz` as [`local_time`] writes them.
    pub fn line(&self, tz: &TimeZone, now: Timestamp) -> String {
        match self.asleep_until {
            Some(wake) => format!(
                "{} (asleep until {})",
                self.activity.name,
                local_time(wake, tz, now)
            ),
            None => format!(
                "{} (responsiveness {}, until {})",
                self.activity.name,
                self.activity.responsiveness,
                local_time(self.until, tz, now)
            ),
        }
    }
}

/// An instant as the persona's clock shows it: `06:45 CET` on the local day of `now`, else
/// `2026-11-27 06:45 CET`. A zone without an abbreviation shows its offset (`+0545`).
pub fn local_time(at: Timestamp, tz: &TimeZone, now: Timestamp) -> String {
    let z = at.to_zoned(tz.clone());
    if z.date() == now.to_zoned(tz.clone()).date() {
        z.strftime("%H:%M %Z").to_string()
    } else {
        z.strftime("%Y-%m-%d %H:%M %Z").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{Presence, local_time};
    use jiff::Timestamp;
    use jiff::tz::TimeZone;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn times_are_local_with_the_zone_and_the_date_when_not_today() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap_or(TimeZone::UTC);
        let now = ts("2026-11-26T01:00:00Z");
        assert_eq!(
            local_time(ts("2026-11-26T06:00:00Z"), &berlin, now),
            "07:00 CET"
        );
        assert_eq!(
            local_time(ts("2026-11-27T06:00:00Z"), &berlin, now),
            "2026-11-27 07:00 CET"
        );
        let kathmandu = TimeZone::get("Asia/Kathmandu").unwrap_or(TimeZone::UTC);
        assert_eq!(
            local_time(ts("2026-11-26T06:00:00Z"), &kathmandu, now),
            "11:45 +0545"
        );
        // The fallback day sleeps until 07:00.
        let p = Presence::new(berlin.clone(), []);
        assert_eq!(
            p.standing(now).line(&berlin, now),
            "Sleep (asleep until 07:00 CET)"
        );
        let noon = ts("2026-11-26T11:30:00Z");
        assert_eq!(
            p.standing(noon).line(&berlin, noon),
            "Lunch (responsiveness 70, until 13:00 CET)"
        );
    }
}
