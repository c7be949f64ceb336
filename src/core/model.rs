//! The Telegram boundary: domain types for chats, messages and media, the [`Telegram`] trait
//! every backend implements, and its typed errors. Handlers and the runtime talk to Telegram
//! only through this trait; nothing outside a backend module may know which library (or fake)
//! sits behind it. One trait object serves one agent's account.
//!
//! Backends: [`memory::MemoryTelegram`] (tests and the `chat` playground). The MTProto backend
//! plugs in behind the same trait.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A Telegram chat id (users positive, groups negative, as in the Bot API numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChatId(pub i64);

/// A chat as a plan names it: by id, or by the name it goes by (a person's name, a group's
/// title), which the scheduler resolves among the persona's chats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChatRef {
    Id(ChatId),
    Name(String),
}

impl fmt::Display for ChatRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatRef::Id(id) => write!(f, "{id}"),
            ChatRef::Name(name) => write!(f, "{name:?}"),
        }
    }
}

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
    pub(crate) fn is_direct(self) -> bool {
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
    /// One of Telegram's own service accounts (login codes, notices, support).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub service: bool,
    /// A deleted account.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
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
    pub media: Option<Box<MediaInfo>>,
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
    /// The text is longer than Telegram takes in one message (MESSAGE_TOO_LONG): the send
    /// path splits it further and tries again (see `core::blocks::text_parts`).
    #[error("the text is longer than Telegram takes in one message ({0})")]
    TooLong(String),
    #[error("network error: {0}")]
    Network(String),
    #[error("telegram error: {0}")]
    Other(String),
    /// A failure on this side of the port (the in-memory backend's transcript file), kept
    /// whole. Transient, like `Other`.
    #[error("telegram error: {0}")]
    Local(#[source] LocalFailure),
}

/// An error of this process (a file behind the in-memory backend, the terminal of a login)
/// kept whole inside an error that must stay cloneable and comparable: two are equal when
/// they are the same failure.
#[derive(Debug, Clone)]
pub struct LocalFailure(pub std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl LocalFailure {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> LocalFailure {
        LocalFailure(std::sync::Arc::new(e))
    }
}

impl PartialEq for LocalFailure {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LocalFailure {}

impl std::fmt::Display for LocalFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for LocalFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
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
                | TelegramError::Local(_)
        )
    }
}

pub(crate) type TgResult<T> = Result<T, TelegramError>;

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

/// An outbound voice note: an Ogg/Opus file already encoded (mono 48 kHz), with what was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingVoice {
    pub chat: ChatId,
    /// The Ogg/Opus file.
    pub ogg: std::sync::Arc<Vec<u8>>,
    pub duration_secs: u32,
    /// Telegram's packed 5-bit waveform (what its player draws).
    pub waveform: Vec<u8>,
    /// The transcript: kept in our own history, NOT sent as a caption.
    pub text: String,
    pub reply_to: Option<MessageId>,
    /// Stored in the task before the call: a repeated key must not send twice.
    pub idempotency_key: i64,
}

/// An item of the persona's album to send (`send_media`). The backend reads the file only
/// when it has to upload it: an account that sent the same bytes before (the same
/// `content_hash`) sends its stored reference again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMedia {
    pub chat: ChatId,
    /// The album id (for the message's media record and the logs).
    pub album_id: String,
    pub kind: MediaKind,
    /// The file, read when it is uploaded.
    pub path: std::path::PathBuf,
    /// The name it is sent under.
    pub file_name: String,
    pub mime: String,
    /// SHA-256 of the bytes (hex): the key its upload is kept under per account.
    pub content_hash: String,
    pub reply_to: Option<MessageId>,
    /// Stored in the task before the call: a repeated key must not send twice.
    pub idempotency_key: i64,
}

/// Most stickers listed from one curated set (the list is part of every prompt).
pub(crate) const MAX_PER_SET: usize = 60;

/// One sticker the persona may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratedSticker {
    pub set: String,
    pub name: String,
    /// The description cache key.
    pub unique_id: String,
    /// The cached description, when there is one (filled at planning time).
    pub description: Option<String>,
}
