//! The LLM port: the [`Llm`] trait every provider client implements (Gemini, OpenAI-compatible,
//! the router over them, the retry and metering wrappers in `adapters::llm`), its typed errors
//! and the API key that never prints. The request and outcome shapes are `core::llm`.

use std::fmt;
use std::time::Duration;

use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::time::BoxFuture;

/// Why a completion failed. Messages never contain the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The client is misconfigured (missing key, bad base URL, …). Not retried.
    #[error("LLM configuration error: {0}")]
    Config(String),
    /// The request was rejected before sending (no turns, malformed model id, …).
    #[error("invalid LLM request: {0}")]
    InvalidRequest(String),
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

/// A language model behind some provider. Provider clients make one request per call;
/// [`retry::RetryingLlm`] wraps any of them with the one retry policy.
pub trait Llm: Send + Sync + 'static {
    /// Runs one completion.
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>>;
}

/// A provider API key. `Debug` and `Display` print `[redacted]`; only [`ApiKey::expose`]
/// gives the value, for the one request header that needs it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key. Surrounding whitespace (a stray newline from a file) is dropped.
    pub fn new(key: impl Into<String>) -> ApiKey {
        let key: String = key.into();
        ApiKey(key.trim().to_owned())
    }

    /// The secret itself. Use it for the authentication header and nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when the key is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::llm::Part;

    #[test]
    fn api_key_never_prints() {
        let k = ApiKey::new(" SENTINEL_KEY_123\n");
        assert_eq!(format!("{k}"), "[redacted]");
        assert_eq!(format!("{k:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&k)), "Some([redacted])");
        assert_eq!(k.expose(), "SENTINEL_KEY_123");
    }

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

    #[test]
    fn inline_data_debug_shows_size_not_bytes() {
        let p = Part::InlineData {
            mime: "image/png".into(),
            data: vec![1, 2, 3],
        };
        assert_eq!(
            format!("{p:?}"),
            "InlineData { mime: \"image/png\", bytes: 3 }"
        );
    }
}
