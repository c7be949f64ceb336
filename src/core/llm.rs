//! The provider-neutral vocabulary of large language models: the request and outcome types
//! and the typed error ([`LlmError`]), pure data. It owns no HTTP, no provider wire format, no
//! retry policy and no trait: the [`Llm`](crate::ports::llm::Llm) port and its API key are
//! `ports::llm`; the provider clients, the router, the retry wrapper and the usage meter are
//! `adapters::llm` and must not leak their own types through here. The planner and the
//! classifier build requests with it; their errors keep an [`LlmError`] as their cause.

use std::fmt;
use std::time::Duration;

/// Who said a turn of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The other side (and everything we feed the model as input).
    User,
    /// The model itself (earlier answers, replayed as history).
    Model,
}

/// One piece of a turn.
#[derive(Clone, PartialEq, Eq)]
pub enum Part {
    /// Plain text.
    Text(String),
    /// Raw bytes of a medium (image, audio, …) with its MIME type, e.g. `image/jpeg`.
    InlineData {
        /// The MIME type, e.g. `image/webp` or `audio/ogg`.
        mime: String,
        /// The raw (not base64-encoded) bytes.
        data: Vec<u8>,
    },
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text(text.into())
    }
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Text(t) => f.debug_tuple("Text").field(t).finish(),
            // Media bytes are noise in a debug dump: show their size only.
            Part::InlineData { mime, data } => f
                .debug_struct("InlineData")
                .field("mime", mime)
                .field("bytes", &data.len())
                .finish(),
        }
    }
}

/// One turn of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub parts: Vec<Part>,
}

impl Turn {
    /// A user turn made of one text part.
    pub fn user(text: impl Into<String>) -> Turn {
        Turn {
            role: Role::User,
            parts: vec![Part::Text(text.into())],
        }
    }

    /// A model turn made of one text part.
    pub fn model(text: impl Into<String>) -> Turn {
        Turn {
            role: Role::Model,
            parts: vec![Part::Text(text.into())],
        }
    }
}

/// Everything needed for one completion.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// Provider model id, e.g. `gemini-2.5-flash`.
    pub model: String,
    /// The system instruction; an empty string sends none.
    pub system: String,
    /// The conversation, oldest first. Must not be empty.
    pub turns: Vec<Turn>,
    /// Sampling temperature; `None` leaves the provider default.
    pub temperature: Option<f32>,
    /// Cap on generated tokens (thinking tokens may count against it); `None` for the default.
    pub max_output_tokens: Option<u32>,
    /// Asks for a JSON answer of this shape (an OpenAPI-subset schema: `type`, `properties`,
    /// `required`, `enum`, `items`); `None` for free text.
    pub response_schema: Option<serde_json::Value>,
}

/// What the model answered, when the exchange itself worked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmOutcome {
    /// The answer text (thought summaries excluded).
    Text(String),
    /// The model produced no text; `finish_reason` is the provider's reason, if it gave one
    /// (e.g. `MAX_TOKENS` when thinking used up the budget).
    Empty {
        /// The provider's finish reason, verbatim.
        finish_reason: Option<String>,
    },
    /// The prompt or the answer was blocked by the provider's safety system.
    Blocked {
        /// The provider's reason, verbatim (e.g. `SAFETY`, `PROHIBITED_CONTENT`).
        reason: String,
    },
}

/// The default chat model of Gemini.
pub const GEMINI_DEFAULT_MODEL: &str = "gemini-flash-latest";
/// The variable naming Gemini's default model.
pub const GEMINI_MODEL_ENV: &str = "GEMINI_MODEL";

/// Every environment variable that carries a provider's API key (the names systemd
/// credentials may stand in for).
pub(crate) const KEY_VARIABLES: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROK_API_KEY",
    "XAI_API_KEY",
    "OLLAMA_API_KEY",
];

/// An LLM provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderKind {
    Gemini,
    OpenAi,
    OpenRouter,
    Grok,
    Ollama,
}

impl ProviderKind {
    /// Every provider, in a stable order.
    pub(crate) const ALL: [ProviderKind; 5] = [
        ProviderKind::Gemini,
        ProviderKind::OpenAi,
        ProviderKind::OpenRouter,
        ProviderKind::Grok,
        ProviderKind::Ollama,
    ];

    /// A provider by one of its names (case-insensitive).
    pub fn parse(name: &str) -> Option<ProviderKind> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "gemini" | "google" => ProviderKind::Gemini,
            "gpt" | "openai" | "chatgpt" => ProviderKind::OpenAi,
            "openrouter" => ProviderKind::OpenRouter,
            "grok" | "xai" => ProviderKind::Grok,
            "ollama" => ProviderKind::Ollama,
            _ => return None,
        })
    }

    /// The canonical name (used in routes).
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Gemini => "gemini",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenRouter => "openrouter",
            ProviderKind::Grok => "grok",
            ProviderKind::Ollama => "ollama",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A resolved `LLM` choice: a provider, and a model unless the provider's default is meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmChoice {
    pub provider: ProviderKind,
    pub model: Option<String>,
}

impl LlmChoice {
    /// The route this choice travels as in [`LlmRequest::model`]: `provider:model`, or just
    /// `provider` for the provider's default model (filled in by the [`Router`]).
    pub fn route(&self) -> String {
        match &self.model {
            Some(model) => format!("{}:{model}", self.provider),
            None => self.provider.name().to_owned(),
        }
    }
}

impl Default for LlmChoice {
    /// Gemini with its default model.
    fn default() -> Self {
        LlmChoice {
            provider: ProviderKind::Gemini,
            model: None,
        }
    }
}

/// Why an `LLM` value could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown LLM {0:?}: expected a provider (gemini, gpt or openai, grok, openrouter, ollama), a model name (gemini-…, gpt-…, o3…, grok-…, vendor/model) or provider:model"
)]
pub struct ResolveError(pub String);

/// Reads an `LLM` value (see the module docs).
pub fn resolve(spec: &str) -> Result<LlmChoice, ResolveError> {
    let spec = spec.trim();
    let bad = || ResolveError(spec.to_owned());
    if spec.is_empty() || spec.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    if let Some(provider) = ProviderKind::parse(spec) {
        return Ok(LlmChoice {
            provider,
            model: None,
        });
    }
    if let Some((head, model)) = spec.split_once(':')
        && let Some(provider) = ProviderKind::parse(head)
    {
        if model.is_empty() {
            return Err(bad());
        }
        return Ok(LlmChoice {
            provider,
            model: Some(model.to_owned()),
        });
    }
    let lower = spec.to_ascii_lowercase();
    let bare = lower.strip_prefix("models/").unwrap_or(&lower);
    let provider = if bare.starts_with("gemini-") || bare.starts_with("gemma-") {
        ProviderKind::Gemini
    } else if bare.starts_with("gpt-")
        || bare.starts_with("chatgpt-")
        || is_openai_reasoning_model(bare)
    {
        ProviderKind::OpenAi
    } else if bare.starts_with("grok-") {
        ProviderKind::Grok
    } else if spec.contains('/') && !spec.starts_with('/') && !spec.ends_with('/') {
        ProviderKind::OpenRouter
    } else {
        return Err(bad());
    };
    Ok(LlmChoice {
        provider,
        model: Some(spec.to_owned()),
    })
}

/// `o1`, `o3-mini`, `o4-mini`, …: the letter o, a digit, then nothing or a dash.
pub fn is_openai_reasoning_model(model: &str) -> bool {
    let mut chars = model.chars();
    chars.next() == Some('o')
        && chars.next().is_some_and(|c| c.is_ascii_digit())
        && chars
            .as_str()
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .chars()
            .next()
            .is_none_or(|c| c == '-')
}

/// The choice of a persona: its `LLM` heading, its `LLM Model` heading, else the default.
/// `LLM Model` alone keeps working: a model name resolves to its provider, and a name no rule
/// recognises goes to the default provider (a Gemini model id, say, or a local model).
pub fn persona_choice(
    llm: Option<&str>,
    llm_model: Option<&str>,
    default: &LlmChoice,
) -> Result<LlmChoice, ResolveError> {
    Ok(match (llm, llm_model) {
        (Some(spec), model) => {
            let mut choice = resolve(spec)?;
            if choice.model.is_none() {
                choice.model = model.map(str::to_owned);
            }
            choice
        }
        (None, Some(model)) => resolve(model).unwrap_or_else(|_| LlmChoice {
            provider: default.provider,
            model: Some(model.to_owned()),
        }),
        (None, None) => default.clone(),
    })
}

/// Why a completion failed. Messages never contain the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The client is misconfigured (missing key, bad base URL, …). Not retried.
    #[error("LLM configuration error: {0}")]
    Config(String),
    /// The request was rejected before sending (no turns, malformed model id, …).
    #[error("invalid LLM request: {0}")]
    InvalidRequest(String),
    /// The request names a model no route serves (an invalid request, before sending).
    #[error("invalid LLM request: {0}")]
    UnknownModel(#[source] ResolveError),
    /// A failure that may go away by itself: overload, quota, timeout, connection trouble.
    /// `retry_after` is the delay the server asked for, when it named one.
    #[error("transient LLM error ({}): {message}{}", status_label(*.status), retry_label(*.retry_after))]
    Transient {
        /// The HTTP status, or `None` for a transport failure.
        status: Option<u16>,
        /// The server's message (or a description of the transport failure).
        message: String,
        /// How long the server asked us to wait before trying again.
        retry_after: Option<Duration>,
    },
    /// A failure that retrying will not fix: bad request, bad key, unknown model, …
    #[error("LLM request failed ({}): {message}", status_label(*.status))]
    Permanent {
        /// The HTTP status, if there was a response.
        status: Option<u16>,
        /// The server's message.
        message: String,
    },
    /// The provider answered success with a body we could not parse.
    #[error("could not decode LLM response: {0}")]
    Decode(String),
}

impl LlmError {
    /// True when the same request may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, LlmError::Transient { .. })
    }

    /// The HTTP status that caused the error, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Transient { status, .. } | LlmError::Permanent { status, .. } => *status,
            _ => None,
        }
    }

    /// The delay the server asked for before the next try, if it named one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

fn status_label(status: Option<u16>) -> String {
    match status {
        Some(code) => format!("HTTP {code}"),
        None => "no HTTP status".to_owned(),
    }
}

fn retry_label(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (server asked to retry after {:.1} s)", d.as_secs_f64()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::LlmError;

    #[test]
    fn errors_classify_and_display() {
        let e = LlmError::Transient {
            status: Some(503),
            message: "overloaded".into(),
            retry_after: Some(Duration::from_secs(12)),
        };
        assert!(e.is_transient());
        assert_eq!(e.status(), Some(503));
        assert_eq!(
            e.to_string(),
            "transient LLM error (HTTP 503): overloaded (server asked to retry after 12.0 s)"
        );
        let p = LlmError::Permanent {
            status: Some(404),
            message: "no such model".into(),
        };
        assert!(!p.is_transient());
        assert_eq!(
            p.to_string(),
            "LLM request failed (HTTP 404): no such model"
        );
        assert!(!LlmError::Config("x".into()).is_transient());
        assert!(!LlmError::Decode("x".into()).is_transient());
    }
}
