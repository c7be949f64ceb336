//! The persona's own changes to its day (the original's `schedule` task): create, update or
//! delete one activity by id, in the original's fields (ISO 8601 start and end, name,
//! responsiveness 0–100, description). All the edits of one plan are applied together to the
//! days they touch and the result is checked as a day's file is (no overlap, at most
//! [`MAX_ACTIVITIES`], some waking time; a gap is filled by the activity before it), so a
//! change that needs two edits (shorten one activity, add another) goes through as one. Only
//! today and tomorrow (the days the prompt shows) may change, never a day the owner wrote
//! (`source=edited`) or one whose file does not read. Pure: the scheduler applies the result.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use serde::{Deserialize, Serialize};

use super::{
    Activity, DAY_MINUTES, DESCRIPTION_CHARS, DaySchedule, MAX_ACTIVITIES, NAME_CHARS, Presence,
    Source, hhmm,
};

/// Most edits one plan may make.
pub const MAX_EDITS: usize = 16;

/// One change the model asks for. `id` of an activity shown and an empty `activity_name`
/// deletes it; an `id` shown otherwise updates it (fields left out stay); no id, or one not
/// shown, creates an activity (then every field but the description is needed).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ActivityEdit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// ISO 8601 (`2026-11-27T19:00:00-08:00`; without an offset, the persona's local time),
    /// or `HH:MM` on the activity's own day (today for a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(default)]
    pub activity_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responsiveness: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Why a plan's edits were refused (all of them: the day stays as it was).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EditRefused(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, EditRefused> {
    Err(EditRefused(why.into()))
}

/// An activity's id as the prompt shows it: its day and local start (`act-20261127-0645`).
/// Stable while the activity keeps its start.
pub fn activity_id(date: Date, start: u16) -> String {
    format!(
        "act-{}-{:02}{:02}",
        date.strftime("%Y%m%d"),
        start / 60,
        start % 60
    )
}

/// The days the persona may change at `now`: today and tomorrow, in its zone.
pub fn editable_days(presence: &Presence, now: Timestamp) -> Vec<Date> {
    let (today, _) = presence.local(now);
    let mut days = vec![today];
    if let Ok(t) = today.tomorrow() {
        days.push(t);
    }
    days
}

/// The editable days as the prompt shows them: one line per activity with its id.
pub fn prompt_text(presence: &Presence, now: Timestamp) -> String {
    let mut s = String::new();
    for date in editable_days(presence, now) {
        let day = presence.day(date);
        let owner = matches!(day.source, Source::Edited) || presence.is_unreadable(date);
        s.push_str(&format!(
            "{} {date}{}:\n",
            date.strftime("%A"),
            if owner {
                " (set by your owner: you cannot change it)"
            } else {
                ""
            }
        ));
        for a in &day.activities {
            s.push_str(&format!(
                "- [{}] {} | {} | {}\n",
                activity_id(date, a.start),
                a.span(),
                a.responsiveness,
                a.name
            ));
        }
    }
    s
}

/// One activity being edited, with where it was (for its id).
#[derive(Clone)]
struct Slot {
    id: Option<String>,
    activity: Activity,
}

/// Applies one plan's edits (see the module docs): the changed days, each marked as the
/// persona's, or why nothing changes.
pub fn apply(
    presence: &Presence,
    edits: &[ActivityEdit],
    now: Timestamp,
) -> Result<Vec<DaySchedule>, EditRefused> {
    if edits.is_empty() {
        return Ok(Vec::new());
    }
    if edits.len() > MAX_EDITS {
        return refuse(format!(
            "{} schedule changes in one plan; at most {MAX_EDITS}",
            edits.len()
        ));
    }
    let editable = editable_days(presence, now);
    let mut days: BTreeMap<Date, Vec<Slot>> = editable
        .iter()
        .map(|&d| {
            let slots = presence
                .day(d)
                .activities
                .iter()
                .map(|a| Slot {
                    id: Some(activity_id(d, a.start)),
                    activity: a.clone(),
                })
                .collect();
            (d, slots)
        })
        .collect();
    let today = editable[0];
    let mut touched = std::collections::BTreeSet::new();
    for edit in edits {
        apply_one(presence, &mut days, &mut touched, today, edit)?;
    }
    let mut out = Vec::new();
    for date in touched {
        if !editable.contains(&date) {
            return refuse(format!(
                "{date} is not today or tomorrow: only those days may change"
            ));
        }
        if presence.is_unreadable(date) {
            return refuse(format!(
                "the file of {date} does not read: the owner fixes it"
            ));
        }
        if presence
            .known(date)
            .is_some_and(|d| matches!(d.source, Source::Edited))
        {
            return refuse(format!("your owner wrote {date}: it is not changed"));
        }
        let slots = days.remove(&date).unwrap_or_default();
        out.push(check(date, slots)?);
    }
    Ok(out)
}

/// Applies one edit to the working days, noting which days it touched.
fn apply_one(
    presence: &Presence,
    days: &mut BTreeMap<Date, Vec<Slot>>,
    touched: &mut std::collections::BTreeSet<Date>,
    today: Date,
    edit: &ActivityEdit,
) -> Result<(), EditRefused> {
    let id = edit.id.as_deref().map(str::trim).filter(|i| !i.is_empty());
    let found = id.and_then(|id| {
        days.iter().find_map(|(d, slots)| {
            slots
                .iter()
                .position(|s| s.id.as_deref() == Some(id))
                .map(|i| (*d, i))
        })
    });
    let name = edit.activity_name.trim();
    match found {
        Some((date, i)) if name.is_empty() => {
            if let Some(slots) = days.get_mut(&date) {
                slots.remove(i);
            }
            touched.insert(date);
            Ok(())
        }
        None if name.is_empty() => match id {
            Some(id) => refuse(format!("no activity {id} to delete")),
            None => refuse("a schedule change with neither an id nor an activity name"),
        },
        Some((date, i)) => {
            let old = days
                .get_mut(&date)
                .map(|slots| slots.remove(i))
                .map(|s| s.activity)
                .ok_or_else(|| EditRefused("the activity went away".into()))?;
            touched.insert(date);
            let start = match &edit.start_time {
                Some(t) => local_point(presence, t, date)?,
                None => (date, old.start),
            };
            let end = match &edit.end_time {
                Some(t) => local_point(presence, t, start.0)?,
                None => (date, old.end),
            };
            let made = Activity {
                responsiveness: match edit.responsiveness {
                    Some(r) => responsiveness(r)?,
                    None => old.responsiveness,
                },
                description: edit
                    .description
                    .as_deref()
                    .map_or(old.description.clone(), clean_description),
                ..made_activity(name, start, end)?
            };
            place(days, touched, start, end, made)
        }
        None => {
            let (Some(s), Some(e)) = (&edit.start_time, &edit.end_time) else {
                return refuse(format!(
                    "a new activity {name:?} needs start_time and end_time"
                ));
            };
            let Some(r) = edit.responsiveness else {
                return refuse(format!(
                    "a new activity {name:?} needs a responsiveness (0 to 100)"
                ));
            };
            let start = local_point(presence, s, today)?;
            let end = local_point(presence, e, start.0)?;
            let made = Activity {
                responsiveness: responsiveness(r)?,
                description: clean_description(edit.description.as_deref().unwrap_or("")),
                ..made_activity(name, start, end)?
            };
            place(days, touched, start, end, made)
        }
    }
}

/// Puts an activity spanning `start`–`end` into its day (or its two days, when it crosses
/// midnight: split at 24:00).
fn place(
    days: &mut BTreeMap<Date, Vec<Slot>>,
    touched: &mut std::collections::BTreeSet<Date>,
    start: (Date, u16),
    end: (Date, u16),
    made: Activity,
) -> Result<(), EditRefused> {
    let next = start.0.tomorrow().ok();
    let mut push = |date: Date, from: u16, to: u16| -> Result<(), EditRefused> {
        let Some(slots) = days.get_mut(&date) else {
            return refuse(format!(
                "{date} is not today or tomorrow: only those days may change"
            ));
        };
        touched.insert(date);
        slots.push(Slot {
            id: None,
            activity: Activity {
                start: from,
                end: to,
                ..made.clone()
            },
        });
        Ok(())
    };
    if end.0 == start.0 {
        push(start.0, start.1, end.1)
    } else if Some(end.0) == next && end.1 == 0 {
        push(start.0, start.1, DAY_MINUTES)
    } else if Some(end.0) == next {
        push(start.0, start.1, DAY_MINUTES)?;
        push(end.0, 0, end.1)
    } else {
        refuse(format!(
            "{} lasts from {} to {}: an activity lasts at most until the next day",
            made.name, start.0, end.0
        ))
    }
}

/// The activity's name and span checked (the rest is filled by the caller).
fn made_activity(
    name: &str,
    start: (Date, u16),
    end: (Date, u16),
) -> Result<Activity, EditRefused> {
    if end <= start {
        return refuse(format!(
            "{name:?} ends ({} {}) before it starts ({} {})",
            end.0,
            hhmm(end.1),
            start.0,
            hhmm(start.1)
        ));
    }
    Ok(Activity {
        start: start.1,
        end: end.1,
        responsiveness: 0,
        name: one_line(name, NAME_CHARS),
        description: String::new(),
    })
}

fn responsiveness(r: i64) -> Result<u8, EditRefused> {
    u8::try_from(r)
        .ok()
        .filter(|r| *r <= 100)
        .ok_or_else(|| EditRefused(format!("responsiveness {r} is not from 0 to 100")))
}

fn clean_description(d: &str) -> String {
    one_line(d, DESCRIPTION_CHARS)
}

/// One line without the file's separator, at most `cap` characters.
fn one_line(s: &str, cap: usize) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "/")
        .chars()
        .take(cap)
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// A time the model wrote as the persona's local day and minute: ISO 8601 with an offset
/// (converted to the persona's zone), without one (local already), or `HH:MM` on `day`.
fn local_point(presence: &Presence, text: &str, day: Date) -> Result<(Date, u16), EditRefused> {
    let t = text.trim();
    if let Ok(at) = t.parse::<Timestamp>() {
        let z = at.to_zoned(presence.tz.clone());
        return Ok((z.date(), minute(z.hour(), z.minute())));
    }
    if let Ok(dt) = t.parse::<DateTime>() {
        return Ok((dt.date(), minute(dt.hour(), dt.minute())));
    }
    if let Some((h, m)) = t.split_once(':')
        && let (Ok(h), Ok(m)) = (h.parse::<u16>(), m.parse::<u16>())
        && m < 60
    {
        if h < 24 {
            return Ok((day, h * 60 + m));
        }
        if h == 24 && m == 0 {
            return Ok((day.tomorrow().unwrap_or(day), 0));
        }
    }
    refuse(format!(
        "{t:?} is not a time (ISO 8601 such as 2026-11-27T19:00:00-08:00, or HH:MM)"
    ))
}

fn minute(h: i8, m: i8) -> u16 {
    u16::try_from(i32::from(h) * 60 + i32::from(m)).unwrap_or(0)
}

/// The edited day checked as a day's file is (its lines read back), marked as the persona's.
fn check(date: Date, slots: Vec<Slot>) -> Result<DaySchedule, EditRefused> {
    if slots.len() > MAX_ACTIVITIES {
        return refuse(format!(
            "{date} would have {} activities; at most {MAX_ACTIVITIES}",
            slots.len()
        ));
    }
    let lines: String = slots
        .iter()
        .map(|s| format!("{}\n", s.activity.line()))
        .collect();
    match DaySchedule::parse(&lines, date) {
        Ok(mut day) => {
            day.source = Source::Persona;
            Ok(day)
        }
        Err(problems) => refuse(format!(
            "{date}: {}",
            problems
                .iter()
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use jiff::tz::TimeZone;

    use super::*;

    const DAY: &str = "<!-- schedule: source=generated -->\n\
- 00:00–07:00 | 0 | Sleep | asleep\n\
- 07:00–08:00 | 30 | Getting ready | shower\n\
- 08:00–15:00 | 20 | School |\n\
- 15:00–22:30 | 70 | Home | homework and books\n\
- 22:30–24:00 | 0 | Sleep |\n";

    fn la() -> TimeZone {
        TimeZone::get("America/Los_Angeles").unwrap_or(TimeZone::UTC)
    }

    /// Thursday 2026-11-26 (a file) and Friday 2026-11-27 (the same), at 10:00 local on
    /// Thursday.
    fn presence(source: &str) -> (Presence, Timestamp) {
        let days = ["2026-11-26", "2026-11-27"].map(|d| {
            let date: Date = d.parse().unwrap_or(Date::constant(2026, 1, 1));
            DaySchedule::parse(&DAY.replace("source=generated", source), date)
                .unwrap_or_else(|p| panic!("{p:?}"))
        });
        let now: Timestamp = "2026-11-26T18:00:00Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        (Presence::new(la(), days), now)
    }

    fn edit(id: Option<&str>, start: &str, end: &str, name: &str, r: i64) -> ActivityEdit {
        ActivityEdit {
            id: id.map(str::to_string),
            start_time: (!start.is_empty()).then(|| start.to_string()),
            end_time: (!end.is_empty()).then(|| end.to_string()),
            activity_name: name.to_string(),
            responsiveness: Some(r),
            description: None,
        }
    }

    fn lines(day: &DaySchedule) -> Vec<String> {
        day.activities
            .iter()
            .map(|a| format!("{} {}", a.span(), a.name))
            .collect()
    }

    /// A new activity over an existing one is refused with the reason, naming both; the
    /// same activity with its neighbour shortened in the same plan goes through, in the
    /// original's ISO form with an offset (converted to the persona's zone), marked as the
    /// persona's own.
    #[test]
    fn an_overlap_is_refused_with_its_reason_and_a_whole_change_goes_through() {
        let (p, now) = presence("source=generated");
        let dentist = edit(
            None,
            "2026-11-26T15:00:00-08:00",
            "2026-11-27T00:00:00Z",
            "Dentist",
            10,
        );
        let refused = apply(&p, std::slice::from_ref(&dentist), now).err();
        let why = refused.map(|e| e.0).unwrap_or_default();
        assert!(
            why.contains("2026-11-26") && why.contains("overlaps") && why.contains("Home"),
            "{why}"
        );
        let home = ActivityEdit {
            start_time: Some("16:00".into()),
            responsiveness: None,
            activity_name: "Home".into(),
            ..edit(Some("act-20261126-1500"), "", "", "", 0)
        };
        let days = apply(&p, &[home, dentist], now).unwrap_or_default();
        assert_eq!(days.len(), 1);
        assert_eq!(days[0].source, Source::Persona);
        assert_eq!(
            lines(&days[0]),
            [
                "00:00–07:00 Sleep",
                "07:00–08:00 Getting ready",
                "08:00–15:00 School",
                "15:00–16:00 Dentist",
                "16:00–22:30 Home",
                "22:30–24:00 Sleep"
            ]
        );
        assert_eq!(days[0].activities[4].description, "homework and books");
    }

    /// A delete leaves a gap the activity before fills (as in a day's file); an activity
    /// across midnight is split between today and tomorrow.
    #[test]
    fn a_delete_is_filled_and_a_night_out_spans_two_days() {
        let (p, now) = presence("source=generated");
        let gone = edit(Some("act-20261126-0700"), "", "", "", 0);
        let days = apply(&p, &[gone], now).unwrap_or_default();
        assert_eq!(lines(&days[0])[0], "00:00–08:00 Sleep");
        let party = [
            edit(Some("act-20261126-2230"), "", "", "", 0),
            edit(Some("act-20261126-1500"), "15:00", "21:00", "Home", 70),
            edit(None, "2026-11-26T21:00", "2026-11-27T01:00", "Party", 60),
            edit(Some("act-20261127-0000"), "01:00", "07:00", "Sleep", 0),
        ];
        let days = apply(&p, &party, now).unwrap_or_default();
        assert_eq!(days.len(), 2, "{days:?}");
        assert_eq!(
            lines(&days[0]).last().map(String::as_str),
            Some("21:00–24:00 Party")
        );
        assert_eq!(
            lines(&days[1])[..2],
            [
                "00:00–01:00 Party".to_string(),
                "01:00–07:00 Sleep".to_string()
            ]
        );
    }

    /// A day the owner wrote, a day that is neither today nor tomorrow, an unknown id to
    /// delete, a responsiveness out of range: each refused, nothing changes.
    #[test]
    fn the_owners_day_and_bad_edits_are_refused() {
        let (p, now) = presence("source=edited");
        let rename = edit(Some("act-20261126-1500"), "", "", "Reading", 70);
        let why = apply(&p, std::slice::from_ref(&rename), now)
            .err()
            .map(|e| e.0);
        assert!(why.is_some_and(|w| w.contains("owner")));
        let (p, now) = presence("source=edited by=persona");
        assert!(
            apply(&p, &[rename], now).is_ok(),
            "the persona's own day may change again"
        );
        for bad in [
            edit(None, "2026-11-30T10:00", "2026-11-30T11:00", "Trip", 50),
            edit(Some("act-20261126-0900"), "", "", "", 0),
            edit(None, "10:00", "11:00", "Nap", 140),
            edit(None, "11:00", "10:00", "Backwards", 40),
        ] {
            assert!(
                apply(&p, std::slice::from_ref(&bad), now).is_err(),
                "{bad:?}"
            );
        }
    }
}
