//! Scheduled intents (the original's `event`): what a persona asked its future self to do in
//! one chat at a time in its own zone ("remind Alice tomorrow at 9"), once or repeating.
//! Owns the intent as data, the hand-editable Markdown file of an agent's intents, how one
//! write from a plan changes them (create, update or delete by id, capped per chat), and
//! when an intent fires next (a missed one fires once, then moves past now). Pure: no I/O,
//! no clock. The scheduler holds each agent's intents and fires them as plans; the store
//! reads and writes the file (`state/<agent>/intents.md`).
//!
//! The file:
//!
//! ```text
//! # Heidi: scheduled intents
//!
//! ## event-3f2a1b0c9d8e
//! - chat: 1234 (Alice)
//! - due: 2026-11-27 09:00
//! - every: 1 day
//! - left: 3
//! - urgent: no
//!
//! Remind Alice about the dentist.
//! ```
//!
//! `due` is local time in the persona's zone; `every`, `left` and `urgent` are optional
//! (`left` counts the firings still to come, this one included; without it a repeating
//! intent repeats until deleted).

use std::fmt::{self, Write as _};

use jiff::civil::DateTime;
use jiff::fmt::temporal::Pieces;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Span, Timestamp};

use crate::core::model::ChatId;

/// Most intents one chat may hold.
pub const MAX_PER_CHAT: usize = 10;
/// Longest intent text, in characters.
pub const TEXT_CHARS: usize = 500;
/// Shortest repeat interval (anything shorter is refused).
pub const MIN_INTERVAL_MINUTES: u32 = 10;

/// The unit of a repeat interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Minutes,
    Hours,
    Days,
    Weeks,
}

/// A repeat interval: `n` units (minutes and hours are elapsed time; days and weeks keep the
/// local time of day across DST changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    pub n: u32,
    pub unit: Unit,
}

/// One scheduled intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// `event-` and 12 hex digits (or whatever id a hand edit gave it).
    pub id: String,
    pub chat: ChatId,
    /// The chat's title when the intent was made (for people reading the file).
    pub title: String,
    /// What the persona's future self is asked to do.
    pub text: String,
    /// When it fires next, in the persona's local time.
    pub due: DateTime,
    pub every: Option<Every>,
    /// Firings still to come, this one included (`None`: until deleted).
    pub left: Option<u32>,
    /// May fire while the persona sleeps.
    pub urgent: bool,
}

/// One change a plan asks for (the `event` task): an `id` that exists with empty `text` and
/// nothing else deletes; an `id` that exists otherwise updates (fields left out stay, the
/// text too); no id, or an unknown one, creates.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct IntentWrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub text: String,
    /// ISO 8601 date-time; without an offset it is local time (in `timezone` when given,
    /// else the persona's zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// `30 minutes`, `2 hours`, `1 day`, `1 week` (singular or plural).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrences: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub urgent: bool,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntentChange {
    Created(String),
    Updated(String),
    Deleted(String),
}

/// Why a write was refused (the plan goes on without it; the reason is logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IntentRefused(pub String);

/// A problem of the intents file, with its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct IntentProblem {
    pub line: usize,
    pub message: String,
}

/// An intent firing: carried by the `received` task it starts, so the plan knows what it is
/// for and a restart knows the firing happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fired {
    pub id: String,
    pub text: String,
    /// The occurrence that fired.
    pub due: Timestamp,
    /// It may run while the persona sleeps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub urgent: bool,
}

/// How far ahead an intent may be due: a year (366 days).
const MAX_AHEAD: SignedDuration = SignedDuration::from_hours(366 * 24);
/// How long a one-shot due time may lie in the past (a model writing "now").
const PAST_GRACE: SignedDuration = SignedDuration::from_secs(60);
/// Longest repeat interval, in minutes (a year: 366 days).
const MAX_INTERVAL_MINUTES: u64 = 366 * 24 * 60;
/// Longest intent id a file may give.
const ID_CHARS: usize = 64;
/// Most occurrences [`next_after`] steps over (the repeated hour of a DST change).
const MAX_SKIPS: i64 = 64;
/// Most characters of model text quoted in a refusal.
const QUOTED_CHARS: usize = 40;

impl Unit {
    /// Minutes in one unit, and its name.
    fn size(self) -> (u64, &'static str) {
        match self {
            Unit::Minutes => (1, "minute"),
            Unit::Hours => (60, "hour"),
            Unit::Days => (24 * 60, "day"),
            Unit::Weeks => (7 * 24 * 60, "week"),
        }
    }
}

impl Every {
    /// The interval's length in minutes.
    fn minutes(self) -> u64 {
        u64::from(self.n) * self.unit.size().0
    }
}

impl fmt::Display for Every {
    /// The file form: `1 day`, `2 days`, `30 minutes`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.n == 1 { "" } else { "s" };
        write!(f, "{} {}{s}", self.n, self.unit.size().1)
    }
}

fn refused(message: impl Into<String>) -> IntentRefused {
    IntentRefused(message.into())
}

/// Model text quoted in a refusal: escaped, at most [`QUOTED_CHARS`] characters of it.
fn quoted(text: &str) -> String {
    let text = text.trim();
    let shown: String = text
        .chars()
        .take(QUOTED_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    let more = ["", "…"][usize::from(text.chars().count() > QUOTED_CHARS)];
    format!("`{shown}{more}`")
}

// ---------------------------------------------------------------------------------------------
// Intervals and times

/// Reads a repeat interval: a whole number and a unit (`minute`, `hour`, `day`, `week`,
/// singular or plural, any case; `min`, `mins`, `hr`, `hrs` too), with or without a space.
/// Shorter than [`MIN_INTERVAL_MINUTES`] or longer than a year is refused.
pub fn parse_interval(s: &str) -> Result<Every, IntentRefused> {
    let bad = || {
        refused(format!(
            "interval {} is not a number and a unit (`30 minutes`, `2 hours`, `1 day`, `1 week`)",
            quoted(s)
        ))
    };
    let text = s.trim().to_ascii_lowercase();
    let unit = text.trim_start_matches(|c: char| c.is_ascii_digit());
    let number = text.strip_suffix(unit).unwrap_or_default();
    let n: u32 = number.parse().map_err(|_| bad())?;
    let unit = match unit.trim() {
        "minute" | "minutes" | "min" | "mins" => Unit::Minutes,
        "hour" | "hours" | "hr" | "hrs" => Unit::Hours,
        "day" | "days" => Unit::Days,
        "week" | "weeks" => Unit::Weeks,
        _ => return Err(bad()),
    };
    let every = Every { n, unit };
    if !(u64::from(MIN_INTERVAL_MINUTES)..=MAX_INTERVAL_MINUTES).contains(&every.minutes()) {
        let message =
            format!("interval {every} is not from {MIN_INTERVAL_MINUTES} minutes to a year");
        return Err(refused(message));
    }
    Ok(every)
}

/// `dt` without its fraction of a second.
fn whole_seconds(dt: DateTime) -> DateTime {
    dt.with().subsec_nanosecond(0).build().unwrap_or(dt)
}

/// Reads an ISO 8601 date-time (`2026-03-01T14:00:00`, `2026-03-01 14:00`, seconds optional,
/// `Z` or an offset allowed) as the civil time in the persona zone `tz`, to the second.
/// `timezone` (an IANA name; blank is none) reads the date and time as local time there,
/// ignoring any offset (as the original does); otherwise an offset names the instant, a
/// `[Zone/Name]` annotation the zone, and without either the time is local in `tz`.
pub fn parse_time(
    time: &str,
    timezone: Option<&str>,
    tz: &TimeZone,
) -> Result<DateTime, IntentRefused> {
    let unknown = |name: &str| {
        refused(format!(
            "unknown time zone {} (an IANA name such as Europe/London)",
            quoted(name)
        ))
    };
    let zone = timezone.map(str::trim).filter(|z| !z.is_empty());
    let zone = zone
        .map(|name| TimeZone::get(name).map_err(|_| unknown(name)))
        .transpose()?;
    let raw = time.trim();
    let bad = format!(
        "time {} is not an ISO 8601 date-time such as 2026-03-01T14:00:00",
        quoted(raw)
    );
    let pieces = Pieces::parse(raw).map_err(|_| refused(bad))?;
    let Some(clock) = pieces.time() else {
        return Err(refused(format!("time {} has no time of day", quoted(raw))));
    };
    let civil = whole_seconds(pieces.date().to_datetime(clock));
    let out_of_range = || refused(format!("time {} is out of range", quoted(raw)));
    let at = match (zone, pieces.to_numeric_offset()) {
        (Some(zone), _) => zone
            .to_ambiguous_timestamp(civil)
            .compatible()
            .map_err(|_| out_of_range())?,
        (None, Some(offset)) => offset.to_timestamp(civil).map_err(|_| out_of_range())?,
        (None, None) => {
            let zone = pieces.to_time_zone().map_err(|_| unknown(raw))?;
            zone.as_ref()
                .unwrap_or(tz)
                .to_ambiguous_timestamp(civil)
                .compatible()
                .map_err(|_| out_of_range())?
        }
    };
    Ok(at.to_zoned(tz.clone()).datetime())
}

/// The instant of a due time in the persona zone `tz`. In a DST gap it is the instant after
/// the gap, in a repeated hour the first of the two; a time `tz` cannot place (out of range)
/// is read as UTC, clamped to the representable range. Never panics.
pub fn instant(due: DateTime, tz: &TimeZone) -> Timestamp {
    tz.to_ambiguous_timestamp(due)
        .compatible()
        .or_else(|_| TimeZone::UTC.to_ambiguous_timestamp(due).compatible())
        .unwrap_or([Timestamp::MAX, Timestamp::MIN][usize::from(due.year() < 0)])
}

/// The civil time of `at` in `tz`.
fn civil(at: Timestamp, tz: &TimeZone) -> DateTime {
    at.to_zoned(tz.clone()).datetime()
}

/// The first occurrence `due + k × every` (k ≥ 1) strictly after `after`. Minutes and hours
/// step in elapsed time; an occurrence whose civil time reads back as another instant (the
/// second pass of a repeated hour) is stepped over, so the due time always means what it
/// says. Days and weeks step in civil time (the same local clock time across DST). `None`
/// only when out of range.
fn next_after(due: DateTime, every: Every, tz: &TimeZone, after: Timestamp) -> Option<DateTime> {
    match every.unit {
        Unit::Minutes | Unit::Hours => {
            let step = i64::try_from(every.minutes()).ok()?.checked_mul(60)?;
            let start = instant(due, tz);
            let elapsed = start.duration_until(after).as_secs();
            let first = (elapsed.div_euclid(step) + 1).max(1);
            for k in first..first.saturating_add(MAX_SKIPS) {
                let at = start
                    .checked_add(SignedDuration::from_secs(k.checked_mul(step)?))
                    .ok()?;
                let next = civil(at, tz);
                if at > after && instant(next, tz) == at {
                    return Some(next);
                }
            }
            None
        }
        Unit::Days | Unit::Weeks => {
            let step = i64::try_from(every.minutes() / Unit::Days.size().0).ok()?;
            let today = civil(after, tz).date();
            let days = i64::from(due.date().until(today).ok()?.get_days());
            let first = days.div_euclid(step).max(1);
            for k in first..first.saturating_add(MAX_SKIPS) {
                let span = Span::new().try_days(k.checked_mul(step)?).ok()?;
                let next = due.checked_add(span).ok()?;
                if instant(next, tz) > after {
                    return Some(next);
                }
            }
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writes

/// The id a model gave, made usable: surrounding space and `[`/`]` trimmed.
fn clean_id(id: &str) -> String {
    id.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim()
        .to_string()
}

/// A field of a write, when given and not blank.
fn given(field: &Option<String>) -> Option<&str> {
    field.as_deref().filter(|f| !f.trim().is_empty())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Intent text as the file keeps it: trimmed, line ends trimmed, runs of blank lines made
/// one, a line that would read as a `##` heading escaped with `\`, capped at [`TEXT_CHARS`].
fn clean_text(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.replace('\r', " ");
        let line = line.trim_end();
        if line.is_empty() && lines.last().is_none_or(String::is_empty) {
            continue;
        }
        let start = line.trim_start();
        lines.push(if start.starts_with("##") {
            format!("\\{start}")
        } else {
            line.to_string()
        });
    }
    let joined = lines.join("\n");
    let capped: String = joined.trim().chars().take(TEXT_CHARS).collect();
    capped.trim_end().to_string()
}

/// Checks a due time against `now`: at most a year away; a one-shot one at most a minute
/// past, a repeating one moved to its first occurrence after `now`.
fn scheduled(
    due: DateTime,
    every: Option<Every>,
    tz: &TimeZone,
    now: Timestamp,
) -> Result<DateTime, IntentRefused> {
    let (ahead, shown) = (now.duration_until(instant(due, tz)), format_due(due));
    if ahead > MAX_AHEAD {
        return Err(refused(format!("{shown} is more than a year away")));
    }
    if ahead >= -PAST_GRACE {
        return Ok(due);
    }
    let (now_ts, now) = (now, format_due(civil(now, tz)));
    match every {
        None => Err(refused(format!("{shown} is in the past (it is {now} now)"))),
        Some(every) => next_after(due, every, tz, now_ts)
            .ok_or_else(|| refused(format!("{shown} is out of range"))),
    }
}

/// Applies one write of a plan of `chat` (titled `title`) to an agent's intents: deletes,
/// updates or creates (see [`IntentWrite`]); `new_id` names a created intent. Text is trimmed
/// and capped at [`TEXT_CHARS`] characters. On an update, fields left out stay; `urgent`
/// can only be turned on (`false` is indistinguishable from left out); the chat's title is
/// refreshed. Refused, leaving `intents` as they were: an id of another chat, an empty text
/// without an id of this chat, a new intent without a time or over [`MAX_PER_CHAT`], a due
/// time more than a year away or (one-shot) in the past, a bad time, zone or interval,
/// `occurrences` 0. A repeating intent whose first due time is past starts at its first
/// occurrence after `now`; `occurrences` only counts for a repeating intent.
pub fn apply(
    intents: &mut Vec<Intent>,
    chat: ChatId,
    title: &str,
    write: &IntentWrite,
    tz: &TimeZone,
    now: Timestamp,
    new_id: impl FnOnce() -> String,
) -> Result<IntentChange, IntentRefused> {
    if write.occurrences == Some(0) {
        return Err(refused("occurrences must be at least 1"));
    }
    let text = clean_text(&write.text);
    let id = given(&write.id).map(clean_id).filter(|id| !id.is_empty());
    let found = id
        .as_ref()
        .and_then(|id| intents.iter().position(|i| &i.id == id));
    if let Some(slot) = found.and_then(|index| intents.get_mut(index)) {
        if slot.chat != chat {
            return Err(refused(format!("{} is an intent of another chat", slot.id)));
        }
        let reschedule = [&write.time, &write.interval]
            .iter()
            .any(|f| given(f).is_some())
            || write.occurrences.is_some();
        if text.is_empty() && !reschedule {
            let deleted = slot.id.clone();
            intents.retain(|i| i.id != deleted);
            return Ok(IntentChange::Deleted(deleted));
        }
        let mut new = slot.clone();
        if !text.is_empty() {
            new.text = text;
        }
        if !title.trim().is_empty() {
            new.title = one_line(title);
        }
        if let Some(interval) = given(&write.interval) {
            new.every = Some(parse_interval(interval)?);
        }
        if let Some(time) = given(&write.time) {
            let due = parse_time(time, write.timezone.as_deref(), tz)?;
            new.due = scheduled(due, new.every, tz, now)?;
        }
        new.left = new.every.and(write.occurrences.or(new.left));
        new.urgent |= write.urgent;
        *slot = new;
        return Ok(IntentChange::Updated(slot.id.clone()));
    }
    if text.is_empty() {
        return Err(match id {
            Some(id) => refused(format!("no intent {} in this chat to delete", quoted(&id))),
            None => refused("the intent has no text"),
        });
    }
    if intents.iter().filter(|i| i.chat == chat).count() >= MAX_PER_CHAT {
        return Err(refused(format!(
            "this chat already has {MAX_PER_CHAT} intents (the most it may hold)"
        )));
    }
    let time = given(&write.time).ok_or_else(|| refused("a new intent needs a time"))?;
    let every = given(&write.interval).map(parse_interval).transpose()?;
    let due = parse_time(time, write.timezone.as_deref(), tz)?;
    let due = scheduled(due, every, tz, now)?;
    let id = new_id();
    if intents.iter().any(|i| i.id == id) {
        return Err(refused(format!("the new id {id} is taken")));
    }
    intents.push(Intent {
        id: id.clone(),
        chat,
        title: one_line(title),
        text,
        due,
        every,
        left: every.and(write.occurrences),
        urgent: write.urgent,
    });
    Ok(IntentChange::Created(id))
}

// ---------------------------------------------------------------------------------------------
// Firing

/// `intent` after it fired (at or after its due time, `now`): `None` when that was its last
/// firing (one-shot, or `left` reaches 0); else due at its first occurrence strictly after
/// `now` (a stretch missed while the daemon was down fires once), with `left` one less.
pub fn fire(intent: &Intent, now: Timestamp, tz: &TimeZone) -> Option<Intent> {
    let every = intent.every?;
    let left = match intent.left {
        Some(n) if n <= 1 => return None,
        left => left.map(|n| n - 1),
    };
    let due = next_after(intent.due, every, tz, now)?;
    Some(Intent {
        due,
        left,
        ..intent.clone()
    })
}

/// The earliest due instant of `intents` and its index (the first of equals).
pub fn next_due(intents: &[Intent], tz: &TimeZone) -> Option<(Timestamp, usize)> {
    intents
        .iter()
        .enumerate()
        .map(|(index, i)| (instant(i.due, tz), index))
        .min()
}

/// This chat's intents for the model, soonest first, one line each:
/// `- event-… at 2026-11-27 09:00 (every 1 day, 3 left, urgent): text`. Empty when none.
pub fn prompt_lines(intents: &[Intent], chat: ChatId) -> String {
    let mut mine: Vec<&Intent> = intents.iter().filter(|i| i.chat == chat).collect();
    mine.sort_by(|a, b| a.due.cmp(&b.due).then_with(|| a.id.cmp(&b.id)));
    let mut s = String::new();
    for i in mine {
        let parts: Vec<String> = [
            i.every.map(|every| format!("every {every}")),
            i.left.map(|left| format!("{left} left")),
            i.urgent.then(|| "urgent".to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let parts = if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        };
        let _ = writeln!(
            s,
            "- {} at {}{parts}: {}",
            i.id,
            format_due(i.due),
            one_line(&i.text)
        );
    }
    s
}

mod file;
use file::format_due;
pub use file::{parse_file, render_file};

#[cfg(test)]
mod tests;
