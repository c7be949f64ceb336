//! The LLM-backed planner: builds the prompt for a chat (`prompt`), asks the model (`llm`),
//! and parses its task blocks (`blocks`) into actions. Each persona's request is routed to its
//! provider (`llm::provider`: the persona's `LLM` / `LLM Model` headings, else the default
//! `--llm`) and runs inside a usage scope (`llm::usage`) naming the agent, the chat and the
//! kind of call (plan, summary, schedule). It keeps,
//! per conversation, the start of the history window used last time so the prompt prefix stays
//! stable between requests; with a state directory the start is persisted (`store::windows`:
//! one append-only record journal per agent), so the prefix survives restarts. It maps model outcomes:
//! blocked or empty answers are silence (logged with the reason), transient errors are retried
//! by the task machinery, permanent ones drop the plan. Called by the `received` handler via
//! [`Planner`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::adapters::llm::provider;
use crate::adapters::llm::usage::{self, CallKind, UsageMeter};
use crate::adapters::store::windows::Remembered;
use crate::adapters::store::{self, StateDir};
use crate::core::blocks::{self, ParseOptions};
use crate::core::llm::LlmChoice;
use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::model::{ChatId, MessageId};
use crate::core::plan::{Action, PlanError, PlanRequest};
use crate::core::prompt;
use crate::core::summaries;
use crate::core::time::BoxFuture;
use crate::ports::llm::Llm;
use crate::ports::planner::{Planner, ScheduleRequest, SummaryRequest};

/// Settings of the LLM planner.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmPlannerConfig {
    /// Provider (and model) for personas that name none (`--llm`, `--model`).
    pub default_llm: LlmChoice,
    pub temperature: Option<f32>,
    pub max_output_tokens: Option<u32>,
    /// Most tasks taken from one reply.
    pub max_tasks: usize,
    /// Most history messages sent.
    pub history_size: usize,
    /// The model's context, in tokens (`--context-tokens`): each prompt is fitted to it, less
    /// the answer's reserve (see `core::prompt::budget`). `None`: no fitting.
    pub context_tokens: Option<u32>,
    /// Ask for structured output (`--plan-format json`): the planning request carries the task
    /// schema (`blocks::plan_schema`), the summary call the summary's (`summaries::schema`)
    /// and the schedule call the day's (`presence::schema`), for a route that enforces them
    /// while decoding.
    pub json_plans: bool,
    /// Providers whose routes plan in JSON whatever `json_plans` says (their model is set so
    /// in the environment: `<PROVIDER>_PLAN_FORMAT=json`, `Router::json_plan_providers`).
    pub json_providers: std::collections::BTreeSet<crate::core::llm::ProviderKind>,
}

impl Default for LlmPlannerConfig {
    fn default() -> Self {
        LlmPlannerConfig {
            default_llm: LlmChoice::default(),
            temperature: None,
            max_output_tokens: None,
            max_tasks: 12,
            history_size: 500,
            context_tokens: None,
            json_plans: false,
            json_providers: std::collections::BTreeSet::new(),
        }
    }
}

/// The LLM stack from the environment: every provider the environment configures behind the
/// [`provider::Router`], wrapped in the one retry policy (on `clock`). The router is returned
/// too, to check providers at start-up. Shared by the planner and the media pipeline.
pub(crate) fn llm_from_env(
    retry: crate::adapters::llm::retry::RetryConfig,
    clock: crate::ports::clock::SharedClock,
) -> (Arc<dyn Llm>, Arc<provider::Router>) {
    llm_from_lookup(|name| std::env::var(name).ok(), retry, clock)
}

/// As [`llm_from_env`], with settings and keys looked up through `lookup` (the daemon adds
/// systemd's credentials to the environment this way).
pub(crate) fn llm_from_lookup(
    lookup: impl Fn(&str) -> Option<String>,
    retry: crate::adapters::llm::retry::RetryConfig,
    clock: crate::ports::clock::SharedClock,
) -> (Arc<dyn Llm>, Arc<provider::Router>) {
    let router = Arc::new(provider::Router::from_lookup(lookup, retry.request_timeout));
    let llm = crate::adapters::llm::retry::RetryingLlm::new(
        Arc::clone(&router) as Arc<dyn Llm>,
        retry,
        clock,
    );
    // Named outside the retry policy, so its lines name the model id, not the provider.
    let named = provider::Named::new(Arc::clone(&router), Arc::new(llm));
    (Arc::new(named), router)
}

/// Plans replies with an LLM.
pub struct LlmPlanner {
    llm: Arc<dyn Llm>,
    config: LlmPlannerConfig,
    windows: Mutex<HashMap<(String, ChatId), Option<MessageId>>>,
    records: Option<Arc<store::windows::WindowRecords>>,
    /// Trips to the blocking pool that wrote window records.
    window_writes: AtomicU64,
    usage: Option<Arc<UsageMeter>>,
    /// Summary calls per agent and (UTC) day, for the daily cap.
    summary_calls: Mutex<HashMap<(String, jiff::civil::Date), u32>>,
}

impl LlmPlanner {
    pub fn new(llm: Arc<dyn Llm>, config: LlmPlannerConfig) -> LlmPlanner {
        LlmPlanner {
            llm,
            config,
            windows: Mutex::new(HashMap::new()),
            records: None,
            window_writes: AtomicU64::new(0),
            usage: None,
            summary_calls: Mutex::new(HashMap::new()),
        }
    }

    /// Persists each chat's window start under `state` (`store::windows`, read back after
    /// a restart), each new one written on a trip to the blocking pool of its own.
    pub fn with_state(self, state: StateDir) -> LlmPlanner {
        self.with_window_records(Arc::new(store::windows::WindowRecords::new(state)))
    }

    /// Persists each chat's window start in `records`: the composition root gives the same
    /// records to the runtime's store, which writes them behind its batches
    /// (`GraphStore::with_window_records`).
    pub fn with_window_records(
        mut self,
        records: Arc<store::windows::WindowRecords>,
    ) -> LlmPlanner {
        self.records = Some(records);
        self
    }

    /// How many trips to the blocking pool writing window records took.
    pub fn window_writes(&self) -> u64 {
        self.window_writes.load(Ordering::Relaxed)
    }

    /// How many window starts were read on the blocking pool (`WindowRecords::get`).
    pub fn window_reads(&self) -> u64 {
        self.records.as_ref().map_or(0, |r| r.gets())
    }

    /// Sums token usage in `meter` (flushed to the state directory after each request).
    pub fn with_usage(mut self, meter: Arc<UsageMeter>) -> LlmPlanner {
        self.usage = Some(meter);
        self
    }

    fn cached_window(&self, key: &(String, ChatId)) -> Option<Option<MessageId>> {
        self.windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
    }

    /// The remembered window start: from memory, else from the agent's window records.
    async fn window(&self, key: &(String, ChatId)) -> Option<MessageId> {
        if let Some(known) = self.cached_window(key) {
            return known;
        }
        let records = self.records.clone()?;
        let (agent, chat) = key.clone();
        // A new chat of an agent whose records were read is answered without a file.
        let start = match records.known(&agent, chat) {
            Some(start) => start,
            None => tokio::task::spawn_blocking(move || records.get(&agent, chat))
                .await
                .unwrap_or(None),
        };
        self.windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), start);
        start
    }

    async fn remember_window(&self, key: (String, ChatId), start: Option<MessageId>) {
        let before = self
            .windows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), start);
        if before == Some(start) {
            return;
        }
        let Some(records) = self.records.clone() else {
            return;
        };
        let (agent, chat) = key;
        let remembered = records.remember(&agent, chat, start);
        if remembered == Remembered::Done {
            return;
        }
        self.window_writes.fetch_add(1, Ordering::Relaxed);
        let written = tokio::task::spawn_blocking(move || {
            match remembered {
                Remembered::Note => records.note(&agent, chat, start),
                _ => records.flush(),
            }
            .map_err(|e| (agent, chat, e))
        })
        .await;
        if let Ok(Err((agent, chat, e))) = written {
            tracing::warn!(agent = %agent, chat = %chat, error = %e, "window record not saved");
        }
    }

    /// The route (`provider:model`) of a persona's requests.
    pub fn route(&self, persona: &crate::core::persona::Persona) -> String {
        crate::core::llm::persona_choice(
            persona.llm.as_deref(),
            persona.llm_model.as_deref(),
            &self.config.default_llm,
        )
        .unwrap_or_else(|_| self.config.default_llm.clone())
        .route()
    }

    /// Whether `persona`'s route is asked for structured output (`--plan-format json`, or its
    /// provider set to it).
    pub fn plans_in_json(&self, persona: &crate::core::persona::Persona) -> bool {
        self.config.json_plans
            || crate::core::llm::resolve(&self.route(persona))
                .is_ok_and(|c| self.config.json_providers.contains(&c.provider))
    }

    /// Builds the request for a planning step (public for tests of the prompt layout), given
    /// the window start remembered for the chat.
    pub(crate) fn request_with_window(
        &self,
        req: &PlanRequest<'_>,
        window_start: Option<MessageId>,
    ) -> (LlmRequest, Option<MessageId>) {
        let budget = self.config.context_tokens.map(|context| {
            let reserve = self
                .config
                .max_output_tokens
                .unwrap_or(crate::adapters::llm::openai::LOCAL_MAX_OUTPUT_TOKENS);
            context.saturating_sub(reserve).max(256) as usize
        });
        let (built, fitted) =
            prompt::build_within(req, self.config.history_size, window_start, budget);
        tracing::debug!(
            agent = %req.persona.name,
            chat = %req.chat.id,
            prompt_tokens_estimated = fitted.tokens,
            budget = budget.unwrap_or(0),
            turns_dropped = fitted.turns_dropped,
            memory_dropped = fitted.memory_dropped,
            turns_cut = fitted.turns_cut,
            "planning prompt"
        );
        let (system, response_schema) = if self.plans_in_json(req.persona) {
            let mut schema = blocks::plan_schema(
                self.config.max_tasks,
                req.persona.allow_block,
                req.persona.allow_clear_conversation,
                voice_allowed(req),
                req.moment.schedule.is_some(),
            );
            if !req.persona.album.is_empty() {
                schema = blocks::with_send_media(schema);
            }
            let mut system = format!("{}\n\n{}", built.system, blocks::JSON_PLAN_INSTRUCTIONS);
            // Offered only to a persona with `# Allow Retrieve`.
            if req.persona.allow_retrieve {
                blocks::offer_retrieve(&mut schema);
                system = format!("{system} {}", blocks::RETRIEVE_JSON_INSTRUCTIONS);
            }
            (system, Some(schema))
        } else {
            (built.system, None)
        };
        (
            LlmRequest {
                model: self.route(req.persona),
                system,
                turns: built.turns,
                temperature: self.config.temperature,
                max_output_tokens: self.config.max_output_tokens,
                response_schema,
            },
            built.window_start,
        )
    }

    /// Builds the request for a planning step with the window remembered in memory.
    pub fn request(&self, req: &PlanRequest<'_>) -> (LlmRequest, Option<MessageId>) {
        let key = (req.persona.name.clone(), req.chat.id);
        self.request_with_window(req, self.cached_window(&key).flatten())
    }

    fn parse(&self, req: &PlanRequest<'_>, text: &str) -> Vec<Action> {
        let known: HashSet<MessageId> = req.history.iter().map(|m| m.id).collect();
        let (default_person, known_people) = people_of(req);
        let opts = ParseOptions {
            default_person,
            known_people: Some(known_people),
            group: !req.chat.kind.is_direct(),
            max_tasks: self.config.max_tasks,
            allow_clear_conversation: req.persona.allow_clear_conversation,
            allow_block: req.persona.allow_block,
            allow_retrieve: req.persona.allow_retrieve,
            allow_voice: voice_allowed(req),
            allow_schedule: req.moment.schedule.is_some(),
            default_sticker_set: req.persona.sticker_sets.first().cloned(),
            known_messages: Some(known),
            speakers: Some(speakers_of(req)),
            ..ParseOptions::default()
        };
        tracing::debug!(agent = %req.persona.name, chat = %req.chat.id, answer = %text, "raw model answer");
        let parsed = blocks::parse_reply(text, &opts);
        for w in &parsed.warnings {
            tracing::warn!(agent = %req.persona.name, chat = %req.chat.id, "model reply: {w}");
        }
        if parsed.scaffolding_only > 0 {
            metrics::counter!("personad_replies_dropped_total", "reason" => "scaffolding_only")
                .increment(parsed.scaffolding_only as u64);
            tracing::warn!(event = "reply_scaffolding_only", agent = %req.persona.name, chat = %req.chat.id, sends = parsed.scaffolding_only, "the model's answer held only the prompt's scaffolding: nothing sent for it");
        }
        let mut actions = parsed.actions;
        for a in &mut actions {
            if let Action::Remember {
                about,
                name,
                message,
                ..
            } = a
            {
                *message = req.target;
                *name = req
                    .history
                    .iter()
                    .find(|m| m.sender.id == *about && !m.outgoing)
                    .map(|m| m.sender.name.clone())
                    .or_else(|| (req.chat.id.0 == *about).then(|| req.chat.title.clone()));
            } else if let Action::Note { message, .. } = a {
                *message = req.target;
            }
        }
        // In a group, the first message answers the message that triggered the plan unless
        // the model chose otherwise, so people can tell what it responds to.
        if !req.chat.kind.is_direct()
            && let Some(target) = req.target
            && req.quote
            && let Some(first) = actions.iter_mut().find(|a| {
                matches!(
                    a,
                    Action::Send { .. }
                        | Action::Sticker { .. }
                        | Action::Voice { .. }
                        | Action::SendMedia { .. }
                )
            })
        {
            match first {
                Action::Send { reply_to, .. }
                | Action::Sticker { reply_to, .. }
                | Action::Voice { reply_to, .. }
                | Action::SendMedia { reply_to, .. } => {
                    reply_to.get_or_insert(target);
                }
                _ => {}
            }
        }
        actions
    }
}

/// Whether this plan may carry a voice note: the persona's `# Voice` allows it for the message
/// answered (a voice note, for `to voice notes`).
fn voice_allowed(req: &PlanRequest<'_>) -> bool {
    let answers_voice = req.target.is_some_and(|t| {
        req.history.iter().any(|m| {
            m.id == t
                && m.media
                    .as_ref()
                    .is_some_and(|media| media.kind == crate::core::model::MediaKind::Voice)
        })
    });
    req.persona.voice.allows(answers_voice)
}

/// Who speaks in the chat: the persona (name and nicknames) and the senders of the history.
fn speakers_of(req: &PlanRequest<'_>) -> blocks::Speakers {
    let mut persona = vec![req.persona.name.clone()];
    persona.extend(req.persona.group.nicknames.iter().cloned());
    let mut others: Vec<String> = Vec::new();
    // A full name and its first word: "Bob Stone" may be written as "Bob:".
    let names = req
        .history
        .iter()
        .filter(|m| !m.outgoing)
        .flat_map(|m| {
            let full = m.sender.name.trim();
            [
                Some(full),
                full.split_whitespace().next().filter(|f| f.len() > 1),
            ]
        })
        .flatten();
    for name in names {
        if !name.is_empty()
            && !persona.iter().any(|p| p.eq_ignore_ascii_case(name))
            && !others.iter().any(|o| o == name)
        {
            others.push(name.to_string());
        }
    }
    if req.chat.kind.is_direct() && !req.chat.title.trim().is_empty() {
        let title = req.chat.title.trim().to_string();
        if !others.contains(&title) && !persona.iter().any(|p| p.eq_ignore_ascii_case(&title)) {
            others.push(title);
        }
    }
    blocks::Speakers { persona, others }
}

/// Whom a `remember` is about by default (the sender of the message answered; in a direct
/// chat, the other person) and whom it may name (the people of the chat's history).
fn people_of(req: &PlanRequest<'_>) -> (Option<i64>, HashSet<i64>) {
    let mut known: HashSet<i64> = req
        .history
        .iter()
        .filter(|m| !m.outgoing)
        .map(|m| m.sender.id)
        .collect();
    let direct = req.chat.kind.is_direct().then_some(req.chat.id.0);
    known.extend(direct);
    let answered = req
        .target
        .and_then(|t| req.history.iter().find(|m| m.id == t && !m.outgoing))
        .map(|m| m.sender.id);
    (answered.or(direct), known)
}

impl LlmPlanner {
    /// Counts one summary call of `agent` today; `false` past the daily cap.
    fn take_summary_call(&self, agent: &str, now: jiff::Timestamp) -> bool {
        let day = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        let mut calls = self
            .summary_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.retain(|(_, d), _| *d == day);
        let n = calls.entry((agent.to_string(), day)).or_default();
        if *n >= summaries::CALLS_PER_DAY {
            return false;
        }
        *n += 1;
        true
    }

    /// One LLM call of `kind` inside the usage scope of `agent` and `chat`; the totals are
    /// saved after when due.
    async fn metered(
        &self,
        agent: &str,
        chat: ChatId,
        kind: CallKind,
        request: &LlmRequest,
    ) -> Result<LlmOutcome, crate::ports::llm::LlmError> {
        usage::metered(
            agent,
            &chat.to_string(),
            kind,
            self.usage.as_ref(),
            self.llm.generate(request),
        )
        .await
    }

    /// The summary call's request: the standing instructions, then one turn with the
    /// summaries so far and the messages to summarize.
    pub(crate) fn summary_request(&self, req: &SummaryRequest<'_>) -> LlmRequest {
        let tz = req
            .persona
            .timezone
            .clone()
            .unwrap_or(jiff::tz::TimeZone::UTC);
        let (first, last) = match (req.messages.first(), req.messages.last()) {
            (Some(a), Some(b)) => (a.id, b.id),
            _ => (MessageId(0), MessageId(0)),
        };
        let mut text = String::from("Summaries so far:\n");
        text.push_str(if req.earlier.trim().is_empty() {
            "(none)\n"
        } else {
            req.earlier
        });
        text.push_str(&format!("\nMessages {first}–{last}:\n\n"));
        for m in req.messages {
            for part in prompt::message_turn(m, &tz, req.media).parts {
                if let crate::core::llm::Part::Text(t) = part {
                    text.push_str(&t);
                    text.push_str("\n\n");
                }
            }
        }
        text.push_str(&format!("Summarize messages {first}–{last}."));
        let mut system = format!(
            "{}\nThe account is {}'s; the chat is {:?}.",
            summaries::INSTRUCTIONS,
            req.persona.name,
            req.chat.title
        );
        // A route held to schemas (`--plan-format json`) gets the summary's schema too.
        let response_schema = self.plans_in_json(req.persona).then(|| {
            system.push_str("\n\n");
            system.push_str(summaries::JSON_INSTRUCTIONS);
            summaries::schema()
        });
        LlmRequest {
            model: self.route(req.persona),
            system,
            turns: vec![crate::core::llm::Turn {
                role: crate::core::llm::Role::User,
                parts: vec![crate::core::llm::Part::Text(text)],
            }],
            temperature: self.config.temperature,
            max_output_tokens: self.config.max_output_tokens,
            response_schema,
        }
    }
}

impl Planner for LlmPlanner {
    fn schedule<'a>(
        &'a self,
        req: ScheduleRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<String>, PlanError>> {
        Box::pin(async move {
            use crate::core::presence;
            let mut system = format!("{}\nYou are {}.", presence::INSTRUCTIONS, req.persona.name);
            // A route held to schemas (`--plan-format json`) gets the day's schema too; its
            // JSON answer becomes the day's lines, checked like any answer.
            let response_schema = self.plans_in_json(req.persona).then(|| {
                system.push_str("\n\n");
                system.push_str(presence::JSON_INSTRUCTIONS);
                presence::schema()
            });
            let request = LlmRequest {
                model: self.route(req.persona),
                system,
                turns: vec![crate::core::llm::Turn {
                    role: crate::core::llm::Role::User,
                    parts: vec![crate::core::llm::Part::Text(
                        crate::core::presence::request_text(
                            req.prose, req.date, req.zone, req.recent,
                        ),
                    )],
                }],
                temperature: self.config.temperature,
                max_output_tokens: self.config.max_output_tokens,
                response_schema,
            };
            // Counted under chat 0: the call belongs to no chat.
            let kind = CallKind::Schedule;
            match self
                .metered(&req.persona.name, ChatId(0), kind, &request)
                .await
            {
                Ok(LlmOutcome::Text(text)) => {
                    Ok(Some(presence::lines_from_json(&text).unwrap_or(text)))
                }
                Ok(_) => Err(PlanError::NoAnswer("schedule")),
                Err(e) => Err(PlanError::Llm(e)),
            }
        })
    }

    fn summarize<'a>(
        &'a self,
        req: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<summaries::Draft>, PlanError>> {
        Box::pin(async move {
            if !self.take_summary_call(&req.persona.name, req.now) {
                tracing::warn!(event = "summary_cap_reached", agent = %req.persona.name, cap = summaries::CALLS_PER_DAY, "daily cap on summary calls reached: no summary until tomorrow");
                return Ok(None);
            }
            let request = self.summary_request(&req);
            let kind = CallKind::Summary;
            match self
                .metered(&req.persona.name, req.chat.id, kind, &request)
                .await
            {
                Ok(LlmOutcome::Text(text)) => Ok(summaries::parse_answer(&text)),
                Ok(_) => Ok(None),
                Err(e) => Err(PlanError::Llm(e)),
            }
        })
    }

    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        Box::pin(async move {
            let key = (req.persona.name.clone(), req.chat.id);
            let remembered = self.window(&key).await;
            let (request, window) = self.request_with_window(&req, remembered);
            let result = self
                .metered(&req.persona.name, req.chat.id, CallKind::Plan, &request)
                .await;
            let outcome = result?;
            self.remember_window(key, window).await;
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
