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
use crate::core::model::ChatId;

/// A graph whose next deadline is nearer than this stays in RAM.
pub(crate) const DORMANT_AFTER: Duration = Duration::from_secs(10 * 60);

/// The dormant conversations, compactly: an entry names its agent by index (a few agents,
/// thousands of chats), so it holds no copy of the name (about 100 bytes an entry in all).
#[derive(Default)]
pub(super) struct Dormant {
    /// The agents' names, each once.
    agents: Vec<String>,
    /// Each one's next deadline, and whether its agent is stopped (then it waits for the
    /// agent to come back, not for its deadline).
    at: HashMap<(u32, ChatId), Sleeper>,
    /// The running agents' dormant conversations by deadline.
    due: BTreeSet<(Timestamp, u32, ChatId)>,
    orphans: usize,
}

#[derive(Clone, Copy)]
struct Sleeper {
    at: Timestamp,
    orphan: bool,
}

impl Dormant {
    fn agent(&self, name: &str) -> Option<u32> {
        self.agents
            .iter()
            .position(|a| a == name)
            .and_then(|i| u32::try_from(i).ok())
    }

    fn id(&self, key: &ConversationKey) -> Option<(u32, ChatId)> {
        Some((self.agent(&key.agent)?, key.chat))
    }

    fn key(&self, (agent, chat): (u32, ChatId)) -> ConversationKey {
        let name = self.agents.get(agent as usize).map_or("", String::as_str);
        ConversationKey::new(name, chat)
    }

    fn contains(&self, key: &ConversationKey) -> bool {
        self.id(key).is_some_and(|id| self.at.contains_key(&id))
    }

    /// Dormant and waiting for its deadline (its agent runs).
    fn waits_for_time(&self, key: &ConversationKey) -> bool {
        self.id(key)
            .and_then(|id| self.at.get(&id))
            .is_some_and(|s| !s.orphan)
    }

    fn insert(&mut self, key: &ConversationKey, at: Timestamp) {
        let agent = match self.agent(&key.agent) {
            Some(i) => i,
            None => {
                self.agents.push(key.agent.clone());
                u32::try_from(self.agents.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.remove(key);
        self.due.insert((at, agent, key.chat));
        self.at
            .insert((agent, key.chat), Sleeper { at, orphan: false });
    }

    fn remove(&mut self, key: &ConversationKey) -> bool {
        let Some(id) = self.id(key) else {
            return false;
        };
        let Some(s) = self.at.remove(&id) else {
            return false;
        };
        if s.orphan {
            self.orphans -= 1;
        } else {
            self.due.remove(&(s.at, id.0, id.1));
        }
        true
    }

    /// The running agent's dormant conversations.
    fn keys_of(&self, agent: &str) -> Vec<ConversationKey> {
        let Some(a) = self.agent(agent) else {
            return Vec::new();
        };
        self.at
            .iter()
            .filter(|(id, s)| id.0 == a && !s.orphan)
            .map(|(id, _)| self.key(*id))
            .collect()
    }

    fn due_by(&self, now: Timestamp) -> impl Iterator<Item = ConversationKey> + '_ {
        self.due
            .iter()
            .take_while(move |(at, _, _)| *at <= now)
            .map(|(_, agent, chat)| self.key((*agent, *chat)))
    }

    /// The agent stopped (`orphan`: its dormant conversations wait for it, not for their
    /// deadlines), or is back.
    fn set_orphans(&mut self, agent: &str, orphan: bool) {
        let Some(a) = self.agent(agent) else {
            return;
        };
        for (&(_, chat), s) in self
            .at
            .iter_mut()
            .filter(|(id, s)| id.0 == a && s.orphan != orphan)
        {
            s.orphan = orphan;
            if orphan {
                self.orphans += 1;
                self.due.remove(&(s.at, a, chat));
            } else {
                self.orphans -= 1;
                self.due.insert((s.at, a, chat));
            }
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
            || self.is_owner_chat(&key.agent, key.chat)
        {
            return false;
        }
        let Some(at) = self.graphs.get(key).and_then(|g| own_timer(g, now)) else {
            return false;
        };
        self.graphs.remove(key);
        self.armed.remove(key);
        self.dormant.insert(key, at);
        debug!(conversation = %key, until = %at, "graph dormant: out of RAM until its deadline or its chat's next event");
        true
    }

    /// Whether the conversation's graph is dormant (out of RAM).
    pub(crate) fn is_dormant(&self, key: &ConversationKey) -> bool {
        self.dormant.contains(key)
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
        self.dormant.keys_of(agent)
    }

    /// The dormant conversations an [`Scheduler::advance`] at `now` would touch: those whose
    /// deadline has come, and those where an intent fires. The driver wakes them first.
    pub(crate) fn wanted(&self, now: Timestamp) -> Vec<ConversationKey> {
        if self.dormant.at.is_empty() {
            return Vec::new();
        }
        let mut keys: Vec<ConversationKey> = self.dormant.due_by(now).collect();
        for (agent, p) in &self.presence {
            if p.boundary.is_none_or(|b| b > now) {
                continue;
            }
            for i in &p.intents {
                let key = ConversationKey::new(agent.as_str(), i.chat);
                if crate::core::intents::instant(i.due, &p.tz) <= now
                    && self.dormant.waits_for_time(&key)
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
            self.graphs.insert(key.clone(), Box::new(graph));
            self.reschedule(key, now);
        }
    }

    /// The earliest deadline of a dormant conversation.
    pub(super) fn next_dormant(&self) -> Option<Timestamp> {
        self.dormant.due.first().map(|(at, _, _)| *at)
    }

    /// The agent stopped: its dormant conversations wait for it, not for their deadlines.
    pub(super) fn orphan_dormant(&mut self, agent: &str) {
        self.dormant.set_orphans(agent, true);
    }

    /// The agent is back: its dormant conversations wait for their deadlines again.
    pub(super) fn adopt_dormant(&mut self, agent: &str) {
        self.dormant.set_orphans(agent, false);
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::core::config::RuntimeConfig;
    use crate::core::graph::{Task, TaskSpec};
    use crate::core::model::{Chat, ChatKind};
    use crate::core::safety::AccountSafety;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn sched() -> Scheduler {
        let mut self_ids = HashMap::new();
        self_ids.insert("a".to_string(), 1);
        Scheduler::new(
            Arc::new(RuntimeConfig::default()),
            ["a".to_string()],
            AccountSafety::new(self_ids),
        )
    }

    /// A graph of chat `id` whose message is handled and whose next send waits `wait` seconds
    /// from `at(0)`.
    fn waiting(id: i64, wait: u64) -> TaskGraph {
        let chat = Chat {
            id: ChatId(id),
            kind: ChatKind::Direct,
            title: format!("c{id}"),
        };
        let mut g = TaskGraph::with_received("a", chat, at(0), None, at(0));
        g.tasks[0].status = TaskStatus::Done;
        let mut w = Task::new(TaskSpec::wait(wait as f64, false), at(0));
        w.not_before = Some(at(wait as i64));
        let send = Task::new(TaskSpec::send("later", None), at(0));
        let first = g.tasks[0].id.clone();
        g.append_chain(&first, vec![w, send]);
        g
    }

    fn key(id: i64) -> ConversationKey {
        ConversationKey::new("a", ChatId(id))
    }

    #[test]
    fn only_a_graph_waiting_past_the_threshold_on_its_own_timer_goes_dormant_at_load() {
        let mut s = sched();
        let mut parked = waiting(4, 3 * 3600);
        parked.parked_until = Some(at(3 * 3600));
        s.load(vec![waiting(2, 3600), waiting(3, 60), parked], at(0));
        assert!(s.is_dormant(&key(2)), "an hour away: out of RAM");
        assert!(!s.is_dormant(&key(3)), "a minute away: stays");
        assert!(!s.is_dormant(&key(4)), "a park (a hold) keeps it in RAM");
        assert_eq!((s.graphs(), s.dormant()), (3, 1));
        assert_eq!(s.next_wake(), Some(at(60)));
    }

    #[test]
    fn its_deadline_makes_it_wanted_and_a_wake_puts_it_back_in_the_queues() {
        let mut s = sched();
        s.load(vec![waiting(2, 3600)], at(0));
        assert_eq!(s.next_wake(), Some(at(3600)), "its deadline is the loop's");
        assert!(s.wanted(at(3599)).is_empty());
        assert_eq!(s.wanted(at(3600)), [key(2)]);
        s.wake(&key(2), Some(waiting(2, 3600)), at(3600));
        assert!(!s.is_dormant(&key(2)));
        s.advance(at(3600));
        s.start_ready(at(3600));
        let started: Vec<TaskKind> = s
            .take_effects()
            .iter()
            .filter_map(|e| match e {
                super::super::Effect::Start(st) => Some(st.task.kind()),
                _ => None,
            })
            .collect();
        assert_eq!(started, [TaskKind::Wait]);
    }

    #[test]
    fn a_stopped_agents_dormant_graphs_wait_for_it_not_for_their_deadlines() {
        let mut s = sched();
        s.load(vec![waiting(2, 3600)], at(0));
        s.stop_agent("a", at(10));
        assert_eq!((s.graphs(), s.orphans()), (0, 1));
        assert!(s.wanted(at(7200)).is_empty(), "no agent to run it");
        s.add_agent(
            "a",
            1,
            crate::core::agent_state::AgentState::default(),
            at(20),
        );
        assert_eq!((s.graphs(), s.orphans(), s.dormant()), (1, 0, 1));
        assert_eq!(s.wanted(at(7200)), [key(2)]);
    }

    #[test]
    fn a_graph_changed_while_dormant_is_no_longer_dormant() {
        let mut s = sched();
        s.load(vec![waiting(2, 3600)], at(0));
        s.mark_dirty(&key(2));
        assert!(!s.is_dormant(&key(2)));
        assert_eq!(s.dormant(), 0);
    }
}
