//! Admission into the scheduler: what an admitted inbound message does to its conversation's
//! graph (history, a replacing plan, a coalescing `classify` task). Part of the pure
//! scheduler; the driver calls [`Scheduler::admit`] for every inbound event.

use jiff::Timestamp;
use tracing::{debug, info, warn};

use super::{Effect, Scheduler};
use crate::core::admission::Admission;
use crate::core::agent_state::Held;
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskKind, TaskSpec, TaskStatus};
use crate::core::model::{Chat, MessageId};

impl Scheduler {
    #[cfg(test)]
    /// An inbound message with the old yes/no trigger flag: see [`Scheduler::admit`].
    pub(crate) fn on_inbound(
        &mut self,
        agent: &str,
        chat: Chat,
        message: MessageId,
        trigger: bool,
        now: Timestamp,
    ) -> bool {
        self.admit(agent, chat, message, Admission::from_trigger(trigger), now)
    }

    /// An inbound message, as admission decided it: history leaves the graph alone; a plan
    /// replaces the conversation's graph by one `received` task (debounced, so a burst costs
    /// one plan); a group message for the classifier adds (or pushes back) the
    /// conversation's one waiting `classify` task; a message of a paused chat is held for the
    /// owner's resume. Returns whether the graph changed.
    pub(crate) fn admit(
        &mut self,
        agent: &str,
        chat: Chat,
        message: MessageId,
        mut admission: Admission,
        now: Timestamp,
    ) -> bool {
        if !self.agents.contains(agent) {
            warn!(agent = %agent, chat = %chat.id, "message for an agent that is not running ignored");
            return false;
        }
        self.xsend.saw(agent, &chat);
        if admission == Admission::History || self.stopping.is_some() {
            return false;
        }
        if self.safety.is_disabled(agent, chat.id) {
            debug!(agent = %agent, chat = %chat.id, "message in a disabled chat: not planning");
            return false;
        }
        if self.is_paused(agent, chat.id, now) {
            // The admission chain marks a paused chat's messages first; this also holds
            // whatever reached the queue before it knew of the pause.
            debug!(agent = %agent, chat = %chat.id, "message in a paused chat: not planning");
            self.hold(agent, chat, message);
            return false;
        }
        if admission == Admission::Paused {
            // Resumed since the chain saw the pause: a direct chat's message is planned; a
            // group's skipped the group decision, so it stays history.
            if !chat.kind.is_direct() {
                return false;
            }
            admission = Admission::PLAN;
        }
        if message.0 > 0 {
            // A redelivered message (catch-up, the unread scan, a restart after a crash)
            // that already went to a plan is history.
            if self.safety.already_handled(agent, chat.id, message) {
                debug!(agent = %agent, chat = %chat.id, message_id = %message, "message already handled: not planning again");
                return false;
            }
            // Durable with the graph that answers it (its `received` task, read back at
            // load), and in the agent state once that graph is gone.
            self.safety.note_handled(agent, chat.id, message, now);
            debug!(agent = %agent, chat = %chat.id, message_id = %message, "message admitted");
        }
        match admission {
            Admission::History | Admission::Paused => false,
            Admission::Plan { quote, at } => {
                self.replan(agent, chat, message, quote, at, now);
                true
            }
            Admission::Classify => {
                self.classify_later(agent, chat, message, now);
                true
            }
        }
    }

    /// Keeps `message` of a paused direct chat (the newest per chat) in the agent state, for
    /// [`Scheduler::plan_held`] on resume. A message already handled (a redelivery) or of a
    /// group is not kept.
    fn hold(&mut self, agent: &str, chat: Chat, message: MessageId) {
        if !chat.kind.is_direct()
            || message.0 <= 0
            || self.safety.already_handled(agent, chat.id, message)
        {
            return;
        }
        let id = chat.id;
        let changed = self.safety.update(agent, |s| match s.held.get(&id) {
            Some(held) if held.message >= message => false,
            _ => {
                s.held.insert(id, Held { chat, message });
                true
            }
        });
        if changed {
            debug!(agent = %agent, chat = %id, message_id = %message, "held for the owner's resume");
            self.effects.push(Effect::SaveAgentState(agent.to_string()));
        }
    }

    /// Plans each held message whose chat is no longer paused (the owner resumed it): the
    /// newest message that came in during the pause, unless it was handled since. Returns
    /// whether the agent state changed.
    pub(super) fn plan_held(&mut self, agent: &str, now: Timestamp) -> bool {
        let ready: Vec<Held> = self
            .safety
            .state(agent)
            .map(|s| {
                s.held
                    .values()
                    .filter(|h| !s.pauses.is_paused(h.chat.id, now))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for held in &ready {
            let id = held.chat.id;
            self.safety.update(agent, |s| s.held.remove(&id).is_some());
            if self.safety.is_disabled(agent, id)
                || self.safety.already_handled(agent, id, held.message)
            {
                continue;
            }
            info!(event = "held_message_planned", agent = %agent, chat = %id, message_id = held.message.0, "a message that came in during a pause is planned on resume");
            self.safety.note_handled(agent, id, held.message, now);
            self.replan(agent, held.chat.clone(), held.message, true, None, now);
        }
        !ready.is_empty()
    }

    /// Replaces the conversation's graph by a fresh `received` task for `message`.
    pub(super) fn replan(
        &mut self,
        agent: &str,
        chat: Chat,
        message: MessageId,
        quote: bool,
        at: Option<Timestamp>,
        now: Timestamp,
    ) {
        let key = ConversationKey::new(agent, chat.id);
        let from = at.map_or(now, |at| at.max(now));
        // A plan not started yet keeps its reading time (a second message does not make a
        // persona read later); the debounce still applies.
        let pending = self.graphs.get(&key).and_then(|g| {
            g.tasks
                .first()
                .filter(|t| t.kind() == TaskKind::Received && t.status == TaskStatus::Pending)
                .and_then(|t| Some((t.not_before?, t.woke_at)))
        });
        let (not_before, woke) = self.plan_ready_at(agent, from, pending);
        let mut graph = TaskGraph::with_received(agent, chat, now, Some(message), not_before);
        if let Some(t) = graph.tasks.first_mut() {
            t.woke_at = woke;
        }
        if !quote
            && let Some(TaskSpec::Received { no_quote, .. }) =
                graph.tasks.first_mut().map(|t| &mut t.spec)
        {
            *no_quote = true;
        }
        // A draft the owner has (or is about to get) is void: its replacement, posted once
        // the draft gap allows, says so (no notice per message).
        graph.superseded = self.supersede(&key, now);
        if let Some(old) = self.graphs.get(&key) {
            debug!(conversation = %key, old = %old.id, new = %graph.id, "replanning");
            // Telegram's "wait" and a group batch waiting for the classifier stay.
            carry_over(old, &mut graph, now);
            // A scheduled intent whose plan was not made yet is answered by the new plan.
            if let Some(TaskSpec::Received {
                intent: Some(fired),
                ..
            }) = old
                .tasks
                .first()
                .filter(|t| t.status != TaskStatus::Done)
                .map(|t| &t.spec)
                && let Some(TaskSpec::Received { intent, .. }) =
                    graph.tasks.first_mut().map(|t| &mut t.spec)
            {
                *intent = Some(fired.clone());
                if fired.urgent {
                    // An urgent intent runs now, night or not: the message rides along.
                    graph.tasks[0].not_before =
                        Some(crate::core::time::add(now, self.config.debounce));
                    graph.tasks[0].woke_at = None;
                }
            }
        }
        // A planning step of the superseded graph is abandoned; a side effect in flight is
        // allowed to finish, but whatever it returns is discarded.
        self.abandon_cancel_safe(&key);
        self.graphs.insert(key.clone(), Box::new(graph));
        self.mark_dirty(&key);
        self.reschedule(&key, now);
    }

    /// Makes sure the conversation has one `classify` task waiting for the quiet period
    /// after `message`: the pending one is pushed back (coalescing the burst), else a new one
    /// joins the graph (after the one in flight, if any: the conversation runs one task at
    /// a time), else a graph is made for it.
    pub(super) fn classify_later(
        &mut self,
        agent: &str,
        chat: Chat,
        message: MessageId,
        now: Timestamp,
    ) {
        let key = ConversationKey::new(agent, chat.id);
        let not_before = crate::core::time::add(now, self.config.debounce);
        let spec = TaskSpec::Classify {
            message_id: message,
        };
        match self.graphs.get_mut(&key) {
            Some(graph) => {
                let waiting = graph
                    .tasks
                    .iter_mut()
                    .find(|t| t.kind() == TaskKind::Classify && t.status == TaskStatus::Pending);
                match waiting {
                    Some(t) => {
                        t.spec = spec;
                        t.not_before = Some(not_before);
                        t.updated_at = now;
                    }
                    None => {
                        let mut t = Task::new(spec, now);
                        t.not_before = Some(not_before);
                        graph.tasks.push(t);
                    }
                }
            }
            None => {
                let mut t = Task::new(spec, now);
                t.not_before = Some(not_before);
                let graph = TaskGraph::with_tasks(agent, chat, now, vec![t]);
                self.graphs.insert(key.clone(), Box::new(graph));
            }
        }
        self.mark_dirty(&key);
        self.reschedule(&key, now);
    }
}

/// What a replacing plan takes from the graph it replaces: Telegram's wait (it applies to
/// the conversation) and a group batch still waiting for the classifier.
pub(super) fn carry_over(old: &TaskGraph, new: &mut TaskGraph, now: Timestamp) {
    new.parked_until = old.parked_until.filter(|until| *until > now);
    if let Some(classify) = old
        .tasks
        .iter()
        .find(|t| t.kind() == TaskKind::Classify && t.status != TaskStatus::Done)
    {
        let mut carried = Task::new(classify.spec.clone(), now);
        carried.not_before = classify.not_before;
        new.tasks.push(carried);
    }
}
