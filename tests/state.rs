//! The state format: the graph codec round-trips any message text, garbage never panics the
//! decoder, and a process killed at random moments while saving leaves every graph file
//! parseable with no acknowledged save lost.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use jiff::Timestamp;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::codec::{decode, encode};
use personad::core::graph::{Task, TaskGraph, TaskSpec};
use personad::core::model::{Chat, ChatId, ChatKind};
use proptest::prelude::*;

/// Strings rich in what breaks naive formats: fences, CRLF, NUL, bidi marks, emoji.
fn nasty_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "```",
        "````json",
        "```json\n{}\n```",
        "\r\n",
        "\n",
        "\0",
        "\u{200F}",
        "\u{202E}",
        "😀",
        "👩‍👩‍👧",
        "|",
        "<!--",
        "# «send»",
        "\"",
        "\\",
        "{",
        "}",
        "a",
        " ",
        "`",
    ]);
    prop::collection::vec(
        prop_oneof![pieces.prop_map(String::from), any::<String>()],
        0..12,
    )
    .prop_map(|v| v.concat())
}

fn graph_with(text: &str, title: &str, chat: i64) -> TaskGraph {
    let now = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let chat = Chat {
        id: ChatId(chat),
        kind: if chat < 0 {
            ChatKind::Group
        } else {
            ChatKind::Direct
        },
        title: title.to_string(),
    };
    let mut g = TaskGraph::with_received("agent", chat, now, None, now);
    let first = g.tasks[0].id.clone();
    g.append_chain(&first, vec![Task::new(TaskSpec::send(text, None), now)]);
    g
}

proptest! {
    #[test]
    fn codec_round_trips_any_text(text in nasty_text(), title in nasty_text(), chat in any::<i64>()) {
        let g = graph_with(&text, &title, chat);
        let encoded = encode(&g).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = decode(&encoded).map_err(|e| TestCaseError::fail(format!("{e}\n{encoded}")))?;
        prop_assert_eq!(&back, &g);
        // Rendering is deterministic: encoding the decoded graph gives the same file.
        prop_assert_eq!(encode(&back).ok(), Some(encoded));
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = decode(&text);
        let _ = decode(&format!("```json\n{text}\n```\n"));
    }
}

fn harness_binary() -> &'static str {
    env!("CARGO_BIN_EXE_personad")
}

/// Runs the save loop, reads `acks` acknowledgements, then SIGKILLs it mid-stream.
/// Returns the last acknowledged seq per chat.
fn run_and_kill(state: &Path, acks: usize) -> Result<Vec<(i64, u64)>, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(harness_binary());
    // Nothing from the environment (PERSONAD_*, GEMINI_*, TELEGRAM_*...) may steer the child.
    common::clear_env(&mut cmd);
    let mut child = cmd
        .args(["--state"])
        .arg(state)
        .args(["-qq", "save-loop", "--chats", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut last: Vec<(i64, u64)> = Vec::new();
    for line in BufReader::new(stdout).lines().take(acks) {
        let line = line?;
        let mut parts = line.split_whitespace().skip(1);
        let (Some(chat), Some(seq)) = (parts.next(), parts.next()) else {
            return Err(format!("unexpected line {line:?}").into());
        };
        let (chat, seq): (i64, u64) = (chat.parse()?, seq.parse()?);
        match last.iter_mut().find(|(c, _)| *c == chat) {
            Some(slot) => slot.1 = seq,
            None => last.push((chat, seq)),
        }
    }
    // The child keeps saving while we get here: the kill lands at an arbitrary point.
    child.kill()?;
    child.wait()?;
    Ok(last)
}

#[test]
fn sigkill_while_saving_never_corrupts_or_loses_an_acknowledged_save()
-> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let cycles: usize = std::env::var("PERSONAD_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let store = GraphStore::new(StateDir::new(dir.path()));
    for cycle in 0..cycles {
        let acks = 1 + fastrand::usize(..40);
        let acked = run_and_kill(dir.path(), acks)?;
        for file in store.scan()? {
            let g = file
                .graph
                .map_err(|e| format!("cycle {cycle}: {} unreadable: {e}", file.path.display()))?;
            if let Some((_, seq)) = acked.iter().find(|(c, _)| *c == g.chat.id.0) {
                assert!(
                    g.seq >= *seq,
                    "cycle {cycle}: chat {} on disk at seq {} but seq {seq} was acknowledged",
                    g.chat.id,
                    g.seq
                );
            }
        }
    }
    // A startup load removes temp debris and quarantines nothing.
    let loaded = store.load_all(jiff::Timestamp::now())?;
    assert!(loaded.quarantined.is_empty(), "{:?}", loaded.quarantined);
    assert_eq!(loaded.graphs.len(), 4);
    let debris: Vec<_> = std::fs::read_dir(dir.path().join("graphs").join("harness"))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(debris.is_empty(), "temp files left after load: {debris:?}");
    Ok(())
}

#[test]
fn format_1_files_decode_into_typed_tasks_and_save_as_format_2()
-> Result<(), Box<dyn std::error::Error>> {
    use personad::core::graph::{FORMAT_VERSION, IdempotencyKey, TaskSpec, TaskStatus};
    let dir = Path::new("tests/fixtures/state-v1/graphs/ann");
    let g = decode(&std::fs::read_to_string(dir.join("12.md"))?)?;
    assert_eq!(g.format, FORMAT_VERSION);
    assert_eq!(
        g.tasks[2].spec,
        TaskSpec::Send {
            text: "interrupted".into(),
            reply_to: None,
            idempotency_key: IdempotencyKey(777),
        }
    );
    assert_eq!(g.tasks[2].status, TaskStatus::Active);
    assert!(
        matches!(&g.tasks[1].spec, TaskSpec::Wait { retry_of: Some(of), .. } if of == "send-00000000c102")
    );
    assert!(
        g.tasks[3].spec.idempotency_key().is_some(),
        "a send without a key gets one on upgrade"
    );
    let g10 = decode(&std::fs::read_to_string(dir.join("10.md"))?)?;
    assert!(matches!(
        g10.tasks[3].spec,
        TaskSpec::Wait { typing: true, .. }
    ));
    let reencoded = encode(&g)?;
    assert!(reencoded.contains("\"format\": 2"), "{reencoded}");
    assert_eq!(decode(&reencoded)?, g);
    Ok(())
}

#[test]
fn a_format_1_task_with_parameters_unfit_for_its_kind_is_an_error_naming_it() {
    let text = std::fs::read_to_string("tests/fixtures/state-v1/graphs/ann/10.md")
        .unwrap_or_default()
        .replace("\"text\": \"resumed hello\"", "\"text\": 12");
    let err = decode(&text)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("send-00000000a103") && err.contains("`text` is not a string"),
        "{err}"
    );
    let unknown = text.replace("\"format\": 1", "\"format\": 9");
    let err = decode(&unknown)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unsupported format version 9"), "{err}");
}
