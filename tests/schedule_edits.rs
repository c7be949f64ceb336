//! `schedule`, the persona's own changes to its day, through the real runtime, the real LLM
//! planner and a mock Gemini answering in the original's JSON task format: the prompt lists
//! today and tomorrow with activity ids; a change that overlaps is refused with its reason
//! and nothing changes; the same change with its neighbour shortened goes through, written as
//! the persona's (`source=edited by=persona`) and re-read after a restart; a day the owner
//! wrote is never replaced, in memory or on disk (not even one edited by hand after the
//! runtime read it); a persona without the switch is not offered the action and its
//! `schedule` tasks change nothing.

mod common;

use std::path::Path;

use common::gemini::*;
use common::{AGENT, Harness, TestResult, config, persona_with};
use jiff::Timestamp;

/// Berlin is UTC+1 in late November.
const PERSONA: &str = "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nSchool on weekdays; asleep from 22:00 to 07:00.\n\n";
const SWITCH: &str = "# Allow Schedule Edits\ntrue\n\n";

const DAY: &str = "<!-- schedule: source=generated -->\n\n\
- 00:00–07:00 | 0 | Sleep | asleep\n\
- 07:00–08:00 | 40 | Getting ready | breakfast\n\
- 08:00–12:00 | 20 | School |\n\
- 12:00–13:00 | 50 | Lunch | with friends\n\
- 13:00–22:00 | 80 | Home | homework and books\n\
- 22:00–24:00 | 0 | Sleep |\n";

/// 13:30 in Berlin on Thursday 2026-11-26: at home, answering.
fn noon() -> Timestamp {
    "2026-11-26T12:30:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn day_path(state: &Path, date: &str) -> std::path::PathBuf {
    state
        .join(AGENT)
        .join("schedule")
        .join(format!("{date}.md"))
}

fn write_day(state: &Path, date: &str, text: &str) -> TestResult {
    let path = day_path(state, date);
    std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
    std::fs::write(path, text)?;
    Ok(())
}

/// The model's answers, in the original's JSON task format, by what the person said.
async fn model() -> wiremock::MockServer {
    answering(|newest| {
        let movie = r#"{"kind": "schedule", "start_time": "2026-11-26T19:00:00+01:00",
            "end_time": "2026-11-26T21:00:00+01:00", "activity_name": "Movie with Alice",
            "responsiveness": 30, "description": "the new space film"}"#;
        if newest.contains("movie tonight") {
            // Cuts into Home without shortening it.
            reply(&format!(
                r#"[{movie}, {{"kind": "send", "text": "Maybe!"}}]"#
            ))
        } else if newest.contains("really") {
            reply(&format!(
                r#"[{{"kind": "schedule", "id": "act-20261126-1300", "end_time": "19:00",
                     "activity_name": "Home", "responsiveness": 80}},
                    {movie},
                    {{"kind": "schedule", "start_time": "21:00", "end_time": "22:00",
                      "activity_name": "Home", "responsiveness": 80}},
                    {{"kind": "send", "text": "Deal."}}]"#
            ))
        } else if newest.contains("read instead") {
            reply(
                r#"[{"kind": "schedule", "id": "act-20261126-2100", "activity_name": "Reading",
                     "responsiveness": 70}, {"kind": "send", "text": "Fine."}]"#,
            )
        } else if newest.contains("tomorrow") {
            reply(
                r#"[{"kind": "schedule", "id": "act-20261127-1300", "activity_name": "Beach",
                     "responsiveness": 60}, {"kind": "send", "text": "Sure."}]"#,
            )
        } else {
            reply(r#"[{"kind": "send", "text": "Hi!"}]"#)
        }
    })
    .await
}

#[tokio::test]
async fn the_persona_changes_its_day_and_never_the_owners() -> TestResult {
    let server = model().await;
    let dir = tempfile::tempdir()?;
    let state = dir.path();
    write_day(state, "2026-11-26", DAY)?;
    let owners = DAY.replace("source=generated", "source=edited");
    write_day(state, "2026-11-27", &owners)?;
    let alice = person("Alice");
    let persona = persona_with(AGENT, &format!("{PERSONA}{SWITCH}"));
    let mut h = Harness::start_persona_at(
        persona.clone(),
        state,
        planner(server.uri()),
        config(),
        std::slice::from_ref(&alice),
        noon(),
    );
    let mut notables = h.handle.observe_notables();
    h.started().await;

    // An overlap: refused with its reason, the day unchanged.
    h.say(&alice, "Alice", "movie tonight at 7?").await;
    h.settle().await;
    let first = bodies(&server).await;
    let first = first.last().ok_or("no request")?;
    assert!(
        first.contains("act-20261126-1300") && first.contains("act-20261127-0000"),
        "the prompt does not list the days with ids: {first}"
    );
    assert!(
        first.contains("set by your owner"),
        "tomorrow is not shown as the owner's"
    );
    assert_eq!(std::fs::read_to_string(day_path(state, "2026-11-26"))?, DAY);
    let mut refused = Vec::new();
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "schedule_edit_refused" {
            refused.push(e.notable.detail);
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("overlaps") && refused[0].contains("Home"),
        "{refused:?}"
    );

    // The whole change: Home shortened around the movie.
    h.say(&alice, "Alice", "really, 7 to 9?").await;
    h.settle().await;
    let today = std::fs::read_to_string(day_path(state, "2026-11-26"))?;
    assert!(today.contains("source=edited by=persona"), "{today}");
    assert!(
        today.contains("- 13:00–19:00 | 80 | Home")
            && today.contains("- 19:00–21:00 | 30 | Movie with Alice | the new space film")
            && today.contains("- 21:00–22:00 | 80 | Home"),
        "{today}"
    );

    // Tomorrow is the owner's: refused, unchanged.
    h.say(&alice, "Alice", "and the beach tomorrow?").await;
    h.settle().await;
    assert_eq!(
        std::fs::read_to_string(day_path(state, "2026-11-27"))?,
        owners
    );
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "schedule_edit_refused" {
            refused.push(e.notable.detail);
        }
    }
    assert!(
        refused.get(1).is_some_and(|r| r.contains("owner")),
        "{refused:?}"
    );

    // The owner edits today by hand while the runtime runs; the persona's next change of
    // today is not written over the owner's file.
    let by_hand = today.replace("Movie with Alice", "Cinema (owner's words)");
    std::fs::write(day_path(state, "2026-11-26"), &by_hand)?;
    h.say(&alice, "Alice", "after the film, read instead?")
        .await;
    h.settle().await;
    assert_eq!(
        std::fs::read_to_string(day_path(state, "2026-11-26"))?,
        by_hand
    );
    // That change was applied in memory (the runtime's day) and the owner's file kept: it
    // is what a restart reads.
    h.stop().await?;
    let h = Harness::start_persona_at(
        persona,
        state,
        planner(server.uri()),
        config(),
        std::slice::from_ref(&alice),
        noon(),
    );
    h.started().await;
    assert_eq!(
        std::fs::read_to_string(day_path(state, "2026-11-26"))?,
        by_hand
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_persona_without_the_switch_is_not_offered_the_action() -> TestResult {
    let server = model().await;
    let dir = tempfile::tempdir()?;
    let state = dir.path();
    write_day(state, "2026-11-26", DAY)?;
    let alice = person("Alice");
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        state,
        planner(server.uri()),
        config(),
        std::slice::from_ref(&alice),
        noon(),
    );
    h.started().await;
    h.say(&alice, "Alice", "really, 7 to 9?").await;
    h.settle().await;
    let seen = bodies(&server).await;
    let body = seen.last().ok_or("no request")?;
    assert!(
        !body.contains("act-20261126") && !body.contains("«schedule»"),
        "offered without the switch: {body}"
    );
    assert_eq!(std::fs::read_to_string(day_path(state, "2026-11-26"))?, DAY);
    h.stop().await?;
    Ok(())
}
