//! The operator's view of presence, shared by `personad state schedule`, `personad ctl
//! schedule` and the owner command `/schedule`: one local day of a persona's schedule (from
//! its file, or the fallback the runtime would use, saying which), the current activity
//! marked when the day is today with where the persona stands now (the line `ctl status`
//! prints, from the schedule the runtime holds when it runs), and the persona's scheduled
//! intents. Reads files (and the runtime's published schedule) only.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::adapters::store::StateDir;
use crate::adapters::store::presence::{days_on_disk, read_day, read_intents};
use crate::core::presence::{DaySchedule, Presence, Source};

/// One local day of a persona's schedule as read: where it comes from, what did not read,
/// its activities (the current one marked when the day is today) and where the persona
/// stands now. The text report and the console's schedule page both show it.
#[derive(Debug, Clone)]
pub(crate) struct DayView {
    pub(crate) day: Date,
    /// Where the day comes from, in words.
    pub(crate) origin: String,
    pub(crate) problems: Vec<String>,
    pub(crate) activities: Vec<crate::core::presence::Activity>,
    /// The index in `activities` of the current one (today only).
    pub(crate) current: Option<usize>,
    /// Where the persona stands now (today only).
    pub(crate) standing: Option<crate::core::presence::Standing>,
}

/// Reads local `day` of `agent`'s schedule (zone `tz`) at `now` (blocking). `live`: the
/// schedule the runtime holds (a running agent), which says where the persona stands now;
/// without it, the days on disk do.
pub(crate) fn day_view(
    dir: &StateDir,
    agent: &str,
    tz: &TimeZone,
    live: Option<&Presence>,
    day: Date,
    now: Timestamp,
) -> DayView {
    let today = now.to_zoned(tz.clone()).date();
    let mut problems = Vec::new();
    // The days before it too (a missing day falls back to a copy of the last real one),
    // and the next (a sleep that crosses midnight ends in it).
    let next = day.tomorrow().unwrap_or(day);
    let days: Vec<DaySchedule> = days_on_disk(dir, agent)
        .into_iter()
        .filter(|d| *d <= next)
        .rev()
        .take(9)
        .filter_map(|d| match read_day(dir, agent, d) {
            Ok(Some(Ok(s))) => Some(s),
            Ok(Some(Err(mut p))) => {
                if d == day {
                    problems.append(&mut p);
                }
                None
            }
            Ok(None) => None,
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        })
        .collect();
    let presence = Presence::new(tz.clone(), days);
    let shown = presence.day(day);
    let origin = match (&shown.source, presence.known(day).is_some()) {
        (Source::Generated, _) => "from its file (generated)".to_string(),
        (Source::Edited, _) => "from its file (edited by hand)".to_string(),
        (Source::Persona, _) => "from its file (changed by the persona)".to_string(),
        (Source::Fallback { attempts, retry_at }, true) => format!(
            "the fallback after {attempts} failed call(s){}",
            retry_at.map_or(String::new(), |t| format!(", next try from {t}"))
        ),
        (Source::Fallback { .. }, false) => {
            "no file yet: the fallback the runtime uses until one is written".to_string()
        }
    };
    // Where the persona stands now: the same line `ctl status` and the console show.
    let standing = (day == today).then(|| live.unwrap_or(&presence).standing(now));
    let current = standing
        .as_ref()
        .and_then(|s| shown.activities.iter().position(|a| *a == s.activity));
    DayView {
        day,
        origin,
        problems,
        activities: shown.activities.clone(),
        current,
        standing,
    }
}

/// The persona's scheduled intents as read (blocking): the list, or what did not read.
pub(crate) fn intents(
    dir: &StateDir,
    agent: &str,
) -> Result<Vec<crate::core::intents::Intent>, Vec<String>> {
    match read_intents(dir, agent) {
        Ok(Ok(intents)) => Ok(intents),
        Ok(Err(problems)) => Err(problems
            .into_iter()
            .map(|p| format!("intents.md unreadable: {p}"))
            .collect()),
        Err(e) => Err(vec![format!("intents unreadable: {e}")]),
    }
}

/// One intent in words: its id, chat, when, how often, and what it is about.
pub(crate) fn intent_line(i: &crate::core::intents::Intent) -> String {
    let mut out = format!("{} in chat {} ({}) at {}", i.id, i.chat, i.title, i.due);
    if let Some(every) = i.every {
        let _ = write!(out, ", every {every}");
    }
    if let Some(left) = i.left {
        let _ = write!(out, ", {left} left");
    }
    if i.urgent {
        out.push_str(", urgent");
    }
    let _ = write!(out, ": {}", i.text);
    out
}

/// The report for `agent` (zone `tz`) on local `day` (today when `None`) at `now`. `live`:
/// the schedule the runtime holds (a running agent), which says where the persona stands
/// now; without it, the days on disk do.
pub(crate) fn report(
    dir: &StateDir,
    agent: &str,
    tz: &TimeZone,
    has_schedule: bool,
    live: Option<&Presence>,
    day: Option<Date>,
    now: Timestamp,
) -> String {
    let today = now.to_zoned(tz.clone()).date();
    let day = day.unwrap_or(today);
    let zone = tz.iana_name().unwrap_or("UTC");
    let mut out = String::new();
    if !has_schedule {
        let _ = writeln!(
            out,
            "{agent} has no `# Daily Schedule`: always available, no schedule is kept."
        );
    } else {
        let view = day_view(dir, agent, tz, live, day, now);
        let _ = writeln!(
            out,
            "{agent}, {} {day} ({zone}), {}:",
            day.strftime("%A"),
            view.origin
        );
        for p in &view.problems {
            let _ = writeln!(out, "  unreadable: {p}");
        }
        for (n, a) in view.activities.iter().enumerate() {
            let mark = if view.current == Some(n) { "▶" } else { " " };
            let _ = write!(
                out,
                "{mark} {:<11} {:>3}  {}",
                a.span(),
                a.responsiveness,
                a.name
            );
            if !a.description.is_empty() {
                let _ = write!(out, ": {}", a.description);
            }
            out.push('\n');
        }
        if let Some(standing) = &view.standing {
            let _ = write!(out, "Now: {}", standing.line(tz, now));
            if standing.asleep_until.is_some() {
                out.push_str(": messages stay unread until then");
            }
            out.push('\n');
        }
    }
    match intents(dir, agent) {
        Ok(intents) if intents.is_empty() => out.push_str("No scheduled intents.\n"),
        Ok(intents) => {
            out.push_str("Scheduled intents:\n");
            for i in &intents {
                let _ = writeln!(out, "- {}", intent_line(i));
            }
        }
        Err(problems) => {
            for p in problems {
                let _ = writeln!(out, "{p}");
            }
        }
    }
    out
}

/// A day as the owner names it: `YYYY-MM-DD`, `today`, `tomorrow` or `yesterday` (relative
/// to `today`, the persona's local date); else why not.
pub(crate) fn parse_day(text: &str, today: Date) -> Result<Date, NotADay> {
    let word = text.trim().to_ascii_lowercase();
    let day = match word.as_str() {
        "today" => Ok(today),
        "tomorrow" => today.tomorrow(),
        "yesterday" => today.yesterday(),
        _ => word.parse::<Date>(),
    };
    day.map_err(|_| NotADay(text.to_string()))
}

/// A `--day` that names no day (`state schedule`, `ctl schedule`).
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a day: use YYYY-MM-DD, today or tomorrow")]
pub struct NotADay(pub(crate) String);

/// `/schedule [day]` and `ctl schedule`: the report for a running agent, whose persona the
/// runtime holds.
pub(crate) async fn for_owner(
    dir: &StateDir,
    runtime: &crate::runtime::RuntimeHandle,
    agent: String,
    day: Option<String>,
    now: Timestamp,
) -> Result<String, crate::app::ops::OpError> {
    use crate::app::ops::OpError;
    let persona = runtime.persona(&agent);
    let tz = persona
        .as_deref()
        .map_or(TimeZone::UTC, crate::runtime::driver::presence_zone);
    let today = now.to_zoned(tz.clone()).date();
    let day = day
        .map(|d| parse_day(&d, today))
        .transpose()
        .map_err(|e| OpError::refused(e.to_string()))?;
    // The schedule as the runtime holds it (with the next day's, and a day not written
    // yet): where the persona stands now is read from it, as `ctl status` does.
    let has = persona.is_some_and(|p| p.daily_schedule.is_some());
    let live = runtime.presence(&agent).map(|r| r.schedule);
    let dir = dir.clone();
    tokio::task::spawn_blocking(move || report(&dir, &agent, &tz, has, live.as_ref(), day, now))
        .await
        .map_err(OpError::from)
}
