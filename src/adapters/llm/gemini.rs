//! The Gemini provider: turns an [`LlmRequest`] into exactly one `generateContent` call of the
//! Gemini REST API (`POST {base}/v1beta/models/{model}:generateContent`) and classifies the
//! answer into an [`LlmOutcome`] or a typed [`LlmError`]: transient (408, 429, 5xx, transport
//! trouble; carrying `RetryInfo.retryDelay` / `Retry-After` as `retry_after`, an hour for a
//! spent daily quota) or permanent. It does not retry: `llm::retry::RetryingLlm` wraps it. An
//! empty answer is silence and comes back as [`LlmOutcome::Empty`]. HTTP timeouts are
//! reqwest's own (real time). The key travels only in the `x-goog-api-key` header: it must
//! never appear in a URL, a log line or an error message, and bodies are never logged (only
//! their sizes, at DEBUG). It knows nothing about personas or Telegram; `llm::provider` builds
//! it and the planner uses it through the [`Llm`] trait.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::adapters::llm::http::{chain, http_client, normalise_base_url, truncate};
use crate::adapters::llm::usage::{self, Usage};
use crate::adapters::llm::wire_schema::shown;
use crate::core::llm::{LlmOutcome, LlmRequest, Part, Role};
use crate::core::time::BoxFuture;
use crate::ports::llm::{ApiKey, Llm, LlmError};

/// Where the Gemini API lives unless configured otherwise.
pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The environment variable holding the API key.
pub(crate) const API_KEY_ENV: &str = "GEMINI_API_KEY";
/// The fallback environment variable for the API key.
pub(crate) const API_KEY_ENV_FALLBACK: &str = "GOOGLE_GEMINI_API_KEY";
/// The environment variable overriding [`DEFAULT_BASE_URL`].
pub(crate) const BASE_URL_ENV: &str = "GEMINI_BASE_URL";

/// The only place the key is ever put.
const KEY_HEADER: &str = "x-goog-api-key";
/// HTTP statuses worth another try.
const RETRYABLE_STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];
/// Candidate finish reasons that mean the answer was withheld by a safety filter.
const BLOCKING_FINISH_REASONS: [&str; 6] = [
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
];
/// The delay reported for a spent daily quota.
const DAILY_QUOTA_WAIT: Duration = Duration::from_secs(3600);
/// Longest server message (in characters) kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;
/// What replaces the key wherever it shows up in text we did not write.
const REDACTED: &str = "[redacted]";

/// The default safety settings: every adjustable harm category at `BLOCK_NONE`.
pub(crate) fn default_safety_settings() -> Vec<(String, String)> {
    [
        "HARM_CATEGORY_HARASSMENT",
        "HARM_CATEGORY_HATE_SPEECH",
        "HARM_CATEGORY_SEXUALLY_EXPLICIT",
        "HARM_CATEGORY_DANGEROUS_CONTENT",
    ]
    .into_iter()
    .map(|c| (c.to_owned(), "BLOCK_NONE".to_owned()))
    .collect()
}

/// Settings of a [`GeminiClient`]. `Debug` is safe to print: the key shows as `[redacted]`.
#[derive(Debug, Clone)]
pub struct GeminiConfig {
    /// The API key, sent as the `x-goog-api-key` header.
    pub api_key: ApiKey,
    /// Scheme, host and optional path prefix, without the `/v1beta/...` part.
    pub base_url: String,
    /// `(category, threshold)` pairs sent as `safetySettings`, in order.
    pub safety_settings: Vec<(String, String)>,
    /// Limit on establishing the connection (real time).
    pub connect_timeout: Duration,
    /// Limit on one whole request, body included (real time).
    pub request_timeout: Duration,
    /// Most bytes of a response body read (see `http::DEFAULT_MAX_RESPONSE_BYTES`).
    pub max_response_bytes: usize,
}

impl GeminiConfig {
    /// The defaults (official base URL, `BLOCK_NONE` safety settings, 10 s connect and 120 s
    /// request timeouts) with the given key.
    pub fn new(api_key: ApiKey) -> GeminiConfig {
        GeminiConfig {
            api_key,
            base_url: DEFAULT_BASE_URL.to_owned(),
            safety_settings: default_safety_settings(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            max_response_bytes: super::http::DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Defaults plus the key from `GEMINI_API_KEY` (or `GOOGLE_GEMINI_API_KEY`) and the base
    /// URL from `GEMINI_BASE_URL`, if set. Fails with [`LlmError::Config`] naming both key
    /// variables when neither holds a key; values are never echoed.
    pub fn from_env() -> Result<GeminiConfig, LlmError> {
        GeminiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`GeminiConfig::from_env`] over any variable lookup (blank values count as unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<GeminiConfig, LlmError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let key = get(API_KEY_ENV)
            .or_else(|| get(API_KEY_ENV_FALLBACK))
            .ok_or_else(missing_key)?;
        let mut config = GeminiConfig::new(ApiKey::new(key));
        if let Some(base) = get(BASE_URL_ENV) {
            config.base_url = base.trim().to_owned();
        }
        config.max_response_bytes = super::http::max_response_bytes(&lookup)?;
        Ok(config)
    }
}

fn missing_key() -> LlmError {
    LlmError::Config(format!(
        "no Gemini API key: set {API_KEY_ENV} (or {API_KEY_ENV_FALLBACK})"
    ))
}

/// A Gemini `generateContent` client: one request per call (wrap it in `RetryingLlm`).
pub struct GeminiClient {
    http: reqwest::Client,
    base_url: String,
    key_header: HeaderValue,
    key: ApiKey,
    safety_settings: Vec<(String, String)>,
    max_response_bytes: usize,
}

impl fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiClient")
            .field("base_url", &self.base_url)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl GeminiClient {
    /// Validates `config` and builds the HTTP client (rustls with the ring provider, no
    /// redirects, so the key header can never be forwarded to another host).
    pub fn new(config: GeminiConfig) -> Result<GeminiClient, LlmError> {
        if config.api_key.is_empty() {
            return Err(missing_key());
        }
        let mut key_header = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            LlmError::Config(
                "the Gemini API key holds characters not allowed in an HTTP header".to_owned(),
            )
        })?;
        key_header.set_sensitive(true);
        let base_url = normalise_base_url("Gemini", &config.base_url)?;
        let http = http_client(&base_url, config.connect_timeout, config.request_timeout)?;
        Ok(GeminiClient {
            http,
            base_url,
            key_header,
            key: config.api_key,
            safety_settings: config.safety_settings,
            max_response_bytes: config.max_response_bytes,
        })
    }

    async fn run(&self, req: &LlmRequest) -> Result<LlmOutcome, LlmError> {
        let model = model_id(&req.model)?;
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
        let url = format!("{}/v1beta/models/{model}:generateContent", self.base_url);
        let body = serde_json::to_vec(&self.wire_request(req))
            .map_err(|e| LlmError::InvalidRequest(format!("cannot serialise the request: {e}")))?;
        let (text_bytes, inline_bytes) = request_sizes(req);
        debug!(
            model,
            turns = req.turns.len(),
            text_bytes,
            inline_bytes,
            body_bytes = body.len(),
            "gemini request"
        );

        // One request: retries are the job of `llm::retry::RetryingLlm`, which wraps this
        // client. An empty answer is the model choosing silence and comes back as is.
        self.attempt(model, &url, &body).await.map_err(|failure| {
            debug!(model, status = failure.error.status(), error = %failure.error, "gemini call failed");
            failure.error
        })
    }

    /// One HTTP exchange.
    async fn attempt(&self, model: &str, url: &str, body: &[u8]) -> Result<LlmOutcome, Failure> {
        let request = self
            .http
            .post(url)
            .header(KEY_HEADER, self.key_header.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        let answer = match super::http::exchange(request, model, self.max_response_bytes).await {
            Ok(answer) => answer,
            Err(super::http::ExchangeError::Transport(e)) => {
                return Err(self.transport_failure(e, url));
            }
            Err(super::http::ExchangeError::TooLarge(status)) => {
                return Err(Failure {
                    error: super::http::too_large("Gemini", status, self.max_response_bytes),
                });
            }
        };
        debug!(
            status = answer.status.as_u16(),
            response_bytes = answer.body.len(),
            "gemini response"
        );
        if answer.status.is_success() {
            self.parse_success(model, &answer.body)
                .map_err(|error| Failure { error })
        } else {
            Err(self.http_failure(answer.status, answer.retry_after, &answer.body, url))
        }
    }

    fn parse_success(&self, model: &str, bytes: &[u8]) -> Result<LlmOutcome, LlmError> {
        let response: WireResponse = serde_json::from_slice(bytes).map_err(|e| {
            LlmError::Decode(self.clean(&format!("invalid JSON in a success response: {e}")))
        })?;
        if let Some(u) = &response.usage_metadata {
            let count = |v: &Option<serde_json::Value>| token_count(v).unwrap_or(0);
            usage::report(
                "gemini",
                model,
                Usage {
                    prompt_tokens: count(&u.prompt_token_count),
                    cached_tokens: count(&u.cached_content_token_count),
                    // Thinking is billed as output.
                    output_tokens: count(&u.candidates_token_count)
                        .saturating_add(count(&u.thoughts_token_count)),
                },
            );
        }
        let outcome = classify(response);
        debug!(outcome = outcome_kind(&outcome), "gemini outcome");
        Ok(outcome)
    }

    fn http_failure(
        &self,
        status: StatusCode,
        retry_after_header: Option<Duration>,
        bytes: &[u8],
        url: &str,
    ) -> Failure {
        let code = status.as_u16();
        let reason = status.canonical_reason().unwrap_or("unknown status");
        let envelope = serde_json::from_slice::<WireErrorEnvelope>(bytes)
            .ok()
            .and_then(|e| e.error);
        let (message, retry_info, daily_quota) = match envelope {
            Some(err) => {
                let details = err.details.unwrap_or_default();
                let message = err
                    .message
                    .filter(|m| !m.trim().is_empty())
                    .or(err.status)
                    .unwrap_or_else(|| reason.to_owned());
                (message, retry_delay(&details), daily_quota(&details))
            }
            None => {
                let text = String::from_utf8_lossy(bytes);
                let message = if text.trim().is_empty() {
                    reason.to_owned()
                } else {
                    format!("{reason} (non-JSON body: {text})")
                };
                (message, None, false)
            }
        };
        let mut message = format!("{} (POST {})", self.clean(&message), shown(url));
        if code == 401 || code == 403 || message.contains("API key") {
            // The usual cause: a missing, mistyped or revoked key. Name where it comes from.
            message.push_str(&format!(
                " (check the key in {API_KEY_ENV} or {API_KEY_ENV_FALLBACK})"
            ));
        }
        if RETRYABLE_STATUSES.contains(&code) {
            let mut asked = match (retry_info, retry_after_header) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if daily_quota {
                // A spent daily quota will not come back within any delay we would wait: ask
                // for an hour, which the retry wrapper will not wait inside a call.
                asked = asked.max(Some(DAILY_QUOTA_WAIT));
            }
            Failure {
                error: LlmError::Transient {
                    status: Some(code),
                    message,
                    retry_after: asked,
                },
            }
        } else {
            Failure {
                error: LlmError::Permanent {
                    status: Some(code),
                    message,
                },
            }
        }
    }

    fn transport_failure(&self, err: reqwest::Error, url: &str) -> Failure {
        let retryable = !(err.is_builder() || err.is_redirect());
        let message = format!("{} (POST {})", self.clean(&chain(err)), shown(url));
        if retryable {
            Failure {
                error: LlmError::Transient {
                    status: None,
                    message,
                    retry_after: None,
                },
            }
        } else {
            Failure {
                error: LlmError::Permanent {
                    status: None,
                    message,
                },
            }
        }
    }

    /// Redacts the key (defence in depth: a proxy might echo it), then shortens to one line.
    fn clean(&self, text: &str) -> String {
        let key = self.key.expose();
        let text = if key.is_empty() {
            text.to_owned()
        } else {
            text.replace(key, REDACTED)
        };
        truncate(&text, MAX_MESSAGE_CHARS)
    }

    fn wire_request<'a>(&'a self, req: &'a LlmRequest) -> WireRequest<'a> {
        let system_instruction = (!req.system.trim().is_empty()).then(|| WireSystem {
            parts: vec![WirePart::Text(&req.system)],
        });
        let contents = req
            .turns
            .iter()
            .map(|turn| WireContent {
                role: match turn.role {
                    Role::User => "user",
                    Role::Model => "model",
                },
                parts: turn.parts.iter().map(wire_part).collect(),
            })
            .collect();
        let safety_settings = self
            .safety_settings
            .iter()
            .map(|(category, threshold)| WireSafetySetting {
                category,
                threshold,
            })
            .collect();
        let generation_config = (req.temperature.is_some()
            || req.max_output_tokens.is_some()
            || req.response_schema.is_some())
        .then_some(WireGenerationConfig {
            temperature: req.temperature,
            max_output_tokens: req.max_output_tokens,
            response_mime_type: req.response_schema.as_ref().map(|_| "application/json"),
            response_schema: req.response_schema.as_ref(),
        });
        WireRequest {
            system_instruction,
            contents,
            safety_settings,
            generation_config,
        }
    }
}

impl Llm for GeminiClient {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(self.run(req))
    }
}

/// A failed attempt.
struct Failure {
    error: LlmError,
}

fn wire_part(part: &Part) -> WirePart<'_> {
    match part {
        Part::Text(text) => WirePart::Text(text),
        Part::InlineData { mime, data } => WirePart::InlineData(WireBlob {
            mime_type: mime,
            data: base64::engine::general_purpose::STANDARD.encode(data),
        }),
    }
}

/// Accepts `gemini-2.5-flash` or `models/gemini-2.5-flash`; anything that is not a plain id
/// (which could rewrite the URL path or query) is refused.
fn model_id(model: &str) -> Result<&str, LlmError> {
    let model = model.trim();
    let id = model.strip_prefix("models/").unwrap_or(model);
    let plain = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if plain && !id.starts_with('.') {
        Ok(id)
    } else {
        Err(LlmError::InvalidRequest(format!(
            "{model:?} is not a valid model id"
        )))
    }
}

/// A protobuf JSON duration such as `"12s"` or `"1.5s"`.
fn parse_proto_duration(text: &str) -> Option<Duration> {
    let secs: f64 = text.trim().strip_suffix('s')?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| crate::core::time::secs_f64(secs))
}

/// The longest `google.rpc.RetryInfo.retryDelay` among the error details.
fn retry_delay(details: &[serde_json::Value]) -> Option<Duration> {
    details
        .iter()
        .filter_map(|d| d.get("retryDelay")?.as_str())
        .filter_map(parse_proto_duration)
        .max()
}

/// True when a `QuotaFailure` names a per-day quota.
fn daily_quota(details: &[serde_json::Value]) -> bool {
    details
        .iter()
        .filter_map(|d| d.get("violations")?.as_array())
        .flatten()
        .filter_map(|v| v.get("quotaId")?.as_str())
        .any(|id| id.contains("PerDay"))
}

fn classify(response: WireResponse) -> LlmOutcome {
    if let Some(reason) = response
        .prompt_feedback
        .and_then(|f| f.block_reason)
        .filter(|r| !r.is_empty())
    {
        return LlmOutcome::Blocked { reason };
    }
    let Some(candidate) = response.candidates.unwrap_or_default().into_iter().next() else {
        tracing::warn!(
            event = "llm_answer_without_candidates",
            "the Gemini answer holds no candidate (an unknown shape?); treated as silence"
        );
        return LlmOutcome::Empty {
            finish_reason: None,
        };
    };
    if let Some(reason) = &candidate.finish_reason
        && BLOCKING_FINISH_REASONS.contains(&reason.as_str())
    {
        return LlmOutcome::Blocked {
            reason: reason.clone(),
        };
    }
    let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
    let only_thoughts = !parts.is_empty() && parts.iter().all(|p| p.thought == Some(true));
    let text: String = parts
        .into_iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text)
        .collect();
    if only_thoughts {
        tracing::warn!(
            event = "llm_answer_only_thoughts",
            finish_reason = candidate.finish_reason.as_deref().unwrap_or("-"),
            "the Gemini answer holds only thought parts; treated as silence"
        );
    }
    if text.trim().is_empty() {
        LlmOutcome::Empty {
            finish_reason: candidate.finish_reason,
        }
    } else {
        LlmOutcome::Text(text)
    }
}

fn request_sizes(req: &LlmRequest) -> (usize, usize) {
    let mut text = req.system.len();
    let mut inline = 0;
    for part in req.turns.iter().flat_map(|t| &t.parts) {
        match part {
            Part::Text(t) => text += t.len(),
            Part::InlineData { data, .. } => inline += data.len(),
        }
    }
    (text, inline)
}

fn outcome_kind(outcome: &LlmOutcome) -> &'static str {
    match outcome {
        LlmOutcome::Text(_) => "text",
        LlmOutcome::Empty { .. } => "empty",
        LlmOutcome::Blocked { .. } => "blocked",
    }
}

fn token_count(value: &Option<serde_json::Value>) -> Option<u64> {
    match value.as_ref()? {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

// ---- wire format: request (camelCase, None fields skipped, nothing else) ----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
/// Field order is the byte order on the wire: everything stable comes first and the growing
/// `contents` last, so consecutive requests of a chat share the longest byte prefix.
struct WireRequest<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    safety_settings: Vec<WireSafetySetting<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<WireGenerationConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<WireSystem<'a>>,
    contents: Vec<WireContent<'a>>,
}

/// The system instruction carries no role (the API ignores it).
#[derive(Serialize)]
struct WireSystem<'a> {
    parts: Vec<WirePart<'a>>,
}

#[derive(Serialize)]
struct WireContent<'a> {
    role: &'static str,
    parts: Vec<WirePart<'a>>,
}

/// Serialises as `{"text": …}` or `{"inlineData": {…}}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum WirePart<'a> {
    Text(&'a str),
    InlineData(WireBlob<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireBlob<'a> {
    mime_type: &'a str,
    /// Standard base64 alphabet, padded.
    data: String,
}

#[derive(Serialize)]
struct WireSafetySetting<'a> {
    category: &'a str,
    threshold: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireGenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<&'a serde_json::Value>,
}

// ---- wire format: response (every field optional, unknown fields ignored) ----

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireResponse {
    candidates: Option<Vec<WireCandidate>>,
    prompt_feedback: Option<WirePromptFeedback>,
    usage_metadata: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireCandidate {
    content: Option<WireContentOut>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireContentOut {
    parts: Option<Vec<WirePartOut>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WirePartOut {
    text: Option<String>,
    thought: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WirePromptFeedback {
    block_reason: Option<String>,
}

/// Counts are kept loose (number or string) so an odd encoding never fails a good answer.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireUsage {
    prompt_token_count: Option<serde_json::Value>,
    candidates_token_count: Option<serde_json::Value>,
    thoughts_token_count: Option<serde_json::Value>,
    cached_content_token_count: Option<serde_json::Value>,
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
    status: Option<String>,
    details: Option<Vec<serde_json::Value>>,
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
    fn proto_durations() {
        assert_eq!(parse_proto_duration("12s"), Some(Duration::from_secs(12)));
        assert_eq!(
            parse_proto_duration("1.5s"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_proto_duration("12"), None);
        assert_eq!(parse_proto_duration("-3s"), None);
        assert_eq!(parse_proto_duration("NaNs"), None);
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
            parse(r#"{"candidates":[{"content":{"role":"model"},"finishReason":"STOP"}]}"#),
            LlmOutcome::Empty {
                finish_reason: Some("STOP".into())
            }
        );
        assert_eq!(
            parse(r#"{"candidates":[{"content":{"parts":[{"text":" "}]},"finishReason":"STOP"}]}"#),
            LlmOutcome::Empty {
                finish_reason: Some("STOP".into())
            }
        );
        assert_eq!(
            parse(r#"{"candidates":[{"finishReason":"PROHIBITED_CONTENT"}]}"#),
            LlmOutcome::Blocked {
                reason: "PROHIBITED_CONTENT".into()
            }
        );
        assert_eq!(
            parse(r#"{"candidates":null,"promptFeedback":{"blockReason":"OTHER"}}"#),
            LlmOutcome::Blocked {
                reason: "OTHER".into()
            }
        );
        assert_eq!(
            parse(
                r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b"},{"functionCall":{}},{"text":"c","thought":false}]},"finishReason":"MAX_TOKENS","brandNew":1}]}"#
            ),
            LlmOutcome::Text("bc".into())
        );
    }

    #[test]
    fn model_ids() {
        assert_eq!(model_id("gemini-2.5-flash").ok(), Some("gemini-2.5-flash"));
        assert_eq!(
            model_id("models/gemini-2.5-pro").ok(),
            Some("gemini-2.5-pro")
        );
        assert!(model_id("").is_err());
        assert!(model_id("x?key=1").is_err());
        assert!(model_id("../x").is_err());
        assert!(model_id("a/b").is_err());
    }

    #[test]
    fn retry_details() {
        let details: Vec<serde_json::Value> = match serde_json::from_str(
            r#"[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
                {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7.25s"}]"#,
        ) {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(retry_delay(&details), Some(Duration::from_millis(7250)));
        assert!(daily_quota(&details));
        assert!(!daily_quota(&details[1..]));
    }
}
