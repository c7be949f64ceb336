//! The in-memory Telegram's transcripts: each change is appended to the chat's journal (the
//! bytes already there stay as they were, no temp file, no rename, no sync: a kill keeps it),
//! RAM keeps a bounded window of each chat while the history served is unchanged (older
//! messages are read from the file), a transcript in the older whole-file form still loads,
//! and a last line cut by a crash is dropped with a warning while the next append reads back.
//! Prints the store's syscalls per message (`cargo test --test memory_transcript -- --nocapture`).

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use personad::adapters::memory::{Incoming, MemoryTelegram};
use personad::adapters::store::io_stats;
use personad::core::model::{Chat, ChatId, ChatKind, MessageId, OutgoingText};
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::telegram::Telegram;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const ALICE: i64 = 4242;

/// The store's counters are process-wide: the tests of this file run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn clock() -> SharedClock {
    let t0 = Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    Arc::new(VirtualClock::new(t0, true))
}

fn account(dir: &Path) -> Result<MemoryTelegram, Box<dyn std::error::Error>> {
    let tg = MemoryTelegram::new("Wren", clock(), Some(dir.to_path_buf()))?;
    tg.ensure_chat(Chat {
        id: ChatId(ALICE),
        kind: ChatKind::Direct,
        title: "Alice".into(),
    });
    Ok(tg)
}

fn alice_says(text: &str) -> Incoming {
    Incoming {
        from: "Alice".into(),
        text: text.into(),
        ..Incoming::default()
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join(format!("{ALICE}.json"))
}

fn texts(messages: &[personad::core::model::Message]) -> Vec<String> {
    messages.iter().map(|m| m.text.clone()).collect()
}

#[tokio::test]
async fn each_change_is_appended_with_one_write_and_no_sync_or_rename() -> TestResult {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let tg = account(dir.path())?;
    let chat = ChatId(ALICE);
    tg.inject(chat, alice_says("first")).await?;
    let path = file(dir.path());
    let mut before = std::fs::read(&path)?;
    let inode = std::fs::metadata(&path)?.ino();
    let io = io_stats::snapshot();
    let rounds = 50;
    for k in 0..rounds {
        let m = tg.inject(chat, alice_says(&format!("hello {k}"))).await?;
        tg.mark_read(chat, m.id).await?;
        tg.send_text(OutgoingText {
            chat,
            text: format!("answer {k}"),
            reply_to: Some(m.id),
            idempotency_key: 1000 + k,
        })
        .await?;
        let now = std::fs::read(&path)?;
        assert!(
            now.starts_with(&before),
            "the bytes already written changed"
        );
        assert_eq!(
            now[before.len()..].iter().filter(|b| **b == b'\n').count(),
            3,
            "one line per change"
        );
        before = now;
    }
    let spent = io_stats::snapshot().since(&io);
    assert_eq!(
        std::fs::metadata(&path)?.ino(),
        inode,
        "the file was replaced"
    );
    let per_message = |n: u64| n as f64 / f64::from(2 * rounds as u32);
    println!(
        "memory Telegram, per message (inbound or sent; a read mark per inbound): fdatasync {:.2}, fsync {:.2}, rename {:.2}, open {:.2}, temp files {:.2}",
        per_message(spent.fdatasync),
        per_message(spent.fsync),
        per_message(spent.rename),
        per_message(spent.open),
        per_message(spent.temp_file)
    );
    // Appended, not synced: it stands in for Telegram's servers (see `memory::persist`).
    assert_eq!(
        (spent.rename, spent.temp_file, spent.fsync, spent.fdatasync),
        (0, 0, 0, 0),
        "{spent:?}"
    );
    assert!(spent.open <= 1, "the file stays open: {spent:?}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A restarted account reads it all back.
    drop(tg);
    let again = account(dir.path())?;
    assert_eq!(again.transcript(chat).len(), 1 + 2 * rounds as usize);
    assert_eq!(again.read_upto(chat), Some(MessageId(2 * rounds)));
    Ok(())
}

#[tokio::test]
async fn ram_keeps_a_window_and_the_history_served_is_unchanged() -> TestResult {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let tg = account(dir.path())?;
    tg.set_window(8);
    let chat = ChatId(ALICE);
    let mut said = Vec::new();
    for k in 0..20 {
        said.push(tg.inject(chat, alice_says(&format!("m{k}"))).await?);
    }
    assert_eq!(tg.messages_in_ram(chat), 8);
    assert_eq!(tg.fetch_history(chat, 100).await?, said);
    assert_eq!(tg.fetch_history(chat, 12).await?, said[8..].to_vec());
    assert_eq!(tg.fetch_history(chat, 3).await?, said[17..].to_vec());
    // An old message is still there for a reaction, an edit and a deletion.
    tg.react(chat, said[0].id, "👍").await?;
    tg.edit_inbound(chat, said[1].id, "m1 edited").await?;
    assert_eq!(tg.delete_inbound(chat, &[said[2].id]).await?, 1);
    let mut expected = texts(&said);
    expected[1] = "m1 edited".into();
    expected.remove(2);
    assert_eq!(texts(&tg.fetch_history(chat, 100).await?), expected);
    assert_eq!(tg.messages_in_ram(chat), 8);
    // The same after a restart.
    drop(tg);
    let again = account(dir.path())?;
    again.set_window(8);
    again.inject(chat, alice_says("m20")).await?;
    assert_eq!(again.messages_in_ram(chat), 8);
    expected.push("m20".into());
    assert_eq!(texts(&again.fetch_history(chat, 100).await?), expected);
    Ok(())
}

#[tokio::test]
async fn a_repeated_key_answers_its_message_while_it_is_in_the_window() -> TestResult {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let tg = account(dir.path())?;
    tg.set_window(4);
    let chat = ChatId(ALICE);
    let send = |k: i64| OutgoingText {
        chat,
        text: format!("s{k}"),
        reply_to: None,
        idempotency_key: k,
    };
    let first = tg.send_text(send(1)).await?;
    assert_eq!(tg.send_text(send(1)).await?, first);
    for k in 2..10 {
        tg.send_text(send(k)).await?;
    }
    assert_eq!(tg.messages_in_ram(chat), 4);
    let last = tg.send_text(send(9)).await?;
    assert_eq!(last.text, "s9");
    assert_eq!(tg.fetch_history(chat, 100).await?.len(), 9);
    Ok(())
}

#[tokio::test]
async fn a_transcript_in_the_older_whole_file_form_loads_and_is_appended_to() -> TestResult {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let chat = ChatId(ALICE);
    let old = serde_json::json!({
        "chat": {"id": ALICE, "kind": "direct", "title": "Alice"},
        "next_id": 3,
        "messages": [
            {"id": 1, "chat": ALICE, "sender": {"id": 7, "name": "Alice"}, "outgoing": false,
             "text": "old one", "date": "2025-06-15T15:06:40Z"},
            {"id": 2, "chat": ALICE, "sender": {"id": 9, "name": "Wren"}, "outgoing": true,
             "text": "old two", "date": "2025-06-15T15:06:41Z"}
        ],
        "sent_keys": {"77": 2},
        "read_upto": 1
    });
    std::fs::write(file(dir.path()), serde_json::to_vec_pretty(&old)?)?;
    let tg = account(dir.path())?;
    assert_eq!(texts(&tg.transcript(chat)), vec!["old one", "old two"]);
    assert_eq!(tg.read_upto(chat), Some(MessageId(1)));
    // The key it recorded still answers its message.
    let again = tg
        .send_text(OutgoingText {
            chat,
            text: "old two".into(),
            reply_to: None,
            idempotency_key: 77,
        })
        .await?;
    assert_eq!(again.id, MessageId(2));
    let converted = std::fs::read(file(dir.path()))?;
    let next = tg.inject(chat, alice_says("new")).await?;
    assert_eq!(next.id, MessageId(3));
    assert!(std::fs::read(file(dir.path()))?.starts_with(&converted));
    drop(tg);
    let back = account(dir.path())?;
    assert_eq!(
        texts(&back.transcript(chat)),
        vec!["old one", "old two", "new"]
    );
    Ok(())
}

#[tokio::test]
async fn a_last_line_cut_by_a_crash_is_dropped_with_a_warning() -> TestResult {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir()?;
    let chat = ChatId(ALICE);
    let tg = account(dir.path())?;
    tg.inject(chat, alice_says("one")).await?;
    tg.inject(chat, alice_says("two")).await?;
    drop(tg);
    let path = file(dir.path());
    let whole = std::fs::read(&path)?;
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"op":"message","message":{"id":3,"chat":4242,"sen"#);
    std::fs::write(&path, &torn)?;

    let (tg, logs) = common::logs::logged(|| account(dir.path()));
    let tg = tg?;
    assert!(logs.contains("transcript_torn_tail"), "{logs}");
    assert_eq!(texts(&tg.transcript(chat)), vec!["one", "two"]);
    assert_eq!(std::fs::read(&path)?, whole, "the torn line is cut off");
    tg.inject(chat, alice_says("three")).await?;
    drop(tg);
    let back = account(dir.path())?;
    assert_eq!(texts(&back.transcript(chat)), vec!["one", "two", "three"]);
    assert!(!logs.contains("transcript_quarantined"), "{logs}");
    Ok(())
}
