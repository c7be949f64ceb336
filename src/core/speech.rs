//! Speech as data: which provider makes a voice ([`SpeechProviderKind`], spelled in persona
//! files and flags), what is asked of it ([`SpeechRequest`]), the audio it gives back
//! ([`SpeechAudio`]: PCM to be encoded here, or a finished Ogg/Opus file) and how it fails
//! ([`SpeechError`]). Pure vocabulary: no HTTP, no process, no encoding. The speech port
//! (`ports::speech`) and the providers in `adapters::speech` use it; the caller of a failed
//! request keeps the words as text.

use std::fmt;
use std::str::FromStr;

/// Who synthesizes speech.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpeechProviderKind {
    /// OpenAI's `/v1/audio/speech`, or a local server implementing it.
    OpenAi,
    /// Gemini's speech generation (a TTS model's `generateContent`).
    Gemini,
    /// The local engine espeak-ng: no network, no model download.
    Espeak,
}

impl SpeechProviderKind {
    /// Every kind, in the order errors list them.
    pub const ALL: [SpeechProviderKind; 3] = [
        SpeechProviderKind::OpenAi,
        SpeechProviderKind::Gemini,
        SpeechProviderKind::Espeak,
    ];

    /// Its name in persona files, flags and `check`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpeechProviderKind::OpenAi => "openai",
            SpeechProviderKind::Gemini => "gemini",
            SpeechProviderKind::Espeak => "espeak",
        }
    }
}

impl fmt::Display for SpeechProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SpeechProviderKind {
    type Err = crate::core::Invalid;

    /// `openai`, `gemini`, `espeak` (or `espeak-ng`), in any case.
    fn from_str(s: &str) -> Result<SpeechProviderKind, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(SpeechProviderKind::OpenAi),
            "gemini" => Ok(SpeechProviderKind::Gemini),
            "espeak" | "espeak-ng" | "local" => Ok(SpeechProviderKind::Espeak),
            _ => Err(crate::core::Invalid(format!(
                "`{}` is not a speech provider: use openai, gemini or espeak",
                s.trim()
            ))),
        }
    }
}

/// What to say, and in which voice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechRequest {
    /// The words, as the listener should hear them.
    pub text: String,
    /// The provider's voice name (`alloy`, `Kore`, an espeak-ng voice); `None`: its default.
    pub voice: Option<String>,
    /// BCP-47-ish language (`en`, `de`, `pt-BR`); `None`: the provider guesses.
    pub language: Option<String>,
}

impl SpeechRequest {
    /// The words of `text` in the provider's default voice and language.
    pub fn new(text: impl Into<String>) -> SpeechRequest {
        SpeechRequest {
            text: text.into(),
            voice: None,
            language: None,
        }
    }

    /// The characters a provider bills for this request (Unicode scalar values).
    pub fn characters(&self) -> u64 {
        u64::try_from(self.text.chars().count()).unwrap_or(u64::MAX)
    }
}

/// Synthesized speech.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeechAudio {
    /// Mono 16-bit samples at `rate_hz`, to be encoded into a voice note.
    Pcm { rate_hz: u32, samples: Vec<i16> },
    /// A finished Ogg/Opus file, as the provider sent it.
    OggOpus(Vec<u8>),
}

/// Why no speech came back. Messages name the URL tried (never a key or a query) or the
/// program run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeechError {
    /// The provider lacks a setting (a key, a valid base URL).
    #[error("speech is not configured: {0}")]
    NotConfigured(String),
    /// The local engine is not installed (or cannot be run).
    #[error("the speech engine is missing: {0}")]
    EngineMissing(String),
    /// Worth another try later (a 5xx, a rate limit, a broken connection, a timeout).
    #[error("speech failed for now: {0}")]
    Transient(String),
    /// The same request would fail again (a 4xx, a refused voice).
    #[error("speech failed: {0}")]
    Permanent(String),
    /// The agent's daily spending cap is reached: no request was made.
    #[error("{agent} reached its daily budget: no speech until the cap is lifted")]
    CapReached { agent: String },
    /// The provider's answer is not audio we can read.
    #[error("the speech audio is unreadable: {0}")]
    BadAudio(String),
}

impl SpeechError {
    /// Whether another try may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, SpeechError::Transient(_))
    }
}

#[cfg(test)]
mod tests {
    use super::{SpeechProviderKind, SpeechRequest};

    #[test]
    fn provider_names_round_trip_and_unknown_ones_list_the_allowed() {
        for kind in SpeechProviderKind::ALL {
            assert_eq!(kind.to_string().parse::<SpeechProviderKind>(), Ok(kind));
        }
        assert_eq!(
            " eSpeak-NG ".parse::<SpeechProviderKind>(),
            Ok(SpeechProviderKind::Espeak)
        );
        let err = "festival"
            .parse::<SpeechProviderKind>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("openai, gemini or espeak"), "{err}");
    }

    #[test]
    fn characters_are_counted_not_bytes() {
        assert_eq!(SpeechRequest::new("héllo ✓").characters(), 7);
    }
}
