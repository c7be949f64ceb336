//! Gemini speech generation: one `generateContent` call of a TTS model per request
//! (`POST {base}/v1beta/models/{model}:generateContent`, key in `x-goog-api-key`), asking for
//! audio (`generationConfig.responseModalities: ["AUDIO"]`) in a prebuilt voice
//! (`speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName`). The answer's first inline
//! audio part is base64 PCM, mono 16-bit little-endian, its rate in the MIME type
//! (`audio/L16;codec=pcm;rate=24000`): it comes back as [`SpeechAudio::Pcm`], encoded here.
//! The language is not sent: the model speaks the text's own. The key and base URL are read
//! as the chat client reads them (`llm::gemini::GeminiConfig`); the model and voice from
//! `GEMINI_SPEECH_MODEL` and `GEMINI_SPEECH_VOICE`. It does not retry or meter (the
//! wrappers in `speech` do).

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::http::{Endpoint, EndpointSpec};
use super::pcm;
use crate::adapters::llm::gemini::GeminiConfig;
use crate::core::time::BoxFuture;
use crate::ports::llm::ApiKey;
use crate::ports::speech::{Speech, SpeechAudio, SpeechError, SpeechRequest};

/// The TTS model used unless `GEMINI_SPEECH_MODEL` names another.
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash-preview-tts";
/// The prebuilt voice used unless the request or `GEMINI_SPEECH_VOICE` names another.
pub const DEFAULT_VOICE: &str = "Kore";
/// The variable naming the TTS model.
pub const MODEL_ENV: &str = "GEMINI_SPEECH_MODEL";
/// The variable naming the default voice.
pub const VOICE_ENV: &str = "GEMINI_SPEECH_VOICE";

/// Settings of a [`GeminiSpeech`]. `Debug` is safe to print: the key shows as `[redacted]`.
#[derive(Debug, Clone)]
pub struct GeminiSpeechConfig {
    pub api_key: ApiKey,
    /// Scheme, host and optional path prefix, without the `/v1beta/...` part.
    pub base_url: String,
    pub model: String,
    pub voice: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_response_bytes: usize,
}

impl GeminiSpeechConfig {
    /// The settings from any variable lookup (blank values count as unset): key, base URL
    /// and body cap as the chat client reads them, then the speech model and voice.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<GeminiSpeechConfig, SpeechError> {
        let get = |name: &str| super::setting(&lookup, name);
        let chat = GeminiConfig::from_lookup(&lookup).map_err(super::http::not_configured)?;
        Ok(GeminiSpeechConfig {
            api_key: chat.api_key,
            base_url: chat.base_url,
            model: get(MODEL_ENV).unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            voice: get(VOICE_ENV).unwrap_or_else(|| DEFAULT_VOICE.to_owned()),
            connect_timeout: chat.connect_timeout,
            request_timeout: chat.request_timeout,
            max_response_bytes: chat.max_response_bytes,
        })
    }
}

/// A Gemini TTS client: one request per call.
pub struct GeminiSpeech {
    endpoint: Endpoint,
    model: String,
    voice: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'a> {
    contents: [WireContent<'a>; 1],
    generation_config: WireGenerationConfig<'a>,
}

#[derive(Serialize)]
struct WireContent<'a> {
    parts: [WireText<'a>; 1],
}

#[derive(Serialize)]
struct WireText<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireGenerationConfig<'a> {
    response_modalities: [&'static str; 1],
    speech_config: WireSpeechConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireSpeechConfig<'a> {
    voice_config: WireVoiceConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireVoiceConfig<'a> {
    prebuilt_voice_config: WirePrebuiltVoice<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WirePrebuiltVoice<'a> {
    voice_name: &'a str,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    candidates: Vec<WireCandidate>,
    #[serde(default)]
    prompt_feedback: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCandidate {
    #[serde(default)]
    content: Option<WireContentOut>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireContentOut {
    #[serde(default)]
    parts: Vec<WirePartOut>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePartOut {
    #[serde(default)]
    inline_data: Option<WireBlob>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlob {
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    data: String,
}

impl GeminiSpeech {
    /// Validates `config` (the model must be a plain id: it goes into the URL path) and
    /// builds the HTTP client.
    pub fn new(config: GeminiSpeechConfig) -> Result<GeminiSpeech, SpeechError> {
        let model = config.model.trim();
        let model = model.strip_prefix("models/").unwrap_or(model).to_owned();
        let plain = !model.is_empty()
            && !model.starts_with('.')
            && model
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !plain {
            return Err(SpeechError::NotConfigured(format!(
                "{:?} is not a valid Gemini model id",
                config.model
            )));
        }
        if config.api_key.is_empty() {
            return Err(SpeechError::NotConfigured(
                "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_GEMINI_API_KEY)".to_owned(),
            ));
        }
        let endpoint = Endpoint::new(EndpointSpec {
            provider: "gemini",
            base_url: &config.base_url,
            path: &format!("/v1beta/models/{model}:generateContent"),
            key: Some(config.api_key),
            key_hint: "GEMINI_API_KEY or GOOGLE_GEMINI_API_KEY",
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
        })?;
        endpoint.key_header("")?;
        Ok(GeminiSpeech {
            endpoint,
            model,
            voice: config.voice,
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
        let voice = req.voice.as_deref().unwrap_or(&self.voice);
        let body = serde_json::to_vec(&WireRequest {
            contents: [WireContent {
                parts: [WireText { text: &req.text }],
            }],
            generation_config: WireGenerationConfig {
                response_modalities: ["AUDIO"],
                speech_config: WireSpeechConfig {
                    voice_config: WireVoiceConfig {
                        prebuilt_voice_config: WirePrebuiltVoice { voice_name: voice },
                    },
                },
            },
        })
        .map_err(|e| SpeechError::Permanent(format!("cannot serialise the request: {e}")))?;
        let mut headers = Vec::new();
        if let Some(key) = self.endpoint.key_header("")? {
            headers.push(("x-goog-api-key", key));
        }
        let bytes = self.endpoint.post_json(&headers, body).await?;
        self.audio_of(&bytes)
    }

    /// The PCM of a success answer.
    fn audio_of(&self, bytes: &[u8]) -> Result<SpeechAudio, SpeechError> {
        let bad = |why: String| SpeechError::BadAudio(self.endpoint.say(&why));
        let response: WireResponse = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("invalid JSON in a success answer: {e}")))?;
        let candidate = response.candidates.first();
        let blob = candidate
            .and_then(|c| c.content.as_ref())
            .and_then(|c| c.parts.iter().find_map(|p| p.inline_data.as_ref()));
        let Some(blob) = blob else {
            // No audio: a blocked prompt or a refusal; the same text would be refused again.
            let why = match (
                candidate.and_then(|c| c.finish_reason.as_deref()),
                response
                    .prompt_feedback
                    .as_ref()
                    .and_then(|f| f.get("blockReason"))
                    .and_then(|r| r.as_str()),
            ) {
                (_, Some(block)) => format!("no audio in the answer (prompt blocked: {block})"),
                (Some(reason), None) => format!("no audio in the answer (finish reason {reason})"),
                (None, None) => "no audio in the answer".to_owned(),
            };
            return Err(SpeechError::Permanent(self.endpoint.say(&why)));
        };
        let rate_hz = pcm::pcm_rate(&blob.mime_type).map_err(|fault| bad(format!("{fault}")))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(blob.data.trim())
            .map_err(|e| bad(format!("the audio is not base64: {e}")))?;
        let samples = pcm::pcm16_le(&data).map_err(|fault| bad(format!("{fault}")))?;
        Ok(SpeechAudio::Pcm { rate_hz, samples })
    }
}

impl Speech for GeminiSpeech {
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        Box::pin(self.run(req))
    }

    fn describe(&self) -> String {
        format!("gemini:{} at {}", self.model, self.endpoint.shown)
    }
}
