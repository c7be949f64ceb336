//! `xsend` inside the scheduler: a plan's note to the persona's future self in another of its
//! chats becomes a plan there that shows the note once (as a firing intent does, through
//! `presence::replan_intent`), and never a message. What it may reach is checked here: only a
//! chat the persona already has (one it planned in or was written to since the start, or one
//! with a handled mark in its state), never the chat it came from, never the owner's own chats,
//! a paused or a disabled chat; at most [`PER_CHAT_PER_DAY`] notes into one chat and
//! [`PER_AGENT_PER_DAY`] in all per UTC day (counted in the agent's state, across restarts). A refusal is logged and
//! shown to the operator as a notable event; nothing else happens.

use std::collections::HashMap;

use jiff::Timestamp;
use tracing::{info, warn};

use super::{ConversationKey, Scheduler};
use crate::core::intents::Fired;
use crate::core::model::{Chat, ChatId, ChatKind, ChatRef};

/// Most notes one chat gets from the persona's other chats per UTC day.
pub(crate) const PER_CHAT_PER_DAY: u32 = 3;
/// Most notes per agent per UTC day.
pub(crate) const PER_AGENT_PER_DAY: u32 = 20;
/// Longest note kept, in characters.
const MAX_NOTE_CHARS: usize = 1000;

/// Why a note may not go where it was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("the target is this chat")]
    ThisChat,
    #[error("chat {0} is the owner's")]
    OwnerChat(ChatId),
    #[error("chat {0} is not one of this persona's chats")]
    Unknown(ChatId),
    #[error("chat {0} is disabled")]
    Disabled(ChatId),
    #[error("chat {0} is paused")]
    Paused(ChatId),
    #[error("chat {0} already got {PER_CHAT_PER_DAY} notes today")]
    ChatCap(ChatId),
    #[error("{PER_AGENT_PER_DAY} notes today already")]
    AgentCap,
    #[error("no chat of this persona goes by the name {0:?}")]
    NoSuchName(String),
    #[error("several chats go by the name {0:?} ({1}); name it by its id")]
    SeveralNamed(String, String),
}

/// The chats each agent has been seen in (their titles); the day's counts are in the agent's
/// state (`AgentState::xsend`), so a restart keeps them.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    chats: HashMap<(String, ChatId), Chat>,
}

impl Ledger {
    /// `chat` is one of `agent`'s (a message came in there, or a plan was made).
    pub(super) fn saw(&mut self, agent: &str, chat: &Chat) {
        self.chats
            .entry((agent.to_owned(), chat.id))
            .or_insert_with(|| chat.clone());
    }
}

impl Scheduler {
    /// Carries out a plan's `xsend` from `from` to `target`, or refuses it (see the module
    /// documentation).
    pub(super) fn cross_send(
        &mut self,
        from: &ConversationKey,
        target: &ChatRef,
        intent: &str,
        now: Timestamp,
    ) {
        let agent = from.agent.clone();
        let target = match self.resolve_target(&agent, target) {
            Ok(id) => id,
            Err(why) => {
                warn!(event = "xsend_refused", agent = %agent, from = %from.chat, target = %target, reason = %why, "note to another chat refused");
                self.notable(&agent, Some(from.chat), "xsend_refused", why.to_string());
                return;
            }
        };
        if let Err(why) = self.may_cross_send(from, target, now) {
            warn!(event = "xsend_refused", agent = %agent, from = %from.chat, target = %target, reason = %why, "note to another chat refused");
            self.notable(&agent, Some(from.chat), "xsend_refused", why.to_string());
            return;
        }
        let day = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        self.safety.count_xsend(&agent, day, target);
        self.effects
            .push(super::Effect::SaveAgentState(agent.clone()));
        let chat = self.target_chat(&agent, target);
        let origin = self
            .graphs
            .get(from)
            .map_or_else(|| format!("chat {}", from.chat), |g| g.chat.title.clone());
        let note: String = intent.trim().chars().take(MAX_NOTE_CHARS).collect();
        let text = if note.is_empty() {
            format!("(from your chat with {origin}) Look at this conversation again.")
        } else {
            format!("(from your chat with {origin}) {note}")
        };
        info!(event = "xsend", agent = %agent, from = %from.chat, target = %target, "a note to the persona's future self in another chat");
        self.replan_intent(
            &agent,
            chat,
            Fired {
                id: crate::core::graph::new_id("xsend"),
                text,
                due: now,
                urgent: false,
            },
            now,
        );
    }

    /// Why `from` may not leave a note in `target` now, if it may not.
    fn may_cross_send(
        &self,
        from: &ConversationKey,
        target: ChatId,
        now: Timestamp,
    ) -> Result<(), Refused> {
        let agent = from.agent.as_str();
        if target == from.chat {
            return Err(Refused::ThisChat);
        }
        if self.is_owner_chat(agent, target) {
            return Err(Refused::OwnerChat(target));
        }
        let known = self.xsend.chats.contains_key(&(agent.to_owned(), target))
            || self
                .graphs
                .contains_key(&ConversationKey::new(agent, target))
            || self
                .safety
                .state(agent)
                .is_some_and(|s| s.handled.contains_key(&target));
        if !known {
            return Err(Refused::Unknown(target));
        }
        if self.safety.is_disabled(agent, target) {
            return Err(Refused::Disabled(target));
        }
        if self.is_paused(agent, target, now) {
            return Err(Refused::Paused(target));
        }
        let day = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        let count = |scope| self.safety.xsend_count(agent, day, scope);
        if count(Some(target)) >= PER_CHAT_PER_DAY {
            return Err(Refused::ChatCap(target));
        }
        if count(None) >= PER_AGENT_PER_DAY {
            return Err(Refused::AgentCap);
        }
        Ok(())
    }

    /// The chat a target names: its id, or the one chat of the persona whose title is the
    /// name (case aside), else the one whose title starts with it as a word ("Bob" for
    /// "Bob Stone").
    fn resolve_target(&self, agent: &str, target: &ChatRef) -> Result<ChatId, Refused> {
        let name = match target {
            ChatRef::Id(id) => return Ok(*id),
            ChatRef::Name(name) => name.trim().to_lowercase(),
        };
        let mut chats: Vec<&Chat> = self
            .xsend
            .chats
            .iter()
            .filter(|((a, _), _)| a == agent)
            .map(|(_, c)| c)
            .chain(
                self.graphs
                    .iter()
                    .filter(|(k, _)| k.agent == agent)
                    .map(|(_, g)| &g.chat),
            )
            .collect();
        chats.sort_by_key(|c| c.id);
        chats.dedup_by_key(|c| c.id);
        let exact: Vec<&Chat> = chats
            .iter()
            .copied()
            .filter(|c| c.title.trim().to_lowercase() == name)
            .collect();
        let found = if exact.is_empty() {
            chats
                .into_iter()
                .filter(|c| {
                    let title = c.title.trim().to_lowercase();
                    title
                        .strip_prefix(&name)
                        .is_some_and(|rest| rest.starts_with(' '))
                })
                .collect()
        } else {
            exact
        };
        match found.as_slice() {
            [one] => Ok(one.id),
            [] => Err(Refused::NoSuchName(name)),
            many => Err(Refused::SeveralNamed(
                name,
                many.iter()
                    .map(|c| format!("{} {}", c.title, c.id))
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// The target chat as the persona knows it.
    fn target_chat(&self, agent: &str, target: ChatId) -> Chat {
        self.graphs
            .get(&ConversationKey::new(agent, target))
            .map(|g| g.chat.clone())
            .or_else(|| self.xsend.chats.get(&(agent.to_owned(), target)).cloned())
            .unwrap_or_else(|| Chat {
                id: target,
                kind: if target.0 > 0 {
                    ChatKind::Direct
                } else {
                    ChatKind::Group
                },
                title: format!("chat {target}"),
            })
    }
}
