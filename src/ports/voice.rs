//! The voice port: a persona's words made into a voice note ([`VoiceMaker::make`]: speech from
//! the persona's engine, encoded as the Ogg/Opus file Telegram plays as a voice message, with
//! its duration and waveform), metered and held at the spending cap by whoever implements it
//! (`adapters::voice_studio`). The `voice` task's handler calls it, then sends the file through
//! the Telegram port; it knows no engine, no codec and no file format.

use std::sync::Arc;

use crate::core::model::ChatId;
use crate::core::time::BoxFuture;
use crate::core::voice::VoiceSettings;

/// One voice note to make.
#[derive(Debug, Clone, Copy)]
pub struct VoiceRequest<'a> {
    pub agent: &'a str,
    pub chat: ChatId,
    pub settings: &'a VoiceSettings,
    /// The words said.
    pub text: &'a str,
    /// The task's idempotency key: the same key makes the same note once (a retry after a
    /// crash reuses the file instead of paying for the speech again).
    pub key: i64,
}

/// A voice note ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeVoice {
    /// Ogg/Opus, mono, 48 kHz.
    pub ogg: Arc<Vec<u8>>,
    pub duration_secs: u32,
    /// Telegram's packed 5-bit waveform.
    pub waveform: Vec<u8>,
}

/// Why no voice note was made; the handler then sends the words as text.
#[derive(Debug, thiserror::Error)]
pub enum VoiceFailure {
    /// The speech engine could not speak: not installed or configured, the daily spending
    /// cap reached (no request was made), or the provider failed.
    #[error(transparent)]
    Speech(#[from] crate::core::speech::SpeechError),
    /// The speech could not become a voice note (longer than one may be, unreadable audio).
    #[error("the voice note could not be made: {0}")]
    Encode(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Makes voice notes.
pub trait VoiceMaker: Send + Sync + 'static {
    fn make<'a>(&'a self, req: VoiceRequest<'a>) -> BoxFuture<'a, Result<MadeVoice, VoiceFailure>>;
}

pub type SharedVoice = Arc<dyn VoiceMaker>;
