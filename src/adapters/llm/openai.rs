//! The OpenAI-compatible provider: turns an [`LlmRequest`] into exactly one Chat Completions
//! call (`POST {base}/chat/completions`, bearer key) and classifies the answer. One client
//! serves OpenAI itself and every server speaking the same API: OpenRouter, xAI (grok), Ollama,
//! llama.cpp, vLLM ([`Preset`] holds their defaults and environment variables).
//!
//! Mapping: the system instruction becomes a `system` message, user and model turns become
//! `user` and `assistant` messages; text parts are joined into one string, images are sent as
//! data-URI `image_url` parts (vision models); any other inline medium (audio, video) is refused
//! with [`LlmError::InvalidRequest`] before sending, so the media pipeline marks it unsupported.
//! Errors: 401/403 are permanent with a message naming the key variable; 408/409/429/5xx are
//! transient (429 with `Retry-After`); transport failures and timeouts are transient;
//! `finish_reason` `content_filter` is a blocked answer, `length` without text an empty one;
//! empty `choices` is an empty answer (silence). It does not retry (`llm::retry` wraps it).
//! The key travels only in the `Authorization` header (marked sensitive): never in a URL, a
//! log line or an error. Token usage is reported to `llm::usage`.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::adapters::llm::http::{chain, http_client, normalise_base_url, truncate};
use crate::adapters::llm::usage::{self, Usage};
use crate::adapters::llm::wire_schema::{json_schema, shown};
use crate::core::llm::{LlmOutcome, LlmRequest, Part, Role};
use crate::core::time::BoxFuture;
use crate::ports::llm::{ApiKey, Llm, LlmError};

/// Longest server message (in characters) kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;
/// HTTP statuses worth another try.
const RETRYABLE_STATUSES: [u16; 7] = [408, 409, 429, 500, 502, 503, 504];

/// The OpenAI-compatible services with defaults of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Preset {
    /// OpenAI, or any compatible server named by `OPENAI_BASE_URL`.
    OpenAi,
    /// OpenRouter (`vendor/model` ids).
    OpenRouter,
    /// xAI's grok models.
    Grok,
    /// A local Ollama server (no key).
    Ollama,
}

impl Preset {
    /// The name used in persona files and `--llm`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::OpenAi => "openai",
            Preset::OpenRouter => "openrouter",
            Preset::Grok => "grok",
            Preset::Ollama => "ollama",
        }
    }

    /// Where the service lives unless its base URL variable says otherwise.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Preset::OpenAi => "https://api.openai.com/v1",
            Preset::OpenRouter => "https://openrouter.ai/api/v1",
            Preset::Grok => "https://api.x.ai/v1",
            Preset::Ollama => "http://127.0.0.1:11434/v1",
        }
    }

    /// Variables holding the key, first one preferred (empty for Ollama).
    pub fn key_envs(self) -> &'static [&'static str] {
        match self {
            Preset::OpenAi => &["OPENAI_API_KEY"],
            Preset::OpenRouter => &["OPENROUTER_API_KEY"],
            Preset::Grok => &["GROK_API_KEY", "XAI_API_KEY"],
            Preset::Ollama => &["OLLAMA_API_KEY"],
        }
    }

    /// The variable overriding the base URL.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Preset::OpenAi => "OPENAI_BASE_URL",
            Preset::OpenRouter => "OPENROUTER_BASE_URL",
            Preset::Grok => "GROK_BASE_URL",
            Preset::Ollama => "OLLAMA_BASE_URL",
        }
    }

    /// The variable naming the default model.
    pub fn model_env(self) -> &'static str {
        match self {
            Preset::OpenAi => "OPENAI_MODEL",
            Preset::OpenRouter => "OPENROUTER_MODEL",
            Preset::Grok => "GROK_MODEL",
            Preset::Ollama => "OLLAMA_MODEL",
        }
    }

    /// The model used when neither the persona nor the environment names one.
    pub fn default_model(self) -> &'static str {
        match self {
            Preset::OpenAi => "gpt-5-mini",
            Preset::OpenRouter => "openai/gpt-5-mini",
            Preset::Grok => "grok-4-fast",
            Preset::Ollama => "llama3.2",
        }
    }

    /// Whether the service refuses requests without a key.
    fn key_required(self, base_url_overridden: bool) -> bool {
        match self {
            // A compatible server of one's own (llama.cpp, vLLM) often has no key.
            Preset::OpenAi => !base_url_overridden,
            Preset::OpenRouter | Preset::Grok => true,
            Preset::Ollama => false,
        }
    }

    /// OpenAI's own API wants `max_completion_tokens`; compatible servers know `max_tokens`.
    fn max_tokens_field(self, base_url_overridden: bool) -> MaxTokensField {
        if self == Preset::OpenAi && !base_url_overridden {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// Settings of an [`OpenAiClient`]. `Debug` is safe to print: the key shows as `[redacted]`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    pub preset: Preset,
    /// The bearer key; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<ApiKey>,
    /// Up to and including the version path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Whether `base_url` came from the environment rather than the preset.
    pub base_url_overridden: bool,
    /// The model used when a request names none of its own (from `*_MODEL` or the preset).
    pub default_model: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Most bytes of a response body read (see `http::DEFAULT_MAX_RESPONSE_BYTES`).
    pub max_response_bytes: usize,
    /// How a schema is asked for (`*_RESPONSE_FORMAT`).
    pub schema_style: SchemaStyle,
}

/// How a request's schema goes in `response_format`: servers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaStyle {
    /// `{"type": "json_schema", "json_schema": {"name", "schema"}}`: OpenAI, llama.cpp's own
    /// server, Ollama, LM Studio.
    #[default]
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`: llama-cpp-python's server.
    JsonObject,
}

impl OpenAiConfig {
    /// The preset's defaults, with `api_key`.
    pub fn new(preset: Preset, api_key: Option<ApiKey>) -> OpenAiConfig {
        OpenAiConfig {
            preset,
            api_key,
            base_url: preset.default_base_url().to_owned(),
            base_url_overridden: false,
            default_model: preset.default_model().to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: crate::adapters::llm::retry::DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes: super::http::DEFAULT_MAX_RESPONSE_BYTES,
            schema_style: SchemaStyle::default(),
        }
    }

    /// The preset's settings from the environment: key, base URL and default model.
    pub fn from_env(preset: Preset) -> Result<OpenAiConfig, LlmError> {
        OpenAiConfig::from_lookup(preset, |name| std::env::var(name).ok())
    }

    /// [`OpenAiConfig::from_env`] over any variable lookup (blank values count as unset).
    /// A missing required key is a [`LlmError::Config`] naming the variable.
    pub fn from_lookup(
        preset: Preset,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenAiConfig, LlmError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let key = preset
            .key_envs()
            .iter()
            .find_map(|v| get(v))
            .map(ApiKey::new);
        let mut config = OpenAiConfig::new(preset, key);
        if let Some(base) = get(preset.base_url_env()) {
            config.base_url = base.trim().to_owned();
            config.base_url_overridden = true;
        }
        if let Some(model) = get(preset.model_env()) {
            config.default_model = model.trim().to_owned();
        }
        config.max_response_bytes = super::http::max_response_bytes(&lookup)?;
        let style_var = preset.model_env().replace("_MODEL", "_RESPONSE_FORMAT");
        config.schema_style = match get(&style_var).as_deref().map(str::trim) {
            None | Some("json_schema") => SchemaStyle::JsonSchema,
            Some("json_object") => SchemaStyle::JsonObject,
            Some(other) => {
                return Err(LlmError::Config(format!(
                    "{style_var}={other:?}: use json_schema (OpenAI, llama.cpp's server, Ollama) or json_object (llama-cpp-python's server)"
                )));
            }
        };
        if config.api_key.is_none() && preset.key_required(config.base_url_overridden) {
            return Err(missing_key(preset));
        }
        Ok(config)
    }
}

fn missing_key(preset: Preset) -> LlmError {
    let vars = preset.key_envs().join(" or ");
    let extra = if preset == Preset::OpenAi {
        " (or point OPENAI_BASE_URL at a compatible server that needs none)"
    } else {
        ""
    };
    LlmError::Config(format!("no {preset} API key: set {vars}{extra}"))
}

/// A Chat Completions client: one request per call (wrap it in `RetryingLlm`).
pub struct OpenAiClient {
    http: reqwest::Client,
    preset: Preset,
    url: String,
    auth: Option<HeaderValue>,
    key: Option<ApiKey>,
    default_model: String,
    max_tokens_field: MaxTokensField,
    max_response_bytes: usize,
    schema_style: SchemaStyle,
    /// A server of the operator's own (the base URL was set): a local model, which gets a
    /// default cap on its answer and stop sequences.
    local: bool,
    /// The URL as errors show it: no user, password or query.
    shown_url: String,
}

/// The answer cap sent to a server of the operator's own when no `--max-output-tokens` is
/// set: without one, llama.cpp and its kin generate until the context is full.
pub const LOCAL_MAX_OUTPUT_TOKENS: u32 = 1024;

/// Where a local model's answer stops: the start of a copied history turn or context turn.
const LOCAL_STOP: [&str; 2] = ["\n[metadata]", "\n[context]"];

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("preset", &self.preset)
            .field("url", &self.url)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// Validates `config` and builds the HTTP client (no redirects, so the bearer header can
    /// never be forwarded to another host).
    pub fn new(config: OpenAiConfig) -> Result<OpenAiClient, LlmError> {
        let key = config.api_key.filter(|k| !k.is_empty());
        if key.is_none() && config.preset.key_required(config.base_url_overridden) {
            return Err(missing_key(config.preset));
        }
        let auth = match &key {
            Some(k) => {
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {}", k.expose())).map_err(|_| {
                        LlmError::Config(format!(
                            "the {} API key holds characters not allowed in an HTTP header",
                            config.preset
                        ))
                    })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let base_url = normalise_base_url(config.preset.name(), &config.base_url)?;
        let http = http_client(&base_url, config.connect_timeout, config.request_timeout)?;
        let url = format!("{base_url}/chat/completions");
        Ok(OpenAiClient {
            http,
            preset: config.preset,
            shown_url: shown(&url),
            local: config.base_url_overridden,
            url,
            auth,
            key,
            default_model: config.default_model,
            max_tokens_field: config.preset.max_tokens_field(config.base_url_overridden),
            max_response_bytes: config.max_response_bytes,
            schema_style: config.schema_style,
        })
    }

    async fn run(&self, req: &LlmRequest) -> Result<LlmOutcome, LlmError> {
        if req.turns.is_empty() {
            return Err(LlmError::InvalidRequest(
                "the request has no turns".to_owned(),
            ));
        }
        if req.temperature.is_some_and(|t| !t.is_finite()) {
            return Err(LlmError::InvalidRequest(
                "the temperature is not a finite number".to_owned(),
            ));
        }
        let model = if req.model.trim().is_empty() {
            self.default_model.as_str()
        } else {
            req.model.trim()
        };
        let wire = self.wire_request(model, req)?;
        let body = serde_json::to_vec(&wire)
            .map_err(|e| LlmError::InvalidRequest(format!("cannot serialise the request: {e}")))?;
        debug!(
            provider = self.preset.name(),
            model,
            turns = req.turns.len(),
            body_bytes = body.len(),
            "chat completions request"
        );
        let mut request = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json");
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let answer =
            match super::http::exchange(request.body(body), model, self.max_response_bytes).await {
                Ok(answer) => answer,
                Err(super::http::ExchangeError::Transport(e)) => {
                    return Err(self.transport_error(e));
                }
                Err(super::http::ExchangeError::TooLarge(status)) => {
                    return Err(super::http::too_large(
                        self.preset.name(),
                        status,
                        self.max_response_bytes,
                    ));
                }
            };
        // `_in_flight` lives to the end of this call, after the usage report.
        let (status, retry_after, bytes, _in_flight) = (
            answer.status,
            answer.retry_after,
            answer.body,
            answer.in_flight,
        );
        debug!(
            provider = self.preset.name(),
            status = status.as_u16(),
            response_bytes = bytes.len(),
            "chat completions response"
        );
        if !status.is_success() {
            return Err(self.http_error(status, retry_after, &bytes));
        }
        let response: WireResponse = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::Decode(self.clean(&format!("invalid JSON in a success response: {e}")))
        })?;
        if let Some(u) = &response.usage {
            usage::report(
                self.preset.name(),
                response.model.as_deref().unwrap_or(model),
                Usage {
                    prompt_tokens: u.prompt_tokens.unwrap_or(0),
                    cached_tokens: u
                        .prompt_tokens_details
                        .as_ref()
                        .and_then(|d| d.cached_tokens)
                        .unwrap_or(0),
                    output_tokens: u.completion_tokens.unwrap_or(0),
                },
            );
        }
        Ok(classify(response))
    }

    fn wire_request<'a>(
        &self,
        model: &'a str,
        req: &'a LlmRequest,
    ) -> Result<WireRequest<'a>, LlmError> {
        let mut messages = Vec::with_capacity(req.turns.len() + 1);
        if !req.system.trim().is_empty() {
            messages.push(WireMessage {
                role: "system",
                content: WireContent::Text(req.system.clone()),
            });
        }
        for turn in &req.turns {
            let role = match turn.role {
                Role::User => "user",
                Role::Model => "assistant",
            };
            messages.push(WireMessage {
                role,
                content: content(&turn.parts, self.preset)?,
            });
        }
        let cap = req
            .max_output_tokens
            .or(self.local.then_some(LOCAL_MAX_OUTPUT_TOKENS));
        let (max_tokens, max_completion_tokens) = match self.max_tokens_field {
            MaxTokensField::MaxTokens => (cap, None),
            MaxTokensField::MaxCompletionTokens => (None, cap),
        };
        Ok(WireRequest {
            model,
            messages,
            temperature: req.temperature,
            max_tokens,
            max_completion_tokens,
            stop: if self.local { &LOCAL_STOP[..] } else { &[] },
            response_format: req
                .response_schema
                .as_ref()
                .map(|schema| match self.schema_style {
                    SchemaStyle::JsonSchema => serde_json::json!({
                        "type": "json_schema",
                        "json_schema": {"name": "answer", "schema": json_schema(schema)}
                    }),
                    SchemaStyle::JsonObject => serde_json::json!({
                        "type": "json_object",
                        "schema": json_schema(schema)
                    }),
                }),
        })
    }

    fn http_error(
        &self,
        status: StatusCode,
        retry_after: Option<Duration>,
        bytes: &[u8],
    ) -> LlmError {
        let code = status.as_u16();
        let reason = status.canonical_reason().unwrap_or("unknown status");
        let message = match serde_json::from_slice::<WireErrorEnvelope>(bytes)
            .ok()
            .and_then(|e| e.error)
            .and_then(|e| e.message)
            .filter(|m| !m.trim().is_empty())
        {
            Some(m) => m,
            None => {
                let text = String::from_utf8_lossy(bytes);
                if text.trim().is_empty() {
                    reason.to_owned()
                } else {
                    format!("{reason} (body: {text})")
                }
            }
        };
        let message = format!("{} (POST {})", self.clean(&message), self.shown_url);
        if matches!(code, 401 | 403) {
            let vars = self.preset.key_envs().join(" or ");
            return LlmError::Permanent {
                status: Some(code),
                message: format!("{message} (check {vars})"),
            };
        }
        if RETRYABLE_STATUSES.contains(&code) {
            LlmError::Transient {
                status: Some(code),
                message,
                retry_after,
            }
        } else {
            LlmError::Permanent {
                status: Some(code),
                message,
            }
        }
    }

    fn transport_error(&self, err: reqwest::Error) -> LlmError {
        let permanent = err.is_builder() || err.is_redirect();
        let message = format!("{} (POST {})", self.clean(&chain(err)), self.shown_url);
        if permanent {
            LlmError::Permanent {
                status: None,
                message,
            }
        } else {
            LlmError::Transient {
                status: None,
                message,
                retry_after: None,
            }
        }
    }

    /// Redacts the key (a proxy might echo it), then shortens to one line.
    fn clean(&self, text: &str) -> String {
        let text = match &self.key {
            Some(k) if !k.is_empty() => text.replace(k.expose(), "[redacted]"),
            _ => text.to_owned(),
        };
        truncate(&text, MAX_MESSAGE_CHARS)
    }
}

impl Llm for OpenAiClient {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(self.run(req))
    }
}

/// One turn's parts as message content: a plain string when all are text, else typed parts.
fn content(parts: &[Part], preset: Preset) -> Result<WireContent, LlmError> {
    if parts.iter().all(|p| matches!(p, Part::Text(_))) {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::InlineData { .. } => None,
            })
            .collect();
        return Ok(WireContent::Text(texts.join("\n")));
    }
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Part::Text(t) => out.push(WirePart::Text { text: t.clone() }),
            Part::InlineData { mime, data } if mime.starts_with("image/") => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(data);
                out.push(WirePart::ImageUrl {
                    image_url: WireImageUrl {
                        url: format!("data:{mime};base64,{b64}"),
                    },
                });
            }
            Part::InlineData { mime, .. } => {
                return Err(LlmError::InvalidRequest(format!(
                    "{preset} (OpenAI-compatible) takes images only, not {mime}"
                )));
            }
        }
    }
    Ok(WireContent::Parts(out))
}

fn classify(response: WireResponse) -> LlmOutcome {
    let Some(choice) = response.choices.unwrap_or_default().into_iter().next() else {
        return LlmOutcome::Empty {
            finish_reason: None,
        };
    };
    if choice.finish_reason.as_deref() == Some("content_filter") {
        return LlmOutcome::Blocked {
            reason: "content_filter".to_owned(),
        };
    }
    let message = choice.message.unwrap_or_default();
    if let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty()) {
        debug!(chars = refusal.len(), "the model refused");
        return LlmOutcome::Blocked {
            reason: "refusal".to_owned(),
        };
    }
    let text = match message.content {
        Some(serde_json::Value::String(s)) => s,
        Some(serde_json::Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .collect(),
        _ => String::new(),
    };
    if text.trim().is_empty() {
        LlmOutcome::Empty {
            finish_reason: choice.finish_reason,
        }
    } else {
        LlmOutcome::Text(text)
    }
}

// ---- wire format: request ----

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'static [&'static str],
    /// Structured output (OpenAI, llama.cpp's server, Ollama): the answer must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct WireMessage {
    role: &'static str,
    content: WireContent,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireContent {
    Text(String),
    Parts(Vec<WirePart>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart {
    Text { text: String },
    ImageUrl { image_url: WireImageUrl },
}

#[derive(Serialize)]
struct WireImageUrl {
    url: String,
}

// ---- wire format: response (every field optional, unknown fields ignored) ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireResponse {
    model: Option<String>,
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireChoice {
    message: Option<WireMessageOut>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessageOut {
    content: Option<serde_json::Value>,
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WirePromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireErrorEnvelope {
    error: Option<WireError>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireError {
    message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> LlmOutcome {
        match serde_json::from_str::<WireResponse>(json) {
            Ok(r) => classify(r),
            Err(e) => panic!("bad test JSON: {e}"),
        }
    }

    #[test]
    fn classification_of_odd_answers() {
        assert_eq!(
            parse("{}"),
            LlmOutcome::Empty {
                finish_reason: None
            }
        );
        assert_eq!(
            parse(r#"{"choices":[]}"#),
            LlmOutcome::Empty {
                finish_reason: None
            }
        );
        assert_eq!(
            parse(r#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#),
            LlmOutcome::Empty {
                finish_reason: Some("length".into())
            }
        );
        assert_eq!(
            parse(r#"{"choices":[{"message":{"content":"x"},"finish_reason":"content_filter"}]}"#),
            LlmOutcome::Blocked {
                reason: "content_filter".into()
            }
        );
        assert_eq!(
            parse(
                r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#
            ),
            LlmOutcome::Text("ab".into())
        );
    }

    #[test]
    fn keys_come_from_the_presets_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let c = OpenAiConfig::from_lookup(Preset::Grok, env(&[("XAI_API_KEY", "k")]));
        assert!(c.is_ok_and(|c| c.api_key.is_some()));
        let missing = OpenAiConfig::from_lookup(Preset::OpenRouter, env(&[]));
        assert!(matches!(missing, Err(LlmError::Config(m)) if m.contains("OPENROUTER_API_KEY")));
        let local = OpenAiConfig::from_lookup(
            Preset::OpenAi,
            env(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]),
        );
        assert!(local.is_ok_and(|c| c.api_key.is_none() && c.base_url_overridden));
        let ollama = OpenAiConfig::from_lookup(Preset::Ollama, env(&[]));
        assert!(ollama.is_ok_and(|c| c.default_model == "llama3.2"));
    }
}
