//! The HTTP exchange shared by the speech clients: one POST to a provider's endpoint over the
//! LLM layer's client and body cap (`adapters::llm::http`), and the answer classified into
//! audio bytes or a [`SpeechError`]: 408/409/429/5xx and broken connections are transient,
//! other statuses permanent (401/403 naming the key's variable). Every message names the URL
//! as `check` shows it (no credentials, no query) and never the key: a server echoing it is
//! redacted. No wire format lives here; `openai` and `gemini` call it.

use std::time::Duration;

use reqwest::header::HeaderValue;

use crate::adapters::llm::http::{self, ExchangeError, chain, http_client, normalise_base_url};
use crate::adapters::llm::wire_schema::shown;
use crate::ports::llm::{ApiKey, LlmError};
use crate::ports::speech::SpeechError;

/// Statuses worth another try.
const RETRYABLE_STATUSES: [u16; 7] = [408, 409, 429, 500, 502, 503, 504];
/// Longest server message (in characters) kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// The chat clients' settings error, as speech's: the message of an `LlmError::Config` (all
/// that reading settings and building a client return), else the error as it reads.
pub(crate) fn not_configured(error: LlmError) -> SpeechError {
    match error {
        LlmError::Config(message) => SpeechError::NotConfigured(message),
        other => SpeechError::NotConfigured(format!("{other}")),
    }
}

/// One provider endpoint: the client, the URL, and what errors may show of it.
pub(crate) struct Endpoint {
    http: reqwest::Client,
    /// The full URL requests go to.
    pub(crate) url: String,
    /// The URL as errors and `check` show it.
    pub(crate) shown: String,
    /// Redacted from any text the server sends back.
    key: Option<ApiKey>,
    /// Names the provider and where its key comes from, for 401/403.
    provider: &'static str,
    key_hint: &'static str,
    max_response_bytes: usize,
}

/// What [`Endpoint::new`] needs.
pub(crate) struct EndpointSpec<'a> {
    pub provider: &'static str,
    pub base_url: &'a str,
    /// Appended to the normalised base URL.
    pub path: &'a str,
    pub key: Option<ApiKey>,
    /// The variable(s) holding the key, for a 401/403's message.
    pub key_hint: &'static str,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_response_bytes: usize,
}

impl Endpoint {
    /// Validates the base URL and builds the client (no redirects, no proxy for loopback).
    pub(crate) fn new(spec: EndpointSpec<'_>) -> Result<Endpoint, SpeechError> {
        let base = normalise_base_url(spec.provider, spec.base_url).map_err(not_configured)?;
        let http = http_client(&base, spec.connect_timeout, spec.request_timeout)
            .map_err(not_configured)?;
        let url = format!("{base}{}", spec.path);
        Ok(Endpoint {
            http,
            shown: shown(&url),
            url,
            key: spec.key.filter(|k| !k.is_empty()),
            provider: spec.provider,
            key_hint: spec.key_hint,
            max_response_bytes: spec.max_response_bytes,
        })
    }

    /// A sensitive header value carrying the key (`prefix` + key), or an error naming the
    /// provider when the key holds characters a header cannot.
    pub(crate) fn key_header(&self, prefix: &str) -> Result<Option<HeaderValue>, SpeechError> {
        let Some(key) = &self.key else {
            return Ok(None);
        };
        let mut value =
            HeaderValue::from_str(&format!("{prefix}{}", key.expose())).map_err(|_| {
                SpeechError::NotConfigured(format!(
                    "the {} API key holds characters not allowed in an HTTP header",
                    self.provider
                ))
            })?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    /// POSTs `body` (JSON) with `headers`, and returns the body of a 2xx answer.
    pub(crate) async fn post_json(
        &self,
        headers: &[(&'static str, HeaderValue)],
        body: Vec<u8>,
    ) -> Result<Vec<u8>, SpeechError> {
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value.clone());
        }
        let (status, _retry_after, bytes) =
            match http::send_and_read(request, self.max_response_bytes).await {
                Ok(answer) => answer,
                Err(ExchangeError::Transport(e)) => {
                    let permanent = e.is_builder() || e.is_redirect();
                    let message = self.say(&format!("no answer: {}", chain(e)));
                    return Err(if permanent {
                        SpeechError::Permanent(message)
                    } else {
                        SpeechError::Transient(message)
                    });
                }
                Err(ExchangeError::TooLarge(status)) => {
                    return Err(SpeechError::Permanent(self.say(&format!(
                    "HTTP {status}: the answer is larger than the {} MiB cap ({}); it was not read",
                    self.max_response_bytes / (1024 * 1024),
                    http::MAX_RESPONSE_ENV
                ))));
                }
            };
        tracing::debug!(
            provider = self.provider,
            status = status.as_u16(),
            response_bytes = bytes.len(),
            "speech response"
        );
        if status.is_success() {
            return Ok(bytes);
        }
        Err(self.http_failure(status, &bytes))
    }

    /// The error of a non-2xx answer.
    fn http_failure(&self, status: reqwest::StatusCode, bytes: &[u8]) -> SpeechError {
        let code = status.as_u16();
        let reason = status.canonical_reason().unwrap_or("unknown status");
        let server = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|v| {
                let error = v.get("error")?;
                error
                    .get("message")
                    .and_then(|m| m.as_str())
                    .or_else(|| error.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned());
        let server = server.trim();
        let mut message = if server.is_empty() {
            format!("HTTP {code} {reason}")
        } else {
            format!("HTTP {code} {reason}: {server}")
        };
        if code == 401 || code == 403 {
            message.push_str(&format!(" (check the key in {})", self.key_hint));
        }
        let message = self.say(&message);
        if RETRYABLE_STATUSES.contains(&code) {
            SpeechError::Transient(message)
        } else {
            SpeechError::Permanent(message)
        }
    }

    /// `text` about this endpoint: prefixed with the provider and its shown URL, the key
    /// redacted, shortened to one line.
    pub(crate) fn say(&self, text: &str) -> String {
        let text = match &self.key {
            Some(key) if !key.expose().is_empty() => text.replace(key.expose(), "[redacted]"),
            _ => text.to_owned(),
        };
        format!(
            "{} at {}: {}",
            self.provider,
            self.shown,
            http::truncate(&text, MAX_MESSAGE_CHARS)
        )
    }
}
