//! The send governor on the in-memory backend and a virtual clock that auto-advances: calls
//! run inside `clock::with_task_hold` as the runtime runs tasks, and every timing claim is
//! checked against the clock's time recorded with each action (no test sleeps for real).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestResult, dm, group, secs, t0};
use jiff::Timestamp;
use personad::adapters::governor::{FirstContact, Governor, GovernorConfig};
use personad::adapters::memory::{Action, Incoming, MemoryTelegram};
use personad::core::model::{
    ChatId, MessageId, OutgoingSticker, OutgoingText, StickerChoice, TelegramError,
};
use personad::ports::clock::{self, SharedClock, VirtualClock};
use personad::ports::telegram::Telegram;

struct Setup {
    clock: SharedClock,
    mem: Arc<MemoryTelegram>,
    gov: Arc<Governor<MemoryTelegram>>,
}

fn setup(config: GovernorConfig) -> Result<Setup, Box<dyn std::error::Error>> {
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), true));
    let mem = Arc::new(MemoryTelegram::new("agent", Arc::clone(&clock), None)?);
    let gov = Arc::new(Governor::new(Arc::clone(&mem), Arc::clone(&clock), config));
    Ok(Setup { clock, mem, gov })
}

/// A DM where the other person has written to us; returns their message.
async fn open_dm(
    mem: &MemoryTelegram,
    id: i64,
) -> Result<personad::core::model::Message, TelegramError> {
    mem.ensure_chat(dm(id));
    mem.inject(
        ChatId(id),
        Incoming {
            from: format!("user{id}"),
            text: "hi".into(),
            ..Incoming::default()
        },
    )
    .await
}

fn text(chat: i64, key: i64) -> OutgoingText {
    OutgoingText {
        chat: ChatId(chat),
        text: format!("message {key}"),
        reply_to: None,
        idempotency_key: key,
    }
}

/// Runs `f` the way the runtime runs a task: holding the clock.
async fn as_task<F: Future>(clock: &SharedClock, f: F) -> F::Output {
    clock::with_task_hold(clock.hold(), f).await
}

/// (chat, time) of every message we sent, in order of recording.
fn sends(mem: &MemoryTelegram) -> Vec<(ChatId, Timestamp)> {
    mem.actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Action::Send { chat, .. } | Action::Sticker { chat, .. } => Some((chat, r.at)),
            _ => None,
        })
        .collect()
}

fn after(t: Duration) -> Timestamp {
    clock::add(t0(), t)
}

/// Any `limit + 1` consecutive sends span at least a minute.
fn assert_window(times: &[Timestamp], limit: usize, what: &str) {
    let mut sorted = times.to_vec();
    sorted.sort();
    for w in sorted.windows(limit + 1) {
        let span = w[limit].duration_since(w[0]);
        assert!(
            span >= jiff::SignedDuration::from_secs(60),
            "{what}: {} sends within {span:?}",
            limit + 1
        );
    }
}

/// The default budgets hold over every recorded send.
fn assert_budgets(all: &[(ChatId, Timestamp)]) {
    let times: Vec<Timestamp> = all.iter().map(|(_, t)| *t).collect();
    assert_window(&times, 20, "account");
    let mut chats: Vec<ChatId> = all.iter().map(|(c, _)| *c).collect();
    chats.sort();
    chats.dedup();
    for chat in chats {
        let mut times: Vec<Timestamp> = all
            .iter()
            .filter(|(c, _)| *c == chat)
            .map(|(_, t)| *t)
            .collect();
        times.sort();
        for w in times.windows(2) {
            assert!(
                w[1].duration_since(w[0]) >= jiff::SignedDuration::from_secs(3),
                "chat {chat}: sends {} and {} closer than 3 s",
                w[0],
                w[1]
            );
        }
        assert_window(&times, 10, &format!("chat {chat}"));
    }
}

#[tokio::test]
async fn two_sends_in_one_chat_are_at_least_3s_apart() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    open_dm(&s.mem, 1).await?;
    as_task(&s.clock, async {
        s.gov.send_text(text(1, 1)).await?;
        s.gov.send_text(text(1, 2)).await?;
        // A sticker is a message too.
        s.gov
            .send_sticker(OutgoingSticker {
                chat: ChatId(1),
                sticker: StickerChoice {
                    set: "set".into(),
                    name: "wave".into(),
                },
                reply_to: None,
                idempotency_key: 3,
            })
            .await?;
        Ok::<_, TelegramError>(())
    })
    .await?;
    let at: Vec<Timestamp> = sends(&s.mem).into_iter().map(|(_, t)| t).collect();
    assert_eq!(at, vec![t0(), after(secs(3)), after(secs(6))]);
    let stats = s.gov.stats();
    assert_eq!((stats.sleeps, stats.slept, stats.refusals), (2, secs(6), 0));
    Ok(())
}

/// A persona's `# Send Limits` (parsed by the real persona parser) set the governor's
/// figures, and a reload's new limits apply from the next message on.
#[tokio::test]
async fn a_personas_send_limits_pace_its_account_and_a_reload_changes_them() -> TestResult {
    let persona = common::persona_with("ann", "# Send Limits\nper chat 2/min, gap 10s\n");
    let s = setup(GovernorConfig::default().with_limits(&persona.send_limits))?;
    open_dm(&s.mem, 1).await?;
    as_task(&s.clock, async {
        for key in 0..3 {
            s.gov.send_text(text(1, key)).await?;
        }
        Ok::<_, TelegramError>(())
    })
    .await?;
    let at: Vec<Timestamp> = sends(&s.mem).into_iter().map(|(_, t)| t).collect();
    // 10 s apart, and the third waits for the first to leave the minute.
    assert_eq!(at, vec![t0(), after(secs(10)), after(secs(60))]);
    let looser = common::persona_with("ann", "# Send Limits\ngap 1s\n");
    s.gov
        .set_config(GovernorConfig::default().with_limits(&looser.send_limits));
    as_task(&s.clock, async {
        s.gov.send_text(text(1, 10)).await?;
        s.gov.send_text(text(1, 11)).await
    })
    .await?;
    let at: Vec<Timestamp> = sends(&s.mem).into_iter().map(|(_, t)| t).collect();
    assert_eq!(at[3..], [after(secs(61)), after(secs(62))]);
    Ok(())
}

#[tokio::test]
async fn a_chat_gets_at_most_10_messages_a_minute() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    open_dm(&s.mem, 1).await?;
    as_task(&s.clock, async {
        for key in 0..11 {
            s.gov.send_text(text(1, key)).await?;
        }
        Ok::<_, TelegramError>(())
    })
    .await?;
    let at: Vec<Timestamp> = sends(&s.mem).into_iter().map(|(_, t)| t).collect();
    assert_eq!(at.len(), 11);
    // Ten 3 s apart, then the 11th waits for the first to leave the window.
    assert_eq!(at[9], after(secs(27)));
    assert_eq!(at[10], after(secs(60)));
    assert_budgets(&sends(&s.mem));
    Ok(())
}

#[tokio::test]
async fn the_21st_send_of_a_minute_waits_for_the_account_window() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    for id in 1..=25 {
        open_dm(&s.mem, id).await?;
    }
    as_task(&s.clock, async {
        for id in 1..=25 {
            s.gov.send_text(text(id, id)).await?;
        }
        Ok::<_, TelegramError>(())
    })
    .await?;
    let sent = sends(&s.mem);
    assert_eq!(sent.len(), 25);
    assert!(sent[..20].iter().all(|(_, t)| *t == t0()));
    assert!(sent[20..].iter().all(|(_, t)| *t == after(secs(60))));
    assert_budgets(&sent);
    let stats = s.gov.stats();
    // Only the 21st sleeps; the 22nd to 25th find the window already moved on.
    assert_eq!((stats.sleeps, stats.refusals), (1, 0));
    assert_eq!(stats.slept, secs(60));
    Ok(())
}

#[tokio::test]
async fn a_wait_over_max_wait_is_refused_with_a_flood_wait() -> TestResult {
    let s = setup(GovernorConfig {
        max_wait: secs(30),
        ..GovernorConfig::default()
    })?;
    for id in 1..=25 {
        open_dm(&s.mem, id).await?;
    }
    let results = as_task(&s.clock, async {
        let mut results = Vec::new();
        for id in 1..=25 {
            results.push(s.gov.send_text(text(id, id)).await);
        }
        results
    })
    .await;
    assert!(results[..20].iter().all(Result::is_ok));
    for r in &results[20..] {
        assert_eq!(r, &Err(TelegramError::FloodWait { secs: 60 }));
    }
    assert!(results[20].as_ref().is_err_and(TelegramError::is_transient));
    // Refusals neither sleep nor use up the budget, and no time passed.
    assert_eq!(s.clock.now(), t0());
    assert_eq!(sends(&s.mem).len(), 20);
    let stats = s.gov.stats();
    assert_eq!((stats.sleeps, stats.refusals), (0, 5));
    // Once the window has moved on, the refused chats can send.
    as_task(&s.clock, async {
        clock::pause(&*s.clock, secs(60)).await;
        s.gov.send_text(text(21, 21)).await
    })
    .await?;
    assert_eq!(sends(&s.mem).last(), Some(&(ChatId(21), after(secs(60)))));
    Ok(())
}

#[tokio::test]
async fn no_first_message_into_a_chat_where_nobody_wrote() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    s.mem.ensure_chat(dm(7));
    let first = as_task(&s.clock, s.gov.send_text(text(7, 1))).await;
    assert!(
        matches!(&first, Err(TelegramError::Invalid(m)) if m.starts_with("no first messages")),
        "{first:?}"
    );
    assert!(first.as_ref().is_err_and(|e| !e.is_transient()));
    // Our own earlier messages do not count as contact.
    s.mem.send_text(text(7, 99)).await?;
    s.mem
        .inject(
            ChatId(7),
            Incoming {
                from: "Bob".into(),
                text: "hello?".into(),
                ..Incoming::default()
            },
        )
        .await?;
    // The negative answer is cached for a minute: no history call, still refused.
    let cached = as_task(&s.clock, s.gov.send_text(text(7, 2))).await;
    assert!(matches!(cached, Err(TelegramError::Invalid(_))));
    // After the recheck interval the history shows Bob's message.
    as_task(&s.clock, async {
        clock::pause(&*s.clock, secs(60)).await;
        s.gov.send_text(text(7, 3)).await
    })
    .await?;
    assert_eq!(sends(&s.mem).last(), Some(&(ChatId(7), after(secs(60)))));
    // Contacted stays contacted, even when the history is cleared.
    s.mem.delete_history(ChatId(7), true).await?;
    as_task(&s.clock, s.gov.send_text(text(7, 4))).await?;
    let stats = s.gov.stats();
    assert_eq!((stats.refusals, stats.first_contact_refusals), (2, 2));
    Ok(())
}

#[tokio::test]
async fn a_history_read_through_the_governor_marks_the_chat_contacted() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    s.mem.ensure_chat(group(-5));
    let refused = as_task(&s.clock, s.gov.send_text(text(-5, 1))).await;
    assert!(matches!(refused, Err(TelegramError::Invalid(_))));
    s.mem
        .inject(
            ChatId(-5),
            Incoming {
                from: "Carol".into(),
                text: "anyone here?".into(),
                ..Incoming::default()
            },
        )
        .await?;
    // The `received` handler reads the history before planning; the governor sees it.
    as_task(&s.clock, async {
        s.gov.fetch_history(ChatId(-5), 20).await?;
        s.gov.send_text(text(-5, 2)).await
    })
    .await?;
    assert_eq!(sends(&s.mem), vec![(ChatId(-5), t0())]);
    Ok(())
}

#[tokio::test]
async fn the_owner_alert_into_saved_messages_is_no_first_contact() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    let saved = s.mem.self_id();
    s.mem.ensure_chat(dm(saved));
    as_task(&s.clock, s.gov.send_text(text(saved, 1))).await?;
    assert_eq!(sends(&s.mem), vec![(ChatId(saved), t0())]);
    Ok(())
}

#[tokio::test]
async fn first_contact_can_be_allowed_by_config() -> TestResult {
    let s = setup(GovernorConfig {
        first_contact: FirstContact::Allow,
        ..GovernorConfig::default()
    })?;
    s.mem.ensure_chat(dm(8));
    as_task(&s.clock, s.gov.send_text(text(8, 1))).await?;
    assert_eq!(sends(&s.mem).len(), 1);
    Ok(())
}

#[tokio::test]
async fn reactions_typing_and_reads_pass_through_immediately() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    for id in 1..=20 {
        open_dm(&s.mem, id).await?;
    }
    s.mem.ensure_chat(dm(30)); // nobody wrote here: reactions and typing still pass
    as_task(&s.clock, async {
        // Use up the account budget and the chat gap.
        for id in 1..=20 {
            s.gov.send_text(text(id, id)).await?;
        }
        s.gov.react(ChatId(1), MessageId(1), "👍").await?;
        s.gov.typing(ChatId(1)).await?;
        s.gov.typing(ChatId(30)).await?;
        s.gov.mark_read(ChatId(1), MessageId(1)).await?;
        s.gov.fetch_history(ChatId(30), 10).await?;
        // A second indicator within 4 s is dropped silently, a later one goes out.
        s.gov.typing(ChatId(1)).await?;
        clock::pause(&*s.clock, secs(4)).await;
        s.gov.typing(ChatId(1)).await?;
        Ok::<_, TelegramError>(())
    })
    .await?;
    let others: Vec<(Timestamp, &'static str)> = s
        .mem
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Action::React { .. } => Some((r.at, "react")),
            Action::Typing { .. } => Some((r.at, "typing")),
            Action::Read { .. } => Some((r.at, "read")),
            _ => None,
        })
        .collect();
    assert_eq!(
        others,
        vec![
            (t0(), "react"),
            (t0(), "typing"),
            (t0(), "typing"),
            (t0(), "read"),
            (after(secs(4)), "typing"),
        ]
    );
    let stats = s.gov.stats();
    assert_eq!(
        (stats.sleeps, stats.refusals, stats.typing_dropped),
        (0, 0, 1)
    );
    Ok(())
}

#[tokio::test]
async fn a_backend_error_is_returned_once_and_not_retried() -> TestResult {
    use personad::adapters::memory::Op;
    let s = setup(GovernorConfig::default())?;
    open_dm(&s.mem, 1).await?;
    s.mem
        .fail_next(Op::SendText, TelegramError::Network("reset".into()));
    let r = as_task(&s.clock, s.gov.send_text(text(1, 1))).await;
    assert_eq!(r, Err(TelegramError::Network("reset".into())));
    assert!(sends(&s.mem).is_empty());
    // The slot stays used: the retried send keeps the 3 s gap.
    as_task(&s.clock, s.gov.send_text(text(1, 1))).await?;
    assert_eq!(sends(&s.mem), vec![(ChatId(1), after(secs(3)))]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_sends_from_ten_concurrent_chats_keep_both_budgets() -> TestResult {
    let s = setup(GovernorConfig {
        max_wait: secs(3600),
        ..GovernorConfig::default()
    })?;
    for id in 1..=10 {
        open_dm(&s.mem, id).await?;
    }
    let mut tasks = Vec::new();
    for id in 1..=10 {
        // One task per chat at a time, as the runtime guarantees; chats run concurrently.
        let (gov, hold) = (Arc::clone(&s.gov), s.clock.hold());
        tasks.push(tokio::spawn(clock::with_task_hold(hold, async move {
            for i in 0..10 {
                gov.send_text(text(id, id * 100 + i)).await?;
            }
            Ok::<_, TelegramError>(())
        })));
    }
    for task in tasks {
        task.await??;
    }
    let sent = sends(&s.mem);
    assert_eq!(sent.len(), 100);
    assert_budgets(&sent);
    // 100 messages at 20 a minute: the last batch cannot start before +4 min.
    let last = sent.iter().map(|(_, t)| *t).max().unwrap_or(t0());
    assert!(last >= after(secs(240)), "last send at {last}");
    assert_eq!(s.gov.stats().refusals, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_simultaneous_sends_are_paced_or_refused_never_overbooked() -> TestResult {
    let s = setup(GovernorConfig::default())?;
    for id in 1..=10 {
        open_dm(&s.mem, id).await?;
    }
    // Even ten at once per chat (more than the runtime ever does) cannot break the limits.
    // Time stands still until every task exists, so all of them ask at t0.
    let spawning = s.clock.hold();
    let mut tasks = Vec::new();
    for id in 1..=10 {
        for i in 0..10 {
            let (gov, hold) = (Arc::clone(&s.gov), s.clock.hold());
            tasks.push(tokio::spawn(clock::with_task_hold(hold, async move {
                gov.send_text(text(id, id * 100 + i)).await
            })));
        }
    }
    drop(spawning);
    let mut refused = 0;
    for task in tasks {
        match task.await? {
            Ok(_) => {}
            Err(TelegramError::FloodWait { secs }) => {
                assert!(secs > 60, "refused a wait of {secs} s");
                refused += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let sent = sends(&s.mem);
    assert_eq!(sent.len() + refused, 100);
    // Which chats win depends on arrival order, but the first 20 always fit within
    // max_wait (below 20 sends only the per-chat limits bind, and they allow 10 in 27 s).
    assert!(sent.len() >= 20, "sent {}", sent.len());
    assert!(refused > 0);
    assert_budgets(&sent);
    let latest = sent.iter().map(|(_, t)| *t).max().unwrap_or(t0());
    assert!(latest <= after(secs(60)), "slept past max_wait: {latest}");
    assert_eq!(s.gov.stats().refusals, refused as u64);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_runtime_a_refused_send_is_parked_and_goes_out_later() -> TestResult {
    use common::{AGENT, ScriptedPlanner, config, persona, send};
    use personad::adapters::store::{GraphStore, StateDir};
    use personad::ports::planner::SharedPlanner;
    use personad::runtime::{AgentHandle, Runtime};

    let dir = tempfile::tempdir()?;
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), true));
    let hold = clock.hold();
    let mem = Arc::new(MemoryTelegram::new(AGENT, Arc::clone(&clock), None)?);
    let gov = Arc::new(Governor::new(
        Arc::clone(&mem),
        Arc::clone(&clock),
        GovernorConfig {
            max_wait: secs(10),
            ..GovernorConfig::default()
        },
    ));
    let planner: SharedPlanner = Arc::new(ScriptedPlanner::new(|_, _| {
        Ok(vec![send("one"), send("two")])
    }));
    let runtime = Runtime::new(
        config(),
        vec![AgentHandle {
            persona: Arc::new(persona(AGENT)),
            telegram: gov.clone(),
        }],
        planner,
        GraphStore::new(StateDir::new(dir.path())),
        Arc::clone(&clock),
    )
    .with_stickers(Arc::new(personad::adapters::stickers::StickerCatalog::new()));
    let handle = runtime.handle();
    let run = tokio::spawn(runtime.run());
    // Fifteen people write at once; each gets two messages: 30 sends against 20 a minute.
    for id in 1..=15 {
        let msg = open_dm(&mem, id).await?;
        handle.push_inbound(AGENT, dm(id), msg, true);
    }
    drop(hold);
    handle.wait_idle().await;
    let sent = sends(&mem);
    assert_eq!(sent.len(), 30, "every refused send went out after its park");
    assert_budgets(&sent);
    let stats = gov.stats();
    assert!(
        stats.refusals > 0 && stats.first_contact_refusals == 0,
        "{stats:?}"
    );
    handle.shutdown("test over");
    run.await?.map_err(|e| e.to_string())?;
    Ok(())
}

/// A chat that refuses stickers (CHAT_SEND_STICKERS_FORBIDDEN, a Premium-only sticker) gets
/// the sticker's name as text instead, and later stickers go straight to text; a refused
/// reaction is skipped. The chat itself stays usable.
#[tokio::test]
async fn refused_stickers_fall_back_to_text_and_refused_reactions_are_skipped() -> TestResult {
    use personad::adapters::memory::Op;
    let s = setup(GovernorConfig::default())?;
    let inbound = open_dm(&s.mem, 1).await?;
    let sticker = |key| OutgoingSticker {
        chat: ChatId(1),
        sticker: StickerChoice {
            set: "set".into(),
            name: "👋".into(),
        },
        reply_to: None,
        idempotency_key: key,
    };
    s.mem.fail_next(
        Op::SendSticker,
        TelegramError::ContentRefused("CHAT_SEND_STICKERS_FORBIDDEN (403)".into()),
    );
    s.mem.fail_next(
        Op::React,
        TelegramError::ContentRefused("PREMIUM_ACCOUNT_REQUIRED (400)".into()),
    );
    as_task(&s.clock, async {
        let first = s.gov.send_sticker(sticker(1)).await?;
        assert_eq!(first.text, "👋");
        let second = s.gov.send_sticker(sticker(2)).await?;
        assert_eq!(second.text, "👋");
        s.gov.react(ChatId(1), inbound.id, "🦄").await?;
        s.gov.send_text(text(1, 3)).await?;
        Ok::<_, TelegramError>(())
    })
    .await?;
    let kinds: Vec<&str> = s
        .mem
        .actions()
        .iter()
        .filter_map(|r| match &r.action {
            Action::Send { .. } => Some("text"),
            Action::Sticker { .. } => Some("sticker"),
            Action::React { .. } => Some("react"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["text", "text", "text"]);
    Ok(())
}
