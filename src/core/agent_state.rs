//! Per-agent state that must survive restarts: chats the agent may no longer write to
//! (Telegram said it is forbidden), the account breaker (tripped when Telegram limits the
//! account), and what the owner set (pauses, per-chat trigger and draft modes). Pure data plus
//! its file format; the runtime is its only writer: it decides when it changes and saves it
//! through `store` (`state/<agent>/agent-state.json`). Operator views read the runtime's
//! published copy, never the file behind its back.

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
    /// graph holds the mark (read back at load); when the graph is gone the mark is saved on
    /// its own (a journal record, then the agent's `handled.json`), never with the rest of
    /// this state, and marks older than [`HANDLED_KEEP`] are dropped. Read from older
    /// `agent-state.json` files (a bare message id per chat), never written there.
    #[serde(default, skip_serializing, deserialize_with = "marks::deserialize")]
    pub handled: BTreeMap<ChatId, HandledMark>,
    /// Schedule calls made on one local day of the persona (counted when a call is handed
    /// out, so a crash mid-call still counts): at most two a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_calls: Option<(jiff::civil::Date, u32)>,
    /// Per cap (the persona's, the daemon's): what the owner was told of the day's LLM spend,
    /// and whether they lifted a reached cap.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budget: BTreeMap<CapSource, BudgetMark>,
    /// The owner's pauses (`/pause`): a paused chat records its messages but does not plan.
    #[serde(default, skip_serializing_if = "Pauses::is_empty")]
    pub pauses: Pauses,
    /// Per direct chat, the newest message that would have been planned but came in while
    /// the chat was paused: the owner's resume plans it (as the unread scan does at start).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<ChatId, Held>,
    /// Notes left across chats (`xsend`) on the current UTC day, which its caps count (kept so
    /// a restart does not reset them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xsend: Option<XSendDay>,
}

/// How long a handled mark is kept after it was noted. A redelivered message older than the
/// catch-up window (`--catch-up-minutes`, at most this long) is never planned anyway, so an
/// older mark guards nothing; dropping it keeps the state from growing with every chat ever
/// seen.
pub const HANDLED_KEEP: jiff::SignedDuration = jiff::SignedDuration::from_hours(7 * 24);

/// A chat's handled mark: the newest message handed to a plan, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandledMark {
    pub message: crate::core::model::MessageId,
    /// When it was noted; the Unix epoch for a mark read from an older file (stamped with
    /// the time of its first prune, so it is kept a whole [`HANDLED_KEEP`]).
    pub at: Timestamp,
}

/// Drops the marks noted more than [`HANDLED_KEEP`] before `now`; a mark of unknown age (an
/// older file's bare id) is stamped `now` instead: kept a whole window from here, then
/// dropped like the others. Returns how many were dropped. The one rule for the scheduler's
/// marks and the store's.
pub(crate) fn prune_marks(marks: &mut BTreeMap<ChatId, HandledMark>, now: Timestamp) -> usize {
    let before = now.checked_sub(HANDLED_KEEP).unwrap_or(Timestamp::MIN);
    let was = marks.len();
    marks.retain(|_, mark| {
        if mark.at == Timestamp::UNIX_EPOCH {
            mark.at = now;
        }
        mark.at >= before
    });
    was - marks.len()
}

/// Reading handled marks in both forms: `{message, at}` and an older file's bare id.
mod marks {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer};

    use super::HandledMark;
    use crate::core::model::{ChatId, MessageId};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bare(MessageId),
        Mark(HandledMark),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<ChatId, HandledMark>, D::Error> {
        let raw = BTreeMap::<ChatId, Raw>::deserialize(d)?;
        Ok(raw
            .into_iter()
            .map(|(chat, r)| {
                let mark = match r {
                    Raw::Bare(message) => HandledMark {
                        message,
                        at: jiff::Timestamp::UNIX_EPOCH,
                    },
                    Raw::Mark(m) => m,
                };
                (chat, mark)
            })
            .collect())
    }
}

/// The `xsend` notes of one UTC day: in all, and per target chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XSendDay {
    pub date: jiff::civil::Date,
    pub total: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chats: BTreeMap<ChatId, u32>,
}

/// A message that came in while its chat was paused, planned on resume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub chat: crate::core::model::Chat,
    pub message: crate::core::model::MessageId,
}

/// One pause: since when, and until when (none: until resumed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub since: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

impl Pause {
    /// Whether the pause still holds at `now`.
    pub fn active(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|u| u > now)
    }

    /// "until resumed" or "until <instant> UTC".
    pub fn describe(&self) -> String {
        match self.until {
            Some(u) => format!("until {}", u.strftime("%Y-%m-%d %H:%M:%S UTC")),
            None => "until resumed".to_string(),
        }
    }
}

/// An agent's pauses: every chat, and single chats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pauses {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Pause>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chats: BTreeMap<ChatId, Pause>,
}

impl Pauses {
    pub fn is_empty(&self) -> bool {
        self.all.is_none() && self.chats.is_empty()
    }

    /// Whether `chat` is paused at `now` (by its own pause or by a pause of every chat).
    pub fn is_paused(&self, chat: ChatId, now: Timestamp) -> bool {
        self.all.as_ref().is_some_and(|p| p.active(now))
            || self.chats.get(&chat).is_some_and(|p| p.active(now))
    }

    /// When the pause of `chat` ends, if it has an end (`None` too when not paused, or paused
    /// until resumed).
    pub fn paused_until(&self, chat: ChatId, now: Timestamp) -> Option<Timestamp> {
        [self.all.as_ref(), self.chats.get(&chat)]
            .into_iter()
            .flatten()
            .filter(|p| p.active(now))
            .map(|p| p.until)
            .try_fold(None::<Timestamp>, |latest, until| {
                // Any open-ended pause holds until resumed.
                until.map(|u| Some(latest.map_or(u, |l| l.max(u))))
            })
            .flatten()
    }

    /// Pauses `chat` (`None`: every chat); returns whether anything changed.
    pub fn pause(&mut self, chat: Option<ChatId>, pause: Pause) -> bool {
        let slot = match chat {
            Some(c) => self.chats.insert(c, pause.clone()),
            None => self.all.replace(pause.clone()),
        };
        slot.as_ref() != Some(&pause)
    }

    /// Resumes `chat` (`None`: every chat, and every single pause with it); returns whether
    /// anything changed.
    pub fn resume(&mut self, chat: Option<ChatId>) -> bool {
        match chat {
            Some(c) => self.chats.remove(&c).is_some(),
            None => {
                let changed = !self.is_empty();
                *self = Pauses::default();
                changed
            }
        }
    }
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
    /// Whether a daily cap holds the agent's paid calls on `day` (UTC): planning, and speech.
    pub fn budget_holds(&self, day: jiff::civil::Date) -> bool {
        self.budget.values().any(|m| m.holds(day))
    }

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
        self.handled
            .get(&chat)
            .is_some_and(|mark| message <= mark.message)
    }

    /// Raises the chat's handled mark to `message`, noted at `at`; returns whether it moved.
    pub(crate) fn note_handled(
        &mut self,
        chat: ChatId,
        message: crate::core::model::MessageId,
        at: Timestamp,
    ) -> bool {
        match self.handled.get(&chat) {
            Some(mark) if mark.message >= message => false,
            _ => {
                self.handled.insert(chat, HandledMark { message, at });
                true
            }
        }
    }

    /// The handled message per chat.
    pub fn handled_messages(&self) -> BTreeMap<ChatId, crate::core::model::MessageId> {
        self.handled
            .iter()
            .map(|(chat, mark)| (*chat, mark.message))
            .collect()
    }

    /// Drops the handled marks older than the replay window (see [`prune_marks`]); returns
    /// how many.
    pub(crate) fn prune_handled(&mut self, now: Timestamp) -> usize {
        prune_marks(&mut self.handled, now)
    }

    /// A copy of everything but the handled marks (what a `state` record and
    /// `agent-state.json` hold), without copying the marks.
    pub fn without_marks(&self) -> AgentState {
        AgentState {
            disabled_chats: self.disabled_chats.clone(),
            breaker: self.breaker.clone(),
            group_modes: self.group_modes.clone(),
            approval_modes: self.approval_modes.clone(),
            handled: BTreeMap::new(),
            schedule_calls: self.schedule_calls,
            budget: self.budget.clone(),
            pauses: self.pauses.clone(),
            held: self.held.clone(),
            xsend: self.xsend.clone(),
        }
    }

    /// Whether the breaker holds at `now`.
    pub(crate) fn breaker_active(&self, now: Timestamp) -> bool {
        self.breaker.as_ref().is_some_and(|b| b.until > now)
    }
}

/// File name of the agent state inside the agent's state directory.
pub(crate) const FILE_NAME: &str = "agent-state.json";

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use jiff::{SignedDuration, Timestamp};

    use crate::core::agent_state::{Pause, Pauses};
    use crate::core::model::ChatId;

    #[test]
    fn a_pause_with_an_end_expires() {
        let t = Timestamp::UNIX_EPOCH;
        let later = t + SignedDuration::from_secs(60);
        let p = Pauses {
            all: None,
            chats: BTreeMap::from([(
                ChatId(5),
                Pause {
                    since: t,
                    until: Some(later),
                },
            )]),
        };
        assert!(p.is_paused(ChatId(5), t));
        assert!(!p.is_paused(ChatId(5), later));
        assert!(!p.is_paused(ChatId(6), t));
    }

    /// Resuming every chat clears single pauses too; resuming one chat leaves the others.
    #[test]
    fn resuming_all_clears_every_pause_and_resuming_one_only_that_one() {
        let t = Timestamp::UNIX_EPOCH;
        let pause = Pause {
            since: t,
            until: None,
        };
        let mut p = Pauses::default();
        assert!(p.pause(Some(ChatId(5)), pause.clone()));
        assert!(p.pause(Some(ChatId(6)), pause.clone()));
        assert!(
            !p.pause(Some(ChatId(6)), pause.clone()),
            "the same pause again changed nothing"
        );
        assert!(p.resume(Some(ChatId(5))));
        assert!(!p.is_paused(ChatId(5), t));
        assert!(p.is_paused(ChatId(6), t));
        assert!(p.pause(None, pause));
        assert!(p.resume(None));
        assert!(p.is_empty());
    }
}
