//! Tests of scheduled intents: the file (round trip, problems with their lines), intervals,
//! times, writes (create, update, delete, refusals) and firing across downtime and DST.

use super::*;
use jiff::civil::date;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn berlin() -> Result<TimeZone, jiff::Error> {
    TimeZone::get("Europe/Berlin")
}

/// A local time in Berlin (the persona zone of these tests).
fn at(y: i16, mo: i8, d: i8, h: i8, mi: i8) -> DateTime {
    date(y, mo, d).at(h, mi, 0, 0)
}

fn intent(id: &str, chat: i64, due: DateTime) -> Intent {
    Intent {
        id: id.into(),
        chat: ChatId(chat),
        title: String::new(),
        text: format!("Do {id}."),
        due,
        every: None,
        left: None,
        urgent: false,
    }
}

fn daily() -> Option<Every> {
    Some(Every {
        n: 1,
        unit: Unit::Days,
    })
}

fn write(id: Option<&str>, text: &str, time: Option<&str>) -> IntentWrite {
    IntentWrite {
        id: id.map(str::to_string),
        text: text.into(),
        time: time.map(str::to_string),
        ..IntentWrite::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The file

#[test]
fn the_file_round_trips_exactly() -> TestResult {
    let mut a = intent("event-3f2a1b0c9d8e", 1234, at(2026, 11, 27, 9, 0));
    a.title = "Alice (work)".into();
    a.every = daily();
    a.left = Some(3);
    a.text =
        "Remind Alice about the dentist.\n\nAnd ask:\n- how was it?\n  \\## not a heading".into();
    let mut b = intent("hand-made", -1_001_234, date(2026, 12, 1).at(18, 5, 30, 0));
    b.urgent = true;
    b.every = Some(Every {
        n: 90,
        unit: Unit::Minutes,
    });
    let c = intent("event-000000000001", 7, at(2027, 1, 2, 0, 0));
    let intents = vec![a, b, c];
    let text = render_file("Heidi", &intents);
    let back = parse_file(&text).map_err(|p| format!("{p:?}\n{text}"))?;
    assert_eq!(back, intents, "{text}");
    assert_eq!(render_file("Heidi", &back), text);
    assert!(text.starts_with("# Heidi: scheduled intents\n\n## event-3f2a1b0c9d8e\n"));
    assert!(text.contains("- chat: 1234 (Alice (work))\n- due: 2026-11-27 09:00\n"));
    assert!(text.contains("- due: 2026-12-01 18:05:30\n- every: 90 minutes\n"));
    assert!(text.contains("- chat: 7\n"), "no title, no parentheses");
    assert_eq!(render_file("Heidi", &[]), "# Heidi: scheduled intents\n");
    assert_eq!(parse_file(&render_file("Heidi", &[])), Ok(Vec::new()));
    Ok(())
}

#[test]
fn the_documented_example_and_hand_edits_parse() -> TestResult {
    let text = "# Heidi: scheduled intents\n\n## event-3f2a1b0c9d8e\n- chat: 1234 (Alice)\n\
                - due: 2026-11-27 09:00\n- every: 1 day\n- left: 3\n- urgent: no\n\n\
                Remind Alice about the dentist.\n";
    let parsed = parse_file(text).map_err(|p| format!("{p:?}"))?;
    let mut want = intent("event-3f2a1b0c9d8e", 1234, at(2026, 11, 27, 9, 0));
    want.title = "Alice".into();
    want.every = daily();
    want.left = Some(3);
    want.text = "Remind Alice about the dentist.".into();
    assert_eq!(parsed, vec![want]);
    // By hand: a blank line under the heading, keys in any case and order, `T`, text right
    // under the keys, `urgent: TRUE`, no `every`.
    let hand = "\n## x\n\n- Due: 2026-11-27T09:00\n- CHAT: 5\n- urgent: TRUE\nCall Bob.\nSoon.\n";
    let parsed = parse_file(hand).map_err(|p| format!("{p:?}"))?;
    let mut want = intent("x", 5, at(2026, 11, 27, 9, 0));
    want.urgent = true;
    want.text = "Call Bob.\nSoon.".into();
    assert_eq!(parsed, vec![want]);
    Ok(())
}

/// Each problem of a hand-edited file is reported with the line to fix.
#[test]
fn file_problems_name_their_lines() {
    let ok = "- chat: 1\n- due: 2026-11-27 09:00\n\nText.\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("# T\nstray text\n## a\n{ok}"), 2, "text outside"),
        (format!("## a\n{ok}## a\n{ok}"), 6, "a second intent"),
        (format!("## two words\n{ok}"), 1, "heading is its id"),
        (
            "## a\n- due: 2026-11-27 09:00\n\nText.\n".into(),
            1,
            "no `- chat:`",
        ),
        ("## a\n- chat: 1\n\nText.\n".into(), 1, "no `- due:`"),
        (
            "## a\n- chat: 1\n- due: 2026-11-27 09:00\n".into(),
            1,
            "no text",
        ),
        (format!("## a\n- colour: red\n{ok}"), 2, "known key"),
        (format!("## a\n- chat: 2\n{ok}"), 3, "a second `chat`"),
        (
            "## a\n- chat: x\n- due: 2026-11-27 09:00\n\nT\n".into(),
            2,
            "chat id",
        ),
        (
            "## a\n- chat: 1\n- due: 27.11.2026\n\nT\n".into(),
            3,
            "date and time",
        ),
        (
            "## a\n- chat: 1\n- due: 2026-11-27T09:00Z\n\nT\n".into(),
            3,
            "date and time",
        ),
        (format!("## a\n- every: 5 minutes\n{ok}"), 2, "10 minutes"),
        (format!("## a\n- left: 0\n{ok}"), 2, "from 1"),
        (format!("## a\n- urgent: maybe\n{ok}"), 2, "yes or no"),
        (format!("## a\n- just a bullet\n{ok}"), 2, "`- key: value`"),
        (
            format!(
                "## a\n- chat: 1\n- due: 2026-11-27 09:00\n\n{}\n",
                "x".repeat(TEXT_CHARS + 1)
            ),
            5,
            "at most",
        ),
    ];
    for (text, line, fragment) in cases {
        let problems = parse_file(&text).err().unwrap_or_default();
        assert_eq!(problems.len(), 1, "{text}\n{problems:?}");
        assert_eq!(problems[0].line, line, "{text}\n{problems:?}");
        assert!(problems[0].message.contains(fragment), "{problems:?}");
    }
    // All problems are reported, in line order.
    let many = "## a\n- colour: red\n## b\n- chat: 1\n- due: soon\n\nT\n";
    let lines: Vec<usize> = parse_file(many)
        .err()
        .unwrap_or_default()
        .iter()
        .map(|p| p.line)
        .collect();
    assert_eq!(lines, [1, 1, 1, 2, 5]);
}

// ---------------------------------------------------------------------------------------------
// Intervals and times

#[test]
fn intervals_read_singular_or_plural_in_any_case_and_refuse_short_ones() {
    let cases = [
        ("30 minutes", 30, Unit::Minutes, "30 minutes"),
        ("1 Hour", 1, Unit::Hours, "1 hour"),
        ("1 hours", 1, Unit::Hours, "1 hour"),
        (" 2 DAYS ", 2, Unit::Days, "2 days"),
        ("1 week", 1, Unit::Weeks, "1 week"),
        ("3weeks", 3, Unit::Weeks, "3 weeks"),
        ("10 min", 10, Unit::Minutes, "10 minutes"),
    ];
    for (text, n, unit, shown) in cases {
        let every = parse_interval(text);
        assert_eq!(every, Ok(Every { n, unit }), "{text}");
        assert_eq!(every.map(|e| e.to_string()).as_deref(), Ok(shown));
    }
    for bad in [
        "9 minutes",
        "0 days",
        "",
        "day",
        "1 fortnight",
        "-1 day",
        "53 weeks",
        "1.5 h",
    ] {
        assert!(parse_interval(bad).is_err(), "{bad}");
    }
}

#[test]
fn times_are_local_unless_an_offset_or_a_zone_says_otherwise() -> TestResult {
    let tz = berlin()?;
    let local = at(2026, 3, 1, 14, 0);
    assert_eq!(parse_time("2026-03-01T14:00:00", None, &tz), Ok(local));
    assert_eq!(parse_time(" 2026-03-01 14:00 ", None, &tz), Ok(local));
    assert_eq!(parse_time("2026-03-01T14:00", Some(""), &tz), Ok(local));
    // An offset names the instant (Berlin is UTC+1 in March).
    assert_eq!(
        parse_time("2026-03-01T14:00:00Z", None, &tz),
        Ok(at(2026, 3, 1, 15, 0))
    );
    assert_eq!(
        parse_time("2026-03-01T14:00+02:00", None, &tz),
        Ok(at(2026, 3, 1, 13, 0))
    );
    // A zone reads the time as local there (New York is UTC-5), ignoring any offset.
    let ny = Some("America/New_York");
    assert_eq!(
        parse_time("2026-03-01T14:00:00", ny, &tz),
        Ok(at(2026, 3, 1, 20, 0))
    );
    assert_eq!(
        parse_time("2026-03-01T14:00:00Z", ny, &tz),
        Ok(at(2026, 3, 1, 20, 0))
    );
    assert_eq!(
        parse_time("2026-03-01T14:00:30.5", None, &tz),
        Ok(date(2026, 3, 1).at(14, 0, 30, 0)),
        "seconds kept, fractions dropped"
    );
    let unknown = parse_time("2026-03-01T14:00", Some("Mars/Olympus"), &tz);
    assert!(unknown.is_err_and(|e| e.0.contains("unknown time zone")));
    for bad in ["tomorrow at 9", "2026-03-01", "14:00", "2026-13-01T10:00"] {
        assert!(parse_time(bad, None, &tz).is_err(), "{bad}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writes

#[test]
fn writes_create_update_and_delete_by_id_in_their_chat() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = vec![intent("other", 99, at(2026, 11, 21, 8, 0))];
    let mut create = write(
        None,
        "  Remind Alice about the dentist.  ",
        Some("2026-11-27 09:00"),
    );
    create.interval = Some("1 day".into());
    create.occurrences = Some(3);
    let r = apply(&mut intents, ChatId(1), "Alice", &create, &tz, now, || {
        "event-a".into()
    });
    assert_eq!(r, Ok(IntentChange::Created("event-a".into())));
    let mut want = intent("event-a", 1, at(2026, 11, 27, 9, 0));
    want.title = "Alice".into();
    want.text = "Remind Alice about the dentist.".into();
    want.every = daily();
    want.left = Some(3);
    assert_eq!(intents.get(1), Some(&want));

    // An update changes what it names and keeps the rest.
    let mut update = write(
        Some("event-a"),
        "Remind Alice (updated).",
        Some("2026-11-28T10:30:00"),
    );
    update.urgent = true;
    let r = apply(&mut intents, ChatId(1), "", &update, &tz, now, || {
        "unused".into()
    });
    assert_eq!(r, Ok(IntentChange::Updated("event-a".into())));
    want.text = "Remind Alice (updated).".into();
    want.due = at(2026, 11, 28, 10, 30);
    want.urgent = true;
    assert_eq!(intents.get(1), Some(&want));
    let times = IntentWrite {
        occurrences: Some(5),
        interval: Some("2 days".into()),
        ..write(Some("event-a"), "Same.", None)
    };
    let _ = apply(
        &mut intents,
        ChatId(1),
        "Alice",
        &times,
        &tz,
        now,
        String::new,
    );
    assert_eq!(
        intents.get(1).map(|i| (i.left, i.every, i.due)),
        Some((
            Some(5),
            Some(Every {
                n: 2,
                unit: Unit::Days
            }),
            want.due
        ))
    );

    // An unknown id creates (with a new id); an empty text with a known id deletes.
    let unknown = write(Some("event-zzz"), "Another.", Some("2026-11-22 09:00"));
    let r = apply(&mut intents, ChatId(1), "Alice", &unknown, &tz, now, || {
        "event-b".into()
    });
    assert_eq!(r, Ok(IntentChange::Created("event-b".into())));
    let r = apply(
        &mut intents,
        ChatId(1),
        "Alice",
        &write(Some(" event-a "), "", None),
        &tz,
        now,
        String::new,
    );
    assert_eq!(r, Ok(IntentChange::Deleted("event-a".into())));
    let ids: Vec<&str> = intents.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["other", "event-b"]);
    Ok(())
}

/// A write of one chat can never reach another chat's intent: neither change nor delete it.
#[test]
fn an_intent_of_another_chat_is_refused() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = vec![intent("theirs", 99, at(2026, 11, 21, 8, 0))];
    let before = intents.clone();
    for text in ["", "Hijack."] {
        let r = apply(
            &mut intents,
            ChatId(1),
            "",
            &write(Some("theirs"), text, None),
            &tz,
            now,
            String::new,
        );
        assert!(r.is_err_and(|e| e.0.contains("another chat")), "{text:?}");
        assert_eq!(intents, before);
    }
    Ok(())
}

#[test]
fn a_chat_holds_at_most_max_per_chat_intents() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents: Vec<Intent> = (0..MAX_PER_CHAT)
        .map(|i| intent(&format!("e{i}"), 1, at(2026, 11, 21, 8, 0)))
        .collect();
    let w = write(None, "One more.", Some("2026-11-22 09:00"));
    let r = apply(&mut intents, ChatId(1), "", &w, &tz, now, || "e-new".into());
    assert!(r.is_err_and(|e| e.0.contains("already has")));
    assert_eq!(intents.len(), MAX_PER_CHAT);
    // Another chat is not affected by this one's cap.
    let r = apply(&mut intents, ChatId(2), "", &w, &tz, now, || "e-new".into());
    assert_eq!(r, Ok(IntentChange::Created("e-new".into())));
    Ok(())
}

#[test]
fn bad_writes_are_refused_and_change_nothing() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = vec![intent("mine", 1, at(2026, 11, 21, 8, 0))];
    let before = intents.clone();
    let zoned = IntentWrite {
        timezone: Some("Nowhere/Land".into()),
        ..write(None, "x", Some("2026-11-22 09:00"))
    };
    let zero = IntentWrite {
        occurrences: Some(0),
        interval: Some("1 day".into()),
        ..write(None, "x", Some("2026-11-22 09:00"))
    };
    let short = IntentWrite {
        interval: Some("5 minutes".into()),
        ..write(None, "x", Some("2026-11-22 09:00"))
    };
    let cases = [
        (
            write(None, "Late.", Some("2026-11-20 11:58")),
            "in the past",
        ),
        (
            write(Some("mine"), "Late.", Some("2026-11-19 09:00")),
            "in the past",
        ),
        (
            write(None, "Far.", Some("2027-11-22 09:00")),
            "more than a year",
        ),
        (zoned, "unknown time zone"),
        (zero, "at least 1"),
        (short, "10 minutes"),
        (write(None, "No time.", None), "needs a time"),
        (write(None, "Bad time.", Some("next tuesday")), "ISO 8601"),
        (write(None, "   ", Some("2026-11-22 09:00")), "no text"),
        (write(Some("gone"), "", None), "to delete"),
    ];
    for (w, fragment) in cases {
        let r = apply(&mut intents, ChatId(1), "", &w, &tz, now, || "new".into());
        assert!(
            r.as_ref().is_err_and(|e| e.0.contains(fragment)),
            "{w:?}: {r:?}"
        );
        assert_eq!(intents, before);
    }
    // Within a minute of now is not the past ("remind me now").
    let just = write(None, "Now.", Some("2026-11-20 11:59:30"));
    assert!(apply(&mut intents, ChatId(1), "", &just, &tz, now, || "n".into()).is_ok());
    Ok(())
}

#[test]
fn text_is_trimmed_capped_and_kept_from_reading_as_a_heading() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = Vec::new();
    let long = format!("\n\n  {}  \n", "é".repeat(TEXT_CHARS + 50));
    let w = write(None, &long, Some("2026-11-22 09:00"));
    apply(&mut intents, ChatId(1), "", &w, &tz, now, || "a".into())?;
    assert_eq!(
        intents.first().map(|i| i.text.chars().count()),
        Some(TEXT_CHARS)
    );
    let w = write(None, "Hi\r\n\n\n\n## evil\nok", Some("2026-11-22 09:00"));
    apply(&mut intents, ChatId(1), "", &w, &tz, now, || "b".into())?;
    assert_eq!(
        intents.get(1).map(|i| i.text.as_str()),
        Some("Hi\n\n\\## evil\nok")
    );
    let text = render_file("H", &intents);
    assert_eq!(parse_file(&text), Ok(intents));
    Ok(())
}

/// A repeating intent whose first time is past starts at its next occurrence (not at once).
#[test]
fn a_repeating_intent_with_a_past_start_starts_at_its_next_occurrence() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = Vec::new();
    let w = IntentWrite {
        interval: Some("1 day".into()),
        ..write(None, "Daily.", Some("2026-11-01 09:00"))
    };
    apply(&mut intents, ChatId(1), "", &w, &tz, now, || "a".into())?;
    assert_eq!(intents.first().map(|i| i.due), Some(at(2026, 11, 21, 9, 0)));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Firing

#[test]
fn a_daily_intent_missed_for_three_days_fires_once_then_tomorrow_at_the_same_time() -> TestResult {
    let tz = berlin()?;
    let mut daily_one = intent("d", 1, at(2026, 11, 20, 9, 0));
    daily_one.every = daily();
    daily_one.left = Some(10);
    // The daemon was down from before the 20th until the 23rd at noon.
    let now = instant(at(2026, 11, 23, 12, 0), &tz);
    let next = fire(&daily_one, now, &tz).ok_or("a daily intent repeats")?;
    assert_eq!(next.due, at(2026, 11, 24, 9, 0));
    assert_eq!(next.left, Some(9), "one firing, not four");
    // Fired right on time, the next is a day later.
    let on_time = fire(&daily_one, instant(daily_one.due, &tz), &tz).map(|i| i.due);
    assert_eq!(on_time, Some(at(2026, 11, 21, 9, 0)));
    Ok(())
}

/// 2026-10-25 is a 25-hour day in Berlin: a weekly intent keeps 09:00 local time.
#[test]
fn a_weekly_intent_keeps_its_local_time_across_a_dst_change() -> TestResult {
    let tz = berlin()?;
    let mut weekly = intent("w", 1, at(2026, 10, 21, 9, 0));
    weekly.every = Some(Every {
        n: 1,
        unit: Unit::Weeks,
    });
    let next = fire(&weekly, instant(weekly.due, &tz), &tz).ok_or("repeats")?;
    assert_eq!(next.due, at(2026, 10, 28, 9, 0));
    let elapsed = instant(weekly.due, &tz).duration_until(instant(next.due, &tz));
    assert_eq!(elapsed, SignedDuration::from_hours(7 * 24 + 1));
    Ok(())
}

/// Hours are elapsed time: across the spring change 01:30 is followed by 03:30 local.
/// In autumn the repeated hour's second 02:30 cannot be told from the first in the file, so it
/// is stepped over rather than fired twice.
#[test]
fn hourly_intents_advance_in_elapsed_time_across_dst() -> TestResult {
    let tz = berlin()?;
    let mut hourly = intent("h", 1, at(2026, 3, 29, 1, 30));
    hourly.every = Some(Every {
        n: 1,
        unit: Unit::Hours,
    });
    let next = fire(&hourly, instant(hourly.due, &tz), &tz).ok_or("repeats")?;
    assert_eq!(next.due, at(2026, 3, 29, 3, 30));
    let elapsed = instant(hourly.due, &tz).duration_until(instant(next.due, &tz));
    assert_eq!(elapsed, SignedDuration::from_hours(1));

    hourly.due = at(2026, 10, 25, 1, 30);
    let mut dues = Vec::new();
    let mut current = hourly.clone();
    for _ in 0..3 {
        let now = instant(current.due, &tz);
        current = fire(&current, now, &tz).ok_or("repeats")?;
        assert!(instant(current.due, &tz) > now, "always moves past now");
        dues.push(current.due);
    }
    assert_eq!(
        dues,
        [
            at(2026, 10, 25, 2, 30),
            at(2026, 10, 25, 3, 30),
            at(2026, 10, 25, 4, 30)
        ]
    );
    // 02:30 CEST to 03:30 CET is two elapsed hours: the second 02:30 was stepped over.
    let span = instant(dues[0], &tz).duration_until(instant(dues[1], &tz));
    assert_eq!(span, SignedDuration::from_hours(2));
    Ok(())
}

#[test]
fn left_counts_down_to_removal_and_one_shots_fire_once() -> TestResult {
    let tz = berlin()?;
    let mut counted = intent("c", 1, at(2026, 11, 20, 9, 0));
    counted.every = Some(Every {
        n: 30,
        unit: Unit::Minutes,
    });
    counted.left = Some(3);
    let mut lefts = Vec::new();
    let mut current = Some(counted);
    while let Some(i) = current {
        lefts.push(i.left);
        current = fire(&i, instant(i.due, &tz), &tz);
    }
    assert_eq!(lefts, [Some(3), Some(2), Some(1)]);
    let once = intent("o", 1, at(2026, 11, 20, 9, 0));
    assert_eq!(fire(&once, instant(once.due, &tz), &tz), None);
    Ok(())
}

#[test]
fn next_due_is_the_earliest_and_prompt_lines_show_one_chat_soonest_first() -> TestResult {
    let tz = berlin()?;
    let mut a = intent("event-a", 1, at(2026, 11, 28, 9, 0));
    a.every = daily();
    a.left = Some(3);
    a.urgent = true;
    a.text = "Remind Alice\nabout the dentist.".into();
    let b = intent("event-b", 1, at(2026, 11, 27, 18, 0));
    let c = intent("event-c", 2, at(2026, 11, 27, 8, 0));
    let intents = vec![a, b, c];
    assert_eq!(
        next_due(&intents, &tz),
        Some((instant(at(2026, 11, 27, 8, 0), &tz), 2))
    );
    assert_eq!(next_due(&[], &tz), None);
    assert_eq!(
        prompt_lines(&intents, ChatId(1)),
        "- event-b at 2026-11-27 18:00: Do event-b.\n\
         - event-a at 2026-11-28 09:00 (every 1 day, 3 left, urgent): Remind Alice about the dentist.\n"
    );
    assert_eq!(prompt_lines(&intents, ChatId(3)), "");
    Ok(())
}

#[test]
fn instants_never_panic_and_take_the_time_after_a_gap() -> TestResult {
    let tz = berlin()?;
    // 02:30 does not exist on 2026-03-29 in Berlin: it fires at 03:30 CEST.
    assert_eq!(
        instant(at(2026, 3, 29, 2, 30), &tz),
        instant(at(2026, 3, 29, 3, 30), &tz)
    );
    let _ = instant(DateTime::MAX, &tz);
    let _ = instant(DateTime::MIN, &tz);
    Ok(())
}

/// An id with a new time and no text moves the intent (its text kept); an id alone deletes.
#[test]
fn an_id_with_a_new_time_and_no_text_reschedules() -> TestResult {
    let tz = berlin()?;
    let now = instant(at(2026, 11, 20, 12, 0), &tz);
    let mut intents = vec![intent("event-a", 1, at(2026, 11, 21, 8, 0))];
    let before = intents[0].text.clone();
    let move_it = write(Some("event-a"), "", Some("2026-11-22 09:15"));
    let r = apply(&mut intents, ChatId(1), "", &move_it, &tz, now, String::new);
    assert_eq!(r, Ok(IntentChange::Updated("event-a".into())));
    assert_eq!(intents[0].due, at(2026, 11, 22, 9, 15));
    assert_eq!(intents[0].text, before);
    let delete = write(Some("event-a"), "", None);
    let r = apply(&mut intents, ChatId(1), "", &delete, &tz, now, String::new);
    assert_eq!(r, Ok(IntentChange::Deleted("event-a".into())));
    assert!(intents.is_empty());
    Ok(())
}
