//! Speech providers behind the one port (`ports::speech::Speech`): OpenAI-compatible
//! `/audio/speech` (`openai`, asking for Opus), Gemini's speech generation (`gemini`, PCM
//! out), and the local engine espeak-ng (`espeak`, no network). [`speech_for`] builds one from
//! the environment, wrapped in the LLM layer's retry policy and in metering with the hold at a
//! reached daily cap (`wrappers`); `http` is the exchange the two HTTP clients share, `pcm`
//! reads uncompressed audio. Nothing here encodes a voice note or knows Telegram: the caller
//! encodes `SpeechAudio::Pcm` and, when speech fails (a cap included), keeps the words as text.

pub mod espeak;
pub mod gemini;
pub(crate) mod http;
pub mod openai;
pub mod pcm;
pub mod wrappers;

use std::sync::Arc;

pub use espeak::espeak_available;
pub use wrappers::{MeteredSpeech, RetryingSpeech, synthesize_for};

use crate::adapters::llm::retry::RetryConfig;
use crate::adapters::llm::usage::UsageMeter;
use crate::ports::clock::SharedClock;
use crate::ports::speech::{Speech, SpeechError, SpeechProviderKind};
use crate::ports::spend::CapHold;

/// A setting from `lookup`, trimmed; blank counts as unset (as the chat clients read theirs).
fn setting(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A variable lookup (the process environment in the daemon; a map in tests).
pub type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What [`speech_for`] builds a voice from.
#[derive(Clone)]
pub struct SpeechEnv {
    /// Keys, base URLs, models and voices (`OPENAI_*`, `GEMINI_*`, `PERSONAD_ESPEAK`).
    pub lookup: Lookup,
    pub clock: SharedClock,
    /// The retry policy's settings (the LLM layer's defaults unless told otherwise).
    pub retry: RetryConfig,
    /// The process's usage meter (none: counted nowhere).
    pub meter: Option<Arc<UsageMeter>>,
    /// Whether a reached cap holds an agent (none: never held).
    pub hold: Option<Arc<dyn CapHold>>,
}

impl SpeechEnv {
    /// The process environment on `clock`, default retries, no meter, no hold.
    pub fn from_env(clock: SharedClock) -> SpeechEnv {
        SpeechEnv {
            lookup: Arc::new(|name: &str| std::env::var(name).ok()),
            clock,
            retry: RetryConfig::default(),
            meter: None,
            hold: None,
        }
    }

    /// Counting in `meter`.
    pub fn with_meter(mut self, meter: Arc<UsageMeter>) -> SpeechEnv {
        self.meter = Some(meter);
        self
    }

    /// Held by `hold` (the runtime's handle).
    pub fn with_hold(mut self, hold: Arc<dyn CapHold>) -> SpeechEnv {
        self.hold = Some(hold);
        self
    }
}

/// The voice of `kind`, configured from `env`, retried and metered: retry over metering over
/// the client, so each attempt is counted, and checked against the cap before it is made.
pub fn speech_for(
    kind: SpeechProviderKind,
    env: &SpeechEnv,
) -> Result<Arc<dyn Speech>, SpeechError> {
    let lookup = |name: &str| (env.lookup)(name);
    let (client, model): (Arc<dyn Speech>, String) = match kind {
        SpeechProviderKind::OpenAi => {
            let client =
                openai::OpenAiSpeech::new(openai::OpenAiSpeechConfig::from_lookup(lookup)?)?;
            let model = client.model().to_owned();
            (Arc::new(client), model)
        }
        SpeechProviderKind::Gemini => {
            let client =
                gemini::GeminiSpeech::new(gemini::GeminiSpeechConfig::from_lookup(lookup)?)?;
            let model = client.model().to_owned();
            (Arc::new(client), model)
        }
        SpeechProviderKind::Espeak => {
            let client = espeak::Espeak::new(espeak::EspeakConfig::from_lookup(lookup));
            (Arc::new(client), espeak::MODEL.to_owned())
        }
    };
    let metered: Arc<dyn Speech> = Arc::new(MeteredSpeech::new(
        client,
        kind.as_str(),
        &model,
        env.meter.clone(),
        env.hold.clone(),
        Arc::clone(&env.clock),
    ));
    Ok(Arc::new(RetryingSpeech::new(
        metered,
        env.retry,
        Arc::clone(&env.clock),
    )))
}
