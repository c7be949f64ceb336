//! `xsend`, the original's note to the persona's future self in another chat, through the real
//! runtime, the real LLM planner and a mock Gemini: Alice asks the persona to pass a greeting
//! to Bob; its plan in Alice's chat leaves a note for Bob's chat; Bob's chat gets a plan whose
//! request carries the note once (the next one does not), and no message anyone gets carries
//! it. A note to a chat the persona does not have, to its own chat, or to a paused chat is
//! refused, with nothing planned there.

mod common;

use common::gemini::*;
use common::{AGENT, Harness, TestResult, config};
use personad::core::agent_state::Pause;
use personad::core::model::ChatId;
use personad::core::scheduler::OwnerRequest;

/// Words only the note holds.
const NOTE: &str = "Alice asked me to say hi to Bob from her, with a lemon cake emoji";
const MARK: &str = "lemon cake emoji";

#[tokio::test]
async fn a_note_reaches_the_other_chats_next_request_once_and_no_message() -> TestResult {
    let bob = person("Bob");
    let alice = person("Alice");
    let target = bob.id.0;
    let server = common::gemini::answering(move |newest| {
        if newest.contains("tell Bob") {
            reply(&format!(
                "# «send»\nSure, I will!\n\n# «xsend» {target}\n{NOTE}"
            ))
        } else if newest.contains("to nowhere") {
            reply(&format!("# «xsend» 424242\n{NOTE}"))
        } else {
            reply("# «send»\nHey there!")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let chats = [alice.clone(), bob.clone()];
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    h.started().await;
    // Bob has written before: his chat is one of the persona's.
    h.say(&bob, "Bob", "morning!").await;
    h.settle().await;
    h.say(&alice, "Alice", "please tell Bob I said hi").await;
    h.settle().await;
    h.say(&bob, "Bob", "what's new?").await;
    h.settle().await;
    let bodies = bodies(&server).await;
    let with_note: Vec<&String> = bodies.iter().filter(|b| b.contains(MARK)).collect();
    // Alice's own request has her words, not the note; the plan made in Bob's chat for the
    // note is the one request that carries it.
    assert_eq!(with_note.len(), 1, "{bodies:#?}");
    assert!(with_note[0].contains("A note to yourself, left in another of your chats"));
    assert!(with_note[0].contains("(from your chat with Alice)"));
    // Bob's later message is planned without it.
    let last = bodies.last().ok_or("no request")?;
    assert!(
        last.contains("what's new?") && !last.contains(MARK),
        "{last}"
    );
    for (chat, text, _) in h.sends() {
        assert!(!text.contains(MARK), "chat {chat} got the note: {text}");
    }
    assert!(
        h.sends_to(bob.id).len() >= 2,
        "Bob's chat was not planned for the note: {:?}",
        h.sends()
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn notes_to_unknown_own_or_paused_chats_are_refused() -> TestResult {
    let (alice, bob) = (person("Alice"), person("Bob"));
    let (alice_id, bob_id) = (alice.id.0, bob.id.0);
    let server = common::gemini::answering(move |newest| {
        let to = if newest.contains("nowhere") {
            424_242
        } else if newest.contains("yourself") {
            alice_id
        } else if newest.contains("paused") {
            bob_id
        } else {
            return reply("# «send»\nok");
        };
        reply(&format!("# «xsend» {to}\n{NOTE}"))
    })
    .await;
    let dir = tempfile::tempdir()?;
    let chats = [alice.clone(), bob.clone()];
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&bob, "Bob", "hello").await;
    h.settle().await;
    let pause = Pause {
        since: common::t0(),
        until: None,
    };
    h.handle
        .owner(
            AGENT,
            OwnerRequest::Pause {
                chat: Some(bob.id),
                pause,
            },
        )
        .await;
    for text in [
        "note to nowhere",
        "note to yourself",
        "note to the paused chat",
    ] {
        h.say(&alice, "Alice", text).await;
        h.settle().await;
    }
    let bodies = bodies(&server).await;
    assert!(!bodies.iter().any(|b| b.contains(MARK)), "{bodies:#?}");
    assert!(h.sends_to(ChatId(424_242)).is_empty());
    assert!(h.sends_to(bob.id).len() <= 1, "{:?}", h.sends());
    let mut refused = Vec::new();
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "xsend_refused" {
            refused.push(e.notable.detail);
        }
    }
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused[0].contains("not one of this persona's chats"),
        "{refused:?}"
    );
    assert!(refused[1].contains("is this chat"), "{refused:?}");
    assert!(refused[2].contains("is paused"), "{refused:?}");
    h.stop().await?;
    Ok(())
}

/// The target may be the name the chat goes by, as the persona's history knows it: "Bob"
/// reaches Bob's chat (its title, case aside); a name no chat goes by is refused, with
/// nothing planned anywhere for it.
#[tokio::test]
async fn a_note_by_name_reaches_the_chat_of_that_name() -> TestResult {
    let (alice, bob) = (person("Alice"), person("Bob Stone"));
    let server = common::gemini::answering(move |newest| {
        if newest.contains("tell Bob") {
            reply(&format!(
                r#"[{{"kind": "send", "text": "Will do"}},
                    {{"kind": "xsend", "target_channel_id": "bob", "intent": "{NOTE}"}}]"#
            ))
        } else if newest.contains("tell Zed") {
            reply(&format!("# «xsend» Zed\n{NOTE}"))
        } else {
            reply("# «send»\nHey there!")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let chats = [alice.clone(), bob.clone()];
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&bob, "Bob Stone", "morning!").await;
    h.settle().await;
    h.say(&alice, "Alice", "please tell Zed I said hi").await;
    h.settle().await;
    assert!(!bodies(&server).await.iter().any(|b| b.contains(MARK)));
    h.say(&alice, "Alice", "please tell Bob I said hi").await;
    h.settle().await;
    let bodies = bodies(&server).await;
    let with_note: Vec<&String> = bodies.iter().filter(|b| b.contains(MARK)).collect();
    assert_eq!(with_note.len(), 1, "{bodies:#?}");
    assert!(h.sends_to(bob.id).len() >= 2, "{:?}", h.sends());
    let mut refused = Vec::new();
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "xsend_refused" {
            refused.push(e.notable.detail);
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("\"zed\""), "{refused:?}");
    h.stop().await?;
    Ok(())
}

/// The caps count across a restart: two notes into Bob's chat, a restart, then two more; the
/// fourth is over the 3 a chat may get per day and is refused.
#[tokio::test]
async fn the_daily_caps_survive_a_restart() -> TestResult {
    let (alice, bob) = (person("Alice"), person("Bob"));
    let target = bob.id.0;
    let make = || {
        common::gemini::answering(move |newest| {
            if newest.contains("tell Bob") {
                reply(&format!("# «xsend» {target}\n{NOTE}"))
            } else {
                reply("# «send»\nok")
            }
        })
    };
    let dir = tempfile::tempdir()?;
    let chats = [alice.clone(), bob.clone()];
    let server = make().await;
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    h.started().await;
    h.say(&bob, "Bob", "hello").await;
    h.settle().await;
    for n in 0..2 {
        h.say(&alice, "Alice", &format!("tell Bob hi ({n})")).await;
        h.settle().await;
    }
    h.stop().await?;
    let server = make().await;
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    let mut notables = h.handle.observe_notables();
    h.started().await;
    for n in 2..4 {
        h.say(&alice, "Alice", &format!("tell Bob hi ({n})")).await;
        h.settle().await;
    }
    let mut refused = Vec::new();
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "xsend_refused" {
            refused.push(e.notable.detail);
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("already got 3 notes today"),
        "{refused:?}"
    );
    h.stop().await?;
    Ok(())
}
