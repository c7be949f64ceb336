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
        let (sent, fresh) = self
            .post(
                msg.chat,
                msg.idempotency_key,
                String::new(),
                msg.reply_to,
                |_| Some(info),
            )
            .await?;
        if fresh {
            self.record(Action::Media {
                chat: msg.chat,
                message: sent.clone(),
                album_id: msg.album_id,
            });
        }
        Ok(sent)
    }
}
