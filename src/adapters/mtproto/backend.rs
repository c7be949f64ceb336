//! The `Telegram` trait on a real account through grammers: every outbound operation as a
//! raw MTProto call (so we control `random_id`, entities and link previews), peer lookup from
//! the session cache, and errors mapped in `errors::classify`. It keeps the sent-message
//! ledger up to date and follows the recovery rules of `recover` (learn an unknown peer and
//! retry once, send without rejected entities, toggle U+FE0F on a rejected reaction, repeat a
//! partial history deletion); beyond those it must not plan, pace or retry: the runtime and
//! the governor do that. The daemon builds one per agent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::adapters::mtproto::guarded::GuardedSession;
use crate::adapters::mtproto::invoker::{self, Invoker};
use grammers_client::Client;
use grammers_client::session::Session;
use grammers_client::session::types::{PeerId, PeerRef};
use grammers_client::tl;

use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::map::{self, Known, MapContext, Mapped, PeerCache};
use crate::adapters::mtproto::pump::{Incoming, Lookups, TgUpdate};
use crate::adapters::mtproto::recover::{self, CallError, PeerLearner};
use crate::adapters::mtproto::sent::SentLedger;
use crate::core::model::{ChatId, ChatKind, Message, MessageId, TelegramError, TgResult};
use crate::core::time::BoxFuture;
use crate::ports::clock::SharedClock;
use grammers_client::session::types::PeerInfo;
mod album;
mod download;
mod feed;
mod fetch;
mod send;
mod telegram;
mod voice;

/// Most messages whose forum topic is remembered.
const MAX_TOPIC_MESSAGES: usize = 50_000;

/// Forum topic bookkeeping (see [`MtprotoTelegram::topics`]).
#[derive(Default)]
struct Topics {
    by_message: HashMap<(ChatId, i32), i32>,
    order: std::collections::VecDeque<(ChatId, i32)>,
    /// Per chat: the newest inbound message seen (its id) and its topic. Only a newer
    /// message moves it, so a history page (mapped newest to oldest) never drags the
    /// conversation back to an older topic.
    latest: HashMap<ChatId, (i32, Option<i32>)>,
}

impl Topics {
    fn learn(&mut self, chat: ChatId, id: i32, topic: Option<i32>, inbound: bool) {
        if inbound
            && self
                .latest
                .get(&chat)
                .is_none_or(|(newest, _)| id > *newest)
        {
            self.latest.insert(chat, (id, topic));
        }
        if let Some(topic) = topic
            && self.by_message.insert((chat, id), topic).is_none()
        {
            self.order.push_back((chat, id));
            if self.order.len() > MAX_TOPIC_MESSAGES
                && let Some(old) = self.order.pop_front()
            {
                self.by_message.remove(&old);
            }
        }
    }
}

/// What Telegram answered to a send.
enum SendAnswer {
    /// Sent now; the new message id when the answer carried it.
    Sent(Option<i32>),
    /// RANDOM_ID_DUPLICATE: an earlier run already sent it.
    Duplicate,
}

/// One agent's account.
pub struct MtprotoTelegram {
    /// Replaced when the supervisor rebuilds a dead connection pool.
    client: invoker::ClientSlot,
    /// Where every raw TL call goes: the client above in production, a script in tests.
    invoker: Arc<dyn Invoker>,
    session: Arc<GuardedSession>,
    self_id: i64,
    /// Learnt at connect, or later when Telegram was not reachable then.
    self_username: std::sync::RwLock<Option<String>>,
    clock: SharedClock,
    /// Our sends (in flight, ids, random ids; on disk for the catch-up horizon): their
    /// echoes in the update stream are ours, not the owner typing on another device.
    ledger: Arc<SentLedger>,
    /// The newest message id seen per chat: how an unknown peer is fetched (getMessages).
    hints: Mutex<HashMap<ChatId, i32>>,
    /// Forum topics: the topic of each message seen in one (bounded), and the topic of the
    /// newest inbound message per chat (where typing shows).
    topics: Mutex<Topics>,
    /// Names of users and chats seen so far (the session cache keeps ids and hashes only).
    peers: Mutex<PeerCache>,
    /// Sticker sets fetched so far: short name → (name/emoji → document).
    sticker_sets: Mutex<HashMap<String, HashMap<String, tl::enums::InputDocument>>>,
    /// Sticker set id → short name, for stickers whose messages name their set by id only.
    set_names: Mutex<HashMap<i64, String>>,
    /// Users this account blocked (one entry, refreshed every 60 s).
    blocked: recover::Memo<(), Arc<HashSet<i64>>>,
    /// Mute settings (`mute_until`) per chat and the global ones: learnt from dialogs and
    /// from `updateNotifySettings`, looked up on first sight, trusted for [`MUTE_TTL`].
    muted: recover::Memo<LookupKey, Option<i32>>,
    /// Where the pts of our own `AffectedHistory` answers go (grammers' update channel).
    update_feed: Mutex<
        Option<tokio::sync::mpsc::WeakSender<grammers_client::session::updates::UpdatesLike>>,
    >,
    /// Chats whose unread mentions or "marked unread" flag must be cleared when they are
    /// next read (readHistory clears neither, and the next start would see them again).
    unread_flags: Mutex<HashMap<ChatId, UnreadFlags>>,
    /// The album items this account uploaded (content hash → photo or document reference):
    /// sent again by reference (`album`).
    uploads: Arc<crate::adapters::mtproto::uploads::UploadStore>,
}

/// What `mark_read` must clear besides the read position.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnreadFlags {
    /// The chat has unread mentions (or replies to us).
    pub mentions: bool,
    /// The owner marked the dialog unread.
    pub marked: bool,
}

/// How long the blocklist look-up is trusted.
const LOOKUP_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// How long a mute setting is trusted. Telegram pushes every change (`updateNotifySettings`,
/// learnt as it comes), so this only bounds a change missed in an update gap: one look-up per
/// active chat every 6 hours, not every minute.
const MUTE_TTL: std::time::Duration = std::time::Duration::from_secs(6 * 3600);
/// How long a failed look-up is not retried (the last known answer, else the fail-open one,
/// stands meanwhile).
pub(crate) const FAILURE_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// What a cached look-up is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum LookupKey {
    Mute(ChatId),
    /// The account's global setting for DMs (`true`) or groups.
    GlobalMute(bool),
}

impl MtprotoTelegram {
    pub fn new(
        client: Client,
        session: Arc<GuardedSession>,
        self_id: i64,
        self_username: Option<String>,
        clock: SharedClock,
        ledger: Arc<SentLedger>,
    ) -> MtprotoTelegram {
        let client = Arc::new(std::sync::RwLock::new(client));
        MtprotoTelegram {
            invoker: Arc::new(invoker::ClientInvoker(Arc::clone(&client))),
            client,
            session,
            self_id,
            self_username: std::sync::RwLock::new(self_username),
            ledger,
            hints: Mutex::new(HashMap::new()),
            topics: Mutex::new(Topics::default()),
            peers: Mutex::new(PeerCache::default()),
            sticker_sets: Mutex::new(HashMap::new()),
            set_names: Mutex::new(HashMap::new()),
            blocked: recover::Memo::new(Arc::clone(&clock), LOOKUP_TTL, FAILURE_TTL, 1),
            muted: recover::Memo::new(Arc::clone(&clock), MUTE_TTL, FAILURE_TTL, 10_000),
            unread_flags: Mutex::new(HashMap::new()),
            update_feed: Mutex::new(None),
            uploads: crate::adapters::mtproto::uploads::UploadStore::in_memory(),
            clock,
        }
    }

    /// The album uploads are kept in `uploads` (the daemon's: a file in the agent's state
    /// folder) instead of memory only.
    #[must_use]
    pub fn with_uploads(
        mut self,
        uploads: Arc<crate::adapters::mtproto::uploads::UploadStore>,
    ) -> MtprotoTelegram {
        self.uploads = uploads;
        self
    }

    /// The album uploads this account remembers.
    pub fn uploads(&self) -> &crate::adapters::mtproto::uploads::UploadStore {
        &self.uploads
    }

    /// Whether this account blocked `user` (cached for a minute). On failure, the last known
    /// blocklist stands (none when none is known), and it is not asked again for
    /// [`FAILURE_TTL`] (a flood wait must not turn every message into another failing call).
    pub async fn is_blocked(&self, user: i64) -> bool {
        self.blocked
            .get((), || async {
                let mut ids = HashSet::new();
                let mut offset = 0;
                loop {
                    let answer = self
                        .call(&tl::functions::contacts::GetBlocked {
                            my_stories_from: false,
                            offset,
                            limit: 100,
                        })
                        .await
                        .map_err(|e| classify(&e))?;
                    let (page, total) = match answer {
                        tl::enums::contacts::Blocked::Blocked(b) => (b.blocked, None),
                        tl::enums::contacts::Blocked::Slice(b) => (b.blocked, Some(b.count)),
                    };
                    let n = page.len();
                    for tl::enums::PeerBlocked::Blocked(p) in page {
                        if let tl::enums::Peer::User(u) = p.peer_id {
                            ids.insert(u.user_id);
                        }
                    }
                    offset += n as i32;
                    if n == 0 || total.is_none_or(|t| offset >= t) {
                        break;
                    }
                }
                Ok::<_, TelegramError>(Arc::new(ids))
            })
            .await
            .is_some_and(|set| set.contains(&user))
    }

    /// Whether notifications of a chat are muted: its own setting, else the account's
    /// global setting for DMs or groups (each known from Telegram's pushes, or looked up once
    /// and kept for [`MUTE_TTL`]). On failure the last known setting stands (not muted when
    /// none is known), and the look-up is not tried again for [`FAILURE_TTL`].
    pub async fn is_muted(&self, chat: ChatId) -> bool {
        let now = self.clock.now().as_second();
        let own = self.mute_setting(LookupKey::Mute(chat)).await;
        let global = match own {
            Some(Some(_)) => None,
            _ => self
                .mute_setting(LookupKey::GlobalMute(chat.0 > 0))
                .await
                .flatten(),
        };
        recover::muted(own.flatten(), global, now)
    }

    /// A `mute_until` setting (outer `None`: the look-up failed).
    async fn mute_setting(&self, key: LookupKey) -> Option<Option<i32>> {
        self.muted
            .get(key, || async {
                let settings = match key {
                    // A chat's own settings need its access hash: a first contact's is learnt
                    // as for a send (the send then finds it cached).
                    LookupKey::Mute(chat) => recover::with_peer_retry(self, chat, || async {
                        let peer = tl::types::InputNotifyPeer {
                            peer: self.input_peer(chat).await?,
                        };
                        self.call(&tl::functions::account::GetNotifySettings { peer: peer.into() })
                            .await
                            .map_err(|e| Self::call_error(&e))
                    })
                    .await
                    .map_err(CallError::into_error)?,
                    LookupKey::GlobalMute(users) => {
                        let peer = if users {
                            tl::enums::InputNotifyPeer::InputNotifyUsers
                        } else {
                            tl::enums::InputNotifyPeer::InputNotifyChats
                        };
                        self.call(&tl::functions::account::GetNotifySettings { peer })
                            .await
                            .map_err(|e| classify(&e))?
                    }
                };
                let tl::enums::PeerNotifySettings::Settings(s) = settings;
                Ok::<_, TelegramError>(s.mute_until)
            })
            .await
    }

    /// The current client (cheap to clone).
    pub fn client(&self) -> Client {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends every raw TL call through `invoker` instead of the client (tests script
    /// Telegram's answers this way; the library's high-level calls still use the client).
    pub fn with_invoker(mut self, invoker: Arc<dyn Invoker>) -> MtprotoTelegram {
        self.invoker = invoker;
        self
    }

    /// Invokes a raw TL request through the invoker.
    pub(crate) async fn call<R: grammers_client::tl::RemoteCall>(
        &self,
        request: &R,
    ) -> Result<R::Return, grammers_client::InvocationError> {
        invoker::call(self.invoker.as_ref(), request).await
    }

    /// Swaps in the client of a rebuilt connection pool.
    pub(crate) fn replace_client(&self, client: Client) {
        *self.client.write().unwrap_or_else(PoisonError::into_inner) = client;
    }

    /// What the inbound mapping needs to know about this account.
    pub(crate) fn map_context(&self) -> MapContext {
        MapContext {
            self_id: self.self_id,
            self_username: self.self_username(),
        }
    }

    /// Records a chat's own mute setting, as its dialog carries it (no look-up needed).
    pub(crate) fn note_mute(&self, chat: ChatId, mute_until: Option<i32>) {
        self.muted.put(LookupKey::Mute(chat), mute_until);
    }

    /// Records a mute setting Telegram pushed (`updateNotifySettings`): no look-up needed.
    pub(crate) fn note_notify_settings(&self, target: map::NotifyTarget, mute_until: Option<i32>) {
        let key = match target {
            map::NotifyTarget::Chat(chat) => LookupKey::Mute(chat),
            map::NotifyTarget::Users => LookupKey::GlobalMute(true),
            map::NotifyTarget::Groups => LookupKey::GlobalMute(false),
        };
        self.muted.put(key, mute_until);
    }

    /// Records what the next `mark_read` of `chat` must clear besides the read position.
    pub(crate) fn note_unread(&self, chat: ChatId, flags: UnreadFlags) {
        let mut all = self
            .unread_flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let entry = all.entry(chat).or_default();
        entry.mentions |= flags.mentions;
        entry.marked |= flags.marked;
    }

    /// Takes what `mark_read` of `chat` must clear.
    fn take_unread(&self, chat: ChatId) -> UnreadFlags {
        self.unread_flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&chat)
            .unwrap_or_default()
    }

    /// Learns the account's username (at connect, or later when Telegram was not reachable
    /// then): @username callouts match from now on.
    pub(crate) fn set_self_username(&self, username: Option<String>) {
        *self
            .self_username
            .write()
            .unwrap_or_else(PoisonError::into_inner) = username;
    }

    /// Asks Telegram who this account is (users.getUsers on the self user) and keeps its
    /// username. A failure keeps what is known (logged).
    pub async fn refresh_self_username(&self) {
        let answer = self
            .call(&tl::functions::users::GetUsers {
                id: vec![tl::enums::InputUser::UserSelf],
            })
            .await;
        match answer {
            Ok(users) => {
                if let Some(me) = users.iter().find_map(map::PeerDesc::from_user) {
                    self.set_self_username(me.username);
                }
            }
            Err(e) => {
                tracing::debug!(error = %classify(&e), "could not learn the account's username")
            }
        }
    }

    /// The account's username, if known.
    pub fn self_username(&self) -> Option<String> {
        self.self_username
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The ledger of our own sends.
    pub fn ledger(&self) -> &Arc<SentLedger> {
        &self.ledger
    }

    /// Records a send (before its in-flight guard is dropped) and writes the ledger.
    async fn remember_sent(&self, chat: ChatId, id: MessageId, random_id: i64) {
        self.ledger.record(chat, id, random_id);
        if let Err(e) = self.ledger.save().await {
            tracing::warn!(error = %e, "could not save the sent-message ledger");
        }
    }

    /// Fills in the short name of a sticker's set when the message named the set by id only
    /// (one `messages.getStickerSet` per set, cached), so the persona can send it back by
    /// name. Failures leave the set unknown.
    pub(crate) async fn resolve_sticker_set(&self, mapped: &mut Mapped) {
        if let Some(set) = mapped.sticker_set.clone() {
            self.resolve_set(&mut mapped.message, &set).await;
        }
    }

    async fn resolve_set(&self, message: &mut Message, set: &map::StickerSetRef) {
        let map::StickerSetRef::Id { id, .. } = set.clone() else {
            return;
        };
        let Some(sticker) = message
            .media
            .as_mut()
            .and_then(|m| m.sticker.as_mut())
            .filter(|s| s.set.is_none())
        else {
            return;
        };
        let known = self
            .set_names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned();
        let name = match known {
            Some(name) => name,
            None => {
                let stickerset = set.to_input();
                match self
                    .call(&tl::functions::messages::GetStickerSet {
                        stickerset,
                        hash: 0,
                    })
                    .await
                {
                    Ok(tl::enums::messages::StickerSet::Set(set)) => {
                        let tl::enums::StickerSet::Set(info) = set.set;
                        self.set_names
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(id, info.short_name.clone());
                        info.short_name
                    }
                    Ok(_) => return,
                    Err(e) => {
                        tracing::debug!(error = %classify(&e), "sticker set name not resolved");
                        return;
                    }
                }
            }
        };
        sticker.set = Some(name);
    }

    /// Maps a message from Telegram into the domain, learning the names it carries.
    pub fn map(&self, m: &grammers_client::message::Message) -> Result<Mapped, map::Ignored> {
        let mapped = self.with_known(Some(m), |ctx, known| map::map_message_with(m, ctx, known));
        if let Ok(mapped) = &mapped {
            self.note_mapped(mapped, &m.raw);
        }
        mapped
    }

    /// Maps a raw message of an answer (a history page, a dialog's newest message) with the
    /// names learnt so far, and notes what it tells like a live one: the chat's newest id,
    /// an unread mention, its forum topic.
    pub(crate) fn map_fetched(&self, raw: &tl::enums::Message) -> Result<Mapped, map::Ignored> {
        let mapped = self.map_raw_message(raw);
        if let Ok(mapped) = &mapped {
            self.note_mapped(mapped, raw);
        }
        mapped
    }

    /// What a mapped message tells about its chat: the newest message id (how an unknown
    /// peer is fetched), an unread mention to clear, the forum topic.
    fn note_mapped(&self, mapped: &Mapped, raw: &tl::enums::Message) {
        let Ok(id) = i32::try_from(mapped.message.id.0) else {
            return;
        };
        let mut hints = self.hints.lock().unwrap_or_else(PoisonError::into_inner);
        let newest = hints.entry(mapped.chat.id).or_insert(id);
        *newest = (*newest).max(id);
        drop(hints);
        if mapped.callout && mapped.chat.kind == ChatKind::Group {
            // Telegram counts it as an unread mention until readMentions.
            self.note_unread(
                mapped.chat.id,
                UnreadFlags {
                    mentions: true,
                    marked: false,
                },
            );
        }
        if mapped.chat.kind == ChatKind::Group {
            self.topics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .learn(
                    mapped.chat.id,
                    id,
                    map::topic_of(raw),
                    !mapped.message.outgoing,
                );
        }
    }

    /// Maps a raw message of an answer (not an update) with the names learnt so far.
    fn map_raw_message(&self, raw: &tl::enums::Message) -> Result<Mapped, map::Ignored> {
        self.with_known(None, |ctx, known| map::map_raw(raw, ctx, known))
    }

    /// Runs a mapping with what this account knows: its own id and username, the names seen
    /// so far (after learning those `carrier` brings) and the ids of our own sends.
    fn with_known(
        &self,
        carrier: Option<&grammers_client::message::Message>,
        f: impl FnOnce(&MapContext, &Known<'_>) -> Result<Mapped, map::Ignored>,
    ) -> Result<Mapped, map::Ignored> {
        let ctx = self.map_context();
        let own = |chat: ChatId, id: MessageId| self.ledger.recorded(chat, id);
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = carrier {
            peers.remember_message(m);
        }
        f(
            &ctx,
            &Known {
                peers: Some(&peers),
                is_own_message: Some(&own),
            },
        )
    }

    /// Caches users and chats of an answer in the session (access hashes) and the name cache.
    pub(crate) async fn cache_peers(
        &self,
        users: Vec<tl::enums::User>,
        chats: Vec<tl::enums::Chat>,
    ) {
        {
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            users.iter().for_each(|u| peers.remember_user(u));
            chats.iter().for_each(|c| peers.remember_chat(c));
        }
        store_peers(&self.client(), self.session.as_ref(), users, chats).await;
    }

    /// Where every raw TL call of this account goes.
    pub(crate) fn invoker(&self) -> &dyn Invoker {
        self.invoker.as_ref()
    }

    /// Learns a chat's access hash: the newest message seen there through getMessages (works
    /// for DMs and basic groups), else the first page of dialogs.
    async fn learn(&self, chat: ChatId) -> bool {
        let Some(id) = PeerId::from_bot_api_dialog_id(chat.0) else {
            return false;
        };
        let hint = self
            .hints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&chat)
            .copied();
        if let Some(msg_id) = hint
            && id.kind() != grammers_client::session::types::PeerKind::Channel
        {
            let answer = self
                .call(&tl::functions::messages::GetMessages {
                    id: vec![tl::types::InputMessageId { id: msg_id }.into()],
                })
                .await;
            if let Ok(answer) = answer {
                let (_, users, chats) = fetch::parts(answer);
                self.cache_peers(users, chats).await;
            }
        }
        if self.cached(id).await {
            return true;
        }
        // The first page of dialogs (a raw call: it does not touch the saved channel pts).
        let answer = self
            .call(&tl::functions::messages::GetDialogs {
                exclude_pinned: false,
                folder_id: None,
                offset_date: 0,
                offset_id: 0,
                offset_peer: tl::enums::InputPeer::Empty,
                limit: 100,
                hash: 0,
            })
            .await;
        if let Ok(answer) = answer {
            let (users, chats) = match answer {
                tl::enums::messages::Dialogs::Dialogs(d) => (d.users, d.chats),
                tl::enums::messages::Dialogs::Slice(d) => (d.users, d.chats),
                tl::enums::messages::Dialogs::NotModified(_) => (Vec::new(), Vec::new()),
            };
            self.cache_peers(users, chats).await;
        }
        self.cached(id).await
    }

    async fn cached(&self, id: PeerId) -> bool {
        matches!(self.session.peer_ref(id).await, Ok(Some(_)))
    }

    /// Maps a grammers error for the recovery rules.
    fn call_error(e: &grammers_client::InvocationError) -> CallError {
        crate::adapters::mtproto::errors::call_error(e)
    }

    /// The access reference of a chat, from the session's peer cache.
    async fn peer(&self, chat: ChatId) -> TgResult<PeerRef> {
        let id = PeerId::from_bot_api_dialog_id(chat.0)
            .ok_or_else(|| TelegramError::NotFound(format!("chat id {chat} is not valid")))?;
        match self.session.peer_ref(id).await {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Ok(id.to_ambient_ref()),
            Err(e) => Err(TelegramError::Other(format!("session cache: {e}"))),
        }
    }

    async fn input_peer(&self, chat: ChatId) -> TgResult<tl::enums::InputPeer> {
        Ok(self.peer(chat).await?.into())
    }

    /// The access reference of a chat, for `reactions`.
    pub(super) async fn input_peer_for_reactions(
        &self,
        chat: ChatId,
    ) -> TgResult<tl::enums::InputPeer> {
        self.input_peer(chat).await
    }
}

impl MtprotoTelegram {
    /// Maps an update of the stream into the pump's domain update (`None`: not handled).
    pub(crate) fn to_update(&self, update: &grammers_client::update::Update) -> Option<TgUpdate> {
        use grammers_client::update::Update;
        match update {
            Update::NewMessage(m) => {
                let msg: &grammers_client::message::Message = m;
                if let Some((from, to)) = map::migration(&msg.raw) {
                    return Some(TgUpdate::Migrated { from, to });
                }
                self.map(msg)
                    .ok()
                    .map(|x| TgUpdate::NewMessage(incoming(x)))
            }
            Update::MessageEdited(m) => {
                let msg: &grammers_client::message::Message = m;
                // Reaction and view changes arrive as edits too: only a visible edit counts.
                if !map::is_real_edit(&msg.raw) {
                    return None;
                }
                self.map(msg).ok().map(|x| TgUpdate::Edited(incoming(x)))
            }
            Update::MessageDeleted(d) => map::map_deletion(d).map(|d| TgUpdate::Deleted {
                chat: d.chat,
                ids: d.ids,
            }),
            _ => None,
        }
    }
}

/// Caches the access hashes of users and chats in the session: never a "min" object (its
/// hash is not one this account may use).
pub(crate) async fn store_peers<S>(
    client: &Client,
    session: &S,
    users: Vec<tl::enums::User>,
    chats: Vec<tl::enums::Chat>,
) where
    S: Session,
    S::Error: std::fmt::Display,
{
    let infos: Vec<PeerInfo> = users
        .into_iter()
        .filter(|u| matches!(u, tl::enums::User::User(u) if !u.min && u.access_hash.is_some()))
        .map(|u| PeerInfo::from(&grammers_client::peer::User::from_raw(client, u)))
        .chain(
            chats
                .into_iter()
                .filter(|c| !matches!(c, tl::enums::Chat::Channel(ch) if ch.min))
                .map(|c| PeerInfo::from(&grammers_client::peer::Peer::from_raw(client, c))),
        )
        .collect();
    for info in infos {
        if let Err(e) = session.cache_peer(info).await {
            tracing::debug!(error = %e, "could not cache a peer");
        }
    }
}

/// A mapped message as the pump sees it.
pub(crate) fn incoming(m: Mapped) -> Incoming {
    let sticker_set_id = match m.sticker_set {
        Some(map::StickerSetRef::Id { id, access_hash }) => Some((id, access_hash)),
        _ => None,
    };
    Incoming {
        chat: m.chat,
        message: m.message,
        callout: m.callout,
        sticker_set_id,
    }
}

impl Lookups for MtprotoTelegram {
    fn is_blocked(&self, user: i64) -> BoxFuture<'_, bool> {
        Box::pin(MtprotoTelegram::is_blocked(self, user))
    }

    fn is_muted(&self, chat: ChatId) -> BoxFuture<'_, bool> {
        Box::pin(MtprotoTelegram::is_muted(self, chat))
    }

    fn enrich<'a>(&'a self, incoming: &'a mut Incoming) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some((id, access_hash)) = incoming.sticker_set_id {
                let set = map::StickerSetRef::Id { id, access_hash };
                self.resolve_set(&mut incoming.message, &set).await;
            }
            // A short update names no sender object: the session cache knows bots.
            let sender = &mut incoming.message.sender;
            if !sender.is_bot
                && let Some(id) = PeerId::user(sender.id)
                && let Ok(Some(PeerInfo::User {
                    bot: Some(true), ..
                })) = self.session.peer(id).await
            {
                sender.is_bot = true;
            }
        })
    }

    fn recent(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Incoming>>> {
        Box::pin(async move {
            let peer = self.input_peer(chat).await?;
            let answer = self
                .call(&tl::functions::messages::GetHistory {
                    peer,
                    offset_id: 0,
                    offset_date: 0,
                    add_offset: 0,
                    limit: i32::try_from(limit).unwrap_or(100),
                    max_id: 0,
                    min_id: 0,
                    hash: 0,
                })
                .await
                .map_err(|e| classify(&e))?;
            let (messages, users, chats) = fetch::parts(answer);
            self.cache_peers(users, chats).await;
            let mut out: Vec<Incoming> = messages
                .iter()
                .filter_map(|raw| self.map_raw_message(raw).ok())
                .map(incoming)
                .collect();
            out.reverse(); // newest first from Telegram; oldest first for us
            Ok(out)
        })
    }
}

impl PeerLearner for MtprotoTelegram {
    fn learn_peer(&self, chat: ChatId) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let learnt = self.learn(chat).await;
            tracing::info!(chat = %chat, learnt, "peer was not cached; fetched it");
            learnt
        })
    }
}
