//! Parked messages and a changed day, without any runtime: a message that came during sleep
//! is read from the wake-up of the day as it is now (a generated day, a reload), earlier or
//! later, never before now plus the debounce; a task not parked by sleep keeps its time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

use super::{Parked, retimed};
use crate::core::config::RuntimeConfig;
use crate::core::graph::{ConversationKey, TaskKind};
use crate::core::model::{Chat, ChatId, ChatKind, MessageId};
use crate::core::presence::{DaySchedule, Presence, Source};
use crate::core::safety::AccountSafety;
use crate::core::scheduler::Scheduler;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn berlin() -> TimeZone {
    TimeZone::get("Europe/Berlin").unwrap_or(TimeZone::UTC)
}

fn date() -> Date {
    Date::new(2026, 11, 26).unwrap_or_default()
}

/// A generated day asleep until `wake` (local `HH:MM`), then awake until 22:00.
fn day_waking_at(wake: &str) -> DaySchedule {
    let text = format!(
        "- 00:00–{wake} | 0 | Sleep |\n- {wake}–12:00 | 30 | Getting ready |\n- 12:00–22:00 | 60 | Day |\n- 22:00–24:00 | 0 | Sleep |\n"
    );
    let mut day = DaySchedule::parse(&text, date()).unwrap_or_else(|p| panic!("{p:?}"));
    day.source = Source::Generated;
    day
}

/// A scheduler with agent `a` (own chat 1), its schedule on the fallback (asleep until 07:00
/// Berlin, 06:00Z), started at `now`.
fn asleep_on_the_fallback(now: Timestamp) -> Scheduler {
    let mut self_ids = HashMap::new();
    self_ids.insert("a".to_string(), 1);
    let mut s = Scheduler::new(
        Arc::new(RuntimeConfig::default()),
        ["a".to_string()],
        AccountSafety::new(self_ids),
    );
    s.set_presence(
        "a",
        berlin(),
        Some(Presence::new(berlin(), [])),
        Vec::new(),
        now,
    );
    s.advance(now);
    s
}

fn dm(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: ChatKind::Direct,
        title: format!("c{id}"),
    }
}

/// The `received` task of chat `id`: its not_before and the wake-up it counts from.
fn waiting(s: &Scheduler, id: i64) -> (Option<Timestamp>, Option<Timestamp>) {
    let t = s
        .graph(&ConversationKey::new("a", ChatId(id)))
        .and_then(|g| g.tasks.first())
        .filter(|t| t.kind() == TaskKind::Received);
    (t.and_then(|t| t.not_before), t.and_then(|t| t.woke_at))
}

#[test]
fn a_parked_time_follows_the_new_wake_up_with_its_reading_delay() {
    let parked = Parked {
        woke: ts("2026-11-26T06:00:00Z"),
        not_before: ts("2026-11-26T06:01:00Z"),
    };
    let now = ts("2026-11-26T01:00:00Z");
    let earliest = crate::core::time::add(now, secs(2));
    // Earlier.
    assert_eq!(
        retimed(parked, Some(ts("2026-11-26T05:45:00Z")), now, earliest),
        Some(Parked {
            woke: ts("2026-11-26T05:45:00Z"),
            not_before: ts("2026-11-26T05:46:00Z"),
        })
    );
    // Later.
    assert_eq!(
        retimed(parked, Some(ts("2026-11-26T07:30:00Z")), now, earliest),
        Some(Parked {
            woke: ts("2026-11-26T07:30:00Z"),
            not_before: ts("2026-11-26T07:31:00Z"),
        })
    );
    // The same wake-up: nothing moves.
    assert_eq!(
        retimed(parked, Some(ts("2026-11-26T06:00:00Z")), now, earliest),
        None
    );
    // Awake now under the new day, still asleep under the old one: read from now, never
    // before the debounce.
    let late = ts("2026-11-26T05:59:30Z");
    assert_eq!(
        retimed(parked, None, late, crate::core::time::add(late, secs(2))),
        Some(Parked {
            woke: late,
            not_before: ts("2026-11-26T06:00:30Z"),
        })
    );
    let parked_short = Parked {
        woke: parked.woke,
        not_before: crate::core::time::add(parked.woke, secs(1)),
    };
    assert_eq!(
        retimed(
            parked_short,
            None,
            late,
            crate::core::time::add(late, secs(2))
        )
        .map(|p| p.not_before),
        Some(ts("2026-11-26T05:59:32Z")),
        "never before now plus the debounce"
    );
    // Awake already under the old day: its reading time stands.
    let after = ts("2026-11-26T06:00:30Z");
    assert_eq!(retimed(parked, None, after, after), None);
}

/// The finding: a message parked at night under the fallback (wake 07:00 Berlin), then the
/// generated day says 06:45: the message is read from 06:45 with the same reading delay.
/// A reload with a later wake-up moves it again, later; a task not parked by sleep keeps
/// its time throughout.
#[test]
fn a_generated_or_reloaded_day_re_times_the_parked_messages_only() {
    let now = ts("2026-11-26T01:00:00Z");
    let mut s = asleep_on_the_fallback(now);
    assert!(s.on_inbound("a", dm(501), MessageId(1), true, now));
    assert!(s.on_inbound("a", dm(502), MessageId(1), true, now));
    let (nb, woke) = waiting(&s, 501);
    assert_eq!(woke, Some(ts("2026-11-26T06:00:00Z")), "parked for 07:00");
    let nb = nb.unwrap_or(Timestamp::MAX);
    let reading = nb.duration_since(ts("2026-11-26T06:00:00Z"));
    assert!(
        reading.as_secs() >= 3,
        "a reading time after waking: {reading:?}"
    );
    // Chat 502's time did not come from the sleep (as a task the owner timed).
    let fixed = ts("2026-11-26T09:00:00Z");
    if let Some(t) = s
        .graphs
        .get_mut(&ConversationKey::new("a", ChatId(502)))
        .and_then(|g| g.tasks.first_mut())
    {
        t.not_before = Some(fixed);
        t.woke_at = None;
    }
    s.take_effects();
    let later = ts("2026-11-26T01:30:00Z");
    s.install_day("a", day_waking_at("06:45"), later);
    let (nb2, woke2) = waiting(&s, 501);
    assert_eq!(woke2, Some(ts("2026-11-26T05:45:00Z")), "the new wake-up");
    assert_eq!(
        nb2,
        Some(crate::core::time::add(
            ts("2026-11-26T05:45:00Z"),
            reading.unsigned_abs()
        )),
        "the same reading delay, from 06:45"
    );
    assert_eq!(waiting(&s, 502).0, Some(fixed), "not parked by sleep");
    let effects = s.take_effects();
    assert!(
        effects.iter().any(
            |e| matches!(e, crate::core::scheduler::Effect::Persist(k) if k.chat == ChatId(501))
        ),
        "the moved time is saved"
    );
    assert!(
        effects.iter().any(|e| matches!(
            e,
            crate::core::scheduler::Effect::Presence {
                change: crate::core::scheduler::PresenceChange::Asleep { until },
                ..
            } if *until == ts("2026-11-26T05:45:00Z")
        )),
        "the new wake-up is announced (the playground prints it): {effects:?}"
    );
    // A reload (a hand edit) waking at 08:00: later.
    let mut edited = day_waking_at("08:00");
    edited.source = Source::Edited;
    s.set_presence(
        "a",
        berlin(),
        Some(Presence::new(berlin(), [edited])),
        Vec::new(),
        later,
    );
    let (nb3, woke3) = waiting(&s, 501);
    assert_eq!(woke3, Some(ts("2026-11-26T07:00:00Z")));
    assert_eq!(
        nb3,
        Some(crate::core::time::add(
            ts("2026-11-26T07:00:00Z"),
            reading.unsigned_abs()
        ))
    );
    assert_eq!(waiting(&s, 502).0, Some(fixed));
}
