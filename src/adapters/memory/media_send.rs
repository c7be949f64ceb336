//! Album items on the in-memory account (`send_media`): the item becomes a message of its
//! media kind without text, whose media names the album id, file name, type and size; the
//! file is not copied (the album keeps it). A repeated idempotency key answers the message
//! already sent. Called by the trait implementation in `telegram`.

use super::{Action, MemoryTelegram};
use crate::core::model::{MediaInfo, Message, OutgoingMedia, TgResult};

impl MemoryTelegram {
    /// Sends an album item (see the module docs).
    pub(super) async fn media(&self, msg: OutgoingMedia) -> TgResult<Message> {
        let size = std::fs::metadata(&msg.path).ok().map(|m| m.len());
        let info = MediaInfo {
            kind: msg.kind,
            unique_id: msg.album_id.clone(),
            mime: Some(msg.mime.clone()),
            size,
            duration_secs: None,
            file_name: Some(msg.file_name.clone()),
            sticker: None,
        };
        let chat = msg.chat;
        self.post_media(chat, msg.idempotency_key, msg.reply_to, info, |message| {
            Action::Media {
                chat,
                message,
                album_id: msg.album_id,
            }
        })
        .await
    }

    /// Posts a message of `media` without text (unless the key was used before) and records
    /// `action` of it the first time.
    pub(super) async fn post_media(
        &self,
        chat: crate::core::model::ChatId,
        key: i64,
        reply_to: Option<crate::core::model::MessageId>,
        media: MediaInfo,
        action: impl FnOnce(Message) -> Action,
    ) -> TgResult<Message> {
        let (sent, fresh) = self
            .post(chat, key, String::new(), reply_to, |_| Some(media))
            .await?;
        if fresh {
            self.record(action(sent.clone()));
        }
        Ok(sent)
    }
}
