//! [`RuntimeHandle`]: the cloneable front door of the runtime. Telegram pumps, the
//! playground, the daemon's signal handler and tests push events through it and watch the
//! published [`Status`]; nothing here touches graphs or the disk.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use crate::core::admission::{Admission, SenderRule, sender_rule};
use crate::core::agent_state::AgentState;
use crate::core::group::settings::TriggerMode;
use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::core::persona::Persona;
use crate::core::presence::{Presence, Standing};
use crate::core::scheduler::{OwnerReply, OwnerRequest, PresenceChange};
use crate::runtime::queue::{Event, WorkQueue};
use crate::runtime::{AgentHandle, Status};

/// What the runtime shows the code in front of it (the admission chain, the operator's
/// views), shared by every clone of the handle: the persona each agent was last given (at
/// start or by [`RuntimeHandle::upsert_agent`]), so a hot reload reaches the gate whichever
/// path made it, and each agent's state (what the owner set, disabled chats, the breaker,
/// the budget marks) as the runtime read it and changed it since, so nobody reads that file
/// a second time. The runtime is the state's only writer; this is a copy for readers.
#[derive(Clone, Default)]
pub(super) struct Published {
    personas: Arc<Mutex<HashMap<String, Arc<Persona>>>>,
    states: Arc<Mutex<HashMap<String, AgentState>>>,
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

/// An agent's presence as the runtime holds it: its schedule (zone, the days known, the
/// fallback for the others), published whenever the runtime installs it or a day of it.
/// Every view reads where the persona stands from it through [`PresenceReport::line`].
#[derive(Debug, Clone, PartialEq)]
pub struct PresenceReport {
    pub schedule: Presence,
}

impl PresenceReport {
    /// Where the persona stands at `now`.
    pub fn standing(&self, now: jiff::Timestamp) -> Standing {
        self.schedule.standing(now)
    }

    /// The operator's line for `now` (`Sleep (asleep until 06:45 CET)`), in the persona's
    /// zone.
    pub fn line(&self, now: jiff::Timestamp) -> String {
        self.standing(now).line(&self.schedule.tz, now)
    }
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
    /// Publishes the personas the runtime starts with.
    pub(super) fn set_personas(&self, personas: impl IntoIterator<Item = Arc<Persona>>) {
        let mut all = locked(&self.personas);
        for p in personas {
            all.insert(p.name.clone(), p);
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
        if change == PresenceChange::Off {
            locked(&self.presence).remove(agent);
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

    /// Records an agent's state (the driver, whenever it loads or changes it); `None`
    /// forgets the agent.
    pub(super) fn set_agent_state(&self, agent: &str, state: Option<AgentState>) {
        let mut all = locked(&self.states);
        match state {
            Some(s) => all.insert(agent.to_string(), s),
            None => all.remove(agent),
        };
    }
}

/// A cloneable handle for feeding the runtime and watching it. It carries no admission
/// rule of its own beyond Telegram's service accounts: the one admission chain
/// (`ingress::Ingress`) decides before it pushes.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(super) queue: Arc<WorkQueue>,
    pub(super) status: watch::Receiver<Status>,
    pub(super) published: Published,
}

impl RuntimeHandle {
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

    /// `agent`'s presence as the runtime holds it (`None`: it has no schedule, or is not
    /// running).
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

    /// The owner's request of `agent`, carried out by the runtime; resolves with its answer
    /// (`None` when the loop stopped first). Queued at once, before the future is awaited.
    pub fn owner(
        &self,
        agent: &str,
        request: OwnerRequest,
    ) -> impl std::future::Future<Output = Option<OwnerReply>> + use<> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.push_owner(agent, request, Some(tx));
        let handle = self.clone();
        async move {
            // A request queued after the loop ended is never answered (the queue outlives
            // the loop): the loop's end answers `None`.
            tokio::select! {
                biased;
                reply = rx => reply.ok(),
                () = handle.wait_stopped() => None,
            }
        }
    }

    fn push_owner(
        &self,
        agent: &str,
        request: OwnerRequest,
        reply: Option<tokio::sync::oneshot::Sender<OwnerReply>>,
    ) {
        self.queue.push(Event::Owner {
            agent: agent.to_string(),
            request,
            reply,
        });
    }

    /// The answer to the owner command `command` in `chat`: sent there as a task of that
    /// chat's graph (durable, paced, retried like any send).
    pub fn answer_owner(&self, agent: &str, chat: Chat, command: MessageId, text: String) {
        self.queue.push(Event::AnswerOwner {
            agent: agent.to_string(),
            chat,
            command,
            text,
        });
    }

    /// `agent`'s state as the runtime holds it (`None`: it is not read yet, or the agent is
    /// not running).
    pub fn agent_state(&self, agent: &str) -> Option<AgentState> {
        locked(&self.published.states).get(agent).cloned()
    }

    /// Whether the owner paused `chat` of `agent` at `now`.
    pub fn is_paused(&self, agent: &str, chat: ChatId, now: jiff::Timestamp) -> bool {
        locked(&self.published.states)
            .get(agent)
            .is_some_and(|o| o.pauses.is_paused(chat, now))
    }

    /// The trigger-mode override of `chat` in `agent`'s state, as the runtime holds it.
    pub fn group_mode(&self, agent: &str, chat: ChatId) -> Option<TriggerMode> {
        locked(&self.published.states)
            .get(agent)
            .and_then(|o| o.group_modes.get(&chat))
            .copied()
    }

    /// Resolves once the runtime has read `agent`'s state (so [`RuntimeHandle::group_mode`]
    /// answers for it), or the loop stopped.
    pub async fn wait_agent_state(&self, agent: &str) {
        self.wait_until(|_| locked(&self.published.states).contains_key(agent))
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

    /// Resolves once persisted graphs are loaded and the loop runs (or it stopped).
    pub(crate) async fn wait_started(&self) {
        self.wait_until(|s| s.started).await;
    }

    /// Hands an inbound message to the runtime as it is: one that may trigger a plan does.
    /// Sources of live messages go through the admission chain (`ingress::Ingress`) instead;
    /// this is the runtime's own door (tests, recorded history).
    pub fn push_inbound(&self, agent: &str, chat: Chat, message: Message, trigger: bool) {
        let trigger = sender_allows(agent, &chat, &message, trigger);
        if let Some(trigger) = trigger {
            self.push_admitted(agent, chat, message, Admission::from_trigger(trigger));
        }
    }

    /// Queues an inbound message as admission decided it.
    pub fn push_admitted(&self, agent: &str, chat: Chat, message: Message, admission: Admission) {
        self.queue.push(Event::Inbound {
            agent: agent.to_string(),
            chat,
            message: Box::new(message),
            admission,
        });
    }

    /// Drops the conversation's pending plan, e.g. because the owner wrote there themselves.
    pub fn cancel_plan(&self, agent: &str, chat: crate::core::model::ChatId, reason: &str) {
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

    /// [`RuntimeHandle::stop_agent`] for the tests (what an update pump does when Telegram
    /// refuses the session).
    #[cfg(feature = "test-hooks")]
    pub fn stop_agent_for_test(&self, agent: &str, reason: &str) {
        self.stop_agent(agent, reason);
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

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Resolves once no graph has work left and no event is waiting (or the loop stopped).
    pub async fn wait_idle(&self) {
        self.watch(|st| st.idle() && st.applied == self.queue.pushed())
            .await;
    }

    /// Resolves, with the status that showed it, once every event pushed so far is applied
    /// and the loop is quiet ([`Status::quiet`]) with nothing due within `horizon` of now on
    /// the project clock: what is left waits longer than that (or the loop stopped).
    pub async fn wait_quiet(
        &self,
        horizon: std::time::Duration,
        clock: &dyn crate::ports::clock::Clock,
    ) -> Status {
        self.watch(|st| {
            let later = crate::ports::clock::add(clock.now(), horizon);
            st.quiet()
                && st.applied == self.queue.pushed()
                && st.next_wake.is_none_or(|at| at > later)
        })
        .await
    }

    /// Resolves once a published status satisfies `done` (or the loop stopped).
    pub(crate) async fn wait_until(&self, done: impl Fn(&Status) -> bool) {
        self.watch(done).await;
    }

    /// The first published status that satisfies `done` or shows the loop stopped (the last
    /// one published if the loop is gone).
    async fn watch(&self, done: impl Fn(&Status) -> bool) -> Status {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.stopped || done(&st) {
                    return st.clone();
                }
            }
            if rx.changed().await.is_err() {
                return self.status();
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

/// The first rule, whatever the source: Telegram's service accounts are never kept
/// (their messages hold login codes: `None`), bots in DMs and deleted accounts never
/// trigger (`Some(false)`).
pub fn sender_allows(agent: &str, chat: &Chat, message: &Message, trigger: bool) -> Option<bool> {
    match sender_rule(chat, message) {
        SenderRule::Private => {
            tracing::debug!(agent = %agent, chat = %chat.id, "message from a Telegram service account: not kept");
            None
        }
        SenderRule::HistoryOnly(why) => {
            if trigger {
                tracing::debug!(agent = %agent, chat = %chat.id, sender = why, "message kept as history: its sender never triggers a plan");
            }
            Some(false)
        }
        SenderRule::Person => Some(trigger),
    }
}

impl crate::ports::spend::SpendSink for RuntimeHandle {
    fn spent(
        &self,
        agent: &str,
        day: jiff::civil::Date,
        own: crate::core::budget::Spend,
        all: crate::core::budget::Spend,
    ) {
        self.report_spend(agent, day, own, all);
    }
}

/// Speech asks here whether a reached cap holds its agent: the marks the scheduler holds
/// planning on, as last published.
impl crate::ports::spend::CapHold for RuntimeHandle {
    fn holds(&self, agent: &str, now: jiff::Timestamp) -> bool {
        let day = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        self.agent_state(agent)
            .is_some_and(|state| state.budget_holds(day))
    }
}
