//! The scripted Telegram of the MTProto wire tests: a [`Wire`] invoker that decodes each TL
//! request and answers from a script, an account over it (in-memory session, a client
//! whose pool never runs), and grammers' own update stream fed from a channel.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use crate::common::tl::{DATE, SELF_ID};
use crate::common::tl::{channel, user};
use grammers_client::sender::{RpcError, UpdatesConfiguration};
use grammers_client::session::Session;
use grammers_client::session::storages::SqliteSession;
use grammers_client::session::types::{ChannelKind, PeerAuth, PeerInfo};
use grammers_client::session::updates::UpdatesLike;
use grammers_client::tl::{self, Deserializable, Identifiable, Serializable};
use grammers_client::{Client, InvocationError, SenderPool};
use personad::adapters::mtproto::GrammersSource;
use personad::adapters::mtproto::backend::MtprotoTelegram;
use personad::adapters::mtproto::guarded::GuardedSession;
use personad::adapters::mtproto::invoker::Invoker;
use personad::adapters::mtproto::pump::{TgUpdate, UpdateSource};
use personad::adapters::mtproto::sent::SentLedger;
use personad::core::model::{ChatId, OutgoingText};
use personad::core::time::BoxFuture;
use personad::ports::clock::{SharedClock, VirtualClock};
use tokio::sync::mpsc;

pub(crate) const ALICE: i64 = 111;
pub(crate) const ALICE_HASH: i64 = 4242;
pub(crate) const GROUP: i64 = 300;
pub(crate) const CHANNEL: i64 = 400;
pub(crate) const CHANNEL_HASH: i64 = 77;

// ---------------------------------------------------------------------------------------
// The scripted invoker.

pub(crate) type Answer = Result<Vec<u8>, InvocationError>;
pub(crate) type Reply = Box<dyn FnOnce(&[u8]) -> Answer + Send>;

/// Telegram as a script: each request is answered by the first scripted reply for its
/// constructor (unscripted requests get a 400 naming them), and every request is kept.
#[derive(Default)]
pub(crate) struct Wire {
    pub(crate) script: Mutex<VecDeque<(u32, Reply)>>,
    pub(crate) sent: Mutex<Vec<Vec<u8>>>,
    /// The datacenter each request was sent to (`None`: the home one).
    pub(crate) dcs: Mutex<Vec<Option<i32>>>,
}

impl Wire {
    /// Answers the next request of type `R` with `reply(request)`.
    pub(crate) fn on<R>(&self, reply: impl FnOnce(R) -> Answer + Send + 'static)
    where
        R: Identifiable + Deserializable + 'static,
    {
        let reply: Reply = Box::new(move |body: &[u8]| match R::from_bytes(&body[4..]) {
            Ok(request) => reply(request),
            Err(e) => panic!("the backend sent a request that does not decode: {e}"),
        });
        self.script
            .lock()
            .unwrap()
            .push_back((R::CONSTRUCTOR_ID, reply));
    }

    /// Every request of type `R` sent so far, decoded.
    pub(crate) fn requests<R: Identifiable + Deserializable>(&self) -> Vec<R> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|b| constructor(b) == R::CONSTRUCTOR_ID)
            .map(|b| R::from_bytes(&b[4..]).unwrap())
            .collect()
    }

    /// The TL names of every request sent so far, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|b| tl::name_for_id(constructor(b)))
            .collect()
    }
}

pub(crate) fn constructor(body: &[u8]) -> u32 {
    u32::from_le_bytes([body[0], body[1], body[2], body[3]])
}

impl Wire {
    fn answer(&self, request: Vec<u8>, dc: Option<i32>) -> Answer {
        self.sent.lock().unwrap().push(request.clone());
        self.dcs.lock().unwrap().push(dc);
        let id = constructor(&request);
        let reply = {
            let mut script = self.script.lock().unwrap();
            script
                .iter()
                .position(|(c, _)| *c == id)
                .and_then(|i| script.remove(i))
        };
        match reply {
            Some((_, reply)) => reply(&request),
            None => rpc(400, &format!("UNSCRIPTED_{}", tl::name_for_id(id)), None),
        }
    }

    /// The datacenter of every request of type `R` so far (`None`: the home one).
    pub(crate) fn dcs_of<R: Identifiable>(&self) -> Vec<Option<i32>> {
        let sent = self.sent.lock().unwrap();
        let dcs = self.dcs.lock().unwrap();
        sent.iter()
            .zip(dcs.iter())
            .filter(|(b, _)| constructor(b) == R::CONSTRUCTOR_ID)
            .map(|(_, dc)| *dc)
            .collect()
    }
}

impl Invoker for Wire {
    fn invoke(&self, request: Vec<u8>) -> BoxFuture<'_, Answer> {
        let answer = self.answer(request, None);
        Box::pin(async move { answer })
    }

    fn invoke_in_dc(&self, dc: i32, request: Vec<u8>) -> BoxFuture<'_, Answer> {
        let answer = self.answer(request, Some(dc));
        Box::pin(async move { answer })
    }
}

pub(crate) fn ok(value: impl Serializable) -> Answer {
    Ok(value.to_bytes())
}

pub(crate) fn rpc(code: i32, name: &str, value: Option<u32>) -> Answer {
    Err(InvocationError::Rpc(RpcError {
        code,
        name: name.to_string(),
        value,
        caused_by: None,
    }))
}

pub(crate) fn sent_message(id: i32) -> Answer {
    ok(tl::enums::Updates::UpdateShortSentMessage(
        tl::types::UpdateShortSentMessage {
            out: true,
            id,
            pts: 1,
            pts_count: 1,
            date: DATE,
            media: None,
            entities: None,
            ttl_period: None,
        },
    ))
}

pub(crate) fn affected_messages() -> Answer {
    ok(tl::enums::messages::AffectedMessages::Messages(
        tl::types::messages::AffectedMessages {
            pts: 1,
            pts_count: 1,
        },
    ))
}

pub(crate) fn affected(offset: i32) -> Answer {
    ok(tl::enums::messages::AffectedHistory::History(
        tl::types::messages::AffectedHistory {
            pts: 1,
            pts_count: 1,
            offset,
        },
    ))
}

// ---------------------------------------------------------------------------------------
// An account with no network.

pub(crate) struct Account {
    pub(crate) telegram: Arc<MtprotoTelegram>,
    pub(crate) session: Arc<GuardedSession>,
    pub(crate) wire: Arc<Wire>,
}

/// A logged-out in-memory session knowing Alice (with her access hash) and a supergroup,
/// a client whose pool never runs, and the backend over the scripted wire.
pub(crate) async fn account() -> Account {
    account_named(Some("wren_here")).await
}

/// As [`account`], with the account's username as the start learnt it.
pub(crate) async fn account_named(username: Option<&str>) -> Account {
    let session = Arc::new(GuardedSession::new(
        SqliteSession::open(":memory:").await.unwrap(),
    ));
    session
        .cache_peer(PeerInfo::User {
            id: ALICE,
            auth: Some(PeerAuth::from_hash(ALICE_HASH)),
            bot: Some(false),
            is_self: Some(false),
        })
        .await
        .unwrap();
    session
        .cache_peer(PeerInfo::Channel {
            id: CHANNEL,
            auth: Some(PeerAuth::from_hash(CHANNEL_HASH)),
            kind: Some(ChannelKind::Megagroup),
        })
        .await
        .unwrap();
    let SenderPool { runner, handle, .. } = SenderPool::new(Arc::clone(&session), 1);
    drop(runner);
    let client = Client::new(handle);
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let ledger = SentLedger::in_memory(Arc::clone(&clock));
    let wire = Arc::new(Wire::default());
    let telegram = MtprotoTelegram::new(
        client,
        Arc::clone(&session),
        SELF_ID,
        username.map(str::to_string),
        clock,
        ledger,
    )
    .with_invoker(Arc::clone(&wire) as Arc<dyn Invoker>);
    Account {
        telegram: Arc::new(telegram),
        session,
        wire,
    }
}

pub(crate) fn text(chat: i64, body: &str, key: i64) -> OutgoingText {
    OutgoingText {
        chat: ChatId(chat),
        text: body.to_string(),
        reply_to: None,
        idempotency_key: key,
    }
}

pub(crate) fn input_user(peer: &tl::enums::InputPeer) -> (i64, i64) {
    match peer {
        tl::enums::InputPeer::User(u) => (u.user_id, u.access_hash),
        other => panic!("not a user peer: {other:?}"),
    }
}

/// grammers' update stream over a channel the test feeds raw updates into, as a pump
/// source over the account's backend.
pub(crate) async fn source(a: &Account) -> (GrammersSource, mpsc::Sender<UpdatesLike>) {
    let (tx, rx) = mpsc::channel(100);
    let stream = a
        .telegram
        .client()
        .stream_updates(rx, UpdatesConfiguration { catch_up: false })
        .await
        .unwrap();
    let source = GrammersSource::new(stream, Arc::clone(&a.telegram), Arc::clone(&a.session));
    (source, tx)
}

pub(crate) fn short_message(pts: i32, id: i32, from: i64, body: &str) -> UpdatesLike {
    UpdatesLike::Updates(tl::enums::Updates::UpdateShortMessage(
        tl::types::UpdateShortMessage {
            out: false,
            mentioned: false,
            media_unread: false,
            silent: false,
            id,
            user_id: from,
            message: body.to_string(),
            pts,
            pts_count: 1,
            date: DATE,
            fwd_from: None,
            via_bot_id: None,
            reply_to: None,
            entities: None,
            ttl_period: None,
        },
    ))
}

/// An `Updates` container with one new message and the users and chats it names.
pub(crate) fn container(
    pts: i32,
    msg: tl::types::Message,
    users: Vec<tl::enums::User>,
    chats: Vec<tl::enums::Chat>,
) -> UpdatesLike {
    UpdatesLike::Updates(tl::enums::Updates::Updates(tl::types::Updates {
        updates: vec![
            tl::types::UpdateNewMessage {
                message: msg.into(),
                pts,
                pts_count: 1,
            }
            .into(),
        ],
        users,
        chats,
        date: DATE,
        seq: 0,
    }))
}

pub(crate) async fn next(source: &mut GrammersSource) -> TgUpdate {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), source.next()).await {
            Ok(Ok(Some(update))) => return update,
            Ok(Ok(None)) => continue,
            Ok(Err(e)) => panic!("source error: {e:?}"),
            Err(_) => panic!("no update within 5 s"),
        }
    }
}

pub(crate) fn new_message(update: TgUpdate) -> personad::adapters::mtproto::pump::Incoming {
    match update {
        TgUpdate::NewMessage(m) => m,
        other => panic!("not a new message: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Fixtures of the seam tests.

pub(crate) const STRANGER: i64 = 5555;
pub(crate) const STRANGER_HASH: i64 = 9191;
/// A supergroup the session has never seen (no access hash).
pub(crate) const UNKNOWN_CHANNEL: i64 = 500;
pub(crate) const UNKNOWN_CHANNEL_HASH: i64 = 88;

pub(crate) fn supergroup(id: i64) -> ChatId {
    ChatId(-1_000_000_000_000 - id)
}

pub(crate) fn with_hash(mut u: tl::enums::User, hash: i64) -> tl::enums::User {
    if let tl::enums::User::User(u) = &mut u {
        u.access_hash = Some(hash);
    }
    u
}

pub(crate) fn channel_with_hash(id: i64, hash: i64) -> tl::enums::Chat {
    let mut c = channel(id, "Forum", false);
    if let tl::enums::Chat::Channel(ch) = &mut c {
        ch.access_hash = Some(hash);
    }
    c
}

/// `messages.channelMessages` with these messages, users and chats.
pub(crate) fn channel_messages(
    messages: Vec<tl::types::Message>,
    users: Vec<tl::enums::User>,
    chats: Vec<tl::enums::Chat>,
) -> Answer {
    ok(tl::enums::messages::Messages::ChannelMessages(
        tl::types::messages::ChannelMessages {
            inexact: false,
            pts: 30,
            count: i32::try_from(messages.len()).unwrap(),
            offset_id_offset: None,
            messages: messages.into_iter().map(Into::into).collect(),
            topics: Vec::new(),
            chats,
            users,
        },
    ))
}

/// `messages.messages` (a whole history: no more pages) with these messages and users.
pub(crate) fn plain_messages(
    messages: Vec<tl::types::Message>,
    users: Vec<tl::enums::User>,
) -> Answer {
    ok(tl::enums::messages::Messages::Messages(
        tl::types::messages::Messages {
            messages: messages.into_iter().map(Into::into).collect(),
            topics: Vec::new(),
            chats: Vec::new(),
            users,
        },
    ))
}

/// `messages.messagesSlice` of a longer history.
pub(crate) fn slice(messages: Vec<tl::types::Message>, count: i32) -> Answer {
    ok(tl::enums::messages::Messages::Slice(
        tl::types::messages::MessagesSlice {
            inexact: false,
            count,
            next_rate: None,
            offset_id_offset: None,
            search_flood: None,
            messages: messages.into_iter().map(Into::into).collect(),
            topics: Vec::new(),
            chats: Vec::new(),
            users: vec![user(ALICE, "Alice", None, None, false)],
        },
    ))
}

pub(crate) fn in_topic(mut m: tl::types::Message, topic: i32) -> tl::types::Message {
    let mut header = common::tl::reply_header(topic);
    if let tl::enums::MessageReplyHeader::Header(h) = &mut header {
        h.forum_topic = true;
    }
    m.reply_to = Some(header);
    m
}
