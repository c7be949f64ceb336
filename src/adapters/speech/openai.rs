//! OpenAI-compatible speech: one `POST {base}/audio/speech` per call (`{base}` is
//! `OPENAI_BASE_URL`, up to and including `/v1`, as for chat), body `{model, input, voice,
//! response_format}`, bearer key. It asks for `opus` (an Ogg/Opus file, sent on as it came) or,
//! for a server without Opus, `pcm` (raw 24 kHz mono 16-bit little-endian samples, encoded
//! here). The key, base URL and cap on the body are read as the chat client reads them
//! (`llm::openai::OpenAiConfig`); the model and voice from `OPENAI_SPEECH_MODEL` and
//! `OPENAI_SPEECH_VOICE`, the format from `OPENAI_SPEECH_FORMAT`. It does not retry or meter
//! (the wrappers in `speech` do); the key goes only in the `Authorization` header.

use std::time::Duration;

use serde::Serialize;

use super::http::{Endpoint, EndpointSpec};
use super::pcm;
use crate::adapters::llm::openai::{OpenAiConfig, Preset};
use crate::core::time::BoxFuture;
use crate::ports::llm::ApiKey;
use crate::ports::speech::{Speech, SpeechAudio, SpeechError, SpeechRequest};

/// The model used unless `OPENAI_SPEECH_MODEL` names another.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini-tts";
/// The voice used unless the request or `OPENAI_SPEECH_VOICE` names another.
pub const DEFAULT_VOICE: &str = "alloy";
/// The variable naming the speech model.
pub const MODEL_ENV: &str = "OPENAI_SPEECH_MODEL";
/// The variable naming the default voice.
pub const VOICE_ENV: &str = "OPENAI_SPEECH_VOICE";
/// The variable choosing the audio format (`opus`, the default, or `pcm`).
pub const FORMAT_ENV: &str = "OPENAI_SPEECH_FORMAT";
/// The sample rate of the API's `pcm` format.
pub const PCM_RATE_HZ: u32 = 24_000;

/// What the server is asked to send back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AudioFormat {
    /// An Ogg/Opus file.
    #[default]
    Opus,
    /// Raw 24 kHz mono 16-bit little-endian samples.
    Pcm,
}

impl AudioFormat {
    fn wire(self) -> &'static str {
        match self {
            AudioFormat::Opus => "opus",
            AudioFormat::Pcm => "pcm",
        }
    }
}

/// Settings of an [`OpenAiSpeech`]. `Debug` is safe to print: the key shows as `[redacted]`.
#[derive(Debug, Clone)]
pub struct OpenAiSpeechConfig {
    /// The bearer key; `None` sends no `Authorization` header (a local server).
    pub api_key: Option<ApiKey>,
    /// Up to and including the version path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    pub voice: String,
    pub format: AudioFormat,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_response_bytes: usize,
}

impl OpenAiSpeechConfig {
    /// The settings from any variable lookup (blank values count as unset): key, base URL
    /// and body cap as the chat client reads them, then the speech model, voice and format.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenAiSpeechConfig, SpeechError> {
        let get = |name: &str| super::setting(&lookup, name);
        let chat = OpenAiConfig::from_lookup(Preset::OpenAi, &lookup)
            .map_err(super::http::not_configured)?;
        let format = match get(FORMAT_ENV).as_deref() {
            None | Some("opus") => AudioFormat::Opus,
            Some("pcm") => AudioFormat::Pcm,
            Some(other) => {
                return Err(SpeechError::NotConfigured(format!(
                    "{FORMAT_ENV}={other:?}: use opus or pcm"
                )));
            }
        };
        Ok(OpenAiSpeechConfig {
            api_key: chat.api_key,
            base_url: chat.base_url,
            model: get(MODEL_ENV).unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            voice: get(VOICE_ENV).unwrap_or_else(|| DEFAULT_VOICE.to_owned()),
            format,
            connect_timeout: chat.connect_timeout,
            request_timeout: chat.request_timeout,
            max_response_bytes: chat.max_response_bytes,
        })
    }
}

/// An `/audio/speech` client: one request per call.
pub struct OpenAiSpeech {
    endpoint: Endpoint,
    model: String,
    voice: String,
    format: AudioFormat,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    input: &'a str,
    voice: &'a str,
    response_format: &'static str,
}

impl OpenAiSpeech {
    /// Validates `config` and builds the HTTP client.
    pub fn new(config: OpenAiSpeechConfig) -> Result<OpenAiSpeech, SpeechError> {
        let endpoint = Endpoint::new(EndpointSpec {
            provider: "openai",
            base_url: &config.base_url,
            path: "/audio/speech",
            key: config.api_key,
            key_hint: "OPENAI_API_KEY",
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
        })?;
        endpoint.key_header("Bearer ")?;
        Ok(OpenAiSpeech {
            endpoint,
            model: config.model,
            voice: config.voice,
            format: config.format,
        })
    }

    /// The model asked for (the usage rows' model).
    pub fn model(&self) -> &str {
        &self.model
    }

    async fn run(&self, req: &SpeechRequest) -> Result<SpeechAudio, SpeechError> {
        if req.text.trim().is_empty() {
            return Err(SpeechError::Permanent("nothing to say".to_owned()));
        }
        let body = serde_json::to_vec(&WireRequest {
            model: &self.model,
            input: &req.text,
            voice: req.voice.as_deref().unwrap_or(&self.voice),
            response_format: self.format.wire(),
        })
        .map_err(|e| SpeechError::Permanent(format!("cannot serialise the request: {e}")))?;
        let mut headers = Vec::new();
        if let Some(auth) = self.endpoint.key_header("Bearer ")? {
            headers.push(("authorization", auth));
        }
        let bytes = self.endpoint.post_json(&headers, body).await?;
        match self.format {
            AudioFormat::Opus => {
                if bytes.starts_with(b"OggS") {
                    Ok(SpeechAudio::OggOpus(bytes))
                } else {
                    Err(SpeechError::BadAudio(self.endpoint.say(&format!(
                        "asked for Ogg/Opus, got {} bytes of something else",
                        bytes.len()
                    ))))
                }
            }
            AudioFormat::Pcm => Ok(SpeechAudio::Pcm {
                rate_hz: PCM_RATE_HZ,
                samples: pcm::pcm16_le(&bytes).map_err(|fault| {
                    SpeechError::BadAudio(self.endpoint.say(&format!("{fault}")))
                })?,
            }),
        }
    }
}

impl Speech for OpenAiSpeech {
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        Box::pin(self.run(req))
    }

    fn describe(&self) -> String {
        format!("openai:{} at {}", self.model, self.endpoint.shown)
    }
}
