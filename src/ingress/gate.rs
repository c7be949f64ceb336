//! The group gate of one agent: the group step of the admission chain (`ingress::chain`).
//! Direct chats never reach it. For a group message it decides at once, without I/O, what
//! the prefilter, explicit address and mode say ([`GroupGate::admit`]); a message only the
//! classifier can judge joins the chat's pending batch and becomes a `classify` task of the
//! conversation's graph, which the runtime starts after the quiet period and which calls
//! [`GroupGate::classify`] (through `ports::groups`): one classifier call for the whole
//! batch under the classifier's timeout, failing closed. The answer (a plan, a reaction-only
//! answer checked against the chat's allowed reactions, cached for an hour, or nothing) goes
//! back to the runtime as graph work. It records every decision (debug log
//! `group_decision`, plus an optional observer for the playground). It never sends, sleeps
//! or pushes into the queue itself.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::core::admission::{Admission, GroupOutcome};
use crate::core::group::classifier::{ClassifierInput, HISTORY_SMART, HISTORY_TALKATIVE, Scores};
use crate::core::group::decide::{
    self, ChatState, Context, Decision, Identity, Inbound, Stage, Verdict,
};
use crate::core::group::settings::{DEFAULT_CLASSIFIER_MODEL, TriggerMode};
use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::core::persona::Persona;
use crate::ingress::admit::Admit;
use crate::ingress::classifier::Classifier;
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

#[derive(Default)]
struct ChatGate {
    state: ChatState,
    /// Recent messages (ours included), oldest first: the classifier's context.
    context: VecDeque<Message>,
    /// Messages waiting for the classifier.
    pending: Vec<Message>,
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
    /// What the pure pipeline knows around a message of a chat in `mode`.
    fn context<'a>(&'a self, mode: TriggerMode, peers: &'a [i64]) -> Context<'a> {
        Context {
            identity: &self.identity,
            settings: &self.persona.group,
            mode,
            peers,
        }
    }

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
    peers: Peers,
    /// Session overrides given by the caller (never stored).
    modes: HashMap<ChatId, TriggerMode>,
    chats: Mutex<HashMap<ChatId, ChatGate>>,
    reactions: Mutex<HashMap<ChatId, CachedReactions>>,
    observer: Mutex<Option<mpsc::UnboundedSender<DecisionEvent>>>,
    calls: std::sync::atomic::AtomicUsize,
}

/// The user ids of a daemon's personas, shared by their gates.
pub type Peers = Arc<Mutex<std::collections::BTreeSet<i64>>>;

/// A [`Peers`] set holding `ids`.
pub fn peers(ids: impl IntoIterator<Item = i64>) -> Peers {
    Arc::new(Mutex::new(ids.into_iter().collect()))
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
    /// User ids of the daemon's personas (the agent's own is left out where it is read):
    /// shared, so a persona started later is a peer of those started before it.
    pub peers: Peers,
    /// Per-chat mode overrides for this session only (the playground's `--mode`), never
    /// stored; the owner's (`/mode`) live in the agent's state and are read from the runtime
    /// handle ([`RuntimeHandle::group_mode`]).
    pub modes: HashMap<ChatId, TriggerMode>,
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
pub(crate) fn description_for(persona: &Persona) -> String {
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
pub(crate) fn log_decision(agent: &str, chat: ChatId, message: MessageId, d: &Decision) {
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
                peers: cfg.peers,
                modes: cfg.modes,
                chats: Mutex::new(HashMap::new()),
                reactions: Mutex::new(HashMap::new()),
                observer: Mutex::new(None),
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

    /// Classifier calls made so far.
    pub fn classifier_calls(&self) -> usize {
        self.inner.calls.load(std::sync::atomic::Ordering::Relaxed)
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

    /// The direct-chat step of the admission chain: a message from another persona of this
    /// daemon (the in-memory world lets personas write to each other) is answered within the
    /// same loop guard as in groups (`decide::decide_direct`); past it, it is history. Anyone
    /// else passes.
    pub(crate) fn admit_direct(&self, chat: &Chat, message: &Message) -> Admit {
        let inner = &self.inner;
        let profile = inner.profile();
        let peers = inner.peer_ids(&profile);
        if !peers.contains(&message.sender.id) {
            return Admit::Pass;
        }
        let now = inner.clock.now();
        let decision = {
            let mut chats = inner.chats();
            let g = chats.entry(chat.id).or_default();
            let ctx = profile.context(profile.persona.group.mode, &peers);
            let d = decide::decide_direct(&ctx, &g.state, message, now);
            if d.triggered() {
                g.state.record_plan(now, Some(message.sender.id));
            }
            d
        };
        if decision.triggered() {
            return Admit::Pass;
        }
        self.emit(chat.id, message.id, &decision);
        Admit::As(Admission::History)
    }

    /// The group step of the admission chain for a message from someone else: the pure
    /// decision, and what it means for the queue. `callout`: Telegram flagged it as
    /// mentioning or replying to us.
    pub(crate) fn admit(&self, chat: &Chat, message: &Message, callout: bool) -> Admit {
        let inner = &self.inner;
        let now = inner.clock.now();
        let profile = inner.profile();
        let mode = inner.mode_for(chat.id, &profile);
        let peers = inner.peer_ids(&profile);
        let decision = {
            let mut chats = inner.chats();
            let g = chats.entry(chat.id).or_default();
            let ctx = profile.context(mode, &peers);
            let d = decide::decide(
                &ctx,
                &g.state,
                &Inbound {
                    message,
                    blocked: false,
                    callout,
                },
                now,
            );
            if d.verdict != Verdict::Drop {
                g.state.record(message, false);
                push_context(&mut g.context, message.clone());
            }
            if let Verdict::Trigger { at, .. } = d.verdict {
                let peer = peers
                    .contains(&message.sender.id)
                    .then_some(message.sender.id);
                g.state.record_plan(at, peer);
            }
            if d.verdict == Verdict::Classify {
                g.pending.push(message.clone());
            }
            d
        };
        if decision.verdict != Verdict::Classify {
            self.emit(chat.id, message.id, &decision);
        }
        match decision.verdict {
            Verdict::Drop => Admit::Consumed,
            Verdict::History | Verdict::React { .. } => Admit::As(Admission::History),
            Verdict::Classify => Admit::As(Admission::Classify),
            Verdict::Trigger { at, quote } => {
                if at > now {
                    tracing::info!(
                        agent = %inner.agent,
                        chat = %chat.id,
                        message_id = message.id.0,
                        until = %at,
                        "addressed during the group cooldown: the answer waits"
                    );
                }
                Admit::As(Admission::Plan {
                    quote,
                    at: Some(at),
                })
            }
        }
    }

    fn emit(&self, chat: ChatId, message: MessageId, d: &Decision) {
        log_decision(&self.inner.agent, chat, message, d);
        if d.reason == "loop_guard" {
            tracing::info!(event = "loop_guard", agent = %self.inner.agent, chat = %chat, message_id = message.0, "another persona's message kept as history: the two have answered each other as often as the loop guard allows");
        }
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

    /// The chat's pending batch (up to `newest`) and the context before it. After a
    /// restart the batch is gone from memory: the newest message is read back from the
    /// chat's history, with what precedes it as context.
    async fn batch(&self, chat: &Chat, newest: MessageId) -> (Vec<Message>, Vec<Message>) {
        let inner = &self.inner;
        {
            let mut chats = inner.chats();
            let g = chats.entry(chat.id).or_default();
            let batch: Vec<Message> = g
                .pending
                .iter()
                .filter(|m| m.id <= newest)
                .cloned()
                .collect();
            if !batch.is_empty() {
                let first_new = batch.first().map(|m| m.id);
                let context = g
                    .context
                    .iter()
                    .filter(|m| first_new.is_none_or(|f| m.id < f))
                    .cloned()
                    .collect();
                return (batch, context);
            }
        }
        match inner.telegram.fetch_history(chat.id, CONTEXT_KEPT).await {
            Ok(history) => {
                let (batch, context): (Vec<Message>, Vec<Message>) =
                    history.into_iter().partition(|m| m.id == newest);
                (batch, context)
            }
            Err(e) => {
                tracing::warn!(agent = %inner.agent, chat = %chat.id, error = %e, "group history unavailable: the batch stays history");
                (Vec::new(), Vec::new())
            }
        }
    }

    /// One classifier call for the chat's pending batch whose newest message is `newest`,
    /// and what it decided (the `classify` task's work, through `ports::groups`).
    pub(crate) async fn classify_batch(&self, chat: &Chat, newest: MessageId) -> GroupOutcome {
        let inner = &self.inner;
        let (batch, context) = self.batch(chat, newest).await;
        let Some(target) = batch.last().cloned() else {
            return GroupOutcome::Nothing;
        };
        let mode = inner.mode_for(chat.id, &inner.profile());
        let peers = inner.peer_ids(&inner.profile());
        let scores = self.classify(chat, &context, &batch, mode).await;
        let now = inner.clock.now();
        let profile = inner.profile();
        let decision = {
            let mut chats = inner.chats();
            let g = chats.entry(chat.id).or_default();
            // The batch is settled: what came in since waits for the next call.
            g.pending.retain(|m| m.id > target.id);
            let ctx = profile.context(mode, &peers);
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
                GroupOutcome::Plan {
                    message_id: target.id,
                    quote,
                    at,
                }
            }
            Verdict::React { emoji } => {
                let (d, outcome) = self.react(chat, &target, &emoji, decision).await;
                self.emit(chat.id, target.id, &d);
                outcome
            }
            _ => {
                self.emit(chat.id, target.id, &decision);
                GroupOutcome::Nothing
            }
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
        match classifier.classify_for(&inner.agent, chat.id, &input).await {
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

    /// A reaction-only answer, unless the chat does not allow the emoji or we already
    /// reacted to the message; the `react` task sends it.
    async fn react(
        &self,
        chat: &Chat,
        target: &Message,
        emoji: &str,
        d: Decision,
    ) -> (Decision, GroupOutcome) {
        let inner = &self.inner;
        if let Some(allowed) = self.allowed_reactions(chat.id).await
            && !allowed.iter().any(|a| same_reaction(a, emoji))
        {
            tracing::info!(agent = %inner.agent, chat = %chat.id, emoji = %emoji, "reaction not allowed in this chat: dropped");
            let d = Decision {
                stage: Stage::Classifier,
                verdict: Verdict::History,
                reason: "reaction_not_allowed",
                ..d
            };
            return (d, GroupOutcome::Nothing);
        }
        if !inner
            .chats()
            .entry(chat.id)
            .or_default()
            .reacted
            .insert(target.id)
        {
            let d = Decision {
                verdict: Verdict::History,
                reason: "already_reacted",
                ..d
            };
            return (d, GroupOutcome::Nothing);
        }
        let outcome = GroupOutcome::React {
            message_id: target.id,
            emoji: emoji.to_string(),
        };
        (d, outcome)
    }
}

impl Inner {
    fn chats(&self) -> MutexGuard<'_, HashMap<ChatId, ChatGate>> {
        self.chats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The chat's mode: a session override given to the gate (the playground's `--mode`),
    /// else the owner's (`/mode`) in the agent's state as the runtime holds it, else the
    /// persona's.
    fn mode_for(&self, chat: ChatId, profile: &Profile) -> TriggerMode {
        let own = self.modes.get(&chat).copied();
        own.or_else(|| self.runtime.group_mode(&self.agent, chat))
            .unwrap_or(profile.persona.group.mode)
    }

    /// The other personas' user ids (every peer but us).
    fn peer_ids(&self, profile: &Profile) -> Vec<i64> {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .filter(|p| *p != profile.identity.user_id)
            .collect()
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
