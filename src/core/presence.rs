//! Presence as data: a persona's day as activities in its own time zone (start–end in local
//! minutes, responsiveness 0–100), the hand-editable Markdown form of one day's file, the
//! checks a day must pass (contiguous from 00:00 to 24:00, no overlap, range), the
//! deterministic fallback day, the timing curve (how long a persona takes to read and answer
//! at a given responsiveness) and the instants where the day changes (DST-aware). Pure: no
//! I/O and no clock. The scheduler asks [`Presence`] whether an agent is asleep and when it
//! wakes; the operator's views ask it where the persona stands ([`Standing`], one line for
//! all of them); the schedule store (`adapters::store::schedule`) reads and writes the files; the
//! `schedule` task's handler asks the planner for a day and checks its answer here.
//!
//! A day's file (`state/<agent>/schedule/2026-11-26.md`):
//!
//! ```text
//! # Heidi: Thursday 2026-11-26
//!
//! <!-- schedule: source=generated -->
//!
//! - 00:00–06:45 | 0 | Sleep | Asleep in flannel pajamas
//! - 06:45–07:30 | 30 | Getting ready | Shower, cereal and milk
//! - 07:30–15:00 | 15 | School | Classes; lunch with Sylvia at noon
//! - ...
//! - 22:30–24:00 | 0 | Sleep |
//! ```
//!
//! One line per activity: local start–end (`24:00` ends the day), responsiveness, name,
//! description. Lines that do not start with `- ` are comments.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

pub mod edit;
mod source;
mod standing;
pub use source::Source;
pub use standing::{Standing, local_time};

/// Minutes in a civil day: the end of the last activity.
pub const DAY_MINUTES: u16 = 1440;
/// From this local time on, the next day's schedule is generated (18:00).
pub const GENERATE_FROM_MINUTE: u16 = 18 * 60;
/// Most schedule calls for one day of one persona.
pub const CALLS_PER_DAY: u32 = 2;
/// Wait after a failed schedule call before the next one (doubles once).
pub const RETRY_AFTER: Duration = Duration::from_secs(30 * 60);
/// How long after its last message a persona is still "online" and answers faster.
pub const ONLINE_WINDOW: Duration = Duration::from_secs(300);
/// The longest stretch of sleep: a schedule asleep for longer (a damaged or odd file) wakes
/// the persona at this point.
pub const MAX_SLEEP: Duration = Duration::from_secs(20 * 3600);
/// The shortest wait before reading at full responsiveness, in seconds.
pub const FASTEST_SECS: f64 = 4.0;
/// The wait at responsiveness 1, in seconds (the original's curve: 4 s at 100, 120 s at 1).
pub const SLOWEST_SECS: f64 = 120.0;
/// Longest activity name and description kept, in characters.
pub(crate) const NAME_CHARS: usize = 80;
pub(crate) const DESCRIPTION_CHARS: usize = 300;
/// Most activities in one day.
pub const MAX_ACTIVITIES: usize = 48;
/// How far back a fallback day looks for a day to copy.
const COPY_BACK_DAYS: i32 = 7;

/// One activity of a day, in local minutes since midnight (`end` may be 1440).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    pub start: u16,
    pub end: u16,
    /// 0 (asleep: nothing is read) to 100 (chatting).
    pub responsiveness: u8,
    pub name: String,
    pub description: String,
}

impl Activity {
    fn new(start: u16, end: u16, responsiveness: u8, name: &str) -> Activity {
        Activity {
            start,
            end,
            responsiveness,
            name: name.to_string(),
            description: String::new(),
        }
    }

    /// `HH:MM–HH:MM`.
    pub fn span(&self) -> String {
        format!("{}–{}", hhmm(self.start), hhmm(self.end))
    }

    pub fn asleep(&self) -> bool {
        self.responsiveness == 0
    }

    /// The file's line for this activity.
    pub fn line(&self) -> String {
        format!(
            "- {} | {} | {} | {}",
            self.span(),
            self.responsiveness,
            one_line(&self.name),
            one_line(&self.description)
        )
        .trim_end()
        .to_string()
    }
}

/// One local day of a persona.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaySchedule {
    pub date: Date,
    pub source: Source,
    /// Contiguous, from 00:00 to 24:00.
    pub activities: Vec<Activity>,
}

/// A problem of a day's file or of a model's answer, with its line (1-based; 0: the whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ScheduleProblem {
    pub line: usize,
    pub message: String,
}

fn problem(line: usize, message: impl Into<String>) -> ScheduleProblem {
    ScheduleProblem {
        line,
        message: message.into(),
    }
}

impl DaySchedule {
    /// The activity at local minute `minute` (0..1440).
    pub fn activity_at(&self, minute: u16) -> Option<&Activity> {
        self.activities
            .iter()
            .find(|a| a.start <= minute && minute < a.end)
    }

    /// Whether a model call may (re)write this day: it is missing or a fallback whose retry
    /// time has come with calls left.
    pub fn may_regenerate(&self, now: Timestamp) -> bool {
        match &self.source {
            Source::Fallback { attempts, retry_at } => {
                *attempts < CALLS_PER_DAY && retry_at.is_none_or(|at| at <= now)
            }
            _ => false,
        }
    }

    /// The file: a title, the source comment, one line per activity.
    pub fn render(&self, agent: &str) -> String {
        let mut out = format!(
            "# {agent}: {} {}\n\n<!-- schedule: {} -->\n\n",
            self.date.strftime("%A"),
            self.date,
            self.source.comment()
        );
        for a in &self.activities {
            out.push_str(&a.line());
            out.push('\n');
        }
        out
    }

    /// Reads a day's file (or a model's answer, which uses the same lines): the activity
    /// lines, checked; the source comment when present.
    pub fn parse(text: &str, date: Date) -> Result<DaySchedule, Vec<ScheduleProblem>> {
        let mut problems = Vec::new();
        let mut source = Source::Generated;
        let mut raw = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let t = line.trim();
            if let Some(c) = t
                .strip_prefix("<!-- schedule:")
                .and_then(|r| r.strip_suffix("-->"))
            {
                match Source::parse(c.trim()) {
                    Ok(s) => source = s,
                    Err(e) => problems.push(problem(n, e.0)),
                }
                continue;
            }
            let Some(body) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) else {
                continue;
            };
            match parse_line(body) {
                Ok(a) => raw.push((n, a)),
                Err(e) => problems.push(problem(n, e.0)),
            }
        }
        if raw.len() > MAX_ACTIVITIES {
            problems.push(problem(
                0,
                format!("{} activities; at most {MAX_ACTIVITIES} per day", raw.len()),
            ));
        }
        let activities = match contiguous(raw) {
            Ok(a) => a,
            Err(mut p) => {
                problems.append(&mut p);
                Vec::new()
            }
        };
        if !activities.is_empty() && activities.iter().all(Activity::asleep) {
            // A day asleep throughout would silence the persona (and every fallback copied
            // from it): a day needs a waking activity.
            problems.push(problem(
                0,
                "no activity above responsiveness 0: a day needs some waking time",
            ));
        }
        if problems.is_empty() {
            Ok(DaySchedule {
                date,
                source,
                activities,
            })
        } else {
            Err(problems)
        }
    }
}

/// One activity line (without its `- `): `HH:MM–HH:MM | r | name | description`.
fn parse_line(body: &str) -> Result<Activity, crate::core::Invalid> {
    let mut fields = body.splitn(4, '|').map(str::trim);
    let span = fields.next().unwrap_or_default();
    let (start, end) = span
        .split_once('–')
        .or_else(|| span.split_once('—'))
        .or_else(|| span.split_once('-'))
        .ok_or_else(|| {
            crate::core::Invalid(format!("{span:?} is not a time span (HH:MM–HH:MM)"))
        })?;
    let start = minute_of(start.trim())?;
    let end = minute_of(end.trim())?;
    if start >= DAY_MINUTES {
        return Err(format!("an activity cannot start at {}", hhmm(start)).into());
    }
    if end <= start {
        return Err(format!(
            "{span:?} ends before it starts (an activity past midnight continues in the next day's file)"
        )
        .into());
    }
    let r = fields.next().ok_or_else(|| {
        crate::core::Invalid::from("missing responsiveness (0 to 100) after the time span")
    })?;
    let responsiveness: u8 = r.parse().ok().filter(|v| *v <= 100).ok_or_else(|| {
        crate::core::Invalid(format!(
            "responsiveness {r:?} is not a whole number from 0 to 100"
        ))
    })?;
    let name = fields.next().unwrap_or_default();
    if name.is_empty() {
        return Err(crate::core::Invalid::from("missing the activity's name"));
    }
    let description = fields.next().unwrap_or_default();
    // Kept as the file writes it (one line, no `|`), so a day reads back the same.
    let clean = |s: &str, cap: usize| -> String {
        one_line(s)
            .chars()
            .take(cap)
            .collect::<String>()
            .trim_end()
            .to_string()
    };
    Ok(Activity {
        start,
        end,
        responsiveness,
        name: clean(name, NAME_CHARS),
        description: clean(description, DESCRIPTION_CHARS),
    })
}

/// Sorts activities and checks them: no overlap, from 00:00 to 24:00; a gap is filled by
/// the activity before it (stretched), or one at the start of the day by the first.
fn contiguous(mut raw: Vec<(usize, Activity)>) -> Result<Vec<Activity>, Vec<ScheduleProblem>> {
    if raw.is_empty() {
        return Err(vec![problem(
            0,
            "no activity lines (`- HH:MM–HH:MM | r | name | description`)",
        )]);
    }
    raw.sort_by_key(|(_, a)| a.start);
    let mut problems = Vec::new();
    let mut out: Vec<Activity> = Vec::with_capacity(raw.len());
    for (line, a) in raw {
        if let Some(prev) = out.last_mut() {
            if a.start < prev.end {
                problems.push(problem(
                    line,
                    format!("{} overlaps {} ({})", a.span(), prev.span(), prev.name),
                ));
                continue;
            }
            // A gap: the activity before goes on.
            prev.end = a.start;
        }
        out.push(a);
    }
    if let Some(first) = out.first_mut() {
        first.start = 0;
    }
    if let Some(last) = out.last_mut() {
        last.end = DAY_MINUTES;
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// `HH:MM` (or `H:MM`) as minutes; `24:00` is the end of the day.
fn minute_of(s: &str) -> Result<u16, crate::core::Invalid> {
    let (h, m) = s
        .split_once(':')
        .ok_or_else(|| crate::core::Invalid(format!("{s:?} is not a time (HH:MM)")))?;
    let (h, m): (u16, u16) = match (h.trim().parse(), m.trim().parse()) {
        (Ok(h), Ok(m)) if m < 60 && (h < 24 || (h == 24 && m == 0)) => (h, m),
        _ => return Err(format!("{s:?} is not a time from 00:00 to 24:00").into()),
    };
    Ok(h * 60 + m)
}

/// Minutes as `HH:MM`.
pub fn hhmm(minute: u16) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "/")
}

/// The deterministic fallback for `date`: a copy of `previous` (the nearest earlier day that
/// was not a fallback itself) or, without one, a plain template (asleep 23:00–07:00).
pub fn fallback(date: Date, previous: Option<&DaySchedule>, source: Source) -> DaySchedule {
    let activities = match previous {
        Some(p) if !p.activities.is_empty() => p.activities.clone(),
        _ => vec![
            Activity::new(0, 7 * 60, 0, "Sleep"),
            Activity::new(7 * 60, 8 * 60, 30, "Morning routine"),
            Activity::new(8 * 60, 12 * 60, 40, "Busy with the day"),
            Activity::new(12 * 60, 13 * 60, 70, "Lunch"),
            Activity::new(13 * 60, 18 * 60, 40, "Busy with the day"),
            Activity::new(18 * 60, 19 * 60, 50, "Dinner"),
            Activity::new(19 * 60, 23 * 60, 80, "Free evening"),
            Activity::new(23 * 60, DAY_MINUTES, 0, "Sleep"),
        ],
    };
    DaySchedule {
        date,
        source,
        activities,
    }
}

/// How long the persona takes before reading (and planning an answer to) a message at
/// responsiveness `r` (1–100): 4 s at 100 up to 120 s at 1 on a straight line, times a jitter
/// factor from 0.75 to 1.25 (`jitter` in 0..1). While `online` (it wrote in the last five
/// minutes) it reads as fast as at 100.
pub fn response_delay(r: u8, online: bool, jitter: f64) -> Duration {
    let r = if online { 100 } else { r.clamp(1, 100) };
    let base = FASTEST_SECS + f64::from(100 - r) * (SLOWEST_SECS - FASTEST_SECS) / 99.0;
    let factor = 0.75 + 0.5 * jitter.clamp(0.0, 1.0);
    Duration::from_secs_f64(base * factor)
}

/// The documented range of [`response_delay`] at `r`, in seconds (lowest, highest).
pub fn delay_range(r: u8) -> (f64, f64) {
    (
        response_delay(r, false, 0.0).as_secs_f64(),
        response_delay(r, false, 1.0).as_secs_f64(),
    )
}

/// Where a persona is at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceNow {
    pub date: Date,
    pub activity: Activity,
    /// When the current activity ends.
    pub until: Timestamp,
    /// The activity after it.
    pub next: Option<Activity>,
    /// The day is the fallback (no file, or a fallback file).
    pub fallback: bool,
}

impl PresenceNow {
    /// The prompt's lines about it (the volatile block).
    pub fn prompt_text(&self, tz: &TimeZone) -> String {
        let until = self.until.to_zoned(tz.clone());
        let mut s = format!(
            "Current activity: {} (until {}, responsiveness {}/100)",
            self.activity.name,
            until.strftime("%H:%M"),
            self.activity.responsiveness
        );
        if !self.activity.description.is_empty() {
            let _ = write!(s, ": {}", self.activity.description);
        }
        if let Some(n) = &self.next {
            let _ = write!(s, "\nNext: {} from {}", n.name, hhmm(n.start % DAY_MINUTES));
        }
        s
    }
}

/// A persona's schedule: its zone and the days known (from files or generated), with the
/// fallback for days that are not.
#[derive(Debug, Clone, PartialEq)]
pub struct Presence {
    pub tz: TimeZone,
    days: BTreeMap<Date, DaySchedule>,
    /// Days whose file does not read: they fall back, and no call ever writes over them.
    unreadable: std::collections::BTreeSet<Date>,
}

impl Presence {
    pub fn new(tz: TimeZone, days: impl IntoIterator<Item = DaySchedule>) -> Presence {
        Presence {
            tz,
            days: days.into_iter().map(|d| (d.date, d)).collect(),
            unreadable: std::collections::BTreeSet::new(),
        }
    }

    /// Marks days whose file does not read (the operator fixes them; nothing writes them).
    pub fn with_unreadable(mut self, dates: impl IntoIterator<Item = Date>) -> Presence {
        self.unreadable.extend(dates);
        self
    }

    /// Whether a day's file is on disk but does not read.
    pub fn is_unreadable(&self, date: Date) -> bool {
        self.unreadable.contains(&date)
    }

    /// Adds or replaces a day; days more than a week before it are forgotten.
    pub fn install(&mut self, day: DaySchedule) {
        let keep_from = day.date.checked_sub(jiff::Span::new().days(8)).ok();
        self.unreadable.remove(&day.date);
        self.days.insert(day.date, day);
        if let Some(from) = keep_from {
            self.days.retain(|d, _| *d >= from);
        }
    }

    /// The day as it is known, else its fallback.
    pub fn day(&self, date: Date) -> Cow<'_, DaySchedule> {
        if let Some(d) = self.days.get(&date) {
            return Cow::Borrowed(d);
        }
        Cow::Owned(fallback(
            date,
            self.last_real_day(date),
            Source::Fallback {
                attempts: 0,
                retry_at: None,
            },
        ))
    }

    /// The nearest day before `date` (within a week) that is not a fallback itself: what a
    /// fallback copies.
    fn last_real_day(&self, date: Date) -> Option<&DaySchedule> {
        (1..=COPY_BACK_DAYS)
            .filter_map(|n| date.checked_sub(jiff::Span::new().days(n)).ok())
            .filter_map(|d| self.days.get(&d))
            .find(|d| !matches!(d.source, Source::Fallback { .. }))
    }

    /// The stored day, if there is one.
    pub fn known(&self, date: Date) -> Option<&DaySchedule> {
        self.days.get(&date)
    }

    /// The local date and minute of an instant.
    pub fn local(&self, at: Timestamp) -> (Date, u16) {
        let z = at.to_zoned(self.tz.clone());
        let minute_of = |z: &jiff::Zoned| {
            u16::try_from(i32::from(z.hour()) * 60 + i32::from(z.minute())).unwrap_or(0)
        };
        // The repeated hour of an autumn change is lived once: the second time round, the
        // local time counts as the end of the repeated hour (so a sleep that ended in it does
        // not start again).
        let amb = self.tz.to_ambiguous_timestamp(z.datetime());
        if let jiff::tz::AmbiguousOffset::Fold { before, after } = amb.offset()
            && z.offset() == after
            && let Some(tr) = self
                .tz
                .preceding(crate::core::time::add(at, Duration::from_nanos(1)))
                .next()
        {
            let end = tr.timestamp().to_zoned(TimeZone::fixed(before));
            return (end.date(), minute_of(&end));
        }
        (z.date(), minute_of(&z))
    }

    /// The first instant after `after` at which local `date` `minute` holds (1440: the next
    /// day's midnight). In a DST gap the time does not exist and the instant after the gap is
    /// used; in a fold the later of the two is used when the earlier one has passed.
    pub fn instant(&self, date: Date, minute: u16, after: Timestamp) -> Timestamp {
        let (date, minute) = if minute >= DAY_MINUTES {
            (date.tomorrow().unwrap_or(date), 0)
        } else {
            (date, minute)
        };
        let hour = i8::try_from(minute / 60).unwrap_or(0);
        let min = i8::try_from(minute % 60).unwrap_or(0);
        let dt = date.at(hour, min, 0, 0);
        let amb = self.tz.to_ambiguous_timestamp(dt);
        // In a gap the local time does not exist: the moment the gap ends (the transition).
        // In a fold it exists twice: the earlier, or the later once the earlier has passed.
        let candidates = match amb.offset() {
            jiff::tz::AmbiguousOffset::Fold { .. } => [amb.earlier().ok(), amb.later().ok()],
            jiff::tz::AmbiguousOffset::Gap { .. } => {
                let first = [amb.earlier().ok(), amb.later().ok()]
                    .into_iter()
                    .flatten()
                    .min();
                let transition =
                    first.and_then(|t| self.tz.following(t).next().map(|tr| tr.timestamp()));
                [transition.or_else(|| amb.compatible().ok()), None]
            }
            jiff::tz::AmbiguousOffset::Unambiguous { .. } => [amb.compatible().ok(), None],
        };
        candidates
            .into_iter()
            .flatten()
            .filter(|t| *t > after)
            .min()
            .unwrap_or_else(|| crate::core::time::add(after, Duration::from_secs(60)))
    }

    /// Where the persona is at `now`.
    pub fn now(&self, now: Timestamp) -> PresenceNow {
        let (date, minute) = self.local(now);
        let day = self.day(date);
        let fallback = matches!(day.source, Source::Fallback { .. });
        let activity = day
            .activity_at(minute)
            .cloned()
            .unwrap_or_else(|| Activity::new(0, DAY_MINUTES, 50, "Free time"));
        let until = self.instant(date, activity.end, now);
        let next = if activity.end >= DAY_MINUTES {
            date.tomorrow()
                .ok()
                .and_then(|d| self.day(d).activity_at(0).cloned())
        } else {
            day.activity_at(activity.end).cloned()
        };
        PresenceNow {
            date,
            activity,
            until,
            next,
            fallback,
        }
    }

    /// When the persona wakes up, if it is asleep at `now` (responsiveness 0): the end of the
    /// sleep, across midnight, at most [`MAX_SLEEP`] away.
    pub fn wake_at(&self, now: Timestamp) -> Option<Timestamp> {
        let limit = crate::core::time::add(now, MAX_SLEEP);
        let mut at = now;
        let mut state = self.now(at);
        if !state.activity.asleep() {
            return None;
        }
        for _ in 0..(MAX_ACTIVITIES * 3) {
            at = state.until;
            if at >= limit {
                return Some(limit);
            }
            state = self.now(at);
            if !state.activity.asleep() {
                return Some(at);
            }
        }
        Some(limit)
    }

    /// The day a model call should write now, if any: today when it is missing (or a
    /// fallback that may be retried), and from 18:00 local on, tomorrow the same way.
    pub fn day_to_generate(&self, now: Timestamp) -> Option<Date> {
        let (today, minute) = self.local(now);
        let due = |d: Date| match self.days.get(&d) {
            None => !self.unreadable.contains(&d),
            Some(day) => day.may_regenerate(now),
        };
        if due(today) {
            return Some(today);
        }
        let tomorrow = today.tomorrow().ok()?;
        (minute >= GENERATE_FROM_MINUTE && due(tomorrow)).then_some(tomorrow)
    }

    /// The stored days, oldest first.
    pub fn days(&self) -> impl Iterator<Item = &DaySchedule> {
        self.days.values()
    }
}

/// The standing instructions of a schedule call.
pub const INSTRUCTIONS: &str = "You plan one day of your own life, as the person described below, in your own time zone. \
Answer with the day's activities only, one line each, in order, covering the whole day from 00:00 to 24:00 without gaps or overlaps:\n\
- HH:MM–HH:MM | responsiveness | activity | description\n\
Responsiveness is how available you are for messages, 0 to 100: 0 asleep (nothing is read), 10–30 focused work or school, \
50–80 casual activities, 90–100 chatting. Sleep that crosses midnight ends the day at 24:00 (the next day starts asleep). \
Be specific (meals, places, what you work on) and vary your days as people do; the routine below is a template, not a script.";

/// What a schema-constrained route (`--plan-format json`) is told after [`INSTRUCTIONS`]: the
/// same day as one JSON object, which [`lines_from_json`] turns into the day's lines.
pub const JSON_INSTRUCTIONS: &str = "Instead of lines, answer with one JSON object: \
{\"activities\": [{\"start\": \"HH:MM\", \"end\": \"HH:MM\", \"responsiveness\": 0-100, \"activity\": \"...\", \"description\": \"...\"}, ...]}";

/// The day's schema (the OpenAPI subset Gemini takes; the OpenAI client converts it): a list
/// of activities, each with every field required.
pub fn schema() -> serde_json::Value {
    let string = || serde_json::json!({"type": "STRING"});
    serde_json::json!({
        "type": "OBJECT",
        "properties": {
            "activities": {
                "type": "ARRAY",
                "maxItems": MAX_ACTIVITIES,
                "items": {
                    "type": "OBJECT",
                    "properties": {
                        "start": string(),
                        "end": string(),
                        "responsiveness": {"type": "INTEGER"},
                        "activity": string(),
                        "description": string()
                    },
                    "required": ["start", "end", "responsiveness", "activity", "description"]
                }
            }
        },
        "required": ["activities"]
    })
}

/// A JSON answer to a schema-constrained schedule call as the day's lines, which
/// [`DaySchedule::parse`] then checks like any answer; `None` when the text is not that
/// object (it is then parsed as lines, as it came).
pub fn lines_from_json(text: &str) -> Option<String> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .map_or(t, |r| r.trim().trim_end_matches("```").trim());
    let value: serde_json::Value = serde_json::from_str(t).ok()?;
    let activities = value.get("activities")?.as_array()?;
    let field = |a: &serde_json::Value, k: &str| match &a[k] {
        serde_json::Value::String(s) => s.replace(['|', '\n'], " ").trim().to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let mut out = String::new();
    for a in activities {
        let _ = writeln!(
            out,
            "- {}–{} | {} | {} | {}",
            field(a, "start"),
            field(a, "end"),
            field(a, "responsiveness"),
            field(a, "activity"),
            field(a, "description")
        );
    }
    Some(out)
}

/// The user turn of a schedule call: the routine, the days before (so the model varies
/// them), and which day to write.
pub fn request_text(prose: &str, date: Date, zone: &str, recent: &[DaySchedule]) -> String {
    let mut text = format!("Your daily routine:\n{}\n\n", prose.trim());
    for day in recent {
        let _ = writeln!(text, "Your {} {}:", day.date.strftime("%A"), day.date);
        for a in &day.activities {
            let _ = writeln!(text, "{}", a.line());
        }
        text.push('\n');
    }
    let _ = write!(
        text,
        "Write your schedule for {} {} (time zone {zone}).",
        date.strftime("%A"),
        date
    );
    text
}

/// A failed call for `date`: the fallback to keep (a copy of the nearest earlier real day,
/// else the template), counting the attempt and, while attempts are left, when the next
/// may go out.
pub fn failed(presence: &Presence, date: Date, now: Timestamp) -> DaySchedule {
    let attempts = match presence.known(date).map(|d| &d.source) {
        Some(Source::Fallback { attempts, .. }) => attempts + 1,
        _ => 1,
    };
    let retry_at =
        (attempts < CALLS_PER_DAY).then(|| crate::core::time::add(now, RETRY_AFTER * attempts));
    fallback(
        date,
        presence.last_real_day(date),
        Source::Fallback { attempts, retry_at },
    )
}

#[cfg(test)]
mod tests;
