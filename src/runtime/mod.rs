//! The runtime: per-conversation task graphs, the work queue and the tick loop that runs
//! them. Inbound events only land in the queue; the loop consumes them (replacing a chat's
//! graph by a fresh `received` task), then takes one ready task per tick, round-robin across
//! conversations, marks it active on disk, and spawns its handler. Different conversations
//! run concurrently, one task per conversation at a time, under a global cap. Between ticks
//! the loop sleeps until the next event or the earliest deadline.
//!
//! The runtime owns graph state and decides when it is saved (through `store`); it never
//! talks to Telegram or an LLM itself: handlers do, through the traits in their context.

pub mod queue;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tracing::{debug, error, info, warn};

use crate::agent_state::{AgentState, Breaker, Disabled};
use crate::clock::{self, Hold, SharedClock};
use crate::config::RuntimeConfig;
use crate::graph::Task;
use crate::graph::{ConversationKey, FailureVerdict, TaskGraph, TaskKind};
use crate::handlers::{
    self, IDEMPOTENCY_KEY, Outcome, TaskContext, TaskError, cancel_safe, needs_idempotency_key,
};
use crate::media::MediaPipeline;
use crate::persona::Persona;
use crate::planner::SharedPlanner;
use crate::store::{self, GraphStore, StoreError};
use crate::telegram::{Chat, Message, Telegram};
pub use queue::{Event, WorkQueue};

/// One agent the runtime serves: its persona and its Telegram account.
#[derive(Clone)]
pub struct AgentHandle {
    pub persona: Arc<Persona>,
    pub telegram: Arc<dyn Telegram>,
}

impl std::fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHandle")
            .field("agent", &self.persona.name)
            .finish_non_exhaustive()
    }
}

/// Decides, before the queue, what an inbound message is (ops: owner commands, pauses).
pub trait InboundGate: Send + Sync {
    /// Whether the message may reach the runtime, and whether it may still trigger a plan.
    fn admit(&self, agent: &str, chat: &Chat, message: &Message, trigger: bool) -> Admit;
}

/// A gate's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queue it as it is.
    Pass,
    /// Queue it, but it must not plan (paused chat, a command from someone else).
    NoTrigger,
    /// Consumed by the gate (an owner command): never queued.
    Consumed,
}

/// Called by the tick loop after every iteration (watchdog, health); the loop wakes at
/// least every `every`.
#[derive(Clone)]
pub struct Heartbeat {
    pub every: std::time::Duration,
    pub beat: Arc<dyn Fn() + Send + Sync>,
}

/// A snapshot of what the runtime is doing, published after every loop iteration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Conversations with unfinished graphs.
    pub graphs: usize,
    /// Tasks running right now.
    pub in_flight: usize,
    /// Graphs kept on disk for agents that are not running.
    pub orphaned: usize,
    /// Agents that run (stopped ones excluded).
    pub agents: usize,
    /// Persisted graphs have been loaded and the loop is running.
    pub started: bool,
    /// Events applied so far (compare with the queue's push count).
    pub applied: u64,
    /// The loop has ended.
    pub stopped: bool,
}

impl Status {
    /// Running, with no graph left to work on and nothing in flight.
    pub fn idle(&self) -> bool {
        self.started && self.graphs == 0 && self.in_flight == 0
    }
}

/// Why the runtime stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A graph could not be made durable: continuing could lose or duplicate work.
    #[error("state could not be saved: {0}")]
    Store(#[from] StoreError),
    #[error("a background task failed: {0}")]
    Join(String),
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    pub reason: String,
    /// Every agent had to stop (sessions gone): the daemon cannot go on.
    pub no_agents_left: bool,
}

/// A cloneable handle for feeding the runtime and watching it.
#[derive(Clone)]
pub struct RuntimeHandle {
    queue: Arc<WorkQueue>,
    status: watch::Receiver<Status>,
    gate: Option<Arc<dyn InboundGate>>,
}

impl RuntimeHandle {
    /// A handle whose inbound messages pass `gate` first.
    pub fn with_gate(mut self, gate: Arc<dyn InboundGate>) -> RuntimeHandle {
        self.gate = Some(gate);
        self
    }

    /// Starts an agent, or swaps a running agent's persona; takes effect from its next task.
    pub fn upsert_agent(&self, agent: AgentHandle) {
        self.queue.push(Event::UpsertAgent(Box::new(agent)));
    }

    /// Stops an agent whose persona is gone (hot reload); its graphs stay on disk.
    pub fn remove_agent(&self, agent: &str, reason: &str) {
        self.queue.push(Event::RemoveAgent {
            agent: agent.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Hands an inbound message to the runtime (what Telegram event handlers call).
    pub fn push_inbound(&self, agent: &str, chat: Chat, message: Message, trigger: bool) {
        let trigger = match self
            .gate
            .as_ref()
            .map(|g| g.admit(agent, &chat, &message, trigger))
        {
            Some(Admit::Consumed) => return,
            Some(Admit::NoTrigger) => false,
            _ => trigger,
        };
        self.queue.push(Event::Inbound {
            agent: agent.to_string(),
            chat,
            message: Box::new(message),
            trigger,
        });
    }

    /// Drops the conversation's pending plan, e.g. because the owner wrote there themselves.
    pub fn cancel_plan(&self, agent: &str, chat: crate::telegram::ChatId, reason: &str) {
        self.queue.push(Event::Cancel {
            agent: agent.to_string(),
            chat,
            reason: reason.to_string(),
        });
    }

    /// Stops one agent for the rest of this run (its session is no longer valid).
    pub fn stop_agent(&self, agent: &str, reason: &str) {
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

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Events pushed but not yet applied by the loop.
    pub fn queue_depth(&self) -> u64 {
        self.queue
            .pushed()
            .saturating_sub(self.status.borrow().applied)
    }

    /// Resolves once persisted graphs are loaded and the loop runs (or it stopped).
    pub async fn wait_started(&self) {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.started || st.stopped {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
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

struct InFlight {
    graph_id: String,
    task_id: String,
    kind: TaskKind,
    abort: AbortHandle,
}

/// The scheduler and its state.
pub struct Runtime {
    config: Arc<RuntimeConfig>,
    agents: HashMap<String, AgentHandle>,
    planner: SharedPlanner,
    media: Option<Arc<MediaPipeline>>,
    stickers: crate::stickers::SharedCatalog,
    store: GraphStore,
    clock: SharedClock,
    queue: Arc<WorkQueue>,
    status_tx: watch::Sender<Status>,
    status_rx: watch::Receiver<Status>,
    graphs: BTreeMap<ConversationKey, TaskGraph>,
    orphans: BTreeMap<ConversationKey, TaskGraph>,
    in_flight: HashMap<ConversationKey, InFlight>,
    cursor: Option<ConversationKey>,
    /// Set once shutdown began: the reason and the end of the grace period.
    stopping: Option<(String, Timestamp)>,
    applied: u64,
    /// Per-agent safety state (disabled chats, breaker), saved on every change.
    agent_states: HashMap<String, AgentState>,
    /// Agents stopped for good in this run (their session is gone).
    stopped_agents: Vec<String>,
    heartbeat: Option<Heartbeat>,
}

/// The `outcome` label of a finished task in metrics.
fn outcome_label(result: &Result<Outcome, TaskError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(TaskError::Park { .. }) => "parked",
        Err(TaskError::ChatForbidden(_)) => "forbidden",
        Err(TaskError::AccountLimited(_)) => "limited",
        Err(TaskError::Unauthorized(_)) => "unauthorized",
        Err(_) => "error",
    }
}

/// How long the account breaker holds after Telegram limits an account.
const BREAKER_HOLD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Runtime {
    pub fn new(
        config: RuntimeConfig,
        agents: Vec<AgentHandle>,
        planner: SharedPlanner,
        store: GraphStore,
        clock: SharedClock,
    ) -> Runtime {
        let (status_tx, status_rx) = watch::channel(Status::default());
        Runtime {
            config: Arc::new(config),
            agents: agents
                .into_iter()
                .map(|a| (a.persona.name.clone(), a))
                .collect(),
            planner,
            media: None,
            stickers: Arc::new(crate::stickers::StickerCatalog::new()),
            store,
            queue: Arc::new(WorkQueue::new(Arc::clone(&clock))),
            clock,
            status_tx,
            status_rx,
            graphs: BTreeMap::new(),
            orphans: BTreeMap::new(),
            in_flight: HashMap::new(),
            cursor: None,
            stopping: None,
            applied: 0,
            agent_states: HashMap::new(),
            stopped_agents: Vec::new(),
            heartbeat: None,
        }
    }

    /// Makes the loop wake at least every `heartbeat.every` and call its beat each time.
    pub fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Runtime {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Gives the `received` handler a media pipeline (descriptions of photos, voice, …).
    pub fn with_media(mut self, media: Arc<MediaPipeline>) -> Runtime {
        self.media = Some(media);
        self
    }

    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle {
            queue: Arc::clone(&self.queue),
            status: self.status_rx.clone(),
            gate: None,
        }
    }

    /// Loads persisted graphs, then runs the tick loop until shutdown.
    pub async fn run(mut self) -> Result<StopReport, RuntimeError> {
        let result = self.run_inner().await;
        if result.is_err() {
            for f in self.in_flight.values() {
                f.abort.abort();
            }
        }
        self.status_tx.send_modify(|s| s.stopped = true);
        result
    }

    async fn run_inner(&mut self) -> Result<StopReport, RuntimeError> {
        let hold = self.clock.hold();
        self.load().await?;
        drop(hold);
        let mut wake: Option<Hold> = None;
        loop {
            let hold = self.clock.hold();
            drop(wake.take());
            let (events, queued_hold) = self.queue.drain();
            self.applied += events.len() as u64;
            for event in events {
                self.apply(event).await?;
            }
            drop(queued_hold);
            if let Some((reason, grace_end)) = &self.stopping {
                if !self.in_flight.is_empty() && self.clock.now() >= *grace_end {
                    warn!(
                        tasks = self.in_flight.len(),
                        "grace period over: tasks still running are abandoned and will run again after the next start"
                    );
                    for (_, f) in self.in_flight.drain() {
                        f.abort.abort();
                    }
                }
                if self.in_flight.is_empty() {
                    info!(reason = %reason, "runtime stopped; all state is saved");
                    return Ok(StopReport {
                        reason: reason.clone(),
                        no_agents_left: self.agents.is_empty(),
                    });
                }
            } else {
                while self.in_flight.len() < self.config.max_in_flight {
                    if !self.tick().await? {
                        break;
                    }
                }
            }
            let mut deadline = self.next_deadline();
            self.publish();
            if let Some(hb) = &self.heartbeat {
                (hb.beat)();
                let cap = clock::add(self.clock.now(), hb.every);
                deadline = Some(deadline.map_or(cap, |d| d.min(cap)));
            }
            wake = self.sleep(deadline, hold).await;
        }
    }

    /// Sleeps until an event arrives or the deadline passes; returns a hold on the clock
    /// taken at wake-up. The loop's own hold is released only after the timer is registered,
    /// and a timer that may already have been woken is dropped only after a new hold is
    /// taken, so virtual time can never move between waking and reacting.
    async fn sleep(&self, deadline: Option<Timestamp>, hold: Hold) -> Option<Hold> {
        let mut timer = deadline.map(|at| self.clock.sleep_until(at));
        drop(hold);
        let fired = match timer.as_mut() {
            Some(t) => {
                tokio::select! {
                    biased;
                    wake = t => Some(wake),
                    () = self.queue.notified() => None,
                }
            }
            None => {
                self.queue.notified().await;
                None
            }
        };
        match fired {
            Some(wake) => Some(wake),
            None => {
                let held = self.clock.hold();
                drop(timer);
                Some(held)
            }
        }
    }

    /// The earliest moment a graph without a task in flight turns ready. While stopping,
    /// only the shutdown grace deadline matters.
    fn next_deadline(&self) -> Option<Timestamp> {
        if let Some((_, grace_end)) = &self.stopping {
            return Some(*grace_end);
        }
        // Deadlines already passed belong to ready tasks waiting for a free slot; a finishing
        // task wakes the loop for those.
        let now = self.clock.now();
        self.graphs
            .iter()
            .filter(|(k, _)| !self.in_flight.contains_key(*k))
            .filter_map(|(_, g)| g.next_deadline())
            .filter(|at| *at > now)
            .min()
    }

    fn publish(&self) {
        let status = Status {
            graphs: self.graphs.len(),
            in_flight: self.in_flight.len(),
            orphaned: self.orphans.len(),
            agents: self.agents.len(),
            started: true,
            applied: self.applied,
            stopped: false,
        };
        self.status_tx.send_replace(status);
    }

    async fn load(&mut self) -> Result<(), RuntimeError> {
        let store = self.store.clone();
        let loaded = tokio::task::spawn_blocking(move || store.load_all())
            .await
            .map_err(|e| RuntimeError::Join(e.to_string()))??;
        if loaded.stale_temp_files_removed > 0 {
            info!(
                count = loaded.stale_temp_files_removed,
                "removed temp files left by an interrupted save"
            );
        }
        for q in &loaded.quarantined {
            error!(
                file = %q.original.display(),
                moved_to = %q.moved_to.display(),
                reason = %q.reason,
                "unreadable graph file moved to quarantine"
            );
        }
        let agents: Vec<String> = self.agents.keys().cloned().collect();
        for agent in agents {
            let dir = self.store.state_dir().clone();
            let a = agent.clone();
            let (state, quarantined) =
                tokio::task::spawn_blocking(move || store::load_agent_state(&dir, &a))
                    .await
                    .map_err(|e| RuntimeError::Join(e.to_string()))??;
            if let Some(q) = quarantined {
                error!(
                    agent = %agent,
                    file = %q.original.display(),
                    moved_to = %q.moved_to.display(),
                    reason = %q.reason,
                    "unreadable agent state moved to quarantine; starting with no disabled chats and no breaker"
                );
            }
            self.agent_states.insert(agent, state);
        }
        let now = self.clock.now();
        for mut graph in loaded.graphs {
            let key = graph.key();
            let reset = graph.reset_active(now);
            if !reset.is_empty() {
                info!(conversation = %key, tasks = ?reset, "tasks interrupted by the last stop will run again");
            }
            if !self.agents.contains_key(&graph.agent) {
                warn!(conversation = %key, "graph kept on disk: its agent is not running");
                self.orphans.insert(key, graph);
                continue;
            }
            let armed = graph.arm_waits(now);
            if !reset.is_empty() || armed {
                self.persist(&mut graph).await?;
            }
            self.graphs.insert(key, graph);
        }
        info!(graphs = self.graphs.len(), "loaded task graphs");
        Ok(())
    }

    async fn persist(&self, graph: &mut TaskGraph) -> Result<(), RuntimeError> {
        graph.seq += 1;
        let snapshot = graph.clone();
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.save(&snapshot))
            .await
            .map_err(|e| RuntimeError::Join(e.to_string()))??;
        Ok(())
    }

    async fn remove_graph(&mut self, key: &ConversationKey) -> Result<(), RuntimeError> {
        self.graphs.remove(key);
        let store = self.store.clone();
        let key = key.clone();
        tokio::task::spawn_blocking(move || store.delete(&key))
            .await
            .map_err(|e| RuntimeError::Join(e.to_string()))??;
        Ok(())
    }

    async fn apply(&mut self, event: Event) -> Result<(), RuntimeError> {
        match event {
            Event::Inbound {
                agent,
                chat,
                message,
                trigger,
            } => self.on_inbound(agent, chat, message, trigger).await,
            Event::Finished {
                key,
                graph_id,
                task_id,
                result,
            } => self.on_finished(key, graph_id, task_id, result).await,
            Event::Cancel {
                agent,
                chat,
                reason,
            } => {
                let key = ConversationKey::new(agent, chat);
                if self.graphs.contains_key(&key) {
                    info!(conversation = %key, reason = %reason, "pending plan cancelled");
                    self.abandon_cancel_safe(&key);
                    self.remove_graph(&key).await?;
                }
                Ok(())
            }
            Event::StopAgent { agent, reason } => {
                error!(agent = %agent, reason = %reason, "agent stopped: log in again with personad login --agent {agent:?}");
                self.stop_agent(&agent);
                Ok(())
            }
            Event::Shutdown { reason } => {
                self.begin_stop(reason);
                Ok(())
            }
            Event::UpsertAgent(handle) => self.upsert_agent(*handle).await,
            Event::RemoveAgent { agent, reason } => {
                info!(event = "agent_removed", agent = %agent, reason = %reason, "agent stopped; its graphs stay on disk");
                self.stop_agent(&agent);
                Ok(())
            }
        }
    }

    /// Hot reload: a running agent gets its new persona (from its next task on); a new one
    /// starts, taking back its graphs kept on disk.
    async fn upsert_agent(&mut self, handle: AgentHandle) -> Result<(), RuntimeError> {
        let agent = handle.persona.name.clone();
        if self.agents.insert(agent.clone(), handle).is_some() {
            info!(event = "agent_persona_reloaded", agent = %agent, "persona reloaded");
            return Ok(());
        }
        self.stopped_agents.retain(|a| *a != agent);
        if !self.agent_states.contains_key(&agent) {
            let dir = self.store.state_dir().clone();
            let a = agent.clone();
            let (state, _) = tokio::task::spawn_blocking(move || store::load_agent_state(&dir, &a))
                .await
                .map_err(|e| RuntimeError::Join(e.to_string()))??;
            self.agent_states.insert(agent.clone(), state);
        }
        let keys: Vec<ConversationKey> = self
            .orphans
            .keys()
            .filter(|k| k.agent == agent)
            .cloned()
            .collect();
        for key in keys {
            if let Some(g) = self.orphans.remove(&key) {
                self.graphs.insert(key, g);
            }
        }
        info!(event = "agent_started", agent = %agent, "agent started");
        Ok(())
    }

    fn begin_stop(&mut self, reason: String) {
        if self.stopping.is_some() {
            return;
        }
        info!(reason = %reason, in_flight = self.in_flight.len(), "stopping");
        // Tasks that can be abandoned stop now; their graphs still mark them active, so
        // they run again after the next start.
        let abandon: Vec<ConversationKey> = self
            .in_flight
            .iter()
            .filter(|(_, f)| cancel_safe(f.kind))
            .map(|(k, _)| k.clone())
            .collect();
        for key in abandon {
            if let Some(f) = self.in_flight.remove(&key) {
                f.abort.abort();
            }
        }
        let grace_end = clock::add(self.clock.now(), self.config.shutdown_grace);
        self.stopping = Some((reason, grace_end));
    }

    async fn on_inbound(
        &mut self,
        agent: String,
        chat: Chat,
        message: Box<Message>,
        trigger: bool,
    ) -> Result<(), RuntimeError> {
        if !self.agents.contains_key(&agent) {
            warn!(agent = %agent, chat = %chat.id, "message for an agent that is not running ignored");
            return Ok(());
        }
        if !trigger || self.stopping.is_some() {
            return Ok(());
        }
        if self
            .agent_states
            .get(&agent)
            .is_some_and(|s| s.is_disabled(chat.id))
        {
            debug!(agent = %agent, chat = %chat.id, "message in a disabled chat: not planning");
            return Ok(());
        }
        let key = ConversationKey::new(agent.clone(), chat.id);
        let now = self.clock.now();
        let mut params = Map::new();
        params.insert("message_id".into(), Value::from(message.id.0));
        let not_before = clock::add(now, self.config.debounce);
        let mut graph = TaskGraph::with_received(&agent, chat, now, params, not_before);
        if let Some(old) = self.graphs.get(&key) {
            debug!(conversation = %key, old = %old.id, new = %graph.id, "replanning");
            // Telegram's "wait" applies to the conversation, not to one plan.
            graph.parked_until = old.parked_until.filter(|until| *until > now);
        }
        // A planning step of the superseded graph is abandoned; a side effect in flight is
        // allowed to finish, but whatever it returns is discarded.
        self.abandon_cancel_safe(&key);
        self.persist(&mut graph).await?;
        self.graphs.insert(key, graph);
        Ok(())
    }

    /// Aborts the conversation's task in flight if it can be abandoned safely (planning,
    /// waiting); a task with a side effect is left to finish.
    fn abandon_cancel_safe(&mut self, key: &ConversationKey) {
        if self.in_flight.get(key).is_some_and(|f| cancel_safe(f.kind))
            && let Some(f) = self.in_flight.remove(key)
        {
            f.abort.abort();
        }
    }

    async fn on_finished(
        &mut self,
        key: ConversationKey,
        graph_id: String,
        task_id: String,
        result: Result<Outcome, TaskError>,
    ) -> Result<(), RuntimeError> {
        if self
            .in_flight
            .get(&key)
            .is_some_and(|f| f.graph_id == graph_id && f.task_id == task_id)
        {
            self.in_flight.remove(&key);
        }
        let now = self.clock.now();
        let mut stop_reason = None;
        let Some(graph) = self.graphs.get_mut(&key).filter(|g| g.id == graph_id) else {
            debug!(conversation = %key, task = %task_id, "result of a superseded graph discarded");
            return Ok(());
        };
        let kind = graph.task(&task_id).map_or("unknown", |t| t.kind.as_str());
        metrics::counter!("personad_tasks_finished_total", "kind" => kind, "outcome" => outcome_label(&result)).increment(1);
        match result {
            Ok(outcome) => {
                graph.mark_done(&task_id, now);
                match outcome {
                    Outcome::Done => {}
                    Outcome::Planned(tasks) => {
                        if !tasks.is_empty() {
                            info!(event = "plan_started", conversation = %key, tasks = tasks.len(), "planned");
                        }
                        graph.append_chain(&task_id, tasks);
                    }
                    Outcome::Shutdown { reason } => stop_reason = Some(reason),
                }
            }
            Err(TaskError::Park { secs, reason }) => {
                metrics::counter!("personad_flood_waits_total").increment(1);
                metrics::counter!("personad_parked_seconds_total").increment(secs);
                let until = clock::add(now, std::time::Duration::from_secs(secs));
                graph.park(&task_id, until, &reason, now);
                warn!(
                    conversation = %key,
                    task = %task_id,
                    until = %until,
                    reason = %reason,
                    "Telegram asked us to wait: conversation parked"
                );
            }
            Err(TaskError::ChatForbidden(reason)) => {
                error!(
                    conversation = %key,
                    task = %task_id,
                    reason = %reason,
                    "we may not write in this chat: plan dropped and chat disabled (`personad state clear --agent {} --chat {}` enables it again)",
                    key.agent,
                    key.chat
                );
                self.remove_graph(&key).await?;
                return self.disable_chat(&key, reason, now).await;
            }
            Err(TaskError::AccountLimited(reason)) => {
                error!(
                    conversation = %key,
                    task = %task_id,
                    reason = %reason,
                    "Telegram limits this account: plan dropped, breaker tripped for 24 h, owner alerted"
                );
                self.remove_graph(&key).await?;
                return self.trip_breaker(&key.agent, reason, now).await;
            }
            Err(TaskError::Unauthorized(reason)) => {
                error!(
                    agent = %key.agent,
                    reason = %reason,
                    "the agent's Telegram session is no longer valid; stopping this agent. Log in again: personad login --agent {:?}",
                    key.agent
                );
                self.stop_agent(&key.agent);
                return Ok(());
            }
            Err(e) => {
                let policy = self.config.retry;
                match graph.record_failure(&task_id, &e.to_string(), e.is_transient(), policy, now)
                {
                    FailureVerdict::Retry { attempt } => {
                        warn!(
                            conversation = %key,
                            task = %task_id,
                            attempt,
                            max_attempts = policy.max_attempts,
                            error = %e,
                            "task failed; will retry"
                        );
                    }
                    FailureVerdict::Drop => {
                        let attempts = graph.task(&task_id).map_or(0, |t| t.attempts);
                        error!(
                            conversation = %key,
                            task = %task_id,
                            attempts,
                            error = %e,
                            "task failed for good; the conversation's plan is dropped"
                        );
                        return self.remove_graph(&key).await;
                    }
                }
            }
        }
        self.settle(&key).await?;
        if let Some(reason) = stop_reason {
            self.begin_stop(reason);
        }
        Ok(())
    }

    async fn save_agent_state(&self, agent: &str) -> Result<(), RuntimeError> {
        let Some(state) = self.agent_states.get(agent).cloned() else {
            return Ok(());
        };
        let dir = self.store.state_dir().clone();
        let agent = agent.to_string();
        tokio::task::spawn_blocking(move || store::save_agent_state(&dir, &agent, &state))
            .await
            .map_err(|e| RuntimeError::Join(e.to_string()))??;
        Ok(())
    }

    async fn disable_chat(
        &mut self,
        key: &ConversationKey,
        reason: String,
        now: Timestamp,
    ) -> Result<(), RuntimeError> {
        self.agent_states
            .entry(key.agent.clone())
            .or_default()
            .disabled_chats
            .insert(key.chat, Disabled { since: now, reason });
        self.save_agent_state(&key.agent).await
    }

    /// Trips the account breaker: persisted for 24 h, and an alert queued for the owner's
    /// Saved Messages (a plan of its own, through the normal machinery).
    async fn trip_breaker(
        &mut self,
        agent: &str,
        reason: String,
        now: Timestamp,
    ) -> Result<(), RuntimeError> {
        let until = clock::add(now, BREAKER_HOLD);
        self.agent_states
            .entry(agent.to_string())
            .or_default()
            .breaker = Some(Breaker {
            until,
            reason: reason.clone(),
        });
        self.save_agent_state(agent).await?;
        let Some(handle) = self.agents.get(agent) else {
            return Ok(());
        };
        let saved = Chat {
            id: crate::telegram::ChatId(handle.telegram.self_id()),
            kind: crate::telegram::ChatKind::Direct,
            title: "Saved Messages".into(),
        };
        let mut params = Map::new();
        params.insert(
            "text".into(),
            Value::from(format!(
                "personad: Telegram limited this account ({reason}). Until {until} the agent only answers people who wrote to it first. Check @SpamBot for details."
            )),
        );
        params.insert(
            IDEMPOTENCY_KEY.into(),
            Value::from(handlers::new_idempotency_key()),
        );
        let alert = Task::new(TaskKind::Send, params, now);
        let mut graph = TaskGraph::with_tasks(agent, saved, now, vec![alert]);
        let key = graph.key();
        self.persist(&mut graph).await?;
        self.graphs.insert(key, graph);
        Ok(())
    }

    /// Stops an agent for the rest of this run: its graphs stay on disk untouched.
    fn stop_agent(&mut self, agent: &str) {
        if self.agents.remove(agent).is_none() {
            return;
        }
        self.stopped_agents.push(agent.to_string());
        let keys: Vec<ConversationKey> = self
            .graphs
            .keys()
            .filter(|k| k.agent == agent)
            .cloned()
            .collect();
        for key in keys {
            if let Some(f) = self.in_flight.remove(&key) {
                f.abort.abort();
            }
            if let Some(g) = self.graphs.remove(&key) {
                self.orphans.insert(key, g);
            }
        }
        if self.agents.is_empty() {
            self.begin_stop("no agent left to run".to_string());
        }
    }

    /// While an agent's breaker holds, only plans that answer someone who wrote in the chat
    /// (and alerts to the owner) may send.
    fn breaker_blocks(&self, graph: &TaskGraph, task: &Task, now: Timestamp) -> bool {
        let Some(agent) = self.agents.get(&graph.agent) else {
            return false;
        };
        needs_idempotency_key(task.kind)
            && self
                .agent_states
                .get(&graph.agent)
                .is_some_and(|s| s.breaker_active(now))
            && !graph.answers_inbound()
            && graph.chat.id.0 != agent.telegram.self_id()
    }

    /// After a change: arm waits, then save the graph or delete it when finished.
    async fn settle(&mut self, key: &ConversationKey) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let Some(mut graph) = self.graphs.remove(key) else {
            return Ok(());
        };
        if graph.is_finished() {
            debug!(conversation = %key, "plan finished");
            let store = self.store.clone();
            let k = key.clone();
            tokio::task::spawn_blocking(move || store.delete(&k))
                .await
                .map_err(|e| RuntimeError::Join(e.to_string()))??;
            return Ok(());
        }
        graph.arm_waits(now);
        self.persist(&mut graph).await?;
        self.graphs.insert(key.clone(), graph);
        Ok(())
    }

    /// One tick: picks the next ready task round-robin, marks it active on disk, spawns it.
    /// Returns false when nothing is ready.
    async fn tick(&mut self) -> Result<bool, RuntimeError> {
        let now = self.clock.now();
        let Some(key) = self.next_ready(now) else {
            return Ok(false);
        };
        self.cursor = Some(key.clone());
        let Some(mut graph) = self.graphs.remove(&key) else {
            return Ok(false);
        };
        let Some(task_id) = graph.ready_task(now).map(|t| t.id.clone()) else {
            self.graphs.insert(key, graph);
            return Ok(false);
        };
        if graph
            .task(&task_id)
            .is_some_and(|t| self.breaker_blocks(&graph, t, now))
        {
            warn!(
                conversation = %key,
                "account breaker holds: nobody wrote to us in this chat, so the plan is dropped"
            );
            self.graphs.insert(key.clone(), graph);
            self.remove_graph(&key).await?;
            return Ok(true);
        }
        graph.mark_active(&task_id, now);
        if let Some(task) = graph.tasks.iter_mut().find(|t| t.id == task_id)
            && needs_idempotency_key(task.kind)
            && !task.params.contains_key(IDEMPOTENCY_KEY)
        {
            task.params.insert(
                IDEMPOTENCY_KEY.into(),
                Value::from(handlers::new_idempotency_key()),
            );
        }
        self.persist(&mut graph).await?;
        let task = graph.task(&task_id).cloned();
        let graph_id = graph.id.clone();
        let chat = graph.chat.clone();
        self.graphs.insert(key.clone(), graph);
        let (Some(task), Some(agent)) = (task, self.agents.get(&key.agent)) else {
            return Ok(true);
        };
        let ctx = TaskContext {
            key: key.clone(),
            chat,
            task,
            persona: Arc::clone(&agent.persona),
            telegram: Arc::clone(&agent.telegram),
            planner: Arc::clone(&self.planner),
            clock: Arc::clone(&self.clock),
            config: Arc::clone(&self.config),
            media: self.media.clone(),
            stickers: Arc::clone(&self.stickers),
        };
        let kind = ctx.task.kind;
        debug!(conversation = %key, task = %task_id, kind = %kind, "task started");
        metrics::counter!("personad_tasks_started_total", "kind" => kind.as_str()).increment(1);
        let queue = Arc::clone(&self.queue);
        let clock = Arc::clone(&self.clock);
        let timeout = self.config.task_timeout;
        let hold = self.clock.hold();
        let (k, gid, tid) = (key.clone(), graph_id.clone(), task_id.clone());
        let join = tokio::spawn(clock::with_task_hold(hold, async move {
            let deadline = clock::add(clock.now(), timeout);
            let result = tokio::select! {
                r = handlers::handler_for(kind).run(&ctx) => r,
                _ = clock.sleep_until(deadline) => Err(TaskError::Transient(format!(
                    "timed out after {} s", timeout.as_secs()
                ))),
            };
            queue.push(Event::Finished {
                key: k,
                graph_id: gid,
                task_id: tid,
                result,
            });
        }));
        self.in_flight.insert(
            key,
            InFlight {
                graph_id,
                task_id,
                kind,
                abort: join.abort_handle(),
            },
        );
        Ok(true)
    }

    /// Round robin: the first conversation after the cursor (wrapping) that has a ready task
    /// and nothing in flight.
    fn next_ready(&self, now: Timestamp) -> Option<ConversationKey> {
        let eligible = |(k, g): (&ConversationKey, &TaskGraph)| {
            (!self.in_flight.contains_key(k) && g.ready_task(now).is_some()).then(|| k.clone())
        };
        let after = match &self.cursor {
            Some(c) => self
                .graphs
                .range::<ConversationKey, _>((
                    std::ops::Bound::Excluded(c),
                    std::ops::Bound::Unbounded,
                ))
                .find_map(eligible),
            None => None,
        };
        after.or_else(|| self.graphs.iter().find_map(eligible))
    }
}
