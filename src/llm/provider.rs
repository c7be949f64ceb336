//! Which provider serves which model. [`resolve`] reads an `LLM` choice as persona files and
//! `--llm` write it: a provider name (`gemini`, `gpt`/`openai`, `grok`, `openrouter`,
//! `ollama`), a model name (`gemini-*` is Gemini, `gpt-*`, `chatgpt-*` and `o1`/`o3`/`o4…` are
//! OpenAI, `grok-*` is xAI, `vendor/model` is OpenRouter) or `provider:model` (any model of any
//! provider, e.g. `ollama:qwen3:8b`). A resolved choice travels in [`LlmRequest::model`] as a
//! route `provider:model`, and the [`Router`] (an [`Llm`]) hands each request to that
//! provider's client with the bare model id. Clients are built once from the environment; a
//! provider that cannot be built (no key) answers with a configuration error naming the
//! variable. This module does no HTTP itself and never reads a key beyond handing it over.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::gemini::{GeminiClient, GeminiConfig};
use super::openai::{OpenAiClient, OpenAiConfig, Preset};
use super::{Llm, LlmError, LlmOutcome, LlmRequest};
use crate::clock::BoxFuture;

/// The default chat model of Gemini.
pub const GEMINI_DEFAULT_MODEL: &str = "gemini-flash-latest";
/// The variable naming Gemini's default model.
pub const GEMINI_MODEL_ENV: &str = "GEMINI_MODEL";

/// Every environment variable that carries a provider's API key (the names systemd
/// credentials may stand in for).
pub const KEY_VARIABLES: &[&str] = &[
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
    pub const ALL: [ProviderKind; 5] = [
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

    /// The OpenAI-compatible preset, for every provider but Gemini.
    pub fn preset(self) -> Option<Preset> {
        match self {
            ProviderKind::Gemini => None,
            ProviderKind::OpenAi => Some(Preset::OpenAi),
            ProviderKind::OpenRouter => Some(Preset::OpenRouter),
            ProviderKind::Grok => Some(Preset::Grok),
            ProviderKind::Ollama => Some(Preset::Ollama),
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
fn is_openai_reasoning_model(model: &str) -> bool {
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

/// Hands each request to the client of the provider its route names.
pub struct Router {
    clients: BTreeMap<ProviderKind, Arc<dyn Llm>>,
    unavailable: BTreeMap<ProviderKind, String>,
    default_models: BTreeMap<ProviderKind, String>,
}

impl Router {
    /// Builds every provider's client the environment allows (`lookup` reads variables), each
    /// request limited to `request_timeout`. Providers that cannot be built are remembered with
    /// the reason, which requests routed to them get as their error.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        request_timeout: Duration,
    ) -> Router {
        let mut router = Router {
            clients: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            default_models: BTreeMap::new(),
        };
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        for kind in ProviderKind::ALL {
            let built: Result<(Arc<dyn Llm>, String), LlmError> = match kind.preset() {
                None => GeminiConfig::from_lookup(&lookup).and_then(|mut c| {
                    c.request_timeout = request_timeout;
                    let model =
                        get(GEMINI_MODEL_ENV).unwrap_or_else(|| GEMINI_DEFAULT_MODEL.to_owned());
                    Ok((Arc::new(GeminiClient::new(c)?) as Arc<dyn Llm>, model))
                }),
                Some(preset) => OpenAiConfig::from_lookup(preset, &lookup).and_then(|mut c| {
                    c.request_timeout = request_timeout;
                    let model = c.default_model.clone();
                    Ok((Arc::new(OpenAiClient::new(c)?) as Arc<dyn Llm>, model))
                }),
            };
            match built {
                Ok((client, model)) => {
                    router.clients.insert(kind, client);
                    router.default_models.insert(kind, model);
                }
                Err(e) => {
                    router.unavailable.insert(kind, e.to_string());
                }
            }
        }
        router
    }

    /// [`Router::from_lookup`] over the process environment.
    pub fn from_env(request_timeout: Duration) -> Router {
        Router::from_lookup(|name| std::env::var(name).ok(), request_timeout)
    }

    /// A router over given clients (tests, embedders).
    pub fn with_clients(clients: Vec<(ProviderKind, Arc<dyn Llm>, String)>) -> Router {
        let mut router = Router {
            clients: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            default_models: BTreeMap::new(),
        };
        for (kind, client, model) in clients {
            router.clients.insert(kind, client);
            router.default_models.insert(kind, model);
        }
        router
    }

    /// The model a provider uses when none is named.
    pub fn default_model(&self, kind: ProviderKind) -> &str {
        self.default_models
            .get(&kind)
            .map(String::as_str)
            .unwrap_or_else(|| match kind.preset() {
                Some(p) => p.default_model(),
                None => GEMINI_DEFAULT_MODEL,
            })
    }

    /// `Ok` when requests for `route` (a provider, a model or `provider:model`) can be served,
    /// else why not.
    pub fn check_route(&self, route: &str) -> Result<(), String> {
        resolve(route)
            .map_err(|e| e.to_string())
            .and_then(|choice| self.check(choice.provider))
    }

    /// `Ok` when requests for `kind` can be served, else why not (naming the variable).
    pub fn check(&self, kind: ProviderKind) -> Result<(), String> {
        if self.clients.contains_key(&kind) {
            return Ok(());
        }
        Err(self
            .unavailable
            .get(&kind)
            .cloned()
            .unwrap_or_else(|| format!("the {kind} provider is not configured")))
    }

    async fn run(&self, req: &LlmRequest) -> Result<LlmOutcome, LlmError> {
        let choice = resolve(&req.model).map_err(|e| LlmError::InvalidRequest(e.to_string()))?;
        let kind = choice.provider;
        let model = choice
            .model
            .unwrap_or_else(|| self.default_model(kind).to_owned());
        let Some(client) = self.clients.get(&kind) else {
            return Err(LlmError::Config(
                self.check(kind)
                    .err()
                    .unwrap_or_else(|| format!("no {kind} client")),
            ));
        };
        let mut routed = req.clone();
        routed.model = model;
        client.generate(&routed).await
    }
}

impl Llm for Router {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(self.run(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_model_names() {
        assert!(is_openai_reasoning_model("o3"));
        assert!(is_openai_reasoning_model("o4-mini"));
        assert!(is_openai_reasoning_model("o10-pro"));
        assert!(!is_openai_reasoning_model("ollama"));
        assert!(!is_openai_reasoning_model("o3x"));
    }
}
