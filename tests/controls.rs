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

/// The owner's `/approve-mode` in Saved Messages overrides the persona's `# Approval` for one
/// chat, both ways, until `default` clears it: under `# Approval all`, the chat set `off` is
/// answered at once while another chat's plan waits as a draft; the chat set `default`
/// waits again. (On virtual time: each step is checked once the runtime is idle.)
#[tokio::test]
async fn approve_mode_overrides_the_personas_approval_per_chat_until_default() -> TestResult {
    use common::{persona_with, reply_with};
    use personad::core::model::{Chat, ChatKind};
    use personad::ports::telegram::Telegram;
    let dir = tempfile::tempdir()?;
    let (alice, bob) = (dm(5), dm(6));
    let planner = std::sync::Arc::new(reply_with("hi"));
    let p = std::sync::Arc::clone(&planner);
    let mut h = Harness::start_as(
        persona_with(AGENT, "# Approval\nall\n"),
        dir.path(),
        move |_| p,
        config(),
        &[alice.clone(), bob.clone()],
        None,
        None,
    );
    let (_ctl, gated) = controls(&h);
    let me = h.telegram.self_id();
    let saved = Chat {
        id: ChatId(me),
        kind: ChatKind::Direct,
        title: "Saved Messages".into(),
    };
    let owner_says = |id: i64, text: &str, h: &Harness| {
        let mut m = from_user(saved.id, id, "owner", text, h);
        m.sender.id = me;
        m.outgoing = true;
        gated.push(AGENT, saved.clone(), m, true);
    };
    let drafts_for = |h: &Harness, chat: &Chat| {
        h.owner_notices()
            .iter()
            .filter(|t| {
                t.starts_with("personad: draft draft-")
                    && t.contains(&format!(" in {}\n", chat.title))
            })
            .count()
    };
    // The controller carries a command out on a task of its own: idle, then answered.
    let answered = async |h: &mut Harness, n: usize| {
        for _ in 0..100 {
            h.settle().await;
            if h.owner_notices().len() >= n {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    owner_says(100, "/approve-mode 5 off", &h);
    answered(&mut h, 1).await;
    assert!(
        h.owner_notices().iter().any(|t| t.contains("off")),
        "no answer to the command: {:?}",
        h.owner_notices()
    );
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 1, "alice", "hello", &h),
        true,
    );
    gated.push(
        AGENT,
        bob.clone(),
        from_user(bob.id, 1, "bob", "hello", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends_to(alice.id), ["hi"], "the chat set off waited");
    assert_eq!(drafts_for(&h, &alice), 0);
    assert!(
        h.sends_to(bob.id).is_empty(),
        "the persona's `all` did not hold"
    );
    assert_eq!(drafts_for(&h, &bob), 1, "{:?}", h.owner_notices());
    // `default`: the persona's `all` again.
    let told = h.owner_notices().len();
    owner_says(101, "/approve-mode 5 default", &h);
    answered(&mut h, told + 1).await;
    gated.push(
        AGENT,
        alice.clone(),
        from_user(alice.id, 2, "alice", "again", &h),
        true,
    );
    h.settle().await;
    assert_eq!(h.sends_to(alice.id), ["hi"], "answered without a draft");
    assert_eq!(drafts_for(&h, &alice), 1, "{:?}", h.owner_notices());
    h.stop().await?;
    Ok(())
}
