//! The speech port: the [`Speech`] trait every speech provider implements (OpenAI-compatible,
//! Gemini, espeak-ng, and the retry and metering wrappers in `adapters::speech`). The request,
//! audio and error shapes are `core::speech`. A caller whose request fails keeps the words as
//! text; nothing here encodes audio or knows Telegram.

pub use crate::core::speech::{SpeechAudio, SpeechError, SpeechProviderKind, SpeechRequest};
use crate::core::time::BoxFuture;

/// A voice behind some provider. Provider clients make one request per call; the retry
/// wrapper adds the LLM layer's retry policy and the metering wrapper counts and caps.
pub trait Speech: Send + Sync + 'static {
    /// Speaks `req.text`.
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>>;

    /// What it is, for `check`: `openai:gpt-4o-mini-tts at https://…/audio/speech`, say
    /// (no key, no query).
    fn describe(&self) -> String;
}
