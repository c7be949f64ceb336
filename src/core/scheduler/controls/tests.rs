//! The owner's requests and answers in the pure scheduler: what they change in the graphs
//! and in the agent's state, with no runtime.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use crate::core::admission::Admission;
use crate::core::agent_state::Pause;
use crate::core::config::RuntimeConfig;
use crate::core::graph::{ConversationKey, TaskSpec};
use crate::core::group::settings::TriggerMode;
use crate::core::model::{Chat, ChatId, ChatKind, MessageId};
use crate::core::safety::AccountSafety;
use crate::core::scheduler::{Effect, OwnerReply, OwnerRequest, Scheduler};

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
        + SignedDuration::from_secs(secs)
}

fn chat(id: i64) -> Chat {
    Chat {
        id: ChatId(id),
        kind: ChatKind::Direct,
        title: format!("c{id}"),
    }
}

/// Agent "a", whose own account (Saved Messages) is user 1.
fn sched() -> Scheduler {
    let mut self_ids = HashMap::new();
    self_ids.insert("a".to_string(), 1);
    let mut s = Scheduler::new(
        Arc::new(RuntimeConfig::default()),
        ["a".to_string()],
        AccountSafety::new(self_ids),
    );
    s.add_agent("a", 1, Default::default(), at(0));
    s
}

fn saves_state(effects: &[Effect]) -> bool {
    effects
        .iter()
        .any(|e| matches!(e, Effect::SaveAgentState(a) if a == "a"))
}

/// A pause holds the paused chat's plan where it is (and only that chat's): nothing of it
/// starts while paused, the graph stays, the pause is kept in the agent's state (a save
/// follows); resuming every chat lifts it and the held plan starts.
#[test]
fn a_pause_holds_the_chats_plan_and_lives_in_the_agent_state_until_resumed() {
    let mut s = sched();
    for id in [7, 8] {
        s.admit(
            "a",
            chat(id),
            MessageId(1),
            Admission::from_trigger(true),
            at(0),
        );
    }
    s.take_effects();
    let pause = Pause {
        since: at(1),
        until: None,
    };
    let reply = s.owner_request(
        "a",
        OwnerRequest::Pause {
            chat: Some(ChatId(7)),
            pause,
        },
        at(1),
    );
    assert_eq!(
        reply,
        OwnerReply::Done {
            dropped: vec![],
            held: vec![ChatId(7)]
        }
    );
    assert!(s.graph(&ConversationKey::new("a", ChatId(7))).is_some());
    assert!(s.graph(&ConversationKey::new("a", ChatId(8))).is_some());
    assert!(saves_state(&s.take_effects()), "the pause was not saved");
    assert!(s.is_paused("a", ChatId(7), at(100)));
    assert!(!s.is_paused("a", ChatId(8), at(100)));
    let state = s.safety().state("a").cloned().unwrap_or_default();
    assert!(state.pauses.chats.contains_key(&ChatId(7)));
    // Past the debounce, only the unpaused chat's plan starts.
    s.advance(at(100));
    s.start_ready(at(100));
    assert_eq!(started(&s.take_effects()), [ChatId(8)]);
    s.owner_request("a", OwnerRequest::Resume { chat: None }, at(101));
    s.advance(at(101));
    s.start_ready(at(101));
    let effects = s.take_effects();
    assert!(saves_state(&effects));
    assert_eq!(started(&effects), [ChatId(7)], "the held plan goes on");
    assert!(!s.is_paused("a", ChatId(7), at(200)));
}

/// The chats whose tasks `effects` start.
fn started(effects: &[Effect]) -> Vec<ChatId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Start(start) => Some(start.key.chat),
            _ => None,
        })
        .collect()
}

/// A group's trigger mode and a chat's draft mode live in the agent's state; setting the
/// same mode again changes (and saves) nothing.
#[test]
fn modes_live_in_the_agent_state_and_an_unchanged_mode_is_not_saved_again() {
    let mut s = sched();
    let request = OwnerRequest::GroupMode {
        chat: ChatId(-5),
        mode: Some(TriggerMode::Talkative),
    };
    s.owner_request("a", request.clone(), at(0));
    assert!(saves_state(&s.take_effects()));
    s.owner_request("a", request, at(1));
    assert!(
        !saves_state(&s.take_effects()),
        "an unchanged mode was saved"
    );
    let state = s.safety().state("a").cloned().unwrap_or_default();
    assert_eq!(
        state.group_modes.get(&ChatId(-5)),
        Some(&TriggerMode::Talkative)
    );
}

/// The answer to a command is a send in the command's chat, replying to it; queued twice
/// (a command delivered again) it is one task with one idempotency key.
#[test]
fn a_commands_answer_is_one_send_replying_to_it_in_its_chat() {
    let mut s = sched();
    let own = chat(1);
    s.answer_owner("a", own.clone(), MessageId(5), "personad: done", at(0));
    s.answer_owner("a", own.clone(), MessageId(5), "personad: done", at(0));
    let graph = s
        .graph(&ConversationKey::new("a", own.id))
        .cloned()
        .unwrap_or_else(|| panic!("no graph for the owner's chat"));
    let sends: Vec<_> = graph
        .tasks
        .iter()
        .filter_map(|t| match &t.spec {
            TaskSpec::Send {
                text,
                reply_to,
                idempotency_key,
            } => Some((text.clone(), *reply_to, *idempotency_key)),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 1, "{sends:?}");
    assert_eq!(sends[0].0, "personad: done");
    assert_eq!(sends[0].1, Some(MessageId(5)));
    // Another command gets another key.
    s.answer_owner("a", own.clone(), MessageId(6), "personad: done", at(1));
    let keys: Vec<_> = s
        .graph(&ConversationKey::new("a", own.id))
        .map(|g| {
            g.tasks
                .iter()
                .filter_map(|t| match &t.spec {
                    TaskSpec::Send {
                        idempotency_key, ..
                    } => Some(*idempotency_key),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1]);
}

/// An answer queued in the admin chat the persona names stays when the owner writes there
/// again (their next command cancels nothing there), as in Saved Messages. (The chat is also
/// an `--admin-chat`; the persona's naming is what lets the answer go there.)
#[test]
fn the_owners_next_message_in_an_admin_chat_keeps_the_waiting_answer() {
    let mut self_ids = HashMap::new();
    self_ids.insert("a".to_string(), 1);
    let config = RuntimeConfig {
        admin_chats: vec![ChatId(-40)],
        ..RuntimeConfig::default()
    };
    let mut s = Scheduler::new(
        Arc::new(config),
        ["a".to_string()],
        AccountSafety::new(self_ids),
    );
    s.add_agent("a", 1, Default::default(), at(0));
    s.set_admin_chat("a", Some(ChatId(-40)));
    let admin = Chat {
        id: ChatId(-40),
        kind: ChatKind::Group,
        title: "ops".into(),
    };
    s.answer_owner("a", admin.clone(), MessageId(3), "personad: done", at(0));
    s.on_cancel("a", admin.id, "the owner wrote in this chat", at(1));
    assert!(
        s.graph(&ConversationKey::new("a", admin.id)).is_some(),
        "the owner's next message dropped the answer"
    );
}

/// The sends queued in `chat`'s graph: text and the message replied to.
fn sends_in(s: &Scheduler, chat: i64) -> Vec<(String, Option<MessageId>)> {
    s.graph(&ConversationKey::new("a", ChatId(chat)))
        .map(|g| {
            g.tasks
                .iter()
                .filter_map(|t| match &t.spec {
                    TaskSpec::Send { text, reply_to, .. } => Some((text.clone(), *reply_to)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A command written in an `--admin-chat` the persona does not name is answered in Saved
/// Messages (no reply: the command is in another chat), never in that chat, whose members
/// would read it; once the persona names an admin chat, answers go there, and a command
/// written there is answered in place.
#[test]
fn a_commands_answer_never_goes_to_a_chat_the_persona_did_not_name() {
    let mut self_ids = HashMap::new();
    self_ids.insert("a".to_string(), 1);
    let config = RuntimeConfig {
        admin_chats: vec![ChatId(-40)],
        ..RuntimeConfig::default()
    };
    let mut s = Scheduler::new(
        Arc::new(config),
        ["a".to_string()],
        AccountSafety::new(self_ids),
    );
    s.add_agent("a", 1, Default::default(), at(0));
    let group = |id: i64| Chat {
        id: ChatId(id),
        kind: ChatKind::Group,
        title: "ops".into(),
    };
    s.answer_owner("a", group(-40), MessageId(3), "personad: one", at(0));
    assert!(sends_in(&s, -40).is_empty(), "answered in the admin group");
    assert_eq!(sends_in(&s, 1), [("personad: one".to_string(), None)]);
    // The persona names -50: answers to commands from -40 go there, and -50's own are
    // answered in place.
    s.set_admin_chat("a", Some(ChatId(-50)));
    s.answer_owner("a", group(-40), MessageId(4), "personad: two", at(1));
    s.answer_owner("a", group(-50), MessageId(5), "personad: three", at(2));
    assert!(sends_in(&s, -40).is_empty(), "answered in the admin group");
    assert_eq!(
        sends_in(&s, -50),
        [
            ("personad: two".to_string(), None),
            ("personad: three".to_string(), Some(MessageId(5)))
        ]
    );
}

/// A message that reached the queue before the admission chain knew of a pause (the
/// agent's state was not read yet) is still not planned.
#[test]
fn a_paused_chats_message_is_never_planned_even_past_the_chain() {
    let mut s = sched();
    let pause = Pause {
        since: at(0),
        until: None,
    };
    s.owner_request(
        "a",
        OwnerRequest::Pause {
            chat: Some(ChatId(7)),
            pause,
        },
        at(0),
    );
    assert!(!s.admit(
        "a",
        chat(7),
        MessageId(2),
        Admission::from_trigger(true),
        at(1)
    ));
    assert!(s.graph(&ConversationKey::new("a", ChatId(7))).is_none());
}

/// A message of a paused direct chat is held (the newest per chat, saved with the agent
/// state) and planned when the owner resumes; a group's is not held; a chat still paused by
/// a pause of every chat keeps its held message; a chat with no message is not planned.
#[test]
fn a_paused_chats_newest_message_is_held_and_planned_on_resume() {
    let mut s = sched();
    let pause = Pause {
        since: at(0),
        until: None,
    };
    s.owner_request(
        "a",
        OwnerRequest::Pause {
            chat: None,
            pause: pause.clone(),
        },
        at(0),
    );
    s.take_effects();
    for id in [3, 5, 4] {
        assert!(!s.admit("a", chat(7), MessageId(id), Admission::Paused, at(1)));
    }
    let group = Chat {
        id: ChatId(-9),
        kind: ChatKind::Group,
        title: "g".into(),
    };
    s.admit("a", group, MessageId(2), Admission::Paused, at(1));
    assert!(
        saves_state(&s.take_effects()),
        "the held message was not saved"
    );
    let held = s
        .safety()
        .state("a")
        .map(|st| st.held.clone())
        .unwrap_or_default();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held.get(&ChatId(7)).map(|h| h.message), Some(MessageId(5)));
    let key = ConversationKey::new("a", ChatId(7));

    // Chat 7 is paused on its own too: `Resume { chat: 7 }` lifts only that pause, and the
    // pause of every chat still holds it.
    s.owner_request(
        "a",
        OwnerRequest::Pause {
            chat: Some(ChatId(7)),
            pause,
        },
        at(2),
    );
    s.owner_request(
        "a",
        OwnerRequest::Resume {
            chat: Some(ChatId(7)),
        },
        at(3),
    );
    assert!(
        s.graph(&key).is_none(),
        "planned while every chat is paused"
    );
    s.owner_request("a", OwnerRequest::Resume { chat: None }, at(4));
    let planned = s
        .graph(&key)
        .and_then(|g| g.tasks.first())
        .map(|t| t.spec.clone());
    assert!(
        matches!(
            planned,
            Some(TaskSpec::Received {
                message_id: Some(MessageId(5)),
                ..
            })
        ),
        "{planned:?}"
    );
    assert!(s.graph(&ConversationKey::new("a", ChatId(-9))).is_none());
    assert!(s.graph(&ConversationKey::new("a", ChatId(8))).is_none());
    let state = s.safety().state("a").cloned().unwrap_or_default();
    assert!(state.held.is_empty());
    assert!(state.already_handled(ChatId(7), MessageId(5)));
}

/// A message the chain marked paused that reaches the scheduler after the resume is planned
/// (a direct chat's) or stays history (a group's, which skipped the group decision).
#[test]
fn a_message_marked_paused_but_admitted_after_the_resume_is_planned_in_a_direct_chat() {
    let mut s = sched();
    assert!(s.admit("a", chat(7), MessageId(3), Admission::Paused, at(1)));
    let group = Chat {
        id: ChatId(-9),
        kind: ChatKind::Group,
        title: "g".into(),
    };
    assert!(!s.admit("a", group, MessageId(3), Admission::Paused, at(1)));
    assert!(s.graph(&ConversationKey::new("a", ChatId(7))).is_some());
    assert!(s.graph(&ConversationKey::new("a", ChatId(-9))).is_none());
}
