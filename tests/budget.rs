//! Spending caps in the playground binary (`chat --jsonl --fast --start-at`) against a mock
//! Gemini that reports 450 tokens per request: with `# Daily Budget: 1000 tokens`, the second
//! request passes 80% (the owner is told once), the third reaches the cap (told once; no
//! further request that day, the next message stays unread), and planning resumes at the
//! next UTC day.

mod common;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use common::TestResult;

const PERSONA: &str = "# Agent Name\nBea\n\n# Agent Phone\n+15550100078\n\n# Daily Budget\n1000 tokens\n\n# Agent Instructions\nYou are Bea.\n";

const HOUR: i64 = 3_600_000;
const MINUTE: i64 = 60_000;

async fn model() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "# «send»\nHi!"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 400, "candidatesTokenCount": 50, "totalTokenCount": 450}
        })))
        .mount(&server)
        .await;
    server
}

fn at(e: &Value) -> i64 {
    e["at_ms"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn a_daily_cap_stops_planning_until_the_next_day_and_tells_the_owner_once() -> TestResult {
    let server = model().await;
    let agents = tempfile::tempdir()?;
    std::fs::write(agents.path().join("Bea.md"), PERSONA)?;
    let state = tempfile::tempdir()?;
    // 20:00 UTC: the day's cap lifts at midnight, 4 hours in.
    let input = [
        json!({"text": "one", "after_ms": HOUR}),
        json!({"text": "two", "after_ms": 10 * MINUTE}),
        json!({"text": "three", "after_ms": 10 * MINUTE}),
        json!({"text": "four", "after_ms": 10 * MINUTE}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let mut cmd = common::playground(
        agents.path(),
        state.path(),
        &["--agent", "Bea", "--user", "Ola", "--jsonl", "--fast"],
    );
    cmd.args(["--start-at", "2026-11-26T20:00:00Z", "--planner", "gemini"])
        .env("GEMINI_API_KEY", "k")
        .env("GEMINI_BASE_URL", server.uri());
    let out = common::run_to_end(cmd, input).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ev = common::jsonl(&out.stdout);
    let show = || {
        ev.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let named = |name: &str| ev.iter().filter(|e| e["event"] == name).collect::<Vec<_>>();
    // Four requests in all: three that day, the fourth after midnight.
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        4,
        "{}",
        show()
    );
    let warned = named("budget_warning");
    let reached = named("budget_reached");
    assert_eq!((warned.len(), reached.len()), (1, 1), "{}", show());
    assert!(at(warned[0]) < at(reached[0]), "{}", show());
    assert!(at(reached[0]) < 2 * HOUR, "{}", show());
    // The owner got one notice of each, in Saved Messages.
    let notices: Vec<String> = named("send")
        .iter()
        .filter(|e| e["to_owner"] == true)
        .filter_map(|e| e["text"].as_str())
        .filter(|t| t.starts_with("personad:"))
        .map(str::to_string)
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].contains("80%") && notices[1].contains("reached its daily LLM budget"));
    // "four" stayed unread until the day changed, then was answered.
    let reads: Vec<i64> = named("read").iter().map(|e| at(e)).collect();
    assert_eq!(reads.len(), 4, "{}", show());
    assert!(reads[3] >= 4 * HOUR, "read before midnight: {}", show());
    let answers = named("send").iter().filter(|e| e["text"] == "Hi!").count();
    assert_eq!(answers, 4, "{}", show());
    Ok(())
}

/// The daemon (`run --telegram memory` against the mock Gemini): a persona's reached cap holds
/// its planning (the next message gets no answer and no request), `/status` says so, and the
/// owner's `ctl resume` lifts it: the waiting message is answered.
///
/// The hold is observed past the debounce on the daemon's own clock, not after a wall-clock
/// wait: Bob writes to Tess (capped), then to Uma (no cap, same daemon). Uma's plan is due
/// after Tess's, so once Uma has answered, the runtime has been past Tess's debounce; her plan
/// for Bob must still be pending (without the hold it would be running or done by then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_holds_a_reached_cap_until_the_owner_resumes() -> TestResult {
    use common::daemon::*;
    use std::time::Duration;
    let server = model().await;
    let uri = server.uri();
    let tess = persona("Tess", "+15550100042", "# Daily Budget\n800 tokens\n\n");
    let uma = persona("Uma", "+15550100043", "");
    let s = Scratch::new(&[("Tess.md", &tess), ("Uma.md", &uma)])?;
    let status = tokio::task::spawn_blocking(move || -> Result<String, String> {
        let env = [("GEMINI_API_KEY", "k"), ("GEMINI_BASE_URL", uri.as_str())];
        let child = start(&s, &["--planner", "gemini"], &env).map_err(|e| e.to_string())?;
        let mut reaper = Reaper(Some(child));
        wait_up(&s)?;
        let say = |agent: &str, who: &str, text: &str| {
            ctl(&s, &["say", "--agent", agent, "--from", who, text]).map_err(|e| e.to_string())
        };
        let answered = |agent: &str, who: &str, n: usize| {
            poll(Duration::from_secs(15), || {
                (texts(&s, agent, who).iter().filter(|t| *t == "Hi!").count() >= n).then_some(())
            })
            .ok_or(format!(
                "{who} got no answer #{n} from {agent}; log:\n{}",
                s.log_text()
            ))
        };
        say("Tess", "Alice", "one")?;
        answered("Tess", "Alice", 1)?;
        say("Tess", "Alice", "two")?;
        answered("Tess", "Alice", 2)?;
        // 900 tokens of 800: reached. Bob waits.
        let status = poll(Duration::from_secs(10), || {
            let out = stdout(&ctl(&s, &["status"]).ok()?);
            out.contains("reached").then_some(out)
        })
        .ok_or("status never said the cap was reached")?;
        say("Tess", "Bob", "hello?")?;
        say("Uma", "Bob", "hello?")?;
        answered("Uma", "Bob", 1)?;
        // Uma's plan was due after Tess's and has run: Tess's is past its debounce, held.
        let plans = stdout(
            &ctl(&s, &["plans", "--agent", "Tess", "--chat", "Bob"]).map_err(|e| e.to_string())?,
        );
        assert!(
            plans.contains("received pending"),
            "Tess's plan for Bob is not held at the cap: {plans}"
        );
        assert!(texts(&s, "Tess", "Bob").iter().all(|t| t != "Hi!"));
        let before = s.log_text().matches("\"event\":\"budget_reached\"").count();
        let out = stdout(&ctl(&s, &["resume", "--agent", "Tess"]).map_err(|e| e.to_string())?);
        assert!(out.contains("resumed"), "{out}");
        answered("Tess", "Bob", 1)?;
        let owner = texts(&s, "Tess", "Saved Messages");
        stop_daemon(&mut reaper)?;
        assert_eq!(before, 1, "one budget_reached line");
        assert_eq!(
            owner
                .iter()
                .filter(|t| t.contains("reached its daily LLM budget"))
                .count(),
            1,
            "{owner:?}"
        );
        Ok(status)
    })
    .await??;
    assert!(status.contains("budget: 800 tokens a day"), "{status}");
    // Alice twice, Uma's Bob once, Tess's Bob once after the lift: nothing was asked for
    // Tess while the cap held.
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        4
    );
    Ok(())
}

/// The group classifier's calls are metered for the agent whose gate makes them (kind
/// `classify` in `state usage`) and count toward its daily cap: in a talkative group where
/// the classifier never wants to answer, so no plan is ever asked for, its spend alone
/// (450 tokens a call) reaches `# Daily Budget: 1000 tokens` at the third call, and the
/// later messages wait for the next UTC day, when one call classifies them together.
/// (Without the classifier's usage scope its calls are counted nowhere, no cap is reached
/// and every message is classified at once.)
#[tokio::test]
async fn the_classifiers_spend_alone_reaches_the_cap_and_shows_as_classify() -> TestResult {
    use wiremock::matchers::body_string_contains;
    let server = MockServer::start().await;
    let quiet = json!({"addressed": false, "confidence": 0.1, "wanna_interject": false,
        "interject": 0.0, "impulse": 0.0, "is_lightweight": false, "reason": "side talk"});
    Mock::given(method("POST"))
        .and(body_string_contains("responseSchema"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": quiet.to_string()}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 400, "candidatesTokenCount": 50, "totalTokenCount": 450}
        })))
        .mount(&server)
        .await;
    let agents = tempfile::tempdir()?;
    std::fs::write(agents.path().join("Bea.md"), PERSONA)?;
    let state = tempfile::tempdir()?;
    // Eight remarks a virtual minute apart, none naming Bea: each is a classifier call of
    // its own in talkative mode.
    let input = (0..8)
        .map(|i| {
            let from = ["Ana", "Ben"][i % 2];
            let line = json!({"from": from, "text": format!("the game was wild, part {i}"), "after_ms": MINUTE});
            format!("{line}\n")
        })
        .collect::<String>();
    let mut cmd = common::playground(
        agents.path(),
        state.path(),
        &["--agent", "Bea", "--group", "Fans", "--jsonl", "--fast"],
    );
    cmd.args(["--start-at", "2026-11-26T10:00:00Z", "--planner", "gemini"])
        .args(["--mode", "talkative"])
        .env("GEMINI_API_KEY", "k")
        .env("GEMINI_BASE_URL", server.uri());
    let out = common::run_to_end(cmd, input).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ev = common::jsonl(&out.stdout);
    let bodies = server.received_requests().await.unwrap_or_default();
    assert!(
        bodies
            .iter()
            .all(|r| String::from_utf8_lossy(&r.body).contains("responseSchema")),
        "only classifier calls"
    );
    let show = ev
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    // 450, 900 (80%), 1350 (reached): held after the third call until midnight (14 h in),
    // then one call for the waiting batch.
    let midnight = 14 * HOUR;
    let classified: Vec<i64> = ev
        .iter()
        .filter(|e| e["event"] == "decision" && e["scores"].is_object())
        .map(at)
        .collect();
    let before: Vec<&i64> = classified.iter().filter(|t| **t < midnight).collect();
    assert_eq!(before.len(), 3, "classifier calls past the cap: {show}");
    assert_eq!(bodies.len(), 4, "{show}");
    assert!(classified.iter().any(|t| *t >= midnight), "{show}");
    let reached = ev.iter().filter(|e| e["event"] == "budget_reached").count();
    assert_eq!(reached, 1, "{show}");
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_personad"))
        .arg("--state")
        .arg(state.path())
        .args(["state", "usage", "--agent", "Bea"])
        .env_remove("PERSONAD_PRICES")
        .output()?;
    let shown = String::from_utf8_lossy(&shown.stdout);
    let rows: Vec<Vec<&str>> = shown
        .lines()
        .filter(|l| l.starts_with("Bea"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{shown}");
    assert!(rows.iter().all(|r| r[2] == "classify"), "{shown}");
    assert_eq!(rows[0][3], "2026-11-26", "{shown}");
    assert_eq!(&rows[0][4..9], ["3", "0", "1200", "0", "150"], "{shown}");
    assert_eq!(&rows[1][4..9], ["1", "0", "400", "0", "50"], "{shown}");
    Ok(())
}
