//! Account safety inside the scheduler: the per-agent state that outlives a restart (chats
//! Telegram forbade, the account breaker) and the decisions made from it. Pure: the
//! scheduler calls it and turns its answers into effects (save the agent state, queue the
//! owner alert as a plan of its own); the driver loads and saves the state through `store`.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;

use crate::core::agent_state::{AgentState, Breaker, Disabled};
use crate::core::graph::{ConversationKey, Task, TaskGraph};
use crate::core::model::{Chat, ChatId, ChatKind, MessageId};

/// How long the account breaker holds after Telegram limits an account.
pub(crate) const BREAKER_HOLD: Duration = Duration::from_secs(24 * 3600);

/// The safety state of every running agent, each agent's own user id (its Saved Messages
/// chat) and the admin chat its persona names (`# Admin Chat`), if any.
#[derive(Debug, Default)]
pub(crate) struct AccountSafety {
    states: HashMap<String, AgentState>,
    self_ids: HashMap<String, i64>,
    admin_chats: HashMap<String, ChatId>,
}

impl AccountSafety {
    pub(crate) fn new(self_ids: HashMap<String, i64>) -> AccountSafety {
        AccountSafety {
            states: HashMap::new(),
            self_ids,
            admin_chats: HashMap::new(),
        }
    }

    /// The admin chat the agent's persona names (`None`: it names none), as of its last load.
    pub(crate) fn set_admin_chat(&mut self, agent: &str, chat: Option<ChatId>) {
        match chat {
            Some(c) => self.admin_chats.insert(agent.to_string(), c),
            None => self.admin_chats.remove(agent),
        };
    }

    /// Where drafts and the answers to the owner's commands go: the admin chat the persona
    /// names, else the agent's Saved Messages.
    pub(crate) fn answer_place(&self, agent: &str) -> Option<Chat> {
        match self.admin_chats.get(agent) {
            Some(id) => Some(Chat {
                id: *id,
                kind: if id.0 > 0 {
                    ChatKind::Direct
                } else {
                    ChatKind::Group
                },
                title: "Admin chat".into(),
            }),
            None => self.own_chat(agent),
        }
    }

    /// Whether the agent's persona names `chat` as its admin chat.
    pub(crate) fn is_persona_admin_chat(&self, agent: &str, chat: ChatId) -> bool {
        self.admin_chats.get(agent) == Some(&chat)
    }

    /// Adds an agent started while the runtime runs (hot reload), with its state from disk.
    pub(crate) fn add_agent(&mut self, agent: &str, self_id: i64, state: AgentState) {
        self.self_ids.insert(agent.to_string(), self_id);
        self.states.insert(agent.to_string(), state);
    }

    /// Installs an agent's state as loaded from disk.
    pub(crate) fn set_state(&mut self, agent: &str, state: AgentState) {
        self.states.insert(agent.to_string(), state);
    }

    pub(crate) fn state(&self, agent: &str) -> Option<&AgentState> {
        self.states.get(agent)
    }

    /// Schedule calls the agent made on local day `day`.
    pub(crate) fn schedule_calls(&self, agent: &str, day: jiff::civil::Date) -> u32 {
        self.states
            .get(agent)
            .and_then(|s| s.schedule_calls)
            .filter(|(d, _)| *d == day)
            .map_or(0, |(_, n)| n)
    }

    /// The `xsend` notes of UTC day `day`: into `target`, or in all (`None`).
    pub(crate) fn xsend_count(
        &self,
        agent: &str,
        day: jiff::civil::Date,
        target: Option<ChatId>,
    ) -> u32 {
        let Some(x) = self
            .states
            .get(agent)
            .and_then(|s| s.xsend.as_ref())
            .filter(|x| x.date == day)
        else {
            return 0;
        };
        match target {
            Some(chat) => x.chats.get(&chat).copied().unwrap_or(0),
            None => x.total,
        }
    }

    /// Counts one `xsend` note into `target` on UTC day `day` (the state must then be saved);
    /// an earlier day's counts go.
    pub(crate) fn count_xsend(&mut self, agent: &str, day: jiff::civil::Date, target: ChatId) {
        let state = self.states.entry(agent.to_string()).or_default();
        let x = state.xsend.take().filter(|x| x.date == day).unwrap_or(
            crate::core::agent_state::XSendDay {
                date: day,
                total: 0,
                chats: std::collections::BTreeMap::new(),
            },
        );
        let mut x = x;
        x.total += 1;
        *x.chats.entry(target).or_default() += 1;
        state.xsend = Some(x);
    }

    /// Counts one schedule call on local day `day` (the state must then be saved).
    pub(crate) fn count_schedule_call(&mut self, agent: &str, day: jiff::civil::Date) {
        let n = self.schedule_calls(agent, day);
        self.states
            .entry(agent.to_string())
            .or_default()
            .schedule_calls = Some((day, n + 1));
    }

    pub(crate) fn is_disabled(&self, agent: &str, chat: ChatId) -> bool {
        self.states.get(agent).is_some_and(|s| s.is_disabled(chat))
    }

    /// Whether `message` in `chat` was already handed to a plan (a redelivery).
    pub(crate) fn already_handled(&self, agent: &str, chat: ChatId, message: MessageId) -> bool {
        self.states
            .get(agent)
            .is_some_and(|s| s.already_handled(chat, message))
    }

    /// Records that `message` in `chat` went to a plan; returns whether the state changed.
    pub(crate) fn note_handled(
        &mut self,
        agent: &str,
        chat: ChatId,
        message: MessageId,
        at: Timestamp,
    ) -> bool {
        self.states
            .entry(agent.to_string())
            .or_default()
            .note_handled(chat, message, at)
    }

    /// The chat's handled mark, if it has one.
    pub(crate) fn handled_mark(
        &self,
        agent: &str,
        chat: ChatId,
    ) -> Option<crate::core::agent_state::HandledMark> {
        self.states.get(agent)?.handled.get(&chat).copied()
    }

    /// Drops every agent's handled marks noted before `before` (see
    /// [`crate::core::agent_state::AgentState::prune_handled`]); returns how many.
    pub(crate) fn prune_handled(&mut self, now: Timestamp) -> usize {
        self.states.values_mut().map(|s| s.prune_handled(now)).sum()
    }

    /// Disables a chat for good (until an operator clears it).
    pub(crate) fn disable_chat(&mut self, key: &ConversationKey, reason: String, now: Timestamp) {
        self.states
            .entry(key.agent.clone())
            .or_default()
            .disabled_chats
            .insert(key.chat, Disabled { since: now, reason });
    }

    /// Whether `chat` is the agent's own chat (its Saved Messages).
    pub(crate) fn is_own_chat(&self, agent: &str, chat: ChatId) -> bool {
        self.self_ids.get(agent).is_some_and(|id| *id == chat.0)
    }

    /// The agent's own chat (its Saved Messages): where alerts and the runtime's own upkeep
    /// tasks go.
    pub(crate) fn own_chat(&self, agent: &str) -> Option<Chat> {
        let self_id = *self.self_ids.get(agent)?;
        Some(Chat {
            id: ChatId(self_id),
            kind: ChatKind::Direct,
            title: "Saved Messages".into(),
        })
    }

    /// Trips the agent's breaker for [`BREAKER_HOLD`] and returns the alert for its owner
    /// (the scheduler sends it like any notice).
    pub(crate) fn trip_breaker(&mut self, agent: &str, reason: String, now: Timestamp) -> String {
        let until = crate::core::time::add(now, BREAKER_HOLD);
        self.states.entry(agent.to_string()).or_default().breaker = Some(Breaker {
            until,
            reason: reason.clone(),
        });
        format!(
            "personad: Telegram limited this account ({reason}). Until {until} the agent only answers people who wrote to it first. Check @SpamBot for details."
        )
    }

    /// While an agent's breaker holds, only plans that answer someone who wrote in the chat
    /// (and alerts to the owner) may send.
    pub(crate) fn breaker_blocks(&self, graph: &TaskGraph, task: &Task, now: Timestamp) -> bool {
        let Some(self_id) = self.self_ids.get(&graph.agent) else {
            return false;
        };
        task.kind().needs_idempotency_key()
            && self
                .states
                .get(&graph.agent)
                .is_some_and(|s| s.breaker_active(now))
            && !graph.answers_inbound()
            && graph.chat.id.0 != *self_id
    }

    /// The agent's budget marks, to read and change.
    pub(crate) fn budget_mut(
        &mut self,
        agent: &str,
    ) -> &mut std::collections::BTreeMap<
        crate::core::agent_state::CapSource,
        crate::core::agent_state::BudgetMark,
    > {
        &mut self.states.entry(agent.to_string()).or_default().budget
    }

    /// The owner's draft-mode override of a chat.
    pub(crate) fn approval_mode(
        &self,
        agent: &str,
        chat: ChatId,
    ) -> Option<crate::core::approval::ApprovalMode> {
        self.states
            .get(agent)
            .and_then(|s| s.approval_modes.get(&chat).copied())
    }

    /// Sets or clears a chat's draft-mode override; returns whether the state changed.
    pub(crate) fn set_approval_mode(
        &mut self,
        agent: &str,
        chat: ChatId,
        mode: Option<crate::core::approval::ApprovalMode>,
    ) -> bool {
        let state = self.states.entry(agent.to_string()).or_default();
        set_override(&mut state.approval_modes, chat, mode)
    }

    /// Changes the agent's state with `change`, which says whether it changed anything.
    pub(crate) fn update(
        &mut self,
        agent: &str,
        change: impl FnOnce(&mut AgentState) -> bool,
    ) -> bool {
        change(self.states.entry(agent.to_string()).or_default())
    }

    /// Sets or clears a group's trigger-mode override; returns whether the state changed.
    pub(crate) fn set_group_mode(
        &mut self,
        agent: &str,
        chat: ChatId,
        mode: Option<crate::core::group::settings::TriggerMode>,
    ) -> bool {
        let state = self.states.entry(agent.to_string()).or_default();
        set_override(&mut state.group_modes, chat, mode)
    }

    /// Moves what is kept about a chat (disabled mark, trigger and draft modes, a pause) to its
    /// new id;
    /// returns whether anything moved.
    pub(crate) fn migrate_chat(&mut self, agent: &str, from: ChatId, to: ChatId) -> bool {
        let Some(state) = self.states.get_mut(agent) else {
            return false;
        };
        let mut moved = false;
        if let Some(d) = state.disabled_chats.remove(&from) {
            state.disabled_chats.insert(to, d);
            moved = true;
        }
        if let Some(m) = state.group_modes.remove(&from) {
            state.group_modes.entry(to).or_insert(m);
            moved = true;
        }
        if let Some(m) = state.approval_modes.remove(&from) {
            state.approval_modes.entry(to).or_insert(m);
            moved = true;
        }
        if let Some(p) = state.pauses.chats.remove(&from) {
            state.pauses.chats.entry(to).or_insert(p);
            moved = true;
        }
        moved
    }

    /// Forgets a stopped agent (its state stays on disk).
    pub(crate) fn remove_agent(&mut self, agent: &str) {
        self.self_ids.remove(agent);
    }
}

/// Sets (or with `None` clears) a per-chat override; returns whether it changed.
fn set_override<T: Copy + PartialEq>(
    map: &mut std::collections::BTreeMap<ChatId, T>,
    chat: ChatId,
    value: Option<T>,
) -> bool {
    let before = match value {
        Some(v) => map.insert(chat, v),
        None => map.remove(&chat),
    };
    before != value
}
