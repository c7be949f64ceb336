//! The owner's controls as runtime state, inside the scheduler: pauses, a group's trigger
//! mode and a chat's draft mode live in the agent's state (one copy, saved with it), and the
//! owner's questions about plans are answered from the graphs the scheduler holds (never from
//! files read behind its back). A command's answer becomes a `send` task in the graph of the
//! chat the command came from (Saved Messages or an admin chat), so it is durable, paced and
//! retried like any send. Part of the pure scheduler: no I/O; the driver carries requests in
//! and replies out, and persists what changed.

use jiff::Timestamp;
use tracing::info;

use crate::core::agent_state::Pause;
use crate::core::approval::ApprovalMode;
use crate::core::graph::spec::{IdempotencyKey, TaskSpec};
use crate::core::graph::{ConversationKey, Task, TaskGraph};
use crate::core::group::settings::TriggerMode;
use crate::core::model::{Chat, ChatId, MessageId};
use crate::core::scheduler::{Effect, Scheduler};

/// What the owner asks of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerRequest {
    /// Pause `chat` (`None`: every chat); pending plans there are held where they are (a
    /// draft keeps waiting for the owner) until the pause ends.
    Pause { chat: Option<ChatId>, pause: Pause },
    /// Resume `chat` (`None`: every chat, which also lifts a spending cap reached today).
    Resume { chat: Option<ChatId> },
    /// Drop the chat's pending plan.
    Forget { chat: ChatId },
    /// The pending plans (of one chat, or every chat).
    Plans { chat: Option<ChatId> },
    /// Set (or clear) a group's trigger mode.
    GroupMode {
        chat: ChatId,
        mode: Option<TriggerMode>,
    },
    /// Set (or clear) a chat's draft mode.
    ApprovalMode {
        chat: ChatId,
        mode: Option<ApprovalMode>,
    },
}

/// The runtime's answer to an [`OwnerRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerReply {
    /// Done; the chats whose pending plans were dropped (`forget`) or are held (`pause`).
    Done {
        dropped: Vec<ChatId>,
        held: Vec<ChatId>,
    },
    /// The pending plans asked for.
    Plans(Vec<TaskGraph>),
    /// The agent is not running.
    NoAgent,
}

impl Scheduler {
    /// Carries out the owner's request for `agent`.
    pub(crate) fn owner_request(
        &mut self,
        agent: &str,
        request: OwnerRequest,
        now: Timestamp,
    ) -> OwnerReply {
        if !self.agents.contains(agent) {
            return OwnerReply::NoAgent;
        }
        let mut dropped = Vec::new();
        let mut held = Vec::new();
        let changed = match request {
            OwnerRequest::Pause { chat, pause } => {
                let changed = self.safety.update(agent, |s| s.pauses.pause(chat, pause));
                // Plans stay where they are: a task running now finishes, nothing more starts
                // (`held_by_pause`) until the pause ends; a waiting draft keeps waiting.
                let keys: Vec<ConversationKey> = self
                    .graphs
                    .keys()
                    .filter(|k| k.agent == agent && chat.is_none_or(|c| c == k.chat))
                    .filter(|k| !self.is_owner_chat(agent, k.chat))
                    .cloned()
                    .collect();
                for key in keys {
                    self.reschedule(&key, now);
                    held.push(key.chat);
                }
                changed
            }
            OwnerRequest::Resume { chat } => {
                if chat.is_none() {
                    // Resuming everything also lifts a daily LLM cap reached today.
                    self.lift_budget(agent, now);
                }
                let resumed = self.safety.update(agent, |s| s.pauses.resume(chat));
                // Held plans go on; what came in during the pause is planned now (the newest
                // per chat, replacing a held plan as a newer message would).
                self.wake_agent(agent, now);
                let planned = self.plan_held(agent, now);
                resumed || planned
            }
            OwnerRequest::Forget { chat } => {
                if self.graphs.contains_key(&ConversationKey::new(agent, chat)) {
                    dropped.push(chat);
                }
                self.on_cancel(agent, chat, "the owner asked to forget it", now);
                false
            }
            OwnerRequest::Plans { chat } => {
                let mut plans: Vec<TaskGraph> = self
                    .graphs
                    .iter()
                    .filter(|(k, _)| k.agent == agent && chat.is_none_or(|c| c == k.chat))
                    .map(|(_, g)| (**g).clone())
                    .collect();
                plans.sort_by_key(|g| g.chat.id);
                return OwnerReply::Plans(plans);
            }
            OwnerRequest::GroupMode { chat, mode } => self.safety.set_group_mode(agent, chat, mode),
            OwnerRequest::ApprovalMode { chat, mode } => {
                self.safety.set_approval_mode(agent, chat, mode)
            }
        };
        if changed {
            self.effects.push(Effect::SaveAgentState(agent.to_string()));
        }
        OwnerReply::Done { dropped, held }
    }

    /// Until when a paused chat's plan is held: the pause's end, or (until resumed) a day
    /// from now, when it is looked at again. The owner's own chats are never held.
    pub(super) fn held_by_pause(&self, graph: &TaskGraph, now: Timestamp) -> Option<Timestamp> {
        let chat = graph.chat.id;
        if self.is_owner_chat(&graph.agent, chat) {
            return None;
        }
        let pauses = &self.safety.state(&graph.agent)?.pauses;
        if !pauses.is_paused(chat, now) {
            return None;
        }
        let day = crate::core::time::add(now, std::time::Duration::from_secs(86_400));
        Some(pauses.paused_until(chat, now).unwrap_or(day).min(day))
    }

    /// Whether the owner paused `chat` of `agent` at `now`.
    pub(crate) fn is_paused(&self, agent: &str, chat: ChatId, now: Timestamp) -> bool {
        self.safety
            .state(agent)
            .is_some_and(|s| s.pauses.is_paused(chat, now))
    }

    /// The answer to an owner command, as a `send` task ahead of its chat's upkeep (like a
    /// notice). Written in Saved Messages or the admin chat the persona names, it replies to
    /// the command there; written in any other chat the owner may command in (`--admin-chat`),
    /// it goes to the persona's admin chat, else to Saved Messages, never to that chat (its
    /// members would read it). `key` is derived from the command, so the same command
    /// answered twice is one message.
    pub(crate) fn answer_owner(
        &mut self,
        agent: &str,
        chat: Chat,
        command: MessageId,
        text: &str,
        now: Timestamp,
    ) {
        if !self.agents.contains(agent) {
            return;
        }
        let key = answer_key(chat.id, command);
        let in_place = self.safety.is_own_chat(agent, chat.id)
            || self.safety.is_persona_admin_chat(agent, chat.id);
        let (place, reply_to) = if in_place {
            (chat, Some(command))
        } else {
            match self.safety.answer_place(agent) {
                Some(place) => (place, None),
                None => return,
            }
        };
        let conversation = ConversationKey::new(agent, place.id);
        let spec = TaskSpec::Send {
            text: text.to_string(),
            reply_to,
            idempotency_key: key,
        };
        info!(event = "owner_answer_queued", conversation = %conversation, command = command.0, in_place, "the owner's command is answered");
        self.send_to_owner(agent, place, Task::new(spec, now), now);
    }
}

/// The idempotency key of the answer to the command `command` in `chat`: stable, positive,
/// never zero.
pub(crate) fn answer_key(chat: ChatId, command: MessageId) -> IdempotencyKey {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in chat.0.to_le_bytes().iter().chain(&command.0.to_le_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    IdempotencyKey(((h >> 1) as i64).max(1))
}

#[cfg(test)]
mod tests;
