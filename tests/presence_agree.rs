//! Presence agrees with itself, through the real runtime on virtual time: a message parked
//! at night while the fallback day is in use (asleep until 07:00) is read from the wake-up of
//! the day the model wrote afterwards (06:45), with its reading delay; and `ctl status`,
//! `ctl schedule` and the console's personas page show the same wake-up, in the persona's
//! zone, before and after that day arrived.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::slow_schedule::SlowScheduler;
use common::*;
use jiff::Timestamp;
use personad::adapters::memory::Action as Done;
use personad::app::ops::controls::Op;
use personad::core::model::Chat;
use personad::core::presence;

/// Berlin is UTC+1 in late November: local 06:45 is 05:45Z, the fallback's 07:00 is 06:00Z.
const PERSONA: &str =
    "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nSchool on weekdays; up early.\n\n";

/// The day the model writes: awake at 06:45 (at the fallback's morning responsiveness, 30).
const DAY: &str = "- 00:00–06:45 | 0 | Sleep | asleep\n\
- 06:45–08:00 | 30 | Getting ready | breakfast\n\
- 08:00–12:00 | 20 | School |\n\
- 12:00–22:00 | 80 | Home | homework and books\n\
- 22:00–24:00 | 0 | Sleep |\n";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn alice() -> Chat {
    dm(501)
}

/// The runtime started (and loaded) at `at` with a [`SlowScheduler`] planner and no day on disk.
async fn start(
    dir: &Path,
    at: &str,
) -> Result<(Harness, Arc<SlowScheduler>), Box<dyn std::error::Error>> {
    let make = |clock| Arc::new(SlowScheduler::new(clock, "morning!", DAY));
    let persona = persona_with(AGENT, PERSONA);
    Ok(Harness::start_keeping_planner(persona, dir, make, config(), &[alice()], ts(at)).await?)
}

fn reads(h: &Harness) -> Vec<Timestamp> {
    h.telegram
        .actions()
        .into_iter()
        .filter(|r| matches!(r.action, Done::Read { .. }))
        .map(|r| r.at)
        .collect()
}

/// What each view says of the wake-up: the text after `asleep until ` up to the `)`.
fn wake_shown(view: &str) -> Option<&str> {
    let at = view.find("asleep until ")? + "asleep until ".len();
    view[at..].split(')').next()
}

/// `ctl status`, `ctl schedule` and the console's personas page, each with the wake-up it
/// shows; every one must show `expected`.
async fn views_agree(h: &Harness, expected: &str) -> TestResult {
    let c = controller(h);
    let status = c.execute(Some(AGENT), Op::Status).await?;
    let schedule = c.execute(Some(AGENT), Op::Schedule { day: None }).await?;
    let page = personad::app::console_personas_page(&c).await;
    for (what, text) in [
        ("ctl status", &status),
        ("ctl schedule", &schedule),
        ("the console", &page),
    ] {
        assert_eq!(
            wake_shown(text),
            Some(expected),
            "{what} shows another wake-up:\n{text}"
        );
    }
    assert!(
        status.contains(&format!("now: Sleep (asleep until {expected})")),
        "{status}"
    );
    assert!(
        schedule.contains(&format!(
            "Now: Sleep (asleep until {expected}): messages stay unread until then"
        )),
        "{schedule}"
    );
    Ok(())
}

/// The finding: parked at 02:00 under the fallback (wake 07:00), the model's day arrives at
/// 02:02:30 saying 06:45: the message is read after 06:45 plus its reading delay, not after
/// 07:00; the three views said 07:00 before the day came and 06:45 after.
#[tokio::test]
async fn a_day_written_after_a_message_was_parked_moves_its_reading_to_the_new_wake_up()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, planner) = start(dir.path(), "2026-11-26T01:00:00Z").await?;
    h.say(&alice(), "Alice", "are you up?").await;
    h.pass(Duration::from_secs(10)).await;
    views_agree(&h, "07:00 CET").await?;
    h.pass(Duration::from_secs(10 * 60)).await;
    let written = planner.schedule_done.lock().map(|d| *d).ok().flatten();
    assert!(
        written.is_some_and(|w| w > ts("2026-11-26T01:02:00Z") && w < ts("2026-11-26T01:05:00Z")),
        "the day came after the message was parked: {written:?}"
    );
    views_agree(&h, "06:45 CET").await?;
    // 06:44 local: nothing read yet.
    h.pass(
        ts("2026-11-26T05:44:00Z")
            .duration_since(ts("2026-11-26T01:10:10Z"))
            .unsigned_abs(),
    )
    .await;
    assert!(reads(&h).is_empty(), "read during sleep");
    // Until 07:00 local, the fallback's wake-up.
    h.pass(Duration::from_secs(16 * 60)).await;
    let plans = planner.plans.lock().map(|p| p.clone()).unwrap_or_default();
    assert_eq!(plans.len(), 1, "read and answered before 07:00: {plans:?}");
    let woke = ts("2026-11-26T05:45:00Z");
    let (lo, hi) = presence::delay_range(30);
    let delay = woke.duration_since(plans[0]).unsigned_abs().as_secs_f64();
    assert!(
        plans[0] >= woke && delay >= lo && delay <= hi + 2.5,
        "read {delay:.1} s from 06:45 (at {}); the range at 30 is {lo:.1}–{hi:.1} s",
        plans[0]
    );
    assert!(
        reads(&h)
            .iter()
            .all(|r| *r >= woke && *r < ts("2026-11-26T06:00:00Z"))
    );
    h.stop().await?;
    Ok(())
}
