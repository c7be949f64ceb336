//! Presence in the playground binary (`chat --jsonl --fast --start-at`) against a mock Gemini:
//! 36 virtual hours with a scripted day, a message at 03:00 answered only after the wake-up, a
//! message at noon read within the documented delay at responsiveness 50, the next day's
//! schedule written by a model call at 18:00 and used the next day; and a playground killed
//! with SIGKILL at night answers the backlog once after waking when started again.

mod common;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use common::TestResult;

const PERSONA: &str = "# Agent Name\nPia\n\n# Agent Phone\n+15550100077\n\n# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nAt the bakery on weekdays from 8; lunch at noon; asleep from 22:30 to 7.\n\n# Agent Instructions\nYou are Pia.\n";

/// The scripted first day (Thursday 2026-11-26, Berlin = UTC+1).
const DAY_26: &str = "<!-- schedule: source=edited -->\n\n\
- 00:00–07:00 | 0 | Sleep |\n\
- 07:00–08:00 | 40 | Breakfast |\n\
- 08:00–12:00 | 20 | Bakery shift |\n\
- 12:00–13:00 | 50 | Lunch |\n\
- 13:00–22:30 | 80 | Home |\n\
- 22:30–24:00 | 0 | Sleep |\n";

/// What the mock model writes for Friday.
const DAY_27: &str = "- 00:00–06:30 | 0 | Sleep | dreaming of bread\n\
- 06:30–12:00 | 60 | Morning swim and errands |\n\
- 12:00–16:00 | 70 | Farmers market | selling rolls\n\
- 16:00–22:00 | 80 | Evening at home |\n\
- 22:00–24:00 | 0 | Sleep |\n";

const SCHEDULER: &str = "You plan one day of your own life";

fn is_schedule_call(r: &Request) -> bool {
    String::from_utf8_lossy(&r.body).contains(SCHEDULER)
}

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
    }))
}

struct Model;

impl wiremock::Respond for Model {
    fn respond(&self, r: &Request) -> ResponseTemplate {
        if is_schedule_call(r) {
            answer(DAY_27)
        } else {
            answer("# «send»\nHi!")
        }
    }
}

async fn model() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Model)
        .mount(&server)
        .await;
    server
}

fn agents() -> Result<tempfile::TempDir, std::io::Error> {
    let agents = tempfile::tempdir()?;
    std::fs::write(agents.path().join("Pia.md"), PERSONA)?;
    Ok(agents)
}

fn write_day(state: &std::path::Path, date: &str, text: &str) -> Result<(), std::io::Error> {
    let dir = state.join("Pia/playground/Pia/schedule");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{date}.md")), text)
}

fn command(
    server: &MockServer,
    agents: &std::path::Path,
    state: &std::path::Path,
    start_at: &str,
) -> std::process::Command {
    let mut cmd = common::playground(
        agents,
        state,
        &["--agent", "Pia", "--user", "Ola", "--jsonl", "--fast"],
    );
    cmd.args(["--start-at", start_at, "--planner", "gemini"])
        .env("GEMINI_API_KEY", "k")
        .env("GEMINI_BASE_URL", server.uri());
    cmd
}

fn events(out: &[u8]) -> Vec<Value> {
    common::jsonl(out)
}

fn at(e: &Value) -> i64 {
    e["at_ms"].as_i64().unwrap_or(-1)
}

fn first(events: &[Value], kind: &str, after_ms: i64) -> Option<Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind && at(e) >= after_ms)
        .min_by_key(|e| at(e))
        .cloned()
}

const HOUR: i64 = 3_600_000;

/// 36 virtual hours from 02:00 local on Thursday: the 03:00 message is read and answered
/// only after 07:00; the 12:10 message is read 47–78 s later (responsiveness 50); at 18:00
/// Friday's schedule is asked for (once) and Friday's activities follow it.
#[tokio::test]
async fn thirty_six_hours_with_a_scripted_day() -> TestResult {
    let server = model().await;
    let agents = agents()?;
    let state = tempfile::tempdir()?;
    write_day(state.path(), "2026-11-26", DAY_26)?;
    let input = [
        json!({"text": "are you awake?", "after_ms": HOUR}),
        json!({"text": "lunch together?", "after_ms": 9 * HOUR + 600_000}),
        json!({"text": "market tomorrow?", "after_ms": 24 * HOUR + 50 * 60_000}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let cmd = command(&server, agents.path(), state.path(), "2026-11-26T01:00:00Z");
    let out = common::run_to_end(cmd, input).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ev = events(&out.stdout);
    let show = || {
        ev.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    // 03:00: unread until 07:00 (5 h after the start).
    assert_eq!(
        first(&ev, "asleep", 0).map(|e| at(&e)),
        Some(0),
        "{}",
        show()
    );
    let woke = first(&ev, "woke", 0).ok_or_else(show)?;
    assert_eq!(at(&woke), 5 * HOUR, "{}", show());
    let read = first(&ev, "read", 0).ok_or_else(show)?;
    assert!(at(&read) >= 5 * HOUR, "read at night: {}", show());
    let reply = first(&ev, "send", 0).ok_or_else(show)?;
    assert!(
        at(&reply) > at(&read) && at(&reply) < 5 * HOUR + 10 * 60_000,
        "{}",
        show()
    );
    // 12:10: read within the documented range at responsiveness 50.
    let lunch_in = 10 * HOUR + 600_000;
    let read = first(&ev, "read", lunch_in).ok_or_else(show)?;
    let (lo, hi) = personad::core::presence::delay_range(50);
    let delay = (at(&read) - lunch_in) as f64 / 1000.0;
    assert!(
        delay >= lo && delay <= hi,
        "read after {delay} s: {}",
        show()
    );
    assert!(first(&ev, "send", at(&read)).is_some(), "{}", show());
    // 18:00: one call for Friday, whose day is then lived.
    let requests = server.received_requests().await.unwrap_or_default();
    let schedule_calls: Vec<&Request> = requests.iter().filter(|r| is_schedule_call(r)).collect();
    assert_eq!(schedule_calls.len(), 1, "{}", show());
    let body = String::from_utf8_lossy(&schedule_calls[0].body);
    assert!(
        body.contains("Friday 2026-11-27") && body.contains("Bakery shift"),
        "{body}"
    );
    let market = ev
        .iter()
        .find(|e| e["event"] == "activity" && e["name"] == "Farmers market")
        .ok_or_else(show)?;
    assert_eq!(market["fallback"], false);
    assert_eq!(at(market), 34 * HOUR, "{}", show());
    let friday = std::fs::read_to_string(
        state
            .path()
            .join("Pia/playground/Pia/schedule/2026-11-27.md"),
    )?;
    assert!(
        friday.contains("source=generated") && friday.contains("Farmers market"),
        "{friday}"
    );
    // The Friday 13:00 message is answered at the market's responsiveness.
    let last_in = 35 * HOUR;
    let read = first(&ev, "read", last_in).ok_or_else(show)?;
    let (lo, hi) = personad::core::presence::delay_range(70);
    let delay = (at(&read) - last_in) as f64 / 1000.0;
    assert!(
        delay >= lo && delay <= hi,
        "read after {delay} s: {}",
        show()
    );
    Ok(())
}

/// SIGKILL at 04:00 with two messages unread; started again at 04:30 with no input, the
/// playground answers once after 07:00 and a third start sends nothing more.
#[tokio::test]
async fn a_playground_killed_at_night_answers_once_after_waking() -> TestResult {
    let server = model().await;
    let agents = agents()?;
    let state = tempfile::tempdir()?;
    write_day(state.path(), "2026-11-26", DAY_26)?;
    let cmd = command(&server, agents.path(), state.path(), "2026-11-26T01:00:00Z");
    let graph_dir = state.path().join("Pia/playground/graphs");
    tokio::task::spawn_blocking(move || -> Result<(), String> {
        use std::io::{BufRead, BufReader, Write};
        let mut cmd = cmd;
        let mut child = cmd.spawn().map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take().ok_or("stdin")?;
        let stdout = child.stdout.take().ok_or("stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        for (text, after) in [("are you up?", HOUR), ("call me when you wake", 1_200_000)] {
            let line = json!({"text": text, "after_ms": after}).to_string() + "\n";
            stdin
                .write_all(line.as_bytes())
                .map_err(|e| e.to_string())?;
            stdin.flush().map_err(|e| e.to_string())?;
            // Wait until the playground has taken the message in.
            loop {
                let l = lines
                    .next()
                    .ok_or("the playground ended early")?
                    .map_err(|e| e.to_string())?;
                let v: Value = serde_json::from_str(&l).unwrap_or_default();
                if v["event"] == "inbound" && v["text"] == text {
                    break;
                }
            }
        }
        // The plan waiting for the morning is on disk (written right after the message).
        for _ in 0..500 {
            if common::files_below(&graph_dir)
                .iter()
                .any(|f| f.ends_with(".md"))
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().map_err(|e| e.to_string())?; // SIGKILL at night
        let _ = child.wait();
        Ok(())
    })
    .await??;
    assert!(
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .all(is_schedule_call),
        "nothing planned at night"
    );
    let cmd = command(&server, agents.path(), state.path(), "2026-11-26T03:30:00Z");
    let out = common::run_to_end(cmd, String::new()).await?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&out.stdout);
    let sends: Vec<&Value> = ev.iter().filter(|e| e["event"] == "send").collect();
    assert_eq!(sends.len(), 1, "answered once: {ev:?}");
    // 07:00 local is 2.5 h after this start.
    assert!(at(sends[0]) >= 5 * HOUR / 2, "{ev:?}");
    let plans = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| !is_schedule_call(r))
        .count();
    assert_eq!(plans, 1, "one plan for the backlog");
    let body = server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .find(|r| !is_schedule_call(r))
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .unwrap_or_default();
    assert!(body.contains("are you up?") && body.contains("call me when you wake"));
    let cmd = command(&server, agents.path(), state.path(), "2026-11-26T07:00:00Z");
    let out = common::run_to_end(cmd, String::new()).await?;
    assert!(
        events(&out.stdout).iter().all(|e| e["event"] != "send"),
        "nothing sent twice"
    );
    Ok(())
}

/// `personad state schedule` reads the files: a day from its file with its origin, a broken
/// day with its problem's file and line (and the fallback shown instead), the intents.
#[test]
fn state_schedule_shows_a_day_its_origin_and_problems() -> TestResult {
    let agents = agents()?;
    let state = tempfile::tempdir()?;
    let dir = state.path().join("Pia/schedule");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("2026-11-26.md"), DAY_26)?;
    std::fs::write(
        dir.join("2026-11-27.md"),
        "- 00:00–07:00 | 0 | Sleep\n- 06:00–09:00 | 140 | Breakfast\n",
    )?;
    let run = |day: &str| -> Result<String, Box<dyn std::error::Error>> {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
        common::clear_env(&mut cmd);
        let out = cmd
            .arg("--agents")
            .arg(agents.path())
            .arg("--prompts")
            .arg(agents.path())
            .arg("--state")
            .arg(state.path())
            .args(["state", "schedule", "Pia", "--day", day])
            .output()?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let good = run("2026-11-26")?;
    assert!(
        good.contains("Pia, Thursday 2026-11-26 (Europe/Berlin), from its file (edited by hand):"),
        "{good}"
    );
    assert!(good.contains("12:00–13:00  50  Lunch"), "{good}");
    assert!(good.contains("No scheduled intents."), "{good}");
    let bad = run("2026-11-27")?;
    assert!(
        bad.contains("2026-11-27.md:2:"),
        "the problem's line: {bad}"
    );
    assert!(
        bad.contains("the fallback the runtime uses"),
        "the fallback is shown: {bad}"
    );
    assert!(
        bad.contains("Bakery shift"),
        "a copy of the day before: {bad}"
    );
    Ok(())
}
