//! [`RuntimeHandle`]: the cloneable front door of the runtime. Telegram pumps, the
//! playground, the daemon's signal handler and tests push events through it and watch the
//! published [`Status`]; nothing here touches graphs or the disk.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use crate::core::admission::{Admission, SenderRule, sender_rule};
use crate::core::group::settings::TriggerMode;
use crate::core::model::{Chat, ChatId, Message};
use crate::core::persona::Persona;
use crate::core::presence::PresenceNow;
use crate::core::scheduler::PresenceChange;
use crate::ports::groups::SharedGroups;
use crate::runtime::queue::{Event, WorkQueue};
use crate::runtime::{Admit, AgentHandle, InboundGate, Status};

type GroupModes = BTreeMap<ChatId, TriggerMode>;

/// What the runtime shows the code in front of it (the group gate), shared by every clone of
/// the handle: the persona each agent was last given (at start or by
/// [`RuntimeHandle::upsert_agent`]), so a hot reload reaches the gate whichever path made it,
/// and each agent's per-chat trigger-mode overrides as the runtime read them from its state
/// (and changed them since), so nobody reads that file a second time.
#[derive(Clone, Default)]
pub(super) struct Published {
    personas: Arc<Mutex<HashMap<String, Arc<Persona>>>>,
    modes: Arc<Mutex<HashMap<String, GroupModes>>>,
    groups: Arc<Mutex<Option<SharedGroups>>>,
    /// Each agent's presence as last announced (agents with a schedule).
    presence: Arc<Mutex<HashMap<String, PresenceReport>>>,
    /// Who watches presence changes (the playground's printer).
    presence_watchers: Arc<Mutex<Vec<tokio::sync::mpsc::UnboundedSender<PresenceEvent>>>>,
    /// Who watches notable events (the playground's printer).
    notable_watchers: Arc<Mutex<Vec<tokio::sync::mpsc::UnboundedSender<NotableEvent>>>>,
}

/// Something the operator should see, and when it happened on the runtime's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotableEvent {
    pub at: jiff::Timestamp,
    pub notable: crate::core::scheduler::Notable,
}

/// An agent's presence as the runtime last announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceReport {
    /// The current activity.
    pub now: PresenceNow,
    /// Asleep until this instant.
    pub asleep_until: Option<jiff::Timestamp>,
}

/// One change of an agent's presence, and when it happened on the runtime's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceEvent {
    pub agent: String,
    pub at: jiff::Timestamp,
    pub change: PresenceChange,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Published {
    pub(super) fn new(personas: impl IntoIterator<Item = Arc<Persona>>) -> Published {
        let map = personas.into_iter().map(|p| (p.name.clone(), p)).collect();
        Published {
            personas: Arc::new(Mutex::new(map)),
            modes: Arc::default(),
            groups: Arc::default(),
            presence: Arc::default(),
            presence_watchers: Arc::default(),
            notable_watchers: Arc::default(),
        }
    }

    /// Forgets an agent's presence (it stopped), or sets a report outright.
    pub(super) fn set_presence(&self, agent: &str, report: Option<PresenceReport>) {
        let mut all = locked(&self.presence);
        match report {
            Some(r) => all.insert(agent.to_string(), r),
            None => all.remove(agent),
        };
    }

    /// Records a presence change and tells the watchers.
    pub(super) fn presence_changed(
        &self,
        agent: &str,
        change: PresenceChange,
        at: jiff::Timestamp,
    ) {
        {
            let mut all = locked(&self.presence);
            match &change {
                PresenceChange::Activity(now) => {
                    let asleep = all.get(agent).and_then(|r| r.asleep_until);
                    all.insert(
                        agent.to_string(),
                        PresenceReport {
                            now: now.clone(),
                            asleep_until: asleep.filter(|_| now.activity.asleep()),
                        },
                    );
                }
                PresenceChange::Asleep { until } => {
                    if let Some(r) = all.get_mut(agent) {
                        r.asleep_until = Some(*until);
                    }
                }
                PresenceChange::Woke => {
                    if let Some(r) = all.get_mut(agent) {
                        r.asleep_until = None;
                    }
                }
                PresenceChange::Off => {
                    all.remove(agent);
                }
            }
        }
        let event = PresenceEvent {
            agent: agent.to_string(),
            at,
            change,
        };
        locked(&self.presence_watchers).retain(|w| w.send(event.clone()).is_ok());
    }

    /// Tells the watchers of notable events.
    pub(super) fn notable(&self, notable: crate::core::scheduler::Notable, at: jiff::Timestamp) {
        let event = NotableEvent { at, notable };
        locked(&self.notable_watchers).retain(|w| w.send(event.clone()).is_ok());
    }

    /// The group pipeline `classify` tasks call, once one is set.
    pub(super) fn groups(&self) -> Option<SharedGroups> {
        locked(&self.groups).clone()
    }

    /// Records an agent's trigger-mode overrides (the driver, whenever it loads or changes
    /// the agent's state); `None` forgets the agent.
    pub(super) fn set_modes(&self, agent: &str, modes: Option<&GroupModes>) {
        let mut all = locked(&self.modes);
        match modes {
            Some(m) => all.insert(agent.to_string(), m.clone()),
            None => all.remove(agent),
        };
    }
}

/// A cloneable handle for feeding the runtime and watching it.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(super) queue: Arc<WorkQueue>,
    pub(super) status: watch::Receiver<Status>,
    pub(super) gate: Option<Arc<dyn InboundGate>>,
    pub(super) published: Published,
}

impl RuntimeHandle {
    /// Sets the group pipeline the runtime's `classify` tasks call (the admission chain's
    /// group gates); takes effect from the next task.
    pub fn set_groups(&self, groups: SharedGroups) {
        *locked(&self.published.groups) = Some(groups);
    }

    /// A handle whose inbound messages pass `gate` (the admission chain) first.
    pub fn with_gate(mut self, gate: Arc<dyn InboundGate>) -> RuntimeHandle {
        self.gate = Some(gate);
        self
    }

    /// Starts an agent, or swaps a running agent's persona; takes effect from its next task
    /// (and at once for [`RuntimeHandle::persona`], which the group gate reads).
    pub fn upsert_agent(&self, agent: AgentHandle) {
        locked(&self.published.personas)
            .insert(agent.persona.name.clone(), Arc::clone(&agent.persona));
        self.queue.push(Event::UpsertAgent(Box::new(agent)));
    }

    /// The persona `agent` was last given, at start or by [`RuntimeHandle::upsert_agent`].
    pub fn persona(&self, agent: &str) -> Option<Arc<Persona>> {
        locked(&self.published.personas).get(agent).cloned()
    }

    /// `agent`'s presence as last announced (`None`: it has no schedule, or is not running).
    pub fn presence(&self, agent: &str) -> Option<PresenceReport> {
        locked(&self.published.presence).get(agent).cloned()
    }

    /// Every later presence change, in order.
    pub fn observe_presence(&self) -> tokio::sync::mpsc::UnboundedReceiver<PresenceEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        locked(&self.published.presence_watchers).push(tx);
        rx
    }

    /// Every later notable event (drafts decided, plans dropped, caps reached), in order.
    pub fn observe_notables(&self) -> tokio::sync::mpsc::UnboundedReceiver<NotableEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        locked(&self.published.notable_watchers).push(tx);
        rx
    }

    /// The owner's word on a draft (a reply to it, or `personad ctl approve/reject`).
    pub fn decide_draft(
        &self,
        agent: &str,
        which: crate::core::scheduler::DraftRef,
        decision: crate::core::approval::Decision,
    ) {
        self.queue.push(Event::DecideDraft {
            agent: agent.to_string(),
            which,
            decision,
        });
    }

    /// The LLM layer's report of the day's spend after a request of `agent` (its own, every
    /// agent's together): the runtime holds planning at a cap.
    pub fn report_spend(
        &self,
        agent: &str,
        day: jiff::civil::Date,
        spend: crate::core::budget::Spend,
        all: crate::core::budget::Spend,
    ) {
        self.queue.push(Event::Spent {
            agent: agent.to_string(),
            day,
            spend,
            all,
        });
    }

    /// The owner resumed the agent: a daily LLM cap reached today no longer holds.
    pub fn lift_budget(&self, agent: &str) {
        self.queue.push(Event::LiftBudget {
            agent: agent.to_string(),
        });
    }

    /// Records a chat's draft-mode override (or clears it) in the agent's state on disk.
    pub fn set_approval_mode(
        &self,
        agent: &str,
        chat: ChatId,
        mode: Option<crate::core::approval::ApprovalMode>,
    ) {
        self.queue.push(Event::SetApprovalMode {
            agent: agent.to_string(),
            chat,
            mode,
        });
    }

    /// The trigger-mode override of `chat` in `agent`'s state, as the runtime holds it.
    pub fn group_mode(&self, agent: &str, chat: ChatId) -> Option<TriggerMode> {
        locked(&self.published.modes)
            .get(agent)
            .and_then(|m| m.get(&chat))
            .copied()
    }

    /// Resolves once the runtime has read `agent`'s state (so [`RuntimeHandle::group_mode`]
    /// answers for it), or the loop stopped.
    pub async fn wait_agent_state(&self, agent: &str) {
        self.wait_until(|_| locked(&self.published.modes).contains_key(agent))
            .await;
    }

    /// Stops an agent whose persona is gone (hot reload); its graphs stay on disk.
    pub(crate) fn remove_agent(&self, agent: &str, reason: &str) {
        locked(&self.published.personas).remove(agent);
        self.queue.push(Event::RemoveAgent {
            agent: agent.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Records a group's trigger-mode override (or clears it) in the agent's state on disk.
    pub(crate) fn set_group_mode(
        &self,
        agent: &str,
        chat: crate::core::model::ChatId,
        mode: Option<crate::core::group::settings::TriggerMode>,
    ) {
        self.queue.push(Event::SetGroupMode {
            agent: agent.to_string(),
            chat,
            mode,
        });
    }

    /// A basic group was upgraded to a supergroup (`migrate_to`): the pending plan, the
    /// trigger-mode override and a disabled mark move from the old id to the new one.
    pub(crate) fn migrate_chat(
        &self,
        agent: &str,
        from: crate::core::model::ChatId,
        to: crate::core::model::ChatId,
    ) {
        self.queue.push(Event::MigrateChat {
            agent: agent.to_string(),
            from,
            to,
        });
    }

    /// Events pushed but not yet applied by the loop.
    pub(crate) fn queue_depth(&self) -> u64 {
        self.queue
            .pushed()
            .saturating_sub(self.status.borrow().applied)
    }

    /// Resolves once persisted graphs are loaded and the loop runs (or it stopped).
    pub(crate) async fn wait_started(&self) {
        self.wait_until(|s| s.started).await;
    }

    /// Hands an inbound message to the runtime (what Telegram event handlers call), after
    /// the gate (the admission chain), if any, has had its say.
    pub fn push_inbound(&self, agent: &str, chat: Chat, message: Message, trigger: bool) {
        self.push_inbound_addressed(agent, chat, message, trigger, false);
    }

    /// As [`RuntimeHandle::push_inbound`], knowing whether Telegram flagged the message as
    /// addressing the account (a mention or a reply): what a group decision needs.
    pub(crate) fn push_inbound_addressed(
        &self,
        agent: &str,
        chat: Chat,
        message: Message,
        trigger: bool,
        callout: bool,
    ) {
        // The first rule, whatever the source: Telegram's service accounts are never kept
        // (their messages hold login codes), bots in DMs and deleted accounts never trigger.
        let trigger = match sender_rule(&chat, &message) {
            SenderRule::Private => {
                tracing::debug!(agent = %agent, chat = %chat.id, "message from a Telegram service account: not kept");
                return;
            }
            SenderRule::HistoryOnly(why) => {
                if trigger {
                    tracing::debug!(agent = %agent, chat = %chat.id, sender = why, "message kept as history: its sender never triggers a plan");
                }
                false
            }
            SenderRule::Person => trigger,
        };
        let admission = match self
            .gate
            .as_ref()
            .map(|g| g.admit(agent, &chat, &message, trigger, callout))
        {
            Some(Admit::Consumed) => return,
            Some(Admit::NoTrigger) => Admission::History,
            Some(Admit::As(admission)) => admission,
            Some(Admit::Pass) | None => Admission::from_trigger(trigger),
        };
        self.queue.push(Event::Inbound {
            agent: agent.to_string(),
            chat,
            message: Box::new(message),
            admission,
        });
    }

    /// Drops the conversation's pending plan, e.g. because the owner wrote there themselves.
    pub(crate) fn cancel_plan(&self, agent: &str, chat: crate::core::model::ChatId, reason: &str) {
        self.queue.push(Event::Cancel {
            agent: agent.to_string(),
            chat,
            reason: reason.to_string(),
        });
    }

    /// Stops one agent for the rest of this run (its session is no longer valid).
    pub(crate) fn stop_agent(&self, agent: &str, reason: &str) {
        self.queue.push(Event::StopAgent {
            agent: agent.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Asks the runtime to stop gracefully.
    pub fn shutdown(&self, reason: &str) {
        self.queue.push(Event::Shutdown {
            reason: reason.to_string(),
        });
    }

    /// Stops gracefully once no conversation has work left (checked by the loop after each
    /// pass, so nothing that is merely due later, such as the next activity of a schedule,
    /// keeps it going).
    pub fn stop_when_idle(&self, reason: &str) {
        self.queue.push(Event::StopWhenIdle {
            reason: reason.to_string(),
        });
    }

    /// Resolves with a hold on the clock taken the moment no conversation has work left
    /// (judged in the loop): on virtual time nothing that is merely due later (the next
    /// activity of a schedule) runs past that moment while the hold is kept.
    /// The request is queued at once (before the caller lets time run); await the result.
    pub fn hold_when_idle(
        &self,
    ) -> impl std::future::Future<Output = Option<crate::ports::clock::Hold>> + use<> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.queue.push(Event::HoldWhenIdle(tx));
        async move { rx.await.ok() }
    }

    /// Tells the runtime the owner's pauses of `agent` (scheduled intents do not fire in a
    /// paused chat).
    pub fn set_paused(&self, agent: &str, paused: crate::core::scheduler::Paused) {
        self.queue.push(Event::SetPaused {
            agent: agent.to_string(),
            paused,
        });
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Resolves once no graph has work left and no event is waiting (or the loop stopped).
    pub async fn wait_idle(&self) {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.stopped || (st.idle() && st.applied == self.queue.pushed()) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Resolves once a published status satisfies `done` (or the loop stopped).
    pub(crate) async fn wait_until(&self, done: impl Fn(&Status) -> bool) {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.stopped || done(&st) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Resolves when the loop has ended.
    pub async fn wait_stopped(&self) {
        let mut rx = self.status.clone();
        while !rx.borrow_and_update().stopped {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}
