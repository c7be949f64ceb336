use super::*;

fn berlin() -> TimeZone {
    TimeZone::get("Europe/Berlin").unwrap_or(TimeZone::UTC)
}

fn date(s: &str) -> Date {
    s.parse().unwrap_or(Date::constant(2026, 1, 1))
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

const DAY: &str = "# Heidi: Thursday 2026-11-26\n\n<!-- schedule: source=generated -->\n\n\
- 00:00–07:00 | 0 | Sleep | asleep\n\
- 07:00–08:00 | 30 | Getting ready | shower\n\
- 08:00–12:00 | 20 | School |\n\
- 12:00–13:00 | 50 | Lunch | with Sylvia\n\
- 13:00–22:30 | 70 | Home | homework and books\n\
- 22:30–24:00 | 0 | Sleep |\n";

fn day(d: &str) -> DaySchedule {
    DaySchedule::parse(&DAY.replace("2026-11-26", d), date(d)).unwrap_or_else(|p| panic!("{p:?}"))
}

#[test]
fn a_day_file_round_trips_and_keeps_its_source() {
    let d = day("2026-11-26");
    assert_eq!(d.activities.len(), 6);
    assert_eq!(d.source, Source::Generated);
    let text = d.render("Heidi");
    assert!(
        text.contains("- 13:00–22:30 | 70 | Home | homework and books"),
        "{text}"
    );
    assert_eq!(DaySchedule::parse(&text, d.date).ok(), Some(d.clone()));
    let mut f = d;
    f.source = Source::Fallback {
        attempts: 1,
        retry_at: Some(ts("2026-11-26T10:00:00Z")),
    };
    assert_eq!(DaySchedule::parse(&f.render("Heidi"), f.date).ok(), Some(f));
}

#[test]
fn bad_lines_are_named_by_line_and_gaps_are_filled() {
    let text = "- 00:00–07:00 | 0 | Sleep\n- 06:30–09:00 | 40 | Breakfast\n- 09:00-10:00 | 140 | Run\n- 11:00 | 5 | x\n";
    let problems = DaySchedule::parse(text, date("2026-11-26"))
        .err()
        .unwrap_or_default();
    let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
    assert!(lines.contains(&2), "overlap on line 2: {problems:?}");
    assert!(lines.contains(&3), "range on line 3: {problems:?}");
    assert!(lines.contains(&4), "span on line 4: {problems:?}");
    // A gap (10:00–11:00) is filled by the activity before; the day runs to 24:00.
    let ok = DaySchedule::parse(
        "- 01:00–07:00 | 0 | Sleep\n- 07:00–10:00 | 40 | Morning\n- 11:00-20:00 | 60 | Day\n",
        date("2026-11-26"),
    )
    .unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(ok.activities[0].start, 0);
    assert_eq!(ok.activities[1].end, 11 * 60);
    assert_eq!(ok.activities[2].end, DAY_MINUTES);
}

#[test]
fn asleep_at_three_wakes_at_seven_across_midnight() {
    let p = Presence::new(berlin(), [day("2026-11-25"), day("2026-11-26")]);
    // 23:00 Berlin on the 25th (UTC+1): asleep until 07:00 on the 26th.
    let night = ts("2026-11-25T22:00:00Z");
    assert_eq!(p.wake_at(night), Some(ts("2026-11-26T06:00:00Z")));
    assert_eq!(
        p.wake_at(ts("2026-11-26T02:00:00Z")),
        Some(ts("2026-11-26T06:00:00Z"))
    );
    assert_eq!(p.wake_at(ts("2026-11-26T11:00:00Z")), None);
    let noon = p.now(ts("2026-11-26T11:30:00Z"));
    assert_eq!(noon.activity.name, "Lunch");
    assert_eq!(noon.until, ts("2026-11-26T12:00:00Z"));
    assert_eq!(noon.next.map(|a| a.name), Some("Home".into()));
}

/// 2026-03-29 has 23 hours in Berlin (02:00 → 03:00), 2026-10-25 has 25 (03:00 → 02:00):
/// the wake time is the local 07:00 either way, and a night that spans the change is an hour
/// shorter or longer.
#[test]
fn dst_days_of_23_and_25_hours() {
    let p = Presence::new(
        berlin(),
        [
            day("2026-03-28"),
            day("2026-03-29"),
            day("2026-10-24"),
            day("2026-10-25"),
        ],
    );
    // Spring: asleep from 22:30 CET (21:30Z) to 07:00 CEST (05:00Z): 7.5 hours.
    let wake = p.wake_at(ts("2026-03-28T21:30:00Z"));
    assert_eq!(wake, Some(ts("2026-03-29T05:00:00Z")));
    // Autumn: from 22:30 CEST (20:30Z) to 07:00 CET (06:00Z): 9.5 hours.
    assert_eq!(
        p.wake_at(ts("2026-10-24T20:30:00Z")),
        Some(ts("2026-10-25T06:00:00Z"))
    );
    // Both 02:30s of the autumn fold are asleep, and the day's end is 24 civil hours later.
    assert!(p.now(ts("2026-10-25T00:30:00Z")).activity.asleep());
    assert!(p.now(ts("2026-10-25T01:30:00Z")).activity.asleep());
    let start = p.instant(date("2026-10-25"), 0, ts("2026-10-24T00:00:00Z"));
    let end = p.instant(date("2026-10-25"), DAY_MINUTES, start);
    assert_eq!(end.duration_since(start).as_hours(), 25);
    let start = p.instant(date("2026-03-29"), 0, ts("2026-03-28T00:00:00Z"));
    let end = p.instant(date("2026-03-29"), DAY_MINUTES, start);
    assert_eq!(end.duration_since(start).as_hours(), 23);
    // A boundary inside the spring gap (02:30 does not exist) falls when the gap ends.
    let gap = p.instant(date("2026-03-29"), 150, ts("2026-03-29T00:00:00Z"));
    assert_eq!(gap, ts("2026-03-29T01:00:00Z"));
}

#[test]
fn the_fallback_copies_the_last_real_day_else_a_template() {
    let p = Presence::new(berlin(), [day("2026-11-24")]);
    let d = p.day(date("2026-11-26"));
    assert_eq!(d.activities, day("2026-11-24").activities);
    assert!(matches!(d.source, Source::Fallback { .. }));
    let empty = Presence::new(berlin(), []);
    let t = empty.day(date("2026-11-26"));
    assert_eq!(
        t.activities.first().map(|a| (a.end, a.responsiveness)),
        Some((7 * 60, 0))
    );
    // Deterministic: the same inputs, the same day.
    assert_eq!(t.into_owned(), empty.day(date("2026-11-26")).into_owned());
}

#[test]
fn failed_calls_back_off_then_stop() {
    let mut p = Presence::new(berlin(), [day("2026-11-25")]);
    let now = ts("2026-11-26T08:00:00Z");
    assert_eq!(p.day_to_generate(now), Some(date("2026-11-26")));
    let f1 = failed(&p, date("2026-11-26"), now);
    assert_eq!(f1.activities, day("2026-11-25").activities);
    assert_eq!(
        f1.source,
        Source::Fallback {
            attempts: 1,
            retry_at: Some(ts("2026-11-26T08:30:00Z"))
        }
    );
    p.install(f1);
    assert_eq!(
        p.day_to_generate(ts("2026-11-26T08:10:00Z")),
        None,
        "backing off"
    );
    assert_eq!(
        p.day_to_generate(ts("2026-11-26T08:30:00Z")),
        Some(date("2026-11-26"))
    );
    let f2 = failed(&p, date("2026-11-26"), ts("2026-11-26T08:30:00Z"));
    assert_eq!(
        f2.source,
        Source::Fallback {
            attempts: 2,
            retry_at: None
        }
    );
    p.install(f2);
    assert_eq!(
        p.day_to_generate(ts("2026-11-26T12:00:00Z")),
        None,
        "two calls spent; tomorrow not yet due"
    );
    assert_eq!(
        p.day_to_generate(ts("2026-11-26T17:30:00Z")),
        Some(date("2026-11-27")),
        "18:30 local: tomorrow"
    );
}

#[test]
fn the_timing_curve() {
    assert!((response_delay(100, false, 0.5).as_secs_f64() - 4.0).abs() < 1e-9);
    assert!((response_delay(1, false, 0.5).as_secs_f64() - 120.0).abs() < 1e-9);
    let (lo, hi) = delay_range(50);
    assert!(
        (46.0..47.5).contains(&lo) && (77.5..79.0).contains(&hi),
        "{lo} {hi}"
    );
    assert!(response_delay(10, true, 1.0).as_secs_f64() <= 5.0);
}

/// Boundaries inside the changes: a sleep ending at 02:30 on the spring day (02:30 does not
/// exist) ends when the gap ends (03:00 CEST); on the autumn day it ends at the first 02:30,
/// and the repeated hour does not put the persona back to sleep.
#[test]
fn boundaries_inside_the_gap_and_the_fold() {
    let short = |d: &str| {
        DaySchedule::parse(
            "- 00:00–02:30 | 0 | Sleep\n- 02:30–23:00 | 60 | Up early\n- 23:00–24:00 | 0 | Sleep\n",
            date(d),
        )
        .unwrap_or_else(|p| panic!("{p:?}"))
    };
    let p = Presence::new(
        berlin(),
        [
            short("2026-03-28"),
            short("2026-03-29"),
            short("2026-10-24"),
            short("2026-10-25"),
        ],
    );
    // Spring: asleep at 01:30 CET (00:30Z); the gap ends at 01:00Z.
    assert_eq!(
        p.wake_at(ts("2026-03-29T00:30:00Z")),
        Some(ts("2026-03-29T01:00:00Z"))
    );
    assert!(!p.now(ts("2026-03-29T01:00:00Z")).activity.asleep());
    // Autumn: the first 02:30 is 00:30Z.
    assert_eq!(
        p.wake_at(ts("2026-10-25T00:00:00Z")),
        Some(ts("2026-10-25T00:30:00Z"))
    );
    for awake in [
        "2026-10-25T00:45:00Z",
        "2026-10-25T01:10:00Z",
        "2026-10-25T01:45:00Z",
        "2026-10-25T02:10:00Z",
    ] {
        let state = p.now(ts(awake));
        assert!(!state.activity.asleep(), "asleep again at {awake}");
        assert!(state.until > ts(awake));
    }
}

/// A day asleep throughout does not check out (it would silence the persona, and every
/// fallback copied from it): the fallback covers it.
#[test]
fn a_day_asleep_throughout_is_refused() {
    let problems = DaySchedule::parse("- 00:00–24:00 | 0 | Sleep\n", date("2026-11-26"))
        .err()
        .unwrap_or_default();
    assert!(
        problems.iter().any(|p| p.message.contains("waking time")),
        "{problems:?}"
    );
}
