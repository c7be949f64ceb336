//! The group gate: runs the decision pipeline for one agent's inbound messages in front of
//! `RuntimeHandle::push_inbound`. Direct chats pass straight through. For a group message it
//! decides at once (no I/O) what the prefilter, explicit address and mode say; when only the
//! classifier can tell, the message joins the chat's pending batch and a per-chat worker
//! (at most one per chat) waits for the same quiet period as planning, then makes one
//! classifier call for the whole batch, off the event path and under a timeout; any failure
//! means not triggered (fail closed). It also sends reaction-only answers (checked against
//! the chat's allowed reactions, cached for an hour), delays explicit answers until the
//! cooldown ends, and records every decision (debug log `group_decision`, plus an optional
//! observer for the playground). Called by the playground and the MTProto pump.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use crate::adapters::classifier::{
    Classifier, ClassifierInput, HISTORY_SMART, HISTORY_TALKATIVE, Scores,
};
use crate::core::group::decide::{
    self, ChatState, Context, Decision, Identity, Inbound, Stage, Verdict,
};
use crate::core::group::settings::{DEFAULT_CLASSIFIER_MODEL, TriggerMode};
use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::core::persona::Persona;
use crate::ports::clock::{self, SharedClock};
use crate::ports::telegram::{Telegram, same_reaction};
use crate::runtime::RuntimeHandle;

/// How long a chat's allowed reactions are cached.
const REACTIONS_TTL: Duration = Duration::from_secs(3600);
/// A chat's allowed reactions and when they were read.
type CachedReactions = (Timestamp, Option<Vec<String>>);

/// Messages kept per chat for the classifier's context.
const CONTEXT_KEPT: usize = 32;

/// One decision, as shown to observers (the playground's `decision` events).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionEvent {
    pub chat: ChatId,
    pub message_id: MessageId,
    pub stage: Stage,
    pub triggered: bool,
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub react: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<Scores>,
}

/// Message ids whose plan must not quote the trigger (the classifier's impulse was low).
/// Read by the LLM planner, which otherwise quotes a group's trigger message.
#[derive(Debug, Default)]
pub struct QuoteBook {
    no_quote: Mutex<VecDeque<(ChatId, MessageId)>>,
}

impl QuoteBook {
    pub fn new() -> Arc<QuoteBook> {
        Arc::new(QuoteBook::default())
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(ChatId, MessageId)>> {
        self.no_quote.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records whether the plan answering `message` should quote it.
    pub fn set(&self, chat: ChatId, message: MessageId, quote: bool) {
        let mut q = self.lock();
        q.retain(|e| *e != (chat, message));
        if !quote {
            q.push_back((chat, message));
            while q.len() > 1000 {
                q.pop_front();
            }
        }
    }

    /// Whether the plan answering `message` should quote it (yes unless told otherwise).
    pub fn should_quote(&self, chat: ChatId, message: MessageId) -> bool {
        !self.lock().contains(&(chat, message))
    }
}

#[derive(Default)]
struct ChatGate {
    state: ChatState,
    /// Recent messages (ours included), oldest first: the classifier's context.
    context: VecDeque<Message>,
    /// Messages waiting for the classifier.
    pending: Vec<Message>,
    last_arrival: Option<Timestamp>,
    worker: bool,
    reacted: HashSet<MessageId>,
}

/// What the gate knows of its persona: replaced whole when the runtime's persona for the
/// agent changes (a hot reload), so new names and nicknames address the agent at once.
struct Profile {
    persona: Arc<Persona>,
    identity: Identity,
    classifier_model: String,
}

impl Profile {
    fn new(persona: Arc<Persona>, identity: Identity, command_model: Option<&str>) -> Profile {
        let classifier_model = persona
            .group
            .classifier_model
            .as_deref()
            .or(command_model)
            .unwrap_or(DEFAULT_CLASSIFIER_MODEL)
            .to_string();
        Profile {
            persona,
            identity,
            classifier_model,
        }
    }
}

struct Inner {
    agent: String,
    profile: Mutex<Arc<Profile>>,
    /// The command's classifier model (the persona's heading wins).
    command_model: Option<String>,
    telegram: Arc<dyn Telegram>,
    runtime: RuntimeHandle,
    classifier: Option<Classifier>,
    clock: SharedClock,
    quiet: Duration,
    peers: Vec<i64>,
    modes: Mutex<HashMap<ChatId, TriggerMode>>,
    chats: Mutex<HashMap<ChatId, ChatGate>>,
    reactions: Mutex<HashMap<ChatId, CachedReactions>>,
    observer: Mutex<Option<mpsc::UnboundedSender<DecisionEvent>>>,
    quotes: Arc<QuoteBook>,
    busy: watch::Sender<usize>,
    calls: std::sync::atomic::AtomicUsize,
}

/// The gate of one agent. Cheap to clone.
#[derive(Clone)]
pub struct GroupGate {
    inner: Arc<Inner>,
}

/// How a gate is built.
pub struct GateConfig {
    pub agent: String,
    pub persona: Arc<Persona>,
    pub identity: Identity,
    pub telegram: Arc<dyn Telegram>,
    pub runtime: RuntimeHandle,
    /// `None`: every message that needs the classifier stays history.
    pub classifier: Option<Classifier>,
    /// The command's classifier model (the persona's heading wins).
    pub classifier_model: Option<String>,
    pub clock: SharedClock,
    /// The quiet period before a classifier call (the planning debounce).
    pub quiet: Duration,
    /// User ids of the daemon's other personas.
    pub peers: Vec<i64>,
    /// Per-chat mode overrides given by the caller (the playground's `--mode`); those in the
    /// agent's state are read from the runtime handle ([`RuntimeHandle::group_mode`]).
    pub modes: HashMap<ChatId, TriggerMode>,
    pub quotes: Arc<QuoteBook>,
}

/// The persona's identity for explicit addressing.
pub fn identity_for(persona: &Persona, user_id: i64, username: Option<String>) -> Identity {
    let mut names = vec![persona.name.clone()];
    names.extend(persona.group.nicknames.iter().cloned());
    Identity {
        user_id,
        username,
        names,
    }
}

/// The one-line description the classifier gets.
pub fn description_for(persona: &Persona) -> String {
    persona.group.description.clone().unwrap_or_else(|| {
        persona
            .instructions
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("")
            .chars()
            .take(200)
            .collect()
    })
}

/// Logs one decision under the stable event name `group_decision`.
pub fn log_decision(agent: &str, chat: ChatId, message: MessageId, d: &Decision) {
    tracing::debug!(
        agent = %agent,
        chat = %chat,
        message_id = message.0,
        stage = d.stage.as_str(),
        triggered = d.triggered(),
        reason = d.reason,
        "group_decision"
    );
}

impl GroupGate {
    pub fn new(cfg: GateConfig) -> GroupGate {
        let profile = Profile::new(cfg.persona, cfg.identity, cfg.classifier_model.as_deref());
        GroupGate {
            inner: Arc::new(Inner {
                agent: cfg.agent,
                profile: Mutex::new(Arc::new(profile)),
                command_model: cfg.classifier_model,
                telegram: cfg.telegram,
                runtime: cfg.runtime,
                classifier: cfg.classifier,
                clock: cfg.clock,
                quiet: cfg.quiet,
                peers: cfg.peers,
                modes: Mutex::new(cfg.modes),
                chats: Mutex::new(HashMap::new()),
                reactions: Mutex::new(HashMap::new()),
                observer: Mutex::new(None),
                quotes: cfg.quotes,
                busy: watch::Sender::new(0),
                calls: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// Receives every decision as it is made.
    pub fn observe(&self) -> mpsc::UnboundedReceiver<DecisionEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self
            .inner
            .observer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(tx);
        rx
    }

    /// Stops sending decisions to the observer (its channel then ends).
    pub fn stop_observing(&self) {
        *self
            .inner
            .observer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Sets (or clears) a chat's mode override.
    pub fn set_chat_mode(&self, chat: ChatId, mode: Option<TriggerMode>) {
        let mut m = self
            .inner
            .modes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match mode {
            Some(mode) => m.insert(chat, mode),
            None => m.remove(&chat),
        };
    }

    /// Classifier calls made so far.
    pub fn classifier_calls(&self) -> usize {
        self.inner.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Resolves once no classifier batch, delayed answer or reaction is pending.
    pub async fn wait_idle(&self) {
        let mut rx = self.inner.busy.subscribe();
        while *rx.borrow_and_update() > 0 {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// One of our own messages in a chat (for replies to us and the share of voice).
    pub fn note_own(&self, chat: &Chat, message: &Message) {
        if chat.kind.is_direct() {
            return;
        }
        let mut chats = self.inner.chats();
        let g = chats.entry(chat.id).or_default();
        g.state.record(message, true);
        push_context(&mut g.context, message.clone());
    }

    /// An inbound message from someone else: decides and hands it to the runtime.
    /// `blocked`: the sender is on our blocklist; `callout`: Telegram flagged it as
    /// mentioning or replying to us.
    pub fn on_inbound(&self, chat: Chat, message: Message, blocked: bool, callout: bool) {
        let inner = &self.inner;
        if chat.kind.is_direct() {
            if !blocked {
                inner
                    .runtime
                    .push_inbound(&inner.agent, chat, message, true);
            }
            return;
        }
        let now = inner.clock.now();
        let profile = inner.profile();
        let mode = inner.mode_for(chat.id, &profile);
        let decision = {
            let mut chats = inner.chats();
            let g = chats.entry(chat.id).or_default();
            let ctx = Context {
                identity: &profile.identity,
                settings: &profile.persona.group,
                mode,
                peers: &inner.peers,
            };
            let d = decide::decide(
                &ctx,
                &g.state,
                &Inbound {
                    message: &message,
                    blocked,
                    callout,
                },
                now,
            );
            if d.verdict != Verdict::Drop {
                g.state.record(&message, false);
                push_context(&mut g.context, message.clone());
            }
            if let Verdict::Trigger { at, .. } = d.verdict {
                let peer = inner
                    .peers
                    .contains(&message.sender.id)
                    .then_some(message.sender.id);
                g.state.record_plan(at, peer);
            }
            if d.verdict == Verdict::Classify {
                g.pending.push(message.clone());
                g.last_arrival = Some(now);
            }
            d
        };
        match decision.verdict.clone() {
            Verdict::Drop => self.emit(chat.id, message.id, &decision),
            Verdict::History => {
                self.emit(chat.id, message.id, &decision);
                inner
                    .runtime
                    .push_inbound(&inner.agent, chat, message, false);
            }
            Verdict::Classify => {
                inner
                    .runtime
                    .push_inbound(&inner.agent, chat.clone(), message, false);
                self.ensure_worker(chat);
            }
            Verdict::Trigger { at, quote } => {
                self.emit(chat.id, message.id, &decision);
                self.trigger(chat, message, at, quote, now);
            }
            Verdict::React { .. } => {}
        }
    }

    fn emit(&self, chat: ChatId, message: MessageId, d: &Decision) {
        log_decision(&self.inner.agent, chat, message, d);
        let react = match &d.verdict {
            Verdict::React { emoji } => Some(emoji.clone()),
            _ => None,
        };
        let event = DecisionEvent {
            chat,
            message_id: message,
            stage: d.stage,
            triggered: d.triggered(),
            reason: d.reason,
            react,
            scores: d.scores.clone(),
        };
        if let Some(tx) = self
            .inner
            .observer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = tx.send(event);
        }
    }

    fn trigger(&self, chat: Chat, message: Message, at: Timestamp, quote: bool, now: Timestamp) {
        let inner = Arc::clone(&self.inner);
        inner.quotes.set(chat.id, message.id, quote);
        if at <= now {
            inner
                .runtime
                .push_inbound(&inner.agent, chat, message, true);
            return;
        }
        tracing::info!(
            agent = %inner.agent,
            chat = %chat.id,
            message_id = message.id.0,
            until = %at,
            "addressed during the group cooldown: the answer waits"
        );
        // Known to the runtime now (history), planned when the cooldown ends.
        inner
            .runtime
            .push_inbound(&inner.agent, chat.clone(), message.clone(), false);
        inner.busy.send_modify(|b| *b += 1);
        let wake = inner.clock.sleep_until(at);
        tokio::spawn(async move {
            let hold = wake.await;
            inner
                .runtime
                .push_inbound(&inner.agent, chat, message, true);
            drop(hold);
            inner.busy.send_modify(|b| *b = b.saturating_sub(1));
        });
    }

    fn ensure_worker(&self, chat: Chat) {
        {
            let mut chats = self.inner.chats();
            let g = chats.entry(chat.id).or_default();
            if g.worker {
                return;
            }
            g.worker = true;
        }
        self.inner.busy.send_modify(|b| *b += 1);
        let gate = self.clone();
        // Registered before this call returns, so virtual time cannot skip the quiet period.
        let first = gate
            .inner
            .clock
            .sleep_until(clock::add(gate.inner.clock.now(), gate.inner.quiet));
        tokio::spawn(async move {
            gate.worker(chat, first).await;
            gate.inner.busy.send_modify(|b| *b = b.saturating_sub(1));
        });
    }

    /// Waits for a quiet period, classifies the batch, acts; repeats while messages came in.
    async fn worker(&self, chat: Chat, first: clock::BoxFuture<'static, clock::Hold>) {
        let inner = &self.inner;
        let mut wake = first;
        loop {
            let hold = wake.await;
            let now = inner.clock.now();
            let (batch, context, state_mode) = {
                let mut chats = inner.chats();
                let g = chats.entry(chat.id).or_default();
                if g.pending.is_empty() {
                    g.worker = false;
                    return;
                }
                let quiet_until = g.last_arrival.map(|t| clock::add(t, inner.quiet));
                if let Some(until) = quiet_until
                    && until > now
                {
                    // More messages came in: wait for quiet again.
                    wake = inner.clock.sleep_until(until);
                    drop(hold);
                    continue;
                }
                let batch = std::mem::take(&mut g.pending);
                let first_new = batch.first().map(|m| m.id);
                let context: Vec<Message> = g
                    .context
                    .iter()
                    .filter(|m| first_new.is_none_or(|f| m.id < f))
                    .cloned()
                    .collect();
                (batch, context, inner.mode_for(chat.id, &inner.profile()))
            };
            let Some(target) = batch.last().cloned() else {
                wake = Box::pin(async { Hold::none() });
                continue;
            };
            // The call runs as a clock-holding task: virtual time stands still while it is in
            // flight, but the client's retry pauses (and so the timeout) can let it move.
            let (scores, hold) = clock::with_task_hold(hold, async {
                let s = self.classify(&chat, &context, &batch, state_mode).await;
                (s, inner.clock.hold())
            })
            .await;
            let now = inner.clock.now();
            let profile = inner.profile();
            let decision = {
                let mut chats = inner.chats();
                let g = chats.entry(chat.id).or_default();
                let ctx = Context {
                    identity: &profile.identity,
                    settings: &profile.persona.group,
                    mode: state_mode,
                    peers: &inner.peers,
                };
                let d = decide::resolve(&ctx, &g.state, &target, scores, now);
                if let Verdict::Trigger { at, .. } = d.verdict {
                    g.state.record_plan(at, None);
                }
                d
            };
            for m in &batch[..batch.len() - 1] {
                let coalesced = Decision {
                    stage: Stage::Classifier,
                    verdict: Verdict::History,
                    reason: "coalesced",
                    scores: None,
                };
                self.emit(chat.id, m.id, &coalesced);
            }
            match decision.verdict.clone() {
                Verdict::Trigger { at, quote } => {
                    self.emit(chat.id, target.id, &decision);
                    self.trigger(chat.clone(), target, at, quote, now);
                }
                Verdict::React { emoji } => {
                    let d = self.react(&chat, &target, &emoji, decision).await;
                    self.emit(chat.id, target.id, &d);
                }
                _ => self.emit(chat.id, target.id, &decision),
            }
            drop(hold);
            wake = Box::pin(async { Hold::none() });
        }
    }

    async fn classify(
        &self,
        chat: &Chat,
        context: &[Message],
        batch: &[Message],
        mode: TriggerMode,
    ) -> Option<Scores> {
        let inner = &self.inner;
        let classifier = inner.classifier.as_ref()?;
        let allowed = self.allowed_reactions(chat.id).await;
        let profile = inner.profile();
        let description = description_for(&profile.persona);
        let input = ClassifierInput {
            model: &profile.classifier_model,
            persona_name: &profile.persona.name,
            description: &description,
            history: context,
            history_size: if mode == TriggerMode::Talkative {
                HISTORY_TALKATIVE
            } else {
                HISTORY_SMART
            },
            new_messages: batch,
            allowed_reactions: allowed.as_deref(),
        };
        inner
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match classifier.classify(&input).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(
                    agent = %inner.agent,
                    chat = %chat.id,
                    messages = batch.len(),
                    error = %e,
                    "group classifier failed: not answering these messages"
                );
                None
            }
        }
    }

    /// The chat's allowed reactions, cached for an hour; `None` allows any.
    async fn allowed_reactions(&self, chat: ChatId) -> Option<Vec<String>> {
        let now = self.inner.clock.now();
        if let Some((at, list)) = self
            .inner
            .reactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&chat)
            && clock::add(*at, REACTIONS_TTL) > now
        {
            return list.clone();
        }
        let list = match self.inner.telegram.allowed_reactions(chat).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(chat = %chat, error = %e, "allowed reactions unknown");
                None
            }
        };
        self.inner
            .reactions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(chat, (now, list.clone()));
        list
    }

    /// Sends a reaction-only answer, unless the chat does not allow the emoji or we already
    /// reacted to the message.
    async fn react(&self, chat: &Chat, target: &Message, emoji: &str, d: Decision) -> Decision {
        let inner = &self.inner;
        if let Some(allowed) = self.allowed_reactions(chat.id).await
            && !allowed.iter().any(|a| same_reaction(a, emoji))
        {
            tracing::info!(agent = %inner.agent, chat = %chat.id, emoji = %emoji, "reaction not allowed in this chat: dropped");
            return Decision {
                stage: Stage::Classifier,
                verdict: Verdict::History,
                reason: "reaction_not_allowed",
                ..d
            };
        }
        if !inner
            .chats()
            .entry(chat.id)
            .or_default()
            .reacted
            .insert(target.id)
        {
            return Decision {
                verdict: Verdict::History,
                reason: "already_reacted",
                ..d
            };
        }
        if let Err(e) = inner.telegram.react(chat.id, target.id, emoji).await {
            tracing::warn!(agent = %inner.agent, chat = %chat.id, error = %e, "reaction failed");
        }
        d
    }
}

use crate::ports::clock::Hold;

impl Inner {
    fn chats(&self) -> MutexGuard<'_, HashMap<ChatId, ChatGate>> {
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The chat's mode: an override given to the gate (`/mode`, the playground's `--mode`),
    /// else the one in the agent's state as the runtime holds it, else the persona's.
    fn mode_for(&self, chat: ChatId, profile: &Profile) -> TriggerMode {
        let own = self
            .modes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&chat)
            .copied();
        own.or_else(|| self.runtime.group_mode(&self.agent, chat))
            .unwrap_or(profile.persona.group.mode)
    }

    /// The current profile: rebuilt from the runtime's persona for this agent when that is no
    /// longer the one the profile was made from (a reload), keeping our user id and @username.
    fn profile(&self) -> Arc<Profile> {
        let mut current = self.profile.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(persona) = self.runtime.persona(&self.agent)
            && !Arc::ptr_eq(&persona, &current.persona)
        {
            let identity = identity_for(
                &persona,
                current.identity.user_id,
                current.identity.username.clone(),
            );
            if identity.names != current.identity.names {
                tracing::info!(
                    event = "group_names_reloaded",
                    agent = %self.agent,
                    names = ?identity.names,
                    "group addressing follows the reloaded persona"
                );
            }
            *current = Arc::new(Profile::new(
                persona,
                identity,
                self.command_model.as_deref(),
            ));
        }
        Arc::clone(&current)
    }
}

fn push_context(context: &mut VecDeque<Message>, m: Message) {
    context.push_back(m);
    while context.len() > CONTEXT_KEPT {
        context.pop_front();
    }
}
