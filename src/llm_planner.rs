//! The LLM-backed planner: builds the prompt for a chat (`prompt`), asks the model (`llm`),
//! and parses its task blocks (`blocks`) into actions. It keeps, per conversation, the start
//! of the history window used last time so the prompt prefix stays stable between requests
//! (after a restart the first request recomputes it). It maps model outcomes: blocked or empty
//! answers are silence (logged with the reason), transient errors are retried by the task
//! machinery, permanent ones drop the plan. Called by the `received` handler via [`Planner`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::blocks::{self, ParseOptions};
use crate::clock::BoxFuture;
use crate::llm::{Llm, LlmOutcome, LlmRequest};
use crate::planner::{Action, PlanError, PlanRequest, Planner};
use crate::prompt::{self, PromptInput};
use crate::telegram::{ChatId, MessageId};

/// Default chat model when neither the persona nor the configuration names one.
pub const DEFAULT_MODEL: &str = "gemini-flash-latest";

/// Settings of the LLM planner.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmPlannerConfig {
    pub default_model: String,
    pub temperature: Option<f32>,
    pub max_output_tokens: Option<u32>,
    /// Most tasks taken from one reply.
    pub max_tasks: usize,
    /// Most history messages sent.
    pub history_size: usize,
}

impl Default for LlmPlannerConfig {
    fn default() -> Self {
        LlmPlannerConfig {
            default_model: DEFAULT_MODEL.to_string(),
            temperature: None,
            max_output_tokens: None,
            max_tasks: 12,
            history_size: 500,
        }
    }
}

/// Builds a Gemini-backed planner from the environment (`GEMINI_API_KEY` or
/// `GOOGLE_GEMINI_API_KEY`, optional `GEMINI_BASE_URL`). Retry delays run on `clock`.
pub fn gemini_from_env(
    config: LlmPlannerConfig,
    attempts: u32,
    clock: crate::clock::SharedClock,
) -> Result<LlmPlanner, crate::llm::LlmError> {
    Ok(LlmPlanner::new(
        gemini_llm_from_env(attempts, clock)?,
        config,
    ))
}

/// A Gemini client from the environment, shared by the planner and the media pipeline.
pub fn gemini_llm_from_env(
    attempts: u32,
    clock: crate::clock::SharedClock,
) -> Result<Arc<dyn Llm>, crate::llm::LlmError> {
    let mut gemini = crate::llm::gemini::GeminiConfig::from_env()?;
    gemini.max_attempts = attempts.max(1);
    let client = crate::llm::gemini::GeminiClient::new(gemini, clock)?;
    Ok(Arc::new(client))
}

/// Whether a Gemini API key is present in the environment (its value is not read further).
pub fn gemini_key_present() -> bool {
    [
        crate::llm::gemini::API_KEY_ENV,
        crate::llm::gemini::API_KEY_ENV_FALLBACK,
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// Plans replies with an LLM.
pub struct LlmPlanner {
    llm: Arc<dyn Llm>,
    config: LlmPlannerConfig,
    windows: Mutex<HashMap<(String, ChatId), MessageId>>,
    /// Group triggers whose answer must not quote them (low impulse), from the group gate.
    quotes: Option<Arc<crate::group::gate::QuoteBook>>,
}

impl LlmPlanner {
    pub fn new(llm: Arc<dyn Llm>, config: LlmPlannerConfig) -> LlmPlanner {
        LlmPlanner {
            llm,
            config,
            windows: Mutex::new(HashMap::new()),
            quotes: None,
        }
    }

    fn window(&self, key: &(String, ChatId)) -> Option<MessageId> {
        self.windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
    }

    /// Lets the group gate decide, per trigger, whether the answer quotes it.
    pub fn with_quote_book(mut self, quotes: Arc<crate::group::gate::QuoteBook>) -> LlmPlanner {
        self.quotes = Some(quotes);
        self
    }

    fn remember_window(&self, key: (String, ChatId), start: Option<MessageId>) {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        match start {
            Some(id) => w.insert(key, id),
            None => w.remove(&key),
        };
    }

    /// Builds the request for a planning step (public for tests of the prompt layout).
    pub fn request(&self, req: &PlanRequest<'_>) -> (LlmRequest, Option<MessageId>) {
        let key = (req.persona.name.clone(), req.chat.id);
        let built = prompt::build(&PromptInput {
            persona: req.persona,
            chat: req.chat,
            history: req.history,
            target: req.target,
            now: req.now,
            history_size: self.config.history_size,
            window_start: self.window(&key),
            media: req.media,
            stickers: req.stickers,
        });
        let model = req
            .persona
            .llm_model
            .clone()
            .unwrap_or_else(|| self.config.default_model.clone());
        (
            LlmRequest {
                model,
                system: built.system,
                turns: built.turns,
                temperature: self.config.temperature,
                max_output_tokens: self.config.max_output_tokens,
                response_schema: None,
            },
            built.window_start,
        )
    }

    fn parse(&self, req: &PlanRequest<'_>, text: &str) -> Vec<Action> {
        let known: HashSet<MessageId> = req.history.iter().map(|m| m.id).collect();
        let opts = ParseOptions {
            max_tasks: self.config.max_tasks,
            allow_clear_conversation: req.persona.allow_clear_conversation,
            default_sticker_set: req.persona.sticker_sets.first().cloned(),
            known_messages: Some(known),
            ..ParseOptions::default()
        };
        let parsed = blocks::parse_reply(text, &opts);
        for w in &parsed.warnings {
            tracing::warn!(agent = %req.persona.name, chat = %req.chat.id, "model reply: {w}");
        }
        let mut actions = parsed.actions;
        // In a group, the first message answers the message that triggered the plan unless
        // the model chose otherwise, so people can tell what it responds to.
        if !req.chat.kind.is_direct()
            && let Some(target) = req.target
            && self
                .quotes
                .as_ref()
                .is_none_or(|q| q.should_quote(req.chat.id, target))
            && let Some(first) = actions
                .iter_mut()
                .find(|a| matches!(a, Action::Send { .. } | Action::Sticker { .. }))
        {
            match first {
                Action::Send { reply_to, .. } | Action::Sticker { reply_to, .. } => {
                    reply_to.get_or_insert(target);
                }
                _ => {}
            }
        }
        actions
    }
}

impl Planner for LlmPlanner {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        Box::pin(async move {
            let key = (req.persona.name.clone(), req.chat.id);
            let (request, window) = self.request(&req);
            let outcome = self.llm.generate(&request).await.map_err(|e| {
                if e.is_transient() {
                    PlanError::Transient(e.to_string())
                } else {
                    PlanError::Permanent(e.to_string())
                }
            })?;
            self.remember_window(key, window);
            match outcome {
                LlmOutcome::Text(text) => Ok(self.parse(&req, &text)),
                LlmOutcome::Empty { finish_reason } => {
                    tracing::info!(
                        agent = %req.persona.name,
                        chat = %req.chat.id,
                        finish_reason = finish_reason.as_deref().unwrap_or("none"),
                        "model gave an empty answer: staying silent"
                    );
                    Ok(Vec::new())
                }
                LlmOutcome::Blocked { reason } => {
                    tracing::warn!(
                        agent = %req.persona.name,
                        chat = %req.chat.id,
                        reason = %reason,
                        "model answer blocked by the provider: staying silent"
                    );
                    Ok(Vec::new())
                }
            }
        })
    }
}
