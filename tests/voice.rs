//! Personas that speak, end to end through the playground (`personad chat`) over an
//! OpenAI-compatible mock model: a persona with `# Voice` (speak: to voice notes) is offered the
//! `voice` action only for a voice note, and its answer becomes a real Ogg/Opus voice note made
//! by the local engine (espeak-ng) and encoded here, decoded back with libopus; without the
//! engine `check` says the voice cannot be made and the words go as text; a persona without
//! `# Voice` is never offered the action.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const SPEAKER: &str = "# Agent Name\nVera\n# Agent Phone\n+15550100077\n# Agent Instructions\nYou are Vera, a friendly gardener.\n# Voice\nprovider: espeak\nvoice: en\nspeak: to voice notes\n";
const QUIET: &str = "# Agent Name\nVera\n# Agent Phone\n+15550100077\n# Agent Instructions\nYou are Vera, a friendly gardener.\n";

/// A model that answers every turn with a voice note.
async fn model() -> MockServer {
    let server = MockServer::start().await;
    let answer = "# «voice»\nHello! Lovely to hear you. The roses are doing well.";
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    server
}

/// `personad chat --agent Vera --jsonl --fast --llm openai` over `persona`, on `server`.
fn chat(server: &MockServer, dir: &Path, persona: &str, extra: &[&str]) -> std::process::Command {
    let agents = dir.join("agents");
    let _ = std::fs::create_dir_all(&agents);
    let _ = std::fs::write(agents.join("Vera.md"), persona);
    let mut args = vec!["--agent", "Vera", "--jsonl", "--fast", "--llm", "openai"];
    args.extend_from_slice(extra);
    let mut cmd = common::playground(&agents, &dir.join("state"), &args);
    cmd.env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_MODEL", "local");
    cmd
}

/// The system instruction of each request the model got.
async fn systems(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .map(|b| {
            b["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Every `*.ogg` under `dir`.
fn ogg_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "ogg") {
                out.push(p);
            }
        }
    }
    out
}

fn espeak_installed() -> bool {
    personad::adapters::speech::espeak::find_program(Path::new("espeak-ng")).is_some()
}

/// A voice note gets a voice note: the model is offered `«voice»` (the persona speaks to voice
/// notes and the message is one), espeak-ng speaks the words, and the playground's `voice`
/// event names a real Ogg/Opus file: one channel, 48 kHz, as long as it says, with Telegram's
/// 63-byte waveform.
#[tokio::test]
async fn a_voice_note_is_answered_with_a_real_ogg_opus_voice_note() -> common::TestResult {
    if !espeak_installed() {
        assert!(
            std::env::var_os("PERSONAD_REQUIRE_ESPEAK").is_none(),
            "espeak-ng is missing and PERSONAD_REQUIRE_ESPEAK is set"
        );
        eprintln!("SKIPPED: espeak-ng not installed");
        return Ok(());
    }
    let server = model().await;
    let dir = tempfile::tempdir()?;
    let cmd = chat(&server, dir.path(), SPEAKER, &[]);
    let out = common::run_to_end(
        cmd,
        "{\"voice\": \"hi Vera, how is the garden?\", \"duration\": 3}\n".into(),
    )
    .await?;
    let events = common::jsonl(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let voice = events
        .iter()
        .find(|e| e["event"] == "voice")
        .ok_or_else(|| format!("no voice event: {events:?}\n{stderr}"))?;
    assert_eq!(
        voice["text"],
        json!("Hello! Lovely to hear you. The roses are doing well.")
    );
    assert!(
        events.iter().any(|e| e["event"] == "recording_voice"),
        "{events:?}"
    );
    assert!(systems(&server).await[0].contains("# «voice»"));
    // Its words are kept as its transcript, for prompts over a history read back from
    // Telegram (where our own voice note carries no text).
    let media = dir.path().join("state").join("media");
    let kept = std::fs::read_dir(&media)?
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .any(|r| r.contains("The roses are doing well") && r.contains("\"voice\""));
    assert!(kept, "no transcript record under {}", media.display());
    let files = ogg_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0])?;
    let decoded = personad::adapters::voice::decode_ogg_opus(&bytes)?;
    assert_eq!(decoded.channels, 1);
    assert_eq!(decoded.rate_hz, 48_000);
    let secs = decoded.samples.len() as f64 / 48_000.0;
    let said = voice["duration"].as_f64().unwrap_or_default();
    assert!(
        secs > 1.0 && (said - secs).abs() <= 1.0,
        "{secs} s decoded, {said} s said"
    );
    Ok(())
}

/// Without the engine (`--espeak-program` names none), `check` says the persona's voice cannot
/// be made, and the persona answers the voice note in text, the same words.
#[tokio::test]
async fn without_the_engine_check_says_so_and_the_words_go_as_text() -> common::TestResult {
    let server = model().await;
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("no-such-espeak");
    let missing = missing.to_string_lossy().into_owned();
    let cmd = chat(
        &server,
        dir.path(),
        SPEAKER,
        &["--espeak-program", &missing],
    );
    let out = common::run_to_end(
        cmd,
        "{\"voice\": \"hi Vera, how is the garden?\", \"duration\": 3}\n".into(),
    )
    .await?;
    let events = common::jsonl(&out.stdout);
    assert!(!events.iter().any(|e| e["event"] == "voice"), "{events:?}");
    assert!(
        events.iter().any(|e| e["event"] == "send"
            && e["text"] == json!("Hello! Lovely to hear you. The roses are doing well.")),
        "{events:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut check = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut check);
    let out = check
        .arg("--agents")
        .arg(dir.path().join("agents"))
        .args(["check", "--espeak-program", &missing])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("voice: speaks to voice notes, CANNOT BE MADE (")
            && stdout.contains("it answers in text")
            && stdout.contains("warning: 1 persona voice(s) cannot be made"),
        "{stdout}"
    );
    Ok(())
}

/// A persona without `# Voice` is never offered the action (the request body has no `«voice»`),
/// and one that speaks only to voice notes is not offered it for a written message either: the
/// parser then sends a `«voice»` answer's words as text.
#[tokio::test]
async fn the_action_is_offered_only_where_the_persona_speaks() -> common::TestResult {
    let server = model().await;
    let dir = tempfile::tempdir()?;
    let out = common::run_to_end(
        chat(&server, dir.path(), QUIET, &[]),
        "{\"voice\": \"hi Vera\", \"duration\": 2}\n".into(),
    )
    .await?;
    let events = common::jsonl(&out.stdout);
    assert!(!systems(&server).await[0].contains("«voice»"));
    assert!(!events.iter().any(|e| e["event"] == "voice"), "{events:?}");
    assert!(events.iter().any(|e| e["event"] == "send"), "{events:?}");
    // Speaks to voice notes; a written message is answered in writing.
    let dir = tempfile::tempdir()?;
    let out = common::run_to_end(
        chat(
            &server,
            dir.path(),
            SPEAKER,
            &["--espeak-program", "/nonexistent"],
        ),
        "{\"text\": \"hi Vera\"}\n".into(),
    )
    .await?;
    let events = common::jsonl(&out.stdout);
    assert!(!events.iter().any(|e| e["event"] == "voice"), "{events:?}");
    assert!(events.iter().any(|e| e["event"] == "send"), "{events:?}");
    Ok(())
}
