//! The LLM port: the [`Llm`] trait every provider client implements (Gemini, OpenAI-compatible,
//! the router over them, the retry and metering wrappers in `adapters::llm`), the
//! [`CallMeter`] through which a caller outside the adapters (the group gate) has its calls
//! metered for an agent and chat, and the API key that never prints. The request and outcome shapes and the typed error ([`LlmError`], named
//! here too) are `core::llm`, so that the core's own errors (planning, the classifier) can
//! keep an LLM failure as their cause.

use std::fmt;

pub use crate::core::call_kind::CallKind;
pub use crate::core::llm::LlmError;
use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::model::ChatId;
use crate::core::time::BoxFuture;

/// A language model behind some provider. Provider clients make one request per call;
/// [`retry::RetryingLlm`] wraps any of them with the one retry policy.
pub trait Llm: Send + Sync + 'static {
    /// Runs one completion.
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>>;
}

/// Whom an LLM call is made for, as the usage meter counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallFor<'a> {
    pub agent: &'a str,
    pub chat: ChatId,
    pub kind: CallKind,
}

/// Meters LLM calls made outside the adapters: the call runs inside a usage scope for `call`
/// (`adapters::llm::usage::metered`, the process's one usage meter), so its tokens count in
/// `state usage`, the metrics and the spending caps like the planner's.
pub trait CallMeter: Send + Sync {
    /// Runs `call` (an [`Llm::generate`] future) metered for `whom`.
    fn metered<'a>(
        &'a self,
        whom: CallFor<'a>,
        call: BoxFuture<'a, Result<LlmOutcome, LlmError>>,
    ) -> BoxFuture<'a, Result<LlmOutcome, LlmError>>;
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
