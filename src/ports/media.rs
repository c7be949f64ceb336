//! The media port: what the `received` handler needs from media understanding. It describes
//! the media of a chat's history (within the implementation's budget, from its caches or a
//! model) and hands back the cached records of given media ids (for curated stickers).
//!
//! The implementation is `adapters::media::MediaPipeline`; the app builds one per process and
//! gives it to the runtime. This module holds the trait only.

use std::sync::Arc;

use crate::core::media::MediaDescriptions;
use crate::core::model::{ChatId, MediaInfo, Message};
use crate::core::time::BoxFuture;
use crate::ports::telegram::Telegram;

/// Turns a chat's media into description records.
pub trait MediaDescriber: Send + Sync + 'static {
    /// The records of every medium in `history`, after describing what the budget allows
    /// (media without a usable record yet render as "not described yet").
    fn describe_pass<'a>(
        self: Arc<Self>,
        telegram: Arc<dyn Telegram>,
        chat: ChatId,
        history: &'a [Message],
    ) -> BoxFuture<'a, MediaDescriptions>;

    /// The cached records of these media ids; starts no description.
    fn cached(&self, ids: Vec<String>) -> BoxFuture<'_, MediaDescriptions>;

    /// Records `words` as the transcript of a voice note whose words are known (one the
    /// persona sent, one given with its words): later prompts show them, and it is never
    /// transcribed (a history read back from Telegram carries no text for a voice note).
    fn known_words<'a>(&'a self, media: &'a MediaInfo, words: String) -> BoxFuture<'a, ()>;
}

/// Shared handle.
pub(crate) type SharedMedia = Arc<dyn MediaDescriber>;
