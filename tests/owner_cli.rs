//! The owner's tools on the command line: `check` shows what the owner set per persona
//! (approval, daily budget, send limits, defaults said as defaults); `state history` takes a
//! chat by name; `state schedule --day today|tomorrow`; `state memory --playground`;
//! `ctl forget-fact` with a short id; and `ctl say` naming what holds the answer (a pause,
//! the spending cap, the persona's sleep) instead of waiting it out.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::TestResult;
use common::daemon::*;
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn personad(agents: &Path, state: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    cmd.arg("--agents")
        .arg(agents)
        .arg("--prompts")
        .arg(agents)
        .arg("--state")
        .arg(state)
        .args(args);
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn check_shows_approval_budget_and_send_limits() -> TestResult {
    let s = Scratch::new(&[
        (
            "Ann.md",
            &persona(
                "Ann",
                "+15550100071",
                "# Approval\ngroups\n\n# Approval Timeout\n30m then send\n\n# Daily Budget\n$2\n\n# Send Limits\nper chat 6/min, gap 5s\n\n",
            ),
        ),
        ("Bo.md", &persona("Bo", "+15550100072", "")),
    ])?;
    let out = personad(
        &s.agents(),
        &s.state(),
        &["check", "--daily-budget", "1M tokens"],
    )
    .output()?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let owner: Vec<&str> = report
        .lines()
        .filter(|l| l.trim_start().starts_with("owner:"))
        .collect();
    assert_eq!(owner.len(), 2, "{report}");
    assert!(
        owner[0].contains("approval groups,")
            && owner[0].contains("a draft waits 30m, then it is sent")
            && owner[0].contains("daily budget: $2.00 a day")
            && owner[0].contains("--daily-budget: 1M tokens")
            && owner[0].contains("per chat 6/min,")
            && owner[0].contains("per account 20/min (run's default)")
            && owner[0].ends_with("gap 5s"),
        "{}",
        owner[0]
    );
    assert!(
        owner[1].contains("approval off (default)")
            && owner[1].contains("a draft waits 2h (default), then it is dropped")
            && owner[1].contains("none of its own (default)")
            && owner[1].contains("per chat 10/min (run's default)")
            && owner[1].contains("gap 3s (run's default)"),
        "{}",
        owner[1]
    );
    Ok(())
}

/// The playground records a conversation with Ola; `state history` finds it by name, and
/// `state memory --playground` reads the playground's facts (not the daemon's).
#[tokio::test]
async fn state_history_takes_a_name_and_memory_reads_the_playground() -> TestResult {
    let s = Scratch::new(&[("Ann.md", &persona("Ann", "+15550100071", ""))])?;
    let cmd = common::playground(
        &s.agents(),
        &s.state(),
        &[
            "--agent",
            "Ann",
            "--user",
            "Ola",
            "--jsonl",
            "--fast",
            "--planner",
            "echo",
        ],
    );
    let input = format!("{}\n", json!({"text": "hello there"}));
    let out = common::run_to_end(cmd, input).await?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let history = |chat: &str| {
        personad(
            &s.agents(),
            &s.state(),
            &["state", "history", "Ann", chat, "--playground"],
        )
        .output()
    };
    let by_name = history("ola")?;
    let shown = text(&by_name);
    assert_eq!(by_name.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("(Ola)") && shown.contains("hello there"),
        "{shown}"
    );
    let missing = history("Nobody")?;
    assert_eq!(missing.status.code(), Some(66), "{}", text(&missing));
    assert!(
        text(&missing).contains("(Ola)"),
        "the known chats are listed: {}",
        text(&missing)
    );

    // A fact in the playground's memory, one in the daemon's.
    let people = |root: &Path| root.join("Ann/memory/people");
    let playground = s.state().join("Ann/playground");
    std::fs::create_dir_all(people(&playground))?;
    std::fs::write(
        people(&playground).join("7.md"),
        "# Ola\n\n## fact-abc123\n\nOla likes tea.\n\n",
    )?;
    std::fs::create_dir_all(people(&s.state()))?;
    std::fs::write(
        people(&s.state()).join("7.md"),
        "# Ola\n\n## fact-def456\n\nOla works nights.\n\n",
    )?;
    let memory = |extra: &[&str]| {
        let mut args = vec!["state", "memory", "Ann"];
        args.extend_from_slice(extra);
        personad(&s.agents(), &s.state(), &args).output()
    };
    let pg = text(&memory(&["--playground"])?);
    assert!(
        pg.contains("likes tea") && !pg.contains("works nights"),
        "{pg}"
    );
    let daemon = text(&memory(&[])?);
    assert!(
        daemon.contains("works nights") && !daemon.contains("likes tea"),
        "{daemon}"
    );
    Ok(())
}

#[test]
fn state_schedule_takes_today_and_tomorrow() -> TestResult {
    let s = Scratch::new(&[(
        "Ann.md",
        &persona(
            "Ann",
            "+15550100071",
            "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nUp early.\n\n",
        ),
    )])?;
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::get("Europe/Berlin")?)
        .date();
    for (word, day) in [("today", today), ("tomorrow", today.tomorrow()?)] {
        let out = personad(
            &s.agents(),
            &s.state(),
            &["state", "schedule", "Ann", "--day", word],
        )
        .output()?;
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(0), "{word}: {shown}");
        assert!(shown.contains(&day.to_string()), "{word}: {shown}");
    }
    let out = personad(
        &s.agents(),
        &s.state(),
        &["state", "schedule", "Ann", "--day", "someday"],
    )
    .output()?;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("today or tomorrow"), "{}", text(&out));
    Ok(())
}

/// The daemon on the in-memory Telegram with `agents`, for `f`; stopped after.
fn with_daemon(
    s: &Scratch,
    extra: &[&str],
    env: &[(&str, &str)],
    f: impl FnOnce(&Scratch) -> Result<(), String>,
) -> Result<(), String> {
    let child = start(s, extra, env).map_err(|e| e.to_string())?;
    let mut reaper = Reaper(Some(child));
    wait_up(s)?;
    let result = f(s);
    stop_daemon(&mut reaper)?;
    result
}

fn ctl_text(s: &Scratch, args: &[&str]) -> Result<String, String> {
    ctl(s, args).map(|o| text(&o)).map_err(|e| e.to_string())
}

#[test]
fn forget_fact_takes_a_unique_short_id() -> TestResult {
    let s = Scratch::new(&[("Ann.md", &persona("Ann", "+15550100071", ""))])?;
    let people = s.state().join("Ann/memory/people");
    std::fs::create_dir_all(&people)?;
    std::fs::write(
        people.join("7.md"),
        "# Ola\n\n## fact-abc123\n\nOla likes tea.\n\n## fact-abd999\n\nOla has a cat.\n\n## fact-777777\n\nOla sings.\n\n",
    )?;
    with_daemon(&s, &["--planner", "echo"], &[], |s| {
        let many = ctl_text(s, &["forget-fact", "--agent", "Ann", "fact-ab"])?;
        if !(many.contains("several facts")
            && many.contains("[fact-abc123]")
            && many.contains("[fact-abd999]"))
        {
            return Err(format!("an ambiguous id: {many}"));
        }
        let one = ctl_text(s, &["forget-fact", "--agent", "Ann", "7777"])?;
        if !one.contains("forgot [fact-777777]") {
            return Err(format!("a short id: {one}"));
        }
        let full = ctl_text(s, &["forget-fact", "--agent", "Ann", "fact-abc123"])?;
        if !full.contains("forgot [fact-abc123]") {
            return Err(format!("a full id: {full}"));
        }
        Ok(())
    })?;
    let left = std::fs::read_to_string(people.join("7.md"))?;
    assert!(
        left.contains("fact-abd999")
            && !left.contains("fact-777777")
            && !left.contains("fact-abc123"),
        "{left}"
    );
    Ok(())
}

#[test]
fn ctl_say_names_a_pause_that_holds_the_answer() -> TestResult {
    let s = Scratch::new(&[("Ann.md", &persona("Ann", "+15550100071", ""))])?;
    with_daemon(&s, &["--planner", "echo"], &[], |s| {
        ctl_text(s, &["pause", "--agent", "Ann"])?;
        let said = ctl_text(
            s,
            &[
                "say", "--agent", "Ann", "--wait", "20", "--from", "Bob", "hi",
            ],
        )?;
        if !said.contains("no answer: Ann is paused in every chat until resumed")
            || !said.contains("ctl resume --agent Ann")
        {
            return Err(format!("paused: {said}"));
        }
        Ok(())
    })?;
    Ok(())
}

/// A persona whose zone puts it at about 03:00 now: asleep in the fallback day (until 07:00).
fn night_zone() -> String {
    let hour = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .hour();
    let mut ahead = (3 - i32::from(hour)).rem_euclid(24);
    if ahead > 14 {
        ahead -= 24;
    }
    // `Etc/GMT-N` is N hours ahead of UTC.
    match ahead {
        0 => "Etc/GMT".to_string(),
        a if a > 0 => format!("Etc/GMT-{a}"),
        a => format!("Etc/GMT+{}", -a),
    }
}

#[test]
fn ctl_say_names_the_personas_sleep() -> TestResult {
    let extra = format!(
        "# Agent Timezone\n{}\n\n# Daily Schedule\nAsleep at night.\n\n",
        night_zone()
    );
    let s = Scratch::new(&[("Ann.md", &persona("Ann", "+15550100071", &extra))])?;
    with_daemon(&s, &["--planner", "echo"], &[], |s| {
        let said = ctl_text(
            s,
            &[
                "say", "--agent", "Ann", "--wait", "20", "--from", "Bob", "hi",
            ],
        )?;
        if !said.contains("no answer: Ann is asleep per its schedule") {
            return Err(format!("asleep: {said}"));
        }
        Ok(())
    })?;
    Ok(())
}

/// A persona already at its cap before the message: `ctl say` says so at once, instead of
/// waiting out its time and calling the held plan "still planned".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_say_names_a_cap_reached_before_the_message() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "# «send»\nHi!"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 400, "candidatesTokenCount": 50, "totalTokenCount": 450}
        })))
        .mount(&server)
        .await;
    let uri = server.uri();
    let s = Scratch::new(&[(
        "Ann.md",
        &persona("Ann", "+15550100071", "# Daily Budget\n300 tokens\n\n"),
    )])?;
    tokio::task::spawn_blocking(move || {
        let env = [("GEMINI_API_KEY", "k"), ("GEMINI_BASE_URL", uri.as_str())];
        with_daemon(&s, &["--planner", "gemini"], &env, |s| {
            let first = ctl_text(
                s,
                &[
                    "say", "--agent", "Ann", "--wait", "20", "--from", "Alice", "one",
                ],
            )?;
            if !first.contains("Ann: Hi!") {
                return Err(format!("the first is answered: {first}"));
            }
            poll(Duration::from_secs(10), || {
                ctl_text(s, &["status"])
                    .ok()
                    .filter(|t| t.contains("reached"))
            })
            .ok_or("the cap was never reached")?;
            let started = std::time::Instant::now();
            let held = ctl_text(
                s,
                &[
                    "say", "--agent", "Ann", "--wait", "20", "--from", "Bob", "two",
                ],
            )?;
            if !held.contains("no answer: Ann is at its daily spending cap (300 tokens a day)") {
                return Err(format!("held: {held}"));
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("said only after {:?}", started.elapsed()));
            }
            Ok(())
        })
    })
    .await??;
    Ok(())
}
