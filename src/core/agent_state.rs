//! Per-agent safety state that must survive restarts: chats the agent may no longer write to
//! (Telegram said it is forbidden) and the account breaker (tripped when Telegram limits the
//! account). Pure data plus its file format; the runtime decides when it changes and saves it
//! through `store` (`state/<agent>/agent-state.json`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::ChatId;

/// Why and since when a chat is disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disabled {
    pub since: Timestamp,
    pub reason: String,
}

/// The account breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    pub until: Timestamp,
    pub reason: String,
}

/// What is persisted for one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    #[serde(default)]
    pub disabled_chats: BTreeMap<ChatId, Disabled>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<Breaker>,
    /// Per-chat group trigger mode set by the owner; wins over the persona's heading.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_modes: BTreeMap<ChatId, crate::core::group::settings::TriggerMode>,
    /// Per-chat draft mode set by the owner; wins over the persona's `Approval`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approval_modes: BTreeMap<ChatId, crate::core::approval::ApprovalMode>,
    /// The newest inbound message per chat that admission handed to a plan or the group
    /// classifier: catch-up, the unread scan and a restart after kill -9 redeliver messages,
    /// and one at or below this mark is history, never a second plan. While a plan runs, its
    /// graph file holds the mark (read back at load); the agent state is saved with it when
    /// the graph is gone, so a crash before the plan was durable loses no message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handled: BTreeMap<ChatId, crate::core::model::MessageId>,
    /// Schedule calls made on one local day of the persona (counted when a call is handed
    /// out, so a crash mid-call still counts): at most two a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_calls: Option<(jiff::civil::Date, u32)>,
    /// Per cap (the persona's, the daemon's): what the owner was told of the day's LLM spend,
    /// and whether they lifted a reached cap.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budget: BTreeMap<CapSource, BudgetMark>,
}

/// Which cap a budget mark is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapSource {
    /// The persona's `# Daily Budget`.
    Persona,
    /// The daemon's `--daily-budget`, all personas together.
    Daemon,
}

/// The day's budget mark: the highest level the owner was told of on `day` (UTC) against the
/// cap `cap` (as it read then: a changed cap starts over), and whether the owner lifted a
/// reached cap for that day (`/resume`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetMark {
    pub day: jiff::civil::Date,
    pub told: crate::core::budget::Level,
    pub cap: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lifted: bool,
}

impl BudgetMark {
    /// Whether this mark holds planning on `day`.
    pub fn holds(&self, day: jiff::civil::Date) -> bool {
        self.day == day && self.told == crate::core::budget::Level::Reached && !self.lifted
    }
}

impl AgentState {
    pub fn is_disabled(&self, chat: ChatId) -> bool {
        self.disabled_chats.contains_key(&chat)
    }

    /// The group trigger mode in force for `chat`: the owner's override, else `default`.
    pub fn group_mode(
        &self,
        chat: ChatId,
        default: crate::core::group::settings::TriggerMode,
    ) -> crate::core::group::settings::TriggerMode {
        self.group_modes.get(&chat).copied().unwrap_or(default)
    }

    /// Whether `message` in `chat` was already handed to a plan (or the classifier).
    pub fn already_handled(&self, chat: ChatId, message: crate::core::model::MessageId) -> bool {
        self.handled.get(&chat).is_some_and(|mark| message <= *mark)
    }

    /// Raises the chat's handled mark to `message`; returns whether it moved.
    pub(crate) fn note_handled(
        &mut self,
        chat: ChatId,
        message: crate::core::model::MessageId,
    ) -> bool {
        match self.handled.get(&chat) {
            Some(mark) if *mark >= message => false,
            _ => {
                self.handled.insert(chat, message);
                true
            }
        }
    }

    /// Whether the breaker holds at `now`.
    pub(crate) fn breaker_active(&self, now: Timestamp) -> bool {
        self.breaker.as_ref().is_some_and(|b| b.until > now)
    }
}

/// File name of the agent state inside the agent's state directory.
pub(crate) const FILE_NAME: &str = "agent-state.json";
