//! Dormant conversations: a graph that has settled for a long while (its next task waits for
//! a timer at least [`DORMANT_AFTER`] away: a follow-up hours later) leaves RAM once its state
//! is durable, and the scheduler keeps only its key and that deadline. The driver brings it
//! back from the store before anything touches it: an event for its chat, its deadline coming,
//! an intent firing there, or an owner's request over every chat of its agent
//! ([`Scheduler::wanted`] and [`Scheduler::dormant_of`] say which). Only graphs nothing but
//! their own timer can move go dormant: no message waiting to be read, no draft before the
//! owner, no plan it superseded, no park, not the owner's chat; so the scheduler's scans over
//! drafts and the agent-wide reschedules (a pause lifted, a new day, a cap lifted) have
//! nothing to do for them, and their deadline is their own, never a hold's.
//!
//! Pure bookkeeping, no I/O: the driver loads, the scheduler decides. Called by the driver
//! (`evict`, `wanted`, `wake`) and by the scheduler's own load and agent changes.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use jiff::Timestamp;
use tracing::{debug, error};

use super::Scheduler;
use crate::core::graph::{ConversationKey, TaskGraph, TaskKind, TaskStatus};

/// A graph whose next deadline is nearer than this stays in RAM.
pub(crate) const DORMANT_AFTER: Duration = Duration::from_secs(10 * 60);

/// The dormant conversations.
#[derive(Default)]
pub(super) struct Dormant {
    /// Each one's next deadline, and whether its agent is stopped (then it waits for the
    /// agent to come back, not for its deadline).
    at: HashMap<ConversationKey, Sleeper>,
    /// The running agents' dormant conversations by deadline.
    due: BTreeSet<(Timestamp, ConversationKey)>,
    orphans: usize,
}

#[derive(Clone, Copy)]
struct Sleeper {
    at: Timestamp,
    orphan: bool,
}

impl Dormant {
    fn insert(&mut self, key: ConversationKey, at: Timestamp) {
        self.due.insert((at, key.clone()));
        self.at.insert(key, Sleeper { at, orphan: false });
    }

    fn remove(&mut self, key: &ConversationKey) -> bool {
        let Some(s) = self.at.remove(key) else {
            return false;
        };
        if s.orphan {
            self.orphans -= 1;
        } else {
            self.due.remove(&(s.at, key.clone()));
        }
        true
    }

    fn keys_of(&self, agent: &str, orphan: bool) -> Vec<ConversationKey> {
        self.at
            .iter()
            .filter(|(k, s)| k.agent == agent && s.orphan == orphan)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn set_orphan(&mut self, key: &ConversationKey, orphan: bool) {
        let Some(s) = self.at.get_mut(key) else {
            return;
        };
        if s.orphan == orphan {
            return;
        }
        s.orphan = orphan;
        if orphan {
            self.orphans += 1;
            self.due.remove(&(s.at, key.clone()));
        } else {
            self.orphans -= 1;
            self.due.insert((s.at, key.clone()));
        }
    }
}

/// Whether nothing but the graph's own timer can move it (see the module documentation), and
/// that timer then.
fn own_timer(graph: &TaskGraph, now: Timestamp) -> Option<Timestamp> {
    if graph.superseded.is_some()
        || graph.parked_until.is_some()
        || graph.moves_within(now, DORMANT_AFTER)
    {
        return None;
    }
    let waits_on_someone = graph.tasks.iter().any(|t| {
        t.status != TaskStatus::Done
            && matches!(
                t.kind(),
                TaskKind::Received | TaskKind::Draft | TaskKind::Classify
            )
    });
    if waits_on_someone {
        return None;
    }
    graph.next_deadline()
}

impl Scheduler {
    /// Moves the conversation's graph out of RAM when it may go dormant: settled for at least
    /// [`DORMANT_AFTER`], nothing queued, running or unsaved for it. The caller knows its
    /// newest state is durable (no write of it waiting or running). Returns whether it went.
    pub(crate) fn evict(&mut self, key: &ConversationKey, now: Timestamp) -> bool {
        if self.in_flight.contains_key(key)
            || self.queued.contains(key)
            || self.dirty_set.contains(key)
            || !self.agents.contains(&key.agent)
            || self.is_owner_chat(&key.agent, key.chat)
        {
            return false;
        }
        let Some(at) = self.graphs.get(key).and_then(|g| own_timer(g, now)) else {
            return false;
        };
        self.graphs.remove(key);
        self.armed.remove(key);
        self.dormant.insert(key.clone(), at);
        debug!(conversation = %key, until = %at, "graph dormant: out of RAM until its deadline or its chat's next event");
        true
    }

    /// Whether the conversation's graph is dormant (out of RAM).
    pub(crate) fn is_dormant(&self, key: &ConversationKey) -> bool {
        self.dormant.at.contains_key(key)
    }

    /// How many graphs of running agents are dormant.
    pub(crate) fn dormant(&self) -> usize {
        self.dormant.at.len() - self.dormant.orphans
    }

    /// Dormant graphs of stopped agents.
    pub(super) fn dormant_orphans(&self) -> usize {
        self.dormant.orphans
    }

    /// The dormant conversations of `agent` (an owner's request over all its chats needs
    /// them back first).
    pub(crate) fn dormant_of(&self, agent: &str) -> Vec<ConversationKey> {
        self.dormant.keys_of(agent, false)
    }

    /// The dormant conversations an [`Scheduler::advance`] at `now` would touch: those whose
    /// deadline has come, and those where an intent fires. The driver wakes them first.
    pub(crate) fn wanted(&self, now: Timestamp) -> Vec<ConversationKey> {
        if self.dormant.at.is_empty() {
            return Vec::new();
        }
        let mut keys: Vec<ConversationKey> = self
            .dormant
            .due
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, k)| k.clone())
            .collect();
        for (agent, p) in &self.presence {
            if p.boundary.is_none_or(|b| b > now) {
                continue;
            }
            for i in &p.intents {
                let key = ConversationKey::new(agent.as_str(), i.chat);
                if crate::core::intents::instant(i.due, &p.tz) <= now
                    && self.dormant.at.get(&key).is_some_and(|s| !s.orphan)
                {
                    keys.push(key);
                }
            }
        }
        keys
    }

    /// A dormant conversation back from the store: its graph goes back into RAM and into
    /// the queues (`None`: it has none any more, or it could not be read and was moved aside).
    pub(crate) fn wake(&mut self, key: &ConversationKey, graph: Option<TaskGraph>, now: Timestamp) {
        if !self.dormant.remove(key) {
            return;
        }
        if let Some(graph) = graph {
            self.graphs.insert(key.clone(), graph);
            self.reschedule(key, now);
        }
    }

    /// The earliest deadline of a dormant conversation.
    pub(super) fn next_dormant(&self) -> Option<Timestamp> {
        self.dormant.due.first().map(|(at, _)| *at)
    }

    /// The agent stopped: its dormant conversations wait for it, not for their deadlines.
    pub(super) fn orphan_dormant(&mut self, agent: &str) {
        for key in self.dormant.keys_of(agent, false) {
            self.dormant.set_orphan(&key, true);
        }
    }

    /// The agent is back: its dormant conversations wait for their deadlines again.
    pub(super) fn adopt_dormant(&mut self, agent: &str) {
        for key in self.dormant.keys_of(agent, true) {
            self.dormant.set_orphan(&key, false);
        }
    }

    /// A graph of `key` changed while it was dormant: the driver did not wake it first (a
    /// bug). The change wins (its write replaces the file) and the dormant entry goes, so the
    /// conversation is never both.
    pub(super) fn changed_while_dormant(&mut self, key: &ConversationKey) {
        if self.dormant.remove(key) {
            error!(event = "dormant_graph_replaced", conversation = %key, "a dormant graph was changed without being read back first; the change replaces it");
        }
    }
}
