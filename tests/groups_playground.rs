//! The group pipeline in the playground binary: a 30-message conversation among three
//! people that names the persona twice plans exactly twice in strict mode, and in smart mode
//! (a classifier that answers "not addressed") plans twice with at most 6 classifier calls;
//! `decision` events are printed; `reply_to` and `@Name` mentions are understood.

mod common;

use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
    }))
}

fn not_addressed() -> Value {
    json!({"addressed": false, "confidence": 0.1, "wanna_interject": false,
        "interject": 0.0, "impulse": 0.0, "is_lightweight": false, "reason": "side talk"})
}

async fn server(classifier: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains("responseSchema"))
        .respond_with(answer(&classifier.to_string()))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(answer("# «send»\nsure thing"))
        .with_priority(5)
        .mount(&server)
        .await;
    server
}

/// 30 lines among Ana, Ben and Cleo; the persona (Wren) is named in lines 6 and 21.
fn conversation() -> String {
    let people = ["Ana", "Ben", "Cleo"];
    let mut out = String::new();
    for i in 0..30 {
        let text = match i {
            5 => "Wren, you were at the concert too".to_string(),
            20 => "I bet @Wren liked the encore".to_string(),
            _ => format!("the concert was great, moment {i}"),
        };
        let line = json!({"from": people[i % 3], "text": text, "after_ms": 4000});
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

fn agents() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Wren.md"),
        "# Agent Name\nWren\n\n# Agent Phone\n+15550100001\n\n# Typing Speed\n100000\n\n# Start Typing Delay\n0\n\n# Agent Instructions\nYou are Wren.\n",
    )
    .unwrap();
    dir
}

async fn run(mode: &str, input: String) -> (Vec<Value>, Vec<Value>) {
    run_with(mode, input, not_addressed()).await
}

async fn run_with(mode: &str, input: String, classifier: Value) -> (Vec<Value>, Vec<Value>) {
    let server = server(classifier).await;
    let agents = agents();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.arg("--agents")
        .arg(agents.path())
        .arg("--prompts")
        .arg(agents.path())
        .arg("--state")
        .arg(state.path())
        .args([
            "chat",
            "--agent",
            "Wren",
            "--group",
            "Gig",
            "--jsonl",
            "--fast",
            "--planner",
            "gemini",
            "--mode",
            mode,
        ])
        .env("GEMINI_API_KEY", "test-key")
        .env("GEMINI_BASE_URL", server.uri())
        .env_remove("GOOGLE_GEMINI_API_KEY")
        .env_remove("PERSONAD_LOG")
        .env_remove("PERSONAD_CLASSIFIER_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = common::run_to_end(cmd, input).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    (events, bodies)
}

fn is_classifier(body: &Value) -> bool {
    body["generationConfig"]["responseSchema"].is_object()
}

#[tokio::test]
async fn strict_mode_plans_exactly_for_the_two_messages_that_name_the_persona() {
    let (events, bodies) = run("strict", conversation()).await;
    let plans = bodies.iter().filter(|b| !is_classifier(b)).count();
    assert_eq!(plans, 2);
    assert_eq!(bodies.iter().filter(|b| is_classifier(b)).count(), 0);
    let sends: Vec<&Value> = events.iter().filter(|e| e["event"] == "send").collect();
    assert_eq!(sends.len(), 2);
    // Explicit answers quote their trigger.
    assert_eq!(sends[0]["reply_to"], 6);
    let decisions: Vec<&Value> = events.iter().filter(|e| e["event"] == "decision").collect();
    assert_eq!(decisions.len(), 30, "one decision per message");
    let triggered: Vec<i64> = decisions
        .iter()
        .filter(|d| d["triggered"] == true)
        .filter_map(|d| d["message_id"].as_i64())
        .collect();
    // Ids count our first answer (#7) too.
    assert_eq!(triggered, vec![6, 22]);
    assert_eq!(decisions[5]["stage"], "explicit");
    assert_eq!(decisions[5]["reason"], "name");
    assert_eq!(decisions[20]["reason"], "mention_entity");
    assert_eq!(decisions[0]["reason"], "not_explicit");
}

#[tokio::test]
async fn smart_mode_plans_twice_with_at_most_six_classifier_calls() {
    let (events, bodies) = run("smart", conversation()).await;
    let plans = bodies.iter().filter(|b| !is_classifier(b)).count();
    let calls = bodies.iter().filter(|b| is_classifier(b)).count();
    assert_eq!(plans, 2, "{events:?}");
    assert!(calls <= 6, "{calls} classifier calls");
    let scored = events
        .iter()
        .filter(|e| e["event"] == "decision" && e["stage"] == "classifier")
        .count();
    assert!(scored >= calls);
}

#[tokio::test]
async fn a_reply_to_the_persona_addresses_it_and_a_reply_to_someone_else_does_not() {
    let input = [
        json!({"from": "Ana", "text": "Wren, hello"}),
        json!({"from": "Ben", "text": "ok", "reply_to": 1, "after_ms": 90000}),
        // #2 is Wren's answer to #1.
        json!({"from": "Cleo", "text": "that is true", "reply_to": 2, "after_ms": 1000}),
    ]
    .iter()
    .map(|v| v.to_string() + "\n")
    .collect::<String>();
    let (events, bodies) = run("strict", input).await;
    let decisions: Vec<&Value> = events.iter().filter(|e| e["event"] == "decision").collect();
    let reasons: Vec<(&Value, &Value)> = decisions
        .iter()
        .map(|d| (&d["message_id"], &d["reason"]))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (&json!(1), &json!("name")),
            (&json!(3), &json!("reply_to_other")),
            (&json!(4), &json!("reply_to_us")),
        ]
    );
    assert_eq!(bodies.len(), 2);
}

#[tokio::test]
async fn the_classifier_impulse_decides_whether_the_answer_quotes_the_question() {
    let input = json!({"from": "Ana", "text": "does anyone know a quiet bar?"}).to_string() + "\n";
    for (impulse, quoted) in [(0.5, Value::Null), (0.95, json!(1))] {
        let addressed = json!({"addressed": true, "confidence": 0.9, "wanna_interject": false,
            "interject": 0.0, "impulse": impulse, "is_lightweight": false, "reason": "asks everyone"});
        let (events, bodies) = run_with("smart", input.clone(), addressed).await;
        assert_eq!(bodies.len(), 2, "one classifier call, one plan");
        let send = events.iter().find(|e| e["event"] == "send").unwrap();
        assert_eq!(send["reply_to"], quoted, "impulse {impulse}");
        let decision = events.iter().find(|e| e["event"] == "decision").unwrap();
        assert_eq!(decision["reason"], "addressed");
        assert_eq!(decision["scores"]["impulse"], impulse);
    }
}
