//! Every request of the MTProto backend through the one seam, offline: history pages,
//! dialog walks and the duplicate-send look-up run as raw TL calls
//! against the scripted [`Invoker`](personad::adapters::mtproto::invoker::Invoker) of
//! `wire_support`; plus what they feed back into the live path (forum topics, learnt peers),
//! the attribution of a failed channel difference, and our own pts handed to grammers.
//! Downloads are in `mtproto_media.rs`.

mod common;
mod wire_support;

use std::sync::Arc;

use common::tl::{DATE, SELF_ID, channel, message, peer_channel, peer_user, user};
use grammers_client::InvocationError;
use grammers_client::sender::RpcError;
use grammers_client::session::Session;
use grammers_client::session::types::PeerId;
use grammers_client::session::updates::UpdatesLike;
use grammers_client::tl::{self, Identifiable};
use personad::adapters::mtproto::pump::{SourceError, TgUpdate};
use personad::core::model::{ChatId, MessageId};
use personad::ports::telegram::Telegram;
use wire_support::*;

// ---------------------------------------------------------------------------------------
// History pages.

/// `fetch_history` is raw messages.getHistory through the invoker: pages of at most 100,
/// the next one older than the oldest id of the last, mapped oldest first with the senders'
/// names from the answers.
#[tokio::test]
async fn history_is_read_in_raw_get_history_pages_oldest_first() {
    let a = account().await;
    let dm = ChatId(ALICE);
    a.wire.on::<tl::functions::messages::GetHistory>(|req| {
        assert_eq!((req.offset_id, req.limit), (0, 100));
        let page = (51..=150)
            .rev()
            .map(|id| message(id, peer_user(ALICE), Some(peer_user(ALICE)), "x"))
            .collect();
        slice(page, 400)
    });
    a.wire.on::<tl::functions::messages::GetHistory>(|req| {
        assert_eq!((req.offset_id, req.limit), (51, 20));
        let page = (31..=50)
            .rev()
            .map(|id| message(id, peer_user(ALICE), Some(peer_user(ALICE)), "y"))
            .collect();
        slice(page, 400)
    });
    let got = a.telegram.fetch_history(dm, 120).await.unwrap();
    assert_eq!(got.len(), 120);
    assert_eq!(got.first().unwrap().id, MessageId(31));
    assert_eq!(got.last().unwrap().id, MessageId(150));
    assert_eq!(got[0].sender.name, "Alice");
    let asked = a.wire.requests::<tl::functions::messages::GetHistory>();
    assert_eq!(input_user(&asked[0].peer), (ALICE, ALICE_HASH));
    assert_eq!(
        a.wire.names(),
        vec!["messages.getHistory", "messages.getHistory"]
    );
}

/// A history page read before an answer (the `received` step) must not move a forum
/// conversation back to the topic of the page's oldest message: after a live message in
/// topic 12 and a page holding topics 12 and 99, the unquoted part and the typing go to
/// topic 12.
#[tokio::test]
async fn a_history_page_does_not_move_the_conversation_to_an_older_topic() {
    let a = account().await;
    let forum = supergroup(CHANNEL);
    let (mut source, tx) = source(&a).await;
    let live = in_topic(
        message(
            41,
            peer_channel(CHANNEL),
            Some(peer_user(ALICE)),
            "in topic 12",
        ),
        12,
    );
    tx.send(UpdatesLike::Updates(tl::enums::Updates::Updates(
        tl::types::Updates {
            updates: vec![
                tl::types::UpdateNewChannelMessage {
                    message: live.clone().into(),
                    pts: 1,
                    pts_count: 1,
                }
                .into(),
            ],
            users: vec![user(ALICE, "Alice", None, None, false)],
            chats: vec![channel(CHANNEL, "Forum", false)],
            date: DATE,
            seq: 0,
        },
    )))
    .await
    .unwrap();
    assert_eq!(new_message(next(&mut source).await).chat.id, forum);
    a.wire.on::<tl::functions::messages::GetHistory>(move |_| {
        let older = in_topic(
            message(
                30,
                peer_channel(CHANNEL),
                Some(peer_user(ALICE)),
                "in topic 99",
            ),
            99,
        );
        channel_messages(
            vec![live, older],
            vec![user(ALICE, "Alice", None, None, false)],
            vec![channel(CHANNEL, "Forum", false)],
        )
    });
    let page = a.telegram.fetch_history(forum, 50).await.unwrap();
    assert_eq!(page.len(), 2);
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(70));
    a.wire
        .on::<tl::functions::messages::SetTyping>(|_| ok(true));
    a.telegram.typing(forum).await.unwrap();
    a.telegram
        .send_text(text(forum.0, "and another thing", 5))
        .await
        .unwrap();
    let typing = a.wire.requests::<tl::functions::messages::SetTyping>();
    assert_eq!(typing[0].top_msg_id, Some(12), "typing in topic 12");
    let sent = a.wire.requests::<tl::functions::messages::SendMessage>();
    match &sent[0].reply_to {
        Some(tl::enums::InputReplyTo::Message(m)) => assert_eq!(m.reply_to_msg_id, 12),
        other => panic!("not in topic 12: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// The duplicate-send look-up.

/// RANDOM_ID_DUPLICATE for a send the ledger does not know (it was lost with a crash):
/// the chat's recent history, read through the invoker, names our message with that text.
#[tokio::test]
async fn a_duplicate_send_is_found_in_the_recent_history_through_the_invoker() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "RANDOM_ID_DUPLICATE", None));
    a.wire.on::<tl::functions::messages::GetHistory>(|req| {
        assert_eq!(req.limit, 20);
        let theirs = message(90, peer_user(ALICE), Some(peer_user(ALICE)), "hello");
        let mut ours = message(88, peer_user(ALICE), Some(peer_user(SELF_ID)), "hello");
        ours.out = true;
        plain_messages(vec![theirs, ours], Vec::new())
    });
    let sent = a
        .telegram
        .send_text(text(ALICE, "hello", 4040))
        .await
        .unwrap();
    assert_eq!(sent.id, MessageId(88));
    assert_eq!(
        a.telegram.ledger().by_random_id(ChatId(ALICE), 4040),
        Some(MessageId(88))
    );
    assert_eq!(
        a.wire.names(),
        vec!["messages.sendMessage", "messages.getHistory"]
    );
}

// ---------------------------------------------------------------------------------------
// The live first-contact path.

/// First contact on the live path: a stranger's short DM names no user object, so the
/// reply meets PEER_ID_INVALID; the backend fetches that very message (getMessages), caches
/// the sender it carries and retries, without walking the dialogs.
#[tokio::test]
async fn a_live_first_contact_learns_the_sender_from_its_own_message() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    tx.send(short_message(1, 10, STRANGER, "hi, remember me?"))
        .await
        .unwrap();
    assert_eq!(
        new_message(next(&mut source).await).message.id,
        MessageId(10)
    );
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "PEER_ID_INVALID", None));
    a.wire.on::<tl::functions::messages::GetMessages>(|req| {
        assert!(matches!(
            &req.id[..],
            [tl::enums::InputMessage::Id(m)] if m.id == 10
        ));
        plain_messages(
            vec![message(
                10,
                peer_user(STRANGER),
                Some(peer_user(STRANGER)),
                "hi, remember me?",
            )],
            vec![with_hash(
                user(STRANGER, "Sam", None, None, false),
                STRANGER_HASH,
            )],
        )
    });
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(11));
    a.telegram
        .send_text(text(STRANGER, "of course!", 3))
        .await
        .unwrap();
    assert_eq!(
        a.wire.names(),
        vec![
            "messages.sendMessage",
            "messages.getMessages",
            "messages.sendMessage"
        ]
    );
    let sends = a.wire.requests::<tl::functions::messages::SendMessage>();
    assert_eq!(input_user(&sends[1].peer), (STRANGER, STRANGER_HASH));
}

// ---------------------------------------------------------------------------------------
// The channel of a failed difference.

/// grammers prepares a channel difference by looking up the channel, then the self user;
/// another task looking up another channel in between (a send's peer, `enrich`) must not
/// be blamed: a failed getChannelDifference names the channel grammers prepared.
#[tokio::test]
async fn a_failed_channel_difference_blames_the_prepared_channel_not_a_concurrent_look_up() {
    use personad::adapters::mtproto::errors::stream_error;
    use personad::adapters::mtproto::guarded::in_update_machinery;
    let a = account().await;
    let session = Arc::clone(&a.session);
    in_update_machinery(async {
        let prepared = PeerId::channel(CHANNEL).unwrap();
        session.peer(prepared).await.unwrap();
        // Meanwhile, in another task: a look-up of another supergroup.
        let other = Arc::clone(&session);
        tokio::spawn(async move {
            other
                .peer(PeerId::channel(UNKNOWN_CHANNEL).unwrap())
                .await
                .unwrap();
        })
        .await
        .unwrap();
        session.peer(PeerId::self_user()).await.unwrap();
    })
    .await;
    let failed = InvocationError::Rpc(RpcError {
        code: 420,
        name: "FLOOD_WAIT".into(),
        value: Some(40),
        caused_by: Some(tl::functions::updates::GetChannelDifference::CONSTRUCTOR_ID),
    });
    match stream_error(&failed, || a.session.difference_channel()) {
        SourceError::Transient {
            channel: Some(channel),
            ..
        } => assert_eq!(channel, CHANNEL),
        other => panic!("no channel blamed: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// The unread scan's dialog walk.

fn dm_dialog(user_id: i64, top: i32, unread: i32) -> tl::enums::Dialog {
    tl::types::Dialog {
        pinned: false,
        unread_mark: false,
        view_forum_as_messages: false,
        peer: peer_user(user_id),
        top_message: top,
        read_inbox_max_id: 0,
        read_outbox_max_id: 0,
        unread_count: unread,
        unread_mentions_count: 0,
        unread_reactions_count: 0,
        unread_poll_votes_count: 0,
        notify_settings: tl::types::PeerNotifySettings {
            show_previews: None,
            silent: None,
            mute_until: None,
            ios_sound: None,
            android_sound: None,
            other_sound: None,
            stories_muted: None,
            stories_hide_sender: None,
            stories_ios_sound: None,
            stories_android_sound: None,
            stories_other_sound: None,
        }
        .into(),
        pts: None,
        draft: None,
        folder_id: None,
        ttl_period: None,
    }
    .into()
}

/// One page of DM dialogs with users `ids` (hash = id + 1), the one of `unread_from` unread.
fn dm_dialogs(
    ids: std::ops::Range<i64>,
    unread_from: i64,
) -> (
    Vec<tl::enums::Dialog>,
    Vec<tl::enums::Message>,
    Vec<tl::enums::User>,
) {
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for id in ids {
        let top = i32::try_from(id).unwrap() - 1000;
        out.0.push(dm_dialog(id, top, i32::from(id == unread_from)));
        out.1.push(
            message(
                top,
                peer_user(id),
                Some(peer_user(id)),
                &format!("from {id}"),
            )
            .into(),
        );
        out.2.push(with_hash(
            user(id, &format!("U{id}"), None, None, false),
            id + 1,
        ));
    }
    out
}

/// The unread scan walks every page of messages.getDialogs through the invoker (the next
/// page after the last dialog of the previous one, as grammers' iterator does), caches each
/// page's users and hands each unread dialog's newest message to admission.
#[tokio::test]
async fn the_unread_scan_walks_every_dialogs_page_through_the_invoker() {
    use personad::adapters::mtproto::scan_unread;
    let a = account().await;
    a.wire.on::<tl::functions::messages::GetDialogs>(|req| {
        assert_eq!((req.offset_id, req.limit), (0, 100));
        let (dialogs, messages, users) = dm_dialogs(2000..2100, 2050);
        ok(tl::enums::messages::Dialogs::Slice(
            tl::types::messages::DialogsSlice {
                count: 101,
                dialogs,
                messages,
                chats: Vec::new(),
                users,
            },
        ))
    });
    a.wire.on::<tl::functions::messages::GetDialogs>(|req| {
        assert!(req.exclude_pinned);
        assert_eq!((req.offset_id, req.offset_date), (1099, DATE));
        assert_eq!(input_user(&req.offset_peer), (2099, 2100));
        let (dialogs, messages, users) = dm_dialogs(3000..3001, 3000);
        ok(tl::enums::messages::Dialogs::Dialogs(
            tl::types::messages::Dialogs {
                dialogs,
                messages,
                chats: Vec::new(),
                users,
            },
        ))
    });
    let found = scan_unread("Wren", a.session.as_ref(), Arc::clone(&a.telegram), None).await;
    let senders: Vec<(i64, String)> = found
        .into_iter()
        .map(|u| {
            let m = new_message(u);
            (m.message.sender.id, m.message.sender.name)
        })
        .collect();
    assert_eq!(
        senders,
        vec![(2050, "U2050".to_string()), (3000, "U3000".to_string())]
    );
    assert_eq!(
        a.wire.names(),
        vec!["messages.getDialogs", "messages.getDialogs"]
    );
    let cached = a
        .session
        .peer_ref(PeerId::user(3000).unwrap())
        .await
        .unwrap();
    assert_eq!(cached.map(|r| r.auth.hash()), Some(3001));
}

// ---------------------------------------------------------------------------------------
// Our own pts changes, handed to grammers' update machinery.

fn affected_history(pts: i32, pts_count: i32) -> Answer {
    ok(tl::enums::messages::AffectedHistory::History(
        tl::types::messages::AffectedHistory {
            pts,
            pts_count,
            offset: 0,
        },
    ))
}

/// The next new message of the source, past deletions (grammers turns a handed pts into an
/// empty deletion); a source error (grammers went for a difference: there is no network
/// here) fails the test.
async fn next_new_message(source: &mut personad::adapters::mtproto::GrammersSource) -> i64 {
    loop {
        match next(source).await {
            TgUpdate::NewMessage(m) => return m.message.id.0,
            TgUpdate::Deleted { ids, .. } => assert!(ids.is_empty(), "{ids:?}"),
            other => panic!("{other:?}"),
        }
    }
}

/// deleteHistory and readMentions answer with AffectedHistory, which grammers 0.11 does not
/// take as updates: the backend hands their pts to the update stream, so the server's next
/// update does not look like a gap (which would cost a getDifference).
#[tokio::test]
async fn pts_of_delete_history_and_read_mentions_reach_grammers_so_no_difference_follows() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    a.telegram.feed_updates_to(&tx);
    tx.send(short_message(1, 10, ALICE, "first")).await.unwrap();
    assert_eq!(next_new_message(&mut source).await, 10);
    a.wire
        .on::<tl::functions::messages::DeleteHistory>(|_| affected_history(3, 2));
    a.telegram
        .delete_history(ChatId(ALICE), true)
        .await
        .unwrap();
    tx.send(short_message(4, 12, ALICE, "after the clear"))
        .await
        .unwrap();
    assert_eq!(next_new_message(&mut source).await, 12);
    // A mention in a basic group, then reading the chat clears it with readMentions.
    let mut mention = message(
        13,
        common::tl::peer_chat(GROUP),
        Some(peer_user(ALICE)),
        "@wren_here look",
    );
    mention.mentioned = true;
    tx.send(container(
        5,
        mention,
        vec![user(ALICE, "Alice", None, None, false)],
        vec![common::tl::basic_group(GROUP, "Club")],
    ))
    .await
    .unwrap();
    assert_eq!(next_new_message(&mut source).await, 13);
    // readHistory's AffectedMessages is grammers' own to feed (its sender does): pts_count 0.
    a.wire.on::<tl::functions::messages::ReadHistory>(|_| {
        ok(tl::enums::messages::AffectedMessages::Messages(
            tl::types::messages::AffectedMessages {
                pts: 5,
                pts_count: 0,
            },
        ))
    });
    a.wire
        .on::<tl::functions::messages::ReadMentions>(|_| affected_history(6, 1));
    a.telegram
        .mark_read(ChatId(-GROUP), MessageId(13))
        .await
        .unwrap();
    tx.send(short_message(7, 14, ALICE, "and now"))
        .await
        .unwrap();
    assert_eq!(next_new_message(&mut source).await, 14);
    assert_eq!(
        a.wire.names(),
        vec![
            "messages.deleteHistory",
            "messages.readHistory",
            "messages.readMentions"
        ]
    );
}
