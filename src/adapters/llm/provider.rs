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
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use crate::adapters::llm::openai::{OpenAiClient, OpenAiConfig, Preset};
pub use crate::core::llm::{
    GEMINI_DEFAULT_MODEL, GEMINI_MODEL_ENV, LlmChoice, ProviderKind, is_openai_reasoning_model,
    resolve,
};
use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::time::BoxFuture;
use crate::ports::llm::{Llm, LlmError};

/// The OpenAI-compatible preset, for every provider but Gemini.
pub(crate) fn preset(kind: ProviderKind) -> Option<Preset> {
    match kind {
        ProviderKind::Gemini => None,
        ProviderKind::OpenAi => Some(Preset::OpenAi),
        ProviderKind::OpenRouter => Some(Preset::OpenRouter),
        ProviderKind::Grok => Some(Preset::Grok),
        ProviderKind::Ollama => Some(Preset::Ollama),
    }
}

/// Why requests for a route cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Resolve(#[from] crate::core::llm::ResolveError),
    /// The provider's client could not be built (the reason names the variable to set).
    #[error("{0}")]
    Unavailable(String),
    #[error("the {0} provider is not configured")]
    NotConfigured(ProviderKind),
}

/// Hands each request to the client of the provider its route names.
pub struct Router {
    clients: BTreeMap<ProviderKind, Arc<dyn Llm>>,
    unavailable: BTreeMap<ProviderKind, String>,
    default_models: BTreeMap<ProviderKind, String>,
    /// Where each built provider's requests go (without credentials), for `check`.
    endpoints: BTreeMap<ProviderKind, String>,
    /// Providers whose model is set to plan in JSON held to the task schema
    /// (`<PROVIDER>_PLAN_FORMAT=json`), whatever `--plan-format` says.
    json_plans: std::collections::BTreeSet<ProviderKind>,
}

/// The variable that sets a provider's plan format (`GEMINI_PLAN_FORMAT`,
/// `OPENAI_PLAN_FORMAT`, `OLLAMA_PLAN_FORMAT`, ...).
pub fn plan_format_env(kind: ProviderKind) -> String {
    match preset(kind) {
        None => "GEMINI_PLAN_FORMAT".to_owned(),
        Some(p) => p.model_env().replace("_MODEL", "_PLAN_FORMAT"),
    }
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
            endpoints: BTreeMap::new(),
            json_plans: std::collections::BTreeSet::new(),
        };
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        for kind in ProviderKind::ALL {
            type Built = (Arc<dyn Llm>, String, String);
            let built: Result<Built, LlmError> = match preset(kind) {
                None => GeminiConfig::from_lookup(&lookup).and_then(|mut c| {
                    c.request_timeout = request_timeout;
                    let model =
                        get(GEMINI_MODEL_ENV).unwrap_or_else(|| GEMINI_DEFAULT_MODEL.to_owned());
                    let url = super::wire_schema::shown(&c.base_url);
                    Ok((Arc::new(GeminiClient::new(c)?) as Arc<dyn Llm>, model, url))
                }),
                Some(preset) => OpenAiConfig::from_lookup(preset, &lookup).and_then(|mut c| {
                    c.request_timeout = request_timeout;
                    let model = c.default_model.clone();
                    let url = super::wire_schema::shown(&c.base_url);
                    Ok((Arc::new(OpenAiClient::new(c)?) as Arc<dyn Llm>, model, url))
                }),
            };
            let var = plan_format_env(kind);
            let built = built.and_then(|b| match get(&var).as_deref().map(str::trim) {
                None | Some("blocks") => Ok(b),
                Some("json") => {
                    router.json_plans.insert(kind);
                    Ok(b)
                }
                Some(other) => Err(LlmError::Config(format!(
                    "{var}={other:?}: use json (plans held to the task schema) or blocks"
                ))),
            });
            match built {
                Ok((client, model, url)) => {
                    router.clients.insert(kind, client);
                    router.default_models.insert(kind, model);
                    router.endpoints.insert(kind, url);
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

    /// The providers set to plan in JSON (`<PROVIDER>_PLAN_FORMAT=json`).
    pub fn json_plan_providers(&self) -> std::collections::BTreeSet<ProviderKind> {
        self.json_plans.clone()
    }

    /// The model a provider uses when none is named.
    pub(crate) fn default_model(&self, kind: ProviderKind) -> &str {
        self.default_models
            .get(&kind)
            .map(String::as_str)
            .unwrap_or_else(|| match preset(kind) {
                Some(p) => p.default_model(),
                None => GEMINI_DEFAULT_MODEL,
            })
    }

    /// `Ok` when requests for `route` (a provider, a model or `provider:model`) can be served,
    /// else why not.
    pub(crate) fn check_route(&self, route: &str) -> Result<(), RouteError> {
        let choice = resolve(route)?;
        self.check(choice.provider)
    }

    /// The group classifier's route for `asked` (`--classifier-model`): itself, unless it is
    /// the built-in default whose provider cannot be served while `planner_route` can (a
    /// local-only setup): then the planner's route.
    pub fn classifier_route(&self, asked: &str, planner_route: &str) -> String {
        let default = crate::core::group::settings::DEFAULT_CLASSIFIER_MODEL;
        if asked == default
            && let Err(why) = self.check_route(asked)
            && self.check_route(planner_route).is_ok()
        {
            tracing::info!(event = "classifier_route", model = %planner_route, "the group classifier uses the planner's route: its default model's provider is not configured ({why})");
            return planner_route.to_owned();
        }
        asked.to_owned()
    }

    /// A route as `check` shows it: provider, model and where its requests go, or why they
    /// cannot be served.
    pub fn describe(&self, route: &str) -> String {
        let choice = match resolve(route) {
            Ok(c) => c,
            Err(e) => return format!("{route} (unusable: {e})"),
        };
        let kind = choice.provider;
        let model = choice
            .model
            .unwrap_or_else(|| self.default_model(kind).to_owned());
        match (self.check(kind), self.endpoints.get(&kind)) {
            (Ok(()), Some(url)) => format!("{kind}:{model} at {url}"),
            (Ok(()), None) => format!("{kind}:{model}"),
            (Err(why), _) => format!("{kind}:{model} (NOT CONFIGURED: {why})"),
        }
    }

    /// `Ok` when requests for `kind` can be served, else why not (naming the variable).
    pub fn check(&self, kind: ProviderKind) -> Result<(), RouteError> {
        if self.clients.contains_key(&kind) {
            return Ok(());
        }
        Err(match self.unavailable.get(&kind) {
            Some(why) => RouteError::Unavailable(why.clone()),
            None => RouteError::NotConfigured(kind),
        })
    }

    /// One tiny request to `route` (a one-token answer to one word), for `doctor`: how long
    /// it took, how it ended, and the server's `Date` header when one came back. Nothing is
    /// retried and nothing is metered outside a usage scope.
    pub async fn probe(&self, route: &str) -> Probe {
        let request = LlmRequest {
            model: route.to_owned(),
            system: String::new(),
            turns: vec![crate::core::llm::Turn::user("ping")],
            temperature: None,
            max_output_tokens: Some(1),
            response_schema: None,
        };
        let started = std::time::Instant::now();
        let (result, server_date) = super::http::with_server_date(self.run(&request)).await;
        Probe {
            latency: started.elapsed(),
            result: result.map(drop),
            server_date,
        }
    }

    async fn run(&self, req: &LlmRequest) -> Result<LlmOutcome, LlmError> {
        let choice = resolve(&req.model).map_err(LlmError::UnknownModel)?;
        let kind = choice.provider;
        let model = choice
            .model
            .unwrap_or_else(|| self.default_model(kind).to_owned());
        let Some(client) = self.clients.get(&kind) else {
            return Err(LlmError::Config(
                self.check(kind)
                    .err()
                    .map_or_else(|| format!("no {kind} client"), |e| e.to_string()),
            ));
        };
        let mut routed = req.clone();
        routed.model = model;
        client.generate(&routed).await
    }
}

/// What [`Router::probe`] saw.
#[derive(Debug)]
pub struct Probe {
    pub latency: Duration,
    /// `Ok` when the provider answered the request (whatever it said).
    pub result: Result<(), LlmError>,
    /// The response's `Date` header, as sent.
    pub server_date: Option<String>,
}

/// Names each request's model in full (`provider:model-id`) before handing it to `inner`, the
/// retry wrapper around the [`Router`]: the retry policy's log lines and outage guard then name
/// the model actually asked (`openai:qwen2.5-0.5b`), not the provider a persona wrote
/// (`openai`).
pub struct Named {
    router: Arc<Router>,
    inner: Arc<dyn Llm>,
}

impl Named {
    pub fn new(router: Arc<Router>, inner: Arc<dyn Llm>) -> Named {
        Named { router, inner }
    }
}

impl Router {
    /// `route` in full, `provider:model-id` (the provider's default model filled in), or
    /// `None` when it does not resolve (the router then answers with the reason).
    pub fn full_route(&self, route: &str) -> Option<String> {
        let choice = resolve(route).ok()?;
        let model = choice
            .model
            .unwrap_or_else(|| self.default_model(choice.provider).to_owned());
        Some(format!("{}:{model}", choice.provider))
    }
}

impl Llm for Named {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(async move {
            match self.router.full_route(&req.model) {
                Some(full) if full != req.model => {
                    let mut named = req.clone();
                    named.model = full;
                    self.inner.generate(&named).await
                }
                _ => self.inner.generate(req).await,
            }
        })
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

    /// What the layer under [`Named`] (the retry policy, whose lines and outage guard key by
    /// the request's model) is asked for.
    struct Asked(std::sync::Mutex<Vec<String>>);

    impl Llm for Asked {
        fn generate<'a>(
            &'a self,
            req: &'a LlmRequest,
        ) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
            if let Ok(mut asked) = self.0.lock() {
                asked.push(req.model.clone());
            }
            Box::pin(async {
                Ok(LlmOutcome::Empty {
                    finish_reason: None,
                })
            })
        }
    }

    #[tokio::test]
    async fn the_layer_under_the_router_sees_the_model_id_not_the_provider() {
        let env = |name: &str| match name {
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".to_owned()),
            "OPENAI_MODEL" => Some("smollm2-135m".to_owned()),
            _ => None,
        };
        let router = Arc::new(Router::from_lookup(env, Duration::from_secs(5)));
        let asked = Arc::new(Asked(std::sync::Mutex::new(Vec::new())));
        let named = Named::new(router, Arc::clone(&asked) as Arc<dyn Llm>);
        for route in ["openai", "openai:other-model", "gemini"] {
            let req = LlmRequest {
                model: route.to_owned(),
                system: String::new(),
                turns: vec![crate::core::llm::Turn::user("hi")],
                temperature: None,
                max_output_tokens: None,
                response_schema: None,
            };
            named.generate(&req).await.ok();
        }
        let asked = asked.0.lock().map(|a| a.clone()).unwrap_or_default();
        assert_eq!(
            asked,
            [
                "openai:smollm2-135m",
                "openai:other-model",
                &format!("gemini:{GEMINI_DEFAULT_MODEL}")
            ]
        );
    }

    #[test]
    fn reasoning_model_names() {
        assert!(is_openai_reasoning_model("o3"));
        assert!(is_openai_reasoning_model("o4-mini"));
        assert!(is_openai_reasoning_model("o10-pro"));
        assert!(!is_openai_reasoning_model("ollama"));
        assert!(!is_openai_reasoning_model("o3x"));
    }
}
