//! The Telegram port: the [`Telegram`] trait every backend implements (MTProto in
//! `adapters::mtproto`, the in-memory twin in `adapters::memory`). Handlers and the runtime talk
//! to an account only through it; the vocabulary it speaks (chats, messages, errors) is
//! `core::model`. It holds no implementation beyond the trait's defaults and
//! [`send_in_parts`], the way every text goes out (split to fit, over the trait's own call).

use std::collections::VecDeque;

use crate::core::blocks::{TELEGRAM_TEXT_LIMIT_UTF16, part_key, text_parts};
use crate::core::model::{
    Chat, ChatId, Message, MessageId, OutgoingMedia, OutgoingSticker, OutgoingText, OutgoingVoice,
    SetSticker, StickerChoice, TelegramError, TgResult,
};
use crate::core::time::BoxFuture;

/// One agent's Telegram account.
pub trait Telegram: Send + Sync + 'static {
    /// The account's own user id.
    fn self_id(&self) -> i64;
    /// What the backend knows of a chat.
    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>>;
    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>>;
    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>>;
    /// Sends a voice note (no caption). The message returned has media kind Voice (mime
    /// audio/ogg, its duration) and the transcript as its text, so history and later prompts
    /// know what was said. A chat or user that refuses voice notes answers
    /// [`TelegramError::ContentRefused`]: the caller sends the same words as text.
    fn send_voice(&self, msg: OutgoingVoice) -> BoxFuture<'_, TgResult<Message>>;
    /// Sends an item of the persona's album (no caption): uploaded once per account, its
    /// reference reused after that (see [`OutgoingMedia`]). The message returned carries the
    /// item's media kind and its album id as the media's id.
    fn send_media(&self, msg: OutgoingMedia) -> BoxFuture<'_, TgResult<Message>>;
    /// Shows "recording voice" in the chat (as `typing` shows typing).
    fn recording_voice(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>>;
    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>>;
    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>>;
    fn delete_history(&self, chat: ChatId, for_both_sides: bool) -> BoxFuture<'_, TgResult<()>>;
    /// Shows the account online (it is reading or writing) or offline (asleep): Telegram's
    /// `account.updateStatus`. An online status lapses by itself after a few minutes.
    fn set_online(&self, online: bool) -> BoxFuture<'_, TgResult<()>>;
    /// A basic group became the supergroup `to`: what a wrapper knows about `from` (that
    /// people wrote there, say) holds for `to`. Backends with nothing to carry ignore it.
    fn chat_migrated(&self, from: ChatId, to: ChatId) {
        let _ = (from, to);
    }
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
pub(crate) fn same_reaction(a: &str, b: &str) -> bool {
    let strip = |s: &str| -> String {
        s.trim()
            .chars()
            .filter(|c| !matches!(c, '\u{fe0f}' | '\u{fe0e}'))
            .collect()
    };
    strip(a) == strip(b)
}

/// The shortest part a text refused as too long is split into (below it the refusal stands).
const MIN_PART_UTF16: usize = 256;

/// Sends `msg` as the messages it takes ([`text_parts`] at Telegram's limit), in
/// order. A part Telegram still refuses as too long (MESSAGE_TOO_LONG: its count can differ
/// from ours) is split again at half the limit and sent as smaller parts; below
/// [`MIN_PART_UTF16`] the refusal stands. Returns the messages sent, in order (at least one).
pub async fn send_in_parts(
    telegram: &dyn Telegram,
    msg: OutgoingText,
) -> Result<Vec<Message>, TelegramError> {
    let limit = TELEGRAM_TEXT_LIMIT_UTF16;
    let mut queue: VecDeque<(OutgoingText, usize)> = text_parts(&msg, limit)
        .into_iter()
        .map(|p| (p, limit))
        .collect();
    let mut sent = Vec::new();
    while let Some((part, limit)) = queue.pop_front() {
        match telegram.send_text(part.clone()).await {
            Ok(message) => sent.push(message),
            Err(e @ TelegramError::TooLong(_)) => {
                let smaller = limit / 2;
                // The pieces' keys come from a key of their own (never one the first split
                // gave the parts after this one), the same at every retry.
                let base = OutgoingText {
                    idempotency_key: part_key(!part.idempotency_key, 1),
                    ..part.clone()
                };
                let pieces = text_parts(&base, smaller);
                if smaller < MIN_PART_UTF16 || pieces.len() < 2 {
                    return Err(e);
                }
                tracing::warn!(
                    event = "text_split_further",
                    chat = part.chat.0,
                    limit_utf16 = smaller,
                    parts = pieces.len(),
                    "Telegram refused a part as too long; sending it in smaller parts"
                );
                for piece in pieces.into_iter().rev() {
                    queue.push_front((piece, smaller));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}
