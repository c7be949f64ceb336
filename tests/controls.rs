//! Owner controls in process, through the real runtime on the in-memory Telegram and virtual
//! time: the gate in front of the queue lets a paused chat's messages in without planning,
//! names chats by @username, and a command written by someone else is never planned.

mod common;

use common::{AGENT, Harness, TestResult, config, controls, dm, reply_with, secs};
use personad::adapters::store::StateDir;
use personad::app::ops::controls::Op;
use personad::core::model::{ChatId, Message, MessageId, Sender};

fn from_user(chat: ChatId, id: i64, username: &str, text: &str, h: &Harness) -> Message {
    Message {
        id: MessageId(id),
        chat,
        sender: Sender {
            id: chat.0,
            name: "Alice".into(),
            username: Some(username.into()),
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: false,
        text: text.into(),
        mentions: Vec::new(),
        reply_to: None,
        date: h.shared_clock.now(),
        media: None,
    }
}

#[tokio::test]
async fn a_chat_named_by_username_is_paused_and_its_messages_do_not_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let alice = dm(5);
    let mut h = Harness::start(
        dir.path(),
        reply_with("hi"),
        config(),
        std::slice::from_ref(&alice),
    );
    let (ctl, gated) = controls(&h);
    // Alice writes: she is answered, and her username is now known.
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 1, "alice_w", "hello", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends().len(), 1);
    let answer = ctl
        .execute(
            Some(AGENT),
            Op::Pause {
                chat: Some("@Alice_W".into()),
                secs: Some(3600),
            },
        )
        .await?;
    assert!(answer.contains("paused chat 5"), "{answer}");
    assert!(ctl.is_paused(AGENT, alice.id));
    // Paused: the message is let in but not planned.
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 2, "alice_w", "you there?", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends().len(), 1, "a paused chat was answered");
    // An hour later the pause has run out.
    h.pass(secs(3601)).await;
    assert!(!ctl.is_paused(AGENT, alice.id));
    // A command from Alice is not executed and not planned.
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 3, "alice_w", "/pause all", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends().len(), 1, "a stranger's command was planned");
    assert!(!ctl.is_paused(AGENT, ChatId(99)));
    // Her next ordinary message is answered again.
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 4, "alice_w", "hello?", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends().len(), 2);
    // The pause was saved for the next start, in the agent's state (the runtime's record).
    let (saved, _) = personad::adapters::store::load_agent_state(&StateDir::new(&h.state), AGENT)?;
    assert!(saved.pauses.chats.contains_key(&ChatId(5)));
    h.stop().await?;
    Ok(())
}

/// A request to a runtime whose loop has ended is answered `None` (nobody waits forever on
/// a stopped daemon).
#[tokio::test]
async fn an_owner_request_after_the_loop_ended_answers_none() -> TestResult {
    let dir = tempfile::tempdir()?;
    let h = Harness::start(dir.path(), reply_with("hi"), config(), &[dm(5)]);
    let handle = h.handle.clone();
    h.stop().await?;
    let reply = handle
        .owner(
            AGENT,
            personad::core::scheduler::OwnerRequest::Plans { chat: None },
        )
        .await;
    assert_eq!(reply, None);
    Ok(())
}
