//! Voice notes on the in-memory account: a voice note is a message of kind voice whose text
//! is its transcript (what was said, for history and later prompts) and whose Ogg/Opus file
//! is kept in memory and, with a state folder, written next to the transcripts as
//! `voice/<chat>/<id>.ogg` (the name its media records). A chat can be marked as refusing
//! voice notes, as a Telegram chat that forbids them or a user who takes them from Premium
//! accounts only: a send there answers `ContentRefused("CHAT_SEND_VOICES_FORBIDDEN")` and
//! creates nothing. Called by the trait implementation in `telegram`.

use std::sync::Arc;

use super::{Action, MemoryTelegram};
use crate::adapters::store::{self, layout};
use crate::core::model::{
    ChatId, LocalFailure, MediaInfo, MediaKind, Message, MessageId, OutgoingVoice, TelegramError,
    TgResult,
};

/// What a chat that refuses voice notes answers (Telegram's error name).
pub const VOICES_FORBIDDEN: &str = "CHAT_SEND_VOICES_FORBIDDEN";

impl MemoryTelegram {
    /// Marks `chat` as refusing voice notes (`refuse`), or accepting them again.
    pub fn refuse_voice(&self, chat: ChatId, refuse: bool) {
        let mut st = self.lock();
        if refuse {
            st.voice_refused.insert(chat);
        } else {
            st.voice_refused.remove(&chat);
        }
    }

    /// The file of a voice note this account sent.
    pub fn voice_file(&self, chat: ChatId, message: MessageId) -> Option<Arc<Vec<u8>>> {
        self.lock().voices.get(&(chat, message)).cloned()
    }

    /// Where a voice note's file is kept (`None` without a state folder).
    pub fn voice_path(&self, chat: ChatId, message: MessageId) -> Option<std::path::PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(layout::voice_note_name(chat, message)))
    }

    /// Sends a voice note (see the module docs). A repeated idempotency key answers the
    /// message already sent (writing its file again if it went missing).
    pub(super) async fn voice(&self, msg: OutgoingVoice) -> TgResult<Message> {
        let refused = self.lock().voice_refused.contains(&msg.chat);
        if refused {
            return Err(TelegramError::ContentRefused(VOICES_FORBIDDEN.into()));
        }
        let chat = msg.chat;
        let size = u64::try_from(msg.ogg.len()).ok();
        let duration = msg.duration_secs;
        let (sent, fresh) = self
            .post(chat, msg.idempotency_key, msg.text, msg.reply_to, |id| {
                Some(MediaInfo {
                    kind: MediaKind::Voice,
                    unique_id: format!("voice:{chat}:{id}"),
                    mime: Some("audio/ogg".into()),
                    size,
                    duration_secs: Some(duration),
                    file_name: Some(layout::voice_note_name(chat, id)),
                    sticker: None,
                })
            })
            .await?;
        self.lock()
            .voices
            .entry((chat, sent.id))
            .or_insert_with(|| Arc::clone(&msg.ogg));
        let file = self.voice_path(chat, sent.id);
        if let Some(path) = &file {
            write_if_missing(path.clone(), Arc::clone(&msg.ogg)).await?;
        }
        if fresh {
            self.record(Action::Voice {
                chat,
                message: sent.clone(),
                file,
            });
        }
        Ok(sent)
    }
}

/// Writes a voice note's file (atomically, off the async threads) unless it is there.
async fn write_if_missing(path: std::path::PathBuf, bytes: Arc<Vec<u8>>) -> TgResult<()> {
    tokio::task::spawn_blocking(move || {
        if path.is_file() {
            return Ok(());
        }
        store::write_atomic(&path, &bytes)
    })
    .await
    .map_err(|e| TelegramError::Local(LocalFailure::new(e)))?
    .map_err(|e| TelegramError::Local(LocalFailure::new(e)))
}
