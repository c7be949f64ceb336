//! Inbound mapping: turns what grammers delivers (raw `tl::enums::Message`s, the `message::Message`
//! wrapper of the update stream, deletion updates, user and chat objects) into the daemon's domain
//! types ([`Chat`], [`Message`], [`MediaInfo`](crate::core::model::MediaInfo), ...). It owns chat
//! classification (DM, basic group, supergroup; broadcast channels are ignored), sender names,
//! mention extraction with UTF-16 entity offsets, the `callout` rule, and media classification. It
//! is pure: no network, no session access, no clock, no logging, and it never panics on any input
//! (grammers helpers that unwrap, such as `Message::peer_id` or `Document::id`, are deliberately
//! not used). The MTProto backend calls it for every new message, edit, deletion and history page,
//! after feeding the [`PeerCache`].

use std::collections::HashMap;

use grammers_client::message::Message as GMessage;
use grammers_client::peer::Peer;
use grammers_client::session::types::PeerId;
use grammers_client::tl;
use grammers_client::update::MessageDeletion;
use jiff::Timestamp;

use crate::core::model::{Chat, ChatId, ChatKind, Mention, Message, MessageId, Sender};
mod media;

use media::map_media;

/// What kind of peer an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerClass {
    User,
    BasicGroup,
    Supergroup,
    Broadcast,
}

/// What the mapper needs to know about a user or chat, without grammers types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDesc {
    /// Bot-API style id (users positive, basic groups `-id`, channels `-100…id`).
    pub id: i64,
    pub class: PeerClass,
    /// First + last name for users, title for chats. May be empty.
    pub name: String,
    pub username: Option<String>,
    pub is_bot: bool,
    /// Telegram's own service or support account.
    pub service: bool,
    /// A deleted account.
    pub deleted: bool,
    pub is_self: bool,
    /// A "min" object: Telegram left some fields out, so it must not erase known ones.
    pub min: bool,
}

impl PeerDesc {
    /// From a raw user object (`None` for `userEmpty` or an out-of-range id).
    pub fn from_user(user: &tl::enums::User) -> Option<Self> {
        let tl::enums::User::User(u) = user else {
            return None;
        };
        let id = PeerId::user(u.id)?.bot_api_dialog_id()?;
        let username = u.username.clone().or_else(|| {
            u.usernames.as_ref().and_then(|names| {
                names.iter().find_map(|n| match n {
                    tl::enums::Username::Username(n) if n.active => Some(n.username.clone()),
                    _ => None,
                })
            })
        });
        Some(PeerDesc {
            id,
            class: PeerClass::User,
            name: full_name(u.first_name.as_deref(), u.last_name.as_deref()),
            username,
            is_bot: u.bot,
            service: u.support || crate::core::admission::is_service_account(id),
            deleted: u.deleted,
            is_self: u.is_self,
            min: u.min,
        })
    }

    /// From a raw chat object (basic group, supergroup, channel; forbidden ones included).
    pub fn from_chat(chat: &tl::enums::Chat) -> Option<Self> {
        let desc = |id: i64, class: PeerClass, title: &str, username: Option<String>, min| {
            Some(PeerDesc {
                id,
                class,
                name: title.to_string(),
                username,
                is_bot: false,
                service: false,
                deleted: false,
                is_self: false,
                min,
            })
        };
        match chat {
            tl::enums::Chat::Empty(_) => None,
            tl::enums::Chat::Chat(c) => {
                let id = chat_peer(c.id)?.bot_api_dialog_id()?;
                desc(id, PeerClass::BasicGroup, &c.title, None, false)
            }
            tl::enums::Chat::Forbidden(c) => {
                let id = chat_peer(c.id)?.bot_api_dialog_id()?;
                desc(id, PeerClass::BasicGroup, &c.title, None, false)
            }
            tl::enums::Chat::Channel(c) => {
                let id = channel_peer(c.id)?.bot_api_dialog_id()?;
                let class = if c.broadcast {
                    PeerClass::Broadcast
                } else {
                    PeerClass::Supergroup
                };
                desc(id, class, &c.title, c.username.clone(), c.min)
            }
            tl::enums::Chat::ChannelForbidden(c) => {
                let id = channel_peer(c.id)?.bot_api_dialog_id()?;
                let class = if c.broadcast {
                    PeerClass::Broadcast
                } else {
                    PeerClass::Supergroup
                };
                desc(id, class, &c.title, None, false)
            }
            // Communities are folders of chats, not conversations.
            tl::enums::Chat::Community(_) | tl::enums::Chat::CommunityForbidden(_) => None,
        }
    }

    /// From grammers' high-level peer (what `Message::peer()` / `sender()` return).
    pub(crate) fn from_peer(peer: &Peer) -> Option<Self> {
        match peer {
            Peer::User(u) => Self::from_user(&u.raw),
            Peer::Group(g) => Self::from_chat(&g.raw),
            Peer::Channel(c) => Self::from_chat(&tl::enums::Chat::Channel(c.raw.clone())),
            Peer::Community(_) => None,
        }
    }
}

fn full_name(first: Option<&str>, last: Option<&str>) -> String {
    let first = first.unwrap_or("").trim();
    let last = last.unwrap_or("").trim();
    match (first.is_empty(), last.is_empty()) {
        (false, false) => format!("{first} {last}"),
        (false, true) => first.to_string(),
        (true, false) => last.to_string(),
        (true, true) => String::new(),
    }
}

/// Names and kinds of peers seen so far, by Bot-API id. grammers' session cache keeps only
/// ids and access hashes, and short updates carry no peer objects, so the backend keeps one
/// of these for the account: feed it from every update ([`PeerCache::remember_message`]),
/// from dialogs at start-up and from the `users`/`chats` of history responses.
#[derive(Debug, Clone, Default)]
pub struct PeerCache {
    peers: HashMap<i64, PeerDesc>,
}

impl PeerCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    pub fn get(&self, id: i64) -> Option<&PeerDesc> {
        self.peers.get(&id)
    }

    /// Adds or refreshes a peer. A "min" object never erases a known username or name.
    pub fn insert(&mut self, desc: PeerDesc) {
        match self.peers.get_mut(&desc.id) {
            Some(old) => {
                let mut new = desc;
                if new.name.is_empty() {
                    new.name = std::mem::take(&mut old.name);
                }
                if new.min && new.username.is_none() {
                    new.username = old.username.take();
                }
                new.is_self |= old.is_self && new.min;
                *old = new;
            }
            None => {
                self.peers.insert(desc.id, desc);
            }
        }
    }

    pub fn remember_user(&mut self, user: &tl::enums::User) {
        if let Some(d) = PeerDesc::from_user(user) {
            self.insert(d);
        }
    }

    pub fn remember_chat(&mut self, chat: &tl::enums::Chat) {
        if let Some(d) = PeerDesc::from_chat(chat) {
            self.insert(d);
        }
    }

    /// Remembers the chat and sender objects an update carried (if it carried any).
    pub fn remember_message(&mut self, m: &GMessage) {
        for desc in message_peers(m) {
            self.insert(desc);
        }
    }
}

/// The peer objects a grammers message carries (its chat and its sender), if any.
///
/// grammers' accessors convert ids with unchecked constructors (a debug assertion, then
/// `unreachable!` on out-of-range ids), so they are only called once the raw ids are known
/// to be in range.
fn message_peers(m: &GMessage) -> Vec<PeerDesc> {
    let mut out = Vec::new();
    if raw_peer(&m.raw).and_then(peer_id_of).is_none() {
        return out;
    }
    if let Some(d) = m.peer().and_then(PeerDesc::from_peer) {
        out.push(d);
    }
    let from_in_range = raw_from(&m.raw).is_none_or(|p| peer_id_of(p).is_some());
    if from_in_range && let Some(d) = m.sender().and_then(PeerDesc::from_peer) {
        out.push(d);
    }
    out
}

/// Who the account is: enough to tell mentions of it and its own messages apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapContext {
    /// The account's own user id.
    pub self_id: i64,
    /// The account's username, without `@`.
    pub self_username: Option<String>,
}

/// Optional knowledge that makes the mapping richer: names of peers the update did not
/// carry (short updates carry none), and which messages the account wrote (a reply to one
/// is a callout even when Telegram's `mentioned` flag is missing).
#[derive(Default, Clone, Copy)]
pub struct Known<'a> {
    pub peers: Option<&'a PeerCache>,
    pub is_own_message: Option<&'a dyn Fn(ChatId, MessageId) -> bool>,
}

/// Where a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Someone else wrote it.
    Incoming,
    /// The account wrote it: from another device, or the daemon itself (the backend tells
    /// its own sends apart by comparing ids with what it sent).
    OwnDevice,
}

/// A sticker set reference as the message carries it; an id needs `messages.getStickerSet`
/// to learn the set's short name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StickerSetRef {
    ShortName(String),
    Id { id: i64, access_hash: i64 },
}

impl StickerSetRef {
    /// The input form for `messages.getStickerSet`.
    pub fn to_input(&self) -> tl::enums::InputStickerSet {
        match self {
            StickerSetRef::ShortName(short_name) => tl::types::InputStickerSetShortName {
                short_name: short_name.clone(),
            }
            .into(),
            StickerSetRef::Id { id, access_hash } => tl::types::InputStickerSetId {
                id: *id,
                access_hash: *access_hash,
            }
            .into(),
        }
    }
}

/// A message mapped into the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    pub chat: Chat,
    pub message: Message,
    /// The account is addressed: mentioned, named by username or id, or replied to.
    pub callout: bool,
    pub origin: Origin,
    /// For stickers: the set as the message names it. `message.media.sticker.set` is filled
    /// only for a short name; for an id, resolve it (`messages.getStickerSet`, cached by id)
    /// and fill it in.
    pub sticker_set: Option<StickerSetRef>,
    /// Bot-API ids of the chat or sender that were not in the cache (names left empty).
    pub missing_peers: Vec<i64>,
}

/// Why a message was not mapped (not something the daemon handles: a broadcast post, a
/// service message, ...). The reason is a fixed phrase, safe to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ignored(pub &'static str);

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Messages deleted, as far as Telegram says: DMs and basic groups give ids only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub chat: Option<ChatId>,
    pub ids: Vec<MessageId>,
}

/// Maps a message of grammers' update stream with only the peer objects
/// it carries. Prefer [`map_message_with`] and a [`PeerCache`].
pub fn map_message(m: &GMessage, ctx: &MapContext) -> Result<Mapped, Ignored> {
    map_message_with(m, ctx, &Known::default())
}

/// Maps a message using the peer objects it carries first and the cache second.
pub fn map_message_with(
    m: &GMessage,
    ctx: &MapContext,
    known: &Known<'_>,
) -> Result<Mapped, Ignored> {
    map_with(&m.raw, ctx, known, &message_peers(m))
}

/// Maps an edited message: the same mapping as a new one.
pub fn map_edit(m: &GMessage, ctx: &MapContext, known: &Known<'_>) -> Result<Mapped, Ignored> {
    map_message_with(m, ctx, known)
}

/// Maps a raw message (history pages of raw `messages.getHistory`, tests).
pub fn map_raw(
    raw: &tl::enums::Message,
    ctx: &MapContext,
    known: &Known<'_>,
) -> Result<Mapped, Ignored> {
    map_with(raw, ctx, known, &[])
}

/// What the pump learns from one TL-serialized message or update: each decoded object run
/// through the mapping functions here, as the pump would. For the `telegram` fuzz target
/// (`crate::fuzz`); `None` when the bytes decode as neither.
pub fn map_serialized(bytes: &[u8], ctx: &MapContext) -> Option<SerializedMapping> {
    use grammers_client::tl::Deserializable as _;
    if let Ok(raw) = tl::enums::Message::from_bytes(bytes) {
        return Some(SerializedMapping::Message {
            mapped: Box::new(map_raw(&raw, ctx, &Known::default())),
            topic: topic_of(&raw),
            migration: migration(&raw),
            real_edit: is_real_edit(&raw),
        });
    }
    let update = tl::enums::Update::from_bytes(bytes).ok()?;
    Some(SerializedMapping::Update(map_deleted_raw(&update)))
}

/// The result of [`map_serialized`].
#[derive(Debug)]
pub enum SerializedMapping {
    Message {
        mapped: Box<Result<Mapped, Ignored>>,
        topic: Option<i32>,
        migration: Option<(ChatId, ChatId)>,
        real_edit: bool,
    },
    Update(Option<Deleted>),
}

/// The forum topic a message belongs to (the id of the topic's first message), if it was
/// written in a topic other than "General".
pub fn topic_of(raw: &tl::enums::Message) -> Option<i32> {
    let header = match raw {
        tl::enums::Message::Message(m) => m.reply_to.as_ref(),
        tl::enums::Message::Service(m) => m.reply_to.as_ref(),
        tl::enums::Message::Empty(_) => None,
    };
    let tl::enums::MessageReplyHeader::Header(h) = header? else {
        return None;
    };
    if !h.forum_topic {
        return None;
    }
    h.reply_to_top_id.or(h.reply_to_msg_id)
}

/// A basic group's "upgraded to supergroup" service message: (old chat, new chat).
pub fn migration(raw: &tl::enums::Message) -> Option<(ChatId, ChatId)> {
    let tl::enums::Message::Service(s) = raw else {
        return None;
    };
    let tl::enums::MessageAction::ChatMigrateTo(a) = &s.action else {
        return None;
    };
    let from = chat_id_of(&s.peer_id)?;
    let to = channel_peer(a.channel_id)?.bot_api_dialog_id()?;
    Some((from, ChatId(to)))
}

/// Whether an "edited" message was really edited (Telegram also sends edits for reaction
/// and view count changes; those carry no visible edit date, or a hidden one).
pub fn is_real_edit(raw: &tl::enums::Message) -> bool {
    matches!(raw, tl::enums::Message::Message(m) if m.edit_date.is_some() && !m.edit_hide)
}

/// Maps grammers' deletion update.
pub(crate) fn map_deletion(d: &MessageDeletion) -> Option<Deleted> {
    map_deleted_raw(&d.raw)
}

/// Maps a raw deletion update; `None` for any other update.
pub fn map_deleted_raw(update: &tl::enums::Update) -> Option<Deleted> {
    let ids = |v: &[i32]| v.iter().map(|&i| MessageId(i64::from(i))).collect();
    match update {
        tl::enums::Update::DeleteMessages(u) => Some(Deleted {
            chat: None,
            ids: ids(&u.messages),
        }),
        tl::enums::Update::DeleteChannelMessages(u) => Some(Deleted {
            chat: channel_peer(u.channel_id)
                .and_then(PeerId::bot_api_dialog_id)
                .map(ChatId),
            ids: ids(&u.messages),
        }),
        _ => None,
    }
}

/// Whose notification settings an `updateNotifySettings` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotifyTarget {
    /// One chat's own setting.
    Chat(ChatId),
    /// The account's default for DMs (`notifyUsers`).
    Users,
    /// The account's default for groups (`notifyChats`; supergroups follow it too).
    Groups,
}

/// The mute setting (`mute_until`, `None`: no setting of its own, or not muted for the
/// defaults) an `updateNotifySettings` pushes, and whom it is about; `None` for any other
/// update, and for broadcast channels, forum topics and communities (never planned for).
pub fn notify_settings(update: &tl::enums::Update) -> Option<(NotifyTarget, Option<i32>)> {
    let tl::enums::Update::NotifySettings(u) = update else {
        return None;
    };
    let target = match &u.peer {
        tl::enums::NotifyPeer::Peer(p) => NotifyTarget::Chat(chat_id_of(&p.peer)?),
        tl::enums::NotifyPeer::NotifyUsers => NotifyTarget::Users,
        tl::enums::NotifyPeer::NotifyChats => NotifyTarget::Groups,
        _ => return None,
    };
    let tl::enums::PeerNotifySettings::Settings(settings) = &u.notify_settings;
    Some((target, settings.mute_until))
}

/// A channel's (or supergroup's) peer id; `None` out of Telegram's ranges. grammers'
/// `PeerId::channel` computes the id before it checks the range, which overflows (a panic in
/// debug builds) for ids near the ends of i64 (found by fuzzing); this checks first.
pub(crate) fn channel_peer(id: i64) -> Option<PeerId> {
    (1..=MAX_CHANNEL_ID)
        .contains(&id)
        .then(|| PeerId::channel(id))
        .flatten()
}

/// A basic group's peer id; `None` out of range (checked first, as for [`channel_peer`]).
pub(crate) fn chat_peer(id: i64) -> Option<PeerId> {
    (id > 0).then(|| PeerId::chat(id)).flatten()
}

/// The largest channel id Telegram uses (monoforums end at 3·10¹²).
const MAX_CHANNEL_ID: i64 = 3_000_000_000_000;

/// Bot-API chat id of a raw peer, `None` when the id is out of Telegram's ranges.
pub fn chat_id_of(peer: &tl::enums::Peer) -> Option<ChatId> {
    peer_id_of(peer)
        .and_then(PeerId::bot_api_dialog_id)
        .map(ChatId)
}

/// Checked conversion (grammers' `From<Peer>` uses unchecked constructors that can panic).
fn peer_id_of(peer: &tl::enums::Peer) -> Option<PeerId> {
    match peer {
        tl::enums::Peer::User(p) => PeerId::user(p.user_id),
        tl::enums::Peer::Chat(p) => chat_peer(p.chat_id),
        tl::enums::Peer::Channel(p) => channel_peer(p.channel_id),
    }
}

fn raw_peer(raw: &tl::enums::Message) -> Option<&tl::enums::Peer> {
    match raw {
        tl::enums::Message::Empty(m) => m.peer_id.as_ref(),
        tl::enums::Message::Message(m) => Some(&m.peer_id),
        tl::enums::Message::Service(m) => Some(&m.peer_id),
    }
}

fn raw_from(raw: &tl::enums::Message) -> Option<&tl::enums::Peer> {
    match raw {
        tl::enums::Message::Empty(_) => None,
        tl::enums::Message::Message(m) => m.from_id.as_ref(),
        tl::enums::Message::Service(m) => m.from_id.as_ref(),
    }
}

/// Cut `length` UTF-16 units at UTF-16 `offset` out of `text`. `None` when the range is
/// negative, past the end, or splits a surrogate pair.
pub fn utf16_slice(text: &str, offset: i32, length: i32) -> Option<&str> {
    let start = usize::try_from(offset).ok()?;
    let len = usize::try_from(length).ok()?;
    let end = start.checked_add(len)?;
    let (mut units, mut start_byte, mut end_byte) = (0usize, None, None);
    for (byte, ch) in text.char_indices() {
        if units == start {
            start_byte = Some(byte);
        }
        if units == end {
            end_byte = Some(byte);
            break;
        }
        units += ch.len_utf16();
    }
    if units == start && start_byte.is_none() {
        start_byte = Some(text.len());
    }
    if units == end && end_byte.is_none() {
        end_byte = Some(text.len());
    }
    text.get(start_byte?..end_byte?)
}

/// The message's mentions: user ids from name mentions, usernames (without `@`) from
/// `@username` mentions. Duplicates are dropped; malformed entities are skipped.
pub fn mentions(text: &str, entities: &[tl::enums::MessageEntity]) -> Vec<Mention> {
    let mut out: Vec<Mention> = Vec::new();
    for e in entities {
        let mention = match e {
            tl::enums::MessageEntity::MentionName(m) => Some(Mention {
                user_id: Some(m.user_id),
                username: None,
            }),
            tl::enums::MessageEntity::InputMessageEntityMentionName(m) => match &m.user_id {
                tl::enums::InputUser::User(u) => Some(Mention {
                    user_id: Some(u.user_id),
                    username: None,
                }),
                _ => None,
            },
            tl::enums::MessageEntity::Mention(m) => utf16_slice(text, m.offset, m.length)
                .map(|s| s.trim().trim_start_matches('@'))
                .filter(|s| !s.is_empty())
                .map(|s| Mention {
                    user_id: None,
                    username: Some(s.to_string()),
                }),
            _ => None,
        };
        if let Some(m) = mention
            && !out.contains(&m)
        {
            out.push(m);
        }
    }
    out
}

fn timestamp(unix: i32) -> Timestamp {
    Timestamp::from_second(i64::from(unix)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The replied-to message in the same chat, if any (forum topic roots are not replies,
/// and replies to other chats or stories are dropped).
fn reply_to(header: Option<&tl::enums::MessageReplyHeader>, chat: ChatId) -> Option<MessageId> {
    let tl::enums::MessageReplyHeader::Header(h) = header? else {
        return None;
    };
    if let Some(peer) = &h.reply_to_peer_id
        && chat_id_of(peer) != Some(chat)
    {
        return None;
    }
    if h.forum_topic && h.reply_to_top_id.is_none() {
        return None;
    }
    h.reply_to_msg_id.map(|id| MessageId(i64::from(id)))
}

fn map_with(
    raw: &tl::enums::Message,
    ctx: &MapContext,
    known: &Known<'_>,
    extra: &[PeerDesc],
) -> Result<Mapped, Ignored> {
    let m = match raw {
        tl::enums::Message::Message(m) => m,
        tl::enums::Message::Service(_) => return Err(Ignored("service message")),
        tl::enums::Message::Empty(_) => return Err(Ignored("empty message")),
    };
    let Some(chat_id) = chat_id_of(&m.peer_id) else {
        return Err(Ignored("peer id out of range"));
    };
    let lookup = |id: i64| -> Option<&PeerDesc> {
        extra
            .iter()
            .find(|d| d.id == id)
            .or_else(|| known.peers.and_then(|p| p.get(id)))
    };
    let mut missing = Vec::new();
    let chat_desc = lookup(chat_id.0);
    if chat_desc.is_none() {
        missing.push(chat_id.0);
    }

    let kind = match &m.peer_id {
        tl::enums::Peer::User(_) => ChatKind::Direct,
        tl::enums::Peer::Chat(_) => ChatKind::Group,
        tl::enums::Peer::Channel(_) => {
            let broadcast = match chat_desc.map(|d| d.class) {
                Some(PeerClass::Broadcast) => true,
                Some(_) => false,
                None => m.post,
            };
            if broadcast {
                return Err(Ignored("broadcast channel"));
            }
            ChatKind::Group
        }
    };
    let chat = Chat {
        id: chat_id,
        kind,
        title: chat_desc.map(|d| d.name.clone()).unwrap_or_default(),
    };

    let from = m.from_id.as_ref().and_then(chat_id_of);
    let outgoing = m.out || from == Some(ChatId(ctx.self_id));
    let sender_id = match (from, kind) {
        (Some(id), _) => id,
        (None, ChatKind::Direct) if outgoing => ChatId(ctx.self_id),
        // DMs: the other user; groups without from_id: the chat itself (anonymous admin).
        (None, _) => chat_id,
    };
    let sender = match lookup(sender_id.0) {
        Some(d) => Sender {
            id: sender_id.0,
            name: d.name.clone(),
            username: d.username.clone(),
            is_bot: d.is_bot,
            service: d.service,
            deleted: d.deleted,
        },
        None => {
            if sender_id.0 != ctx.self_id && !missing.contains(&sender_id.0) {
                missing.push(sender_id.0);
            }
            Sender {
                id: sender_id.0,
                name: String::new(),
                username: (sender_id.0 == ctx.self_id)
                    .then(|| ctx.self_username.clone())
                    .flatten(),
                is_bot: false,
                service: crate::core::admission::is_service_account(sender_id.0),
                deleted: false,
            }
        }
    };

    let entities = m.entities.as_deref().unwrap_or(&[]);
    let mentions = mentions(&m.message, entities);
    let reply_to = reply_to(m.reply_to.as_ref(), chat_id);
    let (media, sticker_set) = match &m.media {
        Some(media) => map_media(media),
        None => (None, None),
    };

    let names_us = mentions.iter().any(|mention| {
        mention.user_id == Some(ctx.self_id)
            || match (&mention.username, ctx.self_username.as_deref()) {
                (Some(u), Some(me)) => u.eq_ignore_ascii_case(me.trim_start_matches('@')),
                _ => false,
            }
    });
    let replies_to_us = match (reply_to, known.is_own_message) {
        (Some(r), Some(is_own)) => is_own(chat_id, r),
        _ => false,
    };
    let callout = !outgoing && (m.mentioned || names_us || replies_to_us);

    let message = Message {
        id: MessageId(i64::from(m.id)),
        chat: chat_id,
        sender,
        outgoing,
        text: m.message.clone(),
        mentions,
        reply_to,
        date: timestamp(m.date),
        media: media.map(Box::new),
    };
    Ok(Mapped {
        chat,
        message,
        callout,
        origin: if outgoing {
            Origin::OwnDevice
        } else {
            Origin::Incoming
        },
        sticker_set,
        missing_peers: missing,
    })
}
