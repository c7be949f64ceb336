//! The voice studio: the voice port's implementation. A persona's words go to its speech engine
//! (`# Voice`'s provider, else the daemon's `--voice-provider`; `adapters::speech`, retried,
//! metered in characters and held at a reached cap), the audio becomes the voice note Telegram
//! plays (`adapters::voice`, off the async threads), and the note is kept under the task's
//! idempotency key (`<state>/<agent>/voice/<key>.json`) until it is a day old, so a `voice`
//! task retried after a crash sends the same file without paying for the speech again. It
//! does not send (the handler does, through the Telegram port) and decides nothing about when
//! a persona speaks. `app::services` builds it; `check` asks it whether a persona's voice can
//! be made.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::adapters::speech::{self, SpeechEnv};
use crate::adapters::store::{self, StateDir, Symlinks};
use crate::adapters::voice::{self as codec, EncodedVoice};
use crate::core::time::BoxFuture;
use crate::core::voice::VoiceSettings;
use crate::ports::speech::{Speech, SpeechAudio, SpeechError, SpeechProviderKind, SpeechRequest};
use crate::ports::voice::{MadeVoice, VoiceFailure, VoiceMaker, VoiceRequest};

/// How long a made note is kept for a retry of its task.
const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The largest kept note read back (a 60 s note is about 250 KB in its file).
const MAX_KEPT_BYTES: u64 = 4 * 1024 * 1024;

/// Makes voice notes; see the module documentation.
pub struct VoiceStudio {
    env: SpeechEnv,
    default: SpeechProviderKind,
    /// Each engine, built on first use (or why it cannot be).
    voices: Mutex<HashMap<SpeechProviderKind, Built>>,
    state: Option<StateDir>,
}

/// An engine as built (or why it cannot be).
type Built = Result<Arc<dyn Speech>, SpeechError>;

/// A made note as kept on disk.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Kept {
    format: u32,
    duration_secs: u32,
    waveform: Vec<u8>,
    /// The Ogg/Opus file, base64.
    ogg: String,
}

impl VoiceStudio {
    /// A studio whose engines come from `env`, `default` for personas that name none, keeping
    /// made notes under `state` (none: kept nowhere).
    pub fn new(
        env: SpeechEnv,
        default: SpeechProviderKind,
        state: Option<StateDir>,
    ) -> VoiceStudio {
        VoiceStudio {
            env,
            default,
            voices: Mutex::new(HashMap::new()),
            state,
        }
    }

    /// The studio with `speech` as its engine of `kind` (an engine of the caller's own: a
    /// test's, or one built elsewhere).
    pub fn with_engine(self, kind: SpeechProviderKind, speech: Arc<dyn Speech>) -> VoiceStudio {
        self.voices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(kind, Ok(speech));
        self
    }

    /// The engine a persona's settings name.
    pub fn provider_of(&self, settings: &VoiceSettings) -> SpeechProviderKind {
        settings.provider.unwrap_or(self.default)
    }

    /// The engine of `kind`, built once.
    fn voice(&self, kind: SpeechProviderKind) -> Result<Arc<dyn Speech>, SpeechError> {
        let mut voices = self.voices.lock().unwrap_or_else(PoisonError::into_inner);
        voices
            .entry(kind)
            .or_insert_with(|| speech::speech_for(kind, &self.env))
            .clone()
    }

    /// What makes a persona's voice (`espeak:espeak-ng at /usr/bin/espeak-ng`), or why it
    /// cannot be made: for `check`.
    pub fn describe(&self, settings: &VoiceSettings) -> Result<String, SpeechError> {
        let kind = self.provider_of(settings);
        if kind == SpeechProviderKind::Espeak {
            let config = speech::espeak::EspeakConfig::from_lookup(|n| (self.env.lookup)(n));
            if speech::espeak::find_program(&config.program).is_none() {
                return Err(SpeechError::EngineMissing(format!(
                    "{} is not installed (the Debian package espeak-ng)",
                    config.program.display()
                )));
            }
        }
        self.voice(kind).map(|v| v.describe())
    }

    fn kept_path(&self, agent: &str, key: i64) -> Option<PathBuf> {
        self.state
            .as_ref()
            .map(|s| s.agent_dir(agent).join("voice").join(format!("{key}.json")))
    }
}

/// A kept note, if one is there and readable (an unreadable one is made again).
fn read_kept(path: &Path) -> Option<MadeVoice> {
    let bytes = store::read_file(path, MAX_KEPT_BYTES, Symlinks::Refuse).ok()?;
    let kept: Kept = serde_json::from_slice(&bytes).ok()?;
    let ogg = base64::engine::general_purpose::STANDARD
        .decode(kept.ogg)
        .ok()?;
    (kept.format == 1).then(|| MadeVoice {
        ogg: Arc::new(ogg),
        duration_secs: kept.duration_secs,
        waveform: kept.waveform,
    })
}

/// Keeps `made` at `path`, and drops notes in its folder older than [`KEEP_FOR`]. Best
/// effort: a note that cannot be kept is only made again after a crash.
fn keep(path: &Path, made: &MadeVoice) {
    let kept = Kept {
        format: 1,
        duration_secs: made.duration_secs,
        waveform: made.waveform.clone(),
        ogg: base64::engine::general_purpose::STANDARD.encode(made.ogg.as_slice()),
    };
    match serde_json::to_vec(&kept) {
        Ok(bytes) => {
            if let Err(e) = store::write_atomic(path, &bytes) {
                tracing::warn!(error = %e, "a voice note was not kept for a retry");
            }
        }
        Err(e) => tracing::warn!(error = %e, "a voice note was not kept for a retry"),
    }
    let Some(dir) = path.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > KEEP_FOR);
        if old {
            let _ = store::remove(&entry.path());
        }
    }
}

/// The speech as a voice note.
fn encode(audio: SpeechAudio) -> Result<EncodedVoice, codec::VoiceError> {
    match audio {
        SpeechAudio::Pcm { rate_hz, samples } => codec::encode_voice(&samples, rate_hz),
        SpeechAudio::OggOpus(bytes) => codec::voice_from_ogg(&bytes),
    }
}

impl VoiceMaker for VoiceStudio {
    fn make<'a>(&'a self, req: VoiceRequest<'a>) -> BoxFuture<'a, Result<MadeVoice, VoiceFailure>> {
        Box::pin(async move {
            let kept_at = self.kept_path(req.agent, req.key);
            if let Some(path) = kept_at.clone() {
                let found = tokio::task::spawn_blocking(move || read_kept(&path))
                    .await
                    .ok()
                    .flatten();
                if let Some(made) = found {
                    tracing::debug!(agent = %req.agent, key = req.key, "voice note made before a restart: sent as it was");
                    return Ok(made);
                }
            }
            let voice = self.voice(self.provider_of(req.settings))?;
            let ask = SpeechRequest {
                text: req.text.to_owned(),
                voice: req.settings.voice.clone(),
                language: req.settings.language.clone(),
            };
            let audio = speech::synthesize_for(voice.as_ref(), req.agent, req.chat, &ask).await?;
            let encoded = tokio::task::spawn_blocking(move || encode(audio))
                .await
                .map_err(|e| VoiceFailure::Encode(Box::new(e)))?
                .map_err(|e| VoiceFailure::Encode(Box::new(e)))?;
            let made = MadeVoice {
                ogg: Arc::new(encoded.ogg),
                duration_secs: encoded.duration_secs,
                waveform: encoded.waveform,
            };
            if let Some(path) = kept_at {
                let copy = made.clone();
                let _ = tokio::task::spawn_blocking(move || keep(&path, &copy)).await;
            }
            Ok(made)
        })
    }
}
