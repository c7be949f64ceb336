//! Nothing ends or is skipped silently by accident: output into a closed pipe ends the
//! command quietly (exit 141, no panic, no message), a message that arrives while its chat is
//! paused is planned on resume, and a chat whose transcript was quarantined is answered again
//! (its new message ids never fall under the chat's handled mark). Each runs the real binary
//! (`personad run --telegram memory`, `ctl`, `state`, `check`).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::daemon::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs `personad ARGS` with stdout a pipe whose read end is already closed.
fn into_closed_pipe(args: &[&std::ffi::OsStr]) -> Result<Output, std::io::Error> {
    let (reader, writer) = std::io::pipe()?;
    drop(reader);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    let child = cmd.spawn()?;
    // The command's own copy of the write end is the only one left.
    drop(cmd);
    child.wait_with_output()
}

/// A closed pipe ends the command with 141 (128 + SIGPIPE) and nothing on stderr.
fn assert_quiet_end(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert!(
        !stderr.contains("personad:"),
        "{what} printed an error: {stderr}"
    );
    assert_eq!(out.status.code(), Some(141), "{what}: {stderr}");
}

/// `personad ctl status | head -1` against a running daemon, and `state list` / `check`
/// into a closed pipe: no panic, no message, exit 141.
#[test]
fn writing_into_a_closed_pipe_ends_quietly_with_status_141() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    let state = s.state();
    let agents = s.agents();
    let ctl_status = into_closed_pipe(&[
        "--state".as_ref(),
        state.as_os_str(),
        "ctl".as_ref(),
        "status".as_ref(),
    ])?;
    assert_quiet_end("ctl status", &ctl_status);
    stop_daemon(&mut reaper)?;
    let state_list = into_closed_pipe(&[
        "--state".as_ref(),
        state.as_os_str(),
        "state".as_ref(),
        "list".as_ref(),
    ])?;
    assert_quiet_end("state list", &state_list);
    let check = into_closed_pipe(&["--agents".as_ref(), agents.as_os_str(), "check".as_ref()])?;
    assert_quiet_end("check", &check);
    Ok(())
}

/// The chats of `held_message_planned` log lines (the resume planned what came in while the
/// chat was paused).
fn held_planned(s: &Scratch) -> Vec<i64> {
    s.log_text()
        .lines()
        .filter(|l| l.contains("held_message_planned"))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["fields"]["chat"].as_i64().or(v["chat"].as_i64()))
        .collect()
}

/// Waits until Tess answered `text` in `title`'s chat.
fn answered(s: &Scratch, title: &str, text: &str) -> Result<(), String> {
    let want = format!("Tess heard: {text}");
    poll(Duration::from_secs(10), || {
        texts(s, "Tess", title).contains(&want).then_some(())
    })
    .ok_or_else(|| format!("{title} got no answer to {text:?}"))
}

/// Pause, a message, resume: it is answered, with or without a restart between the pause and
/// the resume; a chat that got no message during the pause is not planned.
#[test]
fn a_message_that_arrives_during_a_pause_is_planned_on_resume() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    ctl(&s, &["say", "--from", "Alice", "hello"])?;
    ctl(&s, &["say", "--from", "Bob", "hi"])?;
    answered(&s, "Alice", "hello")?;
    answered(&s, "Bob", "hi")?;

    // Without a restart: pause every chat, Alice writes, resume.
    let out = ctl(&s, &["pause"])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ctl(&s, &["say", "--from", "Alice", "are you there?"])?;
    let out = ctl(&s, &["resume"])?;
    assert!(stdout(&out).contains("resumed"), "{}", stdout(&out));
    answered(&s, "Alice", "are you there?")?;
    let alice = held_planned(&s);
    assert_eq!(
        alice.len(),
        1,
        "only Alice's chat is planned on resume: {alice:?}"
    );

    // With a restart between the pause and the resume (the held message is in the agent
    // state; the start's unread scan meets the pause again).
    ctl(&s, &["pause", "--chat", "Alice"])?;
    ctl(&s, &["say", "--from", "Alice", "one more"])?;
    ctl(&s, &["say", "--from", "Alice", "and the newest"])?;
    stop_daemon(&mut reaper)?;
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    wait_up(&s)?;
    let out = ctl(&s, &["resume", "--chat", "Alice"])?;
    assert!(stdout(&out).contains("resumed"), "{}", stdout(&out));
    answered(&s, "Alice", "and the newest")?;
    let planned = held_planned(&s);
    assert_eq!(planned.len(), 2, "{planned:?}");
    assert!(planned.iter().all(|c| *c == alice[0]), "{planned:?}");
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// The transcript file of `title`'s chat with `agent`.
fn transcript_file(s: &Scratch, agent: &str, title: &str) -> Option<std::path::PathBuf> {
    let dir = s.state().join(agent).join("telegram-memory");
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let v = personad::adapters::memory::read_folded_json(&e.path()).ok()?;
        (v["chat"]["title"] == title).then(|| e.path())
    })
}

/// A damaged transcript is quarantined and its chat starts empty; the chat's next message
/// still gets an id above the handled mark in handled.json, so it is answered.
#[test]
fn after_a_transcript_is_quarantined_the_next_message_is_answered() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    for text in ["hello", "second", "third"] {
        ctl(&s, &["say", "--from", "Alice", text])?;
        answered(&s, "Alice", text)?;
    }
    stop_daemon(&mut reaper)?;
    // A clean stop retires the journal: the marks are in their checkpoint file.
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        s.state().join("Tess").join("handled.json"),
    )?)?;
    let marks = state.as_object().ok_or("no handled marks")?;
    assert!(
        marks
            .values()
            .any(|m| m["message"].as_i64().is_some_and(|m| m >= 3)),
        "{state}"
    );
    let file = transcript_file(&s, "Tess", "Alice").ok_or("no transcript of Alice")?;
    std::fs::write(&file, b"{\"chat\": damaged")?;

    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    wait_up(&s)?;
    assert!(
        s.log_text().contains("transcript_quarantined"),
        "not quarantined"
    );
    ctl(&s, &["say", "--from", "Alice", "after the quarantine"])?;
    answered(&s, "Alice", "after the quarantine")?;
    assert!(s.log_text().contains("message_ids_raised"), "no warning");
    stop_daemon(&mut reaper)?;
    Ok(())
}
