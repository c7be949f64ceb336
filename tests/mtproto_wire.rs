//! The MTProto backend and update source at grammers' own seam, offline:
//! - outbound: the real `MtprotoTelegram` code (sends, peer learning, deleteHistory's loop,
//!   read marks per peer type, reactions, typing, error classes) runs against a scripted
//!   [`Invoker`] that decodes each TL request and answers with TL objects or RPC errors;
//! - inbound: grammers' own update machinery (`Client::stream_updates` over a channel of raw
//!   `UpdatesLike`) feeds `GrammersSource`, the pump and the real runtime.
//!
//! The `Client` has no running connection pool: anything that would reach the network fails
//! at once with `Dropped`, so what a test sees is exactly what the backend asked the invoker.

mod common;
mod wire_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tl::{
    DATE, SELF_ID, basic_group, channel, dialogs_page, message, peer_channel, peer_chat, peer_user,
    reply_header, user,
};
use grammers_client::sender::RpcError;
use grammers_client::session::Session;
use grammers_client::session::storages::SqliteSession;
use grammers_client::session::types::PeerInfo;
use grammers_client::session::updates::UpdatesLike;
use grammers_client::tl::{self, Identifiable};
use grammers_client::{Client, InvocationError, SenderPool};
use personad::adapters::mtproto::GrammersSource;
use personad::adapters::mtproto::backend::MtprotoTelegram;
use personad::adapters::mtproto::guarded::GuardedSession;
use personad::adapters::mtproto::pump::{TgUpdate, UpdateSource};
use personad::adapters::mtproto::sent::SentLedger;
use personad::core::model::{ChatId, MessageId, TelegramError};
use personad::core::time::BoxFuture;
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::telegram::Telegram;
use tokio::sync::mpsc;
use wire_support::*;

// ---------------------------------------------------------------------------------------
// Outbound, through the invoker.

/// A send carries the task's idempotency key as Telegram's random_id (so a repeated send
/// after a crash is refused by Telegram, not sent twice) and the peer's access hash from
/// the session; the new message id is recorded as ours.
#[tokio::test]
async fn a_send_uses_the_idempotency_key_as_random_id_and_records_the_new_id() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(55));
    let sent = a
        .telegram
        .send_text(text(ALICE, "hi **there**", 777))
        .await
        .unwrap();
    assert_eq!(sent.id, MessageId(55));
    let requests = a.wire.requests::<tl::functions::messages::SendMessage>();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].random_id, 777);
    assert_eq!(input_user(&requests[0].peer), (ALICE, ALICE_HASH));
    assert_eq!(requests[0].message, "hi there");
    assert!(requests[0].entities.as_ref().is_some_and(|e| e.len() == 1));
    assert!(a.telegram.ledger().recorded(ChatId(ALICE), MessageId(55)));
}

/// Telegram answers RANDOM_ID_DUPLICATE to a send an earlier run already made: the message
/// id comes from the sent ledger, and nothing is sent again.
#[tokio::test]
async fn a_duplicate_random_id_is_resolved_through_the_ledger_without_a_second_send() {
    let a = account().await;
    a.telegram
        .ledger()
        .record(ChatId(ALICE), MessageId(54), 778);
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "RANDOM_ID_DUPLICATE", None));
    let sent = a.telegram.send_text(text(ALICE, "hi", 778)).await.unwrap();
    assert_eq!(sent.id, MessageId(54));
    assert_eq!(a.wire.names(), vec!["messages.sendMessage"]);
}

/// First contact: a user the session has no access hash for. The send is refused with
/// PEER_ID_INVALID, the backend learns the peer from the first page of dialogs, and the
/// send is retried once, now with the hash.
#[tokio::test]
async fn a_first_contact_send_learns_the_peer_and_is_retried_once_with_its_hash() {
    let a = account().await;
    let stranger = 5555;
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "PEER_ID_INVALID", None));
    a.wire.on::<tl::functions::messages::GetDialogs>(move |_| {
        let mut u = user(stranger, "Sam", None, None, false);
        if let tl::enums::User::User(u) = &mut u {
            u.access_hash = Some(9090);
        }
        ok(dialogs_page(vec![u]))
    });
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(60));
    let sent = a
        .telegram
        .send_text(text(stranger, "hello", 900))
        .await
        .unwrap();
    assert_eq!(sent.id, MessageId(60));
    let sends = a.wire.requests::<tl::functions::messages::SendMessage>();
    assert_eq!(sends.len(), 2, "{:?}", a.wire.names());
    assert_eq!(
        input_user(&sends[0].peer),
        (stranger, 0),
        "first try: no hash"
    );
    assert_eq!(
        input_user(&sends[1].peer),
        (stranger, 9090),
        "retry: learnt hash"
    );
    assert_eq!(sends[1].random_id, 900, "the same idempotency key");
}

/// A peer that cannot be learnt is not retried forever: one learning round, then the
/// error reaches the runtime as "not found".
#[tokio::test]
async fn an_unlearnable_peer_fails_after_one_learning_round() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "PEER_ID_INVALID", None));
    a.wire
        .on::<tl::functions::messages::GetDialogs>(|_| ok(dialogs_page(Vec::new())));
    let err = a
        .telegram
        .send_text(text(6666, "hello", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, TelegramError::NotFound(_)), "{err:?}");
    assert_eq!(
        a.wire.names(),
        vec!["messages.sendMessage", "messages.getDialogs"]
    );
}

/// A flood wait on a send reaches the runtime with its seconds (it parks the chat).
#[tokio::test]
async fn a_flood_wait_on_a_send_is_reported_with_its_seconds() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(420, "FLOOD_WAIT", Some(31)));
    let err = a
        .telegram
        .send_text(text(ALICE, "hi", 2))
        .await
        .unwrap_err();
    assert_eq!(err, TelegramError::FloodWait { secs: 31 });
}

/// deleteHistory is repeated while Telegram reports more left (a long history goes in
/// parts), and revokes for the other side only when asked.
#[tokio::test]
async fn delete_history_repeats_while_more_is_left_and_revokes_only_when_asked() {
    let a = account().await;
    for offset in [20, 10, 0] {
        a.wire
            .on::<tl::functions::messages::DeleteHistory>(move |_| affected(offset));
    }
    a.telegram
        .delete_history(ChatId(ALICE), true)
        .await
        .unwrap();
    let calls = a.wire.requests::<tl::functions::messages::DeleteHistory>();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| c.revoke && !c.just_clear));
    a.wire
        .on::<tl::functions::messages::DeleteHistory>(|_| affected(0));
    a.telegram
        .delete_history(ChatId(ALICE), false)
        .await
        .unwrap();
    let last = a.wire.requests::<tl::functions::messages::DeleteHistory>();
    assert!(!last[3].revoke, "mine only: not revoked");
}

/// Reading marks a DM with messages.readHistory and a supergroup with channels.readHistory.
#[tokio::test]
async fn read_marks_use_the_call_of_each_peer_type() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::ReadHistory>(|_| affected_messages());
    a.wire
        .on::<tl::functions::channels::ReadHistory>(|_| ok(true));
    a.telegram
        .mark_read(ChatId(ALICE), MessageId(12))
        .await
        .unwrap();
    let supergroup = ChatId(-1_000_000_000_000 - CHANNEL);
    a.telegram
        .mark_read(supergroup, MessageId(34))
        .await
        .unwrap();
    assert_eq!(
        a.wire.names(),
        vec!["messages.readHistory", "channels.readHistory"]
    );
    let dm = a.wire.requests::<tl::functions::messages::ReadHistory>();
    assert_eq!(dm[0].max_id, 12);
    let group = a.wire.requests::<tl::functions::channels::ReadHistory>();
    assert_eq!(group[0].max_id, 34);
}

/// A reaction Telegram rejects in one spelling is sent once more in the other (with or
/// without U+FE0F); typing goes to the chat.
#[tokio::test]
async fn a_rejected_reaction_is_retried_in_its_other_spelling_and_typing_is_sent() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SendReaction>(|_| rpc(400, "REACTION_INVALID", None));
    a.wire.on::<tl::functions::messages::SendReaction>(|_| {
        ok(tl::enums::Updates::Updates(tl::types::Updates {
            updates: Vec::new(),
            users: Vec::new(),
            chats: Vec::new(),
            date: DATE,
            seq: 0,
        }))
    });
    a.wire
        .on::<tl::functions::messages::SetTyping>(|_| ok(true));
    a.telegram
        .react(ChatId(ALICE), MessageId(7), "❤️")
        .await
        .unwrap();
    a.telegram.typing(ChatId(ALICE)).await.unwrap();
    let reactions: Vec<String> = a
        .wire
        .requests::<tl::functions::messages::SendReaction>()
        .into_iter()
        .flat_map(|r| r.reaction.unwrap_or_default())
        .map(|r| match r {
            tl::enums::Reaction::Emoji(e) => e.emoticon,
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(reactions, vec!["❤️".to_string(), "❤".to_string()]);
    assert_eq!(
        a.wire
            .requests::<tl::functions::messages::SetTyping>()
            .len(),
        1
    );
}

/// The schedule's online status is `account.updateStatus` as Telegram reads it: asleep sends
/// `offline: true`, reading `offline: false`; a refusal comes back as an error.
#[tokio::test]
async fn the_online_status_is_account_update_status() {
    let a = account().await;
    a.wire
        .on::<tl::functions::account::UpdateStatus>(|_| ok(true));
    a.wire
        .on::<tl::functions::account::UpdateStatus>(|_| ok(true));
    a.wire
        .on::<tl::functions::account::UpdateStatus>(|_| rpc(420, "FLOOD_WAIT_X", Some(30)));
    a.telegram.set_online(false).await.unwrap();
    a.telegram.set_online(true).await.unwrap();
    let third = a.telegram.set_online(false).await;
    let sent: Vec<bool> = a
        .wire
        .requests::<tl::functions::account::UpdateStatus>()
        .into_iter()
        .map(|r| r.offline)
        .collect();
    assert_eq!(sent, vec![true, false, true]);
    assert!(
        matches!(
            third,
            Err(personad::core::model::TelegramError::FloodWait { secs: 30 })
        ),
        "{third:?}"
    );
}

/// An account whose username the start could not learn (Telegram did not answer in time)
/// asks again (users.getUsers on itself), so @username callouts match from then on.
#[tokio::test]
async fn the_username_missed_at_start_is_learnt_later() {
    let a = account_named(None).await;
    assert_eq!(a.telegram.self_username(), None);
    a.wire.on::<tl::functions::users::GetUsers>(|req| {
        assert!(matches!(req.id[..], [tl::enums::InputUser::UserSelf]));
        ok(vec![user(SELF_ID, "Wren", None, Some("wren_here"), false)])
    });
    a.telegram.refresh_self_username().await;
    assert_eq!(a.telegram.self_username().as_deref(), Some("wren_here"));
}

// ---------------------------------------------------------------------------------------
// Inbound, through grammers' own update machinery.

/// A short DM from a user the account never saw (no access hash, no name) comes through
/// grammers as a new message in a direct chat with that user as sender; delivered twice
/// (same pts), it comes out once; Telegram's service account (777000) is marked as such.
#[tokio::test]
async fn short_messages_come_through_grammers_once_and_777000_is_marked_service() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    tx.send(short_message(1, 10, 5555, "hi, remember me?"))
        .await
        .unwrap();
    tx.send(short_message(1, 10, 5555, "hi, remember me?"))
        .await
        .unwrap();
    tx.send(short_message(2, 11, 777_000, "Login code: 12345"))
        .await
        .unwrap();
    let first = new_message(next(&mut source).await);
    assert_eq!(first.chat.id, ChatId(5555));
    assert_eq!(first.chat.kind, personad::core::model::ChatKind::Direct);
    assert_eq!(first.message.sender.id, 5555);
    assert_eq!(first.message.id, MessageId(10));
    assert!(!first.message.sender.service);
    let second = new_message(next(&mut source).await);
    assert_eq!(
        second.message.id,
        MessageId(11),
        "the duplicate was dropped"
    );
    assert!(second.message.sender.service, "777000 is Telegram's");
}

/// In a forum, a part that quotes nothing goes to the topic of the newest message from
/// others (where the conversation is), not to General.
#[tokio::test]
async fn a_part_without_a_quote_goes_to_the_forum_topic_of_the_conversation() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    let mut msg = message(
        41,
        peer_channel(CHANNEL),
        Some(peer_user(ALICE)),
        "in topic",
    );
    let mut header = reply_header(12);
    if let tl::enums::MessageReplyHeader::Header(h) = &mut header {
        h.forum_topic = true;
    }
    msg.reply_to = Some(header);
    tx.send(UpdatesLike::Updates(tl::enums::Updates::Updates(
        tl::types::Updates {
            updates: vec![
                tl::types::UpdateNewChannelMessage {
                    message: msg.into(),
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
    let got = new_message(next(&mut source).await);
    let forum = ChatId(-1_000_000_000_000 - CHANNEL);
    assert_eq!(got.chat.id, forum);
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(70));
    a.telegram
        .send_text(text(forum.0, "and another thing", 5))
        .await
        .unwrap();
    let sent = a.wire.requests::<tl::functions::messages::SendMessage>();
    match &sent[0].reply_to {
        Some(tl::enums::InputReplyTo::Message(m)) => assert_eq!(m.reply_to_msg_id, 12),
        other => panic!("not in the topic: {other:?}"),
    }
}

/// A user object carried by the update (a bot, a deleted account, a support account) marks
/// the sender; a group mention through grammers is a callout.
#[tokio::test]
async fn senders_are_classed_from_the_user_objects_grammers_delivers() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    let bot = user(801, "Echo", None, Some("echo_bot"), true);
    let mut gone = user(802, "", None, None, false);
    if let tl::enums::User::User(u) = &mut gone {
        u.deleted = true;
    }
    let mut support = user(803, "Support", None, None, false);
    if let tl::enums::User::User(u) = &mut support {
        u.support = true;
    }
    for (pts, from, u) in [(1, 801, bot), (2, 802, gone), (3, 803, support)] {
        let msg = message(pts, peer_user(from), Some(peer_user(from)), "ping");
        tx.send(container(pts, msg, vec![u], Vec::new()))
            .await
            .unwrap();
    }
    let mut mention = message(
        4,
        peer_chat(GROUP),
        Some(peer_user(ALICE)),
        "@wren_here are you there?",
    );
    mention.mentioned = true;
    tx.send(container(
        4,
        mention,
        vec![user(ALICE, "Alice", None, None, false)],
        vec![basic_group(GROUP, "Club")],
    ))
    .await
    .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(new_message(next(&mut source).await).message.sender);
    }
    assert!(got[0].is_bot);
    assert!(got[1].deleted);
    assert!(got[2].service);
    let group = new_message(next(&mut source).await);
    assert!(group.callout, "a mention is a callout");
    assert_eq!(group.chat.id, ChatId(-GROUP));
    // Handling the chat clears the mention too (readHistory leaves it counted).
    a.wire
        .on::<tl::functions::messages::ReadHistory>(|_| affected_messages());
    a.wire
        .on::<tl::functions::messages::ReadMentions>(|_| affected(0));
    a.telegram
        .mark_read(ChatId(-GROUP), MessageId(4))
        .await
        .unwrap();
    assert_eq!(
        a.wire.names(),
        vec!["messages.readHistory", "messages.readMentions"]
    );
}

// ---------------------------------------------------------------------------------------
// End to end: grammers' stream → GrammersSource → the pump → the governed runtime → an LLM
// planner against a mock Gemini server.

mod end_to_end {
    use super::*;
    use common::{AGENT, Harness, TestResult, dm};
    use personad::adapters::governor::{Governor, GovernorConfig};
    use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
    use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
    use personad::adapters::mtproto::pump::{
        Lookups, Pump, PumpEnd, PumpOptions, SourceError, SourceFactory,
    };
    use personad::core::model::{Chat, Message};
    use personad::ingress::sink::RuntimeSink;
    use personad::ports::llm::ApiKey;
    use personad::ports::updates::Sink;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio_util::sync::CancellationToken;
    use wiremock::matchers::{method, path_regex};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// The harness's start as Telegram dates it.
    fn now() -> i32 {
        i32::try_from(common::t0().as_second()).unwrap()
    }

    fn fresh_short(pts: i32, id: i32, from: i64, body: &str) -> UpdatesLike {
        let mut u = short_message(pts, id, from, body);
        if let UpdatesLike::Updates(tl::enums::Updates::UpdateShortMessage(m)) = &mut u {
            m.date = now();
        }
        u
    }

    /// Hands the pump one grammers source; closing it drops the feeding channel, which
    /// ends grammers' stream (as a disconnect does).
    struct OneSource {
        source: Mutex<Option<GrammersSource>>,
        feed: Mutex<Option<mpsc::Sender<UpdatesLike>>>,
    }

    impl SourceFactory for OneSource {
        fn open(&self) -> BoxFuture<'_, Result<Box<dyn UpdateSource>, SourceError>> {
            let source = self.source.lock().unwrap().take();
            Box::pin(async move {
                match source {
                    Some(s) => Ok(Box::new(s) as Box<dyn UpdateSource>),
                    None => std::future::pending().await,
                }
            })
        }
        fn close(&self) {
            self.feed.lock().unwrap().take();
        }
    }

    /// The runtime as the pump's sink, counting what the pump handed over.
    struct Counting {
        inner: RuntimeSink,
        seen: AtomicUsize,
    }

    impl Sink for Counting {
        fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
            self.inner.inbound(chat, message, trigger);
            self.seen.fetch_add(1, Ordering::SeqCst);
        }
        fn inbound_addressed(&self, chat: Chat, message: Message, trigger: bool, callout: bool) {
            self.inner
                .inbound_addressed(chat, message, trigger, callout);
            self.seen.fetch_add(1, Ordering::SeqCst);
        }
        fn owner_wrote(&self, chat: Chat, message: Message) {
            self.inner.owner_wrote(chat, message);
        }
        fn edited(&self, chat: Chat, message: Message) {
            self.inner.edited(chat, message);
        }
        fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
            self.inner.deleted(chat, ids);
        }
        fn migrated(&self, from: ChatId, to: ChatId) {
            self.inner.migrated(from, to);
        }
        fn unauthorized(&self, reason: &str) {
            self.inner.unauthorized(reason);
        }
    }

    async fn gemini_server() -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "candidates": [{"content": {"role": "model",
                    "parts": [{"text": "# «send»\nhey, of course!"}]}, "finishReason": "STOP"}]
            })))
            .mount(&server)
            .await;
        server
    }

    /// The runtime on the in-memory backend under the Governor, planning with Gemini.
    fn governed(dir: &std::path::Path, server: &MockServer, chats: &[Chat]) -> Harness {
        let uri = server.uri();
        Harness::start_with_wrapped(
            dir,
            move |_clock| {
                let mut cfg = GeminiConfig::new(ApiKey::new("test-key"));
                cfg.base_url = uri;
                let llm = GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}"));
                Arc::new(LlmPlanner::new(Arc::new(llm), LlmPlannerConfig::default()))
            },
            common::config(),
            chats,
            Box::new(|mem, clock| {
                Arc::new(Governor::new(mem, clock, GovernorConfig::default())) as Arc<dyn Telegram>
            }),
        )
    }

    /// Runs `updates` through grammers and the pump into `h`'s runtime; returns once the
    /// pump handed over `expect` messages and the runtime has nothing left to do.
    async fn deliver(h: &mut Harness, updates: Vec<UpdatesLike>, expect: usize) -> TestResult {
        deliver_after_scan(h, |_| Vec::new(), updates, expect).await
    }

    /// As [`deliver`], with what the unread scan found (built on the same account) handed
    /// over first, as `GrammersSource` does after a connect.
    async fn deliver_after_scan(
        h: &mut Harness,
        scan: impl FnOnce(&Account) -> Vec<TgUpdate>,
        updates: Vec<UpdatesLike>,
        expect: usize,
    ) -> TestResult {
        let a = account().await;
        let backlog = scan(&a);
        a.wire.on::<tl::functions::contacts::GetBlocked>(|_| {
            ok(tl::enums::contacts::Blocked::Blocked(
                tl::types::contacts::Blocked {
                    blocked: Vec::new(),
                    chats: Vec::new(),
                    users: Vec::new(),
                },
            ))
        });
        let (stream_source, tx) = source(&a).await;
        let source = stream_source.with_backlog(backlog);
        for u in updates {
            tx.send(u).await?;
        }
        let sink = Arc::new(Counting {
            inner: RuntimeSink {
                agent: AGENT.into(),
                ingress: personad::ingress::Ingress::new(
                    h.handle.clone(),
                    None,
                    personad::ingress::Groups::new(),
                ),
            },
            seen: AtomicUsize::new(0),
        });
        let pump = Pump {
            agent: AGENT.into(),
            factory: Arc::new(OneSource {
                source: Mutex::new(Some(source)),
                feed: Mutex::new(Some(tx)),
            }),
            lookups: Arc::clone(&a.telegram) as Arc<dyn Lookups>,
            sink: Arc::clone(&sink) as Arc<dyn Sink>,
            ledger: Arc::clone(a.telegram.ledger()),
            clock: Arc::clone(&h.shared_clock),
            opts: PumpOptions {
                max_catch_up_age: Duration::from_secs(15 * 60),
                channel_wait_limit: personad::adapters::mtproto::pump::CHANNEL_WAIT_LIMIT,
            },
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(pump.run(stop.clone()));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sink.seen.load(Ordering::SeqCst) < expect {
            assert!(
                std::time::Instant::now() < deadline,
                "the pump handed over too little"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        h.settle().await;
        stop.cancel();
        assert_eq!(task.await?, PumpEnd::Stopped);
        Ok(())
    }

    async fn request_bodies(server: &MockServer) -> Vec<String> {
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }

    /// A login code from Telegram's service account (777000) and a DM from a person arrive
    /// through grammers: the person is answered; nothing of the service chat reaches the
    /// LLM (no request body holds the code) and nothing is sent there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_message_from_telegrams_service_account_reaches_an_llm_request() -> TestResult {
        let server = gemini_server().await;
        let dir = tempfile::tempdir()?;
        let (bob, service) = (dm(5555), dm(777_000));
        let mut h = governed(dir.path(), &server, &[bob.clone(), service.clone()]);
        // What the planner reads as each chat's history.
        h.say_silently(
            &service,
            "Telegram",
            "Login code: 12345. Do not give it to anyone",
        )
        .await;
        h.say_silently(&bob, "Bob", "hi, remember me?").await;
        deliver(
            &mut h,
            vec![
                fresh_short(
                    1,
                    10,
                    777_000,
                    "Login code: 12345. Do not give it to anyone",
                ),
                fresh_short(2, 11, 5555, "hi, remember me?"),
            ],
            2,
        )
        .await?;
        let bodies = request_bodies(&server).await;
        assert_eq!(bodies.len(), 1, "one plan, for Bob");
        assert!(bodies[0].contains("remember me"), "{}", bodies[0]);
        assert!(
            bodies.iter().all(|b| !b.contains("12345")),
            "the login code reached the LLM"
        );
        let sends: Vec<i64> = h.sends().into_iter().map(|(c, _, _)| c.0).collect();
        assert_eq!(sends, vec![5555]);
        drop(h.stop().await?);
        Ok(())
    }

    /// The unread scan's finds pass the same admission as live updates: an unread message
    /// older than the catch-up window is history (no LLM request), a fresh one is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_unread_scans_finds_pass_the_same_admission_as_live_updates() -> TestResult {
        let server = gemini_server().await;
        let dir = tempfile::tempdir()?;
        let (old_chat, fresh_chat) = (dm(5555), dm(6666));
        let mut h = governed(dir.path(), &server, &[old_chat.clone(), fresh_chat.clone()]);
        h.say_silently(&old_chat, "Olga", "are you there? (last month)")
            .await;
        h.say_silently(&fresh_chat, "Fred", "are you there? (just now)")
            .await;
        let found = |a: &Account| {
            [(5555, DATE, "last month"), (6666, now(), "just now")]
                .into_iter()
                .filter_map(|(from, date, body)| {
                    let mut raw = message(9, peer_user(from), Some(peer_user(from)), body);
                    raw.date = date;
                    let last: tl::enums::Message = raw.into();
                    personad::adapters::mtproto::unread_update(
                        &a.telegram,
                        &dialog(1, 0, false, None),
                        &last,
                    )
                })
                .collect()
        };
        deliver_after_scan(&mut h, found, Vec::new(), 2).await?;
        let bodies = request_bodies(&server).await;
        assert_eq!(bodies.len(), 1, "only the fresh one is planned");
        assert!(bodies[0].contains("just now"), "{}", bodies[0]);
        let sends: Vec<i64> = h.sends().into_iter().map(|(c, _, _)| c.0).collect();
        assert_eq!(sends, vec![6666]);
        drop(h.stop().await?);
        Ok(())
    }

    /// A message answered before a crash is delivered again by catch-up after the restart
    /// (the update state was not saved): it is not planned again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_answered_before_a_crash_is_not_planned_again_when_redelivered() -> TestResult
    {
        let server = gemini_server().await;
        let dir = tempfile::tempdir()?;
        let bob = dm(5555);
        let mut h = governed(dir.path(), &server, std::slice::from_ref(&bob));
        h.say_silently(&bob, "Bob", "hi, remember me?").await;
        let update = || fresh_short(1, 11, 5555, "hi, remember me?");
        deliver(&mut h, vec![update()], 1).await?;
        assert_eq!(h.sends().len(), 1);
        h.crash().await;
        let mut h = governed(dir.path(), &server, std::slice::from_ref(&bob));
        deliver(&mut h, vec![update()], 1).await?;
        assert_eq!(request_bodies(&server).await.len(), 1, "planned twice");
        assert!(h.sends().is_empty(), "answered twice: {:?}", h.sends());
        drop(h.stop().await?);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The unread scan and stream errors.

/// A grammers message of the test group, built offline.
fn group_message(_: &Account, raw: tl::types::Message) -> tl::enums::Message {
    raw.into()
}

fn dialog(unread: i32, mentions: i32, marked: bool, mute_until: Option<i32>) -> tl::types::Dialog {
    tl::types::Dialog {
        pinned: false,
        unread_mark: marked,
        view_forum_as_messages: false,
        peer: peer_chat(GROUP),
        top_message: 9,
        read_inbox_max_id: 0,
        read_outbox_max_id: 0,
        unread_count: unread,
        unread_mentions_count: mentions,
        unread_reactions_count: 0,
        unread_poll_votes_count: 0,
        notify_settings: tl::types::PeerNotifySettings {
            show_previews: None,
            silent: None,
            mute_until,
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
}

/// The unread scan hands each dialog's newest message to admission: a muted group's
/// mention counts as addressing the agent, the mute comes from the dialog itself (no
/// getNotifySettings call), and reading the chat later clears the mention and the owner's
/// "unread" mark; a dialog with nothing unread, or whose newest message is ours, is skipped.
#[tokio::test]
async fn the_unread_scan_uses_the_dialogs_own_settings_and_clears_its_marks_on_read() {
    let a = account().await;
    let far = i32::MAX;
    let last = group_message(
        &a,
        message(9, peer_chat(GROUP), Some(peer_user(ALICE)), "hey all"),
    );
    let scan = |d: &tl::types::Dialog, m: &tl::enums::Message| {
        personad::adapters::mtproto::unread_update(&a.telegram, d, m)
    };
    assert!(
        scan(&dialog(0, 0, false, None), &last).is_none(),
        "nothing unread"
    );
    let mut ours = message(9, peer_chat(GROUP), Some(peer_user(SELF_ID)), "me");
    ours.out = true;
    assert!(scan(&dialog(3, 0, false, None), &group_message(&a, ours)).is_none());
    let found = scan(&dialog(2, 1, true, Some(far)), &last).expect("an unread mention");
    let found = new_message(found);
    assert!(found.callout, "a mention (or the mark) addresses the agent");
    assert!(
        a.telegram.is_muted(ChatId(-GROUP)).await,
        "muted, as the dialog says"
    );
    assert!(
        a.wire.names().is_empty(),
        "no look-up: {:?}",
        a.wire.names()
    );
    a.wire
        .on::<tl::functions::messages::ReadHistory>(|_| affected_messages());
    a.wire
        .on::<tl::functions::messages::ReadMentions>(|_| affected(0));
    a.wire
        .on::<tl::functions::messages::MarkDialogUnread>(|_| ok(true));
    a.telegram
        .mark_read(ChatId(-GROUP), MessageId(9))
        .await
        .unwrap();
    assert_eq!(
        a.wire.names(),
        vec![
            "messages.readHistory",
            "messages.readMentions",
            "messages.markDialogUnread"
        ]
    );
    let unmark = a
        .wire
        .requests::<tl::functions::messages::MarkDialogUnread>();
    assert!(!unmark[0].unread);
}

/// Telegram pushes mute changes (updateNotifySettings): a group muted that way is muted
/// for admission with no account.getNotifySettings request, and unmuting it the same way
/// is seen too; the pushed update itself plans nothing.
#[tokio::test]
async fn a_chat_muted_by_telegrams_push_is_muted_without_a_look_up() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    let push = |mute_until: Option<i32>| {
        UpdatesLike::Updates(tl::enums::Updates::Updates(tl::types::Updates {
            updates: vec![
                tl::types::UpdateNotifySettings {
                    peer: tl::types::NotifyPeer {
                        peer: peer_chat(GROUP),
                    }
                    .into(),
                    notify_settings: dialog(0, 0, false, mute_until).notify_settings,
                }
                .into(),
            ],
            users: Vec::new(),
            chats: Vec::new(),
            date: DATE,
            seq: 0,
        }))
    };
    tx.send(push(Some(i32::MAX))).await.unwrap();
    tx.send(short_message(1, 10, ALICE, "after the mute"))
        .await
        .unwrap();
    let got = new_message(next(&mut source).await);
    assert_eq!(
        got.message.id,
        MessageId(10),
        "the push itself is no update"
    );
    assert!(
        a.telegram.is_muted(ChatId(-GROUP)).await,
        "muted by the push"
    );
    assert!(
        a.wire.names().is_empty(),
        "no look-up: {:?}",
        a.wire.names()
    );
    tx.send(push(Some(0))).await.unwrap();
    tx.send(short_message(2, 11, ALICE, "after the unmute"))
        .await
        .unwrap();
    new_message(next(&mut source).await);
    assert!(
        !a.telegram.is_muted(ChatId(-GROUP)).await,
        "unmuted by the push"
    );
    assert!(a.wire.names().is_empty(), "{:?}", a.wire.names());
}

/// grammers' stream error names the request that failed, not the channel: only a failed
/// getChannelDifference is attributed to the channel whose difference was prepared; a
/// flood wait carries its seconds, a refusal of the channel is permanent.
#[test]
fn stream_errors_are_attributed_from_the_failed_request() {
    use personad::adapters::mtproto::errors::stream_error;
    use personad::adapters::mtproto::pump::SourceError;
    let failed = |caused_by: u32, code: i32, name: &str, value: Option<u32>| {
        InvocationError::Rpc(RpcError {
            code,
            name: name.into(),
            value,
            caused_by: Some(caused_by),
        })
    };
    let channel_diff = tl::functions::updates::GetChannelDifference::CONSTRUCTOR_ID;
    let diff = tl::functions::updates::GetDifference::CONSTRUCTOR_ID;
    match stream_error(&failed(channel_diff, 420, "FLOOD_WAIT", Some(40)), || {
        Some(77)
    }) {
        SourceError::Transient {
            channel: Some(77),
            retry_after: Some(wait),
            permanent: false,
            ..
        } => assert_eq!(wait, Duration::from_secs(40)),
        other => panic!("{other:?}"),
    }
    match stream_error(&failed(channel_diff, 400, "CHANNEL_INVALID", None), || {
        Some(78)
    }) {
        SourceError::Transient {
            channel: Some(78),
            permanent: true,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    match stream_error(&failed(diff, 420, "FLOOD_WAIT", Some(5)), || Some(79)) {
        SourceError::Transient {
            channel: None,
            retry_after: Some(_),
            ..
        } => {}
        other => panic!("a common difference is no channel's: {other:?}"),
    }
    assert_eq!(
        stream_error(&failed(diff, 401, "AUTH_KEY_UNREGISTERED", None), || None),
        SourceError::Unauthorized("AUTH_KEY_UNREGISTERED (401)".into())
    );
    assert_eq!(
        stream_error(
            &InvocationError::Dropped("updates channel was closed"),
            || None
        ),
        SourceError::Closed
    );
}

/// `login` on a session that was logged in before walks the dialogs (warming the peer
/// cache) and then puts the saved update state back, so what the daemon missed is still
/// fetched; after a fresh login the walked state is kept. Either way broadcast channels are
/// left out. (The walk itself fails at once here: the client has no network.)
#[tokio::test]
async fn a_login_walk_keeps_catch_up_on_a_session_logged_in_before() {
    use grammers_client::session::types::{ChannelState, UpdateState, UpdatesState};
    use personad::adapters::mtproto::warm_peer_cache;
    let a = account().await;
    let state = |pts: i32, channels: Vec<(i64, i32)>| UpdatesState {
        pts,
        qts: 0,
        date: DATE,
        seq: 1,
        channels: channels
            .into_iter()
            .map(|(id, pts)| ChannelState { id, pts })
            .collect(),
    };
    let saved = state(10, vec![(CHANNEL, 100)]);
    let walked = state(10, vec![(CHANNEL, 150), (999, 5)]);
    let channels =
        |s: UpdatesState| -> Vec<(i64, i32)> { s.channels.iter().map(|c| (c.id, c.pts)).collect() };
    a.session
        .set_update_state(UpdateState::All(walked.clone()))
        .await
        .unwrap();
    warm_peer_cache(
        "Wren",
        &a.telegram.client(),
        a.session.as_ref(),
        Some(saved),
    )
    .await;
    let now = a.session.updates_state().await.unwrap();
    assert_eq!(channels(now), vec![(CHANNEL, 100)], "the gap is kept");
    a.session
        .set_update_state(UpdateState::All(walked))
        .await
        .unwrap();
    warm_peer_cache("Wren", &a.telegram.client(), a.session.as_ref(), None).await;
    let now = a.session.updates_state().await.unwrap();
    assert_eq!(
        channels(now),
        vec![(CHANNEL, 150), (999, 5)],
        "a fresh login starts here"
    );
}

/// The daemon is stopped while the unread scan walks the dialogs (the walk has already
/// written the channels' current pts): the scan runs in a task of its own, so the update
/// state saved before the walk is still put back and catch-up keeps its gaps.
#[tokio::test]
async fn a_stop_during_the_unread_scan_still_restores_the_update_state() {
    use grammers_client::session::types::{ChannelState, UpdateState, UpdatesState};
    use personad::adapters::mtproto::spawn_scan;
    let session = Arc::new(GuardedSession::new(
        SqliteSession::open(":memory:").await.unwrap(),
    ));
    let state = |pts: i32| UpdatesState {
        pts: 10,
        qts: 0,
        date: DATE,
        seq: 1,
        channels: vec![ChannelState { id: CHANNEL, pts }],
    };
    session
        .set_update_state(UpdateState::All(state(100)))
        .await
        .unwrap();
    // A pool that is never run: the walk's first request waits until the pool goes away.
    let SenderPool { runner, handle, .. } = SenderPool::new(Arc::clone(&session), 1);
    let client = Client::new(handle);
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let telegram = Arc::new(MtprotoTelegram::new(
        client.clone(),
        Arc::clone(&session),
        SELF_ID,
        None,
        Arc::clone(&clock),
        SentLedger::in_memory(clock),
    ));
    let scan = spawn_scan("Wren".into(), Arc::clone(&session), telegram).await;
    // What the walk writes meanwhile: every channel's current pts.
    session
        .set_update_state(UpdateState::All(state(150)))
        .await
        .unwrap();
    // The stop: nobody waits for the finds any more, and the connection goes.
    drop(scan.found);
    drop(runner);
    tokio::time::timeout(Duration::from_secs(10), scan.task)
        .await
        .expect("the scan ends once the connection is gone")
        .unwrap();
    let now = session.updates_state().await.unwrap();
    let channels: Vec<(i64, i32)> = now.channels.iter().map(|c| (c.id, c.pts)).collect();
    assert_eq!(
        channels,
        vec![(CHANNEL, 100)],
        "the gap before the walk is kept"
    );
}

/// Giving up a channel through grammers' source: it leaves the saved update state at once
/// (a restart does not ask for it again), and the session answers grammers' next look-up of
/// it without its access hash, which makes grammers end that channel's difference (other
/// tasks' look-ups keep it).
#[tokio::test]
async fn giving_up_a_channel_drops_it_from_the_saved_state_and_hides_its_hash_once() {
    use grammers_client::session::types::{ChannelState, PeerId, UpdateState, UpdatesState};
    let a = account().await;
    a.session
        .set_update_state(UpdateState::All(UpdatesState {
            pts: 10,
            qts: 0,
            date: DATE,
            seq: 1,
            channels: vec![
                ChannelState {
                    id: CHANNEL,
                    pts: 100,
                },
                ChannelState { id: 401, pts: 7 },
            ],
        }))
        .await
        .unwrap();
    let (mut source, _tx) = source(&a).await;
    source.skip_channel(CHANNEL).await;
    let saved = a.session.updates_state().await.unwrap();
    let ids: Vec<i64> = saved.channels.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![401]);
    let id = PeerId::channel(CHANNEL).unwrap();
    // Another task's look-up (a send to that channel) still gets the hash.
    let other = a.session.peer(id).await.unwrap();
    assert!(
        matches!(other, Some(PeerInfo::Channel { auth: Some(_), .. })),
        "{other:?}"
    );
    let machinery = |a: &Account| {
        let session = Arc::clone(&a.session);
        personad::adapters::mtproto::guarded::in_update_machinery(async move {
            session.peer(id).await.unwrap()
        })
    };
    let hidden = machinery(&a).await;
    assert!(
        matches!(hidden, Some(PeerInfo::Channel { auth: None, .. })),
        "{hidden:?}"
    );
    let again = machinery(&a).await;
    assert!(
        matches!(again, Some(PeerInfo::Channel { auth: Some(_), .. })),
        "hidden once only"
    );
}

/// After a channel is given up, grammers goes on to the next channel's difference at once
/// instead of waiting for the next update from the socket (its loop only looks at pending
/// differences again after one, up to 15 minutes on a quiet account): the source nudges it
/// with an empty update container. Here the next channel's difference meets the missing
/// network, which shows it was asked for.
#[tokio::test]
async fn giving_up_a_channel_moves_catch_up_on_to_the_next_channel_at_once() {
    use grammers_client::sender::UpdatesConfiguration;
    use grammers_client::session::types::{
        ChannelKind, ChannelState, PeerAuth, UpdateState, UpdatesState,
    };
    use personad::adapters::mtproto::pump::SourceError;
    let a = account().await;
    a.session
        .cache_peer(PeerInfo::Channel {
            id: 500,
            auth: Some(PeerAuth::from_hash(55)),
            kind: Some(ChannelKind::Megagroup),
        })
        .await
        .unwrap();
    a.session
        .set_update_state(UpdateState::All(UpdatesState {
            pts: 0,
            qts: 0,
            date: DATE,
            seq: 0,
            channels: vec![
                ChannelState {
                    id: CHANNEL,
                    pts: 100,
                },
                ChannelState { id: 500, pts: 7 },
            ],
        }))
        .await
        .unwrap();
    // The pool's side of the update channel stays open: nothing comes from the socket.
    let (_pool, rx) = mpsc::channel(100);
    let mut source = GrammersSource::start(
        &a.telegram.client(),
        rx,
        UpdatesConfiguration { catch_up: true },
        Arc::clone(&a.telegram),
        Arc::clone(&a.session),
    )
    .await
    .unwrap();
    source.skip_channel(CHANNEL).await;
    let after = tokio::time::timeout(Duration::from_secs(3), source.next())
        .await
        .expect("grammers waited for the socket instead of moving on");
    assert!(matches!(after, Err(SourceError::Closed)), "{after:?}");
}

/// Telegram says the account's backlog is too long (UpdatesTooLong) after a message: grammers
/// goes to fetch the difference (here there is no network, so the source reports the
/// connection gone and the pump reopens it with catch-up).
#[tokio::test]
async fn updates_too_long_makes_grammers_fetch_the_difference() {
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    tx.send(short_message(1, 10, 5555, "before the gap"))
        .await
        .unwrap();
    tx.send(UpdatesLike::Updates(tl::enums::Updates::TooLong))
        .await
        .unwrap();
    assert_eq!(
        new_message(next(&mut source).await).message.id,
        MessageId(10)
    );
    let after = tokio::time::timeout(Duration::from_secs(5), source.next())
        .await
        .expect("grammers answered");
    assert!(
        matches!(
            after,
            Err(personad::adapters::mtproto::pump::SourceError::Closed)
        ),
        "{after:?}"
    );
}

/// A "min" user object (Telegram left the access hash out) still names the sender, and is
/// not cached as a peer the account could write to.
#[tokio::test]
async fn a_min_user_names_the_sender_without_becoming_a_writable_peer() {
    use grammers_client::session::types::PeerId;
    let a = account().await;
    let (mut source, tx) = source(&a).await;
    let mut mia = user(804, "Mia", None, None, false);
    if let tl::enums::User::User(u) = &mut mia {
        u.min = true;
        u.access_hash = Some(1);
    }
    let msg = message(1, peer_chat(GROUP), Some(peer_user(804)), "hi all");
    tx.send(container(
        1,
        msg,
        vec![mia],
        vec![basic_group(GROUP, "Club")],
    ))
    .await
    .unwrap();
    let got = new_message(next(&mut source).await);
    assert_eq!(got.message.sender.name, "Mia");
    let cached = a
        .session
        .peer_ref(PeerId::user(804).unwrap())
        .await
        .unwrap();
    assert!(cached.is_none(), "{cached:?}");
}

/// Without a scripted wire the backend's raw calls go to the account's grammers client
/// (serialized requests through `Client::invoke`); here its pool is gone, so a send fails as
/// a network error, nothing is recorded as sent, and its in-flight window is closed (an
/// outgoing "hi" in Alice's chat now is the owner's, not ours).
#[tokio::test]
async fn the_production_invoker_sends_through_the_client() {
    let session = Arc::new(GuardedSession::new(
        SqliteSession::open(":memory:").await.unwrap(),
    ));
    let SenderPool { runner, handle, .. } = SenderPool::new(Arc::clone(&session), 1);
    drop(runner);
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let telegram = MtprotoTelegram::new(
        Client::new(handle),
        session,
        SELF_ID,
        None,
        Arc::clone(&clock),
        SentLedger::in_memory(clock),
    );
    let err = telegram.send_text(text(ALICE, "hi", 3)).await.unwrap_err();
    assert!(matches!(err, TelegramError::Network(_)), "{err:?}");
    let ledger = telegram.ledger();
    assert!(
        ledger.is_empty(),
        "a failed send was recorded: {}",
        ledger.len()
    );
    assert!(
        !ledger.is_ours(ChatId(ALICE), MessageId(7), "hi"),
        "the failed send is still in flight"
    );
}

/// A channel given up by catch-up is read again with one messages.getHistory: its newest
/// messages come back oldest first, with the senders' names from the answer.
#[tokio::test]
async fn a_given_up_channel_is_read_again_with_one_history_call() {
    use personad::adapters::mtproto::pump::Lookups;
    let a = account().await;
    let supergroup = ChatId(-1_000_000_000_000 - CHANNEL);
    a.wire.on::<tl::functions::messages::GetHistory>(|req| {
        assert_eq!(req.limit, 50);
        let newest = message(21, peer_channel(CHANNEL), Some(peer_user(ALICE)), "second");
        let older = message(20, peer_channel(CHANNEL), Some(peer_user(ALICE)), "first");
        ok(tl::enums::messages::Messages::ChannelMessages(
            tl::types::messages::ChannelMessages {
                inexact: false,
                pts: 30,
                count: 2,
                offset_id_offset: None,
                messages: vec![newest.into(), older.into()],
                topics: Vec::new(),
                chats: vec![channel(CHANNEL, "Forum", false)],
                users: vec![user(ALICE, "Alice", None, None, false)],
            },
        ))
    });
    let found = a.telegram.recent(supergroup, 50).await.unwrap();
    let got: Vec<(i64, String, String)> = found
        .iter()
        .map(|m| {
            (
                m.message.id.0,
                m.message.text.clone(),
                m.message.sender.name.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (20, "first".to_string(), "Alice".to_string()),
            (21, "second".to_string(), "Alice".to_string())
        ]
    );
    assert!(found.iter().all(|m| m.chat.id == supergroup));
    let asked = a.wire.requests::<tl::functions::messages::GetHistory>();
    assert!(matches!(
        asked[0].peer,
        tl::enums::InputPeer::Channel(ref c) if c.channel_id == CHANNEL && c.access_hash == CHANNEL_HASH
    ));
}
