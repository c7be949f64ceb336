//! The scheduler core: a synchronous state machine over every conversation's graph. It takes
//! events (an inbound message, a finished task, a cancel, a stop) with the current time and
//! answers with [`Effect`]s (persist a conversation, start a task, abort one, save an agent's
//! safety state, stop an agent); it never awaits, never touches the disk, Telegram or the
//! clock. The async driver (`driver`) feeds it and carries the effects out, so round robin,
//! retries, supersede and abandon, and the breaker are plain unit tests.
//!
//! No pass scans every graph: conversations with a ready task wait in two FIFO queues
//! (plans under way first, then new plans: replies go out before more planning starts), and
//! future deadlines (debounce, waits, parks, retries) sit in a min-heap checked lazily
//! against the one deadline each conversation has armed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use jiff::Timestamp;
use tracing::{debug, info, warn};

use crate::core::config::RuntimeConfig;
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskKind, TaskStatus};
use crate::core::model::{Chat, ChatId};
use crate::core::safety::AccountSafety;
mod admission;
mod budget;
mod controls;
mod dormant;
mod finish;
pub use budget::SpendReport;
mod owner;
mod presence;
mod retrieve;
mod xsend;
pub(crate) use controls::answer_key;
pub use controls::{OwnerReply, OwnerRequest};
pub use owner::DraftRef;
pub(crate) use presence::AgentPresence;
pub use presence::PresenceChange;

/// A task the driver must run once the conversation's pending save is durable.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub key: ConversationKey,
    pub graph_id: String,
    pub chat: Chat,
    pub task: Task,
    /// The agent's schedule and intents as they are now, for the tasks that use them
    /// (planning, writing a day).
    pub(crate) presence: Option<Box<AgentPresence>>,
    /// The owner's draft-mode override of the chat (planning only).
    pub(crate) approval: Option<crate::core::approval::ApprovalMode>,
}

/// What the driver must do, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Abort the task in flight (or about to start) for this conversation.
    Abort {
        key: ConversationKey,
        graph_id: String,
        task_id: String,
    },
    /// Save the agent's safety state.
    SaveAgentState(String),
    /// Save one chat's handled mark (its graph, which held it, is gone).
    SaveHandled {
        agent: String,
        chat: crate::core::model::ChatId,
        mark: crate::core::agent_state::HandledMark,
    },
    /// The agent stops for this run: drop its handle (its graphs stay on disk).
    StopAgent(String),
    /// Make the conversation's current graph durable (or delete its file when it has none).
    /// Emitted once per conversation per pass, however often it changed.
    Persist(ConversationKey),
    /// Run this task, after the conversation's latest `Persist` is durable.
    Start(Box<Start>),
    /// Save one day of the agent's schedule: over no file or a fallback, or (`replaces`) over
    /// exactly the day it replaces, so a day written by hand meanwhile is never overwritten.
    SaveDay {
        agent: String,
        day: Box<crate::core::presence::DaySchedule>,
        replaces: Option<Box<crate::core::presence::DaySchedule>>,
    },
    /// Save the agent's scheduled intents; `after`: only once this pass's graph writes of the
    /// agent are durable (an intent fired: its plan is on disk first).
    SaveIntents { agent: String, after: bool },
    /// The agent's presence changed: show it (status, the playground).
    Presence {
        agent: String,
        change: PresenceChange,
    },
    /// Something the operator should see happened: count it and show it to watchers.
    Notable(Notable),
}

/// Something the operator should see (a draft decided or void, a plan dropped, a send
/// refused, a spending cap reached): the driver counts it in `personad_events_total{event}`
/// and shows it to watchers (the playground's JSON lines); the scheduler logs it with the same
/// `event` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notable {
    pub agent: String,
    pub chat: Option<ChatId>,
    /// A stable name (`draft_approved`, `plan_dropped`, `budget_reached`, ...).
    pub event: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone)]
struct Running {
    graph_id: String,
    task_id: String,
    kind: TaskKind,
    /// The driver has spawned it (once the write of its `active` mark is durable).
    spawned: bool,
}

/// The scheduler's state. See the module documentation.
pub(crate) struct Scheduler {
    config: Arc<RuntimeConfig>,
    agents: HashSet<String>,
    graphs: HashMap<ConversationKey, Box<TaskGraph>>,
    /// Settled graphs out of RAM: their keys and deadlines (`dormant`).
    dormant: dormant::Dormant,
    orphans: HashMap<ConversationKey, Box<TaskGraph>>,
    in_flight: HashMap<ConversationKey, Running>,
    /// Entries of `in_flight` not spawned yet (waiting for their write).
    awaiting: usize,
    /// Conversations whose plan is under way (its `received` is done) with a ready task.
    replies: VecDeque<ConversationKey>,
    /// Conversations with a new plan to start (a ready `received`).
    fresh: VecDeque<ConversationKey>,
    queued: HashSet<ConversationKey>,
    /// `schedule` tasks the last stop cut short (active on disk): their next run is another
    /// call, counted when it starts.
    cut_short: HashSet<String>,
    deadlines: BinaryHeap<Reverse<(Timestamp, u64, ConversationKey)>>,
    /// The one deadline each conversation without a ready task waits for.
    armed: HashMap<ConversationKey, Timestamp>,
    heap_seq: u64,
    stopping: Option<(String, Timestamp)>,
    safety: AccountSafety,
    effects: Vec<Effect>,
    dirty: Vec<ConversationKey>,
    dirty_set: HashSet<ConversationKey>,
    starts: Vec<Start>,
    /// Each agent's schedule and intents (`presence`).
    presence: HashMap<String, AgentPresence>,
    /// Effects carried out after the pass's graph writes (saving intents and days).
    after_graphs: Vec<Effect>,
    /// Incident notices to the owner held back (rate limit).
    notices: owner::Notices,
    /// The chats each agent has and the day's `xsend` counts.
    xsend: xsend::Ledger,
    /// When old handled marks were last dropped.
    pruned_at: Option<Timestamp>,
    /// Owner replies that came while a draft was being posted, before the post named its
    /// message (`owner::EarlyReply`).
    early_replies: Vec<owner::EarlyReply>,
}

/// How often old handled marks are dropped.
const PRUNE_EVERY: jiff::SignedDuration = jiff::SignedDuration::from_hours(1);

impl Scheduler {
    pub(crate) fn new(
        config: Arc<RuntimeConfig>,
        agents: impl IntoIterator<Item = String>,
        safety: AccountSafety,
    ) -> Scheduler {
        Scheduler {
            config,
            agents: agents.into_iter().collect(),
            graphs: HashMap::new(),
            dormant: dormant::Dormant::default(),
            orphans: HashMap::new(),
            in_flight: HashMap::new(),
            awaiting: 0,
            replies: VecDeque::new(),
            fresh: VecDeque::new(),
            queued: HashSet::new(),
            cut_short: HashSet::new(),
            deadlines: BinaryHeap::new(),
            armed: HashMap::new(),
            heap_seq: 0,
            stopping: None,
            safety,
            effects: Vec::new(),
            dirty: Vec::new(),
            dirty_set: HashSet::new(),
            starts: Vec::new(),
            presence: HashMap::new(),
            after_graphs: Vec::new(),
            notices: HashMap::new(),
            xsend: xsend::Ledger::default(),
            pruned_at: None,
            early_replies: Vec::new(),
        }
    }

    /// The running agents' graphs, dormant ones included.
    pub(crate) fn graphs(&self) -> usize {
        self.graphs.len() + self.dormant()
    }

    pub(crate) fn orphans(&self) -> usize {
        self.orphans.len() + self.dormant_orphans()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    pub(crate) fn agents(&self) -> usize {
        self.agents.len()
    }

    #[cfg(test)]
    pub(crate) fn graph(&self, key: &ConversationKey) -> Option<&TaskGraph> {
        self.graphs.get(key).map(|g| &**g)
    }

    pub(crate) fn safety(&self) -> &AccountSafety {
        &self.safety
    }

    /// Why and until when the runtime is stopping, once it is.
    pub(crate) fn stopping(&self) -> Option<&(String, Timestamp)> {
        self.stopping.as_ref()
    }

    /// The graph as it must be written now, with its save counter advanced.
    pub(crate) fn snapshot(&mut self, key: &ConversationKey) -> Option<TaskGraph> {
        let g = self.graphs.get_mut(key)?;
        g.seq += 1;
        Some((**g).clone())
    }

    /// Everything decided since the last call: aborts and other effects first, then one
    /// `Persist` per changed conversation, then the starts (each after its persist).
    pub(crate) fn take_effects(&mut self) -> Vec<Effect> {
        let mut out = std::mem::take(&mut self.effects);
        self.dirty_set.clear();
        out.extend(self.dirty.drain(..).map(Effect::Persist));
        // After the graphs: a fired intent's plan is on disk before the intent moves on (a
        // crash between the two leaves the plan, which `set_presence` recognizes).
        out.extend(std::mem::take(&mut self.after_graphs));
        out.extend(self.starts.drain(..).map(|s| Effect::Start(Box::new(s))));
        out
    }

    fn mark_dirty(&mut self, key: &ConversationKey) {
        self.changed_while_dormant(key);
        if self.dirty_set.insert(key.clone()) {
            self.dirty.push(key.clone());
        }
    }

    /// Installs the graphs found on disk at startup.
    pub(crate) fn load(&mut self, graphs: Vec<TaskGraph>, now: Timestamp) {
        for mut graph in graphs {
            let key = graph.key();
            let reset = graph.reset_active(now);
            if !reset.is_empty() {
                info!(conversation = %key, tasks = ?reset, "tasks interrupted by the last stop will run again");
            }
            for id in &reset {
                if graph
                    .task(id)
                    .is_some_and(|t| t.kind() == TaskKind::Schedule)
                {
                    self.cut_short.insert(id.clone());
                }
            }
            if !self.agents.contains(&graph.agent) {
                warn!(conversation = %key, "graph kept on disk: its agent is not running");
                self.orphans.insert(key, Box::new(graph));
                continue;
            }
            if let Some(message) = graph.handled_message() {
                // A plan on disk is a handled message, even if the agent state was written
                // before the plan (a crash between the two writes).
                self.safety
                    .note_handled(&graph.agent, graph.chat.id, message, now);
            }
            debug!(conversation = %key, graph = %graph.id, seq = graph.seq, handled = ?graph.handled_message(), tasks = graph.tasks.len(), "graph loaded");
            let armed = graph.arm_waits(now);
            if !reset.is_empty() || armed {
                self.mark_dirty(&key);
            }
            self.graphs.insert(key.clone(), Box::new(graph));
            self.reschedule(&key, now);
            // Read from disk as it is: a settled one leaves RAM at once.
            self.evict(&key, now);
        }
        info!(
            graphs = self.graphs(),
            dormant = self.dormant(),
            "loaded task graphs"
        );
    }

    /// Puts the conversation where it belongs: a ready queue, the deadline heap, or nowhere.
    fn reschedule(&mut self, key: &ConversationKey, now: Timestamp) {
        if self.in_flight.contains_key(key) {
            self.armed.remove(key);
            return;
        }
        let Some(graph) = self.graphs.get(key) else {
            self.armed.remove(key);
            return;
        };
        let ready = graph.ready_task(now);
        if let Some(wake) = ready.and_then(|t| self.held(graph, t, now)) {
            self.arm(key, wake);
        } else if ready.is_some() {
            let reply = plan_under_way(graph);
            self.armed.remove(key);
            if self.queued.insert(key.clone()) {
                if reply {
                    self.replies.push_back(key.clone());
                } else {
                    self.fresh.push_back(key.clone());
                }
            }
        } else if let Some(at) = graph.next_deadline() {
            self.arm(key, at);
        } else {
            self.armed.remove(key);
        }
    }

    /// Makes `at` the one deadline the conversation waits for.
    fn arm(&mut self, key: &ConversationKey, at: Timestamp) {
        if self.armed.get(key) != Some(&at) {
            self.armed.insert(key.clone(), at);
            self.heap_seq += 1;
            self.deadlines
                .push(Reverse((at, self.heap_seq, key.clone())));
        }
    }

    /// Moves conversations whose deadline has come into the ready queues.
    pub(crate) fn advance(&mut self, now: Timestamp) {
        self.presence_advance(now);
        if self
            .pruned_at
            .is_none_or(|at| now.duration_since(at) >= PRUNE_EVERY)
        {
            self.pruned_at = Some(now);
            let dropped = self.safety.prune_handled(now);
            if dropped > 0 {
                info!(
                    event = "handled_marks_pruned",
                    dropped, "handled marks older than the replay window dropped"
                );
            }
        }
        while let Some(Reverse((at, _, key))) = self.deadlines.peek() {
            if *at > now {
                break;
            }
            let (at, key) = (*at, key.clone());
            self.deadlines.pop();
            if self.armed.get(&key) == Some(&at) {
                self.armed.remove(&key);
                self.reschedule(&key, now);
            }
        }
    }

    /// When the driver must wake up next (the earliest armed deadline, or the end of the
    /// shutdown grace period).
    pub(crate) fn next_wake(&mut self) -> Option<Timestamp> {
        if let Some((_, grace_end)) = &self.stopping {
            return Some(*grace_end);
        }
        let presence = self
            .presence_wake()
            .into_iter()
            .chain(self.next_dormant())
            .min();
        while let Some(Reverse((at, _, key))) = self.deadlines.peek() {
            if self.armed.get(key) == Some(at) {
                return Some(presence.map_or(*at, |p| p.min(*at)));
            }
            self.deadlines.pop();
        }
        presence
    }

    /// Starts ready tasks while slots are free (and the runtime is not stopping).
    pub(crate) fn start_ready(&mut self, now: Timestamp) {
        // A task waiting for its `active` mark to be durable holds its slot already, so the
        // cap bounds handlers running however the disk keeps up.
        while self.stopping.is_none() && self.in_flight.len() < self.config.max_in_flight {
            if !self.start_one(now) {
                break;
            }
        }
    }

    /// One tick: the next conversation with a ready task, replies before new plans, each
    /// queue first in first out. Returns false when none is ready.
    fn start_one(&mut self, now: Timestamp) -> bool {
        loop {
            let Some(key) = self.replies.pop_front().or_else(|| self.fresh.pop_front()) else {
                return false;
            };
            self.queued.remove(&key);
            if self.in_flight.contains_key(&key) {
                continue;
            }
            let Some(graph) = self.graphs.get(&key) else {
                continue;
            };
            let Some(task) = graph.ready_task(now).cloned() else {
                self.reschedule(&key, now);
                continue;
            };
            if let Some(wake) = self.held(graph, &task, now) {
                self.arm(&key, wake);
                continue;
            }
            if self.cut_short.remove(&task.id) && !self.schedule_call_again(&key, &task.id, now) {
                continue;
            }
            let Some(graph) = self.graphs.get_mut(&key) else {
                continue;
            };
            if self.safety.breaker_blocks(graph, &task, now)
                && !self.is_owner_chat(&key.agent, key.chat)
            {
                warn!(
                    event = "plan_dropped",
                    conversation = %key,
                    "account breaker holds: nobody wrote to us in this chat, so the plan is dropped"
                );
                let why = "the account breaker holds: only people who wrote to us are answered";
                self.notable(&key.agent, Some(key.chat), "plan_dropped", why.to_string());
                self.remove_graph(&key, now);
                return true;
            }
            let presence = matches!(
                task.kind(),
                TaskKind::Received | TaskKind::Schedule | TaskKind::Retrieve
            )
            .then(|| self.presence.get(&key.agent).cloned().map(Box::new))
            .flatten();
            let approval = (task.kind() == TaskKind::Received)
                .then(|| self.safety.approval_mode(&key.agent, key.chat))
                .flatten();
            let Some(graph) = self.graphs.get_mut(&key) else {
                continue;
            };
            graph.mark_active(&task.id, now);
            let mut task = task;
            task.status = TaskStatus::Active;
            let start = Start {
                key: key.clone(),
                graph_id: graph.id.clone(),
                chat: graph.chat.clone(),
                task,
                presence,
                approval,
            };
            debug!(conversation = %key, task = %start.task.id, kind = %start.task.kind(), "task started");
            self.in_flight.insert(
                key.clone(),
                Running {
                    graph_id: start.graph_id.clone(),
                    task_id: start.task.id.clone(),
                    kind: start.task.kind(),
                    spawned: false,
                },
            );
            self.awaiting += 1;
            self.armed.remove(&key);
            // A task with a side effect starts only once its `active` mark is durable (a
            // crash then never repeats what it may have done). A cancel-safe one (planning,
            // a wait) has nothing to repeat: it starts at once, and its mark is written with
            // the graph's next change, if ever (after a crash it would be reset anyway).
            if !start.task.kind().cancel_safe() {
                self.mark_dirty(&key);
            }
            self.starts.push(start);
            return true;
        }
    }

    fn remove_graph(&mut self, key: &ConversationKey, now: Timestamp) {
        if let Some(graph) = self.graphs.remove(key) {
            self.mark_dirty(key);
            // A voided draft whose replacement was never posted: the owner is told now.
            self.superseded_void(&graph, now);
            if graph.handled_message().is_some()
                && let Some(mark) = self.safety.handled_mark(&key.agent, key.chat)
            {
                // The graph held the handled mark of its message until now: the mark is
                // saved on its own from here.
                self.effects.push(Effect::SaveHandled {
                    agent: key.agent.clone(),
                    chat: key.chat,
                    mark,
                });
            }
        }
        self.armed.remove(key);
    }

    /// Whether `chat` is one of the owner's: the agent's Saved Messages, an admin chat
    /// (`--admin-chat`) or the one its persona names (`# Admin Chat`).
    pub(crate) fn is_owner_chat(&self, agent: &str, chat: ChatId) -> bool {
        self.safety.is_own_chat(agent, chat)
            || self.config.admin_chats.contains(&chat)
            || self.safety.is_persona_admin_chat(agent, chat)
    }

    /// The agent's persona (re)loaded: the admin chat it names, if any.
    pub(crate) fn set_admin_chat(&mut self, agent: &str, chat: Option<ChatId>) {
        self.safety.set_admin_chat(agent, chat);
    }

    /// Drops the conversation's pending plan (a person took over).
    pub(crate) fn on_cancel(&mut self, agent: &str, chat: ChatId, reason: &str, now: Timestamp) {
        if self.is_owner_chat(agent, chat) {
            // The owner's notes and commands never cancel the runtime's upkeep and answers
            // there.
            return;
        }
        let key = ConversationKey::new(agent, chat);
        if self.graphs.contains_key(&key) {
            info!(conversation = %key, reason = %reason, "pending plan cancelled");
            self.draft_void(&key, reason, now);
            self.abandon_cancel_safe(&key);
            self.remove_graph(&key, now);
        }
    }

    /// Aborts the conversation's task in flight if it can be abandoned safely (planning,
    /// waiting); a task with a side effect is left to finish and keeps the conversation busy.
    fn abandon_cancel_safe(&mut self, key: &ConversationKey) {
        if self
            .in_flight
            .get(key)
            .is_some_and(|f| f.kind.cancel_safe())
            && let Some(f) = self.take_in_flight(key)
        {
            self.effects.push(Effect::Abort {
                key: key.clone(),
                graph_id: f.graph_id,
                task_id: f.task_id,
            });
        }
    }

    /// The driver gave up a task before it started (shutdown): its slot is free again.
    pub(crate) fn forget_in_flight(&mut self, key: &ConversationKey) {
        self.take_in_flight(key);
    }

    /// The driver spawned the conversation's task: from now on it takes a slot.
    pub(crate) fn spawned(&mut self, key: &ConversationKey) {
        if let Some(f) = self.in_flight.get_mut(key)
            && !f.spawned
        {
            f.spawned = true;
            self.awaiting = self.awaiting.saturating_sub(1);
        }
    }

    fn take_in_flight(&mut self, key: &ConversationKey) -> Option<Running> {
        let f = self.in_flight.remove(key)?;
        if !f.spawned {
            self.awaiting = self.awaiting.saturating_sub(1);
        }
        Some(f)
    }

    /// Begins a graceful stop: cancel-safe tasks are abandoned now, others get the grace
    /// period. Everything is saved, so tasks still `active` run again after the next start.
    pub(crate) fn begin_stop(&mut self, reason: String, now: Timestamp) {
        if self.stopping.is_some() {
            return;
        }
        info!(reason = %reason, in_flight = self.in_flight.len(), "stopping");
        let keys: Vec<ConversationKey> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.kind.cancel_safe())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.abandon_cancel_safe(&key);
        }
        self.stopping = Some((
            reason,
            crate::core::time::add(now, self.config.shutdown_grace),
        ));
    }

    /// While stopping: past the grace period, tasks still running are abandoned. Returns
    /// true once nothing is in flight (the driver may end once its writes are done).
    pub(crate) fn stop_settled(&mut self, now: Timestamp) -> bool {
        let Some((_, grace_end)) = &self.stopping else {
            return false;
        };
        if !self.in_flight.is_empty() && now >= *grace_end {
            warn!(
                tasks = self.in_flight.len(),
                "grace period over: tasks still running are abandoned and will run again after the next start"
            );
            self.awaiting = 0;
            for (key, f) in std::mem::take(&mut self.in_flight) {
                self.effects.push(Effect::Abort {
                    key,
                    graph_id: f.graph_id,
                    task_id: f.task_id,
                });
            }
        }
        self.in_flight.is_empty()
    }

    /// Stops an agent for the rest of this run: its graphs stay on disk untouched.
    /// Starts an agent while the runtime runs (hot reload): its graphs kept on disk come
    /// back and are scheduled.
    pub(crate) fn add_agent(
        &mut self,
        agent: &str,
        self_id: i64,
        state: crate::core::agent_state::AgentState,
        now: Timestamp,
    ) {
        if !self.agents.insert(agent.to_string()) {
            return;
        }
        self.safety.add_agent(agent, self_id, state);
        self.adopt_dormant(agent);
        let keys = keys_of(&self.orphans, agent);
        for key in keys {
            if let Some(mut graph) = self.orphans.remove(&key) {
                graph.arm_waits(now);
                self.graphs.insert(key.clone(), graph);
                self.reschedule(&key, now);
            }
        }
    }

    /// A basic group became a supergroup: its pending plan continues under the new id, without
    /// the old group's message ids (see `TaskGraph::move_to_chat`), unless the new id already
    /// has one, a task of it is in flight, or it waits on an old id (a classifier batch, a
    /// reaction), in which case the old plan is dropped: nothing can be sent to the old group
    /// any more. The agent's state about the chat moves with it.
    pub(crate) fn migrate_chat(&mut self, agent: &str, from: ChatId, to: ChatId, now: Timestamp) {
        if !self.agents.contains(agent) || from == to {
            return;
        }
        if self.safety.migrate_chat(agent, from, to) {
            self.effects.push(Effect::SaveAgentState(agent.to_string()));
        }
        let old = ConversationKey::new(agent, from);
        let new = ConversationKey::new(agent, to);
        if !self.graphs.contains_key(&old) {
            return;
        }
        let movable = self
            .graphs
            .get(&old)
            .is_some_and(|g| g.clone().move_to_chat(to));
        if self.in_flight.contains_key(&old) || self.graphs.contains_key(&new) || !movable {
            info!(conversation = %old, to = %to, "group upgraded to a supergroup: its pending plan is dropped");
            self.abandon_cancel_safe(&old);
            self.remove_graph(&old, now);
            return;
        }
        let Some(mut graph) = self.graphs.remove(&old) else {
            return;
        };
        self.armed.remove(&old);
        self.mark_dirty(&old);
        // The supergroup's message ids start over: the plan forgets the old group's.
        graph.move_to_chat(to);
        info!(conversation = %old, to = %to, "group upgraded to a supergroup: its plan continues there");
        self.graphs.insert(new.clone(), graph);
        self.mark_dirty(&new);
        self.reschedule(&new, now);
    }

    /// Whether the agent runs.
    pub(crate) fn has_agent(&self, agent: &str) -> bool {
        self.agents.contains(agent)
    }

    pub(crate) fn stop_agent(&mut self, agent: &str, now: Timestamp) {
        if !self.agents.remove(agent) {
            return;
        }
        self.safety.remove_agent(agent);
        self.presence.remove(agent);
        self.orphan_dormant(agent);
        let keys = keys_of(&self.graphs, agent);
        for key in keys {
            if let Some(f) = self.take_in_flight(&key) {
                self.effects.push(Effect::Abort {
                    key: key.clone(),
                    graph_id: f.graph_id,
                    task_id: f.task_id,
                });
            }
            self.armed.remove(&key);
            if let Some(g) = self.graphs.remove(&key) {
                self.orphans.insert(key, g);
            }
        }
        self.effects.push(Effect::StopAgent(agent.to_string()));
        if self.agents.is_empty() {
            self.begin_stop("no agent left to run".to_string(), now);
        }
    }
}

/// The conversations of `agent` among `graphs`.
fn keys_of<G>(graphs: &HashMap<ConversationKey, G>, agent: &str) -> Vec<ConversationKey> {
    graphs
        .keys()
        .filter(|k| k.agent == agent)
        .cloned()
        .collect()
}

/// Whether the graph's plan is under way: its `received` (if it has one) is done. Such a
/// conversation's next task is a reply and goes before new plans.
fn plan_under_way(graph: &TaskGraph) -> bool {
    !graph
        .tasks
        .first()
        .is_some_and(|t| t.kind() == TaskKind::Received && t.status != TaskStatus::Done)
}

#[cfg(test)]
mod tests;
