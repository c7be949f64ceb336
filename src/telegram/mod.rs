//! The Telegram boundary: domain types for chats, messages and media, the [`Telegram`] trait
//! every backend implements, and its typed errors. Handlers and the runtime talk to Telegram
//! only through this trait; nothing outside a backend module may know which library (or fake)
//! sits behind it. One trait object serves one agent's account.
//!
//! Backends: [`memory::MemoryTelegram`] (tests and the `chat` playground). The MTProto backend
//! plugs in behind the same trait.

pub mod governor;
pub mod memory;
pub mod mtproto;

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::clock::BoxFuture;

/// A Telegram chat id (users positive, groups negative, as in the Bot API numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChatId(pub i64);

impl fmt::Display for ChatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A message id, unique within its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(pub i64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What kind of conversation a chat is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatKind {
    /// A one-on-one conversation with a user.
    Direct,
    /// A basic group or a supergroup.
    Group,
}

impl ChatKind {
    pub fn is_direct(self) -> bool {
        self == ChatKind::Direct
    }
}

/// A chat as the runtime knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chat {
    pub id: ChatId,
    pub kind: ChatKind,
    /// The other user's display name in a DM, the group title in a group.
    pub title: String,
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    pub id: i64,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_bot: bool,
}

/// A mention of a user inside a message's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mention {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// The kind of media attached to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Photo,
    Sticker,
    Gif,
    Video,
    RoundVideo,
    Voice,
    Audio,
    Document,
}

impl MediaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Photo => "photo",
            MediaKind::Sticker => "sticker",
            MediaKind::Gif => "gif",
            MediaKind::Video => "video",
            MediaKind::RoundVideo => "round_video",
            MediaKind::Voice => "voice",
            MediaKind::Audio => "audio",
            MediaKind::Document => "document",
        }
    }
}

/// Sticker details of a sticker message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StickerInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    /// The sticker's name inside its set (Telegram calls it `alt`: usually an emoji).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
}

/// Media attached to a message, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaInfo {
    pub kind: MediaKind,
    /// Stable id of the file (Telegram's document or photo id): the description cache key.
    pub unique_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker: Option<StickerInfo>,
}

/// One message of a chat, inbound or our own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub id: MessageId,
    pub chat: ChatId,
    pub sender: Sender,
    /// Written by this agent's account.
    pub outgoing: bool,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<Mention>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    pub date: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaInfo>,
}

/// A sticker to send, named by set and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StickerChoice {
    pub set: String,
    pub name: String,
}

/// One sticker of a sticker set, as listed by [`Telegram::sticker_set`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetSticker {
    /// The sticker's name inside its set (its emoji, usually).
    pub name: String,
    /// The same stable id its messages carry (the description cache key).
    pub unique_id: String,
}

/// Errors a Telegram backend reports, already classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelegramError {
    #[error("flood wait: Telegram asks to wait {secs} s")]
    FloodWait { secs: u64 },
    #[error("slow mode: the chat allows a message every {secs} s")]
    SlowmodeWait { secs: u64 },
    #[error("the account is limited by Telegram ({0})")]
    AccountLimited(String),
    #[error("writing to this chat is forbidden ({0})")]
    Forbidden(String),
    /// The chat refuses this kind of content (stickers, media, GIFs, a Premium-only item);
    /// other messages can still go there.
    #[error("this chat refuses this kind of content ({0})")]
    ContentRefused(String),
    #[error("the session is no longer authorized ({0})")]
    Unauthorized(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("network error: {0}")]
    Network(String),
    #[error("telegram error: {0}")]
    Other(String),
}

impl TelegramError {
    /// Whether trying the same call again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            TelegramError::FloodWait { .. }
                | TelegramError::SlowmodeWait { .. }
                | TelegramError::Network(_)
                | TelegramError::Other(_)
        )
    }
}

pub type TgResult<T> = Result<T, TelegramError>;

/// An outbound text message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingText {
    pub chat: ChatId,
    pub text: String,
    pub reply_to: Option<MessageId>,
    /// Stored in the task before the call: a repeated key must not send twice.
    pub idempotency_key: i64,
}

/// An outbound sticker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingSticker {
    pub chat: ChatId,
    pub sticker: StickerChoice,
    pub reply_to: Option<MessageId>,
    pub idempotency_key: i64,
}

/// One agent's Telegram account.
pub trait Telegram: Send + Sync + 'static {
    /// The account's own user id.
    fn self_id(&self) -> i64;
    /// What the backend knows of a chat.
    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>>;
    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>>;
    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>>;
    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>>;
    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>>;
    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn delete_history(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    /// The newest `limit` messages, returned oldest first.
    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>>;
    /// Whether `choice` names a sticker that can be sent: its set exists and holds a sticker
    /// with that name (Telegram's `alt`, usually an emoji). Backends fetch and cache the set
    /// on first use; only that set is loaded.
    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>>;
    /// The stickers of a set, by its short name (NotFound when there is no such set).
    fn sticker_set(&self, set: &str) -> BoxFuture<'_, TgResult<Vec<SetSticker>>>;
    /// The bytes of a message's media, refusing files over `max_bytes`.
    fn download_media(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> BoxFuture<'_, TgResult<Vec<u8>>>;
    /// The reactions allowed in a chat (Telegram's available reactions narrowed by the chat's
    /// own setting); `None` when the backend cannot tell, which allows any. Callers cache it.
    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        let _ = chat;
        Box::pin(async { Ok(None) })
    }
}

/// Whether two reaction emoji are the same, ignoring variation selectors (U+FE0F, U+FE0E).
pub fn same_reaction(a: &str, b: &str) -> bool {
    let strip = |s: &str| -> String {
        s.trim()
            .chars()
            .filter(|c| !matches!(c, '\u{fe0f}' | '\u{fe0e}'))
            .collect()
    };
    strip(a) == strip(b)
}
