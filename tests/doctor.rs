//! `personad doctor` as an operator runs it: on a fresh checkout with the sample personas it
//! prints every check and exits 0 (`--offline`); a broken persona file and a state directory
//! others can read are named with their fix and a non-zero exit; the LLM probe against a
//! local mock server (latency, a 404 naming the URL, a server clock ten minutes off); and
//! `--telegram` against the simulated Telegram. No network beyond 127.0.0.1, no sleeping.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use personad::adapters::mtproto::sim::SimServer;
use personad::adapters::store::StateDir;
use personad::ports::clock::{SharedClock, SystemClock};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `personad doctor ARGS` in the checkout with its `agents/` and `prompts/`, a state
/// directory of the test's, no unit file, and no key or setting from the environment.
fn doctor(state: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.current_dir(root())
        .arg("--state")
        .arg(state)
        .arg("doctor")
        .args(args);
    common::clear_env(&mut cmd);
    for var in [
        "OPENROUTER_API_KEY",
        "GROK_API_KEY",
        "XAI_API_KEY",
        "OLLAMA_BASE_URL",
        "DEFAULT_AGENT_LLM",
    ] {
        cmd.env_remove(var);
    }
    // A user unit is looked for here (none).
    cmd.env("XDG_CONFIG_HOME", state.join("no-config"));
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The line of the report about `check`.
fn line<'a>(report: &'a str, check: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no `{check}` line in:\n{report}"))
}

#[test]
fn a_fresh_checkout_passes_offline_with_every_check_printed() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let state = tmp.path().join("state");
    let out = doctor(&state, &["--offline"]).output()?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    for check in [
        "settings:",
        "persona Wren:",
        "persona Quill:",
        "state directory:",
        "free space:",
        "daemon:",
        "session Wren:",
        "systemd unit:",
        "llm Wren:",
        "llm media:",
        "llm probe:",
        "voice",
    ] {
        line(&report, check);
    }
    assert!(line(&report, "session Wren:").contains("personad login --agent Wren"));
    assert!(line(&report, "llm probe:").contains("--offline"));
    assert!(report.contains("0 failure(s)"), "{report}");
    assert!(!state.exists(), "doctor creates nothing");
    Ok(())
}

#[test]
fn a_broken_persona_file_is_named_with_its_line() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let agents = tmp.path().join("agents");
    std::fs::create_dir(&agents)?;
    std::fs::copy(root().join("agents/Wren.md"), agents.join("Wren.md"))?;
    std::fs::write(
        agents.join("Bad.md"),
        "# Agent Name\n\nBad\n\n# Agent Phone\n\n+15550100009\n\n# Approval\n\nsometimes\n\n# Agent Instructions\n\nhi\n",
    )?;
    let out = doctor(&tmp.path().join("state"), &["--offline"])
        .arg("--agents")
        .arg(&agents)
        .output()?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(65), "{report}");
    let bad = line(&report, "persona file:");
    assert!(
        bad.starts_with("FAIL") && bad.contains("Bad.md:11:") && bad.contains("fix:"),
        "{bad}"
    );
    Ok(())
}

#[test]
fn a_state_directory_others_can_read_fails_with_the_chmod() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let state = tmp.path().join("state");
    std::fs::create_dir(&state)?;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755))?;
    let out = doctor(&state, &["--offline"]).output()?;
    let report = text(&out);
    assert_eq!(out.status.code(), Some(74), "{report}");
    let dir = line(&report, "state directory:");
    let shown = state.display().to_string();
    assert!(
        dir.starts_with("FAIL")
            && dir.contains("0755")
            && dir.contains(&format!("chmod 700 {shown}")),
        "{dir}"
    );
    // Nothing was tightened behind the operator's back.
    assert_eq!(
        std::fs::metadata(&state)?.permissions().mode() & 0o777,
        0o755
    );
    // Private, it passes.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
    let out = doctor(&state, &["--offline"]).output()?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    Ok(())
}

/// An OpenAI-compatible server answering the probe with `response`.
async fn llm_server(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn completion() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "p"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    }))
}

/// `doctor` (online) with every persona on `openai:gpt-test` at `server`.
async fn probe_with(server: &MockServer) -> Result<(Output, String), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let mut cmd = doctor(&tmp.path().join("state"), &["--llm", "openai:gpt-test"]);
    cmd.env("OPENAI_BASE_URL", format!("{}/v1", server.uri()));
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    let report = text(&out);
    Ok((out, report))
}

#[tokio::test]
async fn the_llm_probe_reports_latency_errors_and_clock_skew() -> TestResult {
    // Answered: its latency, and a clock in step.
    let server = llm_server(completion()).await;
    let (out, report) = probe_with(&server).await?;
    let probe = line(&report, "llm probe openai:");
    assert!(
        probe.starts_with("ok") && probe.contains("answered in") && probe.contains(" ms"),
        "{report}"
    );
    assert!(
        line(&report, "clock vs openai:").starts_with("ok"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(0), "{report}");
    let asked = server.received_requests().await.unwrap_or_default();
    assert_eq!(asked.len(), 1, "one tiny request per provider");
    let body: serde_json::Value = serde_json::from_slice(&asked[0].body)?;
    assert_eq!(body["max_tokens"], 1, "{body}");

    // A 404 names the URL asked, and fails.
    let missing = llm_server(ResponseTemplate::new(404)).await;
    let (out, report) = probe_with(&missing).await?;
    let probe = line(&report, "llm probe openai:");
    let url = format!("{}/v1/chat/completions", missing.uri());
    assert!(
        probe.starts_with("FAIL") && probe.contains("404") && probe.contains(&url),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(69), "{report}");

    // A server whose clock is ten minutes ahead: a warning about the skew.
    let ahead = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
    let date = ahead.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let skewed = llm_server(completion().insert_header("Date", date.as_str())).await;
    let (out, report) = probe_with(&skewed).await?;
    let clock = line(&report, "clock vs openai:");
    assert!(
        clock.starts_with("WARN") && clock.contains("behind the server") && clock.contains("fix:"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(0), "a warning only: {report}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_connects_with_the_session_and_asks_who_it_is() -> TestResult {
    let clock: SharedClock = Arc::new(SystemClock);
    let server = SimServer::start(clock, "127.0.0.1:0".parse()?).await?;
    let me = server.sim.account("Wren");
    let tmp = tempfile::tempdir()?;
    let state_path = tmp.path().join("state");
    let state = StateDir::new(&state_path);
    personad::adapters::store::ensure_private_dir(&state_path)?;
    let session = state.session_path("Wren");
    personad::adapters::store::ensure_private_dir(session.parent().ok_or("no parent")?)?;
    personad::adapters::mtproto::sim::prepare_session(&session, "Wren", server.addr).await?;

    let mut cmd = doctor(&state_path, &["--telegram"]);
    cmd.env("TELEGRAM_API_ID", "1")
        .env("TELEGRAM_API_HASH", "sim");
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    let report = text(&out);
    let offline = line(&report, "session Wren:");
    assert!(
        offline.starts_with("ok") && offline.contains(&format!("user id {me}")),
        "{report}"
    );
    let online = line(&report, "telegram Wren:");
    assert!(
        online.starts_with("ok") && online.contains(&format!("id {me}")),
        "{report}"
    );
    assert!(
        server
            .sim
            .requests(me)
            .iter()
            .any(|r| r.starts_with("users.")),
        "{:?}",
        server.sim.requests(me)
    );
    // Ingrid has no session: not tried.
    assert!(
        line(&report, "telegram Ingrid:").starts_with("info"),
        "{report}"
    );

    // Without the application's credentials, --telegram fails saying what to set.
    let mut cmd = doctor(&state_path, &["--telegram"]);
    cmd.env_remove("TELEGRAM_API_ID");
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    let report = text(&out);
    assert!(
        line(&report, "telegram:").contains("TELEGRAM_API_ID"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(78), "{report}");
    Ok(())
}
