//! The owner's side as runtime state, through the real daemon (`run --telegram memory`) and
//! `personad ctl`: a command's answer is a send task of the owner's chat, so a kill -9
//! between the command and its answer still answers once after the restart; pauses, a
//! group's trigger mode and a chat's draft mode are kept once, in the agent's state that the
//! runtime writes, and survive a restart.

mod common;

use std::time::Duration;

use common::daemon::*;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{TaskKind, TaskSpec, TaskStatus};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(15);

/// Answers in Tess's Saved Messages that start with `start`.
fn answers(s: &Scratch, start: &str) -> Vec<String> {
    sent(s, "Tess", "Saved Messages")
        .into_iter()
        .filter(|t| t.starts_with(start))
        .collect()
}

/// kill -9 after the owner's `/help` was accepted (its answer is a task in the Saved
/// Messages graph on disk) and before the answer was sent (sends are slowed down): the next
/// start sends it once, and a third start sends nothing more.
#[test]
fn an_owner_commands_answer_killed_before_it_was_sent_is_sent_once_after_the_restart() -> TestResult
{
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let slow = ["--planner", "echo", "--memory-send-delay-ms", "4000"];
    let mut reaper = Reaper(Some(start(&s, &slow, &[])?));
    wait_up(&s)?;
    let said = ctl(&s, &["say", "--chat", "me", "/help"])?;
    assert!(
        said.status.success(),
        "{}",
        String::from_utf8_lossy(&said.stderr)
    );
    let store = GraphStore::new(StateDir::new(s.state()));
    poll(WAIT, || {
        let files = store.scan().ok()?;
        files.iter().find_map(|f| {
            let g = f.graph.as_ref().ok()?;
            g.tasks
                .iter()
                .any(|t| {
                    t.kind() == TaskKind::Send
                        && t.status != TaskStatus::Done
                        && matches!(&t.spec, TaskSpec::Send { text, .. } if text.starts_with("personad: personad commands"))
                })
                .then_some(())
        })
    })
    .ok_or_else(|| {
        format!(
            "the answer never reached a graph file: {:?}\n{}",
            store.scan().map(|f| f.len()),
            s.log_text()
        )
    })?;
    let child = reaper.0.as_mut().ok_or("no child")?;
    signal(child, "-KILL")?;
    wait_exit(child, Duration::from_secs(10)).ok_or("no exit")?;
    assert!(
        answers(&s, "personad: personad commands").is_empty(),
        "answered before the kill"
    );
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    wait_up(&s)?;
    poll(WAIT, || {
        (!answers(&s, "personad: personad commands").is_empty()).then_some(())
    })
    .ok_or("the answer was never sent after the restart")?;
    stop_daemon(&mut reaper)?;
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    wait_up(&s)?;
    stop_daemon(&mut reaper)?;
    assert_eq!(answers(&s, "personad: personad commands").len(), 1);
    Ok(())
}

/// `ctl pause`, `ctl mode` and `ctl approve-mode` each land once, in the agent's state the
/// runtime writes (no second file), and hold after a restart: the paused chat is not
/// answered, the group's mode and the chat's draft mode are what the owner set.
#[test]
fn a_pause_a_group_mode_and_a_draft_mode_are_stored_once_and_survive_a_restart() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    // Alice, Bob and the group become known chats.
    ctl(&s, &["say", "--from", "Alice", "hello"])?;
    ctl(&s, &["say", "--from", "Bob", "hello"])?;
    ctl(
        &s,
        &["say", "--group", "Book club", "--from", "Cy", "hi all"],
    )?;
    for (args, expect) in [
        (&["pause", "--chat", "Alice"][..], "paused chat"),
        (
            &["mode", "--chat", "Book club", "talkative"][..],
            "talkative",
        ),
        (
            &["approve-mode", "--chat", "Bob", "all"][..],
            "draft mode all",
        ),
    ] {
        let out = stdout(&ctl(&s, args)?);
        assert!(out.contains(expect), "{args:?}: {out}");
    }
    stop_daemon(&mut reaper)?;
    let state_file = s.state().join("Tess").join("agent-state.json");
    let text = std::fs::read_to_string(&state_file)?;
    let state: serde_json::Value = serde_json::from_str(&text)?;
    let group = -personad::adapters::memory::user_id_for("Book club");
    let alice = personad::adapters::memory::user_id_for("Alice");
    let bob = personad::adapters::memory::user_id_for("Bob");
    assert!(
        state["pauses"]["chats"][alice.to_string()].is_object(),
        "{text}"
    );
    assert_eq!(
        state["group_modes"][group.to_string()],
        "talkative",
        "{text}"
    );
    assert_eq!(state["approval_modes"][bob.to_string()], "all", "{text}");
    assert!(
        !s.state().join("Tess").join("controls.json").exists(),
        "a second pauses file was written"
    );
    // After a restart the runtime reads them back: the status shows the pause, the group
    // and draft modes are in force, and Alice is not answered.
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    let status = wait_up(&s)?;
    assert!(status.contains("paused: chat"), "pause lost: {status}");
    ctl(&s, &["say", "--from", "Alice", "still there?"])?;
    ctl(&s, &["say", "--from", "Dee", "hi"])?;
    poll(WAIT, || {
        sent(&s, "Tess", "Dee")
            .iter()
            .any(|t| t == "Tess heard: hi")
            .then_some(())
    })
    .ok_or("Dee got no answer")?;
    assert!(
        !sent(&s, "Tess", "Alice")
            .iter()
            .any(|t| t.contains("still there")),
        "a paused chat was answered after the restart"
    );
    // Bob's draft mode holds: his message waits as a draft for the owner.
    ctl(&s, &["say", "--from", "Bob", "are you there?"])?;
    poll(WAIT, || {
        sent(&s, "Tess", "Saved Messages")
            .iter()
            .any(|t| t.starts_with("personad: draft") && t.contains("Bob"))
            .then_some(())
    })
    .ok_or("Bob's draft mode was lost at the restart")?;
    stop_daemon(&mut reaper)?;
    let text = std::fs::read_to_string(&state_file)?;
    let state: serde_json::Value = serde_json::from_str(&text)?;
    assert_eq!(
        state["group_modes"][group.to_string()],
        "talkative",
        "{text}"
    );
    Ok(())
}

/// A pauses file of an earlier version is taken into the agent's state at start and then
/// removed: the pause holds, and nothing is kept twice.
#[test]
fn an_old_pauses_file_moves_into_the_agent_state() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let alice = personad::adapters::memory::user_id_for("Alice");
    let dir = s.state().join("Tess");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("controls.json"),
        format!(r#"{{"chats": {{"{alice}": {{"since": "2026-01-01T00:00:00Z"}}}}}}"#),
    )?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    let status = wait_up(&s)?;
    assert!(status.contains("paused: chat"), "{status}");
    stop_daemon(&mut reaper)?;
    assert!(!dir.join("controls.json").exists(), "the old file stayed");
    let text = std::fs::read_to_string(dir.join("agent-state.json"))?;
    assert!(text.contains(&alice.to_string()), "{text}");
    Ok(())
}

/// Fail closed: an agent state that does not read (or an old pauses file that does not
/// parse) is moved to quarantine, and the agent starts paused with a notice to the owner
/// saying why, instead of answering chats the owner had paused or disabled.
#[test]
fn an_unreadable_agent_state_starts_the_agent_paused_and_tells_the_owner() -> TestResult {
    for (file, garbage) in [
        ("agent-state.json", "{ this is not json"),
        ("controls.json", "neither is this"),
    ] {
        let s = Scratch::new(&[("Tess.md", TESS)])?;
        let dir = s.state().join("Tess");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(file), garbage)?;
        let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
        let status = wait_up(&s)?;
        assert!(status.contains("paused: all"), "{file}: {status}");
        let notice = poll(Duration::from_secs(10), || {
            texts(&s, "Tess", "Saved Messages")
                .into_iter()
                .find(|t| t.contains("did not read") && t.contains("every chat is paused"))
        })
        .ok_or_else(|| format!("{file}: no notice to the owner; log:\n{}", s.log_text()))?;
        assert!(notice.contains(file), "{notice}");
        // `say` waits until the runtime settled the message: no plan, as in a paused chat.
        let said = stdout(&ctl(
            &s,
            &["say", "--wait", "10", "--from", "Alice", "hello?"],
        )?);
        assert!(
            said.contains("Tess is paused in every chat"),
            "{file}: {said}"
        );
        stop_daemon(&mut reaper)?;
        let quarantined = std::fs::read_dir(s.state().join("quarantine"))?.count();
        assert!(quarantined >= 2, "{file}: the file and its reason are kept");
    }
    Ok(())
}
