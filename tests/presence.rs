//! Presence through the real runtime on virtual time: a persona's schedule (asleep means
//! unread, the backlog answered once after waking, plans in flight held overnight), the
//! reading delay at a given responsiveness and the faster answers while online, a crash at
//! night, the schedule call's fallback and back-off against a failing mock Gemini, scheduled
//! intents (fired once after downtime, never during sleep), and fresh starts.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::slow_schedule::SlowScheduler;
use common::*;
use jiff::Timestamp;
use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::adapters::memory::Action as Done;
use personad::app::ops::controls::Op;
use personad::core::intents::{Fired, Intent, IntentWrite};
use personad::core::model::{Chat, MessageId};
use personad::core::plan::{Action, Moment};
use personad::core::presence;
use personad::ports::clock::SharedClock;
use personad::ports::llm::ApiKey;
use personad::ports::planner::SharedPlanner;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Berlin is UTC+1 in late November: local 07:00 is 06:00Z.
const PERSONA: &str = "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nSchool on weekdays; asleep from 22:00 to 07:00.\n\n";

/// One day of the scripted schedule (the same every day).
const DAY: &str = "<!-- schedule: source=generated -->\n\n\
- 00:00–07:00 | 0 | Sleep | asleep\n\
- 07:00–08:00 | 40 | Getting ready | breakfast\n\
- 08:00–12:00 | 20 | School |\n\
- 12:00–13:00 | 50 | Lunch | with friends\n\
- 13:00–22:00 | 80 | Home | homework and books\n\
- 22:00–24:00 | 0 | Sleep |\n";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Writes the scripted day for each of `days` (`YYYY-MM-DD`) under the agent's schedule.
fn write_days(state: &Path, days: &[&str]) {
    let dir = state.join(AGENT).join("schedule");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    for d in days {
        std::fs::write(dir.join(format!("{d}.md")), DAY).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// What each planning call saw: its time, the history's length, the moment, its target.
type Seen = Arc<Mutex<Vec<(Timestamp, usize, Moment, Option<MessageId>)>>>;

/// A planner that records each call and answers with `answer(call number)`.
fn recording(
    seen: &Seen,
    answer: impl Fn(usize) -> Vec<Action> + Send + Sync + 'static,
) -> impl FnOnce(SharedClock) -> SharedPlanner + 'static {
    let seen = Arc::clone(seen);
    move |_| {
        Arc::new(ScriptedPlanner::new(move |req, n| {
            if let Ok(mut s) = seen.lock() {
                s.push((req.now, req.history.len(), req.moment.clone(), req.target));
            }
            Ok(answer(n))
        }))
    }
}

/// Writes the agent's intents file with one intent for Alice.
fn write_intent(state: &Path, id: &str, text: &str, due: &str, daily: bool) -> Intent {
    write_intent_as(state, id, text, due, daily, false)
}

/// [`write_intent`], urgent or not.
fn write_intent_as(
    state: &Path,
    id: &str,
    text: &str,
    due: &str,
    daily: bool,
    urgent: bool,
) -> Intent {
    use personad::core::intents::{Every, Unit};
    let intent = Intent {
        id: id.into(),
        chat: alice().id,
        title: "Alice".into(),
        text: text.into(),
        due: due.parse().unwrap_or_else(|e| panic!("{due}: {e}")),
        every: daily.then_some(Every {
            n: 1,
            unit: Unit::Days,
        }),
        left: None,
        urgent,
    };
    std::fs::create_dir_all(state.join(AGENT)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        state.join(AGENT).join("intents.md"),
        personad::core::intents::render_file(AGENT, std::slice::from_ref(&intent)),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    intent
}

/// The scripted day, one intent of Alice's (`event-0000000000aa`) due at `due` (local), and a
/// runtime started (and loaded) at `at`.
async fn with_intent(
    dir: &Path,
    due: &str,
    daily: bool,
    urgent: bool,
    at: &str,
) -> (Harness, Seen) {
    write_days(dir, &["2026-11-26"]);
    write_intent_as(
        dir,
        "event-0000000000aa",
        "Ask about the exam",
        due,
        daily,
        urgent,
    );
    let seen: Seen = Arc::default();
    let h = start(dir, &seen, at);
    h.started().await;
    (h, seen)
}

/// There was one plan, it answered `msg`, and the intent fired in it: its time.
fn the_plan_answers_with_the_intent(
    seen: &Seen,
    msg: &personad::core::model::Message,
) -> Timestamp {
    let c = calls(seen);
    assert_eq!(c.len(), 1, "one plan: {c:?}");
    assert_eq!(c[0].3, Some(msg.id), "the message stays the target");
    assert!(
        c[0].2.intent.is_some(),
        "the intent was dropped: {:?}",
        c[0].2
    );
    c[0].0
}

/// The agent's intents file.
fn intents_file(state: &Path) -> Result<String, std::io::Error> {
    std::fs::read_to_string(state.join(AGENT).join("intents.md"))
}

fn calls(seen: &Seen) -> Vec<(Timestamp, usize, Moment, Option<MessageId>)> {
    seen.lock().map(|s| s.clone()).unwrap_or_default()
}

fn alice() -> Chat {
    dm(501)
}

fn start(state: &Path, seen: &Seen, at: &str) -> Harness {
    Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        state,
        recording(seen, |_| vec![send("hi there")]),
        config(),
        &[alice()],
        ts(at),
    )
}

fn reads(h: &Harness) -> Vec<Timestamp> {
    h.telegram
        .actions()
        .into_iter()
        .filter(|r| matches!(r.action, Done::Read { .. }))
        .map(|r| r.at)
        .collect()
}

fn send_times(h: &Harness) -> Vec<Timestamp> {
    h.telegram
        .actions()
        .into_iter()
        .filter(|r| matches!(r.action, Done::Send { .. }))
        .map(|r| r.at)
        .collect()
}

fn secs_between(a: Timestamp, b: Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64()
}

/// Messages at 03:00 and 03:20 local stay unread until the wake-up at 07:00; then the backlog
/// is one plan (both messages in its history) after the reading delay at the wake-up's
/// responsiveness, and the account was shown offline when the night began.
#[tokio::test]
async fn a_message_at_three_is_read_and_answered_only_after_waking() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-25", "2026-11-26", "2026-11-27"]);
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T01:30:00Z");
    h.pass(Duration::from_secs(30 * 60)).await;
    h.say(&alice(), "Alice", "are you up?").await;
    h.pass(Duration::from_secs(20 * 60)).await;
    h.say(&alice(), "Alice", "hello??").await;
    // 06:59 local.
    h.pass(Duration::from_secs(3 * 3600 + 39 * 60)).await;
    assert!(calls(&seen).is_empty(), "planned during sleep");
    assert!(reads(&h).is_empty(), "read during sleep");
    assert!(send_times(&h).is_empty());
    // The owner's commands work at night.
    let status = controller(&h).execute(Some(AGENT), Op::Status).await?;
    assert!(
        status.contains("now: Sleep (asleep until 07:00 CET)"),
        "{status}"
    );
    let graphs = personad::adapters::store::GraphStore::new(
        personad::adapters::store::StateDir::new(dir.path()),
    )
    .scan()?;
    let waiting = graphs
        .iter()
        .filter_map(|g| g.graph.as_ref().ok())
        .find(|g| g.chat.id == alice().id)
        .and_then(|g| g.tasks.first().and_then(|t| t.not_before));
    assert!(
        waiting.is_some_and(|nb| nb >= ts("2026-11-26T06:00:00Z")),
        "the durable wait ends after waking: {waiting:?}"
    );
    h.pass(Duration::from_secs(60 + 100)).await;
    let seen_now = calls(&seen);
    assert_eq!(seen_now.len(), 1, "one plan for the backlog");
    let (at, history, moment, _) = &seen_now[0];
    assert_eq!(*history, 2, "both messages in one plan");
    let (lo, hi) = presence::delay_range(40);
    let delay = secs_between(ts("2026-11-26T06:00:00Z"), *at);
    assert!(
        delay >= lo && delay <= hi + 2.5,
        "read {delay:.1} s after waking; the documented range at 40 is {lo:.1}–{hi:.1} s"
    );
    assert!(
        moment
            .activity
            .as_deref()
            .is_some_and(|a| a.contains("Getting ready")),
        "the current activity reaches the prompt: {moment:?}"
    );
    assert!(reads(&h).iter().all(|r| *r >= ts("2026-11-26T06:00:00Z")));
    assert_eq!(send_times(&h).len(), 1);
    let statuses: Vec<bool> = h
        .telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Done::Status { online } => Some(online),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses.first(),
        Some(&false),
        "offline as the night began: {statuses:?}"
    );
    assert!(
        statuses.contains(&true),
        "online when reading: {statuses:?}"
    );
    h.stop().await?;
    Ok(())
}

/// A plan made at 21:50 whose message is due after 22:00 waits until the morning.
#[tokio::test]
async fn a_reply_still_planned_when_sleep_starts_waits_until_morning() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26", "2026-11-27"]);
    let seen: Seen = Arc::default();
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        dir.path(),
        recording(&seen, |_| {
            vec![Action::Wait { secs: 900.0 }, send("good night")]
        }),
        config(),
        &[alice()],
        ts("2026-11-26T20:50:00Z"),
    );
    h.say(&alice(), "Alice", "still up?").await;
    h.pass(Duration::from_secs(9 * 3600 + 15 * 60)).await;
    assert_eq!(calls(&seen).len(), 1, "planned before the night");
    let sent = send_times(&h);
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0] >= ts("2026-11-27T06:00:00Z"),
        "sent at {} (the night began at 21:00Z)",
        sent[0]
    );
    h.stop().await?;
    Ok(())
}

/// At lunch (responsiveness 50) a message is read within the documented range; right after
/// the reply the persona is still online and reads the next one within seconds.
#[tokio::test]
async fn at_noon_the_delay_follows_the_curve_and_online_answers_faster() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26"]);
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T11:05:00Z");
    let first = h.say(&alice(), "Alice", "lunch?").await;
    // A second message 45 s later does not push the reading time back.
    h.pass(Duration::from_secs(45)).await;
    h.say(&alice(), "Alice", "I'm at the usual place").await;
    h.pass(Duration::from_secs(75)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 1);
    let (lo, hi) = presence::delay_range(50);
    let delay = secs_between(first.date, c[0].0);
    assert!(
        delay >= lo && delay <= hi,
        "{delay:.1} s at responsiveness 50 (documented {lo:.1}–{hi:.1} s)"
    );
    assert_eq!(send_times(&h).len(), 1);
    h.pass(Duration::from_secs(30)).await;
    let second = h.say(&alice(), "Alice", "and after?").await;
    h.pass(Duration::from_secs(20)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 2);
    let quick = secs_between(second.date, c[1].0);
    assert!(
        quick <= presence::FASTEST_SECS * 1.25 + 0.01,
        "online: {quick:.1} s"
    );
    h.stop().await?;
    Ok(())
}

/// The runtime dies at 04:00 with the night's messages unread; started again, it answers the
/// backlog once after the wake-up.
#[tokio::test]
async fn a_crash_at_night_answers_the_backlog_once_after_waking() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26"]);
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T02:00:00Z");
    h.say(&alice(), "Alice", "you there?").await;
    h.pass(Duration::from_secs(600)).await;
    h.say(&alice(), "Alice", "call me when you wake up").await;
    h.pass(Duration::from_secs(3600)).await;
    h.crash().await;
    assert!(calls(&seen).is_empty());
    let mut h = start(dir.path(), &seen, "2026-11-26T03:30:00Z");
    h.started().await;
    h.pass(Duration::from_secs(3 * 3600)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 1, "one plan after waking: {c:?}");
    assert_eq!(c[0].1, 2, "with the whole backlog");
    assert!(c[0].0 >= ts("2026-11-26T06:00:00Z"));
    assert_eq!(send_times(&h).len(), 1, "answered once");
    h.stop().await?;
    Ok(())
}

/// Every request to the mock fails: the day falls back to the deterministic template at
/// once, the second call waits for the back-off, and after two calls the day is left alone,
/// tomorrow's call included until the next local day (requests counted at the mock).
#[tokio::test]
async fn a_failing_schedule_call_falls_back_and_backs_off() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("down"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir()?;
    let uri = server.uri();
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        dir.path(),
        move |clock| {
            let mut cfg = GeminiConfig::new(ApiKey::new("k"));
            cfg.base_url = uri;
            let client = GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}"));
            let retry = RetryConfig {
                max_attempts: 1,
                ..RetryConfig::default()
            };
            let llm = RetryingLlm::new(Arc::new(client), retry, clock);
            Arc::new(LlmPlanner::new(Arc::new(llm), LlmPlannerConfig::default()))
        },
        config(),
        &[alice()],
        ts("2026-11-26T08:00:00Z"),
    );
    h.started().await;
    let requests = || async { server.received_requests().await.unwrap_or_default().len() };
    let day_file = dir
        .path()
        .join(AGENT)
        .join("schedule")
        .join("2026-11-26.md");
    h.pass(Duration::from_secs(5)).await;
    assert_eq!(requests().await, 1, "one call for today at start");
    let text = std::fs::read_to_string(&day_file)?;
    assert!(
        text.contains("source=fallback attempts=1 retry_at=2026-11-26T08:30"),
        "{text}"
    );
    let day = personad::core::presence::DaySchedule::parse(&text, "2026-11-26".parse()?)
        .map_err(|p| format!("{p:?}"))?;
    let template = presence::fallback("2026-11-26".parse()?, None, day.source.clone());
    assert_eq!(day, template, "the fallback is the template");
    h.pass(Duration::from_secs(29 * 60)).await;
    assert_eq!(requests().await, 1, "backing off");
    h.pass(Duration::from_secs(2 * 60)).await;
    assert_eq!(requests().await, 2, "the second call after the back-off");
    let text = std::fs::read_to_string(&day_file)?;
    assert!(text.contains("source=fallback attempts=2 -->"), "{text}");
    // Until 18:00 local nothing more is asked for today or tomorrow.
    h.pass(Duration::from_secs(8 * 3600)).await;
    assert_eq!(requests().await, 2, "two calls for the day at most");
    // 18:00 local: tomorrow is due, but the day's two calls are spent: it waits for the next
    // local day, and then it is asked for once (it is today by then).
    h.pass(Duration::from_secs(3600)).await;
    assert_eq!(requests().await, 2, "two calls a day, all days together");
    h.pass(Duration::from_secs(5 * 3600 + 45 * 60)).await;
    assert_eq!(requests().await, 3, "the new day's call after midnight");
    let state = std::fs::read_to_string(dir.path().join(AGENT).join("agent-state.json"))?;
    assert!(
        state.contains("2026-11-27"),
        "the calls are counted on disk: {state}"
    );
    h.stop().await?;
    Ok(())
}

/// An intent set for 06:30 fires at the wake-up (07:00), not during sleep; after three days
/// of downtime the daily intent fires once, then moves to the next morning.
#[tokio::test]
async fn an_intent_fires_after_waking_and_once_after_downtime() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(
        dir.path(),
        &[
            "2026-11-26",
            "2026-11-27",
            "2026-11-28",
            "2026-11-29",
            "2026-11-30",
        ],
    );
    let seen: Seen = Arc::default();
    let plan = |n: usize| {
        if n == 0 {
            vec![
                send("sure, I'll remind you"),
                Action::Event {
                    write: IntentWrite {
                        text: "Wish Alice luck for her exam".into(),
                        time: Some("2026-11-27 06:30".into()),
                        interval: Some("1 day".into()),
                        ..IntentWrite::default()
                    },
                },
            ]
        } else {
            vec![send("good luck today!")]
        }
    };
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        dir.path(),
        recording(&seen, plan),
        config(),
        &[alice()],
        ts("2026-11-26T15:00:00Z"),
    );
    h.say(&alice(), "Alice", "remind me every morning?").await;
    h.pass(Duration::from_secs(600)).await;
    let intents = intents_file(dir.path())?;
    assert!(intents.contains("due: 2026-11-27 06:30"), "{intents}");
    // 06:45 local: still asleep, nothing fired.
    h.pass(Duration::from_secs(14 * 3600 + 35 * 60)).await;
    assert_eq!(calls(&seen).len(), 1);
    h.pass(Duration::from_secs(30 * 60)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 2, "fired at the wake-up");
    assert!(c[1].0 >= ts("2026-11-27T06:00:00Z"));
    let fired: Option<&Fired> = c[1].2.intent.as_ref();
    assert!(
        fired.is_some_and(|f| f.text.contains("exam")),
        "{:?}",
        c[1].2
    );
    h.crash().await;
    // Three days later, at 13:00 local.
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, PERSONA),
        dir.path(),
        recording(&seen, plan),
        config(),
        &[alice()],
        ts("2026-11-30T12:00:00Z"),
    );
    h.started().await;
    h.pass(Duration::from_secs(3600)).await;
    assert_eq!(calls(&seen).len(), 3, "the missed days fire once");
    let intents = intents_file(dir.path())?;
    assert!(intents.contains("due: 2026-12-01 06:30"), "{intents}");
    h.stop().await?;
    Ok(())
}

/// `Reset Context On First Message`: a chat that starts anew loses its summaries, notes and
/// scheduled intents once (archived, not deleted), and the plan gets `Start Of Conversation`.
#[tokio::test]
async fn a_fresh_start_archives_the_chats_memory_once() -> TestResult {
    use personad::core::facts::{FactScope, FactWrite, Source};
    use personad::ports::facts::FactStore;
    let dir = tempfile::tempdir()?;
    let facts = personad::adapters::store::facts::FileFacts::new(
        personad::adapters::store::StateDir::new(dir.path()),
    );
    let chat = alice();
    let note = FactWrite {
        id: None,
        content: "We talked about the trip".into(),
    };
    let _ = facts.apply(
        AGENT,
        FactScope::Chat(chat.id),
        &note,
        &Source {
            task: "note-1".into(),
            name: None,
            at: t0(),
            chat: chat.id,
            message: None,
        },
    )?;
    facts.save_summaries(
        AGENT,
        chat.id,
        &personad::core::summaries::SummaryFile {
            summaries: vec![personad::core::summaries::Summary {
                first: personad::core::model::MessageId(900),
                last: personad::core::model::MessageId(950),
                text: "Alice and the persona planned a trip.".into(),
            }],
            ..Default::default()
        },
    )?;
    write_intent(
        dir.path(),
        "event-0000000000ee",
        "Ask about the trip photos",
        "2026-12-20T10:00",
        false,
    );
    let seen: Seen = Arc::default();
    let memory_seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (s2, m2) = (Arc::clone(&seen), Arc::clone(&memory_seen));
    let mut h = Harness::start_persona_at(
        persona_with(
            AGENT,
            "# Reset Context On First Message\nForget everything when we start over.\n\n# Start Of Conversation\nGreet them like a stranger.\n\n",
        ),
        dir.path(),
        move |_| {
            Arc::new(ScriptedPlanner::new(move |req, _| {
                if let Ok(mut s) = s2.lock() {
                    s.push((req.now, req.history.len(), req.moment.clone(), req.target));
                }
                if let Ok(mut m) = m2.lock() {
                    m.push(format!("{}|{}", req.memory.summaries, req.memory.chat));
                }
                Ok(vec![send("hello, stranger")])
            }))
        },
        config(),
        std::slice::from_ref(&chat),
        t0(),
    );
    h.say(&chat, "Alice", "hi!").await;
    h.pass(Duration::from_secs(10)).await;
    h.say(&chat, "Alice", "remember me?").await;
    h.pass(Duration::from_secs(10)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 2);
    assert_eq!(
        c[0].2.fresh_start.as_deref(),
        Some("Greet them like a stranger.")
    );
    assert_eq!(c[1].2.fresh_start, None, "not fresh once we have spoken");
    let m = memory_seen.lock().map(|m| m.clone()).unwrap_or_default();
    assert!(
        m.iter().all(|s| !s.contains("trip")),
        "the chat's memory left the prompt: {m:?}"
    );
    let archived = files_below(&dir.path().join(AGENT).join("memory").join("resets"));
    assert_eq!(
        archived.len(),
        4,
        "marker, summaries, notes and intents: {archived:?}"
    );
    assert!(archived.iter().any(|f| f.ends_with("summaries.md")));
    assert!(archived.iter().any(|f| f.ends_with("notes.md")));
    assert!(archived.iter().any(|f| f.ends_with("intents.md")));
    assert!(
        c[0].2.intents.is_empty(),
        "the dropped intents are not shown: {:?}",
        c[0].2
    );
    assert!(
        !intents_file(dir.path())?.contains("event-0000000000ee"),
        "the chat's intents are gone"
    );
    h.stop().await?;
    Ok(())
}

/// The owner's `/schedule` shows today's day with the current activity marked, and the
/// status line names the activity.
#[tokio::test]
async fn the_owner_sees_the_schedule_and_the_current_activity() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26"]);
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T11:30:00Z");
    h.started().await;
    h.pass(Duration::from_secs(1)).await;
    let c = controller(&h);
    let schedule = c.execute(Some(AGENT), Op::Schedule { day: None }).await?;
    assert!(schedule.contains("▶ 12:00–13:00"), "{schedule}");
    assert!(
        schedule.contains("Thursday 2026-11-26 (Europe/Berlin)"),
        "{schedule}"
    );
    let status = c.execute(Some(AGENT), Op::Status).await?;
    assert!(status.contains("now: Lunch (responsiveness 50"), "{status}");
    // A reload that removes the `Daily Schedule` makes the persona always available.
    h.handle.upsert_agent(personad::runtime::AgentHandle {
        persona: Arc::new(persona_with(AGENT, "# Agent Timezone\nEurope/Berlin\n\n")),
        telegram: h.telegram.clone(),
    });
    h.pass(Duration::from_secs(1)).await;
    assert_eq!(h.handle.presence(AGENT), None);
    let status = c.execute(Some(AGENT), Op::Status).await?;
    assert!(status.contains("now: always available"), "{status}");
    h.stop().await?;
    Ok(())
}

/// A harness whose planner is a [`SlowScheduler`], started at `at` (and loaded).
async fn start_slow(
    dir: &Path,
    at: &str,
) -> Result<(Harness, Arc<SlowScheduler>), Box<dyn std::error::Error>> {
    let make = |clock| Arc::new(SlowScheduler::new(clock, "hi!", DAY));
    let persona = persona_with(AGENT, PERSONA);
    Ok(Harness::start_keeping_planner(persona, dir, make, config(), &[alice()], ts(at)).await?)
}

/// The day's schedule is asked for in the agent's own chat: a message arriving while that
/// call runs is read and answered after its own delay, long before the call returns, and the
/// day the call wrote is used from then on.
#[tokio::test]
async fn the_schedule_call_never_holds_up_a_reply() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, planner) = start_slow(dir.path(), "2026-11-26T14:00:00Z").await?;
    let msg = h.say(&alice(), "Alice", "free this afternoon?").await;
    h.pass(Duration::from_secs(100)).await;
    let plans = planner.plans.lock().map(|p| p.clone()).unwrap_or_default();
    assert_eq!(plans.len(), 1, "answered while the schedule call runs");
    assert_eq!(send_times(&h).len(), 1);
    assert!(send_times(&h)[0] < ts("2026-11-26T14:01:45Z"));
    assert!(
        planner
            .schedule_done
            .lock()
            .map(|d| d.is_none())
            .unwrap_or(false),
        "the call is still running"
    );
    // The fallback's 15:00 is "Busy with the day" (40), the written day's is "Home" (80).
    let (lo, hi) = presence::delay_range(40);
    let delay = secs_between(msg.date, plans[0]);
    assert!(delay >= lo && delay <= hi, "{delay}");
    h.pass(Duration::from_secs(600)).await;
    let done = planner.schedule_done.lock().map(|d| *d).ok().flatten();
    assert_eq!(done, Some(ts("2026-11-26T14:02:30Z")));
    let day = std::fs::read_to_string(dir.path().join(AGENT).join("schedule/2026-11-26.md"))?;
    assert!(
        day.contains("source=generated") && day.contains("| 80 | Home |"),
        "{day}"
    );
    let msg = h.say(&alice(), "Alice", "and now?").await;
    h.pass(Duration::from_secs(60)).await;
    let plans = planner.plans.lock().map(|p| p.clone()).unwrap_or_default();
    let (lo, hi) = presence::delay_range(80);
    let delay = secs_between(msg.date, plans[1]);
    assert!(
        delay >= lo && delay <= hi,
        "the written day is used: {delay}"
    );
    h.stop().await?;
    Ok(())
}

/// A crash after an intent's plan was saved but before the intent moved on: at the next
/// start the saved plan goes on (its message is sent, nothing is planned again) and the
/// intent moves to its next time, so it fires once.
#[tokio::test]
async fn an_intent_whose_plan_was_saved_before_a_crash_fires_once() -> TestResult {
    use personad::core::graph::{Task, TaskGraph, TaskSpec, TaskStatus};
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26"]);
    let intent = write_intent(
        dir.path(),
        "event-a1b2c3d4e5f6",
        "Say good morning",
        "2026-11-26T09:00",
        true,
    );
    let fired_at = ts("2026-11-26T08:00:00Z");
    let mut graph = TaskGraph::with_received(AGENT, alice(), fired_at, None, fired_at);
    if let Some(TaskSpec::Received { intent: slot, .. }) =
        graph.tasks.first_mut().map(|t| &mut t.spec)
    {
        *slot = Some(Fired {
            id: intent.id.clone(),
            text: intent.text.clone(),
            due: fired_at,
            urgent: false,
        });
    }
    graph.tasks[0].status = TaskStatus::Done;
    let received = graph.tasks[0].id.clone();
    graph.append_chain(
        &received,
        vec![Task::new(TaskSpec::send("good morning!", None), fired_at)],
    );
    personad::adapters::store::GraphStore::new(personad::adapters::store::StateDir::new(
        dir.path(),
    ))
    .save(&graph)?;
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T08:05:00Z");
    h.started().await;
    h.pass(Duration::from_secs(120)).await;
    assert!(calls(&seen).is_empty(), "planned again: {:?}", calls(&seen));
    assert_eq!(send_times(&h).len(), 1, "the saved plan's message");
    let intents = intents_file(dir.path())?;
    assert!(intents.contains("due: 2026-11-27 09:00"), "{intents}");
    h.stop().await?;
    Ok(())
}

/// An intent that comes due while a message waits for the wake-up is answered by the same
/// plan: the message keeps its place as the plan's target.
#[tokio::test]
async fn an_intent_due_while_a_message_waits_joins_its_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, seen) = with_intent(
        dir.path(),
        "2026-11-26T07:00",
        false,
        false,
        "2026-11-26T05:30:00Z",
    )
    .await;
    let msg = h.say(&alice(), "Alice", "morning! exam today").await;
    h.pass(Duration::from_secs(3600)).await;
    let at = the_plan_answers_with_the_intent(&seen, &msg);
    assert!(at >= ts("2026-11-26T06:00:00Z"));
    h.stop().await?;
    Ok(())
}

/// A message that arrives before a fired intent's plan starts: the new plan answers the
/// message and still carries the intent.
#[tokio::test]
async fn a_message_after_an_intent_fired_keeps_the_intent_in_the_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, seen) = with_intent(
        dir.path(),
        "2026-11-26T14:00",
        false,
        false,
        "2026-11-26T12:59:00Z",
    )
    .await;
    // 14:00 local: the intent fires, and Alice writes before its plan starts.
    h.pass(Duration::from_secs(60)).await;
    let msg = h.say(&alice(), "Alice", "guess what").await;
    h.pass(Duration::from_secs(120)).await;
    the_plan_answers_with_the_intent(&seen, &msg);
    assert!(!intents_file(dir.path())?.contains("event-0000000000aa"));
    h.stop().await?;
    Ok(())
}

/// An urgent intent fires at night even while a message waits for the morning, and its plan
/// answers the message too.
#[tokio::test]
async fn an_urgent_intent_fires_at_night_with_the_waiting_message() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, seen) = with_intent(
        dir.path(),
        "2026-11-26T03:30",
        false,
        true,
        "2026-11-26T02:00:00Z",
    )
    .await;
    let msg = h.say(&alice(), "Alice", "my alarm is broken").await;
    h.pass(Duration::from_secs(40 * 60)).await;
    let at = the_plan_answers_with_the_intent(&seen, &msg);
    assert!(at < ts("2026-11-26T02:40:00Z"), "planned at {at}");
    h.stop().await?;
    Ok(())
}

/// A paused chat gets no plan from its intent (the intent moves on), and a disabled one
/// neither.
#[tokio::test]
async fn a_paused_chat_gets_no_plan_from_an_intent() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut h, seen) = with_intent(
        dir.path(),
        "2026-11-26T14:00",
        true,
        false,
        "2026-11-26T12:00:00Z",
    )
    .await;
    let ctl = controller(&h);
    ctl.execute(
        Some(AGENT),
        Op::Pause {
            chat: Some(alice().id.to_string()),
            secs: None,
        },
    )
    .await?;
    h.pass(Duration::from_secs(2 * 3600)).await;
    assert!(calls(&seen).is_empty(), "planned in a paused chat");
    assert!(intents_file(dir.path())?.contains("due: 2026-11-27 14:00"));
    ctl.execute(
        Some(AGENT),
        Op::Resume {
            chat: Some(alice().id.to_string()),
        },
    )
    .await?;
    h.pass(Duration::from_secs(24 * 3600)).await;
    assert_eq!(calls(&seen).len(), 1, "fires again once resumed");
    h.stop().await?;
    Ok(())
}

/// A day broken by hand is left alone (no call writes over it; the fallback covers it), and a
/// day written by hand after the start is never written over by the call that was due.
#[tokio::test]
async fn days_written_by_hand_are_never_written_over() -> TestResult {
    let dir = tempfile::tempdir()?;
    let days = dir.path().join(AGENT).join("schedule");
    std::fs::create_dir_all(&days)?;
    let broken =
        "<!-- schedule: source=edited -->\n- 00:00–07:00 | 0 | Sleep\n- 07:00–25:00 | 50 | Day\n";
    std::fs::write(days.join("2026-11-26.md"), broken)?;
    let (mut h, planner) = start_slow(dir.path(), "2026-11-26T10:00:00Z").await?;
    h.pass(Duration::from_secs(600)).await;
    assert_eq!(std::fs::read_to_string(days.join("2026-11-26.md"))?, broken);
    assert_eq!(
        planner.schedule_done.lock().map(|d| *d).ok().flatten(),
        None,
        "no call for a broken day"
    );
    // Tomorrow is written by hand at 18:01 local, while tomorrow's call (from 18:00, it
    // takes 150 s) runs: the call's answer does not replace it.
    h.pass(Duration::from_secs(6 * 3600 + 51 * 60)).await;
    assert!(
        planner
            .schedule_done
            .lock()
            .map(|d| d.is_none())
            .unwrap_or(false),
        "the call is still running"
    );
    let mine = "<!-- schedule: source=edited -->\n- 00:00–09:00 | 0 | Sleep in\n- 09:00–24:00 | 90 | Holiday\n";
    std::fs::write(days.join("2026-11-27.md"), mine)?;
    h.pass(Duration::from_secs(600)).await;
    assert!(
        planner
            .schedule_done
            .lock()
            .map(|d| d.is_some())
            .unwrap_or(false),
        "tomorrow's call ran"
    );
    assert_eq!(std::fs::read_to_string(days.join("2026-11-27.md"))?, mine);
    h.stop().await?;
    Ok(())
}

/// A message whose reading time fell into the night, and a second one at night: the backlog
/// is read after waking with the delay at the wake-up's responsiveness, not at once.
#[tokio::test]
async fn a_reading_time_that_fell_into_the_night_is_drawn_again_at_waking() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_days(dir.path(), &["2026-11-26", "2026-11-27"]);
    let seen: Seen = Arc::default();
    let mut h = start(dir.path(), &seen, "2026-11-26T20:59:50Z");
    h.started().await;
    h.say(&alice(), "Alice", "still up?").await;
    h.pass(Duration::from_secs(3600)).await;
    h.say(&alice(), "Alice", "guess not").await;
    h.pass(Duration::from_secs(8 * 3600 + 10 * 60)).await;
    let c = calls(&seen);
    assert_eq!(c.len(), 1, "{c:?}");
    let (lo, hi) = presence::delay_range(40);
    let delay = secs_between(ts("2026-11-27T06:00:00Z"), c[0].0);
    assert!(delay >= lo && delay <= hi, "read {delay:.1} s after waking");
    h.stop().await?;
    Ok(())
}

/// A fresh start whose first planning attempt fails: the retry (the start already recorded)
/// still drops the chat's intents.
#[tokio::test]
async fn a_fresh_start_retried_still_drops_the_chats_intents() -> TestResult {
    let dir = tempfile::tempdir()?;
    write_intent(
        dir.path(),
        "event-0000000000ff",
        "Old reminder",
        "2026-12-20T10:00",
        false,
    );
    let seen: Seen = Arc::default();
    let s2 = Arc::clone(&seen);
    let mut h = Harness::start_persona_at(
        persona_with(AGENT, "# Reset Context On First Message\n\n"),
        dir.path(),
        move |_| {
            Arc::new(ScriptedPlanner::new(move |req, n| {
                if let Ok(mut s) = s2.lock() {
                    s.push((req.now, req.history.len(), req.moment.clone(), req.target));
                }
                if n == 0 {
                    return Err(personad::core::plan::PlanError::Llm(
                        personad::ports::llm::LlmError::Transient {
                            status: Some(503),
                            message: "overloaded".into(),
                            retry_after: None,
                        },
                    ));
                }
                Ok(vec![send("hello")])
            }))
        },
        config(),
        &[alice()],
        t0(),
    );
    h.started().await;
    h.say(&alice(), "Alice", "hi").await;
    h.pass(Duration::from_secs(60)).await;
    assert_eq!(calls(&seen).len(), 2, "a failed attempt and its retry");
    assert!(!intents_file(dir.path())?.contains("event-0000000000ff"));
    assert_eq!(send_times(&h).len(), 1);
    h.stop().await?;
    Ok(())
}
