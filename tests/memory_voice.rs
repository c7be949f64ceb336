//! Voice notes on the in-memory Telegram, the playground and `state history`: a voice note
//! the persona sends is kept as a file next to its transcript (`voice/<chat>/<id>.ogg`) with
//! its words as its text; a chat marked as refusing voice notes answers a content refusal
//! and keeps nothing; the governor paces a voice like a send and passes the refusal on; a
//! `--jsonl` line may bring a voice note already transcribed, whose words are recorded as
//! its transcript; `state history` shows voice notes as such.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use personad::adapters::governor::{Governor, GovernorConfig};
use personad::adapters::memory::{Action, MemoryTelegram, Op, VOICES_FORBIDDEN, user_id_for};
use personad::core::model::{
    Chat, ChatId, ChatKind, MediaKind, MessageId, OutgoingText, OutgoingVoice, TelegramError,
};
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::telegram::Telegram;
use serde_json::Value;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const ALICE: i64 = 4242;

fn clock() -> SharedClock {
    Arc::new(VirtualClock::new(common::t0(), true))
}

fn account(dir: Option<&Path>) -> Arc<MemoryTelegram> {
    let tg = MemoryTelegram::new("Wren", clock(), dir.map(Path::to_path_buf)).unwrap();
    tg.ensure_chat(Chat {
        id: ChatId(ALICE),
        kind: ChatKind::Direct,
        title: "Alice".into(),
    });
    Arc::new(tg)
}

fn voice(key: i64) -> OutgoingVoice {
    OutgoingVoice {
        chat: ChatId(ALICE),
        ogg: Arc::new(b"OggS fake opus pages".to_vec()),
        duration_secs: 6,
        waveform: vec![1, 2, 3],
        text: "the train is late again".into(),
        reply_to: None,
        idempotency_key: key,
    }
}

fn voices(tg: &MemoryTelegram) -> Vec<(MessageId, Option<std::path::PathBuf>)> {
    tg.actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Action::Voice { message, file, .. } => Some((message.id, file)),
            _ => None,
        })
        .collect()
}

/// A voice note is a message of kind voice with its words as its text, its file kept next
/// to the transcript; the transcript on disk records kind, duration, file and text; the same
/// idempotency key again is the same message, once.
#[tokio::test]
async fn a_voice_note_is_kept_as_a_file_with_its_words() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tg = account(Some(dir.path()));
    let sent = tg.send_voice(voice(77)).await?;
    assert_eq!(sent.text, "the train is late again");
    let media = sent.media.clone().ok_or("no media")?;
    assert_eq!(media.kind, MediaKind::Voice);
    assert_eq!(media.duration_secs, Some(6));
    assert_eq!(media.mime.as_deref(), Some("audio/ogg"));
    let name = format!("voice/{ALICE}/{}.ogg", sent.id);
    assert_eq!(media.file_name.as_deref(), Some(name.as_str()));
    let file = dir.path().join(&name);
    assert_eq!(std::fs::read(&file)?, b"OggS fake opus pages");
    assert_eq!(
        tg.voice_file(ChatId(ALICE), sent.id).as_deref(),
        Some(&b"OggS fake opus pages".to_vec())
    );

    let saved: Value =
        personad::adapters::memory::read_folded_json(&dir.path().join(format!("{ALICE}.json")))?;
    let line = &saved["messages"][0];
    assert_eq!(line["text"], "the train is late again");
    assert_eq!(line["media"]["kind"], "voice");
    assert_eq!(line["media"]["duration_secs"], 6);
    assert_eq!(line["media"]["file_name"], name.as_str());

    let again = tg.send_voice(voice(77)).await?;
    assert_eq!(again.id, sent.id);
    assert_eq!(tg.transcript(ChatId(ALICE)).len(), 1);
    assert_eq!(voices(&tg), vec![(sent.id, Some(file))]);

    tg.recording_voice(ChatId(ALICE)).await?;
    assert!(tg.actions().iter().any(|r| matches!(
        r.action,
        Action::RecordingVoice { chat } if chat == ChatId(ALICE)
    )));
    Ok(())
}

/// A chat marked as refusing voice notes answers CHAT_SEND_VOICES_FORBIDDEN as a content
/// refusal and keeps nothing; a text still goes; unmarked, voice notes go again.
#[tokio::test]
async fn a_chat_that_refuses_voice_notes_refuses_them_as_content() -> TestResult {
    let tg = account(None);
    tg.refuse_voice(ChatId(ALICE), true);
    let err = tg.send_voice(voice(1)).await.unwrap_err();
    assert_eq!(err, TelegramError::ContentRefused(VOICES_FORBIDDEN.into()));
    assert_eq!(VOICES_FORBIDDEN, "CHAT_SEND_VOICES_FORBIDDEN");
    assert!(tg.transcript(ChatId(ALICE)).is_empty());
    assert!(voices(&tg).is_empty());
    tg.send_text(OutgoingText {
        chat: ChatId(ALICE),
        text: "the train is late again".into(),
        reply_to: None,
        idempotency_key: 1,
    })
    .await?;
    tg.refuse_voice(ChatId(ALICE), false);
    tg.send_voice(voice(2)).await?;
    assert_eq!(voices(&tg).len(), 1);
    // Injected faults reach voice sends like any operation.
    tg.fail_next(Op::SendVoice, TelegramError::Network("down".into()));
    assert!(tg.send_voice(voice(3)).await.is_err());
    Ok(())
}

/// The governor gives a voice note a send slot (the per-chat gap applies between a text and
/// a voice note) and hands a refusal back unchanged, for the caller's text fallback.
#[tokio::test]
async fn the_governor_paces_a_voice_like_a_send_and_passes_a_refusal_on() -> TestResult {
    let tg = account(None);
    tg.inject(
        ChatId(ALICE),
        personad::adapters::memory::Incoming {
            from: "Alice".into(),
            text: "hi".into(),
            ..Default::default()
        },
    )
    .await?;
    let clock = clock();
    let config = GovernorConfig {
        chat_min_gap: std::time::Duration::from_secs(5),
        ..GovernorConfig::default()
    };
    let governed = Governor::new(Arc::clone(&tg), Arc::clone(&clock), config);
    governed
        .send_text(OutgoingText {
            chat: ChatId(ALICE),
            text: "one moment".into(),
            reply_to: None,
            idempotency_key: 10,
        })
        .await?;
    let before = clock.now();
    governed.send_voice(voice(11)).await?;
    assert!(
        clock.now().duration_since(before).as_secs() >= 5,
        "the voice waited for the chat's gap"
    );
    tg.refuse_voice(ChatId(ALICE), true);
    let err = governed.send_voice(voice(12)).await.unwrap_err();
    assert!(matches!(err, TelegramError::ContentRefused(_)), "{err:?}");
    Ok(())
}

fn personad(args: &[&str], input: Option<&str>) -> Result<Output, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    common::clear_env(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(input.unwrap_or_default().as_bytes())?;
    drop(stdin);
    Ok(child.wait_with_output()?)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `state history` of the in-memory backend shows the persona's voice note with its length,
/// file and words.
#[tokio::test]
async fn state_history_shows_a_voice_note_as_voice_with_its_words() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let tg = account(Some(&state.join("Wren").join("telegram-memory")));
    let sent = tg.send_voice(voice(5)).await?;
    let state = state.display().to_string();
    let chat = ALICE.to_string();
    let out = personad(
        &["--state", &state, "state", "history", "Wren", &chat],
        None,
    )?;
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}{}", text(&out.stderr));
    assert!(
        shown.contains(&format!(
            "Wren (persona): the train is late again [voice, 6 s, voice/{ALICE}/{}.ogg",
            sent.id
        )),
        "{shown}"
    );
    Ok(())
}

/// A `--jsonl` line may bring a voice note already transcribed (`voice`, `duration`): it
/// arrives as a voice note with no text whose words are recorded as its transcript (so
/// `state history` and the prompt show them, and no speech-to-text runs); a line with both
/// `voice` and `text`, or a `duration` alone, is an `error` for that line.
#[test]
fn a_jsonl_voice_note_arrives_with_its_words_as_its_transcript() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state").display().to_string();
    let input = concat!(
        "{\"voice\":\"is the train late again?\",\"duration\":3}\n",
        "{\"voice\":\"x\",\"text\":\"y\"}\n",
        "{\"text\":\"hi\",\"duration\":3}\n",
        "{\"media\":{\"kind\":\"photo\",\"transcript\":\"no\"}}\n",
    );
    let args = [
        "--state", &state, "chat", "--agent", "Wren", "--jsonl", "--fast",
    ];
    let out = personad(&args, Some(input))?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let errors: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "error")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(errors.len(), 3, "{stdout}");
    assert!(
        errors[0].starts_with("line 2: a voice note has no `text`"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("line 3: `duration` goes with `voice`"),
        "{errors:?}"
    );
    assert!(
        errors[2].starts_with("line 4: only a voice note"),
        "{errors:?}"
    );
    let inbound: Vec<&Value> = events.iter().filter(|e| e["event"] == "inbound").collect();
    assert_eq!(inbound.len(), 1, "{stdout}");
    assert_eq!(inbound[0]["text"], "");

    let chat = user_id_for("User").to_string();
    let out = personad(
        &[
            "--state",
            &state,
            "state",
            "history",
            "Wren",
            &chat,
            "--playground",
        ],
        None,
    )?;
    let shown = text(&out.stdout);
    assert!(
        shown.contains("User:  [voice, 3 s: is the train late again?]"),
        "{shown}"
    );
    Ok(())
}
