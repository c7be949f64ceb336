//! The `chat` playground under bad input and signals, through the binary: a line that is not
//! UTF-8, not JSON or out of range is skipped with an `error` event naming it and nothing
//! else is lost; SIGINT/SIGTERM stop it promptly with their documented exit codes, whether
//! input is still open or has ended; a transcript lost to a crash between the message and its
//! plan is planned at the next start; a corrupt transcript is quarantined, never overwritten.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Watchdog for a child that should already be done; never a timed assertion.
const WATCHDOG: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chat(state: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    cmd.current_dir(root())
        .arg("--state")
        .arg(state)
        .args(["chat", "--agent", "Wren", "--jsonl", "--planner", "echo"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn run(state: &Path, extra: &[&str], input: &[u8]) -> Result<Output, Box<dyn std::error::Error>> {
    let mut child = chat(state, extra).spawn()?;
    child.stdin.take().ok_or("no stdin")?.write_all(input)?;
    Ok(wait(child)?)
}

/// Waits for the child under the watchdog (killing it if the watchdog fires).
fn wait(child: Child) -> Result<Output, String> {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => {
            signal(pid, "KILL");
            Err("the playground did not exit".into())
        }
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn of_kind<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["event"] == kind).collect()
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_line_of_invalid_utf8_is_skipped_with_an_error_and_nothing_else_is_lost() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut input = b"{\"text\":\"one\"}\n".to_vec();
    input.extend_from_slice(b"{\"text\":\"caf\xe9\"}\n");
    input.extend_from_slice(b"not json at all\n");
    input.extend_from_slice(b"{\"text\":\"two\",\"after_ms\":100}\n");
    let out = run(dir.path(), &["--fast"], &input)?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let evs = events(&out.stdout);
    let errors: Vec<String> = of_kind(&evs, "error")
        .iter()
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{}", show(&out));
    assert!(
        errors[0].starts_with("line 2:") && errors[0].contains("UTF-8"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("line 3:") && errors[1].contains("not valid JSON"),
        "{errors:?}"
    );
    let inbound: Vec<&Value> = of_kind(&evs, "inbound");
    assert_eq!(inbound.len(), 2, "{}", show(&out));
    assert_eq!(inbound[1]["text"], "two");
    let sends = of_kind(&evs, "send");
    assert_eq!(sends.len(), 1, "{}", show(&out));
    assert_eq!(sends[0]["text"], "Wren heard: two");
    Ok(())
}

#[test]
fn out_of_range_values_are_rejected_per_line_and_time_stays_sane() -> TestResult {
    let dir = tempfile::tempdir()?;
    let input = [
        r#"{"text":"negative","after_ms":-5}"#,
        r#"{"text":"huge","after_ms":18446744073709551615}"#,
        r#"{"text":"fraction","after_ms":1.5}"#,
        r#"{"media":{"kind":"hologram"}}"#,
        r#"{"text":"fine","after_ms":100}"#,
    ]
    .join("\n");
    let out = run(dir.path(), &["--fast"], input.as_bytes())?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let evs = events(&out.stdout);
    let errors: Vec<String> = of_kind(&evs, "error")
        .iter()
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(errors.len(), 4, "{}", show(&out));
    for (i, e) in errors.iter().take(3).enumerate() {
        assert!(
            e.starts_with(&format!("line {}:", i + 1)) && e.contains("`after_ms` must be"),
            "{errors:?}"
        );
    }
    assert!(
        errors[3].starts_with("line 4:") && errors[3].contains("unknown variant `hologram`"),
        "{errors:?}"
    );
    let sends = of_kind(&evs, "send");
    assert_eq!(sends.len(), 1, "{}", show(&out));
    assert_eq!(sends[0]["text"], "Wren heard: fine");
    // The answer comes seconds after the start, not centuries.
    assert!(sends[0]["at_ms"].as_i64().unwrap_or(i64::MAX) < 60_000);
    Ok(())
}

/// What a signalled playground left behind.
struct Signalled {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Starts the playground, sends one message, keeps input open (or closes it), waits for the
/// message's `inbound` event, then sends `sig` (`count` times).
fn signal_after_first_message(
    state: &Path,
    extra: &[&str],
    keep_input_open: bool,
    sig: &str,
    count: usize,
) -> Result<Signalled, Box<dyn std::error::Error>> {
    let mut child = chat(state, extra).spawn()?;
    let pid = child.id();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(b"{\"text\":\"one\"}\n")?;
    stdin.flush()?;
    let open_input = if keep_input_open {
        Some(stdin)
    } else {
        drop(stdin);
        None
    };
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("\"inbound\"") {
                let _ = tx.send(());
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    if rx.recv_timeout(WATCHDOG).is_err() {
        signal(pid, "KILL");
        return Err("no inbound event".into());
    }
    for _ in 0..count {
        signal(pid, sig);
    }
    let out = wait(child);
    drop(open_input);
    let out = out?;
    let stdout = reader.join().unwrap_or_default();
    Ok(Signalled {
        code: out.status.code(),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn transcript_of(state: &Path) -> String {
    let dir = state.join("Wren").join("playground");
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

#[test]
fn sigterm_and_sigint_with_input_still_open_stop_promptly_with_their_codes() -> TestResult {
    for (sig, code) in [("TERM", 143), ("INT", 130)] {
        for fast in [true, false] {
            let dir = tempfile::tempdir()?;
            let extra: &[&str] = if fast { &["--fast"] } else { &[] };
            let out = signal_after_first_message(dir.path(), extra, true, sig, 1)?;
            assert_eq!(
                out.code,
                Some(code),
                "SIG{sig} fast={fast}: {}{}",
                out.stdout,
                out.stderr
            );
            assert!(out.stderr.contains("event=signal_stop"), "{}", out.stderr);
            assert!(
                transcript_of(dir.path()).contains("\"one\""),
                "the message is saved"
            );
        }
    }
    Ok(())
}

#[test]
fn sigint_after_the_end_of_input_stops_without_waiting_for_the_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    // On the real clock the echo plan needs seconds (debounce, typing): the signal comes
    // first, and the unanswered message is planned at the next start.
    let out = signal_after_first_message(dir.path(), &[], false, "INT", 1)?;
    assert_eq!(out.code, Some(130), "{}{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("\"send\""), "{}", out.stdout);
    let out = run(dir.path(), &["--fast"], b"")?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let sends = of_kind(&events(&out.stdout), "send")
        .iter()
        .map(|e| e["text"].clone())
        .collect::<Vec<_>>();
    assert_eq!(
        sends,
        vec![Value::from("Wren heard: one")],
        "{}",
        show(&out)
    );
    Ok(())
}

#[test]
fn a_second_signal_exits_at_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = signal_after_first_message(dir.path(), &[], true, "TERM", 2)?;
    assert_eq!(out.code, Some(143), "{}{}", out.stdout, out.stderr);
    Ok(())
}

fn transcript_path(state: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let dir = state.join("Wren").join("playground");
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "json") && !transcript_is_saved_messages(&path) {
            return Ok(path);
        }
    }
    Err("no transcript".into())
}

fn transcript_is_saved_messages(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains("Saved Messages"))
}

#[test]
fn a_message_left_without_a_plan_is_planned_at_the_next_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = run(dir.path(), &["--fast"], b"{\"text\":\"hi\"}\n")?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // As if the session died after the message was recorded and before its plan started:
    // the transcript holds only the inbound message, unread, and no graph exists.
    let path = transcript_path(dir.path())?;
    // Rewritten in the older whole-file form, which still loads.
    let mut log: Value = personad::adapters::memory::read_folded_json(&path)?;
    let obj = log.as_object_mut().ok_or("not an object")?;
    obj.remove("read_upto");
    if let Some(Value::Array(messages)) = obj.get_mut("messages") {
        messages.retain(|m| m["outgoing"] != Value::Bool(true));
    }
    std::fs::write(&path, serde_json::to_vec(&log)?)?;
    let graphs = dir.path().join("Wren").join("playground").join("graphs");
    if graphs.exists() {
        std::fs::remove_dir_all(&graphs)?;
    }
    // Nor was the handled mark written, which is saved only once a plan is over.
    let agent_dir = dir.path().join("Wren").join("playground").join("Wren");
    for file in ["agent-state.json", "handled.json"] {
        let marks = agent_dir.join(file);
        if marks.exists() {
            std::fs::remove_file(&marks)?;
        }
    }
    let out = run(dir.path(), &["--fast"], b"")?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let sends = of_kind(&events(&out.stdout), "send")
        .iter()
        .map(|e| e["text"].clone())
        .collect::<Vec<_>>();
    assert_eq!(sends, vec![Value::from("Wren heard: hi")], "{}", show(&out));
    // Once answered it is not planned again.
    let out = run(dir.path(), &["--fast"], b"")?;
    assert!(
        of_kind(&events(&out.stdout), "send").is_empty(),
        "{}",
        show(&out)
    );
    Ok(())
}

fn quarantined(state: &Path) -> Vec<(String, Vec<u8>)> {
    let dir = state.join("Wren").join("playground").join("quarantine");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_corrupt_transcript_is_quarantined_never_overwritten() -> TestResult {
    for corrupt in [
        &b"{\"chat\":{\"id\":1,\"kind\":\"dire"[..],
        &b"{\"chat\": \"\xff\xfe\"}"[..],
    ] {
        let dir = tempfile::tempdir()?;
        let out = run(dir.path(), &["--fast"], b"{\"text\":\"first\"}\n")?;
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let path = transcript_path(dir.path())?;
        std::fs::write(&path, corrupt)?;
        let out = run(dir.path(), &["--fast"], b"{\"text\":\"second\"}\n")?;
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("event=transcript_quarantined"), "{stderr}");
        let moved = quarantined(dir.path());
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert!(moved[0].0.starts_with("transcript--"), "{moved:?}");
        assert_eq!(
            moved[0].1, corrupt,
            "the corrupt bytes are kept as they were"
        );
        let now = std::fs::read_to_string(&path)?;
        assert!(now.contains("second") && !now.contains("first"), "{now}");
    }
    Ok(())
}

mod failing_describe {
    use serde_json::json;
    use wiremock::matchers::{method, path_regex};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    #[tokio::test]
    async fn fast_mode_with_a_failing_describe_endpoint_finishes() -> TestResult {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path_regex(r"^/v1beta/models/media-mock:generateContent$"))
            .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path_regex(r"^/v1beta/models/chat-mock:generateContent$"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": "# «send»\nnice"}]}, "finishReason": "STOP"}]
            })))
            .mount(&server)
            .await;
        let files = tempfile::tempdir()?;
        let photo = files.path().join("cat.jpg");
        std::fs::write(&photo, [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3])?;
        let state = tempfile::tempdir()?;
        let input = format!(
            "{}\n",
            json!({"media": {"kind": "photo", "path": photo}, "text": "look"})
        );
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
        common::clear_env(&mut cmd);
        cmd.current_dir(root())
            .arg("--state")
            .arg(state.path())
            .args(["chat", "--agent", "Wren", "--jsonl", "--fast"])
            .args(["--planner", "gemini", "--model", "chat-mock"])
            .args(["--media-model", "media-mock"])
            .env("GEMINI_API_KEY", "k")
            .env("GEMINI_BASE_URL", server.uri())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = tokio::task::spawn_blocking(move || -> Result<Output, String> {
            let mut child = cmd.spawn().map_err(|e| e.to_string())?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(input.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            wait(child)
        })
        .await??;
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let sends = of_kind(&events(&out.stdout), "send")
            .iter()
            .map(|e| e["text"].clone())
            .collect::<Vec<_>>();
        assert_eq!(sends, vec![Value::from("nice")], "{}", show(&out));
        let describes = server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path().contains("media-mock"))
            .count();
        assert!(describes >= 1, "the description was asked for");
        Ok(())
    }
}

#[test]
fn an_error_names_the_file_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let graphs = dir.path().join("graphs").join("Wren");
    std::fs::create_dir_all(&graphs)?;
    let file = graphs.join("5.md");
    std::fs::write(&file, b"\xff\xfe")?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    let out = cmd
        .current_dir(root())
        .arg("--state")
        .arg(dir.path())
        .args(["state", "show", "Wren", "5"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    let shown = file.display().to_string();
    assert_eq!(stderr.matches(&shown).count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("personad: ") && stderr.contains("UTF-8"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn logs_on_a_pipe_carry_no_escape_codes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let playground = dir.path().join("Wren").join("playground");
    // A directory named like a transcript, its name carrying a colour code: quarantined, and
    // the log line naming it stays inert.
    std::fs::create_dir_all(playground.join("\u{1b}[31mred.json"))?;
    let out = run(dir.path(), &["--fast"], b"{\"text\":\"hi\"}\n")?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("event=transcript_quarantined"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains("\\u{1b}[31mred.json"), "{stderr}");
    Ok(())
}

#[test]
fn a_media_path_that_is_a_device_or_fifo_is_rejected_and_the_session_goes_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let fifo = dir.path().join("pipe.jpg");
    let made = Command::new("mkfifo").arg(&fifo).status()?;
    assert!(made.success());
    let input = format!(
        "{}\n{}\n{}\n",
        serde_json::json!({"media": {"kind": "photo", "path": "/dev/zero"}}),
        serde_json::json!({"media": {"kind": "photo", "path": fifo}}),
        serde_json::json!({"text": "still here", "after_ms": 100}),
    );
    let out = run(&dir.path().join("state"), &["--fast"], input.as_bytes())?;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let evs = events(&out.stdout);
    let errors: Vec<String> = of_kind(&evs, "error")
        .iter()
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{}", show(&out));
    assert!(
        errors.iter().all(|e| e.contains("not a regular file")),
        "{errors:?}"
    );
    let sends = of_kind(&evs, "send");
    assert_eq!(sends.len(), 1, "{}", show(&out));
    assert_eq!(sends[0]["text"], "Wren heard: still here");
    Ok(())
}
