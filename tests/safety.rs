//! Telegram's typed errors through the runtime: a flood wait parks the conversation (and the
//! park survives a restart), PEER_FLOOD trips the account breaker and alerts the owner, a
//! forbidden chat is disabled, a dead session stops the agent, a text longer than one
//! message goes out in parts (and a part refused as too long in smaller ones).

mod common;

use common::*;
use personad::adapters::memory::{Op, user_id_for};
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::agent_state::AgentState;
use personad::core::graph::{ConversationKey, Task, TaskGraph, TaskSpec, codec};
use personad::core::model::{ChatId, TelegramError};

fn agent_state(dir: &std::path::Path) -> AgentState {
    let path = StateDir::new(dir).agent_dir(AGENT).join("agent-state.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_flood_wait_parks_the_conversation_is_notable_and_the_park_survives_a_restart()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let (flooded, other) = (dm(1), dm(2));
    let chats = [flooded.clone(), other.clone()];
    let mut h = Harness::start(dir.path(), reply_with("hello"), config(), &chats);
    let mut notables = h.handle.observe_notables();
    h.telegram
        .fail_next(Op::SendText, TelegramError::FloodWait { secs: 120 });
    h.say(&flooded, "Bob", "hi").await; // planned at 2 s; the send hits FLOOD_WAIT_120
    h.pass(secs(10)).await;
    // The wait is a notable event (the console's incidents, the metric, the playground).
    let mut seen = Vec::new();
    while let Ok(e) = notables.try_recv() {
        seen.push((e.notable.event, e.notable.chat));
    }
    assert_eq!(seen, vec![("flood_wait", Some(ChatId(1)))]);
    h.say(&other, "Eve", "hey").await; // another chat is not held up
    h.pass(secs(50)).await; // 60 s: still parked
    let sends = h.sends();
    assert_eq!(sends, vec![(ChatId(2), "hello".to_string(), 12_000)]);
    let path = StateDir::new(dir.path()).graph_path(&ConversationKey::new(AGENT, ChatId(1)));
    let saved = codec::decode(&std::fs::read_to_string(&path)?)?;
    assert_eq!(
        saved.parked_until.map(ms_since_t0),
        Some(122_000),
        "the park is on disk"
    );
    h.crash().await;

    let restart = personad::core::time::add(t0(), secs(60));
    let mut h = Harness::start_at(dir.path(), reply_with("unused"), config(), &chats, restart);
    h.settle().await;
    assert_eq!(
        h.sends()
            .into_iter()
            .filter(|s| s.0 == ChatId(1))
            .collect::<Vec<_>>(),
        vec![(ChatId(1), "hello".to_string(), 122_000)],
        "sent once the 120 s have passed, not before"
    );
    assert_eq!(h.planner.calls(), 0, "parking does not cost a new plan");
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_new_message_during_a_park_keeps_the_conversation_parked() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(3);
    let mut h = Harness::start(
        dir.path(),
        reply_with("hi"),
        config(),
        std::slice::from_ref(&chat),
    );
    h.telegram
        .fail_next(Op::SendText, TelegramError::SlowmodeWait { secs: 30 });
    h.say(&chat, "Bob", "one").await;
    h.pass(secs(5)).await;
    h.say(&chat, "Bob", "two").await; // replans, but Telegram's wait still applies
    h.settle().await;
    let sends = h.sends();
    let log: Vec<String> = h
        .telegram
        .actions()
        .iter()
        .map(|r| {
            format!(
                "{} {:?}",
                ms_since_t0(r.at),
                std::mem::discriminant(&r.action)
            )
        })
        .collect();
    assert_eq!(sends.len(), 1);
    assert_eq!(
        sends[0].2,
        32_000,
        "not before the slow-mode wait ends: {log:?} planner calls {}",
        h.planner.calls()
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn peer_flood_trips_the_breaker_and_alerts_the_owner() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (chat, quiet) = (dm(4), dm(5));
    let chats = [chat.clone(), quiet.clone()];
    let mut h = Harness::start(dir.path(), reply_with("hello"), config(), &chats);
    h.telegram.fail_next(
        Op::SendText,
        TelegramError::AccountLimited("PEER_FLOOD".into()),
    );
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let saved_messages = ChatId(user_id_for(AGENT));
    let sends = h.sends();
    assert_eq!(sends.len(), 1, "{sends:?}");
    assert_eq!(
        sends[0].0, saved_messages,
        "the alert goes to the owner's Saved Messages"
    );
    assert!(sends[0].1.contains("limited") && sends[0].1.contains("PEER_FLOOD"));
    let state = agent_state(dir.path());
    let until = state.breaker.as_ref().map(|b| ms_since_t0(b.until));
    assert_eq!(
        until,
        Some(2_000 + 24 * 3600 * 1000),
        "breaker persisted for 24 h"
    );
    h.stop().await?;

    // After a restart the breaker still holds: a plan nobody asked for (no inbound message)
    // is dropped, while answering someone who wrote still works.
    let now = personad::core::time::add(t0(), secs(3600));
    let g = TaskGraph::with_tasks(
        AGENT,
        quiet.clone(),
        now,
        vec![Task::new(TaskSpec::send("unsolicited", None), now)],
    );
    GraphStore::new(StateDir::new(dir.path())).save(&g)?;
    let mut h = Harness::start_at(dir.path(), reply_with("answer"), config(), &chats, now);
    h.say(&chat, "Bob", "are you there?").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|s| s.1).collect();
    assert_eq!(texts, vec!["answer".to_string()]);
    assert!(
        files_below(&dir.path().join("quarantine")).is_empty(),
        "dropped, not quarantined"
    );
    assert!(files_below(&dir.path().join("graphs")).is_empty());
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_forbidden_chat_is_disabled_and_stays_disabled() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (banned, fine) = (group(-10), dm(6));
    let chats = [banned.clone(), fine.clone()];
    let mut h = Harness::start(dir.path(), reply_with("hello"), config(), &chats);
    h.telegram.fail_next(
        Op::SendText,
        TelegramError::Forbidden("CHAT_WRITE_FORBIDDEN".into()),
    );
    h.say(&banned, "Bob", "hi all").await;
    h.settle().await;
    assert!(h.sends_to(banned.id).is_empty());
    let told = h.owner_notices();
    assert!(
        told.len() == 1 && told[0].contains("refuses our messages"),
        "{told:?}"
    );
    assert!(agent_state(dir.path()).is_disabled(ChatId(-10)));
    assert!(
        files_below(&dir.path().join("graphs")).is_empty(),
        "the plan was dropped"
    );
    h.say(&banned, "Bob", "anyone?").await;
    h.say(&fine, "Eve", "hi").await;
    h.settle().await;
    assert_eq!(
        h.planner.calls(),
        2,
        "the disabled chat is not planned again"
    );
    assert_eq!(h.sends_to(banned.id).len(), 0);
    assert_eq!(h.sends_to(fine.id).len(), 1);
    h.stop().await?;

    let mut h = Harness::start(dir.path(), reply_with("hello"), config(), &chats);
    h.say(&banned, "Bob", "after restart").await;
    h.settle().await;
    assert_eq!(h.planner.calls(), 0, "still disabled after a restart");
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_dead_session_stops_the_agent_and_keeps_its_plans() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(7);
    let mut h = Harness::start(
        dir.path(),
        reply_with("hello"),
        config(),
        std::slice::from_ref(&chat),
    );
    h.telegram.fail_next(
        Op::SendText,
        TelegramError::Unauthorized("AUTH_KEY_UNREGISTERED".into()),
    );
    h.say(&chat, "Bob", "hi").await;
    drop(h.hold.take());
    h.handle.wait_stopped().await;
    let report = h.run.await??;
    assert!(report.no_agents_left);
    assert_eq!(
        files_below(&dir.path().join("graphs")).len(),
        1,
        "the plan stays on disk"
    );
    Ok(())
}

/// AUTH_KEY_DUPLICATED (the session used by two processes at once) stops the agent at once
/// and is a notable event for the owner, whether a send or the update pump meets it.
#[tokio::test]
async fn a_duplicated_session_stops_the_agent_and_tells_the_owner() -> TestResult {
    for through_pump in [false, true] {
        let dir = tempfile::tempdir()?;
        let chat = dm(9);
        let mut h = Harness::start(
            dir.path(),
            reply_with("hello"),
            config(),
            std::slice::from_ref(&chat),
        );
        let mut notables = h.handle.observe_notables();
        if through_pump {
            h.handle
                .stop_agent_for_test(common::AGENT, "AUTH_KEY_DUPLICATED (406)");
        } else {
            h.telegram.fail_next(
                Op::SendText,
                TelegramError::Unauthorized("AUTH_KEY_DUPLICATED (406)".into()),
            );
            h.say(&chat, "Bob", "hi").await;
        }
        drop(h.hold.take());
        h.handle.wait_stopped().await;
        let report = h.run.await??;
        assert!(report.no_agents_left);
        // The runtime applied its effects before it ended: the event is there or never came.
        let n = notables.try_recv().map_err(|_| "no notable event")?;
        assert_eq!(n.notable.event, "session_duplicated");
        assert!(
            n.notable.detail.contains("two processes at once"),
            "{}",
            n.notable.detail
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_refused_reaction_is_skipped_and_the_plan_goes_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(8);
    let planner = ScriptedPlanner::new(|_, _| {
        Ok(vec![
            personad::core::plan::Action::React {
                message: personad::core::model::MessageId(1),
                emoji: "🦄".into(),
            },
            send("after the reaction"),
        ])
    });
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.telegram
        .fail_next(Op::React, TelegramError::Invalid("REACTION_INVALID".into()));
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|s| s.1).collect();
    assert_eq!(texts, vec!["after the reaction".to_string()]);
    h.stop().await?;
    Ok(())
}

/// A text of 60 paragraphs (about 8,000 UTF-16 units).
fn long_text() -> String {
    (0..60)
        .map(|i| format!("Paragraph {i}: {}", "words and more words ".repeat(7)))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn words(texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .flat_map(|t| t.split_whitespace())
        .map(str::to_string)
        .collect()
}

/// A send longer than one Telegram message (the in-memory Telegram refuses one, as Telegram
/// does) goes out as several, in order, each within the limit, together the whole text.
#[tokio::test]
async fn a_text_longer_than_one_message_goes_out_in_parts() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(9);
    let body = long_text();
    let text = body.clone();
    let planner = ScriptedPlanner::new(move |_, _| Ok(vec![send(&text)]));
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.say(&chat, "Bob", "tell me everything").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|s| s.1).collect();
    assert!(texts.len() >= 2, "{} messages", texts.len());
    assert!(texts.iter().all(|t| t.encode_utf16().count() <= 4096));
    assert!(words(&texts) == words(&[body]), "the parts are the text");
    h.stop().await?;
    Ok(())
}

/// A part Telegram still refuses as too long (MESSAGE_TOO_LONG: its count and ours differ)
/// is split at half the length and sent as smaller parts; nothing is lost or doubled.
#[tokio::test]
async fn a_part_refused_as_too_long_is_split_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(10);
    let body = long_text();
    let text = body.clone();
    let planner = ScriptedPlanner::new(move |_, _| Ok(vec![send(&text)]));
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.telegram.fail_next(
        Op::SendText,
        TelegramError::TooLong("MESSAGE_TOO_LONG (400)".into()),
    );
    h.say(&chat, "Bob", "tell me everything").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|s| s.1).collect();
    assert!(texts.len() >= 3, "{} messages", texts.len());
    assert!(
        texts
            .iter()
            .take(2)
            .all(|t| t.encode_utf16().count() <= 2048),
        "the refused part went out in halves"
    );
    assert!(
        words(&texts) == words(&[body]),
        "the parts are the text: {:?}",
        texts
            .iter()
            .map(|t| (
                t.encode_utf16().count(),
                t.chars().take(14).collect::<String>()
            ))
            .collect::<Vec<_>>()
    );
    h.stop().await?;
    Ok(())
}

/// The parts of a long text carry keys derived from the task's: the same text sent again
/// with the same key (a retry after a crash) posts nothing twice; only the first part
/// replies; a part that cannot be split small enough leaves the refusal standing.
#[tokio::test]
async fn the_parts_of_a_long_text_are_sent_once_and_only_the_first_replies() -> TestResult {
    use personad::adapters::memory::MemoryTelegram;
    use personad::core::model::{MessageId, OutgoingText};
    use personad::ports::clock::{SharedClock, VirtualClock};
    use personad::ports::telegram::send_in_parts;
    let clock: SharedClock = std::sync::Arc::new(VirtualClock::new(t0(), true));
    let tg = MemoryTelegram::new("Wren", clock, None)?;
    let chat = dm(11);
    tg.ensure_chat(chat.clone());
    let msg = OutgoingText {
        chat: chat.id,
        text: long_text(),
        reply_to: Some(MessageId(3)),
        idempotency_key: 42,
    };
    let sent = send_in_parts(&tg, msg.clone()).await?;
    assert!(sent.len() >= 2);
    assert!(
        sent[0].text.encode_utf16().count() > 2048,
        "split to fit before sending, not after a refusal"
    );
    assert_eq!(sent[0].reply_to, Some(MessageId(3)));
    assert!(sent[1..].iter().all(|m| m.reply_to.is_none()));
    let again = send_in_parts(&tg, msg.clone()).await?;
    assert_eq!(again, sent, "the same messages, none posted twice");
    assert_eq!(tg.transcript(chat.id).len(), sent.len());
    for _ in 0..8 {
        tg.fail_next(
            Op::SendText,
            TelegramError::TooLong("MESSAGE_TOO_LONG (400)".into()),
        );
    }
    let refused = send_in_parts(
        &tg,
        OutgoingText {
            idempotency_key: 43,
            ..msg
        },
    )
    .await;
    assert!(
        matches!(refused, Err(TelegramError::TooLong(_))),
        "{refused:?}"
    );
    Ok(())
}
