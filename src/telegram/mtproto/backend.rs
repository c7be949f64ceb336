//! The `Telegram` trait on a real account through grammers: every outbound operation as a
//! raw MTProto call (so we control `random_id`, entities and link previews), peer lookup from
//! the session cache, and errors mapped in `errors::classify`. It must not plan, pace or
//! retry: the runtime and the governor do that. The daemon builds one per agent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use grammers_client::Client;
use grammers_client::session::Session;
use grammers_client::session::storages::SqliteSession;
use grammers_client::session::types::{PeerId, PeerRef};
use grammers_client::tl;

use super::errors::classify;
use super::format::to_telegram;
use super::map::{self, Known, MapContext, Mapped, PeerCache};
use crate::clock::{BoxFuture, SharedClock};
use crate::telegram::{
    Chat, ChatId, ChatKind, Message, MessageId, OutgoingSticker, OutgoingText, Sender,
    StickerChoice, Telegram, TelegramError, TgResult,
};

/// One agent's account.
pub struct MtprotoTelegram {
    /// Replaced when the supervisor rebuilds a dead connection pool.
    client: std::sync::RwLock<Client>,
    session: Arc<SqliteSession>,
    self_id: i64,
    self_username: Option<String>,
    clock: SharedClock,
    /// (chat, message) ids this process sent: their echoes in the update stream are ours,
    /// not the owner typing on another device.
    sent: Mutex<HashSet<(ChatId, MessageId)>>,
    /// Names of users and chats seen so far (the session cache keeps ids and hashes only).
    peers: Mutex<PeerCache>,
    /// Sticker sets fetched so far: short name → (name/emoji → document).
    sticker_sets: Mutex<HashMap<String, HashMap<String, tl::enums::InputDocument>>>,
    /// Sticker set id → short name, for stickers whose messages name their set by id only.
    set_names: Mutex<HashMap<i64, String>>,
    /// Users this account blocked (one entry, refreshed every 60 s).
    blocked: moka::future::Cache<(), Arc<HashSet<i64>>>,
    /// Whether a chat is muted, per chat, refreshed every 60 s.
    muted: moka::future::Cache<ChatId, bool>,
}

/// How long blocklist and mute look-ups are trusted.
const LOOKUP_TTL: std::time::Duration = std::time::Duration::from_secs(60);

impl MtprotoTelegram {
    pub fn new(
        client: Client,
        session: Arc<SqliteSession>,
        self_id: i64,
        self_username: Option<String>,
        clock: SharedClock,
    ) -> MtprotoTelegram {
        MtprotoTelegram {
            client: std::sync::RwLock::new(client),
            session,
            self_id,
            self_username,
            clock,
            sent: Mutex::new(HashSet::new()),
            peers: Mutex::new(PeerCache::default()),
            sticker_sets: Mutex::new(HashMap::new()),
            set_names: Mutex::new(HashMap::new()),
            blocked: moka::future::Cache::builder()
                .max_capacity(1)
                .time_to_live(LOOKUP_TTL)
                .build(),
            muted: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(LOOKUP_TTL)
                .build(),
        }
    }

    /// Whether this account blocked `user` (cached for a minute; on failure, assume not).
    pub async fn is_blocked(&self, user: i64) -> bool {
        let set = self
            .blocked
            .try_get_with((), async {
                let mut ids = HashSet::new();
                let mut offset = 0;
                loop {
                    let answer = self
                        .client()
                        .invoke(&tl::functions::contacts::GetBlocked {
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
            .await;
        match set {
            Ok(set) => set.contains(&user),
            Err(e) => {
                tracing::debug!(error = %e, "blocklist look-up failed");
                false
            }
        }
    }

    /// Whether notifications of a chat are muted (cached for a minute; on failure, assume not).
    pub async fn is_muted(&self, chat: ChatId) -> bool {
        let now = self.clock.now().as_second();
        let muted = self
            .muted
            .try_get_with(chat, async {
                let peer = self.input_peer(chat).await?;
                let settings = self
                    .client()
                    .invoke(&tl::functions::account::GetNotifySettings {
                        peer: tl::types::InputNotifyPeer { peer }.into(),
                    })
                    .await
                    .map_err(|e| classify(&e))?;
                let tl::enums::PeerNotifySettings::Settings(s) = settings;
                Ok::<_, TelegramError>(s.mute_until.is_some_and(|until| i64::from(until) > now))
            })
            .await;
        muted.unwrap_or(false)
    }

    /// The current client (cheap to clone).
    pub fn client(&self) -> Client {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Swaps in the client of a rebuilt connection pool.
    pub fn replace_client(&self, client: Client) {
        *self.client.write().unwrap_or_else(PoisonError::into_inner) = client;
    }

    /// What the inbound mapping needs to know about this account.
    pub fn map_context(&self) -> MapContext {
        MapContext {
            self_id: self.self_id,
            self_username: self.self_username.clone(),
        }
    }

    /// Whether the daemon itself sent this message (as opposed to the owner on a phone).
    pub fn sent_by_us(&self, chat: ChatId, id: MessageId) -> bool {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&(chat, id))
    }

    fn remember_sent(&self, chat: ChatId, id: i32) {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((chat, MessageId(i64::from(id))));
    }

    /// Fills in the short name of a sticker's set when the message named the set by id only
    /// (one `messages.getStickerSet` per set, cached), so the persona can send it back by
    /// name. Failures leave the set unknown.
    pub async fn resolve_sticker_set(&self, mapped: &mut Mapped) {
        let Some(map::StickerSetRef::Id { id, .. }) = mapped.sticker_set.clone() else {
            return;
        };
        let Some(sticker) = mapped
            .message
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
                let input = mapped
                    .sticker_set
                    .as_ref()
                    .map(map::StickerSetRef::to_input);
                let Some(stickerset) = input else {
                    return;
                };
                match self
                    .client()
                    .invoke(&tl::functions::messages::GetStickerSet {
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
        let ctx = self.map_context();
        let own = |chat: ChatId, id: MessageId| self.sent_by_us(chat, id);
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers.remember_message(m);
        map::map_message_with(
            m,
            &ctx,
            &Known {
                peers: Some(&peers),
                is_own_message: Some(&own),
            },
        )
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

    fn reply_to(reply: Option<MessageId>) -> Option<tl::enums::InputReplyTo> {
        let id = reply.and_then(|r| i32::try_from(r.0).ok())?;
        Some(
            tl::types::InputReplyToMessage {
                reply_to_msg_id: id,
                top_msg_id: None,
                reply_to_peer_id: None,
                quote_text: None,
                quote_entities: None,
                quote_offset: None,
                monoforum_peer_id: None,
                todo_item_id: None,
                poll_option: None,
            }
            .into(),
        )
    }

    /// The id of the message an `Updates` answer to a send created.
    fn sent_id(updates: &tl::enums::Updates, random_id: i64) -> Option<i32> {
        match updates {
            tl::enums::Updates::UpdateShortSentMessage(u) => Some(u.id),
            tl::enums::Updates::Updates(u) => Self::id_in(&u.updates, random_id),
            tl::enums::Updates::Combined(u) => Self::id_in(&u.updates, random_id),
            _ => None,
        }
    }

    fn id_in(updates: &[tl::enums::Update], random_id: i64) -> Option<i32> {
        updates.iter().find_map(|u| match u {
            tl::enums::Update::MessageId(m) if m.random_id == random_id => Some(m.id),
            _ => None,
        })
    }

    fn outgoing(
        &self,
        chat: ChatId,
        id: i32,
        text: String,
        reply_to: Option<MessageId>,
    ) -> Message {
        Message {
            id: MessageId(i64::from(id)),
            chat,
            sender: Sender {
                id: self.self_id,
                name: String::new(),
                username: self.self_username.clone(),
                is_bot: false,
            },
            outgoing: true,
            text,
            mentions: Vec::new(),
            reply_to,
            date: self.clock.now(),
            media: None,
        }
    }

    /// Finds a sticker document by set and name (or emoji), fetching the set when it is not
    /// cached or when `refresh` asks for fresh file references.
    async fn sticker(
        &self,
        choice: &StickerChoice,
        refresh: bool,
    ) -> TgResult<tl::enums::InputDocument> {
        if !refresh
            && let Some(doc) = self
                .sticker_sets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&choice.set)
                .and_then(|set| set.get(&choice.name))
        {
            return Ok(doc.clone());
        }
        self.fetch_set(&choice.set)
            .await?
            .remove(&choice.name)
            .ok_or_else(|| {
                TelegramError::NotFound(format!("sticker {:?} in set {}", choice.name, choice.set))
            })
    }

    /// Fetches a sticker set from Telegram (fresh file references) and caches it: sticker
    /// name (its emoji) → document.
    async fn fetch_set(
        &self,
        short_name: &str,
    ) -> TgResult<HashMap<String, tl::enums::InputDocument>> {
        let answer = self
            .client()
            .invoke(&tl::functions::messages::GetStickerSet {
                stickerset: tl::types::InputStickerSetShortName {
                    short_name: short_name.to_string(),
                }
                .into(),
                hash: 0,
            })
            .await
            .map_err(|e| classify(&e))?;
        let tl::enums::messages::StickerSet::Set(set) = answer else {
            return Err(TelegramError::NotFound(format!("sticker set {short_name}")));
        };
        let mut by_name: HashMap<String, tl::enums::InputDocument> = HashMap::new();
        for doc in &set.documents {
            let tl::enums::Document::Document(d) = doc else {
                continue;
            };
            let input: tl::enums::InputDocument = tl::types::InputDocument {
                id: d.id,
                access_hash: d.access_hash,
                file_reference: d.file_reference.clone(),
            }
            .into();
            for attr in &d.attributes {
                if let tl::enums::DocumentAttribute::Sticker(s) = attr {
                    by_name
                        .entry(s.alt.clone())
                        .or_insert_with(|| input.clone());
                }
            }
        }
        self.sticker_sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(short_name.to_string(), by_name.clone());
        Ok(by_name)
    }

    async fn send_sticker_doc(
        &self,
        msg: &OutgoingSticker,
        doc: tl::enums::InputDocument,
    ) -> Result<tl::enums::Updates, grammers_client::InvocationError> {
        let peer = self
            .input_peer(msg.chat)
            .await
            .map_err(|_| grammers_client::InvocationError::Dropped("no peer ref"))?;
        self.client()
            .invoke(&tl::functions::messages::SendMedia {
                silent: false,
                background: false,
                clear_draft: false,
                noforwards: false,
                update_stickersets_order: false,
                invert_media: false,
                allow_paid_floodskip: false,
                peer,
                reply_to: Self::reply_to(msg.reply_to),
                media: tl::types::InputMediaDocument {
                    spoiler: false,
                    id: doc,
                    video_cover: None,
                    video_timestamp: None,
                    ttl_seconds: None,
                    query: None,
                }
                .into(),
                message: String::new(),
                random_id: msg.idempotency_key,
                reply_markup: None,
                entities: None,
                schedule_date: None,
                schedule_repeat_period: None,
                send_as: None,
                quick_reply_shortcut: None,
                effect: None,
                allow_paid_stars: None,
                suggested_post: None,
            })
            .await
    }

    async fn set_blocked(&self, chat: ChatId, blocked: bool) -> TgResult<()> {
        let id = self.input_peer(chat).await?;
        let client = self.client();
        let result = if blocked {
            client
                .invoke(&tl::functions::contacts::Block {
                    my_stories_from: false,
                    id,
                })
                .await
        } else {
            client
                .invoke(&tl::functions::contacts::Unblock {
                    my_stories_from: false,
                    id,
                })
                .await
        };
        self.blocked.invalidate(&()).await;
        result.map(|_| ()).map_err(|e| classify(&e))
    }

    fn is_duplicate(e: &grammers_client::InvocationError) -> bool {
        e.is("RANDOM_ID_DUPLICATE")
    }
}

impl Telegram for MtprotoTelegram {
    fn self_id(&self) -> i64 {
        self.self_id
    }

    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        Box::pin(self.fetch_allowed_reactions(chat))
    }

    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>> {
        Box::pin(async move {
            let kind = if chat.0 > 0 {
                ChatKind::Direct
            } else {
                ChatKind::Group
            };
            let id = PeerId::from_bot_api_dialog_id(chat.0)
                .ok_or_else(|| TelegramError::NotFound(format!("chat id {chat}")))?;
            let _ = id;
            let title = self
                .peers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(chat.0)
                .map(|d| d.name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| chat.to_string());
            Ok(Chat {
                id: chat,
                kind,
                title,
            })
        })
    }

    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let (text, entities) = to_telegram(&msg.text);
            let peer = self.input_peer(msg.chat).await?;
            let request = tl::functions::messages::SendMessage {
                no_webpage: true,
                silent: false,
                background: false,
                clear_draft: false,
                noforwards: false,
                update_stickersets_order: false,
                invert_media: false,
                allow_paid_floodskip: false,
                peer,
                reply_to: Self::reply_to(msg.reply_to),
                message: text.clone(),
                random_id: msg.idempotency_key,
                reply_markup: None,
                entities: (!entities.is_empty()).then_some(entities),
                schedule_date: None,
                schedule_repeat_period: None,
                send_as: None,
                quick_reply_shortcut: None,
                effect: None,
                allow_paid_stars: None,
                suggested_post: None,
                rich_message: None,
            };
            match self.client().invoke(&request).await {
                Ok(updates) => {
                    let id = Self::sent_id(&updates, msg.idempotency_key).unwrap_or(0);
                    self.remember_sent(msg.chat, id);
                    Ok(self.outgoing(msg.chat, id, text, msg.reply_to))
                }
                Err(e) if Self::is_duplicate(&e) => {
                    tracing::info!(chat = %msg.chat, "message was already sent before a restart");
                    Ok(self.outgoing(msg.chat, 0, text, msg.reply_to))
                }
                Err(e) => Err(classify(&e)),
            }
        })
    }

    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let doc = self.sticker(&msg.sticker, false).await?;
            let mut result = self.send_sticker_doc(&msg, doc).await;
            if let Err(e) = &result
                && e.is("FILE_REFERENCE_*")
            {
                // File references expire: fetch the set again for a fresh one.
                let doc = self.sticker(&msg.sticker, true).await?;
                result = self.send_sticker_doc(&msg, doc).await;
            }
            match result {
                Ok(updates) => {
                    let id = Self::sent_id(&updates, msg.idempotency_key).unwrap_or(0);
                    self.remember_sent(msg.chat, id);
                    Ok(self.outgoing(msg.chat, id, String::new(), msg.reply_to))
                }
                Err(e) if Self::is_duplicate(&e) => {
                    Ok(self.outgoing(msg.chat, 0, String::new(), msg.reply_to))
                }
                Err(e) => Err(classify(&e)),
            }
        })
    }

    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>> {
        let emoji = emoji.to_string();
        Box::pin(async move {
            let msg_id = i32::try_from(message.0)
                .map_err(|_| TelegramError::Invalid(format!("message id {message}")))?;
            let peer = self.input_peer(chat).await?;
            self.client()
                .invoke(&tl::functions::messages::SendReaction {
                    big: false,
                    add_to_recent: false,
                    peer,
                    msg_id,
                    reaction: Some(vec![tl::types::ReactionEmoji { emoticon: emoji }.into()]),
                })
                .await
                .map(|_| ())
                .map_err(|e| classify(&e))
        })
    }

    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            let peer = self.input_peer(chat).await?;
            self.client()
                .invoke(&tl::functions::messages::SetTyping {
                    peer,
                    top_msg_id: None,
                    action: tl::enums::SendMessageAction::SendMessageTypingAction,
                })
                .await
                .map(|_| ())
                .map_err(|e| classify(&e))
        })
    }

    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            let max_id = i32::try_from(upto.0).unwrap_or(0);
            let peer = self.peer(chat).await?;
            let result = if peer.id.kind() == grammers_client::session::types::PeerKind::Channel {
                self.client()
                    .invoke(&tl::functions::channels::ReadHistory {
                        channel: peer.into(),
                        max_id,
                    })
                    .await
                    .map(|_| ())
            } else {
                self.client()
                    .invoke(&tl::functions::messages::ReadHistory {
                        peer: peer.into(),
                        max_id,
                    })
                    .await
                    .map(|_| ())
            };
            result.map_err(|e| classify(&e))
        })
    }

    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.set_blocked(chat, true))
    }

    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(self.set_blocked(chat, false))
    }

    fn delete_history(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        Box::pin(async move {
            if chat.0 <= 0 {
                return Err(TelegramError::Invalid(
                    "history is only deleted in direct chats".into(),
                ));
            }
            let peer = self.input_peer(chat).await?;
            self.client()
                .invoke(&tl::functions::messages::DeleteHistory {
                    just_clear: false,
                    revoke: true,
                    peer,
                    max_id: 0,
                    min_date: None,
                    max_date: None,
                })
                .await
                .map(|_| ())
                .map_err(|e| classify(&e))
        })
    }

    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>> {
        Box::pin(async move {
            let peer = self.peer(chat).await?;
            let mut iter = self.client().iter_messages(peer).limit(limit);
            let mut out = Vec::with_capacity(limit.min(512));
            loop {
                match iter.next().await {
                    Ok(Some(m)) => {
                        if let Ok(mut mapped) = self.map(&m) {
                            self.resolve_sticker_set(&mut mapped).await;
                            out.push(mapped.message);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return Err(classify(&e)),
                }
            }
            out.reverse(); // newest first from Telegram; oldest first for us
            Ok(out)
        })
    }

    fn sticker_set(&self, set: &str) -> BoxFuture<'_, TgResult<Vec<crate::telegram::SetSticker>>> {
        let set = set.to_string();
        Box::pin(async move {
            let docs = self.fetch_set(&set).await?;
            let mut out: Vec<crate::telegram::SetSticker> = docs
                .into_iter()
                .filter_map(|(name, doc)| match doc {
                    tl::enums::InputDocument::Document(d) => Some(crate::telegram::SetSticker {
                        name,
                        unique_id: d.id.to_string(),
                    }),
                    _ => None,
                })
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
    }

    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>> {
        let choice = choice.clone();
        Box::pin(async move {
            match self.sticker(&choice, false).await {
                Ok(_) => Ok(true),
                Err(TelegramError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn download_media(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> BoxFuture<'_, TgResult<Vec<u8>>> {
        Box::pin(async move {
            let peer = self.peer(chat).await?;
            let id = i32::try_from(message.0)
                .map_err(|_| TelegramError::Invalid(format!("message id {message}")))?;
            let found = self
                .client()
                .get_messages_by_id(peer, &[id])
                .await
                .map_err(|e| classify(&e))?;
            let media = found
                .into_iter()
                .flatten()
                .next()
                .and_then(|m| m.media())
                .ok_or_else(|| TelegramError::NotFound(format!("no media in message {message}")))?;
            let mut iter = self.client().iter_download(&media);
            let mut bytes = Vec::new();
            loop {
                match iter.next().await {
                    Ok(Some(chunk)) => {
                        bytes.extend_from_slice(&chunk);
                        if bytes.len() as u64 > max_bytes {
                            return Err(TelegramError::Invalid(format!(
                                "media is over the {max_bytes} byte cap"
                            )));
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return Err(classify(&e)),
                }
            }
            Ok(bytes)
        })
    }
}
